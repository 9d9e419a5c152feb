"""`fusionflow bench` end to end on small generated ImageFolder trees: the
JSON summary, --help, and clear messages (naming the file or the cause) with
the documented exit status for bad inputs."""
import json
import os
import shutil
import struct
import subprocess

import numpy as np
import pytest
from PIL import Image

# the CLI runs the loader on its threads (FF_GOLDEN_SUBSET=threads keeps these under ThreadSanitizer)
pytestmark = pytest.mark.threads
CLI = os.environ.get("FF_CLI")
if not CLI:
    pytest.skip("FF_CLI (path of the fusionflow executable) is not set", allow_module_level=True)

BENCH_OPTIONS = ["--source", "--pipeline", "--batch-size", "--batches", "--epochs", "--warmup",
                 "--threads", "--prefetch", "--seed", "--no-shuffle", "--drop-last", "--rank",
                 "--world-size", "--sampler-drop-last", "--permutation", "--step-ms", "--on-error", "--max-image-pixels", "--json",
                 "--help"]
JSON_FIELDS = ["images_per_s", "batches", "samples", "decode_s", "wait_s", "skipped",
               "skipped_samples"]


def bench(*args, timeout=60):
    return subprocess.run([CLI, "bench", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


def bench_json(*args):
    res = bench(*args, "--json")
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """40 images in 3 classes: JPEGs of assorted sizes and a few PNGs."""
    root = tmp_path_factory.mktemp("cli") / "ds"
    rng = np.random.default_rng(0)
    for k in range(40):
        cls = root / ("apple", "Banana", "cherry")[k % 3]
        cls.mkdir(parents=True, exist_ok=True)
        h, w = int(rng.integers(8, 90)), int(rng.integers(8, 90))
        y, x = np.mgrid[0:h, 0:w]
        px = np.stack([x * 5 % 256, y * 3 % 256, (x + y) % 256], -1) + rng.integers(0, 30, (h, w, 3))
        im = Image.fromarray(px.clip(0, 255).astype(np.uint8))
        if k % 7 == 0:
            im.save(cls / f"img{k:02d}.png")
        else:
            im.save(cls / f"img{k:02d}.jpg", quality=90)
    return root


@pytest.fixture
def copy_of(dataset, tmp_path):
    def make():
        dst = tmp_path / "copy"
        shutil.copytree(dataset, dst)
        return dst
    return make


def test_bench_json_reports_a_full_epoch(dataset):
    out = bench_json("--source", f"imagefolder:{dataset}", "--batch-size", 8, "--threads", 2)
    for field in JSON_FIELDS:
        assert field in out, field
    assert out["samples"] == 40 and out["batches"] == 5
    assert out["images_per_s"] > 0 and out["decode_s"] >= 0 and out["wait_s"] >= 0
    assert out["skipped"] == 0 and out["skipped_samples"] == []


def test_bench_reports_files_left_out_for_their_extension(copy_of):
    root = copy_of()
    for name in ("apple/notes.txt", "Banana/anim.gif", "cherry/scan.jp2"):
        (root / name).write_bytes(b"not an image")
    out = bench_json("--source", f"imagefolder:{root}", "--batch-size", 8, "--threads", 2)
    assert out["ignored_files"] == 3 and out["samples"] == 40
    res = bench("--source", f"imagefolder:{root}", "--batch-size", 8, "--threads", 2)
    assert res.returncode == 0 and "ignored 3 files in the class folders" in res.stderr, res.stderr


def test_bench_with_uint8_pipeline_and_drop_last(dataset):
    out = bench_json("--source", f"imagefolder:{dataset}", "--batch-size", 6, "--threads", 2,
                     "--drop-last", "--pipeline",
                     "decode | resize(size=32) | center_crop(size=24) | random_vertical_flip")
    assert out["batches"] == 6 and out["samples"] == 36


def test_bench_sharded_rank_sees_its_share(dataset):
    out = bench_json("--source", f"imagefolder:{dataset}", "--batch-size", 4, "--threads", 1,
                     "--world-size", 3, "--rank", 2)
    assert out["samples"] == 14  # ceil(40 / 3), padded as DistributedSampler


def test_bench_list_source(dataset, tmp_path):
    lst = tmp_path / "list.txt"
    paths = sorted(p for p in dataset.rglob("*") if p.is_file())
    lst.write_text("".join(f"{p}\t{i % 3}\n" for i, p in enumerate(paths)))
    out = bench_json("--source", f"list:{lst}", "--batch-size", 8, "--threads", 2)
    assert out["samples"] == len(paths)


def test_bare_folder_and_list_file_take_their_kind(dataset, tmp_path):
    lst = tmp_path / "train.tsv"
    paths = sorted(p for p in dataset.rglob("*") if p.is_file())
    lst.write_text("".join(f"{p}\t{i % 3}\n" for i, p in enumerate(paths)))
    folder = bench_json("--source", dataset, "--batch-size", 8, "--threads", 2)
    prefixed = bench_json("--source", f"imagefolder:{dataset}", "--batch-size", 8, "--threads", 2)
    assert folder["samples"] == prefixed["samples"] == 40
    assert bench_json("--source", lst, "--batch-size", 8)["samples"] == len(paths)
    other = tmp_path / "train.csv"
    other.write_text(lst.read_text())
    res = bench("--source", other)
    assert res.returncode == 2 and "train.csv" in res.stderr and ".tsv/.txt" in res.stderr


@pytest.mark.parametrize("command, args, typo, hint", [
    ("bench", [], "--batchsize", "--batch-size"),
    ("bench", [], "--seeds=2", "--seed"),
    ("augment", ["in.png", "out.png"], "--gird", "--grid"),
    ("sim", [], "--no-snyc", "--no-sync"),
    ("plan", [], "--indx", "--index"),
])
def test_unknown_option_is_one_line_with_a_suggestion(command, args, typo, hint):
    res = subprocess.run([CLI, command, typo, "4", *args], capture_output=True, text=True, timeout=30)
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert typo.split("=")[0] in lines[0] and f"did you mean '{hint}'" in lines[0]
    assert f"see 'fusionflow {command} --help'" in lines[0]


def test_option_without_its_value_and_ambiguous_prefix_say_so():
    res = bench("--source")
    assert res.returncode == 2 and res.stderr.strip() == (
        "fusionflow bench: --source expects a value; see 'fusionflow bench --help'")
    res = bench("--b", 3)
    assert res.returncode == 2 and "ambiguous option '--b' (--batch-size, --batches)" in res.stderr


def test_help_exits_0_and_mentions_every_option():
    res = bench("--help")
    assert res.returncode == 0
    for opt in BENCH_OPTIONS:
        assert opt in res.stdout, opt
    top = subprocess.run([CLI, "--help"], capture_output=True, text=True, timeout=30)
    assert top.returncode == 0 and "bench" in top.stdout


def test_usage_errors_exit_2(dataset):
    src = f"imagefolder:{dataset}"
    res = bench("--source", src, "--batch-size", 0)
    assert res.returncode == 2 and "batch-size" in res.stderr
    res = bench("--source", src, "--no-such-option")
    assert res.returncode == 2 and "no-such-option" in res.stderr
    res = bench("--batch-size", 4)
    assert res.returncode == 2 and "--source" in res.stderr
    res = bench("--source", src, "--on-error", "ignore")
    assert res.returncode == 2 and "on-error" in res.stderr


@pytest.mark.parametrize("value", ["-1", "inf", "-inf", "nan", "1e300", "5ms"])
def test_step_ms_must_be_finite_milliseconds(dataset, value):
    """A --step-ms that would never sleep (inf, nan) or whose --json would not be JSON is refused."""
    res = bench("--source", f"imagefolder:{dataset}", "--step-ms", value, "--json")
    assert res.returncode == 2 and res.stdout == "", res.stdout
    assert f"--step-ms expects a number in [0, 1e+09], got '{value}'" in res.stderr, res.stderr


def test_bad_pipeline_names_the_column(dataset):
    res = bench("--source", f"imagefolder:{dataset}", "--pipeline", "decode | resize(size=(4, x))")
    assert res.returncode != 0 and "column" in res.stderr


def test_missing_dir(tmp_path):
    res = bench("--source", f"imagefolder:{tmp_path}/nowhere")
    assert res.returncode == 1 and "nowhere" in res.stderr


def test_empty_dir_has_no_class_folders(tmp_path):
    (tmp_path / "empty").mkdir()
    res = bench("--source", f"imagefolder:{tmp_path}/empty")
    assert res.returncode == 1 and "class folders" in res.stderr and "empty" in res.stderr


def test_class_folder_without_images(tmp_path):
    (tmp_path / "ds" / "only").mkdir(parents=True)
    (tmp_path / "ds" / "only" / "notes.txt").write_text("no images here")
    res = bench("--source", f"imagefolder:{tmp_path}/ds")
    assert res.returncode == 1 and ".jpg" in res.stderr and str(tmp_path / "ds") in res.stderr


def pick(root, suffix, k=0):
    return sorted(root.rglob(f"*{suffix}"))[k]


def truncate_jpeg(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])


def corrupt_png_idat(path):
    data = bytearray(path.read_bytes())
    at = data.find(b"IDAT") + 4 + 6  # a byte of the compressed data: the chunk's CRC fails
    data[at] ^= 0x5A
    path.write_bytes(bytes(data))


def huge_jpeg(path, height=50000, width=50000):
    data = bytearray(path.read_bytes())
    sof = data.find(b"\xff\xc0")
    assert sof > 0
    data[sof + 5: sof + 9] = struct.pack(">HH", height, width)
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage,suffix,needles", [
    (truncate_jpeg, ".jpg", ["JPEG"]),
    (lambda p: p.write_bytes(b""), ".jpg", ["empty"]),
    (corrupt_png_idat, ".png", ["PNG"]),
    (huge_jpeg, ".jpg", ["50000x50000", "limit"]),
], ids=["truncated_jpeg", "zero_byte_file", "png_bad_idat_crc", "huge_jpeg_header"])
def test_bad_file_fails_naming_the_file(copy_of, damage, suffix, needles):
    root = copy_of()
    bad = pick(root, suffix)
    damage(bad)
    res = bench("--source", f"imagefolder:{root}", "--batch-size", 8, "--threads", 2)
    assert res.returncode == 1, res.stderr
    assert str(bad) in res.stderr, res.stderr
    for needle in needles:
        assert needle in res.stderr, res.stderr


def test_max_image_pixels_option_applies(dataset):
    res = bench("--source", f"imagefolder:{dataset}", "--pipeline", "decode | center_crop(size=4)",
                "--max-image-pixels", 50)
    assert res.returncode == 1 and "limit" in res.stderr


def test_pipeline_output_over_max_image_pixels_is_refused_naming_the_column(dataset):
    res = bench("--source", f"imagefolder:{dataset}", "--pipeline", "decode | resize(size=(20000, 20000))")
    assert res.returncode == 2
    assert "pipeline column 10:" in res.stderr and "max_image_pixels" in res.stderr


def test_on_error_skip_counts_and_lists_bad_files(copy_of):
    root = copy_of()
    bad1, bad2 = pick(root, ".jpg", 3), pick(root, ".png", 1)
    truncate_jpeg(bad1)
    bad2.write_bytes(b"")
    out = bench_json("--source", f"imagefolder:{root}", "--batch-size", 8, "--threads", 2,
                     "--on-error", "skip")
    assert out["skipped"] == 2
    listed = " ".join(out["skipped_samples"])
    assert str(bad1) in listed and str(bad2) in listed
    assert out["samples"] == 38


def test_on_error_skip_over_epochs_lists_each_file_once_with_per_epoch_counts(copy_of):
    """3 bad files over 2 epochs: 6 samples skipped, 3 distinct failures listed
    once each, and the count of every epoch."""
    root = copy_of()
    bad = [pick(root, ".jpg", 1), pick(root, ".jpg", 2), pick(root, ".png", 1)]
    for p in bad:
        p.write_bytes(b"")
    args = ["--source", f"imagefolder:{root}", "--batch-size", 4, "--threads", 2, "--on-error", "skip",
            "--epochs", 2]
    out = bench_json(*args)
    assert out["skipped"] == 6 and out["bad_per_epoch"] == [3, 3]
    assert sorted(out["skipped_samples"]) == sorted(set(out["skipped_samples"]))
    assert len(out["skipped_samples"]) == 3
    res = bench(*args)
    assert res.returncode == 0, res.stderr
    assert "skipped 6 bad samples, 3 distinct failures (per epoch: epoch 0: 3, epoch 1: 3):" in res.stderr
    listed = [line for line in res.stderr.splitlines() if line.startswith("  ")]
    for p in bad:
        assert sum(str(p) in line for line in listed) == 1, res.stderr


def test_bad_per_epoch_has_an_entry_for_every_epoch(dataset):
    """Clean epochs count too, the last one included (the run ends inside it)."""
    out = bench_json("--source", f"imagefolder:{dataset}", "--batch-size", 8, "--epochs", 3)
    assert out["bad_per_epoch"] == [0, 0, 0]

def test_drop_last_with_fewer_samples_than_ranks_is_refused_clearly(tmp_path, dataset):
    """DistributedSampler gives such a rank no samples: expect a message
    about the rank's samples, not a crash or an out-of-memory."""
    (tmp_path / "ds" / "a").mkdir(parents=True)
    for p in sorted(dataset.rglob("*.jpg"))[:2]:
        shutil.copy(p, tmp_path / "ds" / "a")
    res = bench("--source", f"imagefolder:{tmp_path}/ds", "--batch-size", 1, "--world-size", 3,
                "--rank", 0, "--drop-last", "--sampler-drop-last", timeout=30)
    assert res.returncode in (1, 2), res.stderr
    assert "memory" not in res.stderr and "rank" in res.stderr, res.stderr


def test_epochs_with_skipped_batches_stop_at_the_end_of_the_last_epoch(copy_of):
    """A batch whose samples are all skipped is not handed out: the run must
    still end with its epoch (it used to run into the next one to make up
    the missing batches)."""
    root = copy_of()
    bad = [pick(root, ".jpg", 1), pick(root, ".jpg", 2)]
    for p in bad:
        p.write_bytes(b"")
    for epochs in (1, 2):
        out = bench_json("--source", f"imagefolder:{root}", "--batch-size", 1, "--threads", 2,
                         "--on-error", "skip", "--epochs", epochs)
        assert out["samples"] == 38 * epochs and out["batches"] == 38 * epochs
        assert out["skipped"] == 2 * epochs


def test_on_error_replace_keeps_batches_full(copy_of):
    root = copy_of()
    bad = pick(root, ".png", 1)
    bad.write_bytes(b"")
    out = bench_json("--source", f"imagefolder:{root}", "--batch-size", 8, "--threads", 2,
                     "--on-error", "replace")
    assert out["samples"] == 40 and out["batches"] == 5
    assert out["skipped"] == 0 and str(bad) in " ".join(out["skipped_samples"])
