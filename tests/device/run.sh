#!/usr/bin/env bash
# run.sh — the device checks (what each measures and how: METHOD.md).
#
#   tests/device/run.sh [DEVICE]     DEVICE: cuda:0 (default; or $DEV) or emu:0 (dry run)
#
# Installs nothing. It runs binaries built beforehand (tests/device/prepare.sh
# builds them here — sm_90 SASS with -lineinfo — with the shared libraries
# they need and a small image set, into build-carry/carry, the folder to
# carry to the device machine); only when they cannot run there does it
# rebuild with the toolkit it finds. One overall deadline (DEADLINE_S,
# default 540 s, under the device machine's 600 s per call): each step gets
# at most its own budget and never more than what is left; a failing or
# timed-out step is recorded and the next one runs. Steps in order of
# value, so a short run still answers the most: bit-identity (of the ops,
# then of the Mixup/CutMix batch stage), memcheck,
# DLPack into torch, device decode, the trainer stand-in at 1 thread (also
# its slowdown with the output on the device against host output), the
# transport (upload GB/s pinned vs pageable, ms per batch with host output
# vs direct aggregation, host round trips, the consumer's CPU while it
# waits), the kernels without their shared-memory reductions
# (FF_DEVICE_KERNELS=plain: images/s before/after), then the rest. Every step's log and summary.txt go under $OUT (default
# build-device/out). Exit status 0 when no step failed or timed out.
#
# With an emu:N device it is the dry run CI runs (ctest device_run_dry):
# every step that does not need CUDA runs on the emulator, those that do
# are listed as skipped, so the script and its binaries cannot rot.
#
#   FF_DEVICE_BIN=dir  binaries (dir/tests/*, dir/python, dir/lib, dir/data);
#                      default build-carry/carry, else build-device (rebuilt)
#   OUT=dir  DEADLINE_S=540  BATCH=256  FF_PYTHON=python3  FF_PYTHON_PRELOAD=lib
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
export DEVICE=${1:-${DEV:-cuda:0}}
export OUT=${OUT:-$ROOT/build-device/out}
DEADLINE_S=${DEADLINE_S:-540}
export BATCH=${BATCH:-256}
export FF_PYTHON=${FF_PYTHON:-python3}
export ROOT
mkdir -p "$OUT"
SUMMARY=$OUT/summary.txt
START=$SECONDS
DRY=0
case $DEVICE in
emu:*) DRY=1 ;;
cuda:*) ;;
*) echo "run.sh: DEVICE must be cuda:N or emu:N (got $DEVICE)" >&2; exit 2 ;;
esac
export DRY
failed=0
: >"$SUMMARY"
printf '%-16s %-8s %6s  %s\n' step result secs note | tee -a "$SUMMARY"

left() { echo $((DEADLINE_S - (SECONDS - START))); }

record() { # name result secs note
  printf '%-16s %-8s %6s  %s\n' "$1" "$2" "$3" "$4" | tee -a "$SUMMARY"
  case $2 in FAIL | TIMEOUT) failed=1 ;; esac
}

# step NAME BUDGET_S [--cuda] FUNCTION: runs FUNCTION (exported) under
# timeout, its output in $OUT/NAME.log. Exit 77 from it means skipped (the
# log's last line says why).
step() {
  local name=$1 budget=$2 fn=$3 cuda=0
  if [ "$fn" = --cuda ]; then cuda=1 fn=$4; fi
  if ((cuda && DRY)); then
    record "$name" SKIP 0 "needs CUDA (dry run on $DEVICE)"
    return
  fi
  local l
  l=$(left)
  if ((l < 15)); then
    record "$name" SKIP 0 "no time left"
    return
  fi
  ((budget > l - 10)) && budget=$((l - 10))
  local t0=$SECONDS rc=0
  timeout -k 5 "$budget" bash -c "$fn" >"$OUT/$name.log" 2>&1 || rc=$?
  local secs=$((SECONDS - t0)) note
  note=$(grep -v '^\s*$' "$OUT/$name.log" | tail -n 1 | cut -c1-100)
  case $rc in
  0) record "$name" PASS "$secs" "$note" ;;
  77) record "$name" SKIP "$secs" "$note" ;;
  124 | 137) record "$name" TIMEOUT "$secs" "budget ${budget} s; log: $name.log" ;;
  *) record "$name" FAIL "$secs" "exit $rc: $note" ;;
  esac
}

# ------------------------------------------------------------ binaries

BIN=${FF_DEVICE_BIN:-}
if [ -z "$BIN" ]; then
  if [ -d "$ROOT/build-carry/carry" ]; then BIN=$ROOT/build-carry/carry; else BIN=$ROOT/build-device; fi
fi
export BIN
export LD_LIBRARY_PATH=$BIN/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export FF_TEST_TMP=${FF_TEST_TMP:-$OUT/tmp}
export CMOCKA_MESSAGE_OUTPUT=stdout

runnable() { "$BIN/tests/test_pool" >"$OUT/runnable.log" 2>&1; }

rebuild() {
  set -e
  NVCC=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
  command -v cmake >/dev/null || { echo "no cmake here: cannot rebuild"; exit 1; }
  [ -x "$NVCC" ] || { echo "no nvcc here: cannot rebuild"; exit 1; }
  cmake -S "$ROOT" -B "$ROOT/build-device" -DFF_CUDA=ON -DCMAKE_CUDA_COMPILER="$NVCC" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CUDA_ARCHITECTURES="${FF_CUDA_ARCH:-90}"
  cmake --build "$ROOT/build-device" -j "$(nproc)" --target test_device test_batch_mix test_pool test_offload device_check \
    trainer_standin transport _fusionflow node_member
  echo "rebuilt in build-device"
}
export -f rebuild

if runnable; then
  record binaries PASS 0 "$BIN"
else
  if [ -z "${FF_DEVICE_BIN:-}" ] && [ "$BIN" = "$ROOT/build-device" ] && [ ! -e "$BIN/tests/test_pool" ]; then
    record binaries SKIP 0 "no prebuilt set (build-carry/carry or build-device) yet: building one"
  else # binaries that were given or carried and do not run: a failure of the carry set
    record binaries FAIL 0 "$BIN cannot run: $(tail -n 1 "$OUT/runnable.log" | cut -c1-80); rebuilding"
  fi
  step rebuild 300 rebuild
  BIN=$ROOT/build-device
  export BIN LD_LIBRARY_PATH=$BIN/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi

# ------------------------------------------------------------ the steps

gpu() {
  command -v nvidia-smi >/dev/null || { echo "no nvidia-smi"; exit 77; }
  nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv
}

# Every op and policy as microbatches on emu:0 and on the device, byte for
# byte against the CPU; on a GPU the cuda:0 case must have run.
bit_identity() {
  "$BIN/tests/test_device" || exit 1
  if ((!DRY)) && grep -q "SKIPPED \] every_op_and_policy_on_cuda" "$OUT/bit_identity.log"; then
    echo "the cuda:0 comparison was skipped: no usable GPU"
    exit 1
  fi
  echo "every op and policy bit-identical on $( ((DRY)) && echo emu:0 || echo "emu:0 and cuda:0")"
}

# Mixup/CutMix on the device batch (the CUDA kernel on cuda:0; emu:0 in the
# dry run) against the CPU-mixed batches, byte for byte.
batch_mix() {
  "$BIN/tests/test_batch_mix" || exit 1
  if ((!DRY)) && grep -q "SKIPPED \] cuda_mixed_batches" "$OUT/batch_mix.log"; then
    echo "the cuda:0 comparison was skipped: no usable GPU"
    exit 1
  fi
  echo "mixup_cutmix on the device batch bit-identical on $( ((DRY)) && echo emu:0 || echo "emu:0 and cuda:0")"
}

# Batch 256 at 224x224: bit-identity of every pipeline, images/s, upload
# GB/s, the pool under memory pressure. The dry run uses batch 4.
device_check() {
  local batch=$BATCH
  ((DRY)) && batch=4
  "$BIN/tests/device_check" "$DEVICE" "$batch"
}

memcheck() {
  command -v compute-sanitizer >/dev/null || [ -x /usr/local/cuda/bin/compute-sanitizer ] ||
    { echo "no compute-sanitizer on this machine"; exit 77; }
  local cs
  cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  "$cs" --tool memcheck --error-exitcode 1 --leak-check no "$BIN/tests/device_check" "$DEVICE" 16
}

# FF_PYTHON_PRELOAD: what the Python must load first (a sanitizer build's
# runtime; Python's own allocations are then not leak-checked).
dlpack_torch() {
  if [ -n "${FF_PYTHON_PRELOAD:-}" ]; then export LD_PRELOAD=$FF_PYTHON_PRELOAD ASAN_OPTIONS=detect_leaks=0; fi
  PYTHONPATH=$BIN/python "$FF_PYTHON" "$ROOT/tests/device/dlpack_check.py" "$DEVICE" "$BIN/data"
}

# ---- device decode (nvJPEG loads, its pixels against libjpeg-turbo's, images/s
# per backend, split vs device placement): tests/device/decode.sh over the
# carry set's binaries, nvjpeg/ and demo-small/; on emu there is nothing to
# measure.
device_decode() {
  case "$DEVICE" in cuda:*) ;; *) echo "device decode is measured on cuda:N only"; exit 77 ;; esac
  [ -f "$BIN/nvjpeg/libnvjpeg.so.13" ] || [ -f "$ROOT/build/nvjpeg/libnvjpeg.so.13" ] ||
    { echo "no nvjpeg/ in $BIN (tests/device/prepare.sh puts it there)"; exit 77; }
  BUILD="$BIN" "$ROOT/tests/device/decode.sh"
}

trainer_1() { "$BIN/tests/trainer_standin" --threads 1 --step-ms 20 --dir "$FF_TEST_TMP/trainer"; }
trainer_2() { "$BIN/tests/trainer_standin" --threads 2 --step-ms 20 --dir "$FF_TEST_TMP/trainer"; }
# The kernels without their shared-memory histograms and sums (the one
# build's before/after: compare its images/s lines with device_check's);
# also their bit-identity.
kernels_plain() {
  local batch=$BATCH
  ((DRY)) && batch=4
  FF_DEVICE_KERNELS=plain "$BIN/tests/device_check" "$DEVICE" "$batch"
}
# Batch $BATCH x 4 batches on a GPU; the dry run takes 8 x 2 on emu (its
# figures are the emulator's memcpy, not a GPU's).
transport() {
  if ((DRY)); then "$BIN/tests/transport" "$DEVICE" 8 2; else "$BIN/tests/transport" "$DEVICE" "$BATCH" 4; fi
}
offload() { "$BIN/tests/test_offload"; }
pool() { "$BIN/tests/test_pool"; }
export -f gpu bit_identity batch_mix device_check memcheck dlpack_torch device_decode trainer_1 trainer_2 transport kernels_plain offload pool

# ---- the node benchmark as CPU-only processes (bench/node.py: loaders with the
# coordinator, off and a static split on the machine's cores, and the CPU
# trainer stand-in); the dry run only checks that it runs.
node_bench() {
  local member
  for member in "$BIN/node_member" "$BIN/tests/node_member"; do [ -x "$member" ] && break; done
  [ -x "$member" ] || { echo "no node_member in $BIN (add it to the carry set)"; exit 77; }
  [ -d "$BIN/data" ] || { echo "no image set in $BIN/data"; exit 77; }
  local args="--seconds 2"
  ((DRY)) && args="--seconds 1 --only one-stalled,standin"
  python3 "$ROOT/bench/node.py" --bin "$(dirname "$member")" --data "$BIN/data" $args --json >"$OUT/node.json" &&
    python3 "$ROOT/bench/node.py" --print "$OUT/node.json"
}
export -f node_bench

step gpu 15 --cuda gpu
step bit_identity 120 bit_identity
step batch_mix 60 batch_mix
step device_check 150 device_check
if (($(left) > 300)); then
  step memcheck 120 --cuda memcheck
else
  record memcheck SKIP 0 "under 300 s left"
fi
# torch's import alone took 10 s of the 60 this step had in a quiet dry run and
# more than all of it beside the suite's Python tests (ctest -j2)
step dlpack_torch 120 dlpack_torch
step device_decode 60 device_decode
step trainer_1 120 --cuda trainer_1
step transport 60 transport
step kernels_plain 90 kernels_plain
step offload 90 offload
step trainer_2 120 --cuda trainer_2
step pool 60 pool
step node_bench 150 node_bench

record total "$( ((failed)) && echo FAIL || echo PASS)" $((SECONDS - START)) "logs in $OUT"
exit "$failed"
