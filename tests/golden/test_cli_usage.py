"""The fusionflow executable as a user meets it: a usage mistake is one line
on stderr with the nearest command, option or op name and the help command
that explains it (and that command works); `fusionflow ops` lists the
parser's ops; a run on the CPU says nothing of CUDA unless asked; `fusionflow
check` end to end against torchvision (exit 0 when exact, 1 when not, 3
without torchvision)."""
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from conftest import FFError

CLI = os.environ.get("FF_CLI")
if not CLI:
    pytest.skip("FF_CLI (path of the fusionflow executable) is not set", allow_module_level=True)


def cli(*args, timeout=60, env=None):
    return subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          env=None if env is None else {**os.environ, **env})


@pytest.fixture(scope="module")
def jpegs(tmp_path_factory):
    """6 JPEGs of 120-200 px in 2 classes: big enough for a DCT-scaled decode before a resize to 24."""
    root = tmp_path_factory.mktemp("usage") / "ds"
    rng = np.random.default_rng(3)
    for k in range(6):
        d = root / f"c{k % 2}"
        d.mkdir(parents=True, exist_ok=True)
        h, w = int(rng.integers(120, 200)), int(rng.integers(120, 200))
        y, x = np.mgrid[0:h, 0:w]
        px = np.stack([x * 3 % 256, y * 5 % 256, (x * y) % 256], -1) + rng.integers(0, 60, (h, w, 3))
        Image.fromarray(px.clip(0, 255).astype(np.uint8)).save(d / f"{k}.jpg", quality=85)
    return root


USAGE_ERRORS = [
    ([], "fusionflow", "expects a COMMAND"),
    (["benchh"], "fusionflow", "unknown command 'benchh' (did you mean 'bench'?)"),
    (["bench"], "fusionflow bench", "--source is required"),
    (["bench", "--source", "x", "--batchsize", "4"], "fusionflow bench", "(did you mean '--batch-size'?)"),
    (["augment"], "fusionflow augment", "--pipeline is required"),
    (["augment", "--pipeline", "decode", "in.png"], "fusionflow augment", "expects IN and OUT"),
    (["plan"], "fusionflow plan", "--source is required"),
    (["plan", "--source", "x", "--pipeline", "decode", "--index", "0", "extra"], "fusionflow plan",
     "unexpected argument 'extra'"),
    (["sim"], "fusionflow sim", "--step-ms is required"),
    (["sim", "--ranks", "2", "--cors", "3"], "fusionflow sim --ranks N", "(did you mean '--cores'?)"),
    (["sim", "--ranks", "2"], "fusionflow sim --ranks N", "give exactly one of --cpu-ms-per-sample and --profile"),
    (["sim", "--step-ms", "80", "--cpu-ms-per-sample", "2", "--remote-latency-ms", "1"], "fusionflow sim",
     "the --remote-* options need --remote-cpus N (N >= 1) or --capacity"),
    (["sim", "--step-ms", "80", "--cpu-ms-per-sample", "2", "--capacity", "--plan"], "fusionflow sim",
     "--capacity searches the remote CPUs itself: leave out --plan"),
    (["node"], "fusionflow node", "expects a subcommand: status GROUP"),
    (["node", "stats"], "fusionflow node", "unknown subcommand 'stats'"),
    (["node", "status"], "fusionflow node status", "expects one GROUP"),
    (["shards"], "fusionflow shards", "expects a subcommand: make or check"),
    (["shards", "chek"], "fusionflow shards", "unknown subcommand 'chek' (did you mean 'check'?)"),
    (["shards", "make", "only-src"], "fusionflow shards make", "expects SRC and OUT"),
    (["recipe"], "fusionflow recipe", "give one recipe NAME or --list"),
    (["ops", "normalise"], "fusionflow ops", "unknown op 'normalise' (did you mean 'normalize'?)"),
    (["check"], "fusionflow check", "--source is required"),
    (["check", "--source", "x", "--pipeline", "decode", "--against", "pillow"], "fusionflow check",
     "--against expects torchvision or timm"),
    (["check", "--source", "x", "--pipline", "decode"], "fusionflow check", "(did you mean '--pipeline'?)"),
]


@pytest.mark.parametrize("args, help_cmd, says", USAGE_ERRORS, ids=[" ".join(a[0]) or "none" for a in USAGE_ERRORS])
def test_usage_error_is_one_line_naming_its_help_and_the_help_answers(args, help_cmd, says):
    res = cli(*args)
    assert res.returncode == 2 and res.stdout == ""
    lines = res.stderr.splitlines()
    assert len(lines) == 1, res.stderr
    assert says in lines[0] and lines[0].endswith(f"; see '{help_cmd} --help'"), lines[0]
    shown = re.search(r"see '(.*) --help'$", lines[0]).group(1).replace(" N", " 2").split()[1:]
    help_res = cli(*shown, "--help")
    assert help_res.returncode == 0 and help_res.stdout.startswith("usage: fusionflow"), help_res.stderr
    usage = help_res.stdout.splitlines()[0]
    assert usage.startswith("usage: " + help_cmd.split(" --")[0]), usage
    for option in re.findall(r"did you mean '(--[a-z-]+)'", lines[0]):  # the suggestion is in the help shown
        assert option in help_res.stdout, (option, shown)


def test_unknown_recipe_names_the_nearest_and_the_list():
    for args in (["recipe", "deit3"], ["bench", "--source", "x", "--recipe", "deit3"],
                 ["check", "--source", "x", "--recipe", "deit3"]):
        res = cli(*args)
        assert res.returncode == 2 and res.stderr.endswith(
            "unknown recipe 'deit3' (did you mean 'deit'?); see 'fusionflow recipe --list'\n"), res.stderr
        assert len(res.stderr.splitlines()) == 1


def test_sim_ranks_help_is_reachable_both_ways():
    for args in (["sim", "--ranks", "8", "--help"], ["sim", "--ranks", "--help"]):
        res = cli(*args)
        assert res.returncode == 0 and res.stdout.startswith("usage: fusionflow sim --ranks N"), res.stderr
    top = cli("sim", "--help")
    assert top.stdout.startswith("usage: fusionflow sim --step-ms") and "fusionflow sim --ranks 8 --help" in top.stdout


def test_every_command_in_the_top_help_has_its_own_help():
    top = cli("--help")
    assert top.returncode == 0
    commands = re.findall(r"^  ([a-z]+) ", top.stdout, re.M)
    assert {"bench", "augment", "plan", "check", "ops", "sim", "node", "recipe", "shards", "version"} <= set(commands)
    for c in commands:
        if c == "version":
            assert cli("version").stdout.startswith("fusionflow ")
            continue
        res = cli(c, "--help")
        assert res.returncode == 0 and res.stdout.startswith(f"usage: fusionflow {c}"), (c, res.stderr)


def test_pipeline_typo_is_one_line_with_the_nearest_op(jpegs):
    res = cli("bench", "--source", jpegs, "--pipeline", "decode | normalise(mean=imagenet, std=imagenet)")
    assert res.returncode == 2
    assert res.stderr == ("fusionflow bench: pipeline column 10: unknown op 'normalise' (did you mean 'normalize'?); "
                          "see 'fusionflow ops' for the list\n")
    res = cli("bench", "--source", jpegs, "--pipeline", "decode | resize(sise=8)")
    assert res.returncode == 2 and "did you mean 'size'?" in res.stderr and len(res.stderr.splitlines()) == 1


def test_ops_lists_every_op_the_parser_knows_and_no_other(shim):
    res = cli("ops")
    assert res.returncode == 0 and res.stderr == ""
    rows = [line.split(None, 1) for line in res.stdout.splitlines()]
    names = [r[0] for r in rows]
    assert len(names) == len(set(names)) > 40 and all(len(r) == 2 and r[1] for r in rows)
    for must in ("decode", "random_resized_crop", "normalize", "trivial_augment_wide", "timm_rand_augment"):
        assert must in names
    internal = [n for n, _ in rows if n.startswith("pil_")]
    assert len(internal) == 17 and names[-17:] == internal  # last, and each marked internal
    assert all(text.startswith("internal") for n, text in rows if n.startswith("pil_"))
    assert not any(text.startswith("internal") for n, text in rows if not n.startswith("pil_"))
    for name in names:  # each is a name the parser takes (it may then want arguments or a place)
        try:
            shim.run(f"decode | {name}", np.zeros((8, 8, 3), np.uint8))
        except FFError as e:
            assert "unknown op" not in e.message, (name, e.message)
    with pytest.raises(FFError, match="unknown op 'no_such_op'"):
        shim.run("decode | no_such_op", np.zeros((8, 8, 3), np.uint8))


def test_ops_name_gives_its_arguments():
    res = cli("ops", "resize")
    assert res.returncode == 0
    lines = res.stdout.splitlines()
    assert lines[0].startswith("resize: the shorter side to N") and lines[1] == "arguments:"
    args = {line.split()[0]: line.split()[1] for line in lines[2:]}
    assert args == {"size": "required", "antialias": "optional", "interpolation": "optional"}
    assert "bilinear, bicubic or random" in res.stdout
    assert cli("ops", "invert").stdout.splitlines()[1] == "arguments: none"


def test_cpu_bench_says_nothing_of_cuda_unless_asked(jpegs):
    base = ["bench", "--source", jpegs, "--batch-size", "2", "--threads", "1"]
    quiet = cli(*base)
    assert quiet.returncode == 0, quiet.stderr
    assert not re.search(r"cuda|CUDA|GPU|device", quiet.stderr), quiet.stderr
    verbose = cli(*base, "--verbose")
    said = [line for line in verbose.stderr.splitlines() if line.startswith("device")]
    assert len(said) == 1 and said[0].startswith("device: cpu; "), verbose.stderr
    asked = cli(*base, "--device", "auto", "--verbose")
    said = [line for line in asked.stderr.splitlines() if line.startswith("device")]
    assert asked.returncode == 0 and len(said) == 1, asked.stderr
    if said[0].startswith("device: none"):  # no GPU here: auto says so, with the CUDA executor's reason
        assert "auto found no usable GPU" in said[0] and ("CUDA" in said[0] or "nvcc" in said[0])


def check(*args, env=None, timeout=300):
    return cli("check", "--python", sys.executable, *args, env=env, timeout=timeout)


def test_check_exact_pipeline_reports_zero_and_exits_0(jpegs):
    res = check("--source", jpegs, "--samples", "4", "--pipeline",
                "decode(dct_scale=false) | random_resized_crop(size=24) | random_horizontal_flip | "
                "normalize(mean=imagenet, std=imagenet)")
    assert res.returncode == 0, res.stderr
    out = res.stdout.splitlines()
    assert out[0].startswith("fusionflow check: 4 of 6 images of ") and "against torchvision" in out[0]
    rows = [line for line in out if re.match(r"(decode|random_|loader output)", line)]
    assert len(rows) == 4 and all(re.search(r"\s0 (levels|float)\s+0 of 4$", r) for r in rows), out
    assert out[-1].startswith("verdict: IDENTICAL: all 4 images equal torchvision's output pixel for pixel")


def test_check_dct_scaled_decode_reports_the_difference_and_exits_1(jpegs):
    res = check("--source", jpegs, "--samples", "3", "--json", "--pipeline",
                "decode(dct_scale=true) | resize(size=24) | center_crop(size=24)")
    assert res.returncode == 1, res.stderr
    r = json.loads(res.stdout)
    ops = {row["op"]: row for row in r["ops"]}
    assert ops["decode(dct_scale=true)"]["max_diff"] == 0  # the full image, alone, decodes exactly
    assert ops["resize(size=24)"]["max_diff"] > 0 and ops["resize(size=24)"]["images_differing"] == 3
    assert ops["loader output"]["max_diff"] > 0
    assert all(im["first_op"] == "resize(size=24)" and im["dct_scale"] < 1 for im in r["images"])
    assert not r["identical"] and r["verdict"].startswith("DIFFERENT: 3 of 3 images differ from torchvision")
    assert "decode(dct_scale=false) gives torchvision's pixels" in r["verdict"]


def test_check_without_torchvision_is_one_line_naming_pip(jpegs, tmp_path):
    stub = tmp_path / "torchvision"
    stub.mkdir()
    (stub / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'torchvision'\", "
                                      "name='torchvision')\n")
    res = check("--source", jpegs, "--pipeline", "decode | center_crop(size=8)",
                env={"PYTHONPATH": f"{tmp_path}:{os.environ.get('PYTHONPATH', '')}"})
    assert res.returncode == 3 and res.stdout == ""
    assert len(res.stderr.splitlines()) == 1, res.stderr
    assert res.stderr.startswith("fusionflow check: --against torchvision needs torchvision in ")
    assert "pip install torch torchvision" in res.stderr


def test_check_in_a_python_without_fusionflow_says_how_to_install_it(jpegs, tmp_path):
    """A copy of the executable outside the build tree does not find the staged package."""
    copy = tmp_path / "fusionflow"
    copy.write_bytes(open(CLI, "rb").read())
    copy.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    res = subprocess.run([str(copy), "check", "--python", sys.executable, "--source", str(jpegs), "--pipeline",
                          "decode"], capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    if res.returncode != 3 or "cannot import fusionflow" not in res.stderr:
        pytest.skip(f"{sys.executable} has a fusionflow package installed")
    assert len(res.stderr.splitlines()) == 1 and "pip install ./python" in res.stderr
