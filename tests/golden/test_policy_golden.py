"""The automatic augmentation policies (RandAugment, TrivialAugmentWide,
AutoAugment, AugMix) against torchvision itself (transforms v1, on torch
2.x, whose linspace sets the magnitude tables).

1. Magnitude tables: every (op, argument) our planner can produce equals what
   torchvision's `_augmentation_space` + `_apply_op` hand to the op, bit for
   bit, for several image sizes and numbers of bins.
2. Distributions: the frequencies of ops, signs, bins, whole plans, AugMix's
   chain depths and Dirichlet weights match (a) the exact distribution derived
   from torchvision's definitions (one-sample chi-square / KS) and (b)
   torchvision's own draws, recorded by replacing `_apply_op` with a recorder
   (two-sample chi-square / KS). Fixed seeds; critical values at p = 0.001.
3. AugMix output: our full output equals the mixture rebuilt from our plan's
   steps with torchvision's single ops and torchvision's float32 mixing.
4. Fused table ops equal torchvision applying them one by one.

The plans come from ff_shim_plan_steps (tests/shim/shim.c)."""
import collections
import ctypes
import math

import numpy as np
import pytest
import torch
import torchvision.transforms as T
import torchvision.transforms.autoaugment as A
import torchvision.transforms.functional as F
from torchvision.transforms import InterpolationMode

from conftest import FFError

# ff__step_kind and ff__aug_op (src/pipeline/pipeline.h, src/ops/augment.h)
STEP_AUG, MIX_BEGIN, CHAIN_BEGIN, CHAIN_END, MIX_END = 4, 5, 6, 7, 8
OP_NAMES = ["Identity", "ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate", "Brightness",
            "Color", "Contrast", "Sharpness", "Posterize", "Solarize", "AutoContrast", "Equalize",
            "Invert", "Hue"]
FACTOR_OPS = {"Brightness", "Color", "Contrast", "Sharpness"}
SIZES = [(224, 224), (32, 32), (100, 333)]  # (H, W)
NUM_BINS = [31, 10, 5, 2, 50, 64]
AA_POLICIES = {"imagenet": T.AutoAugmentPolicy.IMAGENET, "cifar10": T.AutoAugmentPolicy.CIFAR10,
               "svhn": T.AutoAugmentPolicy.SVHN}
REAL_APPLY_OP = A._apply_op


def tv_arg(name, magnitude):
    """The argument torchvision's _apply_op gives the op for `magnitude` (what
    our plan steps store as aug.arg)."""
    if name in FACTOR_OPS:
        return 1.0 + magnitude
    if name in ("TranslateX", "TranslateY", "Posterize"):
        return float(int(magnitude))
    return float(magnitude)


def magnitude_of_arg(name, arg):
    """Inverse of tv_arg (exact: 1 + m is exact in double for a float32 m < 1)."""
    return arg - 1.0 if name in FACTOR_OPS else arg


def is_negative(name, arg):
    return arg < 1.0 if name in FACTOR_OPS else arg < 0.0


# ---------------------------------------------------------------- planner access

class Planner:
    def __init__(self, lib):
        f = lib.ff_shim_plan_steps_as
        f.restype = ctypes.c_int
        ip = ctypes.POINTER(ctypes.c_int)
        f.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_uint64, ctypes.c_uint64,
                      ctypes.c_uint64, ip, ip, ctypes.POINTER(ctypes.c_double),
                      ctypes.POINTER(ctypes.c_float), ctypes.c_int]
        self.f = f
        self.cap = 128
        self.kinds = (ctypes.c_int * self.cap)()
        self.ops = (ctypes.c_int * self.cap)()
        self.args = (ctypes.c_double * self.cap)()
        self.weights = (ctypes.c_float * self.cap)()

    def steps(self, pipeline, h, w, seed=0, epoch=0, index=0, semantics="v1"):
        """[(kind, op name, arg, weight)] of the sample's plan in `semantics`
        ("v1" or "v2", ff_semantics)."""
        n = self.f(pipeline.encode(), {"v1": 0, "v2": 1}[semantics], h, w, seed, epoch, index, self.kinds,
                   self.ops, self.args, self.weights, self.cap)
        if n < 0:
            raise FFError(n, f"ff_shim_plan_steps({pipeline!r})")
        assert n <= self.cap
        return [(self.kinds[i], OP_NAMES[self.ops[i]], self.args[i], self.weights[i]) for i in range(n)]

    def draws(self, pipeline, h, w, seed=0, index=0):
        """[(op name, arg)] of the AUG steps."""
        return [(op, arg) for kind, op, arg, _ in self.steps(pipeline, h, w, seed, 0, index)
                if kind == STEP_AUG]


@pytest.fixture(scope="module")
def planner(shim):
    if not hasattr(shim.lib, "ff_shim_plan_steps_as"):
        pytest.skip("libff_shim lacks ff_shim_plan_steps_as")
    return Planner(shim.lib)


def tv_space(family, num_bins, hw, severity=10, all_ops=True):
    """{op name: ([magnitude per bin as torchvision reads it] or None, signed)}."""
    if family == "ra":
        space = T.RandAugment()._augmentation_space(num_bins, hw)
    elif family == "ta":
        space = T.TrivialAugmentWide()._augmentation_space(num_bins)
    elif family == "aa":
        space = T.AutoAugment()._augmentation_space(num_bins, hw)
    else:
        space = T.AugMix(severity=severity, all_ops=all_ops)._augmentation_space(num_bins, hw)
    return {name: ([float(mags[k].item()) for k in range(num_bins)] if mags.ndim > 0 else None, signed)
            for name, (mags, signed) in space.items()}


def signed_args(name, m, signed):
    return {tv_arg(name, m), tv_arg(name, -m)} if signed else {tv_arg(name, m)}


def compare_arg_sets(got, want, what):
    """got/want: {op: set(args)}; exact equality, with a readable message."""
    problems = []
    for op in sorted(set(got) | set(want)):
        g, w = got.get(op, set()), want.get(op, set())
        if g != w:
            problems.append(f"{op}: unexpected {sorted(g - w)!r}, missing {sorted(w - g)!r}")
    assert not problems, f"{what}:\n  " + "\n  ".join(problems)


# ---------------------------------------------------------------- statistics (no scipy)

P_CRIT = 0.001
Z_CRIT = 3.090232306167813  # standard normal quantile at 1 - P_CRIT
REPORT = []


def chi2_critical(df):
    """Wilson-Hilferty approximation of the chi-square quantile at 1 - P_CRIT."""
    a = 2.0 / (9.0 * df)
    return df * (1.0 - a + Z_CRIT * math.sqrt(a)) ** 3


def chi2_pvalue(stat, df):
    """Wilson-Hilferty approximation of P(chi2_df >= stat)."""
    if stat <= 0:
        return 1.0
    a = 2.0 / (9.0 * df)
    z = ((stat / df) ** (1.0 / 3.0) - (1.0 - a)) / math.sqrt(a)
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def check_chi2(name, stat, df):
    crit = chi2_critical(df)
    p = chi2_pvalue(stat, df)
    REPORT.append(f"{name:<58} chi2={stat:9.2f} df={df:4d} crit={crit:8.2f} p~{p:.3g}")
    print(REPORT[-1])
    assert df >= 1, f"{name}: no degrees of freedom"
    assert stat < crit, f"{name}: chi2 {stat:.2f} >= {crit:.2f} (df {df}, p ~ {p:.2e})"


def chi2_one_sample(observed, probs, min_expected=5.0):
    """Pearson's statistic of `observed` (Counter) against exact cell
    probabilities; cells expected below min_expected are pooled."""
    n = sum(observed.values())
    impossible = {k: v for k, v in observed.items() if probs.get(k, 0.0) == 0.0}
    assert not impossible, f"outcomes with probability 0 observed: {list(impossible.items())[:8]}"
    assert abs(sum(probs.values()) - 1.0) < 1e-9, sum(probs.values())
    cells, pool_o, pool_e = [], 0, 0.0
    for k, p in probs.items():
        e = n * p
        if e < min_expected:
            pool_o += observed.get(k, 0)
            pool_e += e
        else:
            cells.append((observed.get(k, 0), e))
    if pool_e >= min_expected or (pool_e > 0 and not cells):
        cells.append((pool_o, pool_e))
    elif pool_e > 0:  # too small on its own: merge into the smallest cell
        i = min(range(len(cells)), key=lambda j: cells[j][1])
        cells[i] = (cells[i][0] + pool_o, cells[i][1] + pool_e)
    return sum((o - e) ** 2 / e for o, e in cells), len(cells) - 1


def chi2_two_sample(a, b, min_count=10):
    """Two-sample chi-square (homogeneity) of two Counters over the same
    categories; categories with fewer than min_count in both are pooled."""
    na, nb = sum(a.values()), sum(b.values())
    ka, kb = math.sqrt(nb / na), math.sqrt(na / nb)
    cells, pa, pb = [], 0, 0
    for k in set(a) | set(b):
        x, y = a.get(k, 0), b.get(k, 0)
        if x + y >= min_count:
            cells.append((x, y))
        else:
            pa, pb = pa + x, pb + y
    if pa + pb:
        cells.append((pa, pb))
    return sum((ka * x - kb * y) ** 2 / (x + y) for x, y in cells), len(cells) - 1


KS_C = math.sqrt(-math.log(P_CRIT / 2.0) / 2.0)  # Kolmogorov c(alpha), 1.9495 at 0.001


def ks_one_sample(x, cdf):
    x = np.sort(np.asarray(x, np.float64))
    n = len(x)
    f = cdf(x)
    return max(np.max(np.arange(1, n + 1) / n - f), np.max(f - np.arange(n) / n)), KS_C / math.sqrt(n)


def ks_two_sample(x, y):
    x, y = np.sort(np.asarray(x, np.float64)), np.sort(np.asarray(y, np.float64))
    allv = np.concatenate([x, y])
    d = np.max(np.abs(np.searchsorted(x, allv, "right") / len(x) - np.searchsorted(y, allv, "right") / len(y)))
    return d, KS_C * math.sqrt((len(x) + len(y)) / (len(x) * len(y)))


def check_ks(name, d, crit):
    REPORT.append(f"{name:<58} KS D={d:.4f} crit={crit:.4f}")
    print(REPORT[-1])
    assert d < crit, f"{name}: KS statistic {d:.4f} >= {crit:.4f} (p < {P_CRIT})"


@pytest.fixture(scope="module", autouse=True)
def _print_report():
    yield
    if REPORT:
        print("\npolicy statistics (critical values at p = %g):" % P_CRIT)
        for line in REPORT:
            print("  " + line)


# ---------------------------------------------------------------- torchvision recorder

class Recorder:
    """Replaces torchvision's _apply_op with one that records (op, magnitude)
    and returns its input unchanged (as a new tensor object, so that the start
    of an AugMix chain, which gets the original batch, is recognisable)."""

    def __init__(self, monkeypatch):
        self.calls = []     # (op name, magnitude) in order
        self.chains = []    # AugMix: list of [(op name, magnitude)] per chain
        self._last = None
        monkeypatch.setattr(A, "_apply_op", self._apply)

    def _apply(self, img, op_name, magnitude, interpolation, fill):
        self.calls.append((op_name, magnitude))
        if img is not self._last:
            self.chains.append([])
        self.chains[-1].append((op_name, magnitude))
        self._last = img.view_as(img)
        return self._last

    def per_call(self, transform, img, n, seed):
        """[[(op name, arg)] of each call] over n calls of transform."""
        torch.manual_seed(seed)
        out = []
        for _ in range(n):
            start = len(self.calls)
            transform(img)
            out.append([(op, tv_arg(op, m)) for op, m in self.calls[start:] if op != "Identity"])
        return out


# ================================================================ 1. magnitude tables

def test_linspace_equals_torch_for_every_bin(shim):
    """Every bin of the float32 tables, for any number of bins a pipeline may
    ask for: torch 2.x computes each element on its own (start + step*k below
    the middle, end - step*(n-1-k) above, fused), unlike torch 1.13's
    vectorised kernel, so e.g. linspace(0, 32, 31)[15] is 15.999999."""
    f = shim.lib.ff_shim_linspace
    f.restype = ctypes.c_float
    f.argtypes = [ctypes.c_float, ctypes.c_float, ctypes.c_int, ctypes.c_int]
    ends = [(0.0, 32.0), (0.0, 0.99), (0.0, 0.9), (0.0, 0.3), (0.0, 135.0), (0.0, 30.0),
            (255.0, 0.0), (0.0, 150.0 / 331.0 * 224), (0.0, 333 / 3.0)]
    failures = []
    for lo, hi in ends:
        for n in range(1, 257):
            want = torch.linspace(lo, hi, n).tolist()
            got = [f(lo, hi, n, k) for k in range(n)]
            bad = [k for k in range(n) if got[k] != want[k]]
            if bad:
                failures.append(f"linspace({lo}, {hi}, {n}): {len(bad)} bins differ, "
                                f"[{bad[0]}] = {got[bad[0]]!r}, torch {want[bad[0]]!r}")
    assert not failures, "\n".join(failures[:10])


@pytest.mark.parametrize("hw", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("num_bins", NUM_BINS)
def test_rand_augment_magnitudes_equal_torchvision(planner, hw, num_bins):
    space = tv_space("ra", num_bins, hw)
    failures = []
    for k in range(num_bins):
        want = {name: {0.0} if mags is None else signed_args(name, mags[k], signed)
                for name, (mags, signed) in space.items() if name != "Identity"}
        got = collections.defaultdict(set)
        text = f"decode | rand_augment(num_ops=2, magnitude={k}, num_magnitude_bins={num_bins})"
        for i in range(250):
            for op, arg in planner.draws(text, *hw, index=i):
                got[op].add(arg)
        try:
            compare_arg_sets(got, want, f"magnitude={k}")
        except AssertionError as e:
            failures.append(str(e).split("\nassert")[0])
    assert not failures, f"rand_augment num_magnitude_bins={num_bins} at {hw}:\n" + "\n".join(failures)


@pytest.mark.parametrize("hw", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("num_bins", NUM_BINS)
def test_trivial_augment_wide_magnitudes_equal_torchvision(planner, hw, num_bins):
    space = tv_space("ta", num_bins, hw)
    want = {}
    for name, (mags, signed) in space.items():
        if name == "Identity":
            continue
        want[name] = {0.0} if mags is None else set().union(*(signed_args(name, m, signed) for m in mags))
    got = collections.defaultdict(set)
    text = f"decode | trivial_augment_wide(num_magnitude_bins={num_bins})"
    for i in range(14 * 2 * num_bins * 25):  # ~25 draws per (op, bin, sign)
        for op, arg in planner.draws(text, *hw, index=i):
            got[op].add(arg)
    compare_arg_sets(got, want, f"trivial_augment_wide bins={num_bins} at {hw}")


@pytest.mark.parametrize("hw", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("policy", list(AA_POLICIES))
def test_auto_augment_magnitudes_equal_torchvision(planner, hw, policy):
    space = tv_space("aa", 10, hw)
    want = collections.defaultdict(set)
    for sub in T.AutoAugment(AA_POLICIES[policy]).policies:
        for name, p, idx in sub:
            if p <= 0.0:  # fires only if rand() returns exactly 0
                continue
            mags, signed = space[name]
            want[name] |= {0.0} if idx is None else signed_args(name, mags[idx], signed)
    got = collections.defaultdict(set)
    for i in range(8000):
        for op, arg in planner.draws(f"decode | auto_augment(policy={policy})", *hw, index=i):
            got[op].add(arg)
    compare_arg_sets(got, want, f"auto_augment({policy}) at {hw}")


@pytest.mark.parametrize("hw", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("severity,all_ops", [(10, True), (3, True), (1, True), (10, False)])
def test_aug_mix_magnitudes_equal_torchvision(planner, hw, severity, all_ops):
    space = tv_space("am", 10, hw, severity, all_ops)
    want = {name: {0.0} if mags is None else set().union(*(signed_args(name, m, signed)
                                                           for m in mags[:severity]))
            for name, (mags, signed) in space.items()}
    got = collections.defaultdict(set)
    text = f"decode | aug_mix(severity={severity}, all_ops={'true' if all_ops else 'false'})"
    for i in range(1500):
        for op, arg in planner.draws(text, *hw, index=i):
            got[op].add(arg)
    compare_arg_sets(got, want, f"aug_mix(severity={severity}, all_ops={all_ops}) at {hw}")


# ================================================================ 2. distributions

N_SAMPLES = 5000
TV_SEED = 20240607


def ra_plan_probs(space, magnitude, num_ops):
    """Exact distribution of RandAugment's plan: a tuple of (op, arg) with
    Identity left out, from torchvision's definition (uniform op, fixed bin,
    fair sign for signed ops)."""
    slot = collections.Counter()
    p_op = 1.0 / len(space)
    for name, (mags, signed) in space.items():
        if name == "Identity":
            slot[()] += p_op
        elif mags is None:
            slot[((name, 0.0),)] += p_op
        elif signed:
            slot[((name, tv_arg(name, mags[magnitude])),)] += p_op / 2
            slot[((name, tv_arg(name, -mags[magnitude])),)] += p_op / 2
        else:
            slot[((name, tv_arg(name, mags[magnitude])),)] += p_op
    probs = collections.Counter({(): 1.0})
    for _ in range(num_ops):
        nxt = collections.Counter()
        for a, pa in probs.items():
            for b, pb in slot.items():
                nxt[a + b] += pa * pb
        probs = nxt
    return probs


def test_rand_augment_distribution(planner, monkeypatch):
    hw = (224, 224)
    space = tv_space("ra", 31, hw)
    text = "decode | rand_augment(num_ops=2, magnitude=9)"
    ours = [planner.draws(text, *hw, seed=7, index=i) for i in range(N_SAMPLES)]

    # op frequency over the 2N draws (Identity leaves no step)
    ops = collections.Counter(op for plan in ours for op, _ in plan)
    ops["Identity"] = 2 * N_SAMPLES - sum(ops.values())
    check_chi2("rand_augment op frequency vs uniform(14)", *chi2_one_sample(ops, {n: 1 / 14 for n in space}))
    # sign of each signed op (all magnitudes at bin 9 are non-zero at 224)
    stat, df = 0.0, 0
    for name, (mags, signed) in space.items():
        if signed:
            neg = sum(1 for plan in ours for op, arg in plan if op == name and is_negative(op, arg))
            pos = ops[name] - neg
            stat, df = stat + (neg - pos) ** 2 / (neg + pos), df + 1
    check_chi2("rand_augment sign per signed op vs 50/50", stat, df)
    # whole plans
    plans = collections.Counter(tuple(p) for p in ours)
    check_chi2("rand_augment plans vs exact distribution", *chi2_one_sample(plans, ra_plan_probs(space, 9, 2)))

    rec = Recorder(monkeypatch)
    theirs = rec.per_call(T.RandAugment(), torch.zeros(3, *hw, dtype=torch.uint8), N_SAMPLES, TV_SEED)
    tv_plans = collections.Counter(tuple(p) for p in theirs)
    check_chi2("rand_augment plans, ours vs torchvision (2-sample)", *chi2_two_sample(plans, tv_plans))
    tv_ops = collections.Counter(op for op, _ in rec.calls)
    check_chi2("rand_augment op frequency, ours vs torchvision", *chi2_two_sample(ops, tv_ops))


def test_trivial_augment_wide_distribution(planner, monkeypatch):
    hw, n_bins = (224, 224), 31
    space = tv_space("ta", n_bins, hw)
    text = "decode | trivial_augment_wide"
    ours = [planner.draws(text, *hw, seed=11, index=i) for i in range(N_SAMPLES)]
    assert all(len(p) <= 1 for p in ours)

    ops = collections.Counter(p[0][0] if p else "Identity" for p in ours)
    check_chi2("trivial_augment_wide op frequency vs uniform(14)",
               *chi2_one_sample(ops, {n: 1 / 14 for n in space}))
    # bins: ops whose table is injective (|arg| -> bin)
    bins = collections.Counter()
    signs = collections.defaultdict(lambda: [0, 0])
    for p in ours:
        if not p:
            continue
        op, arg = p[0]
        mags, signed = space[op]
        if mags is None or op in ("TranslateX", "TranslateY", "Posterize"):
            continue
        k = mags.index(abs(magnitude_of_arg(op, arg)))
        bins[k] += 1
        if signed and k > 0:
            signs[op][is_negative(op, arg)] += 1
    check_chi2("trivial_augment_wide bin frequency vs uniform(31)",
               *chi2_one_sample(bins, {k: 1 / n_bins for k in range(n_bins)}))
    stat = sum((a - b) ** 2 / (a + b) for a, b in signs.values())
    check_chi2("trivial_augment_wide sign per signed op vs 50/50", stat, len(signs))
    # whole plans: (op, arg) with exact probabilities
    probs = collections.Counter()
    for name, (mags, signed) in space.items():
        if name == "Identity":
            probs[()] += 1 / 14
        elif mags is None:
            probs[((name, 0.0),)] += 1 / 14
        else:
            for m in mags:
                for s in ((1.0, -1.0) if signed else (1.0,)):
                    probs[((name, tv_arg(name, s * m)),)] += 1 / 14 / n_bins / (2 if signed else 1)
    plans = collections.Counter(tuple(p) for p in ours)
    check_chi2("trivial_augment_wide plans vs exact distribution", *chi2_one_sample(plans, probs))

    rec = Recorder(monkeypatch)
    theirs = rec.per_call(T.TrivialAugmentWide(), torch.zeros(3, *hw, dtype=torch.uint8), N_SAMPLES, TV_SEED)
    check_chi2("trivial_augment_wide plans, ours vs torchvision",
               *chi2_two_sample(plans, collections.Counter(tuple(p) for p in theirs)))
    tv_ops = collections.Counter(op for op, _ in rec.calls)
    check_chi2("trivial_augment_wide ops, ours vs torchvision", *chi2_two_sample(ops, tv_ops))


def aa_plan_probs(policy, space):
    """Exact distribution of AutoAugment's plan from torchvision's policy
    table: uniform sub-policy, sub-op i fires with probability p_i, signed
    magnitudes negated with probability 1/2. p_i is compared with a float32
    uniform on the 2^-24 grid: P(u <= f32(p)) = (floor(f32(p) 2^24) + 1) / 2^24."""
    probs = collections.Counter()
    subs = T.AutoAugment(policy).policies
    for sub in subs:
        branches = [((), 1.0 / len(subs))]
        for name, p, idx in sub:
            p32 = float(np.float32(p))
            fire = min(1.0, (math.floor(p32 * 2 ** 24) + 1) / 2 ** 24) if p32 > 0 else 2.0 ** -24
            mags, signed = space[name]
            outcomes = [(0.0, 1.0)] if idx is None else (
                [(mags[idx], 0.5), (-mags[idx], 0.5)] if signed else [(mags[idx], 1.0)])
            nxt = []
            for key, pk in branches:
                nxt.append((key, pk * (1 - fire)))
                for m, pm in outcomes:
                    nxt.append((key + ((name, tv_arg(name, m)),), pk * fire * pm))
            branches = nxt
        for key, pk in branches:
            probs[key] += pk
    return probs


@pytest.mark.parametrize("policy", list(AA_POLICIES))
def test_auto_augment_distribution(planner, monkeypatch, policy):
    hw = (224, 224)
    space = tv_space("aa", 10, hw)
    text = f"decode | auto_augment(policy={policy})"
    ours = [tuple(planner.draws(text, *hw, seed=13, index=i)) for i in range(N_SAMPLES)]
    plans = collections.Counter(ours)
    probs = aa_plan_probs(AA_POLICIES[policy], space)
    check_chi2(f"auto_augment({policy}) plans vs exact distribution", *chi2_one_sample(plans, probs))

    # per-op application counts (informative; the plan test above is the check)
    want_ops = collections.Counter()
    for key, p in probs.items():
        for op, _ in key:
            want_ops[op] += p * N_SAMPLES
    got_ops = collections.Counter(op for plan in ours for op, _ in plan)
    worst = max(want_ops, key=lambda o: abs(got_ops[o] - want_ops[o]) / math.sqrt(want_ops[o]))
    print(f"auto_augment({policy}) op counts (ours / expected): "
          + ", ".join(f"{o} {got_ops[o]}/{want_ops[o]:.0f}" for o in sorted(want_ops))
          + f"; largest deviation {worst}")

    rec = Recorder(monkeypatch)
    theirs = rec.per_call(T.AutoAugment(AA_POLICIES[policy]), torch.zeros(3, *hw, dtype=torch.uint8),
                          N_SAMPLES, TV_SEED)
    tv_plans = collections.Counter(tuple(p) for p in theirs)
    check_chi2(f"auto_augment({policy}) plans, ours vs torchvision", *chi2_two_sample(plans, tv_plans))
    # one category per plan (the op counts of a plan are not independent draws)
    first = collections.Counter(p[0][0] if p else None for p in ours)
    tv_first = collections.Counter(p[0][0] if p else None for p in theirs)
    check_chi2(f"auto_augment({policy}) first op, ours vs torchvision", *chi2_two_sample(first, tv_first))
    fired = collections.Counter(len(p) for p in ours)
    tv_fired = collections.Counter(len(p) for p in theirs)
    check_chi2(f"auto_augment({policy}) ops per plan, ours vs torchvision", *chi2_two_sample(fired, tv_fired))


def parse_aug_mix(steps):
    """(m0, [(weight, [(op, arg)])]) of an AugMix plan, checking its structure."""
    assert steps[0][0] == MIX_BEGIN and steps[-1][0] == MIX_END, steps
    m0, chains, cur = steps[0][3], [], None
    for kind, op, arg, w in steps[1:-1]:
        if kind == CHAIN_BEGIN:
            assert cur is None
            cur = []
        elif kind == STEP_AUG:
            cur.append((op, arg))
        else:
            assert kind == CHAIN_END and cur is not None, steps
            chains.append((w, cur))
            cur = None
    return m0, chains


class DirichletRecorder:
    """Wraps AugMix._sample_dirichlet: records m0 and the first chain weight
    (w_1 * m1) of each call, as torchvision computes them."""

    def __init__(self, augmix):
        self.m0, self.w1, self._m = [], [], None
        augmix._sample_dirichlet = self._sample

    def _sample(self, params):
        out = torch._sample_dirichlet(params)
        if params.shape[-1] == 2 and self._m is None:
            self._m = out
            self.m0.append(float(out[0, 0]))
        else:
            self.w1.append(float((out * self._m[:, 1].view(1, -1))[0, 0]))
            self._m = None
        return out


@pytest.mark.parametrize("alpha", [1.0, 0.5])
def test_aug_mix_distribution(planner, monkeypatch, alpha):
    hw, n = (32, 32), 2000
    space = tv_space("am", 10, hw, 3, True)
    text = f"decode | aug_mix(alpha={alpha})"
    ours = [parse_aug_mix(planner.steps(text, *hw, seed=17, index=i)) for i in range(n)]
    m0 = [m for m, _ in ours]
    w1 = [chains[0][0] for _, chains in ours]
    for m, chains in ours:
        assert len(chains) == 3
        assert abs(m + sum(w for w, _ in chains) - 1.0) < 1e-5, (m, chains)

    if alpha == 1.0:  # Beta(1, 1) = uniform
        check_ks("aug_mix m0 vs Uniform(0, 1)", *ks_one_sample(m0, lambda x: x))
    else:  # Beta(1/2, 1/2): the arcsine law
        check_ks("aug_mix(alpha=0.5) m0 vs Beta(0.5, 0.5)",
                 *ks_one_sample(m0, lambda x: 2 / math.pi * np.arcsin(np.sqrt(np.clip(x, 0, 1)))))

    depths = collections.Counter(len(c) for _, chains in ours for _, c in chains)
    draws = [d for _, chains in ours for _, c in chains for d in c]
    ops = collections.Counter(op for op, _ in draws)
    probs = collections.Counter()
    for name, (mags, signed) in space.items():
        if mags is None:
            probs[(name, 0.0)] += 1 / 13
        else:
            for m in mags[:3]:
                for s in ((1.0, -1.0) if signed else (1.0,)):
                    probs[(name, tv_arg(name, s * m))] += 1 / 13 / 3 / (2 if signed else 1)
    draws_c = collections.Counter(draws)
    if alpha == 1.0:
        check_chi2("aug_mix chain depth vs uniform{1,2,3}",
                   *chi2_one_sample(depths, {1: 1 / 3, 2: 1 / 3, 3: 1 / 3}))
        check_chi2("aug_mix op frequency vs uniform(13)", *chi2_one_sample(ops, {o: 1 / 13 for o in space}))
        check_chi2("aug_mix (op, arg) per draw vs exact distribution", *chi2_one_sample(draws_c, probs))

    rec = Recorder(monkeypatch)
    augmix = T.AugMix(alpha=alpha)
    dirichlet = DirichletRecorder(augmix)
    torch.manual_seed(TV_SEED)
    img = torch.zeros(3, *hw, dtype=torch.uint8)
    for _ in range(n):
        augmix(img)
    assert len(rec.chains) == 3 * n
    tag = "aug_mix" if alpha == 1.0 else "aug_mix(alpha=0.5)"
    check_ks(f"{tag} m0, ours vs torchvision", *ks_two_sample(m0, dirichlet.m0))
    check_ks(f"{tag} first chain weight, ours vs torchvision", *ks_two_sample(w1, dirichlet.w1))
    tv_depths = collections.Counter(len(c) for c in rec.chains)
    check_chi2(f"{tag} chain depth, ours vs torchvision", *chi2_two_sample(depths, tv_depths))
    tv_draws = collections.Counter((op, tv_arg(op, m)) for op, m in rec.calls)
    check_chi2(f"{tag} (op, arg) per draw, ours vs torchvision", *chi2_two_sample(draws_c, tv_draws))
    check_chi2(f"{tag} op frequency, ours vs torchvision",
               *chi2_two_sample(ops, collections.Counter(op for op, _ in rec.calls)))


def test_aug_mix_fixed_chain_depth(planner):
    for i in range(200):
        _, chains = parse_aug_mix(planner.steps("decode | aug_mix(mixture_width=5, chain_depth=2)", 40, 40,
                                                index=i))
        assert [len(c) for _, c in chains] == [2] * 5


# ================================================================ 3. AugMix output

def random_image(h, w, seed):
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)


def smooth_image(h, w, seed):
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    img = np.empty((h, w, 3))
    for c in range(3):
        a, b, ph = rng.uniform(0.02, 0.2, 3)
        img[..., c] = 127.5 + 100 * np.sin(a * x + b * y + ph * 6) + rng.normal(0, 3, (h, w))
    return np.clip(img, 0, 255).astype(np.uint8)


def aug_mix_reference(img_hwc, steps):
    """torchvision's AugMix.forward with our plan's draws: each chain from the
    original image through torchvision's _apply_op (bilinear, fill None),
    mixed in float32 and truncated to uint8."""
    batch = torch.from_numpy(img_hwc).permute(2, 0, 1).contiguous().view(1, 3, *img_hwc.shape[:2])
    mix = out = aug = None
    for kind, op, arg, w in steps:
        if kind == MIX_BEGIN:
            mix = torch.tensor([w], dtype=torch.float32).view(1, 1, 1, 1) * batch
        elif kind == CHAIN_BEGIN:
            aug = batch
        elif kind == STEP_AUG:
            aug = REAL_APPLY_OP(aug, op, magnitude_of_arg(op, arg), interpolation=InterpolationMode.BILINEAR,
                                fill=None)
        elif kind == CHAIN_END:
            mix.add_(torch.tensor([w], dtype=torch.float32).view(1, 1, 1, 1) * aug)
        elif kind == MIX_END:
            out = mix.to(dtype=torch.uint8)
        else:
            raise AssertionError(f"unexpected step kind {kind}")
    return out[0].permute(1, 2, 0).numpy()


@pytest.mark.parametrize("hw", [(32, 32), (48, 64), (64, 40), (96, 96)], ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("kind", ["random", "smooth"])
@pytest.mark.parametrize("args", ["", "severity=10, mixture_width=4, chain_depth=3, alpha=0.5"])
def test_aug_mix_output_matches_torchvision_ops(planner, run, stats, hw, kind, args):
    h, w = hw
    make = random_image if kind == "random" else smooth_image
    text = f"decode | crop(top=0, left=0, height={h}, width={w}) | aug_mix({args})"
    for index in range(4):
        img = make(h, w, 1000 * h + w + index)
        steps = planner.steps(text, h, w, seed=5, index=index)
        want = aug_mix_reference(img, steps)
        got = run(text, img, seed=5, index=index)
        stats("aug_mix (rebuilt from torchvision ops)").add(got, want)
        d = np.abs(got.astype(int) - want.astype(int))
        assert d.max() <= 1, (f"index {index}: max diff {d.max()} at {np.unravel_index(d.argmax(), d.shape)}; "
                              f"plan {steps}")


# ================================================================ 4. fused table ops

FUSED_CASES = [
    ("posterize(bits=5) | solarize(threshold=100) | autocontrast | equalize | invert | brightness(factor=1.3)",
     [lambda x: F.posterize(x, 5), lambda x: F.solarize(x, 100.0), F.autocontrast, F.equalize, F.invert,
      lambda x: F.adjust_brightness(x, 1.3)]),
    ("equalize | brightness(factor=0.6) | autocontrast | posterize(bits=3) | solarize(threshold=200)",
     [F.equalize, lambda x: F.adjust_brightness(x, 0.6), F.autocontrast, lambda x: F.posterize(x, 3),
      lambda x: F.solarize(x, 200.0)]),
    ("invert | autocontrast | autocontrast | equalize | brightness(factor=1.9) | equalize",
     [F.invert, F.autocontrast, F.autocontrast, F.equalize, lambda x: F.adjust_brightness(x, 1.9), F.equalize]),
]


@pytest.mark.parametrize("case", range(len(FUSED_CASES)))
@pytest.mark.parametrize("kind", ["random", "smooth", "narrow"])
def test_fused_table_ops_equal_torchvision_one_by_one(run, stats, case, kind):
    ops_text, fns = FUSED_CASES[case]
    for h, w in [(32, 32), (57, 41)]:
        if kind == "random":
            img = random_image(h, w, h * w)
        elif kind == "smooth":
            img = smooth_image(h, w, h * w)
        else:  # a narrow value range, so that autocontrast and equalize matter
            img = (60 + random_image(h, w, h + w) // 5).astype(np.uint8)
        got = run(f"decode | crop(top=0, left=0, height={h}, width={w}) | {ops_text}", img)
        x = torch.from_numpy(img).permute(2, 0, 1).contiguous()
        for fn in fns:
            x = fn(x)
        want = x.permute(1, 2, 0).numpy()
        stats("fused table ops").add(got, want)
        assert np.array_equal(got, want), f"{ops_text} on {kind} {h}x{w}: " \
            f"{np.count_nonzero(got != want)} values differ, max {np.abs(got.astype(int) - want).max()}"
