"""`fusionflow plan` checked from the outside: the printed plan, replayed
through torchvision's own ops, gives the pixels the loader gives, and the
TrivialAugmentWide draws it prints follow torchvision's distribution."""
import collections
import json
import math
import os
import subprocess

import numpy as np
import pytest
import torch
import torchvision.transforms as T
import torchvision.transforms.autoaugment as A
import torchvision.transforms.functional as TF
from PIL import Image
from torchvision.transforms import InterpolationMode

CLI = os.environ.get("FF_CLI")
if not CLI:
    pytest.skip("FF_CLI (path of the fusionflow executable) is not set", allow_module_level=True)

TV_NAMES = {"shear_x": "ShearX", "shear_y": "ShearY", "translate_x": "TranslateX", "translate_y": "TranslateY",
            "rotate": "Rotate", "brightness": "Brightness", "color": "Color", "contrast": "Contrast",
            "sharpness": "Sharpness", "posterize": "Posterize", "solarize": "Solarize",
            "autocontrast": "AutoContrast", "equalize": "Equalize", "invert": "Invert"}
FACTOR_OPS = {"brightness", "color", "contrast", "sharpness"}


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("plan")
    (root / "a").mkdir()
    rng = np.random.default_rng(7)
    y, x = np.mgrid[0:90, 0:120]
    for i in range(6):
        base = np.stack([(x * (2 + i) + y * 3) % 256, (y * (3 + i)) % 256, (x + y * i) % 256], -1)
        img = (base + rng.integers(0, 40, base.shape)) % 256
        Image.fromarray(img.astype(np.uint8)).save(root / "a" / f"{i}.png")
    return root


def plans(folder, pipeline, index, count, epoch=0):
    out = subprocess.run([CLI, "plan", "--source", f"imagefolder:{folder}", "--pipeline", pipeline,
                          "--index", str(index), "--count", str(count), "--epoch", str(epoch), "--json"],
                         check=True, capture_output=True, text=True, timeout=120).stdout
    return [json.loads(line) for line in out.splitlines()]


def replay(plan):
    """The plan through torchvision: Pillow decode, crop of the decoded region,
    then each step with torchvision's functional ops / _apply_op."""
    with Image.open(plan["path"]) as im:
        t = torch.from_numpy(np.array(im.convert("RGB"))).permute(2, 0, 1)
    x, y, w, h = plan["decode"]["region"]
    assert plan["decode"]["dct_scale"] == 1
    t = t[:, y:y + h, x:x + w]
    for s in plan["steps"]:
        op = s["op"]
        if not s.get("applied", True):  # a flip whose draw said no
            continue
        if op == "horizontal_flip":
            t = TF.hflip(t)
        elif op == "vertical_flip":
            t = TF.vflip(t)
        elif op in TV_NAMES:
            m = s.get("arg", 0.0)
            if op in FACTOR_OPS:
                m = s["sign"] * s["magnitude"]  # _apply_op adds the 1
            interp = InterpolationMode.BILINEAR if s.get("interpolation") == "bilinear" else InterpolationMode.NEAREST
            fill = s.get("fill")
            t = A._apply_op(t, TV_NAMES[op], m, interpolation=interp, fill=fill if fill and any(fill) else None)
        else:
            raise AssertionError(f"unexpected step {s}")
    return t.permute(1, 2, 0).numpy()


def augment(path, pipeline, index, out):
    subprocess.run([CLI, "augment", path, str(out), "--pipeline", pipeline, "--index", str(index)],
                   check=True, capture_output=True, timeout=60)
    with Image.open(out) as im:
        return np.asarray(im.convert("RGB"))


@pytest.mark.parametrize("policy", ["trivial_augment_wide", "rand_augment(num_ops=2, magnitude=9)",
                                    "auto_augment(policy=imagenet)"])
def test_printed_plan_replayed_through_torchvision_gives_our_pixels(folder, tmp_path, policy):
    pipeline = f"decode | center_crop(size=(64, 80)) | random_horizontal_flip | {policy}"
    for plan in plans(folder, pipeline, 0, 6):
        assert plan["label"] == 0 and plan["image"] == {"format": "png", "width": 120, "height": 90}
        ours = augment(plan["path"], pipeline, plan["index"], tmp_path / "o.png")
        np.testing.assert_array_equal(ours, replay(plan), err_msg=json.dumps(plan))


def test_plans_differ_by_epoch_and_index(folder):
    pipeline = "decode | random_resized_crop(size=32) | trivial_augment_wide"
    a, b = plans(folder, pipeline, 0, 6, epoch=0), plans(folder, pipeline, 0, 6, epoch=1)
    assert [p["index"] for p in a] == list(range(6)) and all(p["epoch"] == 1 for p in b)
    assert len({json.dumps(p["decode"]) for p in a + b}) > 6
    assert a == plans(folder, pipeline, 0, 6, epoch=0)  # the same draws every time


def test_plan_shows_a_flip_not_drawn_as_not_applied(folder):
    """A flip whose draw said no is in the steps, in its place, as not applied (it used to be left out)."""
    plan = plans(folder, "decode | center_crop(size=8) | random_horizontal_flip(p=0) | random_vertical_flip(p=1)"
                 " | resize(size=(4, 4))", 0, 1)[0]
    assert plan["steps"] == [{"op": "horizontal_flip", "applied": False}, {"op": "vertical_flip"},
                             {"op": "resize", "size": [4, 4], "antialias": True, "interpolation": "bilinear"}]
    drawn = [s.get("applied", True) for p in plans(folder, "decode | center_crop(size=8) | random_horizontal_flip",
                                                    0, 6) for s in p["steps"]]
    assert len(drawn) == 6 and True in drawn and False in drawn


def test_plan_shows_the_dct_scale_and_the_exact_box(tmp_path):
    (tmp_path / "a").mkdir()
    Image.fromarray(np.full((600, 800, 3), 120, np.uint8)).save(tmp_path / "a" / "big.jpg", quality=90)
    pipeline = "decode(dct_scale=true) | crop(top=37, left=51, height=501, width=603) | resize(size=(224, 224))"
    plan = plans(tmp_path, pipeline, 0, 1)[0]
    d = plan["decode"]
    assert d["region"] == [51, 37, 603, 501]
    assert d["dct_scale"] == 0.25 or d["dct_scale"] == 0.5
    f = d["dct_scale"]
    # the decoded image is the region snapped outward to the reduced grid; the box is exact
    assert d["decoded_size"] == [math.ceil((51 + 603) * f) - math.floor(51 * f),
                                 math.ceil((37 + 501) * f) - math.floor(37 * f)]
    assert d["box"] == [51 * f - math.floor(51 * f), 37 * f - math.floor(37 * f), 603 * f, 501 * f]
    assert plan["steps"] == [{"op": "resize", "size": [224, 224], "antialias": True, "interpolation": "bilinear"}]


def test_trivial_augment_wide_draws_follow_torchvision(folder, tmp_path, monkeypatch):
    """Ops and bins of 2,800 printed plans against 2,800 of torchvision's own
    draws (recorded by replacing _apply_op): two-sample chi-square on the op
    frequencies, and every (op, argument) we print is in torchvision's table
    (its _augmentation_space, with torch 2.x's linspace)."""
    n = 2800
    ours = collections.Counter()
    our_args = set()
    (tmp_path / "list.txt").write_text("".join(f"{folder}/a/0.png\t0\n" for _ in range(n)))
    out = subprocess.run([CLI, "plan", "--source", f"list:{tmp_path}/list.txt", "--pipeline",
                          "decode | center_crop(size=32) | trivial_augment_wide", "--index", "0", "--count", str(n),
                          "--json"], check=True, capture_output=True, text=True, timeout=300).stdout
    for line in out.splitlines():
        ops = [s for s in json.loads(line)["steps"] if s["op"] in TV_NAMES]
        name = ops[0]["op"] if ops else "identity"
        ours[name] += 1
        if ops and "arg" in ops[0]:
            our_args.add((name, ops[0]["arg"]))
    assert sum(ours.values()) == n
    theirs = collections.Counter()

    def record(img, op_name, magnitude, interpolation, fill):
        theirs[{v: k for k, v in TV_NAMES.items()}.get(op_name, "identity")] += 1
        return img

    monkeypatch.setattr(A, "_apply_op", record)
    torch.manual_seed(0)
    ta = T.TrivialAugmentWide()
    img = torch.zeros(3, 32, 32, dtype=torch.uint8)
    for _ in range(sum(ours.values())):
        ta(img)
    names = sorted(set(ours) | set(theirs))
    a = np.array([ours[k] for k in names], float)
    b = np.array([theirs[k] for k in names], float)
    chi2 = (((a - b) ** 2) / (a + b)).sum()
    assert chi2 < 34.5, f"chi-square {chi2:.1f} (13 dof, p = 0.001): ours {dict(ours)}, torchvision {dict(theirs)}"
    their_args = set()  # every (op, argument) of torchvision's table, each sign
    for op_name, (mags, signed) in T.TrivialAugmentWide()._augmentation_space(31).items():
        name = {v: k for k, v in TV_NAMES.items()}.get(op_name)
        if name is None or mags.ndim == 0:
            continue
        for m in mags.tolist():
            for sm in ((m, -m) if signed else (m,)):
                arg = 1.0 + sm if name in FACTOR_OPS else float(int(sm)) if name in (
                    "translate_x", "translate_y", "posterize") else float(sm)
                their_args.add((name, arg))
    extra = {x for x in our_args if x not in their_args}
    assert not extra, f"printed arguments torchvision never draws: {sorted(extra)[:10]}"


def test_augment_refuses_a_png_under_a_jpeg_name(folder, tmp_path):
    for name in ("out.jpg", "out.JPEG", "sheet.webp"):
        r = subprocess.run([CLI, "augment", f"{folder}/a/0.png", str(tmp_path / name), "--pipeline", "decode"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and "PNG" in r.stderr and name in r.stderr, r.stderr
        assert not (tmp_path / name).exists()
    for name in ("out.png", "out.PNG", "out"):
        subprocess.run([CLI, "augment", f"{folder}/a/0.png", str(tmp_path / name), "--pipeline", "decode"],
                       check=True, capture_output=True, timeout=60)
        with Image.open(tmp_path / name) as im:
            assert im.format == "PNG"


def test_augment_grid_labels_tiles_and_prints_their_plans(folder, tmp_path):
    """--plan prints one plan per tile, each the plan `fusionflow plan` gives
    for that index; every tile's band carries a label, and the tiles are the
    single draws' pixels."""
    pipeline = "decode | center_crop(size=40) | random_horizontal_flip | trivial_augment_wide"
    path = f"{folder}/a/3.png"
    r = subprocess.run([CLI, "augment", path, str(tmp_path / "sheet.png"), "--pipeline", pipeline, "--grid", "4",
                        "--index", "10", "--plan"], check=True, capture_output=True, text=True, timeout=60)
    printed = [json.loads(line) for line in r.stdout.splitlines()]
    assert [p["index"] for p in printed] == [10, 11, 12, 13]
    (tmp_path / "list.txt").write_text("".join(f"{path}\t0\n" for _ in range(14)))
    out = subprocess.run([CLI, "plan", "--source", f"list:{tmp_path}/list.txt", "--pipeline", pipeline, "--index",
                          "10", "--count", "4", "--json"], check=True, capture_output=True, text=True).stdout
    want = [json.loads(line) for line in out.splitlines()]
    for p, q in zip(printed, want):
        assert p["decode"] == q["decode"] and p["steps"] == q["steps"]
    with Image.open(tmp_path / "sheet.png") as im:
        sheet = np.asarray(im.convert("RGB"))
    gap, band = 6, 14  # the sheet's layout: a labelled band above each row of tiles
    for k in range(4):
        x0, y0 = gap + (k % 2) * (40 + gap), gap + (k // 2) * (40 + band + gap) + band
        tile = sheet[y0:y0 + 40, x0:x0 + 40]
        np.testing.assert_array_equal(tile, augment(path, pipeline, 10 + k, tmp_path / "one.png"))
        label = sheet[y0 - band:y0, x0:x0 + 40]
        assert (label == 220).all(axis=2).sum() > 20, f"tile {k}: no label drawn"


def test_semantics_v2_through_the_cli(folder, tmp_path):
    """plan --semantics v2 says so; augment --semantics v2 gives
    transforms.v2's pixels (and v1's differ); a bad value is a usage error."""
    F2 = pytest.importorskip("torchvision.transforms.v2.functional")
    pipeline = "decode | center_crop(size=(64, 80)) | sharpness(factor=1.3) | autocontrast"
    for sem in ("v1", "v2"):
        out = subprocess.run([CLI, "plan", "--source", f"imagefolder:{folder}", "--pipeline", pipeline,
                              "--index", "0", "--json", "--semantics", sem],
                             check=True, capture_output=True, text=True, timeout=120).stdout
        assert json.loads(out)["semantics"] == sem
    path = str(folder / "a" / "0.png")
    with Image.open(path) as im:
        t = torch.from_numpy(np.array(im.convert("RGB"))).permute(2, 0, 1)
    want = F2.autocontrast(F2.adjust_sharpness(F2.center_crop(t, [64, 80]), 1.3)).permute(1, 2, 0).numpy()
    got = {}
    for sem in ("v1", "v2"):
        subprocess.run([CLI, "augment", path, str(tmp_path / f"{sem}.png"), "--pipeline", pipeline,
                        "--semantics", sem], check=True, capture_output=True, timeout=60)
        with Image.open(tmp_path / f"{sem}.png") as im:
            got[sem] = np.asarray(im.convert("RGB"))
    np.testing.assert_array_equal(got["v2"], want)
    assert not np.array_equal(got["v1"], want)
    bad = subprocess.run([CLI, "plan", "--source", f"imagefolder:{folder}", "--pipeline", pipeline, "--index", "0",
                          "--semantics", "v3"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--semantics expects v1 or v2, got 'v3'" in bad.stderr
