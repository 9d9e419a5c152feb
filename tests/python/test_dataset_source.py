"""Python datasets as sources: a list of (bytes, label), a torch Dataset and a
Hugging Face datasets.Dataset (image column cast to Image(decode=False)),
built from the images of a folder, give the same batches as the folder
source for the same seed, whatever the thread count; the worker threads ask
for a batch's items in one call; an item that cannot be had fails its sample
naming its index and the reason, under on_error; closing mid-epoch over a
slow dataset returns promptly."""
import os
import subprocess
import sys
import threading
import time

import pytest

from conftest import demo_folder, np

import fusionflow

PIPE = "decode | random_resized_crop(size=32) | random_horizontal_flip"


def batches(source, epochs=2, **kw):
    """Every batch of `epochs` epochs, as (images, labels) copies."""
    out = []
    kw.setdefault("batch_size", 4)
    kw.setdefault("seed", 3)
    with fusionflow.Loader(source, PIPE, output="numpy", **kw) as loader:
        for _ in range(epochs):
            out += [(np.array(images), np.array(labels)) for images, labels in loader]
    return out


def assert_same(got, want):
    assert len(got) == len(want)
    for k, ((gi, gl), (wi, wl)) in enumerate(zip(got, want)):
        np.testing.assert_array_equal(gl, wl, err_msg=f"batch {k}")
        np.testing.assert_array_equal(gi, wi, err_msg=f"batch {k}")


def items_of(paths, labels):
    return [(open(p, "rb").read(), lbl) for p, lbl in zip(paths, labels)]


def test_list_of_bytes_equals_the_folder_source_for_any_thread_count(folder):
    root, paths, labels = folder
    want = batches(root, num_threads=2)
    for threads in (1, 3):
        assert_same(batches(items_of(paths, labels), num_threads=threads), want)


def test_samples_the_device_prepares_are_the_same(folder, monkeypatch):
    root, paths, labels = folder
    want = batches(root, epochs=1, device="cpu")
    monkeypatch.setenv("FF_FORCE_DEVICE_SHARE", "0.5")  # half of every batch to the emulated device
    assert_same(batches(items_of(paths, labels), epochs=1, device="emu:0"), want)
    assert_same(batches(items_of(paths, labels), epochs=1, device="emu:0", device_decode="on"), want)
    with fusionflow.Loader(items_of(paths, labels), PIPE, batch_size=4, device="emu:0", output="numpy") as loader:
        for _ in loader:
            pass
        assert loader.stats()["device_samples"] > 0


class CountingDataset:
    """A list of items that records each batch access (torch's __getitems__ protocol)."""

    def __init__(self, items):
        self.items = items
        self.calls = []
        self.lock = threading.Lock()

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]

    def __getitems__(self, indices):
        with self.lock:
            self.calls.append(len(indices))
        return [self.items[i] for i in indices]


def test_a_batch_is_asked_for_in_one_call(folder):
    root, paths, labels = folder
    ds = CountingDataset(items_of(paths, labels))
    got = batches(ds, epochs=1, batch_size=5, num_threads=2)
    assert len(got) == 5  # 21 samples: 4 batches of 5 through __getitems__, the last of 1 through __getitem__
    assert set(ds.calls) == {5}
    assert 4 <= len(ds.calls) <= 4 + 3  # and the next epoch's first batches, prepared ahead (prefetch 2 + 1)


def test_torch_dataset_of_bytes_and_tensor_labels(folder):
    torch = pytest.importorskip("torch")
    root, paths, labels = folder

    class Files(torch.utils.data.Dataset):
        def __len__(self):
            return len(paths)

        def __getitem__(self, i):
            with open(paths[i], "rb") as f:
                return f.read(), torch.tensor(labels[i])

    assert_same(batches(Files(), epochs=1), batches(root, epochs=1))


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """A few images of the demo data set (scripts/demo-data.py), as an ImageFolder."""
    out = demo_folder(str(tmp_path_factory.mktemp("demo")))
    classes = sorted(d for d in os.listdir(out) if os.path.isdir(os.path.join(out, d)))
    paths, labels = [], []
    for c, name in enumerate(classes):
        for f in sorted(os.listdir(os.path.join(out, name))):
            paths.append(os.path.join(out, name, f))
            labels.append(c)
    return out, paths, labels


def test_hugging_face_dataset_equals_the_folder_source(demo):
    datasets = pytest.importorskip("datasets")
    root, paths, labels = demo
    with_bytes = datasets.Dataset.from_dict(
        {"image": [{"bytes": open(p, "rb").read(), "path": None} for p in paths], "label": labels})
    with_bytes = with_bytes.cast_column("image", datasets.Image(decode=False))
    with_paths = datasets.Dataset.from_dict({"image": paths, "label": labels})
    with_paths = with_paths.cast_column("image", datasets.Image(decode=False))
    want = batches(root, batch_size=5, num_threads=2)
    assert_same(batches(with_bytes, batch_size=5, num_threads=2), want)
    assert_same(batches(with_paths, batch_size=5, num_threads=1), want)


def test_decoded_hugging_face_images_are_refused_with_the_fix(folder):
    datasets = pytest.importorskip("datasets")
    root, paths, labels = folder
    decoded = datasets.Dataset.from_dict({"image": paths[:4], "label": labels[:4]}).cast_column(
        "image", datasets.Image())
    with pytest.raises(fusionflow.DecodeError, match=r"dataset\[[0-3]\]: TypeError: .*Image\(decode=False\)"):
        batches(decoded, epochs=1, shuffle=False)


class Broken:
    """Items 5, 7 and 8 cannot be had: an exception, a str, a wrong label."""

    def __init__(self, items):
        self.items = items

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        if i == 5:
            raise RuntimeError("the shard is gone")
        if i == 7:
            return "not bytes", 0
        if i == 8:
            return self.items[i][0], -3
        return self.items[i]


def test_item_errors_name_the_index_under_each_on_error(folder):
    root, paths, labels = folder
    ds = Broken(items_of(paths, labels))
    with pytest.raises(fusionflow.DecodeError, match=r"dataset\[5\]: RuntimeError: the shard is gone"):
        batches(ds, epochs=1, shuffle=False, batch_size=6)
    with fusionflow.Loader(ds, PIPE, batch_size=6, shuffle=False, on_error="skip", output="numpy") as loader:
        n = sum(len(labels) for _, labels in loader)
        skipped = loader.stats()["skipped_samples"]
    assert n == len(paths) - 3
    assert any("dataset[5]: RuntimeError: the shard is gone" in m for m in skipped)
    assert any("dataset[7]: TypeError: expected the encoded image as bytes, got str" in m for m in skipped)
    assert any("dataset[8]: ValueError: the label is -3" in m for m in skipped)
    with fusionflow.Loader(ds, PIPE, batch_size=6, shuffle=False, on_error="replace", output="numpy") as loader:
        sizes = [len(labels) for _, labels in loader]
    assert sizes == [6, 6, 6, 3]


def test_repr_names_the_dataset_type_not_its_items(folder):
    root, paths, labels = folder
    with fusionflow.Loader(items_of(paths, labels), PIPE, batch_size=4) as loader:
        assert "source=<list dataset>" in repr(loader)
        assert loader.classes is None and loader.class_to_idx is None


def test_sources_that_are_not_datasets_are_refused():
    with pytest.raises(TypeError, match="indexable dataset"):
        fusionflow.Loader(42, PIPE, batch_size=2)
    with pytest.raises(fusionflow.EmptySourceError, match="no sample"):
        fusionflow.Loader([], PIPE, batch_size=2)


class Exits:
    """Raises a BaseException that is not an Exception for index `at`, from __getitem__ or from
    torch's batch access __getitems__."""

    def __init__(self, items, at, exc, batch_access=False):
        self.items, self.at, self.exc = items, at, exc
        if batch_access:
            self.__getitems__ = lambda indices: [self[i] for i in indices]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        if i == self.at:
            raise self.exc
        return self.items[i]


@pytest.mark.parametrize("on_error", ["raise", "skip", "replace"])
@pytest.mark.parametrize("exc", [KeyboardInterrupt(), SystemExit(3)], ids=["KeyboardInterrupt", "SystemExit"])
@pytest.mark.parametrize("batch_access", [False, True], ids=["getitem", "getitems"])
def test_keyboard_interrupt_and_system_exit_from_the_dataset_propagate(folder, on_error, exc, batch_access):
    """Not a failed sample: under on_error="skip" the loop once finished quietly without the
    samples; the consumer now raises the dataset's own exception object."""
    root, paths, labels = folder
    ds = Exits(items_of(paths, labels), 9, exc, batch_access)
    with fusionflow.Loader(ds, PIPE, batch_size=4, shuffle=False, on_error=on_error, num_threads=2,
                           output="numpy") as loader:
        with pytest.raises(type(exc)) as got:
            for _ in loader:
                pass
        assert got.value is exc
        ds.at = -1  # the loader goes on once it was raised
        loader.set_epoch(1)
        assert sum(len(y) for _, y in loader) == len(paths)


def test_items_of_three_elements_are_refused_naming_the_shape(folder):
    root, paths, labels = folder
    items = [(data, label, {"caption": "x"}) for data, label in items_of(paths, labels)]
    # every item fails: whichever of the first batch's samples failed first is the one named
    with pytest.raises(fusionflow.DecodeError, match=r"dataset\[[0-3]\]: TypeError: expected \(encoded bytes, label\), "
                                                    r"got a tuple of 3 items"):
        batches(items, epochs=1, shuffle=False)


def test_a_dataset_too_large_to_index_is_out_of_memory_not_a_crash():
    """__len__ of 2**32 + 1: the index's cleanup after the failed allocation segfaulted."""
    child = ("import fusionflow\n"
             "for n in (2**32 + 1, 2**62):\n"
             "    D = type('D', (), {'__len__': lambda s: n, '__getitem__': lambda s, i: (b'', 0)})\n"
             "    try:\n"
             "        fusionflow.Loader(D(), 'decode | resize(size=(8, 8))', batch_size=2, output='dlpack')\n"
             "    except MemoryError as e:\n"
             "        print(type(e).__name__, e)\n")
    from conftest import child_env
    env = child_env()
    for name in ("ASAN_OPTIONS", "TSAN_OPTIONS"):  # a sanitizer's allocator returns NULL as malloc does
        env[name] = env.get(name, "") + " allocator_may_return_null=1"
    r = subprocess.run([sys.executable, "-c", child], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.splitlines()  # an open out of memory leaves no handle, so no message but the status's
    assert len(lines) == 2 and all(x.startswith("OutOfMemoryError out of memory") for x in lines), r.stdout


class Slow:
    def __init__(self, items):
        self.items = items

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        time.sleep(0.05)
        return self.items[i]


def test_close_mid_epoch_over_a_slow_dataset_is_prompt(folder):
    root, paths, labels = folder
    loader = fusionflow.Loader(Slow(items_of(paths, labels) * 4), PIPE, batch_size=4, num_threads=3, prefetch=4,
                               output="numpy")
    images, _ = next(iter(loader))
    del images
    t0 = time.monotonic()
    loader.close()
    assert time.monotonic() - t0 < 5
    # and a loader dropped without close, while its workers fetch
    loader = fusionflow.Loader(Slow(items_of(paths, labels)), PIPE, batch_size=4, num_threads=2, output="numpy")
    del loader
