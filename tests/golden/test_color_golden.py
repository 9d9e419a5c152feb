"""The colour augmentation ops (ops/color.c) against
torchvision.transforms.functional on uint8 CHW tensors: adjust_brightness,
adjust_saturation, adjust_contrast, adjust_sharpness, posterize, solarize,
autocontrast, equalize, invert. Hundreds of random images per op (1x1 to
100x100, thin, tiny and odd sizes; constant, two-valued, narrow-range,
noise, gradients) with random parameters and the policies' table values
(spec section 3.2: factors 1 +- m for the float32 magnitudes, posterize
0..8 bits, solarize thresholds incl. 255, 0 and fractions), plus fused runs
of table ops against torchvision applied one by one.

The spec's formulas are bit-exact (contrast's mean only while the gray sum
stays below 2^24, always true at these sizes): the table ops must match
exactly, the blend ops are allowed one level and the share of differing
values is reported in the summary table (expected 0)."""
import ctypes
import warnings

import numpy as np
from conftest import make_image
import pytest
import torch
import torchvision.transforms.functional as TF

torch.set_num_threads(1)
warnings.filterwarnings("ignore", category=UserWarning, module="torchvision")

# ff__aug_op values (src/ops/augment.h)
OPS = {"brightness": 6, "color": 7, "contrast": 8, "sharpness": 9, "posterize": 10,
       "solarize": 11, "autocontrast": 12, "equalize": 13, "invert": 14}
LUT_OPS = ("brightness", "posterize", "solarize", "invert", "autocontrast", "equalize")
BLEND_OPS = ("brightness", "color", "contrast", "sharpness")

REFERENCE = {
    "brightness": TF.adjust_brightness,
    "color": TF.adjust_saturation,
    "contrast": TF.adjust_contrast,
    "sharpness": TF.adjust_sharpness,
    "posterize": TF.posterize,
    "solarize": TF.solarize,
    "autocontrast": lambda t, _: TF.autocontrast(t),
    "equalize": lambda t, _: TF.equalize(t),
    "invert": lambda t, _: TF.invert(t),
}

CASES_PER_OP = 300
SPECIAL_SIZES = [(1, 1), (2, 2), (3, 3), (17, 16), (16, 17), (2, 9), (9, 2), (3, 40), (40, 3),
                 (1, 60), (60, 1), (15, 17), (100, 100), (64, 97)]
KINDS = ("constant", "two_valued", "narrow", "noise", "gradient")


def _magnitudes():
    """The float32 magnitude tables of the policies (spec 3.2) as doubles."""
    out = set()
    for hi, n in ((0.9, 31), (0.99, 31), (0.9, 10)):
        out.update(torch.linspace(0.0, hi, n).tolist())
    return sorted(out)


MAGNITUDES = _magnitudes()
SOLARIZE_TABLE = sorted(set(torch.linspace(255.0, 0.0, 31).tolist())
                        | set(torch.linspace(255.0, 0.0, 10).tolist()))


@pytest.fixture(scope="module")
def lib(shim):
    lib = shim.lib
    if not hasattr(lib, "ff_shim_aug_color"):
        pytest.skip("the shim has no colour ops")
    lib.ff_shim_aug_color.restype = ctypes.c_int
    lib.ff_shim_aug_color.argtypes = [ctypes.c_int, ctypes.c_double, ctypes.c_void_p,
                                      ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
    lib.ff_shim_aug_lut_run.restype = ctypes.c_int
    lib.ff_shim_aug_lut_run.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int,
                                        ctypes.c_void_p, ctypes.c_int, ctypes.c_int,
                                        ctypes.c_void_p]
    return lib


def ff_op(lib, name, arg, img):
    img = np.ascontiguousarray(img, np.uint8)
    h, w = img.shape[:2]
    out = np.empty_like(img)
    st = lib.ff_shim_aug_color(OPS[name], float(arg), img.ctypes.data, h, w, out.ctypes.data)
    assert st == 0, f"{name}({arg}) on {h}x{w}: status {st}"
    return out


def ff_lut_run(lib, seq, img):
    img = np.ascontiguousarray(img, np.uint8)
    h, w = img.shape[:2]
    ops = np.array([OPS[name] for name, _ in seq], np.int32)
    args = np.array([float(arg) for _, arg in seq], np.float64)
    out = np.empty_like(img)
    st = lib.ff_shim_aug_lut_run(ops.ctypes.data, args.ctypes.data, len(seq), img.ctypes.data,
                                 h, w, out.ctypes.data)
    assert st == 0, f"lut run {seq}: status {st}"
    return out


def tv_op(name, arg, img):
    """torchvision on the CHW tensor of an HWC image; returns HWC."""
    t = torch.from_numpy(np.ascontiguousarray(img.transpose(2, 0, 1)))
    return REFERENCE[name](t, arg).numpy().transpose(1, 2, 0)


def random_size(rng, i):
    if i < len(SPECIAL_SIZES):
        return SPECIAL_SIZES[i]
    return tuple(int(v) for v in rng.integers(1, 101, 2))


def random_arg(rng, name):
    if name in BLEND_OPS:
        r = rng.random()
        if r < 0.6:  # a policy factor: 1 + m or 1 - m, formed in double
            m = MAGNITUDES[rng.integers(len(MAGNITUDES))]
            return 1.0 + m if rng.random() < 0.5 else 1.0 - m
        if r < 0.8:
            return float(rng.uniform(0.0, 2.0))
        return float(rng.choice([0.0, 1.0, 0.5, 2.0, 3.7, 10.0]))
    if name == "posterize":
        return int(rng.integers(0, 9))
    if name == "solarize":
        r = rng.random()
        if r < 0.4:
            return SOLARIZE_TABLE[rng.integers(len(SOLARIZE_TABLE))]
        if r < 0.7:
            return float(rng.integers(0, 256))
        if r < 0.85:
            return float(rng.integers(0, 255)) + 0.5
        return float(rng.uniform(0.0, 255.0))
    return 0


def compare(stats, key, got, want, exact):
    stats(key).add(got, want)
    d = np.abs(got.astype(np.int16) - want.astype(np.int16))
    limit = 0 if exact else 1
    assert int(d.max(initial=0)) <= limit, (key, int(d.max()), np.argwhere(d > limit)[:5])


@pytest.mark.parametrize("name", list(OPS))
def test_single_op_matches_torchvision(lib, stats, name):
    rng = np.random.default_rng(1000 + OPS[name])
    for i in range(CASES_PER_OP):
        h, w = random_size(rng, i)
        img = make_image(rng, h, w, KINDS[i % len(KINDS)])
        arg = random_arg(rng, name)
        got = ff_op(lib, name, arg, img)
        want = tv_op(name, arg, img)
        compare(stats, f"color/{name}", got, want, exact=name not in BLEND_OPS)


def test_policy_factors_on_all_values(lib, stats):
    """Every (value, factor) pair of the policy tables through the blend
    ops: an image holding all 256 values in each channel (with neutral
    grays and pure colours), each factor 1 +- m."""
    v = np.arange(256, dtype=np.uint8)
    rows = [np.stack([v, v, v], -1), np.stack([v, v[::-1], np.roll(v, 85)], -1),
            np.stack([v, np.zeros_like(v), np.full_like(v, 255)], -1)]
    img = np.stack(rows, 0)  # 3 x 256 x 3
    for m in MAGNITUDES:
        for f in (1.0 + m, 1.0 - m):
            for name in BLEND_OPS:
                compare(stats, f"color/{name} (policy factors)", ff_op(lib, name, f, img),
                        tv_op(name, f, img), exact=False)


def test_fused_lut_runs_match_torchvision_one_by_one(lib, stats):
    rng = np.random.default_rng(77)
    for i in range(400):
        h, w = random_size(rng, i)
        img = make_image(rng, h, w, KINDS[i % len(KINDS)])
        n = int(rng.integers(1, 7))
        seq = []
        for _ in range(n):
            if seq and rng.random() < 0.25:
                seq.append(seq[-1])  # a repeat
            else:
                name = LUT_OPS[rng.integers(len(LUT_OPS))]
                seq.append((name, random_arg(rng, name)))
        want = img
        for name, arg in seq:
            want = tv_op(name, arg, want)
        got = ff_lut_run(lib, seq, img)
        compare(stats, "color/fused lut run", got, want, exact=True)


def test_autocontrast_every_range(lib, stats):
    """Every (lo, hi) pair, three per image (one per channel): the scale is
    torch's reciprocal-then-multiply, which sends the maximum to 254 for
    3,263 of the 32,640 pairs."""
    pairs = [(lo, hi) for lo in range(256) for hi in range(lo + 1, 256)]
    ramp = np.arange(256)
    for k in range(0, len(pairs), 3):
        group = (pairs[k:k + 3] * 3)[:3]
        img = np.stack([np.clip(ramp, lo, hi) for lo, hi in group], -1).astype(np.uint8)[None]
        compare(stats, "color/autocontrast (all ranges)", ff_op(lib, "autocontrast", 0, img),
                tv_op("autocontrast", 0, img), exact=True)


def test_golden_rows_of_the_spec(lib):
    """Section 8's checksums (sum over planar CHW bytes) for the colour ops."""
    y, x = np.mgrid[0:24, 0:32]
    img = np.stack([(8 * x + 3 * y) % 256, (5 * x * y + 17) % 256,
                    (x * x + 2 * y * y + 40) % 256], -1).astype(np.uint8)
    m27 = 0.26999998092651367
    rows = [("brightness", 1 + m27, 344135), ("brightness", 1 - m27, 206270),
            ("color", 1.9, 287470), ("color", 1 - m27, 281254),
            ("contrast", 1 + m27, 284864), ("contrast", 0.1, 277140),
            ("sharpness", 1 + m27, 283856), ("sharpness", 0.01, 282176),
            ("sharpness", 1.99, 284973), ("posterize", 4, 267264), ("posterize", 2, 212416),
            ("posterize", 0, 0), ("solarize", 178.5, 168626), ("solarize", 238.0, 247612),
            ("solarize", 0.0, 303424), ("autocontrast", 0, 284102), ("equalize", 0, 357650),
            ("invert", 0, 303424)]
    for name, arg, want in rows:
        assert int(ff_op(lib, name, arg, img).astype(np.int64).sum()) == want, (name, arg)
