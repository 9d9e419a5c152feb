"""Fencing the trainer's asynchronous copies of host batches (ff_loader_fence).

Without a GPU the C side runs on the emulated device (tests/unit/test_fence.c
shows a late copy reading its own batch); here: the documented training loop
``images = images.cuda(non_blocking=True)``, with a stand-in for ``.cuda``
that queues the copy on the emulator behind a gate that opens late (a busy
trainer's stream), reads the batch it was queued from, and without fences the
same late copy reads a later batch; every next() and close() of a loader whose
batches are pinned fences, through the extension, and the batches stay the
same; which stream the Python side fences, from torch's state, with a
stand-in for torch (no GPU needed), without importing torch or initialising
its CUDA state.
"""
import sys
import threading
import types

import pytest

import fusionflow
from fusionflow import _fusionflow as _c
from fusionflow import _batches

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
        assert pinned._c.pinned_cuda_device == plain._c.pinned_cuda_device == -1  # no CUDA device pinned them
        for _ in range(2):  # two epochs: the ring's memory is refilled after the fences
            got, want = batches(pinned), batches(plain)
            assert len(got) == len(want) == len(pinned)
            for (a, la), (b, lb) in zip(got, want):
                assert (a == b).all() and (la == lb).all()
        # one fence per next(), the one that ends each epoch included
        assert pinned.stats()["fences"] == 2 * (len(pinned) + 1)
        assert plain.stats()["fences"] == 0
        assert pinned.stats()["fence_wait_ns"] >= 0


GATE_S = 0.25  # how late each stand-in copy runs: far longer than a batch of these images takes


class LateCopies:
    """A trainer's GPU copies where no GPU is: each copy of a host batch is
    queued on the loader's emulator behind a gate that opens GATE_S later, and
    the emulator's default stream (what the loader fences for emu) waits for
    it, as torch's current stream would for a copy queued on it."""

    def __init__(self, core):
        self.core, self.copies, self.timers = core, [], []

    def queue(self, address, nbytes):
        copy = self.core._late_copy(address, nbytes)
        timer = threading.Timer(GATE_S, _c._late_copy_open, (copy,))
        timer.start()
        self.copies.append(copy)
        self.timers.append(timer)
        return copy

    def results(self):
        for timer in self.timers:
            timer.join()
        return [_c._late_copy_read(copy) for copy in self.copies]


def test_the_non_blocking_copy_loop_reads_the_batch_each_copy_was_queued_from(folder, monkeypatch):
    torch = pytest.importorskip("torch")
    kw = dict(pipeline=PIPELINE, batch_size=4, seed=5, prefetch=1, num_threads=2, output="torch")
    with fusionflow.Loader(folder, device="cpu", pin_memory=False, **kw) as plain:
        want = [images.numpy().tobytes() for images, _ in plain]
    with fusionflow.Loader(folder, device="emu:0", pin_memory=True, **kw) as loader:
        late = LateCopies(loader._c)

        def cuda(tensor, non_blocking=False):
            assert non_blocking and tensor.is_contiguous()
            return late.queue(tensor.data_ptr(), tensor.numel() * tensor.element_size())

        monkeypatch.setattr(torch.Tensor, "cuda", cuda)
        for images, labels in loader:  # the loop of README.md and docs/gpu-copies.md; 5 batches, 2 buffers
            images = images.cuda(non_blocking=True)
        got = late.results()
        stats, batches = loader.stats(), len(loader)
    assert len(got) == len(want) == batches == 5
    assert [i for i, (a, b) in enumerate(zip(got, want)) if a != b] == []  # no copy read a refilled buffer
    assert stats["fences"] >= len(got)
    assert stats["fence_wait_ns"] > 0  # the workers did wait for copies: the refills were due before them


def test_without_fences_a_late_copy_reads_a_later_batch(folder):
    """What the fences prevent, with the same stand-in: a consumer that never
    fences (next() without a stream) releases batch 0; batch 2 goes into its
    memory before the late copy of batch 0 runs."""
    np = pytest.importorskip("numpy")
    with fusionflow.Loader(folder, pipeline=PIPELINE, batch_size=4, seed=5, prefetch=1, num_threads=2,
                           device="emu:0", pin_memory=True, output="numpy") as loader:
        core = loader._c
        first = np.asarray(core.next()[0])
        address, want = first.__array_interface__["data"][0], first.tobytes()
        copy = core._late_copy(address, first.nbytes)  # its gate opens below, by hand
        del first  # batch 0 released
        core.next()  # batch 1, dropped at once
        third = np.asarray(core.next()[0])
        assert third.__array_interface__["data"][0] == address  # batch 2 in batch 0's memory
        _c._late_copy_open(copy)
        got = _c._late_copy_read(copy)
        assert got == third.tobytes() != want
        assert loader.stats()["fences"] == 0


def test_a_late_copy_needs_an_emulator(folder):
    with fusionflow.Loader(folder, pipeline=PIPELINE, batch_size=4, device="cpu", output="numpy") as loader:
        with pytest.raises(ValueError, match="emulated device"):
            loader._c._late_copy(0, 16)


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
    assert _batches.copy_stream(fake_torch(cuda), 0, {}) is None
    assert cuda.made == []


def test_the_current_stream_when_it_is_on_the_pinning_device():
    cuda = FakeCuda(initialized=True, device=1)
    assert _batches.copy_stream(fake_torch(cuda), 1, {}) == 0x1001
    assert cuda.made == []


def test_a_side_stream_of_the_pinning_device_joined_to_the_current_one():
    cuda = FakeCuda(initialized=True, device=1)
    sides = {}
    assert _batches.copy_stream(fake_torch(cuda), 0, sides) == 0x2000
    assert _batches.copy_stream(fake_torch(cuda), 0, sides) == 0x2000  # made once, joined each time
    assert len(cuda.made) == 1 and cuda.made[0].device.index == 0
    assert cuda.made[0].waited_for == [cuda.current, cuda.current]


class FakeCore:
    def __init__(self, pinned_device, pinned_cuda_device):
        self.pinned_device = pinned_device
        self.pinned_cuda_device = pinned_cuda_device


def fence_stream(pinned_device, pinned_cuda_device=-1):
    return _batches.fence_stream(FakeCore(pinned_device, pinned_cuda_device), {})  # no loader opened


def test_which_stream_is_fenced(monkeypatch):
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert fence_stream("cpu") is None  # ordinary memory: nothing to fence
    assert fence_stream("emu:0") == 0  # the emulator's default stream
    assert fence_stream("cuda:0", 0) == 0  # torch not imported: the default stream, fencing on from the start
    assert "torch" not in sys.modules  # and torch was not imported for it
    cuda = FakeCuda(initialized=False)
    monkeypatch.setitem(sys.modules, "torch", fake_torch(cuda))
    assert fence_stream("cuda:0", 0) == 0  # CUDA not initialised by torch: still the default stream
    cuda.initialized = True
    assert fence_stream("cuda:0", 0) == 0x1000  # torch's current stream
    assert fence_stream("emu:0") == 0  # torch plays no part for the emulator
