"""The geometric and dtype ops against torchvision.transforms.functional on
uint8 CHW tensors, over hundreds of random images (1x1 to 300x300, tall and
wide; constant, two-valued, noise, gradients, stripes) and random
parameters. Integer ops (crop, center_crop, flips) and the float conversion
(to_dtype, normalize: a per-value table) must be exact; bilinear resizing is
allowed one intensity level, on a small share of the values."""
import warnings

import numpy as np
import pytest
import torch
import torchvision.transforms.functional as TF
from torchvision.transforms import InterpolationMode

from conftest import FFError, make_image

torch.set_num_threads(1)
warnings.filterwarnings("ignore", category=UserWarning, module="torchvision")

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
SPECIAL_SIZES = [(1, 1), (2, 2), (1, 2), (2, 1), (1, 300), (300, 1), (3, 280), (280, 3),
                 (300, 300), (17, 299), (299, 17)]
KINDS = ("constant", "two_valued", "noise", "gradient", "stripes")
RESIZE_MAX_SHARE = 0.01  # without antialias: share of values allowed to differ by one level
# With antialias the resize is torch's arithmetic exactly (kernels/resize.h,
# docs/resize.md): bit for bit. Without it torch itself takes another kernel
# by its thread count and the output size (a 2-D sum, not the separable
# one): within one level there.


def image_cases(seed, count):
    """(name, HWC image) for the special sizes, then random ones."""
    rng = np.random.default_rng(seed)
    cases = []
    for i in range(count):
        if i < len(SPECIAL_SIZES):
            h, w = SPECIAL_SIZES[i]
        else:
            shape = rng.integers(0, 4)  # square-ish, wide, tall, any
            h, w = rng.integers(1, 301, 2)
            if shape == 1:
                h = rng.integers(1, 40)
            elif shape == 2:
                w = rng.integers(1, 40)
        kind = KINDS[i % len(KINDS)]
        cases.append((f"#{i} {kind} {h}x{w}", make_image(rng, int(h), int(w), kind)))
    return cases


def chw(img):
    return torch.from_numpy(np.ascontiguousarray(img)).permute(2, 0, 1).contiguous()


def hwc(t):
    return t.permute(1, 2, 0).numpy()


def compare_uint8(stats_entry, case, pipeline, got, want, max_diff=1):
    """Records the difference; returns a failure line or None."""
    if got.shape != want.shape:
        return f"{case}: {pipeline}: shape {got.shape}, torchvision {want.shape}"
    stats_entry.add(got, want)
    d = np.abs(got.astype(np.int16) - want.astype(np.int16))
    if d.max(initial=0) > max_diff:
        at = np.unravel_index(int(d.argmax()), d.shape)
        return (f"{case}: {pipeline}: max diff {d.max()} at (y, x, c) = {at}: "
                f"got {got[at]}, torchvision {want[at]}")
    return None


def check(failures):
    assert not failures, f"{len(failures)} mismatches:\n" + "\n".join(failures[:10])


# ---------------------------------------------------------------- crop

def test_crop_matches_torchvision_exactly(run, stats):
    st = stats("crop")
    rng = np.random.default_rng(1)
    failures = []
    for case, img in image_cases(100, 150):
        h, w = img.shape[:2]
        for inside in (True, False):
            if inside:
                ch, cw = rng.integers(1, h + 1), rng.integers(1, w + 1)
                top, left = rng.integers(0, h - ch + 1), rng.integers(0, w - cw + 1)
            else:  # partly outside: torchvision pads with zeros
                ch, cw = rng.integers(1, h + 20), rng.integers(1, w + 20)
                top, left = rng.integers(-ch + 1, h), rng.integers(-cw + 1, w)
            p = f"decode | crop(top={top}, left={left}, height={ch}, width={cw})"
            want = hwc(TF.crop(chw(img), int(top), int(left), int(ch), int(cw)))
            failures.append(compare_uint8(st, case, p, run(p, img), want, max_diff=0))
    check([f for f in failures if f])
    assert st.differing == 0


def test_crop_wholly_outside_is_zeros(run):
    """torchvision's crop (0.14 to 0.29) returns a wrongly sized tensor when
    the box misses the image on its left or top (a negative slice end, e.g.
    crop(left=-15, width=10) of a 20-wide image is 25 wide), so only the
    answer we document is checked: the zero-padded box."""
    img = make_image(np.random.default_rng(0), 20, 30, "noise")
    for top, left, ch, cw in [(-10, 0, 5, 7), (0, -9, 4, 9), (20, 0, 3, 3), (0, 30, 2, 2),
                              (-8, -8, 8, 8), (25, 40, 6, 1)]:
        p = f"decode | crop(top={top}, left={left}, height={ch}, width={cw})"
        out = run(p, img)
        assert out.shape == (ch, cw, 3) and not out.any(), p


# ---------------------------------------------------------------- center_crop

def test_center_crop_matches_torchvision_exactly(run, stats):
    st = stats("center_crop")
    rng = np.random.default_rng(2)
    failures = []
    for case, img in image_cases(200, 150):
        h, w = img.shape[:2]
        sizes = [(rng.integers(1, h + 1), rng.integers(1, w + 1)),       # smaller
                 (rng.integers(h, h + 30), rng.integers(w, w + 30)),     # larger: zero padding
                 (rng.integers(1, h + 1), rng.integers(w, w + 30))]      # mixed
        for ch, cw in sizes:
            ch, cw = int(ch), int(cw)
            p = f"decode | center_crop(size=({ch}, {cw}))"
            want = hwc(TF.center_crop(chw(img), [ch, cw]))
            failures.append(compare_uint8(st, case, p, run(p, img), want, max_diff=0))
        n = int(rng.integers(1, max(h, w) + 10))  # square size N
        p = f"decode | center_crop(size={n})"
        want = hwc(TF.center_crop(chw(img), n))
        failures.append(compare_uint8(st, case, p, run(p, img), want, max_diff=0))
    check([f for f in failures if f])
    assert st.differing == 0


# ---------------------------------------------------------------- resize

def resize_targets(rng, h, w):
    """(mode, H', W'): downscale, upscale, mixed and unchanged sizes."""
    def down(n):
        return int(rng.integers(1, n + 1))

    def up(n):
        return int(rng.integers(n, min(3 * n, 300) + 1)) if n < 300 else n
    return [("down", down(h), down(w)), ("up", up(h), up(w)), ("mixed", down(h), up(w)),
            ("mixed", up(h), down(w))]


def tv_resize(t, nh, nw, antialias):
    """torchvision's bilinear resize of a CHW tensor. torch 2.x's antialiased
    kernel (uint8 and float alike) is wrong for a 1-pixel-wide output taller
    than one row: every row comes out as the first one. The resize is
    separable and symmetric, so there the reference is the same resize of the
    transposed image, which torch computes right (its passes in the other
    order: within one level of ours, see transposed())."""
    if antialias and nw == 1 and nh > 1:
        return TF.resize(t.transpose(1, 2), [nw, nh], interpolation=InterpolationMode.BILINEAR,
                         antialias=True).transpose(1, 2)
    return TF.resize(t, [nh, nw], interpolation=InterpolationMode.BILINEAR, antialias=antialias)


def transposed(nh, nw):
    """Whether tv_resize's reference is the transposed resize."""
    return nw == 1 and nh > 1


@pytest.mark.parametrize("antialias", [True, False], ids=["antialias", "no_antialias"])
def test_resize_to_explicit_size_equals_torchvision(run, stats, antialias):
    rng = np.random.default_rng(3 + antialias)
    failures = []
    flag = "true" if antialias else "false"
    for case, img in image_cases(300 + antialias, 160):
        h, w = img.shape[:2]
        t = chw(img)
        for mode, nh, nw in resize_targets(rng, h, w):
            st = stats(f"resize {mode} antialias={flag}")
            p = f"decode | resize(size=({nh}, {nw}), antialias={flag})"
            want = hwc(tv_resize(t, nh, nw, antialias))
            exact = antialias and not transposed(nh, nw)
            failures.append(compare_uint8(st if not transposed(nh, nw) else stats("resize to 1 column (transposed)"),
                                          case, p, run(p, img), want, max_diff=0 if exact else 1))
    check([f for f in failures if f])
    for mode in ("down", "up", "mixed"):
        st = stats(f"resize {mode} antialias={flag}")
        if antialias:
            assert st.differing == 0, f"{mode}: {st.differing} values differ"
        assert st.share < RESIZE_MAX_SHARE, f"{mode}: {100 * st.share:.3f}% values differ"


def test_crop_then_resize_equals_torchvision(run, stats):
    """A crop folded into the decoder's region, then a resize (the random
    resized crop's arithmetic with given parameters)."""
    st = stats("crop | resize antialias=true")
    rng = np.random.default_rng(5)
    failures = []
    for case, img in image_cases(500, 100):
        h, w = img.shape[:2]
        ch, cw = int(rng.integers(1, h + 1)), int(rng.integers(1, w + 1))
        top, left = int(rng.integers(0, h - ch + 1)), int(rng.integers(0, w - cw + 1))
        nh, nw = int(rng.integers(1, 120)), int(rng.integers(1, 120))
        p = (f"decode | crop(top={top}, left={left}, height={ch}, width={cw}) "
             f"| resize(size=({nh}, {nw}), antialias=true)")
        want = hwc(TF.resized_crop(chw(img), top, left, ch, cw, [nh, nw],
                                   interpolation=InterpolationMode.BILINEAR, antialias=True))
        if transposed(nh, nw):
            continue
        failures.append(compare_uint8(st, case, p, run(p, img), want, max_diff=0))
    check([f for f in failures if f])
    assert st.differing == 0


@pytest.mark.parametrize("antialias", [True, False], ids=["antialias", "no_antialias"])
def test_resize_shorter_side_then_center_crop_equals_torchvision(run, stats, antialias):
    """resize(size=N): the shorter side becomes N, the longer int(N*long/short)."""
    flag = "true" if antialias else "false"
    st = stats(f"resize(N) | center_crop antialias={flag}")
    rng = np.random.default_rng(6 + antialias)
    failures = []
    for case, img in image_cases(600 + antialias, 120):
        h, w = img.shape[:2]
        n = int(rng.integers(1, 200))
        m = int(rng.integers(1, n + 1))
        p = f"decode | resize(size={n}, antialias={flag}) | center_crop(size={m})"
        resized = TF.resize(chw(img), n, interpolation=InterpolationMode.BILINEAR,
                            antialias=antialias)
        want = hwc(TF.center_crop(resized, m))
        most = 0 if antialias else 1
        failures.append(compare_uint8(st, case, p, run(p, img), want, max_diff=most))
        # the full resized image, cropped to its own (known) size
        rh, rw = resized.shape[1:]
        p = f"decode | resize(size={n}, antialias={flag}) | center_crop(size=({rh}, {rw}))"
        failures.append(compare_uint8(st, case, p, run(p, img), hwc(resized), max_diff=most))
    check([f for f in failures if f])
    assert st.share < RESIZE_MAX_SHARE and (st.differing == 0 or not antialias)


# A 7x8 window of a 770x687 photograph (its green channel) whose resize(size=256)
# output value (241, 178) is a rounding tie in torch's float arithmetic,
# 177.5: torchvision rounds it to 178. Summing the taps in another order
# than torch (every product rounded, the filter's multiply-add unfused) gave 177.
TIE_SIZE, TIE_AT, TIE_OUT = (770, 687), (647, 475), (241, 178)
TIE_WINDOW = [[190, 192, 192, 188, 184, 173, 167, 160], [197, 195, 194, 190, 185, 172, 164, 159],
              [197, 195, 194, 189, 180, 167, 157, 149], [196, 195, 193, 185, 174, 159, 149, 141],
              [189, 188, 186, 177, 165, 149, 142, 137], [176, 175, 173, 167, 156, 142, 136, 132],
              [168, 166, 165, 161, 151, 139, 133, 126]]


def test_resize_rounding_tie_of_a_photograph_equals_torchvision(run, stats):
    """The evaluation resize on the one tie `fusionflow check` found in the demo set."""
    st = stats("resize(256) rounding tie")
    img = np.full(TIE_SIZE + (3,), 128, np.uint8)
    (y, x), (oy, ox) = TIE_AT, TIE_OUT
    img[y:y + 7, x:x + 8, :] = np.array(TIE_WINDOW, np.uint8)[:, :, None]
    t = chw(img)
    exact = TF.resize(t.float(), 256, interpolation=InterpolationMode.BILINEAR, antialias=True)
    assert exact[:, oy, ox].tolist() == [177.5] * 3  # the case is still a tie in the reference
    want = hwc(TF.resize(t, 256, interpolation=InterpolationMode.BILINEAR, antialias=True))
    p = "decode | resize(size=256) | center_crop(size=(286, 256))"  # the whole resized image
    got = run(p, img)
    assert got[oy, ox].tolist() == [178] * 3
    check([f for f in [compare_uint8(st, "tie 770x687", p, got, want, max_diff=0)] if f])
    assert st.differing == 0


# ---------------------------------------------------------------- flips

@pytest.mark.parametrize("op,tf", [("random_horizontal_flip", TF.hflip),
                                   ("random_vertical_flip", TF.vflip)], ids=["hflip", "vflip"])
def test_flip_with_p_1_and_p_0_matches_torchvision_exactly(run, stats, op, tf):
    st = stats(op)
    rng = np.random.default_rng(7)
    failures = []
    for case, img in image_cases(700, 120):
        h, w = img.shape[:2]
        ch, cw = int(rng.integers(1, h + 1)), int(rng.integers(1, w + 1))
        top, left = int(rng.integers(0, h - ch + 1)), int(rng.integers(0, w - cw + 1))
        crop = f"crop(top={top}, left={left}, height={ch}, width={cw})"
        cropped = TF.crop(chw(img), top, left, ch, cw)
        for index in range(3):  # several samples: p=1 and p=0 must not depend on the draw
            p = f"decode | {crop} | {op}(p=1)"
            failures.append(compare_uint8(st, case, p, run(p, img, index=index),
                                          hwc(tf(cropped)), max_diff=0))
            p = f"decode | {crop} | {op}(p=0)"
            failures.append(compare_uint8(st, case, p, run(p, img, index=index),
                                          hwc(cropped), max_diff=0))
    check([f for f in failures if f])
    assert st.differing == 0


def test_both_flips_then_resize(run, stats):
    st = stats("hflip | vflip | resize antialias=true")
    failures = []
    for case, img in image_cases(800, 60):
        p = ("decode | random_horizontal_flip(p=1) | random_vertical_flip(p=1) "
             "| resize(size=(31, 45), antialias=true)")
        want = hwc(TF.resize(TF.vflip(TF.hflip(chw(img))), [31, 45],
                             interpolation=InterpolationMode.BILINEAR, antialias=True))
        failures.append(compare_uint8(st, case, p, run(p, img), want, max_diff=0))
    check([f for f in failures if f])
    assert st.differing == 0


def test_random_flip_p_half_flips_about_half(run):
    img = make_image(np.random.default_rng(9), 4, 5, "noise")
    p = "decode | crop(top=0, left=0, height=4, width=5) | random_horizontal_flip(p=0.5)"
    flipped = sum(not np.array_equal(run(p, img, index=i), img) for i in range(400))
    assert 140 < flipped < 260, flipped


# ---------------------------------------------------------------- to_dtype / normalize

def tv_float(img_chw, mean=None, std=None):
    x = TF.convert_image_dtype(img_chw, torch.float)
    return TF.normalize(x, list(mean), list(std)).numpy() if mean is not None else x.numpy()


def compare_float(stats_entry, case, pipeline, got, want):
    if got.shape != want.shape:
        return f"{case}: {pipeline}: shape {got.shape}, torchvision {want.shape}"
    stats_entry.add(got, want)
    if not np.array_equal(got.view(np.uint32), want.astype(np.float32).view(np.uint32)):
        at = np.unravel_index(int(np.argmax(got != want)), got.shape)
        return f"{case}: {pipeline}: at (c, y, x) = {at}: got {got[at]!r}, torchvision {want[at]!r}"
    return None


def test_every_uint8_value_converts_like_torchvision(run, stats):
    """All 256 values through to_dtype and normalize (imagenet and odd
    means/stds), bit for bit."""
    v = np.arange(256, dtype=np.uint8)
    img = np.stack([v, v[::-1], np.roll(v, 77)], -1).reshape(16, 16, 3)
    t = chw(img)
    failures = []
    crop = "crop(top=0, left=0, height=16, width=16)"
    p = f"decode | {crop} | to_dtype(dtype=float32)"
    failures.append(compare_float(stats("to_dtype"), "all values", p, run(p, img), tv_float(t)))
    p = f"decode | {crop} | normalize(mean=imagenet, std=imagenet)"
    failures.append(compare_float(stats("normalize"), "all values", p, run(p, img),
                                  tv_float(t, IMAGENET_MEAN, IMAGENET_STD)))
    rng = np.random.default_rng(10)
    for _ in range(20):
        mean = tuple(float(x) for x in rng.uniform(-1, 2, 3))
        std = tuple(float(x) for x in rng.uniform(0.01, 3, 3))
        p = f"decode | {crop} | normalize(mean={mean}, std={std})"
        failures.append(compare_float(stats("normalize"), "all values", p, run(p, img),
                                      tv_float(t, mean, std)))
    check([f for f in failures if f])


def test_normalize_after_center_crop_matches_torchvision_exactly(run, stats):
    st = stats("center_crop | normalize")
    rng = np.random.default_rng(11)
    failures = []
    for case, img in image_cases(1100, 100):
        h, w = img.shape[:2]
        ch, cw = int(rng.integers(1, h + 10)), int(rng.integers(1, w + 10))
        mean, std = (IMAGENET_MEAN, IMAGENET_STD) if rng.random() < 0.5 else (
            (0.5, 0.25, 0.125), (0.3, 0.7, 1.5))
        names = ("imagenet", "imagenet") if mean == IMAGENET_MEAN else (mean, std)
        p = f"decode | center_crop(size=({ch}, {cw})) | normalize(mean={names[0]}, std={names[1]})"
        want = tv_float(TF.center_crop(chw(img), [ch, cw]), mean, std)
        failures.append(compare_float(st, case, p, run(p, img), want))
    check([f for f in failures if f])


def test_eval_pipeline_matches_torchvision(run, stats):
    """decode | resize(size=256) | center_crop(size=224) | normalize(imagenet):
    torchvision's uint8 image (antialias, our default) and its Normalize, bit
    for bit."""
    st_u8 = stats("eval: resize(256) | center_crop(224)")
    st_f = stats("eval: normalize of our uint8")
    failures = []
    rng = np.random.default_rng(12)
    for i in range(8):
        h, w = int(rng.integers(150, 300)), int(rng.integers(150, 300))
        case = f"#{i} {h}x{w}"
        img = make_image(rng, h, w, KINDS[i % len(KINDS)])
        prefix = "decode | resize(size=256) | center_crop(size=224)"
        got_u8 = run(prefix, img)
        want_u8 = hwc(TF.center_crop(TF.resize(chw(img), 256, antialias=True), 224))
        failures.append(compare_uint8(st_u8, case, prefix, got_u8, want_u8, max_diff=0))
        p = prefix + " | normalize(mean=imagenet, std=imagenet)"
        failures.append(compare_float(st_f, case, p, run(p, img),
                                      tv_float(chw(want_u8), IMAGENET_MEAN, IMAGENET_STD)))
    check([f for f in failures if f])
    assert st_u8.differing == 0


# ---------------------------------------------------------------- errors

def test_bad_pipeline_message_names_the_column(run):
    img = np.zeros((4, 4, 3), np.uint8)
    with pytest.raises(FFError, match="column"):
        run("decode | resize(size=(4, 4), antialias=maybe)", img)
    with pytest.raises(FFError, match="column"):
        run("decode | resize(size=8)", img)  # image-dependent output size
