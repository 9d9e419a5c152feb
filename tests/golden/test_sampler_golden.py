"""The sampler against torch.utils.data.DistributedSampler: padding,
truncation and the strided split across ranks must give identical index
lists. The default permutation is ours (Philox), so for shuffle=True torch's
randperm is replaced by our world_size=1 permutation and everything else
must match; with permutation=torch the lists must equal DistributedSampler's
as they are, torch's own randperm included."""
import itertools
import os
import subprocess
import sys

import pytest
import torch
from torch.utils.data import DistributedSampler

SIZES = list(range(1, 51)) + [1000]
WORLD_SIZES = range(1, 6)


def tv_indices(n, world_size, rank, shuffle, drop_last, seed=0, epoch=0):
    s = DistributedSampler(range(n), num_replicas=world_size, rank=rank, shuffle=shuffle,
                           seed=seed, drop_last=drop_last)
    s.set_epoch(epoch)
    out = list(s)
    assert len(out) == len(s)
    return out


def cases():
    for n in SIZES:
        for world in WORLD_SIZES:
            for drop_last in (False, True):
                if drop_last and n < world:
                    continue  # see test_drop_last_with_fewer_samples_than_ranks
                yield n, world, drop_last


def test_unshuffled_lists_equal_distributed_sampler(shim):
    bad = []
    for n, world, drop_last in cases():
        for rank in range(world):
            want = tv_indices(n, world, rank, False, drop_last)
            got = shim.sampler(n, False, 0, 0, rank, world, drop_last)
            if got != want:
                bad.append(f"n={n} world={world} rank={rank} drop_last={drop_last}: "
                           f"got {got[:12]}, torch {want[:12]}")
    assert not bad, f"{len(bad)} mismatches:\n" + "\n".join(bad[:10])


def test_shuffled_lists_equal_distributed_sampler_given_our_permutation(shim, monkeypatch):
    seed, epoch = 1234, 3
    bad = []
    for n, world, drop_last in cases():
        perm = shim.sampler(n, True, seed, epoch, 0, 1, False)
        assert sorted(perm) == list(range(n))
        calls = []

        def randperm(size, *args, _perm=perm, **kwargs):
            assert size == len(_perm)
            calls.append(size)
            return torch.tensor(_perm, dtype=torch.int64)

        monkeypatch.setattr(torch, "randperm", randperm)
        for rank in range(world):
            want = tv_indices(n, world, rank, True, drop_last, seed, epoch)
            got = shim.sampler(n, True, seed, epoch, rank, world, drop_last)
            if got != want:
                bad.append(f"n={n} world={world} rank={rank} drop_last={drop_last}: "
                           f"got {got[:12]}, torch {want[:12]}")
        monkeypatch.undo()
        assert calls, "DistributedSampler did not call torch.randperm"
    assert not bad, f"{len(bad)} mismatches:\n" + "\n".join(bad[:10])


def test_torch_permutation_equals_distributed_sampler(shim):
    bad = []
    for (n, world, drop_last), (seed, epoch) in zip(cases(), itertools.cycle(
            [(0, 0), (1234, 3), (2**32 + 7, 1), (2**63, 11), (99, 250)])):
        for rank in range(world):
            want = tv_indices(n, world, rank, True, drop_last, seed, epoch)
            got = shim.sampler(n, True, seed, epoch, rank, world, drop_last, permutation="torch")
            if got != want:
                bad.append(f"n={n} world={world} rank={rank} drop_last={drop_last} seed={seed} "
                           f"epoch={epoch}: got {got[:12]}, torch {want[:12]}")
    assert not bad, f"{len(bad)} mismatches:\n" + "\n".join(bad[:10])


@pytest.mark.parametrize("n", [624 * 3 + 5, 200_000])
def test_torch_permutation_equals_torch_randperm_past_the_generator_state(shim, n):
    """Long enough to regenerate MT19937's 624-word state many times."""
    g = torch.Generator()
    g.manual_seed(7 + 2)
    assert shim.sampler(n, True, 7, 2, 0, 1, False, permutation="torch") == \
        torch.randperm(n, generator=g).tolist()


def test_ranks_cover_the_dataset_disjointly_without_padding(shim):
    for n, world in [(1000, 4), (48, 3), (10, 5)]:
        lists = [shim.sampler(n, True, 5, 0, r, world, False) for r in range(world)]
        flat = [i for lst in lists for i in lst]
        assert sorted(flat) == list(range(n))


@pytest.mark.parametrize("n", [1, 2, 7, 50, 1000])
def test_permutation_is_a_permutation_that_changes_with_epoch_and_repeats(shim, n):
    p0 = shim.sampler(n, True, 42, 0, 0, 1, False)
    assert sorted(p0) == list(range(n))
    assert shim.sampler(n, True, 42, 0, 0, 1, False) == p0  # same (seed, epoch): same order
    if n >= 7:
        epochs = [shim.sampler(n, True, 42, e, 0, 1, False) for e in range(1, 6)]
        assert all(p != p0 for p in epochs)
        assert shim.sampler(n, True, 43, 0, 0, 1, False) != p0  # the seed matters too
        assert p0 != list(range(n))


def test_permutation_is_roughly_uniform(shim):
    """Each index lands in each position about equally often over epochs."""
    n, epochs = 8, 4000
    counts = [[0] * n for _ in range(n)]
    for e in range(epochs):
        for pos, i in enumerate(shim.sampler(n, True, 9, e, 0, 1, False)):
            counts[i][pos] += 1
    expected = epochs / n
    worst = max(abs(c - expected) for row in counts for c in row)
    assert worst < 6 * (expected * (1 - 1 / n)) ** 0.5, worst


def test_drop_last_with_fewer_samples_than_ranks(shim):
    """DistributedSampler gives every rank 0 samples when drop_last and
    n < world_size. Run in a child process: the library may crash here."""
    code = (
        "import ctypes, os, sys\n"
        "import numpy as np\n"
        "lib = ctypes.CDLL(os.environ['FF_SHIM'])\n"
        "f = lib.ff_shim_sampler\n"
        "f.restype = ctypes.c_long\n"
        "f.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_int, ctypes.c_uint64, ctypes.c_uint64,"
        " ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]\n"
        "for n, w in [(1, 2), (1, 3), (2, 3), (4, 5)]:\n"
        "    for rank in range(w):\n"
        "        perm = np.zeros(n, np.int64); out = np.zeros(n + w, np.int64)\n"
        "        c = f(n, 0, 0, 0, 0, rank, w, 1, perm.ctypes.data, out.ctypes.data)\n"
        "        print(n, w, rank, c, flush=True)\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ), timeout=60)
    want = "".join(f"{n} {w} {r} {len(tv_indices(n, w, r, False, True))}\n"
                   for n, w in [(1, 2), (1, 3), (2, 3), (4, 5)] for r in range(w))
    assert res.returncode == 0, (
        f"ff_shim_sampler(n < world_size, drop_last=1) died with status {res.returncode} "
        f"(torch gives 0 samples per rank); output before the crash:\n{res.stdout}{res.stderr}")
    assert res.stdout == want
