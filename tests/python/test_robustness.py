"""Abuse of the Python package: two threads on one Loader, pipeline text
with an embedded NUL, limits past 2**64, a malformed dl_device, and
on_error="replace" keeping every batch full. Each must raise a clear Python
exception or work, never crash, hang or silently change meaning."""
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import fusionflow
from conftest import child_env, make_image

REPRO = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "hostile",
                     "py-two-threads-one-loader.py")


def test_reproducer_two_threads_on_one_loader_does_not_crash(folder):
    """The reproducer crashed with SIGSEGV; now each thread either gets
    batches or RuntimeError (which, uncaught in a thread, is printed)."""
    r = subprocess.run([sys.executable, REPRO, folder[0]], env=child_env(), capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "no crash" in r.stdout
    assert "Segmentation fault" not in r.stderr


def test_a_second_consumer_thread_raises_runtime_error(folder):
    errors, counts = [], []
    with fusionflow.Loader(folder[0], "decode | resize(size=(16, 16))", batch_size=1, num_threads=1,
                           prefetch=1, output="numpy") as loader:
        barrier = threading.Barrier(4)

        def consume():
            barrier.wait()
            n = 0
            try:
                for _ in range(3):
                    for images, labels in loader:
                        assert images.shape == (1, 16, 16, 3)
                        n += 1
            except RuntimeError as e:
                errors.append(str(e))
            counts.append(n)

        threads = [threading.Thread(target=consume) for _ in range(4)]
        [t.start() for t in threads]
        [t.join() for t in threads]
        assert all(e.startswith("fusionflow: another") for e in errors), errors
        assert sum(counts) > 0
        # the loader is still usable from one thread afterwards
        loader.set_epoch(7)
        assert sum(1 for _ in loader) == 21


def test_pipeline_text_with_an_embedded_nul_is_refused(folder):
    with pytest.raises(ValueError, match="NUL"):
        fusionflow.Loader(folder[0], "decode | resize(size=(8, 8))\0 | nothing", batch_size=2)
    with pytest.raises(ValueError, match="NUL"):
        fusionflow.augment_image(folder[1][0], "decode\0| junk")


@pytest.mark.parametrize("value", [2 ** 64, 2 ** 64 + 5, 2 ** 70, -1])
def test_max_image_pixels_past_2_64_is_refused_not_wrapped(folder, value):
    with pytest.raises(ValueError, match="max_image_pixels"):
        fusionflow.Loader(folder[0], "decode | resize(size=(8, 8))", batch_size=2, max_image_pixels=value)
    from fusionflow import _fusionflow as c  # the extension directly: no wrap either
    with pytest.raises(ValueError, match="2\\*\\*64"):
        c.open_loader(folder[0] if folder[0].startswith("imagefolder:") else "imagefolder:" + folder[0],
                      "decode | resize(size=(8, 8))", max_image_pixels=max(value, 2 ** 64))


@pytest.mark.parametrize("bad", [7, "cpu", (1,), (1, 0, 0), [1, 0], None.__class__])
def test_malformed_dl_device_is_a_type_error_not_system_error(folder, bad):
    with fusionflow.Loader(folder[0], "decode | resize(size=(8, 8))", batch_size=2, output="dlpack") as loader:
        images, _ = next(iter(loader))
        with pytest.raises((TypeError, BufferError)) as info:
            images.__dlpack__(dl_device=bad)
        assert not isinstance(info.value, SystemError)
        assert images.__dlpack__(dl_device=(1, 0)) is not None


def test_on_error_replace_keeps_every_batch_full(tmp_path):
    root = tmp_path / "data"
    (root / "a").mkdir(parents=True)
    import random

    rng = random.Random(3)
    for i in range(10):
        make_image(str(root / "a" / f"{i}.jpg"), 30, 30, rng)
    (root / "a" / "4.jpg").write_bytes(b"\xff\xd8\xff broken")
    (root / "a" / "9.jpg").write_bytes(b"")
    with fusionflow.Loader(str(root), "decode | resize(size=(8, 8))", batch_size=5, shuffle=False,
                           on_error="replace", output="numpy") as loader:
        sizes, indices = [], []
        for images, labels in loader:
            sizes.append(images.shape[0])
            indices += loader.last_batch.sample_indices
        s = loader.stats()
    assert sizes == [5, 5]
    assert indices == [0, 1, 2, 3, 5, 5, 6, 7, 8, 0]  # each failed sample: the next good one, wrapping
    assert s["replaced"] == 2 and s["skipped"] == 0
    assert any("4.jpg" in m for m in s["skipped_samples"]) and any("9.jpg" in m for m in s["skipped_samples"])
    with pytest.raises(ValueError, match="replace"):
        fusionflow.Loader(str(root), "decode | resize(size=(8, 8))", batch_size=5, on_error="ignore")


def test_empty_class_folder_raises_unless_allowed(tmp_path):
    root = tmp_path / "data"
    (root / "a").mkdir(parents=True)
    (root / "b").mkdir()
    make_image(str(root / "a" / "0.jpg"), 20, 20, __import__("random").Random(1))
    with pytest.raises(fusionflow.EmptySourceError, match="'b'"):
        fusionflow.Loader(str(root), "decode | resize(size=(8, 8))", batch_size=1)
    with fusionflow.Loader(str(root), "decode | resize(size=(8, 8))", batch_size=1, allow_empty=True,
                           output="numpy") as loader:
        assert [int(labels[0]) for _, labels in loader] == [0]
