"""The examples run a few steps on the CPU, and the package works without torch."""
import os
import socket
import subprocess
import sys
import textwrap

import pytest

from conftest import EXAMPLES, child_env, have_torch, make_folder


def have_torchvision():
    if not have_torch():
        return False
    try:
        import torchvision  # noqa: F401
    except ImportError:
        return False
    return True


needs_torchvision = pytest.mark.skipif(not have_torchvision(), reason="torch and torchvision are not installed")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return make_folder(str(tmp_path_factory.mktemp("tiny")), classes=3, per_class=6, min_size=40, max_size=80)[0]


@needs_torchvision
@pytest.mark.parametrize("feeder", [[], ["--torchvision"]], ids=["fusionflow", "torchvision"])
def test_train_example_runs_a_few_steps(tiny, feeder):
    out = subprocess.run([sys.executable, os.path.join(EXAMPLES, "train.py"), "--data", tiny, "--steps", "4",
                          "--batch-size", "4", "--image-size", "32", "--threads", "1", "--warmup", "1",
                          "--log-every", "2"] + feeder, capture_output=True, text=True, timeout=400,
                         env=child_env())
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert any(line.startswith("step     4  loss ") for line in lines)
    summary = [line for line in lines if "images/s over 3 steps" in line]
    assert summary and "data wait" in summary[0] and "final loss" in summary[0]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@needs_torchvision
@pytest.mark.skipif(bool(os.environ.get("FF_TEST_SANITIZER")), reason="two torch processes under ASan are slow")
def test_ddp_example_trains_on_two_ranks(tiny):
    """Two ranks started as torchrun starts them: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT."""
    port = str(free_port())
    procs = []
    for rank in range(2):
        env = child_env()
        env.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
        procs.append(subprocess.Popen([sys.executable, os.path.join(EXAMPLES, "ddp.py"), "--data", tiny, "--steps",
                                       "2", "--batch-size", "4", "--image-size", "32"], stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True, env=env))
    try:
        outs = [p.communicate(timeout=400) for p in procs]
    finally:
        for p in procs:
            p.kill()
    for p, (_, err) in zip(procs, outs):
        assert p.returncode == 0, err[-3000:]
    assert "world 2: each rank 9 of 18 samples, 2 batches/epoch" in outs[0][0]
    assert "2 ranks:" in outs[0][0] and outs[1][0] == ""


def test_without_torch_batches_are_numpy_arrays(folder):
    code = textwrap.dedent("""
        import sys
        sys.modules["torch"] = None  # as if torch were not installed
        import fusionflow, numpy
        with fusionflow.Loader(sys.argv[1], "decode | resize(size=(8, 8)) | to_dtype", batch_size=4) as loader:
            images, labels = next(iter(loader))
        assert type(images) is numpy.ndarray and images.shape == (4, 3, 8, 8) and images.dtype == numpy.float32
        assert type(labels) is numpy.ndarray and labels.dtype == numpy.int64
        try:
            fusionflow.Loader(sys.argv[1], "decode | resize(size=(8, 8))", batch_size=4, output="torch")
        except ImportError:
            print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code, folder[0]], capture_output=True, text=True, timeout=60,
                         env=child_env())
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
