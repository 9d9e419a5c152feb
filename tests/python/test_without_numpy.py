"""The package in a Python with neither NumPy nor torch (both are optional): in a
child process whose imports of both fail, output="auto" hands out fusionflow.Tensor
objects (DLPack and NumPy's array interface) with the bytes NumPy output gets, and
asking for NumPy or torch output says in one line what to install or pass instead."""
import hashlib
import json
import subprocess
import sys

import pytest

from conftest import child_env

np = pytest.importorskip("numpy")
import fusionflow  # noqa: E402

PIPE = "decode | random_resized_crop(size=12) | random_horizontal_flip | normalize(mean=imagenet, std=imagenet)"

CHILD = r"""
import ctypes, hashlib, json, sys
sys.modules["numpy"] = None  # as if neither were installed: importing them fails
sys.modules["torch"] = None
import fusionflow
out = {"batches": []}
with fusionflow.Loader(sys.argv[1], sys.argv[2], batch_size=8, seed=4) as loader:
    for images, labels in loader:
        assert type(images) is fusionflow.Tensor and type(labels) is fusionflow.Tensor
        assert hasattr(images, "__dlpack__") and "data" in images.__array_interface__
        raw = ctypes.string_at(images.data_ptr, images.nbytes)
        out["batches"].append([list(images.shape), images.dtype, hashlib.sha256(raw).hexdigest(),
                               list(memoryview(ctypes.string_at(labels.data_ptr, labels.nbytes)).cast("q"))])
for output in ("numpy", "torch"):
    try:
        fusionflow.Loader(sys.argv[1], sys.argv[2], batch_size=8, output=output)
    except ImportError as e:
        out[output] = str(e)
try:
    fusionflow.augment_image(sys.argv[3], "decode | center_crop(size=8)")
except ImportError as e:
    out["augment_image"] = str(e)
print(json.dumps(out))
"""


def test_auto_output_without_numpy_or_torch_is_dlpack_tensors(folder):
    root, paths, _ = folder
    res = subprocess.run([sys.executable, "-c", CHILD, root, PIPE, paths[0]], capture_output=True, text=True,
                         timeout=120, env=child_env())
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    with fusionflow.Loader(root, PIPE, batch_size=8, seed=4, output="numpy") as loader:
        want = [[list(x.shape), str(x.dtype), hashlib.sha256(np.ascontiguousarray(x).tobytes()).hexdigest(),
                 y.tolist()] for x, y in loader]
    assert got["batches"] == want and len(want) == 3
    for output in ("numpy", "torch"):
        msg = got[output]
        assert "\n" not in msg and f"pip install {output}" in msg and 'output="dlpack"' in msg
    assert "pip install numpy" in got["augment_image"] and "augment_image" in got["augment_image"]
