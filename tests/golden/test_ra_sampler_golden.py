"""Repeated augmentation against timm's RepeatAugSampler (DeiT's RASampler):
the index lists must be identical for every combination of data set size
(below and above its selected_round of 256), world size, rank, shuffle,
repeat count and epoch. RepeatAugSampler seeds torch.randperm with the epoch
alone, which is permutation=torch with seed 0."""
import ctypes

import numpy as np
import pytest

timm_sampler = pytest.importorskip("timm.data.distributed_sampler")

SIZES = list(range(1, 21)) + [255, 256, 257, 300, 513, 1000]
WORLDS = (1, 2, 3, 4, 8)
REPEATS = (1, 2, 3, 4)


@pytest.fixture(scope="module")
def ra(shim):
    f = shim.lib.ff_shim_ra_sampler
    f.restype = ctypes.c_long
    f.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_int, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int,
                  ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]

    def run(n, shuffle, epoch, rank, world, repeats, permutation=1, seed=0):
        perm = np.zeros(n, np.int64)
        out = np.zeros(n * repeats + world, np.int64)
        rep = np.zeros(n * repeats + world, np.uint32)
        count = f(n, int(shuffle), permutation, seed, epoch, rank, world, repeats, perm.ctypes.data,
                  out.ctypes.data, rep.ctypes.data)
        return out[:count].tolist(), rep[:count].tolist()
    return run


def timm_indices(n, shuffle, epoch, rank, world, repeats):
    s = timm_sampler.RepeatAugSampler(range(n), num_replicas=world, rank=rank, shuffle=shuffle, num_repeats=repeats)
    s.set_epoch(epoch)
    out = list(s)
    assert len(out) == len(s)
    return out


def test_index_lists_equal_repeat_aug_sampler(ra):
    bad = []
    for n in SIZES:
        for world in WORLDS:
            for repeats in REPEATS:
                for shuffle in (False, True):
                    for epoch in ((0, 3) if shuffle else (0,)):
                        for rank in range(world):
                            got, _ = ra(n, shuffle, epoch, rank, world, repeats)
                            want = timm_indices(n, shuffle, epoch, rank, world, repeats)
                            if got != want:
                                bad.append(f"n={n} world={world} rank={rank} repeats={repeats} shuffle={shuffle} "
                                           f"epoch={epoch}: got {got[:10]} timm {want[:10]}")
    assert not bad, f"{len(bad)} mismatches:\n" + "\n".join(bad[:10])


def test_each_copy_has_its_own_repeat_number(ra):
    # one rank: the copies of a sample come in a row, numbered 0 .. repeats - 1
    got, rep = ra(300, True, 1, 0, 1, 3)
    assert len(got) == 256  # num_selected_samples: 300 // 256 * 256 / 1
    for k in range(0, 255, 3):
        assert got[k] == got[k + 1] == got[k + 2] and rep[k:k + 3] == [0, 1, 2]
    # as many ranks as repeats: each rank gets one copy of each sample, copy r on rank r
    for rank in range(3):
        got, rep = ra(20, True, 0, rank, 3, 3)
        assert set(rep) == {rank}


def test_philox_permutation_keeps_the_repeat_structure(ra):
    got, rep = ra(40, True, 2, 1, 2, 2, permutation=0, seed=9)
    torch_got, _ = ra(40, True, 2, 1, 2, 2)
    assert got != torch_got and len(got) == len(torch_got) == 20 and set(rep) == {1}
