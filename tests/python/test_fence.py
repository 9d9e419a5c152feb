"""Fencing the trainer's asynchronous copies of host batches (ff_loader_fence).

Without a GPU the C side runs on the emulated device (tests/unit/test_fence.c
shows a late copy reading its own batch); here: every next() and close() of a
loader whose batches are pinned fences, through the extension, and the batches
stay the same; which stream the Python side fences, from torch's state, with
a stand-in for torch (no GPU needed), without importing torch or initialising
its CUDA state.
"""
import sys
import types

import pytest

import fusionflow
from fusionflow import _loader

from conftest import make_folder

PIPELINE = "decode | random_resized_crop(size=20) | random_horizontal_flip"


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root, _, _ = make_folder(str(tmp_path_factory.mktemp("fence")), classes=2, per_class=9)
    return root


def batches(loader):
    return [(images.copy(), labels.copy()) for images, labels in loader]


def test_pinned_batches_are_fenced_at_every_next_and_the_same(folder):
    kw = dict(pipeline=PIPELINE, batch_size=4, seed=5, output="numpy", prefetch=1, num_threads=2)
    with fusionflow.Loader(folder, device="emu:0", pin_memory=True, **kw) as pinned, \
            fusionflow.Loader(folder, device="cpu", pin_memory=False, **kw) as plain:
        assert pinned._c.pinned_device == "emu:0"
        assert plain._c.pinned_device == "cpu"
        for _ in range(2):  # two epochs: the ring's memory is refilled after the fences
            got, want = batches(pinned), batches(plain)
            assert len(got) == len(want) == len(pinned)
            for (a, la), (b, lb) in zip(got, want):
                assert (a == b).all() and (la == lb).all()
        # one fence per next(), the one that ends each epoch included
        assert pinned.stats()["fences"] == 2 * (len(pinned) + 1)
        assert plain.stats()["fences"] == 0
        assert pinned.stats()["fence_wait_ns"] >= 0


def test_close_fences_and_batches_outlive_it(folder):
    loader = fusionflow.Loader(folder, pipeline=PIPELINE, batch_size=4, device="emu:0", pin_memory=True,
                               output="numpy")
    images, _ = next(iter(loader))
    kept = images.copy()
    loader.close()
    assert (images == kept).all()
    del images


class FakeStream:
    def __init__(self, index, handle):
        self.device = types.SimpleNamespace(index=index)
        self.cuda_stream = handle
        self.waited_for = []

    def wait_stream(self, other):
        self.waited_for.append(other)


class FakeCuda:
    """torch.cuda as far as the fence looks at it."""

    def __init__(self, initialized, device=0):
        self.initialized = initialized
        self.current = FakeStream(device, 0x1000 + device)
        self.made = []

    def is_initialized(self):
        return self.initialized

    def current_stream(self):
        return self.current

    def Stream(self, device):
        s = FakeStream(device, 0x2000 + device)
        self.made.append(s)
        return s


def fake_torch(cuda):
    return types.SimpleNamespace(cuda=cuda, __name__="torch")


def test_no_stream_before_torch_has_initialised_cuda():
    cuda = FakeCuda(initialized=False)
    assert _loader._copy_stream(fake_torch(cuda), 0, {}) is None
    assert cuda.made == []


def test_the_current_stream_when_it_is_on_the_pinning_device():
    cuda = FakeCuda(initialized=True, device=1)
    assert _loader._copy_stream(fake_torch(cuda), 1, {}) == 0x1001
    assert cuda.made == []


def test_a_side_stream_of_the_pinning_device_joined_to_the_current_one():
    cuda = FakeCuda(initialized=True, device=1)
    sides = {}
    assert _loader._copy_stream(fake_torch(cuda), 0, sides) == 0x2000
    assert _loader._copy_stream(fake_torch(cuda), 0, sides) == 0x2000  # made once, joined each time
    assert len(cuda.made) == 1 and cuda.made[0].device.index == 0
    assert cuda.made[0].waited_for == [cuda.current, cuda.current]


class FakeCore:
    def __init__(self, pinned_device):
        self.pinned_device = pinned_device


def fence_stream(pinned_device):
    loader = object.__new__(fusionflow.Loader)  # the method alone: no loader opened
    loader._side_streams = {}
    return loader._fence_stream(FakeCore(pinned_device))


def test_which_stream_is_fenced(monkeypatch):
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert fence_stream("cpu") is None  # ordinary memory: nothing to fence
    assert fence_stream("emu:0") == 0  # the emulator's default stream
    assert fence_stream("cuda:0") == 0  # torch not imported: the default stream, fencing on from the start
    assert "torch" not in sys.modules  # and torch was not imported for it
    cuda = FakeCuda(initialized=False)
    monkeypatch.setitem(sys.modules, "torch", fake_torch(cuda))
    assert fence_stream("cuda:0") == 0  # CUDA not initialised by torch: still the default stream
    cuda.initialized = True
    assert fence_stream("cuda:0") == 0x1000  # torch's current stream
    assert fence_stream("emu:0") == 0  # torch plays no part for the emulator
