"""Where training scripts touch a torch DataLoader, a fusionflow.Loader answers.

One test per access pattern, collected from scripts people run unchanged:
pytorch/examples imagenet main.py, timm's train.py and validate.py,
torchvision's references/classification/train.py and PyTorch Lightning's
data hooks (its sampler-epoch, shuffle and length checks, its resumable
loaders). Each test does what the script does, in our own words, and checks
the answer against the batches the loader hands out or against torch's own
sampler (DistributedSampler) where one exists.
"""
import io
import math
import os
import pickle
import subprocess
import sys
import tarfile
import warnings

import pytest

from conftest import child_env, have_torch

TSAN = "thread" in os.environ.get("FF_TEST_SANITIZER", "")

np = pytest.importorskip("numpy")
import fusionflow  # noqa: E402

FLOAT_PIPE = "decode | random_resized_crop(size=16) | random_horizontal_flip | normalize(mean=imagenet, std=imagenet)"
EVAL_PIPE = "decode | resize(size=20) | center_crop(size=16) | normalize(mean=imagenet, std=imagenet)"
needs_torch = pytest.mark.skipif(not have_torch(), reason="torch is not installed")


def loader_on(folder, pipeline=FLOAT_PIPE, **kw):
    args = dict(batch_size=4, seed=5, num_threads=2, output="numpy")
    args.update(kw)
    return fusionflow.Loader(folder[0], pipeline, **args)


def epoch_indices(loader):
    out = []
    for _ in loader:
        out += loader.last_batch.sample_indices
    return out


# ---------------------------------------------------------------- lengths (every script's progress meter)

def test_len_of_loader_sampler_and_dataset(folder):
    """imagenet main.py's ProgressMeter(len(loader)), its DDP tail's len(loader.sampler) and
    len(loader.dataset); torchvision's reference len(data_loader.dataset)."""
    root, paths, _ = folder
    with loader_on(folder, rank=1, world_size=4, sampler_drop_last=True, shuffle=False) as loader:
        assert len(loader.dataset) == len(paths) == 21
        assert len(loader.sampler) == 21 // 4  # DistributedSampler(drop_last=True)'s num_samples
        assert len(loader) == math.ceil(5 / 4)
        assert hasattr(loader.dataset, "__len__")
    with loader_on(folder, rank=1, world_size=4) as loader:
        assert len(loader.sampler) == math.ceil(21 / 4)  # padded


# ---------------------------------------------------------------- the dataset: ImageFolder's view

@needs_torch
def test_dataset_lists_imagefolders_samples_targets_and_classes(folder):
    """torchvision's reference reads dataset.classes; scripts read samples, imgs, targets."""
    from torchvision.datasets import ImageFolder

    ref = ImageFolder(folder[0])
    with loader_on(folder) as loader:
        ds = loader.dataset
        assert ds.samples == ref.samples and ds.imgs == ref.imgs and ds.targets == ref.targets
        assert ds.classes == ref.classes and ds.class_to_idx == ref.class_to_idx
        assert ds.root == folder[0]
        assert loader.dataset is ds  # one view per loader


def test_dataset_item_is_the_batch_row_of_the_current_epoch(folder):
    """dataset[i] is what the loader hands out for sample i this epoch: (image, label)."""
    with loader_on(folder) as loader:
        loader.set_epoch(3)
        for images, labels in loader:
            for row, (i, label) in enumerate(zip(loader.last_batch.sample_indices, labels)):
                image, got = loader.dataset[i]
                assert got == label and isinstance(got, int)
                np.testing.assert_array_equal(image, images[row])  # bit for bit
        assert loader.epoch == 4
        with pytest.raises(IndexError):
            loader.dataset[21]
        np.testing.assert_array_equal(loader.dataset[-1][0], loader.dataset[20][0])


def test_dataset_pickles_as_its_settings_and_loads_in_another_process(folder, tmp_path):
    """imagenet main.py hands Subset(val_loader.dataset, ...) to a DataLoader with workers:
    the view pickles as source, pipeline, seed and epoch, and a process that unpickles it
    gives the same bytes."""
    with loader_on(folder, EVAL_PIPE, shuffle=False) as loader:
        loader.set_epoch(2)
        want = np.stack([loader.dataset[i][0] for i in (0, 7, 20)])
        blob = pickle.dumps(loader.dataset)
    assert len(blob) < 2000  # settings, not samples or pixels
    (tmp_path / "view.pkl").write_bytes(blob)
    code = ("import pickle, sys, numpy as np; ds = pickle.load(open(sys.argv[1], 'rb')); "
            "np.save(sys.argv[2], np.stack([ds[i][0] for i in (0, 7, 20)])); print(len(ds), ds[7][1])")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "view.pkl"), str(tmp_path / "got.npy")],
                         capture_output=True, text=True, timeout=120, env=child_env())
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["21", "1"]  # sample 7: the second class
    np.testing.assert_array_equal(np.load(tmp_path / "got.npy"), want)


@needs_torch
@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_subset_of_the_dataset_in_a_dataloader_with_workers(folder, context):
    """imagenet main.py's DDP validation tail: DataLoader(Subset(val_loader.dataset, range(a, n)),
    num_workers, pin_memory=True) feeds the model with the rows the loader would give."""
    if context == "fork" and TSAN:
        pytest.skip("ThreadSanitizer ends a forked child of a threaded process that starts a thread")
    import torch
    from torch.utils.data import DataLoader, Subset

    with fusionflow.Loader(folder[0], EVAL_PIPE, batch_size=4, shuffle=False, num_workers=2) as loader:
        want = torch.stack([loader.dataset[i][0] for i in range(16, 21)])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # DataLoader's own pin_memory warning without a GPU
            aux = DataLoader(Subset(loader.dataset, range(16, 21)), batch_size=4, num_workers=1,
                             pin_memory=True, multiprocessing_context=context)
            got = list(aux)
    assert [x.shape for x, _ in got] == [(4, 3, 16, 16), (1, 3, 16, 16)]
    assert torch.equal(torch.cat([x for x, _ in got]), want)
    assert torch.cat([y for _, y in got]).tolist() == [2] * 5


def test_dataset_of_a_list_file_lists_its_lines(folder, tmp_path):
    root, paths, labels = folder
    listing = tmp_path / "train.tsv"
    listing.write_text("".join(f"{p}\t{y}\n" for p, y in zip(paths, labels)))
    with fusionflow.Loader(str(listing), EVAL_PIPE, batch_size=4, output="numpy") as loader:
        ds = loader.dataset
        assert ds.samples == list(zip(paths, labels)) and ds.targets == labels and ds.classes is None
        assert ds.class_to_idx is None and ds.root == str(listing)
        with loader_on(folder, EVAL_PIPE) as ref:
            np.testing.assert_array_equal(ds[4][0], ref.dataset[4][0])


def test_dataset_of_tar_shards_names_members_and_refuses_a_stream(folder, tmp_path, monkeypatch):
    root, paths, labels = folder
    monkeypatch.setenv("FF_CACHE_DIR", str(tmp_path / "cache"))
    shard = tmp_path / "s.tar"
    with tarfile.open(shard, "w") as tar:
        for k, (p, y) in enumerate(zip(paths, labels)):
            for name, data in ((f"{k:04d}{os.path.splitext(p)[1]}", open(p, "rb").read()),
                               (f"{k:04d}.cls", str(y).encode())):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    with fusionflow.Loader(f"tar:{shard}", EVAL_PIPE, batch_size=4, output="numpy") as loader:
        ds = loader.dataset
        assert ds.samples[3] == (f"{shard}:0003{os.path.splitext(paths[3])[1]}", labels[3])
        with loader_on(folder, EVAL_PIPE) as ref:
            np.testing.assert_array_equal(ds[3][0], ref.dataset[3][0])
    # a sanitizer's runtime preloaded into this Python must not be preloaded into the command
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    streamed = f"tar:pipe:cat {shard}"
    with fusionflow.Loader(streamed, EVAL_PIPE, batch_size=4, output="numpy") as loader:
        assert len(loader.dataset) == 21
        with pytest.raises(ValueError, match="streamed source has no random access"):
            loader.dataset[0]


def test_dataset_of_a_python_dataset_is_that_dataset(folder):
    items = [(open(p, "rb").read(), y) for p, y in zip(folder[1], folder[2])]
    with fusionflow.Loader(items, EVAL_PIPE, batch_size=4, output="numpy") as loader:
        assert loader.dataset is items


# ---------------------------------------------------------------- the samplers and set_epoch

def test_sampler_lists_the_indices_each_epoch_hands_out(folder):
    """Iterating loader.sampler (Lightning's prediction indices, scripts that log the order)."""
    for kw in (dict(), dict(rank=2, world_size=3), dict(rank=1, world_size=2, repeated_augmentations=3),
               dict(shuffle=False, rank=0, world_size=4, sampler_drop_last=True)):
        with loader_on(folder, **kw) as loader:
            for epoch in (0, 1):
                loader.set_epoch(epoch)
                order = list(loader.sampler)
                assert len(order) == len(loader.sampler)
                assert epoch_indices(loader) == order, kw


@needs_torch
def test_sampler_order_is_distributed_samplers_with_torch_permutation(folder):
    """imagenet main.py's DistributedSampler(train_dataset) + set_epoch, replaced by the loader."""
    from torch.utils.data.distributed import DistributedSampler

    for rank in range(3):
        ref = DistributedSampler(range(21), num_replicas=3, rank=rank)
        with loader_on(folder, rank=rank, world_size=3, permutation="torch", seed=0) as loader:
            for epoch in (0, 4):
                ref.set_epoch(epoch)
                loader.sampler.set_epoch(epoch)
                assert list(loader.sampler) == list(ref) == epoch_indices(loader)


def test_batch_sampler_cuts_the_order_into_the_batches(folder):
    with loader_on(folder, batch_size=5, drop_last=True) as loader:
        bs = loader.batch_sampler
        assert bs.sampler is loader.sampler and bs.batch_size == 5 and bs.drop_last is True
        assert len(bs) == len(loader) == 4
        want = list(bs)
        got = []
        for _ in loader:
            got.append(loader.last_batch.sample_indices)
        assert got == want and all(len(b) == 5 for b in got)


def test_timms_set_loader_epoch_reaches_the_loader(folder):
    """timm's train.py _set_loader_epoch: dataset.set_epoch if it has one, then
    batch_sampler.set_epoch if it has one, else sampler.set_epoch."""
    with loader_on(folder) as loader:
        assert not hasattr(loader.dataset, "set_epoch")  # an ImageFolder has none either
        assert not hasattr(loader.batch_sampler, "set_epoch")  # so timm falls through to the sampler
        reached = [obj for obj in (loader.batch_sampler, loader.sampler) if hasattr(obj, "set_epoch")][:1]
        assert reached == [loader.sampler]
        reached[0].set_epoch(6)
        assert loader.epoch == 6
        next(iter(loader))
        assert loader.last_batch.epoch == 6


def lightning_set_sampler_epoch(loader, epoch):
    """What Lightning's _set_sampler_epoch does: set_epoch on loader.sampler and on
    loader.batch_sampler.sampler, each distinct object once; returns the calls made."""
    found = {}
    for obj in (getattr(loader, "sampler", None), getattr(getattr(loader, "batch_sampler", None), "sampler", None)):
        if obj is not None:
            found[id(obj)] = obj
    for obj in found.values():
        obj.set_epoch(epoch)
    return len(found)


def test_lightnings_sampler_epoch_call_and_the_scripts_own_are_one(folder):
    """Lightning calls set_epoch on loader.sampler and loader.batch_sampler.sampler (one
    object: called once), a script may call loader.set_epoch too: the same epoch any number
    of times changes nothing, also after a resume restored a mid-epoch position."""
    with loader_on(folder) as loader:
        it = iter(loader)
        next(it)
        next(it)
        state = loader.state_dict()  # after batch 1 of epoch 0: resumes at batch 2
        rest = [loader.last_batch.sample_indices for _ in it]
    with loader_on(folder) as loader:
        loader.load_state_dict(state)
        assert lightning_set_sampler_epoch(loader, 0) == 1
        loader.sampler.set_epoch(0)
        loader.set_epoch(0)
        assert [loader.last_batch.sample_indices for _ in loader] == rest
        loader.set_epoch(0)  # a batch was handed out since: epoch 0 again from its start
        assert loader.state_dict()["batch"] == 0


@needs_torch
def test_lightnings_shuffle_and_iterable_checks_pass(folder):
    """Lightning's _is_dataloader_shuffled and has_iterable_dataset read dataset, sampler and
    batch_sampler.sampler: none is a torch IterableDataset, RandomSampler or SequentialSampler,
    so it neither warns about shuffled validation nor treats the loader as iterable-only."""
    from torch.utils.data import IterableDataset, RandomSampler, SequentialSampler

    with loader_on(folder, shuffle=False) as loader:
        assert not isinstance(loader.dataset, IterableDataset)
        sampler = loader.batch_sampler.sampler if hasattr(loader.batch_sampler, "sampler") else loader.sampler
        assert not isinstance(sampler, (RandomSampler, SequentialSampler))
        assert len(loader) == 6 and loader.sampler.shuffle is False


def test_lightnings_stateful_loader_resumes_mid_epoch(folder):
    """Lightning saves loaders with state_dict/load_state_dict and restores them before the
    epoch's set_epoch: the resumed batches are the saved run's."""
    with loader_on(folder) as loader:
        assert callable(loader.state_dict) and callable(loader.load_state_dict)
        loader.set_epoch(1)
        it = iter(loader)
        first = next(it)[0].copy()
        state = loader.state_dict()
        want = [x.copy() for x, _ in it]
    with loader_on(folder) as resumed:
        resumed.load_state_dict(state)
        resumed.sampler.set_epoch(1)
        got = [x.copy() for x, _ in resumed]
    assert len(got) == len(want) == 5 and not np.array_equal(first, got[0])
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)


# ---------------------------------------------------------------- DataLoader's keywords

def test_reproducibility_recipe_keywords_warn_once_and_change_nothing(folder):
    """PyTorch's reproducibility recipe passes worker_init_fn and generator; timeout,
    multiprocessing_context and persistent_workers are common too."""
    with loader_on(folder) as plain:
        want = epoch_indices(plain)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loader = loader_on(folder, worker_init_fn=lambda worker: None, generator=object(), timeout=30,
                           multiprocessing_context="spawn", persistent_workers=True, prefetch_factor=2)
    with loader:
        assert epoch_indices(loader) == want
    msgs = [str(w.message) for w in caught]
    assert len(msgs) == 1 and all(k in msgs[0] for k in ("worker_init_fn", "generator", "timeout",
                                                          "multiprocessing_context"))
    assert caught[0].filename == __file__  # points at the caller's line
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # their defaults say nothing
        loader_on(folder, worker_init_fn=None, generator=None, timeout=0, multiprocessing_context=None).close()
    with pytest.raises(TypeError, match="sampler= is not supported"):
        loader_on(folder, sampler=range(21))


def test_pin_memory_without_a_gpu_warns_once_and_gives_host_batches(folder):
    """imagenet main.py and torchvision's reference pass pin_memory=True whatever the machine."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loader = loader_on(folder, pin_memory=True, device="cpu")
    with loader:
        pinned = loader.stats()["host_memory_pinned"]
        batches = epoch_indices(loader)
    assert len(batches) == 21
    msgs = [str(w.message) for w in caught if "pin_memory" in str(w.message)]
    assert msgs == ([] if pinned else [msgs[0]]) and len(msgs) <= 1
    if not pinned:
        assert "ordinary host memory" in msgs[0] and caught[0].filename == __file__
    with loader_on(folder, pin_memory=True, device="emu:0") as loader:  # a device that pins
        assert loader.stats()["host_memory_pinned"] is True


def test_torch_distributed_sets_rank_and_world_size(folder, monkeypatch):
    """Scripts started by torch.multiprocessing.spawn (imagenet main.py's
    --multiprocessing-distributed) set no RANK: DistributedSampler reads the process group."""
    import types

    fake = types.SimpleNamespace(is_available=lambda: True, is_initialized=lambda: True, get_rank=lambda: 2,
                                 get_world_size=lambda: 3)
    monkeypatch.setitem(sys.modules, "torch.distributed", fake)
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    with loader_on(folder) as loader:
        assert (loader.rank, loader.world_size, loader.num_samples) == (2, 3, 7)
    with loader_on(folder, rank=0, world_size=1) as loader:  # given: as given
        assert (loader.rank, loader.world_size) == (0, 1)


# ---------------------------------------------------------------- timm's train loop: mixup_enabled

def test_mixup_enabled_turns_the_batch_stage_off_as_timms_mixup_off_epoch(folder):
    mix = " | mixup_cutmix(mixup_alpha=1.0, cutmix_alpha=1.0, label_smoothing=0.1, num_classes=3)"
    with loader_on(folder, EVAL_PIPE + mix, drop_last=True) as loader:
        assert loader.mixup_enabled is True
        loader.mixup_enabled = False  # train.py: if loader.mixup_enabled: loader.mixup_enabled = False
        assert loader.mixup_enabled is False
        images, targets = next(iter(loader))
        for row, i in enumerate(loader.last_batch.sample_indices):
            image, label = loader.dataset[i]
            np.testing.assert_array_equal(images[row], image)
            assert targets[row].argmax() == label and targets[row].max() == np.float32(1 - 0.1 + 0.1 / 3)
    with loader_on(folder, EVAL_PIPE) as loader:
        assert loader.mixup_enabled is False
        loader.mixup_enabled = False  # nothing to turn off: as timm's loader without a Mixup collate
        with pytest.raises(ValueError, match="no mixup_cutmix"):
            loader.mixup_enabled = True
