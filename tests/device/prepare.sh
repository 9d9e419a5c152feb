#!/usr/bin/env bash
# prepare.sh — builds, here, what tests/device/run.sh runs on a GPU machine
# that has no network and no build tools: the carry set.
#
#   tests/device/prepare.sh        → build-carry/carry (pass "build-carry/carry"
#                                    as the device tool's carry)
#
# A CUDA build for sm_90 (SASS, with -lineinfo for compute-sanitizer and
# profiler source lines) in build-carry/build; then build-carry/carry gets
#   tests/   test_device test_batch_mix test_pool test_offload device_check trainer_standin transport
#            test_nvjpeg libnvjpeg_stub.so, and the fusionflow CLI and node_member
#            (bench/node.py's trainer process) beside them
#   nvjpeg/  libnvjpeg.so.13 from the nvidia-nvjpeg wheel; demo-small/ 300 demo
#            images (tests/device/decode.sh --prepare), for the device-decode step
#   python/  the fusionflow package with its extension
#   lib/     every shared library those load that is not the C library itself
#   data/    a small ImageFolder for the DLPack step
# and checks that the whole stays under the carry limit (64 MiB).
#   FF_CUDA_ARCH=90  JOBS=2  FF_PYTHON=/usr/bin/python3
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$ROOT/build-carry/build
CARRY=$ROOT/build-carry/carry
JOBS=${JOBS:-2}
FF_PYTHON=${FF_PYTHON:-/usr/bin/python3}
LIMIT_BYTES=$((64 << 20))

cmake -S "$ROOT" -B "$BUILD" -DFF_CUDA=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CUDA_ARCHITECTURES="${FF_CUDA_ARCH:-90}" -DFF_PYTHON="$FF_PYTHON" >/dev/null
targets="test_device test_batch_mix test_pool test_offload device_check trainer_standin transport _fusionflow fusionflow_cli test_nvjpeg
         nvjpeg_stub node_member"
cmake --build "$BUILD" -j "$JOBS" --target $targets

rm -rf "$CARRY"
mkdir -p "$CARRY/tests" "$CARRY/lib" "$CARRY/python"
for t in test_device test_batch_mix test_pool test_offload device_check trainer_standin transport test_nvjpeg libnvjpeg_stub.so; do
  [ -e "$BUILD/tests/$t" ] && cp "$BUILD/tests/$t" "$CARRY/tests/"
done
cp "$BUILD/fusionflow" "$BUILD/node_member" "$CARRY/"
# The device-decode step's nvJPEG (the PyPI wheel's library) and images (tests/device/decode.sh).
(cd "$ROOT" && tests/device/decode.sh --prepare >/dev/null)
cp -r "$ROOT/build/nvjpeg" "$ROOT/build/demo-small" "$CARRY/"
cp -r "$BUILD/python/fusionflow" "$CARRY/python/"
rm -rf "$CARRY/python/fusionflow/__pycache__"

# Shared libraries: all but the C library's own (the device machine has those).
for f in "$CARRY"/fusionflow "$CARRY"/node_member "$CARRY"/tests/* "$CARRY"/python/fusionflow/*.so; do
  ldd "$f" | awk '/=> \// {print $3}'
done | sort -u | while read -r lib; do
  case $(basename "$lib") in
  libc.so.* | libm.so.* | libpthread.so.* | libdl.so.* | librt.so.* | ld-linux*) ;;
  *) cp -L "$lib" "$CARRY/lib/" ;;
  esac
done

# The DLPack step's images (written by the step itself when Pillow is there).
"$FF_PYTHON" -c "import sys; sys.path.insert(0, '$ROOT/tests/device'); import dlpack_check; dlpack_check.ensure_data('$CARRY/data')"

bytes=$(du -sb "$CARRY" | cut -f1)
echo "carry set: $CARRY, $((bytes >> 20)) MiB ($(ls "$CARRY/tests" | tr '\n' ' '))"
if ((bytes > LIMIT_BYTES)); then
  echo "prepare.sh: the carry set is over 64 MiB" >&2
  exit 1
fi
