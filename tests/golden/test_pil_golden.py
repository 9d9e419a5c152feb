"""The Pillow-semantics ops (src/ops/pil.c) against timm's own op functions
(timm.data.auto_augment, which call Pillow 13), computed here: each op at
fixed magnitudes, every resampling filter, on images of several kinds and
sizes; and the single `pil_*` pipeline ops against torchvision's functional
ops on PIL images (ColorJitter's brightness, contrast, saturation and hue,
solarize), as DINO, BYOL and DeiT III apply them. All exact
(docs/pillow-semantics.md)."""
import ctypes

import numpy as np
import pytest
from PIL import Image
import timm.data.auto_augment as taa
import torchvision.transforms.functional as F

from conftest import make_image

# ff__pil_op and ff__pil_resample (src/kernels/pil.h)
OPS = ["autocontrast", "equalize", "invert", "posterize", "solarize", "solarize_add", "color",
       "contrast", "brightness", "sharpness", "shear_x", "shear_y", "translate_x", "translate_y",
       "rotate", "hue", "gaussian_blur"]
RESAMPLE = {"nearest": Image.NEAREST, "bilinear": Image.BILINEAR, "bicubic": Image.BICUBIC}
FILL = (124, 116, 104)  # timm's img_mean for the ImageNet mean

# The timm function and the arguments it gets for each op.
TIMM = {
    "autocontrast": (taa.auto_contrast, [None]),
    "equalize": (taa.equalize, [None]),
    "invert": (taa.invert, [None]),
    "posterize": (taa.posterize, [1, 2, 3, 4, 6, 7, 8]),
    "solarize": (taa.solarize, [0, 1, 26, 128, 230, 255, 256]),
    "solarize_add": (taa.solarize_add, [0, 11, 33, 77, 110]),
    "color": (taa.color, [0.0, 0.1, 0.37, 0.5, 1.0, 1.3, 1.9, 2.5]),
    "contrast": (taa.contrast, [0.0, 0.1, 0.37, 0.5, 1.0, 1.3, 1.9, 2.5]),
    "brightness": (taa.brightness, [0.0, 0.1, 0.37, 0.5, 1.0, 1.3, 1.9, 2.5]),
    "sharpness": (taa.sharpness, [0.0, 0.1, 0.37, 0.5, 1.0, 1.3, 1.9, 2.5]),
    "shear_x": (taa.shear_x, [-0.3, -0.1371, 0.0, 0.05, 0.27]),
    "shear_y": (taa.shear_y, [-0.3, -0.1371, 0.0, 0.05, 0.27]),
    "translate_x": (taa.translate_x_abs, [-100.0, -31.5, -0.4, 0.0, 7.0, 20.25, 40.3]),
    "translate_y": (taa.translate_y_abs, [-100.0, -31.5, -0.4, 0.0, 7.0, 20.25, 40.3]),
    "rotate": (taa.rotate, [-30.0, -13.7, -0.5, 0.0, 1e-14, 7.3, 27.0, 90.0, 180.0, 270.0, 360.0, 450.5]),
}
GEOMETRIC = {"shear_x", "shear_y", "translate_x", "translate_y", "rotate"}
SIZES = [(32, 32), (37, 53), (96, 128), (2, 5), (5, 2), (1, 1)]
KINDS = ["noise", "gradient", "narrow", "stripes", "constant"]


def pil_lib(shim):
    f = shim.lib.ff_shim_pil
    f.restype = ctypes.c_int
    f.argtypes = [ctypes.c_int, ctypes.c_double, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p,
                  ctypes.c_int, ctypes.c_int, ctypes.c_void_p]
    return f


def ours(f, op, arg, img, resample="nearest", fill=FILL):
    img = np.ascontiguousarray(img)
    out = np.zeros_like(img)
    st = f(OPS.index(op), 0.0 if arg is None else float(arg), list(RESAMPLE).index(resample),
           bytes(fill), img.ctypes.data, img.shape[0], img.shape[1], out.ctypes.data)
    assert st == 0, st
    return out


def timm_op(op, arg, img, resample="nearest", fill=FILL):
    fn, _ = TIMM[op]
    args = () if arg is None else (arg,)
    kwargs = {"fillcolor": fill, "resample": RESAMPLE[resample]} if op in GEOMETRIC else {}
    return np.asarray(fn(Image.fromarray(img), *args, **kwargs))


def cases(op):
    for arg in TIMM[op][1]:
        for resample in (RESAMPLE if op in GEOMETRIC else ["nearest"]):
            yield arg, resample


@pytest.mark.parametrize("op", list(TIMM))
def test_pil_op_matches_timm(shim, stats, op):
    f = pil_lib(shim)
    rng = np.random.default_rng(OPS.index(op))
    for arg, resample in cases(op):
        for h, w in SIZES:
            for kind in KINDS:
                img = make_image(rng, h, w, kind)
                got = ours(f, op, arg, img, resample)
                want = timm_op(op, arg, img, resample)
                stats(f"pil {op} {resample}").add(got, want)
                diff = np.abs(got.astype(int) - want.astype(int))
                assert diff.max() == 0, (op, arg, resample, (h, w), kind, int(diff.max()),
                                         int(np.count_nonzero(diff)))


# torchvision's functional ops on a PIL image, and our pipeline op for each.
TV_PIL = [
    ("pil_brightness(factor={})", F.adjust_brightness, [0.0, 0.6, 1.0, 1.37, 1.8]),
    ("pil_contrast(factor={})", F.adjust_contrast, [0.0, 0.6, 1.0, 1.37, 1.8]),
    ("pil_color(factor={})", F.adjust_saturation, [0.0, 0.6, 1.0, 1.37, 1.8]),
    ("pil_hue(factor={})", F.adjust_hue, [-0.5, -0.37, -0.1, -0.002, 0.0, 0.003, 0.05, 0.2, 0.5]),
    ("pil_solarize(threshold={})", F.solarize, [0, 64, 128, 200, 255]),
]


@pytest.mark.parametrize("text,fn,args", TV_PIL, ids=[t[0].split("(")[0] for t in TV_PIL])
def test_pil_ops_match_torchvision_on_pil_images(run, stats, text, fn, args):
    rng = np.random.default_rng(5)
    for arg in args:
        for h, w in [(32, 32), (37, 53), (1, 1)]:
            for kind in KINDS:
                img = make_image(rng, h, w, kind)
                got = run(f"decode | crop(top=0, left=0, height={h}, width={w}) | " + text.format(arg), img)
                want = np.asarray(fn(Image.fromarray(img), arg))
                stats(f"pil {text.split('(')[0]} vs torchvision PIL").add(got, want)
                d = np.abs(got.astype(int) - want.astype(int))
                assert d.max() == 0, (text, arg, (h, w), kind, int(d.max()), int(np.count_nonzero(d)))


def test_pil_hue_covers_every_colour(shim):
    """adjust_hue over all 2^24 colours would be slow: every colour of a
    64-level cube (262144 pixels) at several factors."""
    f = pil_lib(shim)
    v = np.arange(0, 256, 4, dtype=np.uint8)
    img = np.stack(np.meshgrid(v, v, v, indexing="ij"), -1).reshape(512, 512, 3)
    for factor in (-0.5, -0.21, 0.001, 0.13, 0.5):
        got = ours(f, "hue", factor, img)
        want = np.asarray(F.adjust_hue(Image.fromarray(img), factor))
        assert np.array_equal(got, want), (factor, int(np.count_nonzero(got != want)))


# ---------------------------------------------------------------- semantics=pil

# Our drawn plans of the semantics=pil ops, replayed through torchvision's
# functional ops on PIL images (ColorJitter and RandomSolarize on a PIL image).
TV_PIL_STEP = {"brightness": F.adjust_brightness, "contrast": F.adjust_contrast, "color": F.adjust_saturation,
               "hue": F.adjust_hue, "solarize": F.solarize}
SEMANTICS_PIL = [
    "color_jitter(brightness=0.4, contrast=0.4, saturation=0.2, hue=0.1, semantics=pil)",
    "color_jitter(brightness=(0.5, 1.5), contrast=(0.1, 2.0), hue=(-0.5, 0.5), semantics=pil)",
    "random_solarize(threshold=128, p=0.5, semantics=pil)",
    "random_apply(p=0.8, [color_jitter(brightness=0.8, contrast=0.8, saturation=0.8, hue=0.2, semantics=pil)]) | "
    "random_solarize(threshold=100, p=0.3, semantics=pil)",
]


@pytest.fixture(scope="module")
def pil_planner(shim):
    from test_timm_policy_golden import Planner
    return Planner(shim.lib)


def replay_plans(run, stats, planner, ops, fns, name, seed, rng, max_side=60):
    """Runs `ops` on 60 images of random sizes and checks each output against
    its plan's Pillow steps replayed through fns[op](image, arg), value for
    value; returns how many steps ran."""
    from test_timm_policy_golden import PIL
    applied = 0
    for i in range(60):
        h, w = (int(x) for x in rng.integers(1, max_side, 2))
        img = make_image(rng, h, w, KINDS[i % len(KINDS)])
        text = f"decode | crop(top=0, left=0, height={h}, width={w}) | {ops}"
        steps = planner.steps(text, h, w, seed=seed, index=i)
        want = Image.fromarray(img)
        for kind, op, arg, _, _ in steps:
            assert kind == PIL, (text, steps)
            want = fns[op](want, arg)
        applied += len(steps)
        got = run(text, img, seed=seed, index=i)
        want = np.asarray(want)
        stats(name).add(got, want)
        d = np.abs(got.astype(int) - want.astype(int))
        assert d.max() == 0, (ops, i, (h, w), steps, int(d.max()), int(np.count_nonzero(d)))
    return applied


@pytest.mark.parametrize("ops", SEMANTICS_PIL)
def test_semantics_pil_plans_replayed_through_torchvision_on_pil_images(run, stats, pil_planner, ops):
    applied = replay_plans(run, stats, pil_planner, ops, TV_PIL_STEP, "semantics=pil plans vs torchvision PIL",
                           7, np.random.default_rng(17))
    assert applied > 30, applied  # the ops ran on most samples


@pytest.mark.parametrize("ops", SEMANTICS_PIL)
def test_semantics_pil_draws_are_the_tensor_ops_draws(shim, pil_planner, ops):
    """The same order, factors and coins as semantics=v1: only the arithmetic differs."""
    from test_policy_golden import Planner as V1Planner, STEP_AUG
    v1 = V1Planner(shim.lib)
    v1_name = {"brightness": "Brightness", "contrast": "Contrast", "color": "Color", "hue": "Hue",
               "solarize": "Solarize"}
    tail = " | random_horizontal_flip | center_crop(size=32)"  # a later op's draw stays in step
    for i in range(300):
        pil = pil_planner.steps(f"decode | {ops}{tail}", 32, 32, seed=5, index=i)
        tensor = v1.steps(f"decode | {ops.replace('semantics=pil', 'semantics=v1')}{tail}", 32, 32, seed=5, index=i)
        assert len(pil) == len(tensor), (i, pil, tensor)
        for p, t in zip(pil, tensor):
            if t[0] == STEP_AUG:
                assert (v1_name[p[1]], p[2]) == (t[1], t[2]), (i, pil, tensor)
            else:
                assert p[0] == t[0], (i, pil, tensor)
