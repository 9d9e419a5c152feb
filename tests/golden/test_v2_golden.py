"""semantics=v2 against torchvision.transforms.v2 (torchvision 0.29's
functional ops on uint8 tensors).

1. Every single op we have, with semantics v2, equals transforms.v2's
   functional op bit for bit; for the ops whose v2 arithmetic differs from
   v1 (color, contrast, sharpness, autocontrast, the bilinear warps with a
   fill) our v1 output must differ from v2 somewhere on the same images, so
   each test can fail.
2. The policies' plans under v2 carry v2's solarize thresholds
   (255 * linspace(1, 0, n)), which differ from v1's for some bins.
3. The policies (RandAugment, TrivialAugmentWide, AutoAugment, AugMix) run
   with v2 equal our plan's steps replayed through v2's functional ops (as
   v2's _apply_image_or_video_transform calls them), and a whole pipeline
   (center_crop, a policy with a fill, normalize) equals v2's.
4. v2's native uint8 resize (torch's fixed-point kernels: bilinear with
   and without antialias, bicubic) is reproduced bit for bit, and differs
   from v1's float32 resize somewhere on the same images.
"""
import math

import numpy as np
import pytest
import torch
from torchvision.transforms import InterpolationMode

F2 = pytest.importorskip("torchvision.transforms.v2.functional")  # torchvision >= 0.15

from conftest import make_image
from test_policy_golden import MIX_BEGIN, CHAIN_BEGIN, CHAIN_END, MIX_END, STEP_AUG, Planner

KINDS = ["noise", "gradient", "narrow", "stripes", "two_valued"]
SIZES = [(31, 45), (64, 64)]


def chw(img_hwc):
    return torch.from_numpy(np.ascontiguousarray(img_hwc)).permute(2, 0, 1).contiguous()


def hwc(t):
    return t.permute(1, 2, 0).contiguous().numpy()


def whole(text, img):
    """The pipeline running op text on the whole image (a fixed-size crop first)."""
    return f"decode | crop(top=0, left=0, height={img.shape[0]}, width={img.shape[1]}) | {text}"


_GRAY_EDGE = []


def gray_edge_image():
    """A 9 x 8 image of the RGB triples whose gray (rgb_to_grayscale) differs
    between transforms v1 and v2, found by torchvision itself on all 2^24."""
    if not _GRAY_EDGE:
        import torchvision.transforms.functional as F1
        from torchvision.transforms.v2.functional._color import _rgb_to_grayscale_image
        v = torch.arange(1 << 24, dtype=torch.int64)
        rgb = torch.stack([v >> 16, (v >> 8) & 255, v & 255]).to(torch.uint8).view(3, 4096, 4096)
        g1 = F1.rgb_to_grayscale(rgb)[0].to(torch.int64)
        g2 = _rgb_to_grayscale_image(rgb, 1, preserve_dtype=False).floor_()[0].to(torch.int64)
        triples = rgb.view(3, -1)[:, (g1 != g2).view(-1)].T.numpy()
        assert len(triples), "v1's and v2's gray never differ"
        _GRAY_EDGE.append(np.resize(triples, (72, 3)).reshape(9, 8, 3).astype(np.uint8))
    return _GRAY_EDGE[0]


def images(seed):
    rng = np.random.default_rng(seed)
    return [make_image(rng, h, w, kind) for h, w in SIZES for kind in KINDS] + [gray_edge_image()]


# ---------------------------------------------------------------- 1. single ops

FILL = [127.3, 0.5, 255.0]
BILINEAR, NEAREST = InterpolationMode.BILINEAR, InterpolationMode.NEAREST


def affine2(x, interp, fill, angle=0.0, translate=(0, 0), shear=(0.0, 0.0), center=None):
    return F2.affine(x, angle=angle, translate=list(translate), scale=1.0, shear=list(shear),
                     interpolation=interp, fill=fill, center=center)


def geometric_cases():
    """(pipeline op text, v2 function) for the warps, nearest and bilinear,
    with and without a fill."""
    cases = []
    for interp in ("nearest", "bilinear"):
        mode = BILINEAR if interp == "bilinear" else NEAREST
        for fill_text, fill in (("", None), (", fill=(127.3, 0.5, 255)", FILL)):
            kw = f"interpolation={interp}{fill_text}"
            for angle in (13.7, -30.0, 135.0):
                cases.append((f"rotate(angle={angle}, {kw})",
                              lambda x, a=angle, m=mode, f=fill: F2.rotate(x, a, interpolation=m, fill=f)))
            for shear in (0.1, -0.3, 0.99):
                deg = math.degrees(math.atan(shear))
                cases.append((f"shear_x(shear={shear}, {kw})",
                              lambda x, d=deg, m=mode, f=fill: affine2(x, m, f, shear=(d, 0.0), center=[0, 0])))
                cases.append((f"shear_y(shear={shear}, {kw})",
                              lambda x, d=deg, m=mode, f=fill: affine2(x, m, f, shear=(0.0, d), center=[0, 0])))
            for px in (5, -17):
                cases.append((f"translate_x(pixels={px}, {kw})",
                              lambda x, p=px, m=mode, f=fill: affine2(x, m, f, translate=(p, 0))))
                cases.append((f"translate_y(pixels={px}, {kw})",
                              lambda x, p=px, m=mode, f=fill: affine2(x, m, f, translate=(0, p))))
    return cases


def color_cases():
    cases = []
    for f in (0.0, 0.1, 0.37, 0.9, 1.01, 1.3, 1.9):
        cases.append((f"brightness(factor={f})", lambda x, f=f: F2.adjust_brightness(x, f)))
        cases.append((f"color(factor={f})", lambda x, f=f: F2.adjust_saturation(x, f)))
        cases.append((f"contrast(factor={f})", lambda x, f=f: F2.adjust_contrast(x, f)))
        cases.append((f"sharpness(factor={f})", lambda x, f=f: F2.adjust_sharpness(x, f)))
    for b in range(9):
        cases.append((f"posterize(bits={b})", lambda x, b=b: F2.posterize(x, b)))
    for t in (0.0, 25.5, 119.00000762939453, 127.5, 200.2, 255.0):
        cases.append((f"solarize(threshold={t!r})", lambda x, t=t: F2.solarize(x, t)))
    cases += [("autocontrast", F2.autocontrast), ("equalize", F2.equalize), ("invert", F2.invert)]
    return cases


def test_to_dtype_and_normalize_v2_equal_transforms_v2_on_every_value(run, stats):
    img = np.stack([np.arange(256, dtype=np.uint8)] * 3, axis=-1).reshape(16, 16, 3)
    t = F2.to_dtype(chw(img), torch.float32, scale=True)
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    for text, want in (("to_dtype", t.numpy()), ("normalize(mean=imagenet, std=imagenet)",
                                                 F2.normalize(t, mean, std).numpy())):
        got = run(whole(text, img), img, semantics="v2")
        stats(f"v2 {text.split('(')[0]}").add(got, want)
        assert np.array_equal(got, want), f"{text}: {np.count_nonzero(got != want)} values differ"
        v1 = run(whole(text, img), img)
        print(f"{text}: v1 differs from transforms.v2 in {np.count_nonzero(v1 != want)} of {want.size} values")
        assert not np.array_equal(v1, want), "v1 equals v2: the test cannot fail"


# the op families whose v2 arithmetic differs from v1 (fusionflow.h, ff_semantics)
DIFFERING = {"color", "contrast", "sharpness", "autocontrast", "warp_fill_bilinear"}


def family(text):
    name = text.split("(")[0]
    if name in ("rotate", "shear_x", "shear_y", "translate_x", "translate_y"):
        if "bilinear" in text and "fill" in text:
            return "warp_fill_bilinear"
        return "warp"
    return name


@pytest.mark.parametrize("text,fn", color_cases() + geometric_cases(), ids=lambda v: v if isinstance(v, str) else "")
def test_single_op_v2_equals_transforms_v2(run, stats, text, fn):
    for img in images(len(text)):
        p = whole(text, img)
        want = hwc(fn(chw(img)))
        got = run(p, img, semantics="v2")
        stats(f"v2 {family(text)}").add(got, want)
        assert np.array_equal(got, want), (f"{p} on {img.shape}: {np.count_nonzero(got != want)} values differ "
                                           f"from transforms.v2 (max {np.abs(got.astype(int) - want).max()})")


FAMILIES = sorted({family(t) for t, _ in color_cases() + geometric_cases()})


@pytest.mark.parametrize("fam", FAMILIES)
def test_v1_differs_from_v2_only_where_listed(run, stats, fam):
    """Each family listed as differing does differ under v1 on the test
    images (so its v2 test can fail), and no other family does."""
    differing = values = 0
    for text, fn in color_cases() + geometric_cases():
        if family(text) != fam:
            continue
        for img in images(len(text)):
            want = hwc(fn(chw(img)))
            got = run(whole(text, img), img)
            stats(f"v1 vs v2 {fam}").add(got, want)
            differing += int(np.count_nonzero(got != want))
            values += want.size
    print(f"{fam}: v1 differs from transforms.v2 in {differing} of {values} values")
    if fam in DIFFERING:
        assert differing > 0, f"{fam}: v1 never differs from v2 on these images: the test cannot fail"
    else:
        assert differing == 0, f"{fam}: v1 differs from v2 in {differing} values but is not listed as differing"


# ---------------------------------------------------------------- 2. plans

@pytest.fixture(scope="module")
def planner(shim):
    return Planner(shim.lib)


def test_trivial_augment_solarize_thresholds_are_v2s(planner):
    n = 31
    v1_table = {float(t) for t in torch.linspace(255.0, 0.0, n)}
    v2_table = {255 * float(t) for t in torch.linspace(1.0, 0.0, n)}
    seen_v2, only_v2 = set(), set()
    text = "decode | trivial_augment_wide"
    for index in range(6000):
        for kind, op, arg, _ in planner.steps(text, 64, 64, semantics="v2", index=index):
            if kind == STEP_AUG and op == "Solarize":
                assert arg in v2_table, arg
                seen_v2.add(arg)
                # the op compares in float32: what counts is which integers reach the threshold
                if math.ceil(np.float32(arg)) not in {math.ceil(np.float32(t)) for t in v1_table}:
                    only_v2.add(arg)
        for kind, op, arg, _ in planner.steps(text, 64, 64, semantics="v1", index=index):
            if kind == STEP_AUG and op == "Solarize":
                assert arg in v1_table, arg
    assert len(seen_v2) >= 25, sorted(seen_v2)
    assert only_v2, "no v2 threshold that a v1 threshold cannot stand for: the test cannot fail"


# ---------------------------------------------------------------- 3. policies

def v2_apply(img, op, arg, interpolation, fill):
    """torchvision.transforms.v2's _apply_image_or_video_transform for the
    argument our plan stores (what v2 hands the functional op)."""
    if op == "ShearX":
        return affine2(img, interpolation, fill, shear=(math.degrees(math.atan(arg)), 0.0), center=[0, 0])
    if op == "ShearY":
        return affine2(img, interpolation, fill, shear=(0.0, math.degrees(math.atan(arg))), center=[0, 0])
    if op == "TranslateX":
        return affine2(img, interpolation, fill, translate=(int(arg), 0))
    if op == "TranslateY":
        return affine2(img, interpolation, fill, translate=(0, int(arg)))
    if op == "Rotate":
        return F2.rotate(img, angle=arg, interpolation=interpolation, fill=fill)
    if op == "Brightness":
        return F2.adjust_brightness(img, arg)
    if op == "Color":
        return F2.adjust_saturation(img, arg)
    if op == "Contrast":
        return F2.adjust_contrast(img, arg)
    if op == "Sharpness":
        return F2.adjust_sharpness(img, arg)
    if op == "Posterize":
        return F2.posterize(img, int(arg))
    if op == "Solarize":
        return F2.solarize(img, arg)
    if op == "AutoContrast":
        return F2.autocontrast(img)
    if op == "Equalize":
        return F2.equalize(img)
    if op == "Invert":
        return F2.invert(img)
    raise AssertionError(op)


def v2_replay(img_hwc, steps, interpolation, fill):
    """Our plan's steps through v2's ops; AugMix mixed as v2's AugMix.forward
    mixes (float32, truncated)."""
    x = batch = chw(img_hwc)
    mix = aug = None
    for kind, op, arg, w in steps:
        if kind == STEP_AUG:
            if aug is None:
                x = v2_apply(x, op, arg, interpolation, fill)
            else:
                aug = v2_apply(aug, op, arg, interpolation, fill)
        elif kind == MIX_BEGIN:
            mix = torch.tensor(w, dtype=torch.float32) * batch
        elif kind == CHAIN_BEGIN:
            aug = batch
        elif kind == CHAIN_END:
            mix.add_(torch.tensor(w, dtype=torch.float32) * aug)
        elif kind == MIX_END:
            x, aug = mix.to(torch.uint8), None
    return hwc(x)


POLICIES = [
    ("trivial_augment_wide", NEAREST, None),
    ("trivial_augment_wide(interpolation=bilinear, fill=(127.3, 0.5, 255))", BILINEAR, FILL),
    ("rand_augment(num_ops=3, magnitude=14, interpolation=bilinear, fill=(10, 200, 99.5))", BILINEAR,
     [10.0, 200.0, 99.5]),
    ("auto_augment(policy=imagenet, interpolation=bilinear, fill=(128, 128, 128))", BILINEAR, [128.0] * 3),
    ("auto_augment(policy=svhn)", NEAREST, None),
    ("aug_mix(fill=(127.3, 0.5, 255))", BILINEAR, FILL),
    ("aug_mix(severity=10, mixture_width=4, chain_depth=3, alpha=0.5)", BILINEAR, None),
]


@pytest.mark.parametrize("policy,interpolation,fill", POLICIES, ids=[p[0].split("(")[0] + str(i)
                                                                  for i, p in enumerate(POLICIES)])
def test_policy_v2_equals_v2_ops_replaying_the_plan(planner, run, stats, policy, interpolation, fill):
    h, w = 48, 56
    text = f"decode | crop(top=0, left=0, height={h}, width={w}) | {policy}"
    rng = np.random.default_rng(len(policy))
    v1_differs = 0
    for index in range(40):
        img = make_image(rng, h, w, ["noise", "gradient", "stripes"][index % 3])
        steps = planner.steps(text, h, w, semantics="v2", seed=7, index=index)
        want = v2_replay(img, steps, interpolation, fill)
        got = run(text, img, seed=7, index=index, semantics="v2")
        stats(f"v2 {policy.split('(')[0]} (replayed with v2 ops)").add(got, want)
        assert np.array_equal(got, want), (f"index {index}: {np.count_nonzero(got != want)} values differ "
                                           f"(max {np.abs(got.astype(int) - want).max()}); plan {steps}")
        v1_differs += int(np.count_nonzero(run(text, img, seed=7, index=index) != want))
    print(f"{policy}: v1 differs from v2 in {v1_differs} values")


def test_pipeline_v2_equals_transforms_v2_end_to_end(planner, run):
    """center_crop, TrivialAugmentWide with a bilinear fill, to_dtype and
    normalize: v2 equals v2's ops in float32; v1 does not (on these draws)."""
    h, w, size = 70, 90, 48
    policy = "trivial_augment_wide(interpolation=bilinear, fill=(127.3, 0.5, 255))"
    text = f"decode | center_crop(size={size}) | {policy} | normalize(mean=imagenet, std=imagenet)"
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    rng = np.random.default_rng(3)
    v1_bad = 0
    for index in range(80):
        img = make_image(rng, h, w, ["noise", "gradient", "stripes"][index % 3])
        cropped = hwc(F2.center_crop(chw(img), [size, size]))
        steps = planner.steps(f"decode | {policy}", size, size, semantics="v2", seed=11, index=index)
        aug = v2_replay(cropped, steps, BILINEAR, FILL)
        want = F2.normalize(F2.to_dtype(chw(aug), torch.float32, scale=True), mean, std).numpy()
        got = run(text, img, seed=11, index=index, semantics="v2")
        assert np.array_equal(got, want), f"index {index}: plan {steps}"
        v1_bad += not np.array_equal(run(text, img, seed=11, index=index), want)
    assert v1_bad > 0, "v1 equals v2 on every draw: the test cannot fail"


# ---------------------------------------------------------------- 4. resize

@pytest.mark.parametrize("size,antialias,interp", [((32, 40), True, "bilinear"), ((100, 130), True, "bilinear"),
                                                   ((100, 130), False, "bilinear"), ((224, 224), True, "bilinear"),
                                                   ((77, 50), True, "bicubic"), ((224, 224), True, "bicubic")])
def test_native_uint8_resize_equals_v2(run, stats, size, antialias, interp):
    """v2 resizes a uint8 tensor natively (int16 weights, uint8 after each
    pass; bilinear where torch's CPU capability is AVX2 or AVX-512, as here,
    bicubic always): semantics v2 gives its bytes, v1 (float32) does not
    everywhere."""
    st = stats(f"v2 resize {size} aa={antialias} {interp}")
    mode = BILINEAR if interp == "bilinear" else InterpolationMode.BICUBIC
    v1_differs = 0
    for img in images(sum(size)):
        want = hwc(F2.resize(chw(img), list(size), interpolation=mode, antialias=antialias))
        p = (f"decode | resize(size=({size[0]}, {size[1]}), interpolation={interp}, "
             f"antialias={'true' if antialias else 'false'})")
        got = run(p, img, semantics="v2")
        st.add(got, want)
        assert np.array_equal(got, want), f"{img.shape} -> {size}: max diff {np.abs(got.astype(int) - want).max()}"
        v1_differs += not np.array_equal(run(p, img), want)
    assert v1_differs > 0, "v1's resize equals v2's on every image: the test cannot fail"
