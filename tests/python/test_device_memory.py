"""The device memory budget counts only memory the device has free: what torch
caches unused stays torch's, unless the user opts in (release_torch_cache=True)
to have torch.cuda.empty_cache() called when the budget refused work.

No GPU needed: the budget says no on a small emulated device, and a stand-in
for torch records what the loader asks of it.
"""
import sys
import types

import pytest

import fusionflow
from fusionflow import _batches

from conftest import make_folder

PIPELINE = "decode | random_resized_crop(size=32) | normalize(mean=imagenet, std=imagenet)"


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root, _, _ = make_folder(str(tmp_path_factory.mktemp("budget")), classes=2, per_class=8)
    return root


class FakeCuda:
    def __init__(self):
        self.emptied = 0

    def is_initialized(self):
        return True

    def empty_cache(self):
        self.emptied += 1


def test_empty_cache_only_after_a_refusal_and_at_most_every_10_s():
    cuda = FakeCuda()
    torch = types.SimpleNamespace(cuda=cuda)
    state = {"refusals": 0, "at": None}
    assert not _batches.empty_cache_due(torch, 0, state, 100.0)  # no refusal
    assert _batches.empty_cache_due(torch, 2, state, 100.0)
    assert not _batches.empty_cache_due(torch, 2, state, 101.0)  # none since
    assert not _batches.empty_cache_due(torch, 3, state, 105.0)  # too soon after the last
    assert _batches.empty_cache_due(torch, 4, state, 111.0)
    assert not _batches.empty_cache_due(None, 9, state, 200.0)  # torch not imported
    cuda.is_initialized = lambda: False
    assert not _batches.empty_cache_due(torch, 10, state, 300.0)  # torch has not initialised CUDA


def run_epoch(folder, monkeypatch, release):
    cuda = FakeCuda()
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    monkeypatch.setenv("FF_FORCE_DEVICE_SHARE", "1")  # every sample wanted on the device
    with fusionflow.Loader(folder, pipeline=PIPELINE, batch_size=4, device="emu:0?mem=64K", output="dlpack",
                           release_torch_cache=release) as loader:
        for _ in loader:
            pass
        stats = loader.stats()
    return cuda.emptied, stats


def test_a_budget_too_small_is_refused_and_torch_is_asked_only_when_opted_in(folder, monkeypatch):
    emptied, stats = run_epoch(folder, monkeypatch, release=False)
    assert stats["device_budget_refusals"] > 0  # 64 KiB hold no microbatch
    assert stats["device_samples"] == 0
    assert emptied == 0  # the default leaves torch's cache alone
    emptied, stats = run_epoch(folder, monkeypatch, release=True)
    assert stats["device_budget_refusals"] > 0
    assert emptied == 1  # once: the next refusals come within 10 s


def test_the_loader_does_not_count_torchs_cache_as_free(folder, monkeypatch):
    """The Loader used to report free + reserved - allocated to the budget
    (set_device_free_bytes) before every batch of a CUDA device; now the budget
    is the device's free memory alone and torch's memory figures go unread."""
    calls = []

    class Cuda(FakeCuda):
        def current_device(self):
            return 0

        def mem_get_info(self, *a):
            calls.append("mem_get_info")
            return (1 << 20, 1 << 30)

        def memory_reserved(self, *a):
            calls.append("memory_reserved")
            return 1 << 29

        def memory_allocated(self, *a):
            calls.append("memory_allocated")
            return 0

    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=Cuda()))
    with fusionflow.Loader(folder, pipeline=PIPELINE, batch_size=4, device="auto", output="dlpack",
                           release_torch_cache=True) as loader:
        batches = len(loader)
        assert sum(1 for _ in loader) == batches
    assert calls == []
