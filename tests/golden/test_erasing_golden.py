"""random_erasing on the normalized float output against torchvision's
RandomErasing and timm's RandomErasing (modes const / rand / pixel,
min_count / max_count): the boxes and fills our planner draws replayed
through torchvision.transforms.functional.erase (bit-exact), the noise
against the standard normal (KS), and the distributions of the draws —
probability, box sizes and positions, box counts — against torchvision's
get_params and timm's own draws (chi-square, KS). The boxes come from
ff_shim_plan_erase_boxes (tests/shim/shim.c)."""
import collections
import ctypes
import math
import random

import numpy as np
import pytest
import torch
import torchvision.transforms as T
import torchvision.transforms.functional as TF

from conftest import make_image
from test_policy_golden import check_chi2, check_ks, chi2_one_sample, chi2_two_sample, ks_one_sample, ks_two_sample

torch.set_num_threads(1)
BASE = "decode | random_resized_crop(size=(48, 64)) | normalize(mean=imagenet, std=imagenet)"
N = 3000


class Boxes:
    def __init__(self, lib):
        f = lib.ff_shim_plan_erase_boxes
        f.restype = ctypes.c_int
        f.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.c_uint64, ctypes.c_uint64,
                      ctypes.c_uint64, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_float), ctypes.c_int]
        self.f = f
        self.boxes = (ctypes.c_int * 64)()
        self.fills = (ctypes.c_float * 48)()

    def __call__(self, pipeline, h, w, seed=0, index=0):
        n = self.f(pipeline.encode(), h, w, seed, 0, index, self.boxes, self.fills, 16)
        assert n >= 0, f"{pipeline}: status {n}"
        return [(tuple(self.boxes[4 * k: 4 * k + 4]), tuple(self.fills[3 * k: 3 * k + 3])) for k in range(n)]


@pytest.fixture(scope="module")
def boxes(shim):
    if not hasattr(shim.lib, "ff_shim_plan_erase_boxes"):
        pytest.skip("libff_shim lacks ff_shim_plan_erase_boxes")
    return Boxes(shim.lib)


def images(n, seed=0):
    rng = np.random.default_rng(seed)
    for i in range(n):
        h, w = (int(x) for x in rng.integers(50, 120, 2))
        yield i, make_image(rng, h, w, "noise")


@pytest.mark.parametrize("erasing", ["random_erasing(p=0.7, value=(0.5, -1, 2))", "random_erasing(p=1, value=3)",
                                     "random_erasing(p=0.9, mode=const, max_count=3)",
                                     "random_erasing(p=0.9, mode=rand, min_count=2, max_count=4)"])
def test_constant_fills_replayed_through_torchvision_erase(shim, boxes, erasing):
    erased = 0
    for i, img in images(40):
        base = torch.from_numpy(shim.run(BASE, img, seed=1, index=i))
        got = shim.run(f"{BASE} | {erasing}", img, seed=1, index=i)
        want = base.clone()
        for (x, y, w, h), fill in boxes(f"{BASE} | {erasing}", img.shape[0], img.shape[1], seed=1, index=i):
            want = TF.erase(want, y, x, h, w, torch.tensor(fill)[:, None, None])
            erased += 1
        assert torch.equal(torch.from_numpy(got), want), f"{erasing} sample {i}"
    assert erased > 20


@pytest.mark.parametrize("erasing", ["random_erasing(p=1, value=random)", "random_erasing(p=1, mode=pixel, max_count=2)"])
def test_noise_is_standard_normal_and_only_in_the_boxes(shim, boxes, erasing):
    noise = []
    for i, img in images(40, seed=2):
        base = shim.run(BASE, img, seed=1, index=i)
        got = shim.run(f"{BASE} | {erasing}", img, seed=1, index=i)
        inside = np.zeros(base.shape[1:], bool)
        for (x, y, w, h), fill in boxes(f"{BASE} | {erasing}", img.shape[0], img.shape[1], seed=1, index=i):
            assert all(math.isnan(f) for f in fill)
            inside[y:y + h, x:x + w] = True
        np.testing.assert_array_equal(got[:, ~inside], base[:, ~inside])
        noise.extend(got[:, inside].ravel().tolist())
    d, crit = ks_one_sample(noise[:20000], lambda x: 0.5 * (1 + np.vectorize(math.erf)(x / math.sqrt(2))))
    check_ks(f"{erasing}: noise vs N(0, 1)", d, crit)


def test_erasing_needs_the_float_output(shim):
    from conftest import FFError
    with pytest.raises(FFError) as e:
        shim.run("decode | center_crop(size=8) | random_erasing", np.zeros((8, 8, 3), np.uint8))
    assert "column 32:" in e.value.message and "after normalize" in e.value.message
    with pytest.raises(FFError) as e:
        shim.run("decode | center_crop(size=8) | to_dtype | random_erasing(mode=pixel, value=1)",
                 np.zeros((8, 8, 3), np.uint8))
    assert "column 43:" in e.value.message and "one of them" in e.value.message


def test_torchvision_boxes_follow_get_params(boxes):
    ours, theirs = collections.defaultdict(list), collections.defaultdict(list)
    hits = collections.Counter()
    text = f"{BASE} | random_erasing(p=0.5, scale=(0.02, 0.33), ratio=(0.3, 3.3))"
    for i in range(N):
        b = boxes(text, 100, 100, seed=5, index=i)
        hits[len(b)] += 1
        for (x, y, w, h), _ in b:
            for k, v in zip("xywh", (x, y, w, h)):
                ours[k].append(v)
    stat, df = chi2_one_sample(hits, {0: 0.5, 1: 0.5})  # a box of 48x64 fails all 10 attempts very rarely
    check_chi2("random_erasing p=0.5", stat, df)
    torch.manual_seed(0)
    img = torch.zeros(3, 48, 64)
    while len(theirs["x"]) < len(ours["x"]):
        y, x, h, w, _ = T.RandomErasing.get_params(img, scale=(0.02, 0.33), ratio=(0.3, 3.3), value=[0])
        if (h, w) == (48, 64):
            continue  # get_params's "no box" answer
        for k, v in zip("xywh", (x, y, w, h)):
            theirs[k].append(v)
    for k in "xywh":
        d, crit = ks_two_sample(ours[k], theirs[k])
        check_ks(f"random_erasing box {k} vs torchvision's get_params", d, crit)


def timm_boxes(n, **kw):
    """Boxes timm's RandomErasing draws on a 3x48x64 tensor: (count, [(h, w)])."""
    import timm.data.random_erasing as RE
    sizes = []
    real = RE._get_pixels

    def spy(per_pixel, rand_color, patch_size, dtype=torch.float32, device="cpu"):
        sizes.append(tuple(patch_size[1:]))
        return real(per_pixel, rand_color, patch_size, dtype=dtype, device=device)

    RE._get_pixels = spy
    try:
        random.seed(0)
        torch.manual_seed(0)
        er = RE.RandomErasing(device="cpu", **kw)
        counts = collections.Counter()
        for _ in range(n):
            before = len(sizes)
            er(torch.zeros(3, 48, 64))
            counts[len(sizes) - before] += 1
    finally:
        RE._get_pixels = real
    return counts, sizes


@pytest.mark.parametrize("mode,lo,hi", [("pixel", 1, 1), ("const", 1, 3), ("rand", 2, 4)])
def test_timm_counts_and_sizes_follow_timm(boxes, mode, lo, hi):
    text = f"{BASE} | random_erasing(p=0.6, mode={mode}, min_count={lo}, max_count={hi})"
    ours = collections.Counter()
    sizes = []
    for i in range(N):
        b = boxes(text, 100, 100, seed=6, index=i)
        ours[len(b)] += 1
        sizes.extend((h, w) for (x, y, w, h), _ in b)
    counts, theirs = timm_boxes(N, probability=0.6, mode=mode, min_count=lo, max_count=hi)
    stat, df = chi2_two_sample(ours, counts)
    check_chi2(f"timm random_erasing {mode} count in [{lo}, {hi}] vs timm", stat, df)
    for k, name in enumerate("hw"):
        d, crit = ks_two_sample([s[k] for s in sizes], [s[k] for s in theirs])
        check_ks(f"timm random_erasing {mode} box {name} vs timm", d, crit)
