"""The batch stage mixup_cutmix against timm's Mixup and torchvision v2's MixUp/CutMix.

Exactness: the loader's own draws (Loader.mix_plan) are injected into the
references (λ, the Mixup/CutMix choice, the box draws), which then mix the
same unmixed batch (the pipeline without the stage: the per-sample draws do
not depend on it); images and soft targets must be bit-identical.
Distributions: the loader's draws over many batches against the
references' own random draws (two-sample Kolmogorov-Smirnov, binomial and
chi-square bounds at p < 1e-3, on fixed seeds).
"""
import glob
import json
import math
import os

import pytest

from conftest import have_torch, make_folder

np = pytest.importorskip("numpy")
if not have_torch():
    pytest.skip("torch is not installed", allow_module_level=True)
torch = pytest.importorskip("torch")
timm_mixup = pytest.importorskip("timm.data.mixup")
v2 = pytest.importorskip("torchvision.transforms.v2")

import fusionflow  # noqa: E402

BASE = "decode | random_resized_crop(size=(24, 32)) | random_horizontal_flip | normalize(mean=imagenet, std=imagenet)"
NUM_CLASSES = 5


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root, _, _ = make_folder(str(tmp_path_factory.mktemp("mix")), classes=3, per_class=8)
    return root


def batches(root, pipeline, batch_size=8, epoch=0, num_threads=2, **kw):
    with fusionflow.Loader(root, pipeline, batch_size=batch_size, seed=7, num_threads=num_threads, device="cpu",
                           output="torch", **kw) as loader:
        loader.set_epoch(epoch)
        out = [(x.clone(), y.clone()) for x, y in loader]
        plans = [loader.mix_plan(b, epoch) for b in range(len(out))] if "mixup_cutmix" in pipeline else None
    return out, plans


def stage(**kw):
    args = ", ".join(f"{k}={v}" for k, v in kw.items())
    return f"{BASE} | mixup_cutmix({args}, num_classes={NUM_CLASSES})"


def bits(t):
    return t.contiguous().view(torch.int32)


class InjectedMixup(timm_mixup.Mixup):
    """timm's Mixup with the loader's draws in place of numpy's."""

    def __init__(self, plan, **kw):
        super().__init__(num_classes=NUM_CLASSES, **kw)
        self.plan = plan

    def _params_per_batch(self):
        d = self.plan["draws"][0]
        return (float(d["lam_draw"]) if d["applied"] else 1.0), (bool(d["cutmix"]) if d["applied"] else False)

    def _params_per_elem(self, batch_size):
        draws = self.plan["draws"]
        assert len(draws) == batch_size
        lam = np.array([d["lam_draw"] for d in draws], dtype=np.float32)
        return lam, np.array([d["cutmix"] for d in draws], dtype=bool)


def box_draws(plan, minmax):
    """The integers timm's rand_bbox / rand_bbox_minmax (or torchvision's CutMix) take from randint, in order."""
    out = []
    for d in plan["draws"]:
        if "box" in d:
            out += d["cut"] + d["corner"] if minmax else d["center"]
    return out


def fake_randint(values):
    def randint(low, high=None, size=None, **kw):
        assert size is None
        if high is None:
            low, high = 0, low
        v = values.pop(0)
        assert low <= v < high, (low, v, high)
        return v
    return randint


TIMM_CASES = [
    dict(mixup_alpha=0.8, cutmix_alpha=1.0, mode="batch"),
    dict(mixup_alpha=0.8, cutmix_alpha=1.0, mode="pair", prob=0.8),
    dict(mixup_alpha=0.8, cutmix_alpha=1.0, mode="elem", switch_prob=0.3, label_smoothing=0.2),
    dict(mixup_alpha=0.2, cutmix_alpha=0.0, mode="elem", prob=0.6),
    dict(mixup_alpha=0.0, cutmix_alpha=1.0, mode="batch", correct_lam="false"),
    dict(mixup_alpha=0.0, cutmix_alpha=2.0, mode="pair"),
    dict(mixup_alpha=0.0, cutmix_minmax=(0.2, 0.8), mode="elem"),
    dict(mixup_alpha=1.0, cutmix_minmax=(0.3, 0.9), mode="batch", label_smoothing=0.0),
]


@pytest.mark.parametrize("case", TIMM_CASES, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_equals_timm_mixup_on_the_same_draws(data, case, monkeypatch):
    plain, _ = batches(data, BASE)
    text_case = {k: (f"({v[0]}, {v[1]})" if isinstance(v, tuple) else v) for k, v in case.items()}
    mixed, plans = batches(data, stage(**text_case))
    kw = {k: v for k, v in case.items() if k != "correct_lam"}
    if "correct_lam" in case:
        kw["correct_lam"] = False
    if "cutmix_minmax" in kw:
        kw["cutmix_minmax"] = list(kw["cutmix_minmax"])
    kinds = set()
    for (x, y), (xm, ym), plan in zip(plain, mixed, plans):
        ref = InjectedMixup(plan, **kw)
        monkeypatch.setattr(np.random, "randint", fake_randint(box_draws(plan, "cutmix_minmax" in kw)))
        xr, yr = ref(x.clone(), y.clone())
        monkeypatch.undo()
        assert torch.equal(bits(xm), bits(xr))
        assert ym.dtype == torch.float32 and ym.shape == (len(y), NUM_CLASSES)
        assert torch.equal(bits(ym), bits(yr))
        kinds |= {(d["applied"], d["cutmix"]) for d in plan["draws"]}
    assert any(applied for applied, _ in kinds)  # something was mixed


@pytest.mark.parametrize("case", [dict(mixup_alpha=1.0), dict(mixup_alpha=0.0, cutmix_alpha=1.0),
                                  dict(mixup_alpha=0.5, cutmix_alpha=1.0, switch_prob=0.5, prob=0.7)],
                         ids=["mixup", "cutmix", "choice"])
def test_equals_torchvision_v2_on_the_same_draws(data, case, monkeypatch):
    plain, _ = batches(data, BASE)
    mixed, plans = batches(data, stage(convention="torchvision", **case))
    seen = set()
    for (x, y), (xm, ym), plan in zip(plain, mixed, plans):
        d = plan["draws"][0]
        assert plan["partners"] == [(i - 1) % len(y) for i in range(len(y))]
        if not d["applied"]:
            xr, yr = x, torch.nn.functional.one_hot(y, NUM_CLASSES).float()
        else:
            ref = (v2.CutMix(alpha=case.get("cutmix_alpha", 1.0), num_classes=NUM_CLASSES) if d["cutmix"] else
                   v2.MixUp(alpha=case["mixup_alpha"], num_classes=NUM_CLASSES))
            monkeypatch.setattr(ref._dist, "sample", lambda shape=(): torch.tensor([d["lam_draw"]]))
            rx = [d["center"][1], d["center"][0]] if d["cutmix"] else []
            monkeypatch.setattr(torch, "randint", lambda n, size: torch.tensor([rx.pop(0)]))
            xr, yr = ref(x.clone(), y.clone())
            monkeypatch.undo()
        seen.add((d["applied"], d["cutmix"]))
        assert torch.equal(bits(xm), bits(xr))
        assert torch.equal(bits(ym), bits(yr))
    assert any(a for a, _ in seen)


def many_plans(data, count, **case):
    with fusionflow.Loader(data, stage(**case), batch_size=2, seed=3, num_threads=1, device="cpu") as loader:
        n = len(loader)
        return [loader.mix_plan(b % n, b // n) for b in range(count)]


def ks_statistic(a, b):
    a, b = np.sort(a), np.sort(b)
    grid = np.concatenate([a, b])
    return np.max(np.abs(np.searchsorted(a, grid, side="right") / len(a) - np.searchsorted(b, grid, side="right") / len(b)))


def ks_bound(n, m):
    return 1.95 * math.sqrt((n + m) / (n * m))  # p = 0.001


@pytest.mark.parametrize("alpha", [0.2, 0.8, 1.0, 2.5])
def test_lambda_is_beta_as_numpy_draws_it(data, alpha):
    plans = many_plans(data, 3000, mixup_alpha=alpha, mode="batch")
    ours = np.array([p["draws"][0]["lam_draw"] for p in plans])
    theirs = np.random.default_rng(1).beta(alpha, alpha, size=3000)
    assert ks_statistic(ours, theirs) < ks_bound(3000, 3000)


def test_mode_switch_and_prob_frequencies_as_timm_draws_them(data):
    plans = many_plans(data, 1500, mixup_alpha=0.8, cutmix_alpha=1.0, switch_prob=0.3, prob=0.6, mode="elem")
    draws = [d for p in plans for d in p["draws"]]
    n = len(draws)
    ref = timm_mixup.Mixup(mixup_alpha=0.8, cutmix_alpha=1.0, switch_prob=0.3, prob=0.6, mode="elem",
                           num_classes=NUM_CLASSES)
    np.random.seed(5)
    lam, cut = ref._params_per_elem(n)
    for ours, theirs in ((np.array([d["cutmix"] for d in draws]).mean(), cut.mean()),
                         (np.array([d["applied"] for d in draws]).mean(), (lam != 1).mean())):
        sd = math.sqrt(2 * theirs * (1 - theirs) / n)
        assert abs(ours - theirs) < 3.3 * sd  # two proportions, p ~ 0.001
    applied = np.array([d["lam_draw"] for d in draws if d["applied"]])
    assert ks_statistic(applied, lam[lam != 1]) < ks_bound(len(applied), int((lam != 1).sum()))


def test_box_centres_are_uniform_and_boxes_as_timm_draws_them(data):
    plans = many_plans(data, 2000, mixup_alpha=0.0, cutmix_alpha=1.0, mode="batch")
    h, w = 24, 32
    centres = np.array([p["draws"][0]["center"] for p in plans if "box" in p["draws"][0]])
    for axis, side in ((0, h), (1, w)):
        counts = np.bincount(centres[:, axis], minlength=side)
        expected = len(centres) / side
        chi2 = ((counts - expected) ** 2 / expected).sum()
        df = side - 1
        assert chi2 < df + 3.1 * math.sqrt(2 * df)  # Wilson-Hilferty-free normal bound, p ~ 0.001
    areas = np.array([(b[1] - b[0]) * (b[3] - b[2]) for b in (p["draws"][0]["box"] for p in plans)]) / (h * w)
    np.random.seed(2)
    ref = []
    for _ in range(len(plans)):
        lam = np.random.beta(1.0, 1.0)
        (yl, yh, xl, xh), _ = timm_mixup.cutmix_bbox_and_lam((1, 3, h, w), lam)
        ref.append((yh - yl) * (xh - xl) / (h * w))
    assert ks_statistic(areas, np.array(ref)) < ks_bound(len(areas), len(ref))


def test_draws_do_not_depend_on_threads_and_change_with_the_batch(data):
    pipe = stage(mixup_alpha=0.8, cutmix_alpha=1.0, mode="elem")
    one, _ = batches(data, pipe, num_threads=1)
    other, _ = batches(data, pipe, num_threads=2)
    for (a, ya), (b, yb) in zip(one, other):
        assert torch.equal(bits(a), bits(b)) and torch.equal(bits(ya), bits(yb))
    with fusionflow.Loader(data, pipe, batch_size=8, seed=7, device="cpu") as loader:
        assert loader.mix_plan(0, 0) != loader.mix_plan(1, 0) != loader.mix_plan(0, 1)


def test_odd_batch_size_is_refused_as_timm_asserts(data):
    with pytest.raises(fusionflow.PipelineError, match="even batch size"):
        fusionflow.Loader(data, stage(mixup_alpha=0.8), batch_size=7, device="cpu")
    # 24 samples on 5 ranks: 5 each, in batches of 4 and a last batch of 1
    with pytest.raises(fusionflow.PipelineError, match="last batch of 1"):
        fusionflow.Loader(data, stage(mixup_alpha=0.8), batch_size=4, rank=0, world_size=5, device="cpu")
    fusionflow.Loader(data, stage(mixup_alpha=0.8), batch_size=4, rank=0, world_size=5, drop_last=True,
                      device="cpu").close()
    fusionflow.Loader(data, stage(mixup_alpha=0.8), batch_size=10, device="cpu").close()  # a last batch of 4
    # torchvision's MixUp takes any batch
    fusionflow.Loader(data, stage(mixup_alpha=0.8, convention="torchvision"), batch_size=7, device="cpu").close()


@pytest.mark.parametrize("text, message", [
    ("mixup_cutmix(mixup_alpha=0.0)", "one of mixup_alpha"),
    ("mixup_cutmix(mode=elem, convention=torchvision)", "mode=batch"),
    ("mixup_cutmix(label_smoothing=0.1, convention=torchvision)", "label smoothing to the loss"),
    ("mixup_cutmix(cutmix_minmax=(0.5, 0.51))", "no box size"),
    ("mixup_cutmix(mode=rows)", "batch, pair or elem"),
])
def test_bad_stage_arguments_are_named(data, text, message):
    with pytest.raises(fusionflow.PipelineError, match=message):
        fusionflow.Loader(data, f"{BASE} | {text}", batch_size=8, device="cpu")


def test_stage_must_follow_normalize(data):
    with pytest.raises(fusionflow.PipelineError, match="after normalize"):
        fusionflow.Loader(data, "decode | center_crop(size=16) | mixup_cutmix()", batch_size=8, device="cpu")
    with pytest.raises(fusionflow.PipelineError, match="last op"):
        fusionflow.Loader(data, "decode | mixup_cutmix() | center_crop(size=16) | normalize(mean=0, std=1)",
                          batch_size=8, device="cpu")


def test_label_past_num_classes_is_refused_naming_the_file(data):
    # a folder's labels are known at open: refused there
    with pytest.raises(fusionflow.PipelineError, match="num_classes=2, but .*class02.* has label 2"):
        fusionflow.Loader(data, f"{BASE} | mixup_cutmix(num_classes=2)", batch_size=8, device="cpu")
    # labels that come with the samples (a Python dataset) fail the batch that holds one
    items = [(open(p, "rb").read(), i % 3) for i, p in
             enumerate(sorted(glob.glob(os.path.join(data, "*", "*"))))]
    with fusionflow.Loader(items, f"{BASE} | mixup_cutmix(num_classes=2)", batch_size=8, shuffle=False,
                           device="cpu") as loader:
        with pytest.raises(fusionflow.DecodeError, match="label 2 is not below mixup_cutmix's num_classes=2"):
            for _ in loader:
                pass


def test_mix_plan_json_is_valid(data):
    with fusionflow.Loader(data, stage(mixup_alpha=0.8, cutmix_alpha=1.0, mode="pair"), batch_size=8,
                           device="cpu") as loader:
        plan = loader.mix_plan(0)
        assert plan["mode"] == "pair" and plan["convention"] == "timm" and len(plan["draws"]) == 4
        assert plan["partners"] == list(range(7, -1, -1))
        assert abs(plan["off_value"] - 0.1 / NUM_CLASSES) < 1e-7
        json.dumps(plan)


def test_a_device_batch_is_mixed_as_the_host_batch(data, monkeypatch):
    """With output_device the stage mixes the device batch (the emulated device here, its samples written in
    place at share 1): images and soft labels bit-identical to the CPU's; a reduced output dtype is refused as
    on the host, naming the stage."""
    pipe = stage(mixup_alpha=0.8, cutmix_alpha=1.0, mode="elem")
    ref, _ = batches(data, pipe)
    got = []
    monkeypatch.setenv("FF_FORCE_DEVICE_SHARE", "1")
    with fusionflow.Loader(data, pipe, batch_size=8, seed=7, num_threads=2, device="emu:0", output_device="emu:0",
                           output="torch") as loader:
        for x, y in loader:
            got.append((x.clone(), y.clone()))
        s = loader.stats()
        assert s["device_samples"] > 0 and s["device_download_bytes"] == 0
    monkeypatch.delenv("FF_FORCE_DEVICE_SHARE")
    assert len(got) == len(ref)
    for (x, y), (rx, ry) in zip(got, ref):
        assert torch.equal(bits(x), bits(rx)) and torch.equal(bits(y), bits(ry))
    with pytest.raises(fusionflow.InvalidArgumentError, match=r"mixup_cutmix \(pipeline column \d+\).*output_dtype"):
        batches(data, pipe, output_device="emu:0", dtype="bfloat16")
