"""fusionflow.Loader: batches, shapes, sharding, epochs, resume, errors."""
import inspect
import itertools
import math
import os
import re

import numpy as np
import pytest

import fusionflow
from conftest import have_torch, make_image

UINT8_PIPE = "decode | random_resized_crop(size=24) | random_horizontal_flip | rand_augment(num_ops=2, magnitude=9)"
FLOAT_PIPE = "decode | random_resized_crop(size=20) | random_horizontal_flip | normalize(mean=imagenet, std=imagenet)"


def collect(loader):
    """One epoch as numpy copies: [(images, labels, BatchInfo)]."""
    out = []
    for images, labels in loader:
        out.append((np.array(images), np.array(labels), loader.last_batch))
    return out


def test_nhwc_uint8_batches_have_the_documented_shapes_and_labels(folder):
    root, paths, labels = folder
    with fusionflow.Loader(root, UINT8_PIPE, batch_size=8, output="numpy") as loader:
        assert len(loader) == 3 and loader.dataset_size == 21 and loader.num_samples == 21
        batches = collect(loader)
    assert [b[0].shape for b in batches] == [(8, 24, 24, 3), (8, 24, 24, 3), (5, 24, 24, 3)]
    for images, got_labels, info in batches:
        assert images.dtype == np.uint8 and got_labels.dtype == np.int64
        assert list(got_labels) == [labels[i] for i in info.sample_indices]
    seen = sorted(i for b in batches for i in b[2].sample_indices)
    assert seen == list(range(21))


def test_nchw_float32_batches_are_normalized(folder):
    root, paths, labels = folder
    with fusionflow.Loader("imagefolder:" + root, FLOAT_PIPE, batch_size=5, drop_last=True, output="numpy") as loader:
        batches = collect(loader)
    assert len(batches) == 4
    for images, _, _ in batches:
        assert images.shape == (5, 3, 20, 20) and images.dtype == np.float32
        assert images.flags.c_contiguous
        assert -2.2 < images.min() < images.max() < 2.7  # (x/255 - mean)/std range for ImageNet stats


def test_same_batches_with_one_or_two_threads(folder):
    root = folder[0]
    epochs = []
    for threads in (1, 2):
        with fusionflow.Loader(root, UINT8_PIPE, batch_size=4, seed=7, num_threads=threads, output="numpy") as loader:
            epochs.append(collect(loader) + collect(loader))
    a, b = epochs
    assert len(a) == len(b) == 12
    for (ia, la, xa), (ib, lb, xb) in zip(a, b):
        assert xa == xb
        np.testing.assert_array_equal(ia, ib)
        np.testing.assert_array_equal(la, lb)


V2_PIPE = ("decode | random_resized_crop(size=24) | trivial_augment_wide(interpolation=bilinear, fill=(127.3, 0.5, 255))"
           " | sharpness(factor=1.3) | autocontrast | normalize(mean=imagenet, std=imagenet)")


def test_semantics_v2_is_part_of_the_batches_identity(folder):
    """The same seed and semantics give the same batches (1 or 2 threads);
    v1 and v2 give other pixels for the same samples and draws; the plan and
    the state say which."""
    root = folder[0]
    runs = {}
    for semantics, threads in (("v1", 1), ("v2", 1), ("v2", 2)):
        with fusionflow.Loader(root, V2_PIPE, batch_size=7, seed=3, num_threads=threads, output="numpy",
                               semantics=semantics) as loader:
            runs[semantics, threads] = collect(loader)
            assert loader.plan(0)["semantics"] == semantics
            assert loader.state_dict()["semantics"] == semantics
    for (a, _, xa), (b, _, xb) in zip(runs["v2", 1], runs["v2", 2]):
        assert xa.sample_indices == xb.sample_indices
        np.testing.assert_array_equal(a, b)
    v1, v2 = runs["v1", 1], runs["v2", 1]
    assert [x.sample_indices for _, _, x in v1] == [x.sample_indices for _, _, x in v2]
    assert any(not np.array_equal(a, b) for (a, _, _), (b, _, _) in zip(v1, v2))
    with fusionflow.Loader(root, V2_PIPE, batch_size=7, seed=3, semantics="v2") as loader:
        state = loader.state_dict()
    with fusionflow.Loader(root, V2_PIPE, batch_size=7, seed=3) as loader:
        with pytest.raises(ValueError, match="semantics"):
            loader.load_state_dict(state)
    with pytest.raises(ValueError, match="semantics must be 'v1' or 'v2'"):
        fusionflow.Loader(root, V2_PIPE, batch_size=7, semantics="v3")
    path = folder[1][0]
    a = fusionflow.augment_image(path, "decode | center_crop(size=20) | sharpness(factor=1.3)", semantics="v2")
    b = fusionflow.augment_image(path, "decode | center_crop(size=20) | sharpness(factor=1.3)")
    assert a.shape == b.shape == (20, 20, 3) and not np.array_equal(a, b)


def test_pinned_batches_equal_ordinary_ones(folder):
    root = folder[0]
    epochs = []
    for pin in (False, True):
        with fusionflow.Loader(root, FLOAT_PIPE, batch_size=4, seed=3, device="emu:0", pin_memory=pin,
                               output="numpy") as loader:
            assert loader.pin_memory is pin
            epochs.append(collect(loader))
    for (ia, la, _), (ib, lb, _) in zip(*epochs):
        np.testing.assert_array_equal(ia, ib)
        np.testing.assert_array_equal(la, lb)
    with pytest.raises(TypeError, match="pin_memory"):
        fusionflow.Loader(root, FLOAT_PIPE, batch_size=4, pin_memory="yes")


def test_batches_on_an_output_device_equal_host_batches(folder):
    root = folder[0]
    with fusionflow.Loader(root, FLOAT_PIPE, batch_size=4, seed=5, output="numpy") as loader:
        ref = collect(loader)
    with fusionflow.Loader(root, FLOAT_PIPE, batch_size=4, seed=5, device="emu:1", output="dlpack",
                           output_device="emu:0?delay=20") as loader:
        got = []
        for images, labels in loader:
            assert images.__dlpack_device__() == (1, 0)  # emu memory is host memory
            got.append((np.from_dlpack(images).copy(), np.from_dlpack(labels).copy()))
    assert len(got) == len(ref)
    for (ia, la, _), (ib, lb) in zip(ref, got):
        np.testing.assert_array_equal(ia, ib)
        np.testing.assert_array_equal(la, lb)
    with pytest.raises(ValueError, match="numpy"):
        fusionflow.Loader(root, FLOAT_PIPE, batch_size=4, output="numpy", output_device="cuda:0")
    with pytest.raises(fusionflow.DeviceUnavailableError, match="output_device"):
        fusionflow.Loader(root, FLOAT_PIPE, batch_size=4, output="dlpack", output_device="emu:0?mem=1K")

    # the offload device as output: its samples are written in place, none come down
    with fusionflow.Loader(root, FLOAT_PIPE, batch_size=4, seed=5, device="emu:0?delay=20", output="dlpack",
                           output_device="emu:0") as loader:
        got = [(np.from_dlpack(i).copy(), np.from_dlpack(l).copy()) for i, l in loader]
        stats = loader.stats()
    assert stats["device_download_bytes"] == 0 and stats["host_round_trips"] == 0
    for (ia, la, _), (ib, lb) in zip(ref, got):
        np.testing.assert_array_equal(ia, ib)
        np.testing.assert_array_equal(la, lb)


def test_the_trainers_spare_device_memory_sets_the_budget(folder):
    root = folder[0]
    with fusionflow.Loader(root, FLOAT_PIPE, batch_size=4, device="emu:0", output="numpy") as loader:
        core = loader._open()
        core.set_device_free_bytes(1 << 20)
        assert loader.stats()["device_pool_limit_bytes"] <= (1 << 20) + loader.stats()["device_pool_peak_bytes"]
        core.set_device_free_bytes(-1)
        assert loader.stats()["device_pool_limit_bytes"] > (1 << 30)
        with pytest.raises(TypeError):
            core.set_device_free_bytes("lots")


def test_batches_equal_augment_image_per_sample(folder):
    root, paths, _ = folder
    seed = 3
    with fusionflow.Loader(root, UINT8_PIPE, batch_size=6, seed=seed, output="numpy") as loader:
        loader.set_epoch(2)
        for images, _ in loader:
            info = loader.last_batch
            assert info.epoch == 2
            for i, index in enumerate(info.sample_indices):
                want = fusionflow.augment_image(paths[index], UINT8_PIPE, seed=seed, epoch=2, index=index)
                np.testing.assert_array_equal(images[i], want)


def distributed_sampler(n, world, rank, drop_last):
    """torch.utils.data.DistributedSampler(shuffle=False)'s indices, written out."""
    if drop_last and n % world:
        num_samples = math.ceil((n - world) / world)
    else:
        num_samples = math.ceil(n / world)
    total = num_samples * world
    indices = list(range(n))
    if not drop_last:
        padding = total - n
        indices += (indices * math.ceil(padding / n))[:padding] if padding else []
    else:
        indices = indices[:total]
    return indices[rank:total:world]


@pytest.mark.parametrize("shuffle,drop_last,world_size", list(itertools.product([False, True], [False, True], [1, 2, 3, 4])))
def test_shards_cover_the_epoch_like_distributed_sampler(folder, shuffle, drop_last, world_size):
    root, paths, labels = folder
    n, batch_size = len(paths), 4
    per_rank = []
    for rank in range(world_size):
        want = distributed_sampler(n, world_size, rank, drop_last)
        with fusionflow.Loader(root, "decode | resize(size=(8, 8))", batch_size=batch_size, shuffle=shuffle,
                               drop_last=drop_last, sampler_drop_last=drop_last, rank=rank,
                               world_size=world_size, output="numpy") as loader:
            assert loader.num_samples == len(want)
            want_batches = len(want) // batch_size if drop_last else math.ceil(len(want) / batch_size)
            assert len(loader) == want_batches
            for epoch in range(2):
                loader.set_epoch(epoch)
                batches = collect(loader)
                assert len(batches) == want_batches
                got = [i for b in batches for i in b[2].sample_indices]
                for images, got_labels, info in batches:
                    assert images.shape[1:] == (8, 8, 3) and images.dtype == np.uint8
                    assert info.epoch == epoch
                    assert list(got_labels) == [labels[i] for i in info.sample_indices]
                    if drop_last:
                        assert images.shape[0] == batch_size
                kept = want[:want_batches * batch_size] if drop_last else want
                if shuffle:
                    assert len(got) == len(kept)
                else:
                    assert got == kept
                if epoch == 0:
                    per_rank.append(got)
    everything = [i for r in per_rank for i in r]
    if not drop_last:
        assert set(everything) == set(range(n))  # every sample, padding repeats some
        assert len(everything) == world_size * math.ceil(n / world_size)
    else:
        assert len(set(everything)) == len(everything)  # no sample twice
    if shuffle and not drop_last and world_size == 1:
        assert per_rank[0] != list(range(n))


@pytest.mark.skipif(not have_torch(), reason="torch is not installed")
@pytest.mark.parametrize("shuffle,sampler_drop_last,world_size",
                         list(itertools.product([False, True], [False, True], [1, 2, 3, 4])))
def test_torch_permutation_gives_distributed_samplers_order(folder, shuffle, sampler_drop_last, world_size):
    from torch.utils.data import DistributedSampler
    root, paths, _ = folder
    for rank in range(world_size):
        torch_sampler = DistributedSampler(range(len(paths)), num_replicas=world_size, rank=rank, shuffle=shuffle,
                                           seed=17, drop_last=sampler_drop_last)
        with fusionflow.Loader(root, "decode | resize(size=(8, 8))", batch_size=4, shuffle=shuffle, seed=17,
                               sampler_drop_last=sampler_drop_last, permutation="torch", rank=rank,
                               world_size=world_size, output="numpy") as loader:
            for epoch in (0, 1, 5):
                torch_sampler.set_epoch(epoch)
                loader.set_epoch(epoch)
                got = [i for b in collect(loader) for i in b[2].sample_indices]
                assert got == list(torch_sampler), (rank, epoch)


def test_drop_last_alone_pads_the_shards_and_drops_the_short_batch(folder):
    """Torch's usual DDP setup: DistributedSampler(drop_last=False) + DataLoader(drop_last=True)."""
    root, paths, _ = folder  # 21 samples, 4 ranks: padded to 6 each, one full batch of 4
    for rank in range(4):
        with fusionflow.Loader(root, UINT8_PIPE, batch_size=4, drop_last=True, rank=rank, world_size=4,
                               output="numpy") as loader:
            assert loader.num_samples == math.ceil(len(paths) / 4) and len(loader) == 1
            assert [b[0].shape[0] for b in collect(loader)] == [4]


def test_dataloader_argument_names(folder):
    root = folder[0]
    with fusionflow.Loader(root, UINT8_PIPE, batch_size=4, num_workers=2, prefetch_factor=3,
                           persistent_workers=True, output="numpy") as loader:
        assert loader.stats()["num_threads"] == 2 and loader.prefetch == 6
        assert len(collect(loader)) == 6
    with pytest.raises(TypeError, match="collate_fn= is not supported: batches come assembled"):
        fusionflow.Loader(root, UINT8_PIPE, batch_size=4, collate_fn=list)
    with pytest.raises(TypeError, match="batch_sampler= is not supported: batches are batch_size consecutive"):
        fusionflow.Loader(root, UINT8_PIPE, batch_size=4, batch_sampler=[[0, 1]])
    with pytest.raises(TypeError, match="unexpected keyword argument 'batchsize'"):
        fusionflow.Loader(root, UINT8_PIPE, batch_size=4, batchsize=4)
    with pytest.raises(TypeError, match="not both"):
        fusionflow.Loader(root, UINT8_PIPE, batch_size=4, num_threads=1, num_workers=2)
    with pytest.raises(ValueError, match="permutation must be"):
        fusionflow.Loader(root, UINT8_PIPE, batch_size=4, permutation="numpy")


def test_device_decode_on_emu_is_the_cpus_decode_and_reports_its_decoder(folder, monkeypatch):
    root = folder[0]
    with fusionflow.Loader(root, UINT8_PIPE, batch_size=8, device="cpu", output="numpy") as loader:
        want = collect(loader)
    monkeypatch.setenv("FF_FORCE_DEVICE_SHARE", "1")
    with fusionflow.Loader(root, UINT8_PIPE, batch_size=8, device="emu:0", device_decode="on",
                           output="numpy") as loader:
        got = collect(loader)
        stats = loader.stats()
    assert stats["device_decoder"] == "libjpeg-turbo" and stats["device_samples"] > 0
    # the JPEGs decoded by the device's decoder (the emulator's libjpeg-turbo), the PNGs by the workers
    jpegs = sum(p.endswith(".jpg") for p in folder[1])
    assert stats["decoders"] == "libjpeg-turbo" and stats["device_decodes"] == jpegs
    assert stats["cpu_decodes"] == stats["samples"] - jpegs and stats["device_decode_failures"] == 0
    assert len(got) == len(want)
    for (a, la, _), (b, lb, _) in zip(got, want):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(la, lb)
    for kwargs, note in (({"device_decode": "off"}, "device_decode=off"),
                         ({"device_decode": "on", "deterministic": True}, "deterministic=1")):
        with fusionflow.Loader(root, UINT8_PIPE, batch_size=8, device="emu:0", output="numpy", **kwargs) as loader:
            assert loader.stats()["device_decoder"] == "none"
            assert loader.stats()["device_decoder_note"] == note
    with pytest.raises(ValueError, match="device_decode must be"):
        fusionflow.Loader(root, UINT8_PIPE, batch_size=8, device_decode="yes")


def test_epochs_advance_and_set_epoch_replays(folder):
    root = folder[0]
    with fusionflow.Loader(root, UINT8_PIPE, batch_size=8, output="numpy") as loader:
        e0, e1 = collect(loader), collect(loader)
        assert [b[2].epoch for b in e0] == [0, 0, 0] and [b[2].epoch for b in e1] == [1, 1, 1]
        assert e0[0][2].sample_indices != e1[0][2].sample_indices
        loader.set_epoch(0)
        again = collect(loader)
    for a, b in zip(e0, again):
        np.testing.assert_array_equal(a[0], b[0])


def test_break_leaves_the_position_and_the_next_loop_goes_on(folder):
    root = folder[0]
    with fusionflow.Loader(root, UINT8_PIPE, batch_size=4, output="numpy") as loader:
        full = collect(loader)
        loader.set_epoch(0)
        for k, _ in enumerate(loader):
            if k == 1:
                break
        assert loader.state_dict()["batch"] == 2
        rest = collect(loader)
    assert [b[2] for b in rest] == [b[2] for b in full[2:]]


@pytest.mark.parametrize("stop_at", [0, 1, 3, 5])
def test_resume_mid_epoch_equals_an_uninterrupted_run(folder, stop_at):
    root = folder[0]
    kwargs = dict(batch_size=4, seed=11, output="numpy")
    with fusionflow.Loader(root, UINT8_PIPE, **kwargs) as loader:
        collect(loader)
        reference = collect(loader) + collect(loader)  # epochs 1 and 2
    with fusionflow.Loader(root, UINT8_PIPE, **kwargs) as loader:
        loader.set_epoch(1)
        it = iter(loader)
        for _ in range(stop_at):
            next(it)
        state = loader.state_dict()
    assert state["epoch"] == 1 and state["batch"] == stop_at
    with fusionflow.Loader(root, UINT8_PIPE, num_threads=1, **kwargs) as loader:
        loader.load_state_dict(state)
        resumed = []
        for epoch in range(1, 3):
            loader.set_epoch(epoch)  # the usual loop: keeps the restored position for epoch 1
            resumed += collect(loader)
    expected = reference[stop_at:]
    assert [b[2] for b in resumed] == [b[2] for b in expected]
    for a, b in zip(resumed, expected):
        np.testing.assert_array_equal(a[0], b[0])
        np.testing.assert_array_equal(a[1], b[1])


def test_load_state_dict_refuses_other_settings(folder):
    root = folder[0]
    with fusionflow.Loader(root, UINT8_PIPE, batch_size=4, seed=1) as loader:
        state = loader.state_dict()
    with fusionflow.Loader(root, UINT8_PIPE, batch_size=4, seed=2) as loader:
        with pytest.raises(ValueError, match="seed"):
            loader.load_state_dict(state)
        with pytest.raises(ValueError, match="outside"):
            loader.load_state_dict({"version": 1, "epoch": 0, "batch": 99})


def test_load_state_dict_checks_the_version_and_that_positions_are_ints(folder):
    """A state of another version (or one that is not an int) and a position that is not an int are
    refused: batch=1.5 once resumed at batch 1, and version -1, None, 'x' and 2**64 were taken. A
    state without a version, as a seek written by hand, is this version's."""
    with fusionflow.Loader(folder[0], UINT8_PIPE, batch_size=4, seed=1) as loader:
        state = loader.state_dict()
        assert state["version"] == 1
        for version in (-1, None, "x", 2**64, 2, True, 1.0):
            with pytest.raises(ValueError, match=r"with version 1 \(got version"):
                loader.load_state_dict(dict(state, version=version))
        with pytest.raises(ValueError, match=r"with version 1 \(got version"):
            loader.load_state_dict(["not", "a", "dict"])
        loader.load_state_dict({"epoch": 0, "batch": 3})
        assert loader.state_dict()["batch"] == 3
        for key, value in (("batch", 1.5), ("batch", "1"), ("epoch", 0.0), ("batch", True)):
            with pytest.raises(ValueError, match="expected a dict from state_dict"):
                loader.load_state_dict(dict(state, **{key: value}))
        loader.load_state_dict(dict(state, batch=2))
        assert loader.state_dict()["batch"] == 2


def test_epochs_outside_uint64_are_refused_not_wrapped(folder):
    """The library's epoch is a uint64_t: 2**64 + 5 is refused as -1 is, never taken as epoch 5."""
    with fusionflow.Loader(folder[0], UINT8_PIPE, batch_size=4) as loader:
        for epoch in (-1, 2**64, 2**64 + 5):
            with pytest.raises(ValueError, match=r"set_epoch: epoch must be a non-negative int below 2\*\*64"):
                loader.set_epoch(epoch)
            with pytest.raises(ValueError, match=r"outside epochs \[0, 2\*\*64\)"):
                loader.load_state_dict({"version": 1, "epoch": epoch, "batch": 1})
            with pytest.raises(ValueError, match=r"plan: epoch must be a non-negative int below 2\*\*64"):
                loader.plan(0, epoch)
        assert loader.state_dict()["epoch"] == 0
        loader.set_epoch(2**64 - 1)
        assert loader.state_dict()["epoch"] == 2**64 - 1


def test_stats_report_the_work(folder):
    root = folder[0]
    with fusionflow.Loader(root, UINT8_PIPE, batch_size=8, num_threads=2, output="numpy") as loader:
        collect(loader)
        s = loader.stats()
    assert s["batches"] == 3 and s["samples"] == 21 and s["num_threads"] == 2
    assert s["decode_ns"] > 0 and s["read_bytes"] > 0 and s["skipped"] == 0 and s["held"] == 0
    assert "resize" in s["op_costs"] and s["op_costs"]["resize"]["calls"] >= 21
    assert s["op_costs"]["resize"]["ns_per_image"] > 0
    assert s["node_group"] == ""


def test_stats_name_the_node_group_the_loader_joined(folder, monkeypatch):
    group = "pytest-stats-%d" % os.getpid()
    monkeypatch.setenv("FF_NODE_GROUP", group)
    monkeypatch.setenv("FF_NODE_THREADS", "2")
    with fusionflow.Loader(folder[0], UINT8_PIPE, batch_size=8, num_threads=2, output="numpy") as loader:
        collect(loader)
        assert loader.stats()["node_group"] == group
    assert not os.path.exists("/dev/shm/fusionflow-%d-%s" % (os.getuid(), group))  # the last member's close removes it


def test_list_source_and_path_sources(folder, tmp_path):
    root, paths, labels = folder
    listing = tmp_path / "train.txt"
    listing.write_text("".join(f"{p}\t{l}\n" for p, l in zip(paths, labels)))
    results = []
    for source in (root, "imagefolder:" + root, listing, "list:" + str(listing)):
        with fusionflow.Loader(source, UINT8_PIPE, batch_size=7, output="numpy") as loader:
            results.append(collect(loader))
    for other in results[1:]:
        for a, b in zip(results[0], other):
            np.testing.assert_array_equal(a[0], b[0])
            np.testing.assert_array_equal(a[1], b[1])


def test_rank_and_world_size_come_from_the_environment(folder, monkeypatch):
    root = folder[0]
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    with fusionflow.Loader(root, "decode | resize(size=(8, 8))", batch_size=4, shuffle=False, output="numpy") as loader:
        assert (loader.rank, loader.world_size, loader.num_samples) == (1, 2, 11)
        got = [i for b in collect(loader) for i in b[2].sample_indices]
    assert got == distributed_sampler(21, 2, 1, False)


# -- errors -------------------------------------------------------------------------------


def test_pipeline_error_is_a_value_error_naming_the_column(folder):
    with pytest.raises(fusionflow.PipelineError, match="column 10") as info:
        fusionflow.Loader(folder[0], "decode | random_crop(size=3)", batch_size=2)
    assert isinstance(info.value, ValueError) and isinstance(info.value, fusionflow.Error)
    assert info.value.status == -2


def test_error_classes_print_as_fusionflow_names():
    """A traceback names fusionflow.DeviceUnavailableError, not the private module that defines it."""
    classes = [c for c in vars(fusionflow).values() if isinstance(c, type) and issubclass(c, fusionflow.Error)]
    assert fusionflow.DeviceUnavailableError in classes and len(classes) >= 10
    assert [c.__name__ for c in classes if c.__module__ != "fusionflow"] == []


def test_missing_source_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        fusionflow.Loader(str(tmp_path / "missing"), "decode | resize(size=(8, 8))", batch_size=2)
    with pytest.raises(FileNotFoundError) as info:
        fusionflow.Loader("imagefolder:" + str(tmp_path / "missing"), "decode | resize(size=(8, 8))", batch_size=2)
    assert isinstance(info.value, fusionflow.Error) and "missing" in str(info.value)


def test_bad_arguments_raise_value_error(folder):
    root = folder[0]
    for kwargs in (dict(batch_size=0), dict(batch_size=2, prefetch=0), dict(batch_size=2, device="bogus"),
                   dict(batch_size=2, on_error="ignore"),
                   dict(batch_size=2, output="jax"), dict(batch_size=2, rank=3, world_size=2),
                   dict(batch_size=2, seed=-1)):
        with pytest.raises(ValueError):
            fusionflow.Loader(root, "decode | resize(size=(8, 8))", **kwargs)
    try:  # a named GPU opens where there is one; elsewhere the error says what to use
        fusionflow.Loader(root, "decode | resize(size=(8, 8))", batch_size=2, device="cuda").close()
    except fusionflow.DeviceUnavailableError as e:
        assert isinstance(e, ValueError) and "use emu:0 or cpu" in str(e)
    with pytest.raises(ValueError, match=r"device 'gpu': unknown kind \(cpu, auto, cuda:N, emu:N\)"):
        fusionflow.Loader(root, "decode | resize(size=(8, 8))", batch_size=2, device="gpu")


def test_empty_folder_is_an_empty_source_error(tmp_path):
    (tmp_path / "a").mkdir()
    with pytest.raises(fusionflow.EmptySourceError):
        fusionflow.Loader(str(tmp_path), "decode | resize(size=(8, 8))", batch_size=2)


@pytest.fixture
def folder_with_bad_image(tmp_path):
    root = tmp_path / "bad"
    for c in ("a", "b"):
        (root / c).mkdir(parents=True)
    import random

    rng = random.Random(1)
    for i in range(3):
        make_image(str(root / "a" / f"{i}.jpg"), 30, 30, rng)
        make_image(str(root / "b" / f"{i}.png"), 30, 30, rng)
    bad = root / "b" / "9.jpg"
    bad.write_bytes(b"\xff\xd8\xff\xe0 this is not a JPEG")
    return str(root), str(bad)


def test_corrupt_image_raises_decode_error_naming_the_file(folder_with_bad_image):
    root, bad = folder_with_bad_image
    with fusionflow.Loader(root, "decode | resize(size=(8, 8))", batch_size=7, shuffle=False,
                           output="numpy") as loader:
        with pytest.raises(fusionflow.DecodeError, match="9.jpg") as info:
            for _ in loader:
                pass
        assert bad in str(info.value) and info.value.status in (-10, -11)


def test_on_error_skip_leaves_the_sample_out(folder_with_bad_image):
    root, bad = folder_with_bad_image
    with fusionflow.Loader(root, "decode | resize(size=(8, 8))", batch_size=7, on_error="skip",
                           output="numpy") as loader:
        batches = collect(loader)
        s = loader.stats()
    assert [b[0].shape[0] for b in batches] == [6]
    assert s["skipped"] == 1 and bad in s["skipped_samples"][0]


def test_images_over_max_image_pixels_are_refused(folder):
    with fusionflow.Loader(folder[0], "decode | resize(size=(8, 8))", batch_size=4, max_image_pixels=500,
                           output="numpy") as loader:
        with pytest.raises(fusionflow.DecodeError, match="500") as info:
            next(iter(loader))
        assert info.value.status == -11  # FF_ETOOBIG


def test_augment_image_errors(folder, tmp_path):
    with pytest.raises(FileNotFoundError):
        fusionflow.augment_image(str(tmp_path / "nope.jpg"), "decode")
    with pytest.raises(fusionflow.PipelineError):
        fusionflow.augment_image(folder[1][0], "decode | nope")
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"\x89PNG\r\n\x1a\n broken")
    with pytest.raises(fusionflow.DecodeError):
        fusionflow.augment_image(str(broken), "decode")


def test_augment_image_returns_hwc_uint8(folder):
    path = folder[1][1]
    a = fusionflow.augment_image(path, "decode | resize(size=(10, 12))")
    assert a.shape == (10, 12, 3) and a.dtype == np.uint8
    b = fusionflow.augment_image(path, "decode | random_resized_crop(size=16)", seed=1, index=5)
    c = fusionflow.augment_image(path, "decode | random_resized_crop(size=16)", seed=1, index=5)
    np.testing.assert_array_equal(b, c)


def test_closed_loader_refuses_use(folder):
    loader = fusionflow.Loader(folder[0], "decode | resize(size=(8, 8))", batch_size=2)
    loader.close()
    loader.close()
    assert loader.closed
    with pytest.raises(ValueError, match="closed"):
        iter(loader)
    with pytest.raises(ValueError, match="closed"):
        len(loader)


@pytest.mark.skipif(not have_torch(), reason="torch is not installed")
def test_torch_output_is_the_default_when_torch_is_installed(folder):
    import torch

    with fusionflow.Loader(folder[0], FLOAT_PIPE, batch_size=4) as loader:
        images, labels = next(iter(loader))
        assert isinstance(images, torch.Tensor) and images.dtype == torch.float32
        assert images.shape == (4, 3, 20, 20) and labels.dtype == torch.int64
        assert images.is_contiguous()


def test_plan_replayed_with_numpy_gives_the_batch(folder):
    """Loader.plan(index, epoch) tells the crop box and whether the flip was
    drawn; cutting that box from the decoded image and flipping it gives the
    sample the loader hands out."""
    from PIL import Image
    root, paths, labels = folder
    pipe = "decode | center_crop(size=20) | random_horizontal_flip"
    flips = 0
    with fusionflow.Loader(root, pipe, batch_size=7, seed=5, output="numpy") as loader:
        loader.set_epoch(1)
        for images, _ in loader:
            for i, index in enumerate(loader.last_batch.sample_indices):
                plan = loader.plan(int(index), 1)
                assert plan["path"] == paths[index] and plan["label"] == labels[index]
                assert plan["epoch"] == 1 and plan["index"] == index
                with Image.open(paths[index]) as im:
                    full = np.asarray(im.convert("RGB"))
                    assert [plan["image"]["width"], plan["image"]["height"]] == list(im.size)
                x, y, w, h = plan["decode"]["region"]
                want = full[y:y + h, x:x + w]
                assert len(plan["steps"]) == 1 and plan["steps"][0]["op"] == "horizontal_flip"
                drawn = plan["steps"][0].get("applied", True)  # one not drawn is shown as not applied
                assert drawn in (True, False)
                if drawn:
                    want, flips = want[:, ::-1], flips + 1
                np.testing.assert_array_equal(images[i], want)
        assert loader.plan(0) == loader.plan(0, loader.epoch)
        with pytest.raises(ValueError):
            loader.plan(-1)
        with pytest.raises(Exception, match="past the"):
            loader.plan(len(paths))
    assert 0 < flips < len(paths)


@pytest.mark.parametrize("mean,std", [("imagenet", "imagenet"),                # ordinary values
                                      ("(0.5, 0.5, 0.5)", "(1e-6, 2e-6, 4e-6)"),  # past float16's range
                                      ("(0.5, 0.5, 0.5)", "(1e6, 3e6, 9e5)")])   # float16 subnormals
def test_bfloat16_and_float16_batches_round_as_torch_does(folder, mean, std):
    torch = pytest.importorskip("torch")
    root = folder[0]
    pipe = f"decode | random_resized_crop(size=20) | random_horizontal_flip | normalize(mean={mean}, std={std})"
    with fusionflow.Loader(root, pipe, batch_size=4, seed=7, output="torch") as loader:
        ref = [images.clone() for images, _ in loader]
    for dtype in (torch.bfloat16, torch.float16):
        for device, output_device in (("cpu", "cpu"), ("emu:0", "emu:0")):
            with fusionflow.Loader(root, pipe, batch_size=4, seed=7, output="torch", dtype=dtype, device=device,
                                   output_device=output_device) as loader:
                got = [images.clone() for images, _ in loader]
            assert len(got) == len(ref)
            for g, r in zip(got, ref):
                assert g.dtype == dtype
                want = r.to(dtype)  # torch's round to nearest even
                assert torch.equal(g.view(torch.int16), want.view(torch.int16)), (dtype, device)


def test_channels_last_batches_are_torch_channels_last(folder):
    torch = pytest.importorskip("torch")
    root = folder[0]
    with fusionflow.Loader(root, FLOAT_PIPE, batch_size=4, seed=2, output="torch") as loader:
        ref = [images.clone() for images, _ in loader]
    with fusionflow.Loader(root, FLOAT_PIPE, batch_size=4, seed=2, output="torch",
                           memory_format=torch.channels_last) as loader:
        got = [images.clone(memory_format=torch.preserve_format) for images, _ in loader]
    for g, r in zip(got, ref):
        assert g.shape == r.shape
        assert g.is_contiguous(memory_format=torch.channels_last) and not g.is_contiguous()
        assert torch.equal(g, r)
    with pytest.raises(ValueError, match="memory_format"):
        fusionflow.Loader(root, FLOAT_PIPE, batch_size=4, memory_format="planar")
    with pytest.raises(ValueError, match="dtype"):
        fusionflow.Loader(root, FLOAT_PIPE, batch_size=4, dtype="int8")
    with pytest.raises(fusionflow.InvalidArgumentError, match="output_dtype"):
        fusionflow.Loader(root, FLOAT_PIPE, batch_size=4, dtype="uint8")


@pytest.mark.parametrize("name, value, message", [
    ("repeated_augmentations", 4097, "repeated_augmentations must be in [0, 4096] (got 4097)"),
    ("batch_size", 0, "batch_size must be in [1, 2**30] (got 0)"),
    ("prefetch", 1 << 21, "prefetch must be in [1, 2**20] (got 2097152)"),
    ("shuffle_buffer", 1 << 40, "shuffle_buffer must be in [0, 2**40) (got 1099511627776)"),
    ("world_size", 0, "world_size must be >= 1 (got 0)"),
])
def test_the_librarys_range_check_is_the_message(folder, name, value, message):
    """The library alone checks ranges (ff_loader_open's config check): its message, naming
    the parameter, is the one line of the ValueError the constructor raises."""
    args = dict(batch_size=2, device="cpu", num_threads=1)
    args[name] = value
    with pytest.raises(fusionflow.InvalidArgumentError) as e:
        fusionflow.Loader(folder[0], UINT8_PIPE, **args)
    assert isinstance(e.value, ValueError) and str(e.value) == message


@pytest.mark.parametrize("name, value, exc, message", [
    ("on_error", "ignore", ValueError, "on_error must be 'raise', 'skip' or 'replace' (got 'ignore')"),
    ("batch_size", "8", TypeError, "batch_size must be an int (got str)"),
    ("repeated_augmentations", 1 << 31, ValueError, "repeated_augmentations must be an int in [-2**31, 2**31)"),
    ("seed", -1, ValueError, "seed must be an int in [0, 2**64) (got -1)"),
])
def test_what_cannot_be_converted_names_the_parameter(folder, name, value, exc, message):
    args = dict(batch_size=2, device="cpu", num_threads=1)
    args[name] = value
    with pytest.raises(exc, match=re.escape("fusionflow.Loader: " + message)):
        fusionflow.Loader(folder[0], UINT8_PIPE, **args)


def test_rank_and_world_size_come_from_the_environment_as_the_library_reads_it(folder, monkeypatch):
    """$RANK and $WORLD_SIZE are read by the library alone: the loader's attributes are its
    reading, and a value that is not a number is refused naming the variable."""
    monkeypatch.setenv("WORLD_SIZE", "3")
    monkeypatch.setenv("RANK", "2")
    with fusionflow.Loader(folder[0], UINT8_PIPE, batch_size=2, device="cpu", num_threads=1) as loader:
        assert (loader.rank, loader.world_size) == (2, 3)
        assert loader.sampler.rank == 2 and loader.state_dict()["world_size"] == 3
    monkeypatch.setenv("WORLD_SIZE", "two")
    with pytest.raises(ValueError, match="environment variable WORLD_SIZE='two' is not a valid integer"):
        fusionflow.Loader(folder[0], UINT8_PIPE, batch_size=2, device="cpu", num_threads=1)


def test_arguments_after_the_pipeline_are_keywords(folder):
    with pytest.raises(TypeError, match="every other argument by keyword: got 1 more positional argument.*"
                                        "write batch_size=4$"):
        fusionflow.Loader(folder[0], UINT8_PIPE, 4)
    with pytest.raises(TypeError, match="missing 1 required keyword-only argument: 'batch_size'"):
        fusionflow.Loader(folder[0], UINT8_PIPE)
    shown = inspect.signature(fusionflow.Loader).parameters
    assert shown["batch_size"].default is inspect.Parameter.empty and shown["image_key"].kind is shown["image_key"].KEYWORD_ONLY
    assert not [p for p in shown.values() if p.kind is p.VAR_POSITIONAL]
