"""Zero copy and lifetime: DLPack export, batches outliving the loader, the
prefetch + 1 limit, no leak over many epochs."""
import gc
import os

import numpy as np
import pytest

import fusionflow
from conftest import have_torch

PIPE = "decode | random_resized_crop(size=16) | random_horizontal_flip"

needs_torch = pytest.mark.skipif(not have_torch(), reason="torch is not installed")


def held(loader):
    return loader.stats()["held"]


def test_dlpack_views_describe_the_batch(folder):
    with fusionflow.Loader(folder[0], PIPE, batch_size=4, output="dlpack") as loader:
        images, labels = next(iter(loader))
        assert isinstance(images, fusionflow.Tensor)
        assert images.shape == (4, 16, 16, 3) and images.dtype == "uint8" and images.strides == (768, 48, 3, 1)
        assert labels.shape == (4,) and labels.dtype == "int64" and labels.nbytes == 32
        assert images.__dlpack_device__() == (1, 0)
        capsule = images.__dlpack__()
        assert type(capsule).__name__ == "PyCapsule" and "dltensor" in repr(capsule)
        with pytest.raises(BufferError):
            images.__dlpack__(stream=1)
        with pytest.raises(BufferError):
            images.__dlpack__(dl_device=(2, 0))
        del capsule


def test_numpy_arrays_share_the_batch_memory(folder):
    with fusionflow.Loader(folder[0], PIPE, batch_size=4, output="dlpack") as loader:
        images, labels = next(iter(loader))
        a = np.from_dlpack(images)
        b = np.asarray(images)  # __array_interface__
        assert a.ctypes.data == b.ctypes.data == images.data_ptr
        np.testing.assert_array_equal(a, b)
        assert list(np.from_dlpack(labels)) == list(np.asarray(labels))


def test_batch_goes_back_when_images_and_labels_are_both_dropped(folder):
    with fusionflow.Loader(folder[0], PIPE, batch_size=4, output="numpy") as loader:
        it = iter(loader)
        images, labels = next(it)
        assert held(loader) == 1
        del images
        gc.collect()
        assert held(loader) == 1  # labels still hold it
        view = labels[1:]
        del labels
        assert held(loader) == 1  # a view of the labels still holds it
        del view
        assert held(loader) == 0


def test_each_capsule_keeps_the_batch_until_its_consumer_lets_go(folder):
    with fusionflow.Loader(folder[0], PIPE, batch_size=4, output="dlpack") as loader:
        images, labels = next(iter(loader))
        unused = images.__dlpack__()  # never consumed: its destructor calls the deleter
        consumed = np.from_dlpack(images)
        del images, labels
        gc.collect()
        assert held(loader) == 1
        del unused
        assert held(loader) == 1
        del consumed
        assert held(loader) == 0


@needs_torch
def test_torch_tensors_share_the_batch_memory_and_release_it(folder):
    import torch

    with fusionflow.Loader(folder[0], PIPE, batch_size=4, output="dlpack") as loader:
        images, labels = next(iter(loader))
        t = torch.from_dlpack(images)
        assert t.data_ptr() == images.data_ptr and t.dtype == torch.uint8 and t.shape == (4, 16, 16, 3)
        lt = torch.from_dlpack(labels)
        assert lt.dtype == torch.int64
        del images, labels
        assert held(loader) == 1
        t2 = t[:, 2:]
        del t, lt
        gc.collect()
        assert held(loader) == 1
        del t2
        gc.collect()
        assert held(loader) == 0


@pytest.mark.parametrize("output", ["numpy", pytest.param("torch", marks=needs_torch)])
@pytest.mark.parametrize("how", ["close", "gc"])
def test_tensors_stay_valid_after_the_loader_is_gone(folder, output, how):
    loader = fusionflow.Loader(folder[0], PIPE, batch_size=4, output=output)
    images, labels = next(iter(loader))
    # (torch tensors through .numpy(): np.array(tensor) warns under NumPy 2, torch's
    # __array__ takes no copy argument)
    copy = (lambda t: t.numpy().copy()) if output == "torch" else np.array
    keep_images, keep_labels = copy(images), copy(labels)
    if how == "close":
        loader.close()
    else:
        del loader
        gc.collect()
    # churn the allocator so that freed memory would be overwritten
    with fusionflow.Loader(folder[0], PIPE, batch_size=4, seed=5, output=output) as other:
        for _ in range(3):
            for batch in other:
                del batch
    junk = [bytearray(b"\xab" * 4096) for _ in range(256)]
    np.testing.assert_array_equal(np.asarray(images), keep_images)
    np.testing.assert_array_equal(np.asarray(labels), keep_labels)
    del junk, images, labels
    gc.collect()


def test_holding_more_than_prefetch_plus_one_batches_is_a_clear_error(folder):
    with fusionflow.Loader(folder[0], PIPE, batch_size=2, prefetch=1, output="numpy") as loader:
        it = iter(loader)
        first, second = next(it), next(it)
        with pytest.raises(ValueError, match="drop") as info:
            next(it)
        assert isinstance(info.value, fusionflow.InvalidArgumentError)
        assert "prefetch" in str(info.value) and "copies" in str(info.value)
        del first
        third = next(it)
        assert third[0].shape == (2, 16, 16, 3)
        del second, third


def test_copies_can_be_kept_without_limit(folder):
    with fusionflow.Loader(folder[0], PIPE, batch_size=2, prefetch=1, output="numpy") as loader:
        kept = [(np.array(images), np.array(labels)) for images, labels in loader]
    assert len(kept) == 11


def rss_kb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


@pytest.mark.skipif(bool(os.environ.get("FF_TEST_SANITIZER")), reason="ASan's quarantine grows the RSS by design")
@pytest.mark.parametrize("output", ["numpy", pytest.param("torch", marks=needs_torch)])
def test_memory_stays_bounded_over_many_epochs_and_loaders(folder, output):
    def run(epochs):
        with fusionflow.Loader(folder[0], PIPE, batch_size=4, prefetch=2, output=output) as loader:
            for _ in range(epochs):
                for images, labels in loader:
                    images.sum()
        for _ in range(20):  # open/close cycles
            fusionflow.Loader(folder[0], PIPE, batch_size=4).close()

    run(5)
    gc.collect()
    before = rss_kb()
    run(1200)  # 7,200 batches: a leak of 100 bytes per batch would show
    gc.collect()
    after = rss_kb()
    assert after - before < 1024, f"RSS grew by {after - before} kB"
