#!/usr/bin/env bash
# Builds the wheel that installs without a compiler or -dev packages:
#   scripts/wheel.sh [OUT]      (default: build/wheel; `make wheel` calls it)
# 1. `pip wheel ./python` in the test environment (scripts/test-venv.sh has
#    scikit-build-core and auditwheel pinned), without build isolation, so
#    nothing is downloaded per build; the CMake tree OUT/cmake is reused.
#    The extension uses CPython's stable ABI: the wheel is cp39-abi3, one for
#    every CPython >= 3.9. With nvcc present the CUDA executor is built in,
#    with the CUDA runtime linked statically: it loads the driver only when
#    a `cuda` device is asked for, so the same wheel runs on CPU-only hosts.
# 2. `auditwheel repair`: copies the native libraries the extension needs
#    beyond glibc (libjpeg-turbo, libspng, zlib, ...) into fusionflow.libs/,
#    points the extension at them, and tags the wheel with the oldest
#    manylinux baseline its symbols allow (built on Debian 12: glibc 2.36,
#    from its libarchive; see `auditwheel show`).
# Prints the repaired wheel's path on stdout; the tools' output goes to stderr.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
out=$(mkdir -p "${1:-$here/build/wheel}" && cd "${1:-$here/build/wheel}" && pwd)
py=$("$here/scripts/test-venv.sh")
rm -rf "$out/dist" "$out/wheelhouse"
# -v: the build's own progress lines go to the log, and stage.sh shows the latest every 30 s
"$here/scripts/stage.sh" "wheel: build the extension" "$out/build.log" \
  "$py" -m pip wheel -v --no-build-isolation --no-deps --disable-pip-version-check -w "$out/dist" \
  --config-settings=build-dir="$out/cmake" "$here/python"
PATH="$(dirname "$py"):$PATH" "$here/scripts/stage.sh" "wheel: auditwheel repair" "$out/repair.log" \
  "$py" -m auditwheel repair --wheel-dir "$out/wheelhouse" "$out"/dist/*.whl
ls "$out"/wheelhouse/*.whl
