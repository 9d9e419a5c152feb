"""Sources that fight back, through the fusionflow CLI and fusionflow.Loader:
a run whose every sample fails, an HTTP server on 127.0.0.1 that redirects
for ever, sends without end, drips, announces a member of gigabytes, cuts
its body short, sends a header line of megabytes or resets the connection
inside a member, and pipe: commands that outlive their output. Each must
end promptly with one clear message naming the limit it met; every limit's
window is shrunk here to 2 s or less through its environment variable
(docs/limits.md), and every child runs under a timeout that fails the test
instead of hanging the suite.

Nothing here depends on torch: the run without torch (FF_TEST_NO_TORCH)
skips the module instead of repeating it."""
import os
import subprocess

import pytest

from conftest import cli

if os.environ.get("FF_TEST_NO_TORCH"):
    pytest.skip("torch-independent: run once, in the run with torch", allow_module_level=True)

# A watchdog on every child: a hang fails the test. Sanitizers slow children down.
SANITIZED = bool(os.environ.get("FF_TEST_SANITIZER"))
WATCHDOG_S = 120 if SANITIZED else 60


def need_cli():
    if not os.path.exists(cli()):
        pytest.skip("the fusionflow executable is not next to the package")


def run_cli(args, env=None, timeout=WATCHDOG_S):
    try:
        return subprocess.run([cli()] + args, capture_output=True, text=True, timeout=timeout,
                              env=dict(os.environ, **(env or {})))
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"fusionflow {' '.join(args[:1])} still ran after {timeout} s: {(e.stderr or b'')[-2000:]!r}")


@pytest.mark.parametrize("length", [["--batches", "4"], ["--epochs", "3"]], ids=["batches", "epochs"])
def test_bench_where_every_sample_fails_ends_saying_so(tmp_path, length):
    """A list whose files are all missing, under --on-error skip: every epoch hands out nothing.
    bench --batches once spun over empty epochs for ever; now the first empty epoch ends the run,
    which says that no sample could be read and exits 1."""
    need_cli()
    listing = tmp_path / "all-missing.tsv"
    listing.write_text("".join(f"gone/{i}.jpg\t0\n" for i in range(3)))
    res = run_cli(["bench", "--source", f"list:{listing}", "--pipeline", "decode | resize(size=(16, 16))",
                   "--batch-size", "2", "--threads", "2", "--on-error", "skip"] + length)
    assert res.returncode == 1, res.stderr
    assert "no sample could be read: all 3 tried failed; the first: " in res.stderr, res.stderr
    assert "No such file or directory" in res.stderr


def test_augment_on_a_jpeg_with_corrupt_entropy_data_warns(tmp_path):
    """libjpeg repairs bad Huffman codes and the image decodes, as Pillow decodes it: bench lists
    such a sample as a warning, and fusionflow augment, which used to exit 0 in silence, says it."""
    need_cli()
    from conftest import make_image
    import random

    path = str(tmp_path / "damaged.jpg")
    make_image(path, 64, 64, random.Random(3))
    data = bytearray(open(path, "rb").read())
    for i in range(len(data) // 2, len(data) // 2 + 64, 2):
        data[i:i + 2] = b"\xff\x00"
    open(path, "wb").write(data)
    res = run_cli(["augment", path, str(tmp_path / "out.png"), "--pipeline", "decode | resize(size=(16, 16))"])
    assert res.returncode == 0, res.stderr
    assert "fusionflow augment: warning: " in res.stderr and "damaged.jpg" in res.stderr, res.stderr
    assert "Corrupt JPEG data" in res.stderr
