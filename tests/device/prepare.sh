#!/usr/bin/env bash
# prepare.sh — builds, here, what tests/device/run.sh runs on a GPU machine
# that has no network, no compiler and no -dev packages: the carry set, one
# archive (`make device-carry` calls this).
#
#   tests/device/prepare.sh        → build-carry/carry.tar.xz (carry that one
#                                    path to the device machine: METHOD.md)
#
# 1. A CUDA build for sm_90 in build-carry/build (RelWithDebInfo: the code
#    CI tests; the debug info is stripped from the copies), with libarchive
#    linked statically (FF_STATIC_LIBARCHIVE: no libxml2/ICU) and the
#    compiler's per-kernel report (-Xptxas=-v, the library's kernels built
#    alone first so that the report is not interleaved) turned into
#    build-carry/build/ptxas.json (tests/device/ptxas.py). Its CUDA compiles
#    bypass ccache: a cache hit would write no PTX for the launch bounds.
# 2. nvJPEG's libnvjpeg.so.13 from NVIDIA's wheel (scripts/install-deps.sh
#    --nvjpeg, cached outside the tree), for the nvJPEG step.
# 3. tests/device/carry.py pack (stripped programs, the libraries they need
#    beyond glibc/libstdc++/libgcc_s, the Python package; xz -9), then
#    carry.py check (under 48 MiB; every library found inside the carry; the
#    programs run and the extension imports without LD_LIBRARY_PATH).
# No image set travels: run.sh writes one with the carried make_images.
#   FF_CUDA_ARCH=90  JOBS=2  FF_PYTHON=(the test environment's)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUTDIR=$ROOT/build-carry
BUILD=$OUTDIR/build
ARCHIVE=$OUTDIR/carry.tar.xz
JOBS=${JOBS:-2}
FF_PYTHON=${FF_PYTHON:-$("$ROOT/scripts/test-venv.sh")}
mkdir -p "$BUILD/ptx"

echo "prepare: configuring $BUILD (log: $BUILD/configure.log)"
cmake -S "$ROOT" -B "$BUILD" -DFF_CUDA=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CUDA_ARCHITECTURES="${FF_CUDA_ARCH:-90}" -DFF_STATIC_LIBARCHIVE=ON -DFF_PYTHON="$FF_PYTHON" \
  -DCMAKE_CUDA_FLAGS="-Xptxas=-v --keep --keep-dir=$BUILD/ptx" -DCMAKE_CUDA_COMPILER_LAUNCHER= >"$BUILD/configure.log" 2>&1 ||
  { tail -30 "$BUILD/configure.log"; exit 1; }
# The CUDA objects are always compiled again, so that their report is in this run's logs.
find "$BUILD" -name '*.cu.o' -delete
echo "prepare: the library's kernels (log: $BUILD/ptxas.log)"
cmake --build "$BUILD" -j 1 --target ff_cuda_objects >"$BUILD/ptxas.log" 2>&1 || { tail -30 "$BUILD/ptxas.log"; exit 1; }
targets="test_device test_batch_mix test_pool test_offload test_nvjpeg nvjpeg_stub device_check transport
         trainer_standin make_images node_member fusionflow_cli _fusionflow"
echo "prepare: building the check programs (log: $BUILD/build.log)"
cmake --build "$BUILD" -j "$JOBS" --target $targets >"$BUILD/build.log" 2>&1 || { tail -40 "$BUILD/build.log"; exit 1; }
"$FF_PYTHON" "$ROOT/tests/device/ptxas.py" --ptx "$BUILD/ptx" "$BUILD/ptxas.log" "$BUILD/build.log" >"$BUILD/ptxas.json"
"$FF_PYTHON" "$ROOT/tests/device/ptxas.py" --print "$BUILD/ptxas.json"

(cd "$ROOT" && scripts/install-deps.sh --nvjpeg >/dev/null)
"$FF_PYTHON" "$ROOT/tests/device/carry.py" pack "$BUILD" "$ARCHIVE" --level 9 --ptxas "$BUILD/ptxas.json" \
  --nvjpeg "$ROOT/build/nvjpeg/libnvjpeg.so.13" --python "$FF_PYTHON"
"$FF_PYTHON" "$ROOT/tests/device/carry.py" check "$ARCHIVE" --python /usr/bin/python3 --python "$FF_PYTHON"
echo "prepare: carry build-carry/carry.tar.xz; on the device machine: tests/device/run.sh cuda:0 (METHOD.md)"
