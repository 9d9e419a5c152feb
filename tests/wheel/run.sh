#!/usr/bin/env bash
# run.sh OUT SRC — the wheel as a user installs it: built and repaired by
# scripts/wheel.sh (into OUT), installed with pip into a fresh virtual
# environment outside the tree (no index: nothing but the wheel), then
#   - `auditwheel show` names a manylinux tag and the extension is abi3;
#   - every library the installed extension loads (ldd) lies in the wheel's
#     fusionflow.libs/ or is one that every manylinux system has (glibc's
#     libc, libm, libpthread, libdl, librt, libresolv and loader, libgcc_s,
#     zlib, and libstdc++, which the manylinux policies allow too: libtiff's
#     LERC codec is C++, libcurl resolves names through libresolv):
#     nothing from the -dev packages or the build tree;
#   - run from a directory outside the tree with LD_LIBRARY_PATH and
#     PYTHONPATH unset, the installed package (not the tree's) yields one
#     batch of a folder holding JPEG, PNG, WebP and TIFF files (each decoder
#     from a bundled library), pixel for pixel Pillow's, as a NumPy array
#     and as a torch tensor through DLPack. NumPy, Pillow and torch come from
#     the test environment through a .pth file: they are the reference, not
#     part of what is tested. The package's own tests (tests/python) run
#     against the build tree (ctest `python`): the wheel holds the same
#     objects, so what only the wheel can get wrong is how it was built,
#     repaired and installed, which this checks.
# Exit 77 (ctest: skipped) when the test environment has no auditwheel;
# non-zero on a failure.
set -euo pipefail
OUT=$(mkdir -p "$1" && cd "$1" && pwd)
SRC=$(cd "$2" && pwd)
fail() { echo "wheel test: $*" >&2; exit 1; }
ref=$("$SRC/scripts/test-venv.sh")
"$ref" -c 'import auditwheel, scikit_build_core' 2>/dev/null ||
  { echo "wheel test: skipped: $ref has no auditwheel/scikit-build-core (tests/requirements.txt pins them)"; exit 77; }
wheel=$("$SRC/scripts/wheel.sh" "$OUT")
echo "wheel: $(basename "$wheel") ($(du -k "$wheel" | cut -f1) KiB)"
show=$("$ref" -m auditwheel show "$wheel" 2>&1) || fail "auditwheel show: $show"
tag=$(echo "$show" | tr '\n' ' ' | grep -o 'platform tag to "manylinux_2_[0-9]*_x86_64"' | grep -o 'manylinux_[0-9_]*x86_64') ||
  { echo "$show"; fail "auditwheel show names no manylinux tag"; }
echo "wheel: auditwheel show: $tag"
case $(basename "$wheel") in *-cp39-abi3-manylinux*) ;; *) fail "not a cp39-abi3 manylinux wheel: $wheel" ;; esac

work=$(mktemp -d "${TMPDIR:-/tmp}/ff-wheel.XXXXXX")
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 -m venv "$work/venv"
py="$work/venv/bin/python"
site=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
"$py" -m pip install --quiet --no-index --no-deps --disable-pip-version-check "$wheel"
"$ref" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' >"$site/reference.pth"

ext=$(ls "$site"/fusionflow/_fusionflow*.so)
[[ $(basename "$ext") == _fusionflow.abi3.so ]] || fail "the extension is not abi3: $ext"
foreign=$(env -u LD_LIBRARY_PATH ldd "$ext" | awk '
  /not found/ { print; next }
  $3 ~ /^\// && $3 !~ /\/fusionflow\.libs\// && $1 !~ /^(libc|libm|libpthread|libdl|librt|libresolv|libgcc_s|libstdc\+\+|libz|ld-linux-x86-64)\.so/ { print }')
[[ -z $foreign ]] || { env -u LD_LIBRARY_PATH ldd "$ext"; fail "the extension loads libraries from outside the wheel: $foreign"; }
echo "wheel: the extension loads $(env -u LD_LIBRARY_PATH ldd "$ext" | grep -c fusionflow.libs) libraries from fusionflow.libs/ and glibc"

cd "$work"
env -u LD_LIBRARY_PATH -u PYTHONPATH "$py" - "$site" "$work/images" <<'PY'
import os, sys
import numpy as np
from PIL import Image
import fusionflow
where = os.path.realpath(fusionflow.__file__)
assert where.startswith(os.path.realpath(sys.argv[1])), f"imported from {where}, not the installed wheel"
print(f"wheel: fusionflow {fusionflow.__version__} (library {fusionflow.library_version}) imported from {os.path.dirname(where)}")

root = sys.argv[2]
rng = np.random.default_rng(0)
want = []
for c, (name, fmt, kw) in enumerate([("a.jpg", "JPEG", {"quality": 90}), ("b.png", "PNG", {}),
                                     ("c.webp", "WEBP", {"lossless": True}), ("d.tif", "TIFF", {})]):
    os.makedirs(os.path.join(root, f"class{c}"))
    path = os.path.join(root, f"class{c}", name)
    Image.fromarray(rng.integers(0, 256, (24, 24, 3), dtype=np.uint8)).save(path, fmt, **kw)
    want.append(np.asarray(Image.open(path).convert("RGB")))
for output in ("numpy", "torch"):
    with fusionflow.Loader(root, "decode | center_crop(size=24)", batch_size=4, shuffle=False, output=output) as loader:
        (images, labels), = list(loader)
    images = np.asarray(images.numpy() if output == "torch" else images)
    assert images.shape == (4, 24, 24, 3) and images.dtype == np.uint8, (output, images.shape, images.dtype)
    assert list(np.asarray(labels)) == [0, 1, 2, 3], labels
    for k in range(4):
        np.testing.assert_array_equal(images[k], want[k], err_msg=f"{output}: image {k}")
    print(f"wheel: one {output} batch of JPEG, PNG, WebP and TIFF: {images.shape}, Pillow's pixels")
PY
