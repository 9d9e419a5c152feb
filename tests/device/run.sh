#!/usr/bin/env bash
# run.sh — the device checks, on a machine with an NVIDIA GPU (what they
# measure and how: METHOD.md). Builds with CUDA in its own build folder,
# runs the unit tests that compare cuda:0 with the CPU, then device_check:
# bit-identical output of every pipeline at batch 256 / 224x224, images/s,
# pinned upload bandwidth, and the pool under memory pressure; then the
# trainer stand-in: cpu-only against cooperative offload while a step kernel
# keeps the GPU busy (stall removed, step slowdown). Prints the tables;
# exits non-zero on any mismatch or failure. Under 8 minutes on an H200
# (mostly the build).
#   BUILD=dir (default build-device)  FF_CUDA_ARCH="90" (default "80;90")  BATCH=256
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build-device}
BATCH=${BATCH:-256}
JOBS=$(nproc)
start=$(date +%s)
step() { echo "== $* ($(($(date +%s) - start)) s)" >&2; }

if ! command -v cmake >/dev/null || ! command -v cc >/dev/null ||
   ! pkg-config --exists libjpeg spng cmocka 2>/dev/null; then
  step "installing dependencies"
  scripts/install-deps.sh
fi
NVCC=${CUDACXX:-/usr/local/cuda/bin/nvcc}
[ -x "$NVCC" ] || { echo "run.sh: no nvcc at $NVCC (set CUDACXX)" >&2; exit 2; }
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv >&2 || true

mkdir -p "$BUILD"
step "configure ($BUILD, FF_CUDA=ON)"
cmake -S . -B "$BUILD" -DFF_CUDA=ON -DCMAKE_CUDA_COMPILER="$NVCC" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_CUDA_ARCHITECTURES="${FF_CUDA_ARCH:-80;90}" >"$BUILD/run-configure.log" 2>&1 ||
  { cat "$BUILD/run-configure.log" >&2; exit 1; }
step "build"
cmake --build "$BUILD" -j "$JOBS" --target fusionflow_static test_device test_pool trainer_standin >"$BUILD/run-build.log" 2>&1 ||
  { tail -50 "$BUILD/run-build.log" >&2; exit 1; }
CUDA_HOME=$(dirname "$(dirname "$NVCC")")
cc -O2 -ffp-contract=off -D_GNU_SOURCE -DFF_CHECK_CUDA -Iinclude -Isrc -I"$CUDA_HOME/include" \
   tests/device/device_check.c "$BUILD/libfusionflow.a" -L"$CUDA_HOME/lib64" -lcudart_static -ldl -lrt \
   $(pkg-config --libs libjpeg spng) -lm -lpthread -o "$BUILD/device_check"

step "unit tests: every op and policy on cuda:0 and emu:0 against the CPU; the pool"
export CMOCKA_MESSAGE_OUTPUT=stdout
timeout 180 "$BUILD/tests/test_pool" >"$BUILD/run-test_pool.log" 2>&1 || { cat "$BUILD/run-test_pool.log"; exit 1; }
timeout 180 "$BUILD/tests/test_device" >"$BUILD/run-test_device.log" 2>&1 || { cat "$BUILD/run-test_device.log"; exit 1; }
if grep -q "SKIPPED \] every_op_and_policy_on_cuda" "$BUILD/run-test_device.log"; then
  grep -i "skipped:" "$BUILD/run-test_device.log" >&2
  echo "run.sh: the cuda:0 comparison was skipped: no usable GPU" >&2
  exit 1
fi
step "device_check cuda:0, batch $BATCH"
echo "unit tests: test_device (every op and policy, cuda:0 and emu:0 against the CPU) and test_pool passed"
status=0
timeout 360 "$BUILD/device_check" cuda:0 "$BATCH" | tee "$BUILD/run-device_check.log" || status=$?
for threads in 2 1; do
  step "trainer stand-in: step 20 ms per batch of 64, $threads CPU thread(s), cpu vs cuda:0"
  FF_TEST_TMP="$BUILD/test-tmp" timeout 150 "$BUILD/tests/trainer_standin" --threads "$threads" --step-ms 20 |
    tee "$BUILD/run-trainer-$threads.log" || status=1
done
# ---- device decode (whole-sample offload): its own script, same build folder ----
step "device decode: tests/device/decode.sh"
BUILD="$BUILD" tests/device/decode.sh || status=1

echo "total $(($(date +%s) - start)) s"
exit "$status"
