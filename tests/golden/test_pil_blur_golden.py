"""Pillow's ImageFilter.GaussianBlur (src/ops/pil_blur.c, kernels/pil_blur.h)
against Pillow 13 itself, computed here: the single op at fixed radii (0,
fractional, DINO's range, radii past the image's size) on RGB and gray
images of odd sizes; our drawn plans of gaussian_blur(semantics=pil)
replayed through img.filter(GaussianBlur(r)); the radius draws against the
recipes' random.uniform (the parser's refusals are in
test_transforms_golden.py's list). All exact (docs/pillow-semantics.md)."""
import random

import numpy as np
import pytest
from PIL import Image, ImageFilter
import torchvision.transforms.functional as F

from conftest import make_image
from test_pil_golden import KINDS, SIZES, ours, pil_lib, pil_planner, replay_plans  # noqa: F401 (a fixture)

RADII = [0, 1e-6, 0.05, 0.1, 0.3, 0.5, 0.9, 1, 1.23, 1.7, 2.0, 2.5, 4.75, 12, 40, 333.3]
BLUR_SIZES = SIZES + [(3, 97), (224, 224)]


def pillow_blur(img, radius):
    return np.asarray(Image.fromarray(img).filter(ImageFilter.GaussianBlur(radius=radius)))


def test_pil_gaussian_blur_matches_pillow(shim, stats):
    f = pil_lib(shim)
    rng = np.random.default_rng(14)
    for radius in RADII:
        for h, w in BLUR_SIZES:
            for kind in KINDS:
                img = make_image(rng, h, w, kind)
                got = ours(f, "gaussian_blur", radius, img)
                want = pillow_blur(img, radius)
                stats("pil gaussian_blur").add(got, want)
                d = np.abs(got.astype(int) - want.astype(int))
                assert d.max() == 0, (radius, (h, w), kind, int(d.max()), int(np.count_nonzero(d)))


def test_pil_gaussian_blur_of_a_gray_rgb_image_is_pillows_blur_of_mode_L(shim):
    """Grayscale as RGB (three equal channels): each channel is Pillow's blur of the L image."""
    f = pil_lib(shim)
    rng = np.random.default_rng(3)
    for radius in (0.1, 1.0, 1.7, 2.0, 25.0):
        for h, w in [(37, 53), (1, 9), (64, 64)]:
            gray = rng.integers(0, 256, (h, w), dtype=np.uint8)
            got = ours(f, "gaussian_blur", radius, np.repeat(gray[..., None], 3, axis=2))
            want = np.asarray(Image.fromarray(gray, "L").filter(ImageFilter.GaussianBlur(radius)))
            for c in range(3):
                assert np.array_equal(got[..., c], want), (radius, (h, w), c)


@pytest.mark.parametrize("text", ["pil_gaussian_blur(radius={})", "gaussian_blur(sigma={}, semantics=pil)"])
def test_pipeline_blur_ops_match_pillow(run, text):
    rng = np.random.default_rng(8)
    for radius in (0.1, 0.5, 1.0, 1.7, 2.0, 9.0):
        if radius == 0 and "sigma" in text:
            continue
        h, w = 31, 45
        img = make_image(rng, h, w, "noise")
        got = run(f"decode | crop(top=0, left=0, height={h}, width={w}) | " + text.format(radius), img)
        want = pillow_blur(img, float(np.float32(radius)))
        assert np.array_equal(got, want), (text, radius, int(np.count_nonzero(got != want)))


# ---------------------------------------------------------------- plans replayed through Pillow

# Pillow's functions for the steps of our semantics=pil plans: DINO's GaussianBlur class
# (img.filter(ImageFilter.GaussianBlur(radius=r))) and torchvision's ops on PIL images; a
# saturation of 0 is the grayscale step, Grayscale(num_output_channels=3) on a PIL image.
REPLAY = {"gaussian_blur": lambda img, r: img.filter(ImageFilter.GaussianBlur(radius=r)),
          "brightness": F.adjust_brightness, "contrast": F.adjust_contrast,
          "color": lambda img, f: F.rgb_to_grayscale(img, 3) if f == 0 else F.adjust_saturation(img, f),
          "hue": F.adjust_hue, "solarize": F.solarize}
PIPELINES = [
    "gaussian_blur(sigma=(0.1, 2.0), semantics=pil)",
    "random_apply(p=0.5, [gaussian_blur(semantics=pil)])",
    "gaussian_blur(sigma=(0.5, 40), semantics=pil)",
    # DINO's global view 2 after the crop and flip: jitter p=0.8, blur p=0.1, solarize p=0.2
    "random_apply(p=0.8, [color_jitter(brightness=0.4, contrast=0.4, saturation=0.2, hue=0.1, semantics=pil)]) | "
    "random_apply(p=0.1, [gaussian_blur(sigma=(0.1, 2.0), semantics=pil)]) | "
    "random_solarize(threshold=128, p=0.2, semantics=pil)",
    "random_grayscale(p=0.5, semantics=pil)",
    "three_augment(semantics=pil)",  # DeiT III's 3-Augment
    "three_augment(color_jitter=0, semantics=pil)",
]


@pytest.mark.parametrize("ops", PIPELINES)
def test_semantics_pil_blur_plans_replayed_through_pillow(run, stats, pil_planner, ops):
    applied = replay_plans(run, stats, pil_planner, ops, REPLAY, "gaussian_blur semantics=pil plans vs Pillow", 11,
                           np.random.default_rng(23), max_side=70)
    assert applied >= 5, applied  # the ops ran


def test_semantics_pil_radius_is_the_v1_sigma_draw(shim, pil_planner):
    """The radius is drawn where, and as, the tensor blur draws its sigma: only the arithmetic differs."""
    from test_policy_golden import Planner as V1Planner
    from test_transforms_golden import STEP_BLUR
    v1 = V1Planner(shim.lib)
    tail = " | random_horizontal_flip | center_crop(size=32)"
    for i in range(300):
        pil = pil_planner.steps(f"decode | random_apply(p=0.5, [gaussian_blur(semantics=pil)]){tail}", 32, 32,
                                seed=2, index=i)
        tensor = v1.steps(f"decode | random_apply(p=0.5, [gaussian_blur(kernel_size=5)]){tail}", 32, 32,
                          seed=2, index=i)
        assert len(pil) == len(tensor), (i, pil, tensor)
        for p, t in zip(pil, tensor):
            if t[0] == STEP_BLUR:
                assert p[1] == "gaussian_blur" and np.float32(p[2]) == np.float32(t[3]), (i, pil, tensor)
            else:
                assert p[0] == t[0], (i, pil, tensor)


def test_semantics_pil_radius_follows_dinos_random_uniform(pil_planner):
    from test_policy_golden import check_ks, ks_two_sample
    text = "decode | gaussian_blur(sigma=(0.1, 2.0), semantics=pil) | center_crop(size=32)"
    ours_r = [s[2] for i in range(4000) for s in pil_planner.steps(text, 32, 32, seed=4, index=i)
              if s[1] == "gaussian_blur"]
    assert len(ours_r) == 4000 and min(ours_r) >= 0.1 and max(ours_r) <= 2.0
    draw = random.Random(1)
    theirs = [draw.uniform(0.1, 2.0) for _ in range(4000)]  # DINO's GaussianBlur.__call__
    d, crit = ks_two_sample(ours_r, theirs)
    check_ks("gaussian_blur(semantics=pil) radius vs random.uniform(0.1, 2)", d, crit)
