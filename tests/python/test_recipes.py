"""Recipe presets: the table, Loader(recipe=...), and `fusionflow recipe`.
Every recipe runs in this build and yields the batch it documents (one
tensor per view for the multi-crop recipes, soft labels with mixup_cutmix)."""
import io
import json
import os
import subprocess
import tarfile

import numpy
import pytest

from conftest import cli, make_folder

import fusionflow  # noqa: E402

NAMES = ["deit", "torchvision-v2", "dino", "simclr", "resnet-strikes-back-a1"]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_folder(str(tmp_path_factory.mktemp("recipes")), classes=2, per_class=4, min_size=40, max_size=64)[0]


def test_the_table_lists_the_recipes():
    table = fusionflow.recipes()
    assert list(table) == NAMES
    for name, r in table.items():
        assert r["source"] and r["pipeline"].startswith("decode")
        assert r["pipeline"].startswith("decode(dct_scale=false) |") or "||" in r["pipeline"]  # exact decodes
    assert table["deit"]["repeated_augmentations"] == 3 and "mixup_cutmix(mixup_alpha=0.8" in table["deit"]["pipeline"]
    assert table["dino"]["pipeline"].count("||") == 3 and "|| 8 x random_resized_crop(size=96" in table["dino"]["pipeline"]
    assert table["simclr"]["pipeline"].count("|| 2 x") == 1
    # DINO transforms PIL images: Pillow's blur (a radius, no kernel size), jitter, grayscale and
    # solarize; SimCLR's blur is a tensor blur with a kernel of a tenth of the side
    dino = table["dino"]["pipeline"]
    assert dino.count("gaussian_blur(sigma=(0.1, 2.0), semantics=pil)") == 3 and "kernel_size" not in dino
    assert dino.count("semantics=pil") == 10
    assert "gaussian_blur(kernel_size=23, sigma=(0.1, 2.0))" in table["simclr"]["pipeline"]


# The batch each recipe documents: per view (size, count); soft labels with mixup_cutmix.
SHAPES = {"deit": [(224, 1)], "torchvision-v2": [(176, 1)], "dino": [(224, 1), (224, 1), (96, 8)],
          "simclr": [(224, 2)], "resnet-strikes-back-a1": [(224, 1)]}


def _shape(t):
    return tuple(numpy.asarray(t).shape)


@pytest.mark.parametrize("name", NAMES)
def test_every_recipe_runs_with_its_documented_batch(data, name):
    r = fusionflow.recipes()[name]
    assert r["available"], r
    mixes = "mixup_cutmix" in r["pipeline"]
    with fusionflow.Loader(data, recipe=name, num_classes=2 if mixes else None, batch_size=2,
                           device="cpu") as loader:
        images, labels = next(iter(loader))
    views = [size for size, count in SHAPES[name] for _ in range(count)]
    if len(views) == 1:
        assert _shape(images) == (2, 3, views[0], views[0])
    else:
        assert isinstance(images, (list, tuple)) and len(images) == len(views)
        assert [_shape(v) for v in images] == [(2, 3, s, s) for s in views]
    if mixes:
        soft = numpy.asarray(labels)
        assert soft.shape == (2, 2) and soft.dtype == numpy.float32
        assert numpy.allclose(soft.sum(1), 1)
    else:
        assert _shape(labels) == (2,)


def test_recipe_arguments_are_checked(data):
    with pytest.raises(ValueError, match="unknown recipe 'nope'"):
        fusionflow.Loader(data, recipe="nope", batch_size=2)
    with pytest.raises(TypeError, match="not both"):
        fusionflow.Loader(data, "decode | center_crop(size=8)", recipe="deit", batch_size=2)
    with pytest.raises(TypeError, match="goes with recipe"):
        fusionflow.Loader(data, "decode | center_crop(size=8)", num_classes=3, batch_size=2)


def test_a_recipes_repeats_can_be_turned_off(data):
    """deit repeats each sample 3 times unless repeated_augmentations is given; 0 turns it off."""
    def first_batch(**kw):
        with fusionflow.Loader(data, recipe="deit", num_classes=2, batch_size=6, shuffle=False, device="cpu",
                               **kw) as loader:
            next(iter(loader))
            return list(loader.last_batch.sample_indices)
    repeated, plain = first_batch(), first_batch(repeated_augmentations=0)
    assert repeated[0] == repeated[1] == repeated[2] and repeated[3] == repeated[4] == repeated[5]
    assert len(set(plain)) == 6

def test_cli_lists_and_prints_recipes():
    if not os.path.exists(cli()):
        pytest.skip("the fusionflow executable is not next to the package")
    res = subprocess.run([cli(), "recipe", "--list"], capture_output=True, text=True, timeout=30)
    assert res.returncode == 0, res.stderr
    assert [line.split()[0] for line in res.stdout.splitlines()] == NAMES
    res = subprocess.run([cli(), "recipe", "dino"], capture_output=True, text=True, timeout=30)
    assert res.returncode == 0 and "|| 8 x random_resized_crop(size=96" in res.stdout and "status:" in res.stdout
    res = subprocess.run([cli(), "recipe", "nope"], capture_output=True, text=True, timeout=30)
    assert res.returncode == 2 and "unknown recipe 'nope'" in res.stderr and "deit" in res.stderr
    res = subprocess.run([cli(), "recipe", "--help"], capture_output=True, text=True, timeout=30)
    assert res.returncode == 0 and "--num-classes N" in res.stdout and "bench --recipe NAME --num-classes N" in res.stdout


def test_cli_plans_a_sample_of_a_mixing_recipe(data):
    """`fusionflow plan` takes the run's batch size, which mixup_cutmix checks (timm's needs an even one)."""
    if not os.path.exists(cli()):
        pytest.skip("the fusionflow executable is not next to the package")
    pipeline = fusionflow.recipes()["deit"]["pipeline"].replace("num_classes=1000", "num_classes=2")
    base = [cli(), "plan", "--source", f"imagefolder:{data}", "--pipeline", pipeline, "--index", "0"]
    res = subprocess.run(base, capture_output=True, text=True, timeout=30)
    assert res.returncode == 2 and "even batch size" in res.stderr and "batch_size 1" in res.stderr
    res = subprocess.run(base + ["--batch-size", "4"], capture_output=True, text=True, timeout=30)
    assert res.returncode == 0, res.stderr
    assert "\"steps\"" in res.stdout and "\"resize\"" in res.stdout


def test_cli_bench_runs_a_recipe(data, tmp_path):
    """`fusionflow bench --recipe`: the preset's pipeline and repeats; bad combinations refused."""
    if not os.path.exists(cli()):
        pytest.skip("the fusionflow executable is not next to the package")
    root = make_folder(str(tmp_path), classes=2, per_class=130, min_size=16, max_size=24)[0]
    base = [cli(), "bench", "--source", f"imagefolder:{root}", "--batch-size", "32", "--batches", "1"]
    res = subprocess.run(base + ["--recipe", "deit", "--num-classes", "2"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert "256 of 260 samples" in res.stderr  # timm's RepeatAugSampler rounds to 256 per rank
    res = subprocess.run(base + ["--recipe", "deit", "--num-classes", "2", "--repeated-augmentations", "0"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and "260 of 260 samples" in res.stderr, res.stderr
    res = subprocess.run(base + ["--recipe", "deit", "--num-classes", "2", "--json"], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0 and "num_classes=2)" in json.loads(res.stdout)["pipeline"], res.stderr
    base = [cli(), "bench", "--source", f"imagefolder:{data}", "--batch-size", "2", "--batches", "1"]
    for bad, why in ((["--recipe", "nope"], "unknown recipe 'nope'"),
                     (["--recipe", "deit", "--pipeline", "decode"], "not both"),
                     (["--num-classes", "3"], "goes with --recipe"),
                     (["--recipe", "dino", "--num-classes", "3"], "no batch stage")):
        res = subprocess.run(base + bad, capture_output=True, text=True, timeout=60)
        assert res.returncode == 2 and why in res.stderr, (bad, res.stderr)


def test_cli_recipe_on_a_streamed_source_says_how_to_turn_its_repeats_off(tmp_path):
    """DeiT repeats each sample 3 times, which a streamed (compressed) shard cannot: the CLI's refusal
    names --repeated-augmentations 0, and with it the recipe runs."""
    if not os.path.exists(cli()):
        pytest.skip("the fusionflow executable is not next to the package")
    _, paths, labels = make_folder(str(tmp_path / "images"), classes=2, per_class=3, min_size=40, max_size=64)
    shard = tmp_path / "shard.tar.gz"
    with tarfile.open(shard, "w:gz") as tar:
        for k, (path, label) in enumerate(zip(paths, labels)):
            tar.add(path, arcname=f"s{k:03d}{os.path.splitext(path)[1]}")
            info = tarfile.TarInfo(f"s{k:03d}.cls")
            info.size = len(str(label))
            tar.addfile(info, io.BytesIO(str(label).encode()))
    base = [cli(), "bench", "--source", f"tar:{shard}", "--recipe", "deit", "--num-classes", "2", "--batch-size", "2",
            "--batches", "1"]
    res = subprocess.run(base, capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "repeated_augmentations needs random access" in res.stderr, res.stderr
    assert "(--repeated-augmentations 0 turns the recipe's repeats off)" in res.stderr, res.stderr
    res = subprocess.run(base + ["--repeated-augmentations", "0"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr


@pytest.mark.parametrize("name", NAMES)
def test_the_package_and_the_cli_set_num_classes_alike(data, name):
    """recipe_pipeline (Loader(recipe=, num_classes=)) and `bench --recipe --num-classes` call one
    library function: the table's text with ImageNet's num_classes=1000 made 7 (here by hand), the
    text as published without num_classes, and the same refusals: num_classes for a recipe without
    mixup_cutmix, a num_classes that is not a positive int."""
    r = fusionflow.recipes()[name]
    published = r["pipeline"]
    mixes = "mixup_cutmix(" in published
    want = published.replace("num_classes=1000", "num_classes=7") if mixes else None
    assert fusionflow.recipe_pipeline(name) == (published, r["repeated_augmentations"])
    if mixes:
        assert want != published and fusionflow.recipe_pipeline(name, 7) == (want, r["repeated_augmentations"])
    else:
        with pytest.raises(ValueError, match=f"recipe '{name}' has no batch stage: num_classes does not apply"):
            fusionflow.recipe_pipeline(name, 7)
        with pytest.raises(ValueError, match="no batch stage"):
            fusionflow.Loader(data, recipe=name, num_classes=7, batch_size=2)
    for bad in (0, -1, True, "7", 7.0, 2**24 + 1, 2**31, 2**64):
        with pytest.raises(ValueError,
                           match=r"num_classes must be an int in \[1, 16777216\] \(mixup_cutmix's bound; got "):
            fusionflow.recipe_pipeline(name, bad)
    if mixes:  # numpy's integers stand for ints (__index__), up to the bound
        assert fusionflow.recipe_pipeline(name, numpy.int64(7)) == (want, r["repeated_augmentations"])
        biggest = published.replace("num_classes=1000", "num_classes=16777216")
        assert fusionflow.recipe_pipeline(name, numpy.uint32(2**24))[0] == biggest
    if not os.path.exists(cli()):
        pytest.skip("the fusionflow executable is not next to the package")
    base = [cli(), "bench", "--source", f"imagefolder:{data}", "--batch-size", "2", "--batches", "1", "--recipe", name,
            "--repeated-augmentations", "0", "--json"]
    res = subprocess.run(base + ["--num-classes", "7"], capture_output=True, text=True, timeout=120)
    if mixes:
        assert res.returncode == 0 and json.loads(res.stdout)["pipeline"] == want, res.stderr
    else:
        assert res.returncode == 2, res.stderr
        assert f"recipe '{name}' has no batch stage: --num-classes does not apply" in res.stderr
        res = subprocess.run(base, capture_output=True, text=True, timeout=120)
        assert res.returncode == 0 and json.loads(res.stdout)["pipeline"] == published, res.stderr
    for bad in ("0", "-1", "seven", "16777217", "1000000000", "2147483648"):
        res = subprocess.run(base + ["--num-classes", bad], capture_output=True, text=True, timeout=60)
        assert res.returncode == 2, (bad, res.stderr)
        assert f"--num-classes expects an integer in [1, 16777216], got '{bad}'" in res.stderr, res.stderr
    # `fusionflow recipe NAME --num-classes N` prints the pipeline bench runs, and refuses alike
    recipe = [cli(), "recipe", name]
    for args, text in (([], published), (["--num-classes", "7"], want)):
        res = subprocess.run(recipe + args, capture_output=True, text=True, timeout=30)
        if text is None:
            assert res.returncode == 2, res.stdout
            assert f"fusionflow recipe: recipe '{name}' has no batch stage: --num-classes does not apply" in res.stderr
            continue
        assert res.returncode == 0, res.stderr
        lines = res.stdout.split("pipeline:\n")[1].split("repeated_augmentations:")[0].splitlines()
        assert " ".join(line.strip() for line in lines) == text
    for bad in ("0", "-1", "seven", "16777217", "2147483648"):
        res = subprocess.run(recipe + ["--num-classes", bad], capture_output=True, text=True, timeout=30)
        assert res.returncode == 2, (bad, res.stderr)
        assert f"fusionflow recipe: --num-classes expects an integer in [1, 16777216], got '{bad}'" in res.stderr
