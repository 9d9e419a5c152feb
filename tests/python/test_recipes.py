"""Recipe presets: the table, Loader(recipe=...), and `fusionflow recipe`.
A recipe whose ops this build lacks must say which (PipelineError naming
them); one that runs must open with its sampler setting."""
import os
import subprocess

import pytest

from conftest import make_folder

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
    assert table["deit"]["repeated_augmentations"] == 3 and "mixup_cutmix(mixup_alpha=0.8" in table["deit"]["pipeline"]
    assert table["dino"]["pipeline"].count("||") == 3 and "|| 8 x random_resized_crop(size=96" in table["dino"]["pipeline"]
    assert table["simclr"]["pipeline"].count("|| 2 x") == 1


@pytest.mark.parametrize("name", NAMES)
def test_loader_takes_a_recipe_or_names_the_missing_ops(data, name):
    r = fusionflow.recipes()[name]
    if not r["available"]:
        first_need = r["needs"].split(",")[0].strip()
        with pytest.raises(fusionflow.PipelineError, match=f"recipe {name} needs ops.*{first_need}"):
            fusionflow.Loader(data, recipe=name, batch_size=2, device="cpu")
        return
    with fusionflow.Loader(data, recipe=name, num_classes=2 if "mixup_cutmix" in r["pipeline"] else None,
                           batch_size=2, device="cpu") as loader:
        assert loader.num_samples >= 1
        images, labels = next(iter(loader))


def test_recipe_arguments_are_checked(data):
    with pytest.raises(ValueError, match="unknown recipe 'nope'"):
        fusionflow.Loader(data, recipe="nope", batch_size=2)
    with pytest.raises(TypeError, match="not both"):
        fusionflow.Loader(data, "decode | center_crop(size=8)", recipe="deit", batch_size=2)
    with pytest.raises(TypeError, match="goes with recipe"):
        fusionflow.Loader(data, "decode | center_crop(size=8)", num_classes=3, batch_size=2)


def cli():
    return os.environ.get("FF_CLI") or os.path.join(os.path.dirname(fusionflow.__file__), "..", "..", "fusionflow")


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
