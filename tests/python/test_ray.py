"""fusionflow.ray on a local Ray cluster (one for the module): Augment's rows from
read_binary_files and read_webdataset equal the Loader's samples for the same indices and
epoch, whichever of two actors runs a row, and when the actors run another vector path
than this process; a corrupt image follows on_error; the Ray Train example trains two CPU
workers a few steps.

Skipped without Ray, and under the sanitizer builds: the only C code an actor runs is
ff_augmenter, which test_augment.py runs there (its threads included) without Ray, while a
Ray cluster, a dozen uninstrumented processes, would add a minute of CPU to each of those
builds for no further C code."""
import io
import json
import os
import shutil
import sys
import tarfile
import tempfile
import time

import numpy as np
import pytest

import fusionflow
from conftest import EXAMPLES, demo_folder, have_torch, import_ray

ray = import_ray("a sanitizer build: test_augment.py runs ff_augmenter, the C code of Augment's actors, without "
                 "a Ray cluster's minute of CPU")

PIPELINE = "decode | random_resized_crop(size=32) | random_horizontal_flip | normalize(mean=imagenet, std=imagenet)"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A local cluster with 4 logical CPUs on this machine's cores (the Train example's two
    workers, an Augment actor and the read tasks at once); its workers inherit this
    process's environment (PYTHONPATH: the fusionflow under test; FF_CACHE_DIR), and with it
    FF_CPU_ISA=scalar, which this process read before (fusionflow.cpu_isa(): its own path
    stays the CPU's widest), so that its actors run another vector path than this process
    wherever the CPU has AVX2."""
    fusionflow.cpu_isa()
    os.environ["FF_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))
    os.environ["FF_CPU_ISA"] = "scalar"
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # a test cluster on this machine only
    temp = tempfile.mkdtemp(prefix="ffray", dir="/tmp")  # Ray's socket paths must stay short
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False, _temp_dir=temp)
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    ctx.print_on_execution_start = False
    yield
    ray.shutdown()
    del os.environ["FF_CPU_ISA"]
    shutil.rmtree(temp, ignore_errors=True)


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """A few images of the demo data set (scripts/demo-data.py), an ImageFolder with absolute paths."""
    return demo_folder(str(tmp_path_factory.mktemp("demo")))


def class_folders(root):
    return sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))


def loader_samples(source, epoch, seed=7, on_error="raise"):
    """{index: (float32 image, label)} of every sample a Loader makes in `epoch`."""
    with fusionflow.Loader(source, PIPELINE, batch_size=64, shuffle=False, seed=seed, output="numpy",
                           on_error=on_error) as loader:
        loader.set_epoch(epoch)
        images, labels = next(iter(loader))
        return {i: (images[k].copy(), int(labels[k])) for k, i in enumerate(loader.last_batch.sample_indices)}


def assert_rows_are_the_loaders(rows, want):
    assert rows, "no rows"
    for row in rows:
        image, label = want[int(row["index"])]
        got = row["image"]
        if got.dtype == np.uint8:  # normalised here as a trainer would (test_augment checks it is exact)
            got = (got.astype(np.float32) / np.float32(255) - np.array((0.485, 0.456, 0.406), np.float32)
                   .reshape(3, 1, 1)) / np.array((0.229, 0.224, 0.225), np.float32).reshape(3, 1, 1)
        assert np.array_equal(got, image), f"sample {row['index']}"
        assert int(row["label"]) == label


def test_read_binary_files_rows_equal_the_loaders_on_two_actors_and_another_isa_path(cluster, demo):
    """Two actors whose CPU ops take the scalar path give this process's samples, whichever
    actor runs a row."""

    class Probe(fusionflow.ray.Augment):  # defined here: Ray ships it by value
        def __call__(self, batch):
            time.sleep(0.5)  # busy long enough that the next batch goes to the other actor
            out = super().__call__(batch)
            out["isa"] = np.array([fusionflow.cpu_isa()] * len(out["index"]))
            out["pid"] = np.full(len(out["index"]), os.getpid())
            return out

    ds = ray.data.read_binary_files(demo, include_paths=True).map_batches(
        Probe, fn_constructor_kwargs=dict(pipeline=PIPELINE, seed=7, epoch=3, source=f"imagefolder:{demo}",
                                          dtype="float32"),
        compute=ray.data.ActorPoolStrategy(size=2, max_tasks_in_flight_per_actor=1), num_cpus=1, batch_size=2)
    ctx = ray.data.DataContext.get_current()
    wait, ctx.wait_for_min_actors_s = ctx.wait_for_min_actors_s, 600  # both actors up before the first batch
    try:
        rows = ds.take_all()
    finally:
        ctx.wait_for_min_actors_s = wait
    assert sorted(int(r["index"]) for r in rows) == list(range(12))
    assert {r["isa"] for r in rows} == {"scalar"} and fusionflow.cpu_isa() in ("avx512", "avx2", "scalar")
    assert len({int(r["pid"]) for r in rows}) == 2, "one actor ran every batch"
    assert_rows_are_the_loaders(rows, loader_samples(demo, epoch=3))


def test_read_webdataset_rows_equal_the_loaders(cluster, demo, tmp_path):
    classes = class_folders(demo)
    shard = str(tmp_path / "train-000.tar")
    with tarfile.open(shard, "w") as tar:
        for c, name in enumerate(classes):
            for f in sorted(os.listdir(os.path.join(demo, name))):
                for member, data in ((f"{name}_{f}", None), (f"{name}_{f[:-4]}.cls", str(c).encode())):
                    if data is None:
                        tar.add(os.path.join(demo, name, f), arcname=member)
                    else:
                        info = tarfile.TarInfo(member)
                        info.size = len(data)
                        tar.addfile(info, io.BytesIO(data))
    ds = ray.data.read_webdataset(shard, decoder=None).map_batches(
        fusionflow.ray.Augment, fn_constructor_kwargs=dict(pipeline=PIPELINE, seed=7, epoch=1, source=f"tar:{shard}",
                                                           labels="cls", layout="chw"),
        compute=ray.data.ActorPoolStrategy(size=1), num_cpus=1, batch_size=4)
    rows = ds.take_all()
    assert len(rows) == 12 and rows[0]["image"].dtype == np.uint8 and rows[0]["image"].shape == (3, 32, 32)
    assert_rows_are_the_loaders(rows, loader_samples(f"tar:{shard}", epoch=1))


@pytest.fixture(scope="module")
def with_corrupt(demo, tmp_path_factory):
    """The demo data with one JPEG more, cut after its first twentieth."""
    root = str(tmp_path_factory.mktemp("corrupt"))
    shutil.copytree(demo, root, dirs_exist_ok=True)
    cls = class_folders(root)[1]
    with open(os.path.join(root, cls, sorted(os.listdir(os.path.join(root, cls)))[0]), "rb") as f:
        data = f.read()
    bad = os.path.join(root, cls, "00004_cut.jpg")
    with open(bad, "wb") as f:
        f.write(data[:len(data) // 20])
    return root, bad


def augmented(root, on_error, skipped=None):
    return ray.data.read_binary_files(root, include_paths=True).map_batches(
        fusionflow.ray.Augment, fn_constructor_kwargs=dict(pipeline=PIPELINE, seed=7, epoch=0,
                                                           source=f"imagefolder:{root}", on_error=on_error,
                                                           skipped=skipped, layout="chw"),
        compute=ray.data.ActorPoolStrategy(size=1), num_cpus=1, batch_size=4)


def test_a_corrupt_image_fails_the_dataset_naming_the_file(cluster, with_corrupt):
    root, bad = with_corrupt
    with pytest.raises(Exception) as e:
        augmented(root, "raise").take_all()
    assert bad in str(e.value) and "DecodeError" in str(e.value)


def test_skip_drops_the_corrupt_row_and_counts_it(cluster, with_corrupt):
    root, bad = with_corrupt
    skipped = fusionflow.ray.SkippedSamples()
    rows = augmented(root, "skip", skipped).take_all()
    want = loader_samples(root, epoch=0, on_error="skip")
    assert len(rows) == 12 and len(want) == 12
    assert skipped.count == 1 and skipped.samples[0].startswith(bad + ": ")
    assert_rows_are_the_loaders(rows, want)


@pytest.mark.skipif(not have_torch(), reason="torch is not installed")
def test_ray_train_example_trains_two_workers_a_few_steps(cluster, demo, tmp_path):
    sys.path.insert(0, EXAMPLES)
    try:
        import ray_train
    finally:
        sys.path.remove(EXAMPLES)
    ray.cloudpickle.register_pickle_by_value(ray_train)  # as for a script's __main__: workers cannot import it
    summary = str(tmp_path / "summary.json")
    assert ray_train.main(["--data", demo, "--workers", "2", "--worker-cpus", "0.5", "--augment-actors", "1",
                           "--augment-threads", "1", "--steps", "2", "--batch-size", "3", "--image-size", "32",
                           "--summary", summary]) == 0
    with open(summary) as f:
        s = json.load(f)
    assert s["world_size"] == 2 and s["steps"] == 2 and s["images"] == 6 and s["image_shape"] == [3, 32, 32]
    assert np.isfinite(s["loss"])
