"""policy_file: learned policies from a JSON file (docs/policy-file.md),
with small policies written by the tests. The draws against the policy's
own tables (chi-square of the sub-policy and layer choices and of each op's
probability), the magnitudes against torchvision's AutoAugment space, the
pixels of the drawn plans replayed through torchvision's own op function
(torchvision.transforms.autoaugment._apply_op), and the errors, which name
the pipeline column, the file and the place in it."""
import collections
import json

import numpy as np
import pytest
import torch
import torchvision.transforms.autoaugment as A
from torchvision.transforms import InterpolationMode

from conftest import FFError, make_image
from test_policy_golden import (Planner, STEP_AUG, check_chi2, chi2_one_sample, magnitude_of_arg)

torch.set_num_threads(1)
N = 3000
SUB_POLICIES = {
    "fusionflow_policy": 1,
    "sub_policies": [
        [{"op": "Posterize", "p": 1.0, "magnitude": 8}, {"op": "Rotate", "p": 0.4, "magnitude": 9}],
        [{"op": "Equalize", "p": 1.0}],
        [{"op": "Solarize", "p": 1.0, "magnitude": 5}, {"op": "Color", "p": 0.7, "magnitude": 3},
         {"op": "ShearX", "p": 0.5, "magnitude": 6}],
    ],
}
LAYERS = {
    "fusionflow_policy": 1,
    "num_magnitude_bins": 13,
    "layers": [
        [{"op": "Identity", "p": 0.5}, {"op": "Rotate", "p": 0.3, "magnitude": 12},
         {"op": "Contrast", "p": 0.2, "magnitude": 4}],
        [{"op": "TranslateX", "p": 0.1, "arg": 0.25, "of_size": True, "random_sign": True},
         {"op": "brightness", "p": 0.3, "arg": 1.5}],  # normalised: 1/4 and 3/4
    ],
}


@pytest.fixture(scope="module")
def planner(shim):
    if not hasattr(shim.lib, "ff_shim_plan_steps"):
        pytest.skip("libff_shim lacks ff_shim_plan_steps")
    return Planner(shim.lib)


def write(tmp_path, obj, name="policy.json"):
    path = tmp_path / name
    path.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return str(path)


def draws(planner, text, h=40, w=60, n=N):
    return [planner.draws(text, h, w, seed=2, index=i) for i in range(n)]


def test_sub_policy_choice_and_op_probabilities(tmp_path, planner):
    path = write(tmp_path, SUB_POLICIES)
    plans = draws(planner, f'decode | policy_file(path="{path}") | center_crop(size=32)')
    first = collections.Counter(p[0][0] for p in plans)
    stat, df = chi2_one_sample(first, {"Posterize": 1 / 3, "Equalize": 1 / 3, "Solarize": 1 / 3})
    check_chi2("policy_file: sub-policy chosen uniformly", stat, df)
    for lead, op, prob in (("Posterize", "Rotate", 0.4), ("Solarize", "Color", 0.7), ("Solarize", "ShearX", 0.5)):
        group = [p for p in plans if p[0][0] == lead]
        hits = collections.Counter(any(o == op for o, _ in p) for p in group)
        stat, df = chi2_one_sample(hits, {True: prob, False: 1 - prob})
        check_chi2(f"policy_file: {op} applied with p={prob}", stat, df)


def test_magnitudes_are_torchvisions_autoaugment_bins(tmp_path, planner):
    path = write(tmp_path, LAYERS | {"layers": [[{"op": name, "p": 1, "magnitude": m}]
                                                for name in ("ShearX", "TranslateY", "Rotate", "Brightness",
                                                             "Posterize", "Solarize") for m in (0, 5, 12)]})
    h, w = 40, 60
    tv = A.AutoAugment()._augmentation_space(13, (h, w))
    signs = collections.Counter()
    for i in range(50):
        got = planner.draws(f'decode | policy_file(path="{path}") | center_crop(size=32)', h, w, seed=2, index=i)
        want = [(name, m) for name in ("ShearX", "TranslateY", "Rotate", "Brightness", "Posterize", "Solarize")
                for m in (0, 5, 12)]
        assert [o for o, _ in got] == [n for n, _ in want]
        for (op, arg), (name, m) in zip(got, want):
            mags, signed = tv[name]
            mag = magnitude_of_arg(op, arg)
            expect = float(mags[m].item())
            if name in ("Posterize", "TranslateY"):
                expect = float(int(expect))  # _apply_op truncates these, as the planner does
            assert abs(mag) == expect or mag == expect, f"{name} bin {m}: {mag} vs torchvision {expect}"
            if signed and expect:
                signs[mag < 0] += 1
    stat, df = chi2_one_sample(signs, {True: 0.5, False: 0.5})
    check_chi2("policy_file: signed ops' signs", stat, df)


def test_layers_draw_by_their_tables(tmp_path, planner):
    path = write(tmp_path, LAYERS)
    plans = draws(planner, f'decode | policy_file(path="{path}") | center_crop(size=32)', h=40, w=60)
    first = collections.Counter(p[0][0] if p and p[0][0] in ("Rotate", "Contrast") else "Identity" for p in plans)
    stat, df = chi2_one_sample(first, {"Identity": 0.5, "Rotate": 0.3, "Contrast": 0.2})
    check_chi2("policy_file layer 0: identity / rotate / contrast", stat, df)
    second = collections.Counter()
    for p in plans:
        op, arg = p[-1]
        if op == "TranslateX":
            assert abs(arg) == 15.0  # 0.25 of the width, 60
            second["translate+" if arg > 0 else "translate-"] += 1
        else:
            assert (op, arg) == ("Brightness", 1.5)
            second["brightness"] += 1
    stat, df = chi2_one_sample(second, {"translate+": 0.125, "translate-": 0.125, "brightness": 0.75})
    check_chi2("policy_file layer 1 (weights 1:3, random sign)", stat, df)


@pytest.mark.parametrize("policy", [SUB_POLICIES, LAYERS])
def test_drawn_plans_replayed_through_torchvision_apply_op(tmp_path, shim, planner, policy):
    path = write(tmp_path, policy)
    rng = np.random.default_rng(3)
    for i in range(40):
        img = make_image(rng, 37, 45, ("noise", "gradient", "narrow")[i % 3])
        text = f'decode | policy_file(path="{path}", interpolation=bilinear, fill=(10, 20, 30)) | center_crop(size=(37, 45))'
        got = shim.run(text, img, seed=4, index=i)
        t = torch.from_numpy(img).permute(2, 0, 1).contiguous()
        for op, arg in planner.draws(text, 37, 45, seed=4, index=i):
            t = A._apply_op(t, op, magnitude_of_arg(op, arg), interpolation=InterpolationMode.BILINEAR,
                            fill=[10.0, 20.0, 30.0])
        d = np.abs(got.astype(int) - t.permute(1, 2, 0).numpy())
        assert d.max() <= 1, f"sample {i}: off by {d.max()}"


ERRORS = [
    ("{not json", "line 1 column 4"),
    ({"sub_policies": []}, "\"fusionflow_policy\": 1"),
    ({"fusionflow_policy": 1}, "one of \"sub_policies\" and \"layers\""),
    ({"fusionflow_policy": 1, "sub_policies": [[{"op": "Warp", "p": 1}]]}, "sub-policy 0, entry 0: unknown op 'Warp'"),
    ({"fusionflow_policy": 1, "sub_policies": [[{"op": "Rotate", "p": 1.5}]]}, "p must be a number in [0, 1]"),
    ({"fusionflow_policy": 1, "sub_policies": [[{"op": "Rotate", "p": 1, "magnitude": 10}]]}, "bin in [0, 9]"),
    ({"fusionflow_policy": 1, "layers": [[{"op": "Rotate", "p": 1, "mag": 1}]]}, "layer 0, entry 0: unknown key 'mag'"),
    ({"fusionflow_policy": 1, "layers": [[{"op": "Rotate", "p": 0}]]}, "layer 0: the probabilities are all 0"),
    ({"fusionflow_policy": 1, "layers": [[{"op": "Rotate", "p": 1, "arg": 3, "magnitude": 2}]]}, "not both"),
]


@pytest.mark.parametrize("content,what", ERRORS)
def test_errors_name_the_column_the_file_and_the_place(tmp_path, shim, content, what):
    path = write(tmp_path, content)
    with pytest.raises(FFError) as e:
        shim.run(f'decode | policy_file(path="{path}") | center_crop(size=8)', np.zeros((8, 8, 3), np.uint8))
    msg = e.value.message
    assert "column 10:" in msg and path in msg and what in msg, msg


def test_missing_file_and_unquoted_path(shim, tmp_path):
    with pytest.raises(FFError) as e:
        shim.run(f'decode | policy_file(path="{tmp_path}/none.json") | center_crop(size=8)', np.zeros((8, 8, 3), np.uint8))
    assert "none.json: cannot open" in e.value.message
    with pytest.raises(FFError) as e:  # not a regular file: refused before reading
        shim.run('decode | policy_file(path="/dev/zero") | center_crop(size=8)', np.zeros((8, 8, 3), np.uint8))
    assert "/dev/zero: not a regular file" in e.value.message
    with pytest.raises(FFError) as e:
        shim.run("decode | policy_file(path=policy) | center_crop(size=8)", np.zeros((8, 8, 3), np.uint8))
    assert "column 27:" in e.value.message and "quoted path" in e.value.message
