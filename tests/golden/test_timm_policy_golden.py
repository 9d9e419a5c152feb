"""timm's policies (timm_rand_augment, timm_auto_augment, timm_aug_mix) against
timm 1.0 itself (timm.data.auto_augment, on Pillow 13).

1. Replay: our output for a sample equals timm's op functions applied to
   the same image with our plan's drawn ops and arguments (AugMix: timm's own
   AugMixAugment._apply_basic with our weights, depths and ops) — exact.
2. Arguments: with no magnitude noise, every argument our planner gives an
   op is what timm's level function gives it at that magnitude (either sign).
3. Distributions: which ops are applied, their arguments (hence the
   magnitude noise and the signs), the bilinear/bicubic choice, how many ops
   a sample gets, AugMix's Dirichlet/Beta weights and chain depths, against
   timm's own draws recorded by replacing each op's function with a
   recorder (two-sample chi-square / KS, p = 0.001, fixed seeds).
4. Config strings: timm's grammar, and errors that name the column and the
   offending section.

The plans come from ff_shim_plan_pil (tests/shim/shim_pil.c)."""
import collections
import ctypes
import math
import random

import numpy as np
import pytest
from PIL import Image
import timm.data.auto_augment as taa

from conftest import FFError, make_image
from test_policy_golden import (check_chi2, check_ks, chi2_two_sample, ks_one_sample,
                                ks_two_sample)

# ff__step_kind (src/pipeline/pipeline.h) and ff__pil_op (src/kernels/pil.h)
MIX_BEGIN, CHAIN_BEGIN, CHAIN_END, PIL, PIL_MIX_END = 5, 6, 7, 9, 10
PIL_OPS = ["autocontrast", "equalize", "invert", "posterize", "solarize", "solarize_add", "color",
           "contrast", "brightness", "sharpness", "shear_x", "shear_y", "translate_x", "translate_y",
           "rotate", "hue", "gaussian_blur"]
RESAMPLE = [Image.NEAREST, Image.BILINEAR, Image.BICUBIC]
GEOMETRIC = {"shear_x", "shear_y", "translate_x", "translate_y", "rotate"}
TIMM_FN = {
    "autocontrast": taa.auto_contrast, "equalize": taa.equalize, "invert": taa.invert,
    "posterize": taa.posterize, "solarize": taa.solarize, "solarize_add": taa.solarize_add,
    "color": taa.color, "contrast": taa.contrast, "brightness": taa.brightness,
    "sharpness": taa.sharpness, "shear_x": taa.shear_x, "shear_y": taa.shear_y,
    "translate_x": taa.translate_x_abs, "translate_y": taa.translate_y_abs, "rotate": taa.rotate,
}
# timm's op names → our op (the Rel translations become pixels)
NAME_TO_PIL = {
    "AutoContrast": "autocontrast", "Equalize": "equalize", "Invert": "invert", "Rotate": "rotate",
    "Posterize": "posterize", "PosterizeIncreasing": "posterize", "PosterizeOriginal": "posterize",
    "Solarize": "solarize", "SolarizeIncreasing": "solarize", "SolarizeAdd": "solarize_add",
    "Color": "color", "ColorIncreasing": "color", "Contrast": "contrast",
    "ContrastIncreasing": "contrast", "Brightness": "brightness",
    "BrightnessIncreasing": "brightness", "Sharpness": "sharpness",
    "SharpnessIncreasing": "sharpness", "ShearX": "shear_x", "ShearY": "shear_y",
    "TranslateX": "translate_x", "TranslateY": "translate_y", "TranslateXRel": "translate_x",
    "TranslateYRel": "translate_y",
}
FILL = (124, 116, 104)


class Planner:
    def __init__(self, lib):
        f = lib.ff_shim_plan_pil
        ip = ctypes.POINTER(ctypes.c_int)
        f.restype = ctypes.c_int
        f.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.c_uint64, ctypes.c_uint64,
                      ctypes.c_uint64, ip, ip, ctypes.POINTER(ctypes.c_double), ip,
                      ctypes.POINTER(ctypes.c_float), ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
        self.f = f
        self.cap = 128
        self.k = (ctypes.c_int * self.cap)()
        self.o = (ctypes.c_int * self.cap)()
        self.a = (ctypes.c_double * self.cap)()
        self.r = (ctypes.c_int * self.cap)()
        self.w = (ctypes.c_float * self.cap)()
        self.msg = ctypes.create_string_buffer(1024)

    def steps(self, pipeline, h=224, w=224, seed=0, epoch=0, index=0):
        """[(kind, op name, arg, resample, weight)] of the sample's plan."""
        n = self.f(pipeline.encode(), h, w, seed, epoch, index, self.k, self.o, self.a, self.r,
                   self.w, self.cap, self.msg, len(self.msg))
        if n < 0:
            raise FFError(n, self.msg.value.decode())
        return [(self.k[i], PIL_OPS[self.o[i]] if self.k[i] == PIL else None, self.a[i], self.r[i],
                 self.w[i]) for i in range(n)]


@pytest.fixture(scope="module")
def planner(shim):
    return Planner(shim.lib)


def pipe(kind, config, extra=""):
    return f'decode | {kind}(config="{config}"{extra})'


# ---------------------------------------------------------------- 1. replay

def timm_apply(img, op, arg, resample, fill=FILL):
    """Our step through timm's op function (Pillow 13 refuses posterize with
    0 bits, which timm reaches at magnitude 10 with its increasing variant:
    older Pillow, and we, give black)."""
    if op == "posterize" and int(arg) == 0:
        return Image.fromarray(np.zeros_like(np.asarray(img)))
    fn = TIMM_FN[op]
    args = () if op in ("autocontrast", "equalize", "invert") else (
        int(arg) if op in ("posterize", "solarize", "solarize_add") else arg,)
    kwargs = {"fillcolor": fill, "resample": RESAMPLE[resample]} if op in GEOMETRIC else {}
    return fn(img, *args, **kwargs)


def replay(steps, img, fill=FILL):
    """timm's result for our plan's steps on img (HWC uint8)."""
    pil = Image.fromarray(img)
    i = 0
    if steps and steps[0][0] == MIX_BEGIN:  # timm's AugMix
        chains, weights, m = [], [], None
        for kind, op, arg, rs, wt in steps[1:]:
            if kind == CHAIN_BEGIN:
                chains.append([])
            elif kind == PIL:
                chains[-1].append((op, arg, rs))
            elif kind == CHAIN_END:
                weights.append(wt)
            elif kind == PIL_MIX_END:
                m = wt
        queue = list(chains)

        class Step:
            def __init__(self, s):
                self.s = s

            def __call__(self, im):
                return timm_apply(im, *self.s, fill=fill)

        aug = taa.AugMixAugment([], width=len(chains))
        orig_randint, orig_choice = np.random.randint, np.random.choice
        try:
            np.random.randint = lambda lo, hi: len(queue[0])
            np.random.choice = lambda ops, depth, replace=True: [Step(s) for s in queue.pop(0)]
            out = aug._apply_basic(pil, np.float32(weights), np.float32(m))
        finally:
            np.random.randint, np.random.choice = orig_randint, orig_choice
        return np.asarray(out)
    for kind, op, arg, rs, _ in steps:
        assert kind == PIL, kind
        pil = timm_apply(pil, op, arg, rs, fill)
    return np.asarray(pil)


REPLAY = [
    ("timm_rand_augment", "rand-m9-mstd0.5-inc1", ""),
    ("timm_rand_augment", "rand-m9-mstd0.5-inc1", ", interpolation=bicubic, img_mean=(124, 116, 104)"),
    ("timm_rand_augment", "rand-m7-n4-p0.9-mstd101", ", interpolation=random"),
    ("timm_rand_augment", "rand-m10-n3-mstd1-inc0-mmax12", ", translate_pct=0.3"),
    ("timm_rand_augment", "rand-m9-n3-tweights", ""),
    ("timm_auto_augment", "original-mstd0.5", ""),
    ("timm_auto_augment", "originalr", ", interpolation=bilinear"),
    ("timm_auto_augment", "v0", ", translate_const=100"),
    ("timm_auto_augment", "v0r-mstd1", ""),
    ("timm_aug_mix", "augmix-m5-w4-d2", ""),
    ("timm_aug_mix", "augmix-m3-w3", ", interpolation=bicubic"),
    ("timm_aug_mix", "augmix-m9-w2-d3-a0.5-mstd0.5", ""),
]


@pytest.mark.parametrize("kind,config,extra", REPLAY)
def test_timm_policy_output_is_timm_replay_of_its_plan(run, planner, stats, kind, config, extra):
    fill = FILL if "img_mean" in extra else (128, 128, 128)
    rng = np.random.default_rng(7)
    for index in range(24):
        h, w = [(64, 64), (48, 80), (37, 29)][index % 3]
        text = pipe(kind, config, extra).replace(
            "decode |", f"decode | crop(top=0, left=0, height={h}, width={w}) |")
        img = make_image(rng, h, w, ["gradient", "noise", "narrow", "stripes"][index % 4])
        steps = planner.steps(text, h, w, seed=3, index=index)
        got = run(text, img, seed=3, index=index)
        want = replay(steps, img, fill)
        stats(f"{kind} replay").add(got, want)
        d = np.abs(got.astype(int) - want.astype(int))
        assert d.max() == 0, (config, index, steps, int(d.max()), int(np.count_nonzero(d)))


# ---------------------------------------------------------------- 2. arguments

def timm_levels(name, magnitude, hparams):
    """The arguments timm's level function gives op `name` at `magnitude`,
    for either sign (and the pixel value of the Rel translations at 224)."""
    fn = taa.LEVEL_TO_ARG[name]
    if fn is None:
        return {0.0}
    out = set()
    for r in (0.0, 1.0):
        orig = random.random
        random.random = lambda: r
        try:
            v = fn(magnitude, hparams)[0]
        finally:
            random.random = orig
        out.add(float(v * 224 if name.endswith("Rel") else v))
    return out


@pytest.mark.parametrize("config,names", [
    ("rand-m9-inc1", taa._RAND_INCREASING_TRANSFORMS),
    ("rand-m5-n3", taa._RAND_TRANSFORMS),
    ("rand-m10-inc1", taa._RAND_INCREASING_TRANSFORMS),
])
def test_timm_rand_augment_arguments_are_timm_levels(planner, config, names):
    m = int(config.split("-")[1][1:])
    hp = dict(taa._HPARAMS_DEFAULT, translate_pct=0.45)
    allowed = collections.defaultdict(set)
    for name in names:
        allowed[NAME_TO_PIL[name]] |= timm_levels(name, m, hp)
    seen = collections.Counter()
    for index in range(600):
        for kind, op, arg, _, _ in planner.steps(pipe("timm_rand_augment", config), index=index):
            assert arg in allowed[op], (config, op, arg, sorted(allowed[op]))
            seen[op] += 1
    assert set(seen) == set(allowed), set(allowed) - set(seen)


# ---------------------------------------------------------------- 3. distributions

class Recorder:
    """Replaces each op's function: records (our op name, argument,
    resample) of every applied op, per sample; the Rel translations' share
    of the side becomes pixels, as our plans hold them."""

    def __init__(self, ops, size):
        self.calls, self.size = [], size
        for op in ops:
            op.aug_fn = self.make(op.name)

    def make(self, timm_name):
        name = NAME_TO_PIL[timm_name]

        def fn(img, *args, **kwargs):
            arg = float(args[0]) if args else 0.0
            if timm_name.endswith("Rel"):
                arg *= self.size
            rs = None
            if name in GEOMETRIC:  # timm draws the filter inside the op (_interpolation)
                rs = kwargs["resample"]
                rs = RESAMPLE.index(random.choice(rs) if isinstance(rs, (list, tuple)) else rs)
            self.calls[-1].append((name, arg, rs))
            return img
        return fn


def record_timm(transform, ops, n, seed, size=224):
    random.seed(seed)
    np.random.seed(seed)
    rec = Recorder(ops, size)
    img = Image.new("RGB", (size, size))
    for _ in range(n):
        rec.calls.append([])
        transform(img)
    return rec.calls


def record_ours(planner, text, n, seed=11, size=224):
    out = []
    for index in range(n):
        out.append([(op, arg, rs) for kind, op, arg, rs, _ in
                    planner.steps(text, size, size, seed=seed, index=index) if kind == PIL])
    return out


def compare(name, ours, theirs, args_of=("rotate", "shear_x", "color", "contrast", "translate_y")):
    flat_o = [c for s in ours for c in s]
    flat_t = [c for s in theirs for c in s]
    check_chi2(f"{name}: applied op", *chi2_two_sample(collections.Counter(c[0] for c in flat_o),
                                                      collections.Counter(c[0] for c in flat_t)))
    check_chi2(f"{name}: ops per sample", *chi2_two_sample(collections.Counter(len(s) for s in ours),
                                                          collections.Counter(len(s) for s in theirs)))
    geo_o = collections.Counter(c[2] for c in flat_o if c[0] in GEOMETRIC)
    geo_t = collections.Counter(c[2] for c in flat_t if c[0] in GEOMETRIC)
    if len(geo_o | geo_t) > 1:
        check_chi2(f"{name}: interpolation", *chi2_two_sample(geo_o, geo_t))
    for op in args_of:
        a = [c[1] for c in flat_o if c[0] == op]
        b = [c[1] for c in flat_t if c[0] == op]
        if len(a) > 50 and len(b) > 50:
            if len(set(a) | set(b)) == 1:  # one fixed argument
                assert set(a) == set(b), (name, op, set(a), set(b))
            elif len(set(a) | set(b)) <= 12:  # a few discrete values
                check_chi2(f"{name}: {op} argument", *chi2_two_sample(collections.Counter(a),
                                                                     collections.Counter(b)))
            else:
                check_ks(f"{name}: {op} argument", *ks_two_sample(a, b))


N = 6000


@pytest.mark.parametrize("config", ["rand-m9-mstd0.5-inc1", "rand-m7-n3-p0.8-mstd101",
                                    "rand-m9-n2-tweights-mstd1"])
def test_timm_rand_augment_draws_match_timm(planner, config):
    t = taa.rand_augment_transform(config, dict(taa._HPARAMS_DEFAULT, translate_pct=0.45))
    theirs = record_timm(t, t.ops, N, seed=1)
    ours = record_ours(planner, pipe("timm_rand_augment", config), N)
    compare(config, ours, theirs)


@pytest.mark.parametrize("config", ["original-mstd0.5", "v0", "originalr", "v0r-mstd1"])
def test_timm_auto_augment_draws_match_timm(planner, config):
    t = taa.auto_augment_transform(config, dict(taa._HPARAMS_DEFAULT))
    ops = [op for sub in t.policy for op in sub]
    theirs = record_timm(t, ops, N, seed=2)
    ours = record_ours(planner, pipe("timm_auto_augment", config), N)
    compare(config, ours, theirs)
    # the (op, argument) pairs without noise: which sub-policies were drawn
    if "mstd" not in config:
        pairs_o = collections.Counter((c[0], abs(c[1])) for s in ours for c in s)
        pairs_t = collections.Counter((c[0], abs(c[1])) for s in theirs for c in s)
        check_chi2(f"{config}: (op, |argument|)", *chi2_two_sample(pairs_o, pairs_t))


def test_timm_rand_augment_magnitude_noise_is_clipped_gaussian(planner):
    """rand-m9-mstd0.5: rotate's |argument| / 3 is the magnitude, N(9, 0.5)
    clipped to [0, 10]."""
    mags = [abs(c[1]) / 3.0 for s in record_ours(planner, pipe("timm_rand_augment", "rand-m9-mstd0.5"),
                                                  N) for c in s if c[0] == "rotate"]
    cdf = lambda x: np.where(x >= 10.0, 1.0, 0.5 * (1 + np.vectorize(math.erf)((x - 9.0) / (0.5 * math.sqrt(2)))))
    check_ks("rand-m9-mstd0.5: rotate magnitude vs clipped N(9, 0.5)", *ks_one_sample(mags, cdf))


def test_timm_aug_mix_draws_match_timm(planner):
    config = "augmix-m5-w4"
    t = taa.augment_and_mix_transform(config, dict(taa._HPARAMS_DEFAULT))
    seen = []
    real = taa.AugMixAugment._apply_basic

    def spy(self, img, mixing_weights, m):
        seen.append((np.asarray(mixing_weights).copy(), float(m)))
        return real(self, img, mixing_weights, m)

    taa.AugMixAugment._apply_basic = spy
    try:
        theirs = record_timm(t, t.ops, 2000, seed=5, size=8)
    finally:
        taa.AugMixAugment._apply_basic = real
    ours_w, ours_m, ours_depth, ours_ops = [], [], [], []
    for index in range(2000):
        steps = planner.steps(pipe("timm_aug_mix", config), 8, 8, seed=5, index=index)
        ours_w += [s[4] for s in steps if s[0] == CHAIN_END]
        ours_m += [s[4] for s in steps if s[0] == PIL_MIX_END]
        d = 0
        for s in steps:
            if s[0] == CHAIN_BEGIN:
                d = 0
            elif s[0] == PIL:
                d += 1
                ours_ops.append(s[1])
            elif s[0] == CHAIN_END:
                ours_depth.append(d)
    check_ks("augmix: Dirichlet weight", *ks_two_sample(ours_w, [x for w, _ in seen for x in w]))
    check_ks("augmix: Beta m", *ks_two_sample(ours_m, [m for _, m in seen]))
    check_chi2("augmix: chain ops", *chi2_two_sample(collections.Counter(ours_ops),
                                                     collections.Counter(c[0] for s in theirs for c in s)))
    # timm's depths: the ops per chain, from the ops per sample (4 chains)
    assert set(ours_depth) == {1, 2, 3}
    check_chi2("augmix: ops per sample", *chi2_two_sample(
        collections.Counter(len([1 for s in planner.steps(pipe("timm_aug_mix", config), 8, 8, seed=5, index=i)
                                 if s[0] == PIL]) for i in range(2000)),
        collections.Counter(len(s) for s in theirs)))


def test_timm_policy_plans_depend_only_on_seed_epoch_index(planner):
    a = planner.steps(pipe("timm_rand_augment", "rand-m9-mstd0.5-inc1"), seed=1, epoch=2, index=3)
    b = planner.steps(pipe("timm_rand_augment", "rand-m9-mstd0.5-inc1"), seed=1, epoch=2, index=3)
    c = [planner.steps(pipe("timm_rand_augment", "rand-m9-mstd0.5-inc1"), seed=1, epoch=2, index=i)
         for i in range(20)]
    assert a == b
    assert len({tuple(x) for x in c}) > 10


# ---------------------------------------------------------------- 4. config strings

@pytest.mark.parametrize("kind,config,column,words", [
    ("timm_rand_augment", "rand-m9-foo0.5", 8, "'foo0.5'"),
    ("timm_rand_augment", "rand-m9-mstd", 8, "'mstd'"),
    ("timm_rand_augment", "rand-m9.5", 5, "whole number"),
    ("timm_rand_augment", "randaug-m9", 0, "'randaug'"),
    ("timm_rand_augment", "rand-m9-tfoo", 8, "'foo'"),
    ("timm_rand_augment", "rand-n17", 5, "at most 16"),
    ("timm_rand_augment", "rand-w3", 5, "'w3'"),
    ("timm_rand_augment", "rand-p1.5", 5, "probability"),
    ("timm_auto_augment", "v1-mstd0.5", 0, "'v1'"),
    ("timm_auto_augment", "original-m9", 9, "'m9'"),
    ("timm_aug_mix", "augmix-m5-w9", 10, "[1, 8]"),
    ("timm_aug_mix", "augmix-m5-d0", 10, "d must"),
    ("timm_aug_mix", "augmix-m5-n2", 10, "'n2'"),
    ("timm_aug_mix", "mix-m5", 0, "'augmix'"),
])
def test_timm_config_errors_name_the_column_and_the_section(planner, kind, config, column, words):
    text = pipe(kind, config)
    with pytest.raises(FFError) as e:
        planner.steps(text)
    want = text.index('"') + 1 + column + 1  # 1-based column of the section
    assert f"pipeline column {want}:" in e.value.message, e.value.message
    assert words in e.value.message, e.value.message


@pytest.mark.parametrize("text,words", [
    ('decode | timm_rand_augment(config=rand)', "quoted config string"),
    ('decode | timm_rand_augment(config="rand-m9)', "without its closing quote"),
    ('decode | timm_rand_augment(config="rand", interpolation=lanczos)', "random, nearest, bilinear or bicubic"),
    ('decode | timm_rand_augment()', "needs the argument 'config'"),
    ('decode | timm_aug_mix(config="augmix", img_mean=(1, 2, 300))', "fill values"),
])
def test_timm_op_argument_errors(planner, text, words):
    with pytest.raises(FFError) as e:
        planner.steps(text)
    assert "pipeline column" in e.value.message and words in e.value.message, e.value.message
