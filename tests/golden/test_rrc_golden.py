"""random_resized_crop against torchvision.transforms.RandomResizedCrop.

torch's RNG cannot be reproduced, so: the crop boxes we draw must follow the
same distribution as get_params' (area fraction, log aspect ratio, position;
two-sample Kolmogorov-Smirnov at a fixed, generous threshold), the
centre-crop fallback must be exactly torchvision's, and the pixels of the op
with our own box must be TF.resized_crop's: bit for bit with antialias,
within one level without (torch's own kernel then depends on its thread
count and the output size: see test_ops_golden.py)."""
import math
import warnings

import numpy as np
import pytest
import torch
import torchvision.transforms.functional as TF
from torchvision.transforms import InterpolationMode, RandomResizedCrop

torch.set_num_threads(1)
warnings.filterwarnings("ignore", category=UserWarning, module="torchvision")

SAMPLES = 8000
KS_C_ALPHA = 1.95  # c(alpha) for alpha = 0.001


def ks_statistic(a, b):
    """Two-sample Kolmogorov-Smirnov D = sup |F_a - F_b| (ties handled by
    evaluating both empirical CDFs at every observed value)."""
    a, b = np.sort(np.asarray(a, np.float64)), np.sort(np.asarray(b, np.float64))
    at = np.concatenate([a, b])
    fa = np.searchsorted(a, at, side="right") / a.size
    fb = np.searchsorted(b, at, side="right") / b.size
    return float(np.max(np.abs(fa - fb)))


def ks_threshold(n, m):
    return KS_C_ALPHA * math.sqrt((n + m) / (n * m))


def test_ks_statistic_sanity():
    rng = np.random.default_rng(0)
    x, y = rng.random(2000), rng.random(2000)
    assert ks_statistic(x, y) < ks_threshold(2000, 2000)
    assert ks_statistic(x, y * 0.9) > ks_threshold(2000, 2000)
    assert ks_statistic([1, 1, 2], [1, 1, 2]) == 0


def tv_boxes(h, w, scale, ratio, n, seed=0):
    """n torchvision boxes as (x, y, w, h)."""
    torch.manual_seed(seed)
    img = torch.zeros(1, h, w, dtype=torch.uint8)
    out = []
    for _ in range(n):
        i, j, bh, bw = RandomResizedCrop.get_params(img, list(scale), list(ratio))
        out.append((j, i, bw, bh))
    return np.array(out, np.int64)


def ff_boxes(shim, h, w, scale, ratio, n, seed=0, epoch=0):
    return np.array([shim.rrc_box(h, w, scale, ratio, seed, epoch, i) for i in range(n)], np.int64)


def box_features(boxes, h, w):
    x, y, bw, bh = boxes.T
    return {"area fraction": bw * bh / (h * w), "log aspect": np.log(bw / bh),
            "x": x, "y": y, "centre x": (x + bw / 2) / w, "centre y": (y + bh / 2) / h}


CASES = [  # (height, width, scale, ratio)
    (224, 224, (0.08, 1.0), (3 / 4, 4 / 3)),
    (100, 1000, (0.08, 1.0), (3 / 4, 4 / 3)),   # wide: the fallback is common
    (1000, 100, (0.08, 1.0), (3 / 4, 4 / 3)),   # tall
    (375, 500, (0.25, 0.6), (0.5, 2.0)),
    (37, 23, (0.08, 1.0), (3 / 4, 4 / 3)),      # small: heavy rounding
]


@pytest.mark.parametrize("h,w,scale,ratio", CASES,
                         ids=[f"{c[0]}x{c[1]} scale={c[2]} ratio=({c[3][0]:.3g},{c[3][1]:.3g})"
                              for c in CASES])
def test_box_distribution_matches_get_params(shim, h, w, scale, ratio):
    ours = ff_boxes(shim, h, w, scale, ratio, SAMPLES, seed=7)
    theirs = tv_boxes(h, w, scale, ratio, SAMPLES, seed=7)
    for b in (ours, theirs):  # every box lies inside the image
        assert (b[:, 0] >= 0).all() and (b[:, 1] >= 0).all()
        assert (b[:, 2] >= 1).all() and (b[:, 3] >= 1).all()
        assert (b[:, 0] + b[:, 2] <= w).all() and (b[:, 1] + b[:, 3] <= h).all()
    fo, ft = box_features(ours, h, w), box_features(theirs, h, w)
    limit = ks_threshold(len(ours), len(theirs))
    report = {k: round(ks_statistic(fo[k], ft[k]), 4) for k in fo}
    print(f"{h}x{w}: KS D = {report} (limit {limit:.4f})")
    bad = {k: d for k, d in report.items() if d > limit}
    assert not bad, f"KS statistics above {limit:.4f}: {bad}"


def fallback_box(h, w, ratio):
    """What get_params returns when all ten attempts fail."""
    return RandomResizedCrop.get_params(torch.zeros(1, h, w, dtype=torch.uint8),
                                        [0.08, 1.0], list(ratio))


@pytest.mark.parametrize("h,w,ratio", [
    (10, 2000, (3 / 4, 4 / 3)), (2000, 10, (3 / 4, 4 / 3)),
    (3, 2000, (1.0, 1.5)),       # w = round(4.5): half to even, 4
    (2000, 5, (0.4, 1.0)),       # h = round(12.5): half to even, 12
    (7, 3001, (0.5, 2.0)), (3001, 7, (0.5, 2.0)),
])
def test_fallback_box_equals_torchvision(shim, h, w, ratio):
    i, j, bh, bw = fallback_box(h, w, ratio)
    # the image is so elongated that every attempt fails: get_params is deterministic
    torch.manual_seed(123)
    assert fallback_box(h, w, ratio) == (i, j, bh, bw)
    for index in range(20):
        assert shim.rrc_box(h, w, (0.08, 1.0), ratio, 0, 0, index) == (j, i, bw, bh), index


def test_fallback_rate_matches_on_a_wide_image(shim):
    """On 100x1000 the fallback is common; its frequency must agree."""
    h, w, scale, ratio = 100, 1000, (0.08, 1.0), (3 / 4, 4 / 3)
    i, j, bh, bw = fallback_box(h, w, ratio)
    fb = np.array([j, i, bw, bh])
    ours = (ff_boxes(shim, h, w, scale, ratio, SAMPLES, seed=3) == fb).all(1).mean()
    theirs = (tv_boxes(h, w, scale, ratio, SAMPLES, seed=3) == fb).all(1).mean()
    assert 0.05 < theirs < 0.95, theirs  # the fallback is really exercised
    sigma = math.sqrt(theirs * (1 - theirs) * 2 / SAMPLES)
    assert abs(ours - theirs) < 5 * sigma, (ours, theirs)


def test_boxes_depend_on_seed_epoch_and_index_only(shim):
    a = ff_boxes(shim, 300, 400, (0.08, 1.0), (3 / 4, 4 / 3), 50, seed=1, epoch=2)
    assert (a == ff_boxes(shim, 300, 400, (0.08, 1.0), (3 / 4, 4 / 3), 50, seed=1, epoch=2)).all()
    assert len({tuple(b) for b in a}) > 45  # the index changes the box
    b = ff_boxes(shim, 300, 400, (0.08, 1.0), (3 / 4, 4 / 3), 50, seed=1, epoch=3)
    c = ff_boxes(shim, 300, 400, (0.08, 1.0), (3 / 4, 4 / 3), 50, seed=2, epoch=2)
    assert (a != b).any(1).mean() > 0.9 and (a != c).any(1).mean() > 0.9


def test_op_pixels_equal_resized_crop_of_its_box(shim, run, stats):
    """The whole op with its own box: TF.resized_crop, exactly with
    antialias, within one level without."""
    st = {True: stats("random_resized_crop (own box)"), False: stats("random_resized_crop (own box) no antialias")}
    rng = np.random.default_rng(4)
    for index in range(60):
        h, w = int(rng.integers(1, 300)), int(rng.integers(1, 300))
        size = (int(rng.integers(1, 100)), int(rng.integers(1, 100)))
        img = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        scale, ratio = (0.08, 1.0), (3 / 4, 4 / 3)
        x, y, bw, bh = shim.rrc_box(h, w, scale, ratio, 5, 1, index)
        for aa in (True, False):
            p = (f"decode | random_resized_crop(size={size}, scale={scale}, ratio={ratio}, "
                 f"antialias={'true' if aa else 'false'})")
            got = run(p, img, seed=5, epoch=1, index=index)
            want = TF.resized_crop(torch.from_numpy(img).permute(2, 0, 1), y, x, bh, bw,
                                   list(size), InterpolationMode.BILINEAR, antialias=aa)
            want = want.permute(1, 2, 0).numpy()
            if aa and size[1] == 1 and size[0] > 1:
                continue  # torch's antialiased kernel is wrong for one column (test_ops_golden.tv_resize)
            st[aa].add(got, want)
            d = np.abs(got.astype(int) - want).max()
            assert d <= (0 if aa else 1), f"{h}x{w} index {index} box {(x, y, bw, bh)} -> {size} aa={aa}: diff {d}"
    assert st[True].differing == 0 and st[False].share < 0.01
