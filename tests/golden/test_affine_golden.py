"""The geometric augmentation ops (ShearX/Y, TranslateX/Y, Rotate) against
torchvision (transforms v1), called exactly as the policies call them
(torchvision.transforms.autoaugment._apply_op on uint8 CHW tensors), and
F.rotate directly: random sizes from 1x1 to ~120x100, random / gradient /
constant / striped images, random magnitudes and the policies' table values,
nearest and bilinear, with and without a fill colour (integer and not)."""
import ctypes
import math
import zlib

import numpy as np
import pytest
import torch
import torchvision.transforms.functional as F
from torchvision.transforms import InterpolationMode
from torchvision.transforms.autoaugment import _apply_op

OPS = {"ShearX": 1, "ShearY": 2, "TranslateX": 3, "TranslateY": 4, "Rotate": 5}
MODES = {"nearest": InterpolationMode.NEAREST, "bilinear": InterpolationMode.BILINEAR}
SIZES = [(1, 1), (2, 2), (1, 2), (2, 1), (3, 3), (1, 7), (9, 1), (2, 5), (4, 4), (5, 6), (24, 32),
         (31, 17), (64, 64), (100, 120), (120, 100), (7, 90), (97, 3), (33, 33), (50, 51)]
CASES_PER_TEST = 150


@pytest.fixture(scope="module")
def affine(shim):
    fn = shim.lib.ff_shim_aug_affine
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_int, ctypes.c_double, ctypes.c_int, ctypes.c_int, ctypes.c_void_p,
                   ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_void_p]

    def run(op, arg, bilinear, fill, img_hwc):
        img_hwc = np.ascontiguousarray(img_hwc, np.uint8)
        h, w = img_hwc.shape[:2]
        out = np.zeros_like(img_hwc)
        fill3 = np.array(fill if fill is not None else [0, 0, 0], np.float32)
        st = fn(OPS[op], float(arg), int(bilinear), int(fill is not None), fill3.ctypes.data,
                img_hwc.ctypes.data, h, w, out.ctypes.data)
        assert st == 0
        return out

    return run


def make_image(rng, h, w):
    kind = rng.randint(4)
    if kind == 0:
        return rng.randint(0, 256, (h, w, 3)).astype(np.uint8)
    if kind == 1:
        y, x = np.mgrid[0:h, 0:w]
        ch = [(x * rng.randint(1, 9) + y * rng.randint(1, 9) + rng.randint(256)) % 256 for _ in range(3)]
        return np.stack(ch, -1).astype(np.uint8)
    if kind == 2:
        return np.broadcast_to(rng.randint(0, 256, 3), (h, w, 3)).astype(np.uint8)
    img = np.zeros((h, w, 3), np.uint8)  # bright stripes on black: sharp edges
    img[:, :: max(1, rng.randint(1, 5))] = 255
    img[:: max(1, rng.randint(1, 5))] //= 2
    return img


def table_values(op, h, w):
    """The magnitudes the policies draw for op on an h x w image (float32
    tables, as `.item()` hands them to _apply_op)."""
    lin = lambda hi, n: torch.linspace(0.0, hi, n).tolist()
    if op in ("ShearX", "ShearY"):
        return lin(0.3, 31) + lin(0.99, 31) + lin(0.3, 10)
    if op == "TranslateX":
        return lin(150.0 / 331.0 * w, 31) + lin(32.0, 31) + lin(w / 3.0, 10)
    if op == "TranslateY":
        return lin(150.0 / 331.0 * h, 31) + lin(32.0, 31) + lin(h / 3.0, 10)
    return lin(30.0, 31) + lin(135.0, 31) + lin(30.0, 10)


def random_magnitude(rng, op, h, w):
    if rng.rand() < 0.5:
        vals = table_values(op, h, w)
        m = vals[rng.randint(len(vals))]
    elif op in ("ShearX", "ShearY"):
        m = rng.uniform(0, 0.99)
    elif op.startswith("Translate"):
        m = rng.choice([rng.uniform(0, 101.5), rng.uniform(0, 3), -30.45 * -1, 101.5])
    else:
        m = rng.uniform(0, 135)
    return -m if rng.rand() < 0.5 else m


def random_fill(rng, kind):
    if kind == "nofill":
        return None
    if kind == "fill":
        return [float(v) for v in rng.randint(0, 256, 3)]
    return [float(np.float32(v)) for v in rng.uniform(0, 255, 3)]  # non-integer


def compare(stats, name, got, want):
    stats(name).add(got, want)
    diff = np.abs(got.astype(int) - want.astype(int))
    assert diff.max(initial=0) <= 1, (name, int(diff.max()), np.argwhere(diff > 1)[:5].tolist())
    return int(np.count_nonzero(diff))


@pytest.mark.parametrize("fill_kind", ["nofill", "fill", "fracfill"])
@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("op", list(OPS))
def test_apply_op_matches_torchvision(affine, stats, op, mode, fill_kind):
    rng = np.random.RandomState(zlib.crc32(f"{op} {mode} {fill_kind}".encode()))
    name = f"affine {op} {mode} {fill_kind}"
    differing = values = 0
    for case in range(CASES_PER_TEST):
        if case < len(SIZES):
            h, w = SIZES[case]
        else:
            h, w = int(rng.randint(1, 121)), int(rng.randint(1, 121))
        img = make_image(rng, h, w)
        m = random_magnitude(rng, op, h, w)
        fill = random_fill(rng, fill_kind)
        want = _apply_op(torch.from_numpy(img).permute(2, 0, 1).contiguous(), op, m, MODES[mode], fill)
        want = want.permute(1, 2, 0).numpy()
        got = affine(op, m, mode == "bilinear", fill, img)
        differing += compare(stats, name, got, want)
        values += got.size
    limit = 0 if mode == "nearest" else 0.0005
    assert differing <= limit * values, (name, differing, values)


@pytest.mark.parametrize("mode", list(MODES))
def test_rotate_matches_functional_rotate(affine, stats, mode):
    rng = np.random.RandomState(7 if mode == "nearest" else 8)
    name = f"affine F.rotate {mode}"
    differing = values = 0
    for case in range(80):
        h, w = SIZES[case % len(SIZES)] if case < 2 * len(SIZES) else (rng.randint(1, 121), rng.randint(1, 121))
        img = make_image(rng, int(h), int(w))
        angle = float(rng.choice([90.0, -90.0, 180.0, 45.0, 270.0, rng.uniform(-360, 360)]))
        fill = random_fill(rng, ["nofill", "fill", "fracfill"][case % 3])
        want = F.rotate(torch.from_numpy(img).permute(2, 0, 1).contiguous(), angle,
                        interpolation=MODES[mode], fill=fill).permute(1, 2, 0).numpy()
        got = affine("Rotate", angle, mode == "bilinear", fill, img)
        differing += compare(stats, name, got, want)
        values += got.size
    limit = 0 if mode == "nearest" else 0.0005
    assert differing <= limit * values, (name, differing, values)


def test_translate_truncates_toward_zero(affine):
    img = np.random.RandomState(3).randint(0, 256, (20, 50, 3)).astype(np.uint8)
    for m in (-30.45, 30.99, -0.7, 0.7, 1e9, -1e9):
        want = _apply_op(torch.from_numpy(img).permute(2, 0, 1).contiguous(), "TranslateX", m,
                         InterpolationMode.NEAREST, None).permute(1, 2, 0).numpy()
        assert np.array_equal(affine("TranslateX", m, False, None, img), want), m
    assert math.trunc(-30.45) == -30


@pytest.mark.parametrize("h,w,fill", [(3, 5, [10.5, 200.5, 0.5]), (40, 31, [127.45, 64.6, 3.5]),
                                      (5, 2100, [9.0, 99.0, 199.0]), (3, 4200, None), (4200, 2, None)])
@pytest.mark.parametrize("op", ["TranslateX", "TranslateY"])
def test_translate_general_path(affine, stats, op, h, w, fill):
    """Translations the row copy does not cover (a fill near k + 0.5 with
    bilinear, very large sides) go through the warp and still match."""
    rng = np.random.RandomState(h * 7 + w)
    for mode in MODES:
        for m in (-(w // 2) - 0.5, 1.0, 7.9, -3.2, float(h), -float(w - 1)):
            img = make_image(rng, h, w)
            want = _apply_op(torch.from_numpy(img).permute(2, 0, 1).contiguous(), op, m, MODES[mode],
                             fill).permute(1, 2, 0).numpy()
            got = affine(op, m, mode == "bilinear", fill, img)
            compare(stats, f"affine {op} {mode} general path", got, want)
            assert np.array_equal(got, want), (op, mode, m)


@pytest.mark.parametrize("op", ["ShearX", "ShearY", "Rotate"])
def test_zero_magnitude_is_exact(affine, stats, op):
    """AugMix draws magnitude 0 for a third of its geometric ops; a shear or
    rotation by 0 (or -0) is run as a copy, which must give torchvision's
    warp bit for bit at every size, with every fill, and on sides where the
    copy is not proven exact (which take the warp)."""
    rng = np.random.RandomState(zlib.crc32(f"zero {op}".encode()))
    sizes = SIZES + [(224, 224), (375, 500), (2, 2048), (2049, 3), (3, 4200)]
    for h, w in sizes:
        for mode in MODES:
            for fill_kind in ("nofill", "fill", "fracfill"):
                img = make_image(rng, h, w)
                fill = random_fill(rng, fill_kind)
                m = 0.0 if rng.rand() < 0.5 else -0.0
                want = _apply_op(torch.from_numpy(img).permute(2, 0, 1).contiguous(), op, m, MODES[mode],
                                 fill).permute(1, 2, 0).numpy()
                got = affine(op, m, mode == "bilinear", fill, img)
                compare(stats, f"affine {op} {mode} magnitude 0", got, want)
                assert np.array_equal(got, want), (op, mode, fill_kind, h, w)
