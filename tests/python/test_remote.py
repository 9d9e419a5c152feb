"""fusionflow.ray.Workers on a local Ray cluster (one for the module): a Loader with remote
workers hands out the batches of a Loader without them, bit for bit, whether the policy
or a fixed share sent the work, whether the actors read the folder or get bytes from a
Python dataset; an actor killed mid-epoch and one stuck past its deadline lose nothing
and duplicate nothing; resume mid-epoch with work in flight gives the same batches; a
remote decode error follows on_error; close is prompt with work outstanding; nothing is
spilled from the object store; open-time failures are one-line errors, never a hang. On two
simulated nodes (the trainer's with a GPU, a CPU-only one): the actors stay off the GPU node
unless allowed; the pool gone mid-epoch (Ray shut down, the CPU node removed) leaves the work
local with one warning.

Skipped without Ray and under the sanitizer builds (see test_ray.py); test_remote_queue.py
runs the checks that need no Ray everywhere."""
import os
import shutil
import tempfile
import time

import numpy as np
import pytest

import fusionflow

PIPELINE = ("decode | random_resized_crop(size=48) | random_horizontal_flip | rand_augment(num_ops=2, magnitude=9)"
            " | normalize(mean=imagenet, std=imagenet)")


if os.environ.get("FF_TEST_SANITIZER"):
    pytest.skip("Ray's processes would inherit the sanitizer runtime preloaded for the instrumented extension; "
                "tests/unit/test_remote.c covers the remote placement there", allow_module_level=True)
ray = pytest.importorskip("ray")
if not hasattr(ray, "remote"):
    pytest.skip(f"'import ray' found a folder, not Ray: {ray.__path__}", allow_module_level=True)
import fusionflow.ray  # noqa: E402  (after the skip: needs Ray)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A local cluster of 3 logical CPUs: this machine's 2 cores run the trainer's loader and
    up to two 1-CPU actors."""
    os.environ["FF_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    temp = tempfile.mkdtemp(prefix="ffrem", dir="/tmp")
    ray.init(num_cpus=3, include_dashboard=False, log_to_driver=False, _temp_dir=temp,
             object_spilling_directory=SPILL)
    yield
    ray.shutdown()
    shutil.rmtree(temp, ignore_errors=True)
    shutil.rmtree(SPILL, ignore_errors=True)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """32 JPEGs of 640x480 in 3 classes: decodes that cost a thread a few ms each."""
    from PIL import Image

    root = tmp_path_factory.mktemp("folder")
    rng = np.random.default_rng(3)
    y, x = np.mgrid[0:480, 0:640]
    for k in range(32):
        d = root / f"class_{k % 3}"
        d.mkdir(exist_ok=True)
        f = rng.uniform(0.005, 0.05, 3)
        pixels = (127 + 100 * np.sin(x[..., None] * f + y[..., None] * f[::-1]) +
                  rng.integers(0, 40, (480, 640, 3))).clip(0, 255).astype(np.uint8)
        Image.fromarray(pixels).save(d / f"{k:03d}.jpg", quality=90)
    return str(root)


@pytest.fixture
def forced(monkeypatch):
    """Every batch's remote share fixed (FF_FORCE_REMOTE_SHARE), whatever its lead."""
    def force(share):
        monkeypatch.setenv("FF_FORCE_REMOTE_SHARE", str(share))
    return force


def batches(loader, n=None, epochs=1):
    out = []
    for _ in range(epochs):
        for k, (images, labels) in enumerate(loader):
            out.append((images.copy(), labels.copy(), tuple(loader.last_batch.sample_indices)))
            if n is not None and len(out) == n:
                return out
    return out


def local(source, n=None, epochs=1, **kw):
    with fusionflow.Loader(source, PIPELINE, batch_size=8, num_threads=1, seed=5, output="numpy", **kw) as l:
        return batches(l, n, epochs)


def assert_same(a, b):
    assert len(a) == len(b)
    for k, ((xa, ya, ia), (xb, yb, ib)) in enumerate(zip(a, b)):
        assert ia == ib, f"batch {k}: samples {ib}, want {ia}"
        assert np.array_equal(ya, yb), f"batch {k}: labels"
        assert np.array_equal(xa, xb), f"batch {k}: pixels"


SPILL = tempfile.mkdtemp(prefix="ffspill", dir="/tmp")


def spilled_files():
    """Objects Ray spilled from the store (to the module cluster's spill folder)."""
    return [f for _, _, fs in os.walk(SPILL) for f in fs]


def object_refs_held():
    """ObjectRefs this process still holds (the core worker's reference table)."""
    return len(ray._private.worker.global_worker.core_worker.get_all_reference_counts())


def test_remote_batches_equal_local_batches(cluster, folder, forced):
    want = local(folder, epochs=2)
    forced(0.5)
    with fusionflow.Loader(folder, PIPELINE, batch_size=8, num_threads=1, seed=5, output="numpy",
                           remote=fusionflow.ray.Workers(2, microbatch_size=4)) as l:
        got = batches(l, epochs=2)
        s = l.stats()["remote"]
        held = object_refs_held()  # each result's ObjectRef is dropped once it is copied
    assert held <= 2 * 2 + 2, held  # at most the microbatches in flight (2 actors x 2), and slack
    assert_same(want, got)
    assert s["placement_samples"]["remote"] > 0
    assert sum(s["placement_samples"].values()) == 2 * 32
    assert s["bytes_sent"] == 0  # the actors read the folder themselves
    # uint8 (H, W, 3) each; the next epoch's first batches are prepared too
    assert s["bytes_received"] >= s["placement_samples"]["remote"] * 48 * 48 * 3
    assert s["microbatches"] > 0 and s["latency_ns"] > 0 and s["worker_cpu_ns"] > 0
    assert not spilled_files()


def test_a_python_dataset_sends_its_bytes(cluster, folder, forced):
    paths = sorted(os.path.join(d, f) for d, _, fs in os.walk(folder) for f in fs if f.endswith((".jpg", ".png")))
    data = [(open(p, "rb").read(), k % 3) for k, p in enumerate(paths)]
    want = local(data)
    forced(0.5)
    with fusionflow.Loader(data, PIPELINE, batch_size=8, num_threads=1, seed=5, output="numpy",
                           remote=fusionflow.ray.Workers(1)) as l:
        got = batches(l)
        s = l.stats()["remote"]
    assert_same(want, got)
    assert s["placement_samples"]["remote"] > 0 and s["bytes_sent"] > 0


def test_a_consumer_faster_than_one_thread_gets_remote_help(cluster, folder):
    want = local(folder, epochs=3)
    with fusionflow.Loader(folder, PIPELINE, batch_size=8, num_threads=1, seed=5, output="numpy",
                           remote=fusionflow.ray.Workers(1)) as l:
        got = batches(l, epochs=3)  # no step time: the consumer always waits
        s = l.stats()["remote"]
    assert_same(want, got)
    assert s["placement_samples"]["remote"] > 0, s
    assert s["rtt_s"] > 0


def test_an_actor_killed_mid_epoch_loses_nothing(cluster, folder, forced):
    want = local(folder, epochs=2)
    forced(0.6)
    with fusionflow.Loader(folder, PIPELINE, batch_size=8, num_threads=1, seed=5, output="numpy",
                           remote=fusionflow.ray.Workers(2, microbatch_size=4)) as l:
        got = batches(l, n=2)
        ray.kill(l._remote.actors[0])  # as a node going away would
        got += batches(l, epochs=2)[: len(want) - 2]
        s = l.stats()["remote"]
    assert_same(want, got)
    assert s["actors_lost"] + s["fallbacks"] + s["retries"] > 0, s


def test_an_actor_past_its_deadline_is_replaced(cluster, folder, forced):
    want = local(folder, epochs=2)
    forced(0.6)
    with fusionflow.Loader(folder, PIPELINE, batch_size=8, num_threads=1, seed=5, output="numpy",
                           remote=fusionflow.ray.Workers(1, microbatch_size=4, timeout_s=1.0)) as l:
        got = batches(l, n=1)
        l._remote.actors[0].sleep.remote(60)  # its next microbatches wait behind this
        got += batches(l, epochs=2)[: len(want) - 1]
        s = l.stats()["remote"]
    assert_same(want, got)
    assert s["actors_killed"] >= 1 and s["dropped_results"] >= 1, s


def test_resume_mid_epoch_with_remote_work_in_flight(cluster, folder, forced):
    want = local(folder)
    forced(0.5)
    w = fusionflow.ray.Workers(1, microbatch_size=4)
    with fusionflow.Loader(folder, PIPELINE, batch_size=8, num_threads=1, seed=5, output="numpy", remote=w) as l:
        batches(l, n=2)
        state = l.state_dict()  # remote microbatches of the next batches are out now
    with fusionflow.Loader(folder, PIPELINE, batch_size=8, num_threads=1, seed=5, output="numpy", remote=w) as l:
        l.load_state_dict(state)
        got = batches(l)
    assert_same(want[2:], got)


def test_a_remote_decode_error_follows_on_error(cluster, folder, forced, tmp_path):
    bad = str(tmp_path / "bad")
    shutil.copytree(folder, bad)
    victim = sorted(os.path.join(d, f) for d, _, fs in os.walk(bad) for f in fs if f.endswith((".jpg", ".png")))[5]
    with open(victim, "r+b") as f:
        f.truncate(200)
    want = local(bad, on_error="skip")
    forced(1)
    with fusionflow.Loader(bad, PIPELINE, batch_size=8, num_threads=1, seed=5, output="numpy", on_error="skip",
                           remote=fusionflow.ray.Workers(1, microbatch_size=8)) as l:
        got = batches(l)
        stats = l.stats()
    assert_same(want, got)
    assert stats["skipped"] == 1 and os.path.basename(victim) in stats["skipped_samples"][0]


def test_close_with_work_outstanding_is_prompt(cluster, folder, forced):
    forced(1)
    l = fusionflow.Loader(folder, PIPELINE, batch_size=8, num_threads=1, seed=5, output="numpy",
                          remote=fusionflow.ray.Workers(1, microbatch_size=8))
    l._remote.actors[0].sleep.remote(60)
    time.sleep(0.5)  # microbatches go out and wait behind the sleep
    t0 = time.monotonic()
    l.close()
    assert time.monotonic() - t0 < 15  # the stuck actor would take 60 s


def test_open_failures_are_one_line_errors(cluster, folder, monkeypatch):
    with pytest.raises(ValueError, match="num_workers must be an int >= 1"):
        fusionflow.ray.Workers(0)
    with pytest.raises(RuntimeError, match=r"^fusionflow\.ray\.Workers: .*(did not start within 3 s|not schedulable)"):
        fusionflow.Loader(folder, PIPELINE, batch_size=8, num_threads=1,
                          remote=fusionflow.ray.Workers(1, num_cpus_per_worker=64, start_timeout_s=3))
    monkeypatch.setattr(fusionflow._remote, "_version", lambda: "0.0.0 (library 0.0.0)")
    with pytest.raises(RuntimeError, match=r"runs fusionflow .* this process 0\.0\.0"):
        fusionflow.Loader(folder, PIPELINE, batch_size=8, num_threads=1, remote=fusionflow.ray.Workers(1))
    monkeypatch.undo()
    with pytest.raises(fusionflow.InvalidArgumentError, match="random_erasing"):
        fusionflow.Loader(folder, PIPELINE + " | random_erasing(p=0.5)", batch_size=8, num_threads=1,
                          remote=fusionflow.ray.Workers(1))


def test_an_unreachable_address_fails_at_open(cluster, folder):
    t0 = time.monotonic()
    with pytest.raises(ConnectionError, match=r"^fusionflow\.ray\.Workers: the Ray cluster at '127\.0\.0\.1:1' does "
                                              r"not answer"):
        fusionflow.Loader(folder, PIPELINE, batch_size=8, remote=fusionflow.ray.Workers(1, address="127.0.0.1:1"))
    assert time.monotonic() - t0 < 30


# -- two nodes: the trainer's GPU node and a CPU-only node (ray.cluster_utils.Cluster) --------------


@pytest.fixture(scope="module")
def two_nodes(cluster):
    """The module's cluster traded for two simulated nodes on this machine: the head, where
    this process (the trainer) runs, with a logical GPU, 2 CPUs and the label role=trainer,
    and a CPU-only node of 2 CPUs. Yields (cluster, the GPU node's id, the CPU node's id)."""
    from ray.cluster_utils import Cluster

    ray.shutdown()
    temp = tempfile.mkdtemp(prefix="ffrem2", dir="/tmp")
    args = dict(include_dashboard=False, object_store_memory=100 << 20, temp_dir=temp)
    c = Cluster(initialize_head=True, head_node_args=dict(args, num_cpus=2, num_gpus=1, labels={"role": "trainer"}))
    cpu_node = c.add_node(num_cpus=2, object_store_memory=100 << 20)
    ray.init(address=c.address, log_to_driver=False)
    gpu_id = c.head_node.node_id
    yield c, gpu_id, cpu_node.node_id
    ray.shutdown()
    c.shutdown()
    shutil.rmtree(temp, ignore_errors=True)


def actor_nodes(loader):
    """The node id of each actor of the loader's pool (Ray's actor table)."""
    return [ray._private.state.actors(actor_id=a._actor_id.hex())["Address"]["NodeID"]
            for a in loader._remote.actors]


def test_two_nodes_actors_stay_off_the_gpu_node_unless_allowed(two_nodes, folder, forced):
    c, gpu_id, cpu_id = two_nodes
    assert {n["NodeID"]: bool(n["Resources"].get("GPU")) for n in ray.nodes() if n["Alive"]} == \
        {gpu_id: True, cpu_id: False}
    want = local(folder)
    forced(0.5)
    with fusionflow.Loader(folder, PIPELINE, batch_size=8, num_threads=1, seed=5, output="numpy",
                           remote=fusionflow.ray.Workers(2, microbatch_size=4)) as l:
        assert actor_nodes(l) == [cpu_id, cpu_id]
        got = batches(l)
        s = l.stats()["remote"]
    assert_same(want, got)
    assert s["placement_samples"]["remote"] > 0, s
    # 3 actors of 1 CPU do not fit on the CPU-only node's 2: allowed, one goes to the GPU node
    with fusionflow.Loader(folder, PIPELINE, batch_size=8, num_threads=1, seed=5, output="numpy",
                           remote=fusionflow.ray.Workers(3, microbatch_size=4, allow_gpu_nodes=True)) as l:
        nodes = actor_nodes(l)
        got = batches(l)
        s = l.stats()["remote"]
    assert gpu_id in nodes and set(nodes) <= {gpu_id, cpu_id}, nodes
    assert_same(want, got)
    assert s["placement_samples"]["remote"] > 0, s
    # a label_selector replaces the default placement: Ray's node labels decide
    with fusionflow.Loader(folder, PIPELINE, batch_size=8, num_threads=1,
                           remote=fusionflow.ray.Workers(1, label_selector={"role": "trainer"})) as l:
        assert actor_nodes(l) == [gpu_id]


@pytest.mark.parametrize("gone", ["ray.shutdown", "cpu node removed"])  # in this order: the second is for good
def test_two_nodes_the_pool_gone_mid_epoch_leaves_the_work_local(two_nodes, folder, forced, caplog, gone):
    """Mid-epoch, this process shuts Ray down, or the CPU-only node goes (every actor with it, and no
    node left to start others on): one warning, the rest local, each sample once and in order."""
    c, gpu_id, cpu_id = two_nodes
    want = local(folder, epochs=2)
    forced(0.6)
    with fusionflow.Loader(folder, PIPELINE, batch_size=8, num_threads=1, seed=5, output="numpy",
                           remote=fusionflow.ray.Workers(2, microbatch_size=4)) as l:
        got = batches(l, n=2)
        before = l.stats()["remote"]["placement_samples"]["remote"]
        with caplog.at_level("WARNING", logger="fusionflow.ray"):
            if gone == "ray.shutdown":
                ray.shutdown()
            else:
                c.remove_node(next(n for n in c.worker_nodes if n.node_id == cpu_id))
            got += batches(l, epochs=2)[: len(want) - 2]
        s = l.stats()["remote"]
    if gone == "ray.shutdown":
        assert not ray.is_initialized()  # the pool's calls did not start Ray again
        ray.init(address=c.address, log_to_driver=False)
    assert_same(want, got)
    assert before > 0, s  # remote work before the pool went
    why = "Ray was shut down in this process" if gone == "ray.shutdown" else "no node without GPUs is left"
    warned = [r.getMessage() for r in caplog.records if r.name == "fusionflow.ray"]
    assert len(warned) == 1 and "the worker pool is gone" in warned[0] and why in warned[0], warned
    assert s["pool_lost"] == 1 and s["actors"] == 0 and s["note"], s
