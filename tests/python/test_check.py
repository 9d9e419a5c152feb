"""fusionflow.check, the module behind `fusionflow check`, in process on small
folders: an exact pipeline reports 0 after every op and for every image; a
difference put into one op of the reference shows from that op's row on and
not before, and names the op per image; the views, mixup and source cases;
a missing reference is one line naming the pip command (also where torch
is not installed)."""
import json
import os
import sys

import pytest

from conftest import have_torch, make_image

import fusionflow.check as check

needs_torch = pytest.mark.skipif(not have_torch(), reason="the reference (torch, torchvision) is not installed")


def test_missing_reference_is_one_line_naming_pip(folder, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "torchvision", None)  # importing it fails, as when not installed
    status = check.main(["--source", folder[0], "--pipeline", "decode | center_crop(size=8)"])
    err = capsys.readouterr().err
    assert status == check.EXIT_CANNOT and len(err.splitlines()) == 1, err
    assert err.startswith("fusionflow check: --against torchvision needs torch") and sys.executable in err
    assert "pip install torch torchvision" in err


def test_usage_mistakes_are_one_line_with_exit_2(capsys):
    assert check.main(["--source", "x"]) == check.EXIT_USAGE
    assert check.main(["--source", "x", "--pipeline", "decode", "--samples", "0"]) == check.EXIT_USAGE
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2 and all(line.endswith("see 'fusionflow check --help'") for line in lines), lines


@needs_torch
def test_exact_pipeline_reports_zero_after_every_op(folder, capsys):
    """JPEGs and PNGs, some grayscale; crops, a flip, a policy, normalize and erasing."""
    root, paths, _ = folder
    pipeline = ("decode(dct_scale=false) | random_resized_crop(size=20) | random_horizontal_flip | "
                "trivial_augment_wide | normalize(mean=imagenet, std=imagenet) | random_erasing(p=0.5)")
    assert check.main(["--source", root, "--pipeline", pipeline, "--samples", "12", "--seed", "4", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["identical"] and r["samples"] == 12 and r["dataset_size"] == len(paths)
    assert [row["op"] for row in r["ops"]] == [
        "decode(dct_scale=false)", "random_resized_crop(size=20)", "random_horizontal_flip", "trivial_augment_wide",
        "loader output (normalize(mean=imagenet, std=imagenet), random_erasing(p=0.5))"]
    assert all(row["max_diff"] == 0 and row["images_differing"] == 0 for row in r["ops"])
    assert len({im["index"] for im in r["images"]}) == 12 and all(im["path"] in paths for im in r["images"])
    assert r["verdict"].startswith("IDENTICAL: all 12 images equal torchvision's output")


@needs_torch
def test_a_difference_in_one_op_shows_from_that_op_on(folder, monkeypatch):
    """The reference's rotate turned by one more degree: rows before it stay 0."""
    from fusionflow import _replay
    step = _replay.Replay._step

    def off_by_a_degree(self, img, s):
        return step(self, img, dict(s, arg=s["arg"] + 1.0) if s["op"] == "rotate" else s)

    monkeypatch.setattr(_replay.Replay, "_step", off_by_a_degree)
    r = check.run(folder[0], "decode(dct_scale=false) | center_crop(size=20) | rotate(angle=30) | invert",
                  samples=5)
    d = {row["op"]: row["max_diff"] for row in r["ops"]}
    assert d["decode(dct_scale=false)"] == 0 and d["center_crop(size=20)"] == 0
    assert d["rotate(angle=30)"] > 0 and d["invert"] > 0 and d["loader output"] > 0
    assert all(im["first_op"] == "rotate(angle=30)" for im in r["images"])
    assert not r["identical"] and "first at rotate(angle=30)" in r["verdict"]


@needs_torch
def test_mixup_is_left_out_and_views_are_refused(folder, capsys):
    r = check.run(folder[0], "decode(dct_scale=false) | center_crop(size=16) | normalize(mean=0.5, std=0.25) | "
                             "mixup_cutmix(num_classes=3)", samples=3)
    assert r["identical"] and r["left_out"][0].startswith("mixup_cutmix")
    status = check.main(["--source", folder[0], "--pipeline", "decode || 2 x center_crop(size=8)"])
    err = capsys.readouterr().err
    assert status == check.EXIT_CANNOT and "views" in err and len(err.splitlines()) == 1


@needs_torch
def test_pipeline_and_source_errors(folder, tmp_path, capsys):
    assert check.main(["--source", folder[0], "--pipeline", "decode | normalise(mean=0, std=1)"]) == check.EXIT_USAGE
    assert check.main(["--source", str(tmp_path / "nowhere"), "--pipeline", "decode | center_crop(size=8)"]) == 3
    err = capsys.readouterr().err.splitlines()
    assert "did you mean 'normalize'?" in err[0] and "nowhere" in err[1] and len(err) == 2


@needs_torch
def test_local_shards_are_read_member_by_member(tmp_path):
    import random
    import tarfile
    rng = random.Random(2)
    with tarfile.open(tmp_path / "s-0.tar", "w") as tar:
        for k in range(4):
            image = tmp_path / f"{k:04d}.jpg"
            make_image(str(image), 40 + k, 30 + 2 * k, rng)
            tar.add(image, arcname=image.name)
            (tmp_path / f"{k:04d}.cls").write_text(str(k % 2))
            tar.add(tmp_path / f"{k:04d}.cls", arcname=f"{k:04d}.cls")
    r = check.run(f"tar:{tmp_path}/s-0.tar", "decode(dct_scale=false) | random_resized_crop(size=16)", samples=4)
    assert r["identical"] and r["samples"] == 4
    assert all(":" in im["path"] and im["path"].startswith(os.fspath(tmp_path)) for im in r["images"])
