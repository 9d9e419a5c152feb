"""Fixtures of the Python package tests: small image folders made with Pillow.

The package under test is the one Python imports: the build tree's copy when
run by ctest (PYTHONPATH=<build>/python), or an installed one
(pip install ./python). NumPy and Pillow are required; torch-specific tests
skip without torch, and FF_TEST_NO_TORCH=1 runs them all as if torch were not
installed.
"""
import os
import random
import sys

import pytest

if os.environ.get("FF_TEST_NO_TORCH"):
    sys.modules["torch"] = None  # as if torch were not installed: importing it fails

np = pytest.importorskip("numpy")
Image = pytest.importorskip("PIL.Image")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "examples")


def pytest_configure(config):
    # Deprecations in the tests or the package fail the run instead of scrolling by.
    if hasattr(pytest, "PytestRemovedIn10Warning"):  # pytest >= 9 (Debian's 7 has no such class)
        config.addinivalue_line("filterwarnings", "error::pytest.PytestRemovedIn10Warning")
    config.addinivalue_line("filterwarnings", "error::DeprecationWarning:fusionflow")


def have_torch():
    if os.environ.get("FF_TEST_NO_TORCH"):
        return False
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def import_ray(sanitizer_reason):
    """Ray for a test module, imported with fusionflow.ray: skips the module under a
    sanitizer build (``sanitizer_reason`` says why), without Ray, or when ``import ray``
    finds a folder named ray instead of the package. Returns the ray module."""
    if os.environ.get("FF_TEST_SANITIZER"):
        pytest.skip(sanitizer_reason, allow_module_level=True)
    ray = pytest.importorskip("ray")
    if not hasattr(ray, "remote"):
        pytest.skip(f"'import ray' found a folder, not Ray: {ray.__path__}", allow_module_level=True)
    import fusionflow.ray  # noqa: F401  (after the skips: needs Ray)
    return ray


def make_image(path, width, height, rng, mode="RGB"):
    """A noisy picture with structure (gradients and blocks), saved as JPEG or PNG by extension."""
    y, x = np.mgrid[0:height, 0:width]
    base = np.stack([(x * 255 // max(width - 1, 1)), (y * 255 // max(height - 1, 1)),
                     ((x // 7 + y // 5) % 2) * 200], axis=-1)
    noise = np.random.default_rng(rng.randrange(1 << 30)).integers(0, 40, size=(height, width, 3))
    pixels = np.clip(base + noise, 0, 255).astype(np.uint8)
    img = Image.fromarray(pixels)  # (H, W, 3) uint8: RGB
    if mode == "L":
        img = img.convert("L")
    if path.endswith(".png"):
        img.save(path)
    else:
        img.save(path, quality=90)


def make_folder(root, classes=3, per_class=7, min_size=24, max_size=64, seed=0):
    """An ImageFolder tree; returns (root, paths, labels) in torchvision ImageFolder order
    (classes sorted by name, files sorted), i.e. dataset index order."""
    rng = random.Random(seed)
    paths, labels = [], []
    for c in range(classes):
        d = os.path.join(root, f"class{c:02d}")
        os.makedirs(d, exist_ok=True)
        for i in range(per_class):
            ext = ".png" if i % 3 == 0 else ".jpg"
            p = os.path.join(d, f"img{i:03d}{ext}")
            make_image(p, rng.randint(min_size, max_size), rng.randint(min_size, max_size), rng,
                       mode="L" if i % 5 == 4 else "RGB")
            paths.append(p)
            labels.append(c)
    return str(root), paths, labels


@pytest.fixture(scope="session")
def folder(tmp_path_factory):
    """21 images in 3 classes, 24-64 px, JPEG and PNG, some grayscale."""
    return make_folder(str(tmp_path_factory.mktemp("folder")))


@pytest.fixture(scope="session")
def big_folder(tmp_path_factory):
    """8 large images (1200-1600 px) in 2 classes: slow to decode, for interruption tests."""
    return make_folder(str(tmp_path_factory.mktemp("big")), classes=2, per_class=4, min_size=1200, max_size=1600)


def demo_folder(out, count=12, classes=3):
    """`count` images of the demo data set (scripts/demo-data.py) in `out`, an ImageFolder of
    `classes` classes; skips the test on a machine without the demo's photographs."""
    import subprocess

    r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "demo-data.py"), out, "--count", str(count),
                        "--classes", str(classes), "--jobs", "2"], capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        pytest.skip(f"no demo data on this machine: {r.stderr.strip()[-200:]}")
    return out


def sigint_default():
    """preexec_fn for a child that a test sends SIGINT: its SIGINT as in a terminal. A shell
    starts background jobs with SIGINT ignored, and a Python started so never raises
    KeyboardInterrupt (ctest resets it; a script may not)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def child_env():
    """The environment of a child Python that imports the same fusionflow as this process."""
    env = dict(os.environ)
    import fusionflow

    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(fusionflow.__file__)))
    env["PYTHONPATH"] = pkg_parent + os.pathsep + env.get("PYTHONPATH", "")
    return env


def cli():
    """The fusionflow executable: FF_CLI (ctest sets it), else the one next to the build tree's package."""
    import fusionflow

    return os.environ.get("FF_CLI") or os.path.join(os.path.dirname(fusionflow.__file__), "..", "..", "fusionflow")
