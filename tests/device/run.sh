#!/usr/bin/env bash
# run.sh — the device checks, in one call of the device machine (METHOD.md
# says what each step measures, its budget and why).
#
#   tests/device/run.sh [--only STEP,...] [DEVICE]   DEVICE: cuda:0 (default; or $DEV), emu:0 (dry run)
#
# Installs and builds nothing. It unpacks the carry set (build-carry/carry.tar.xz,
# `make device-carry`; FF_DEVICE_CARRY=archive, or FF_DEVICE_BIN=folder for a
# build tree or an unpacked set) and writes the image set with the carried
# make_images, all under a scratch folder in /tmp. Steps run in order of
# value, each under its own budget and never past the deadline (DEADLINE_S,
# default 270 s); one that fails or times out is recorded and the next runs;
# one the machine cannot run is SKIP with the reason; the optional ones
# (memcheck, node_bench) run only when their budget is left, and their
# timeout fails nothing. `--only` reruns the named steps alone.
#
# $OUT (default build-device/out) gets exactly three files, rewritten after
# every step so that a killed run still leaves them: summary.txt (a line per
# step), results.json (every figure, one object per step) and logs.tar.gz
# (every step's log). The summary and the key figures are printed last on
# stdout. Exit status 0 when no step failed or timed out (optional ones aside).
#
# With emu:N it is the dry run CI runs (ctest device_run_dry): every step that
# does not need CUDA runs on the emulator at small sizes, so the script, its
# programs and the shape of results.json cannot rot.
#   OUT=dir  DEADLINE_S=270  BATCH=256  FF_PYTHON=python3 (with torch)
#   FF_PYTHON_PRELOAD=lib (a sanitizer runtime the Python must load first)
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
ONLY=""
while [ $# -gt 0 ]; do
  case $1 in
  --only) ONLY=",${2:-},"; shift 2 ;;
  --only=*) ONLY=",${1#--only=},"; shift ;;
  -h | --help) sed -n '2,27p' "$0"; exit 0 ;;
  *) DEV=$1; shift ;;
  esac
done
ONLY=${ONLY// /,}
export DEVICE=${DEV:-cuda:0}
case $DEVICE in
emu:*) DRY=1 ;;
cuda:*) DRY=0 ;;
*) echo "run.sh: DEVICE must be cuda:N or emu:N (got $DEVICE)" >&2; exit 2 ;;
esac
export DRY ROOT
export OUT=${OUT:-$ROOT/build-device/out}
# Under a sanitizer (a CI dry run: FF_TEST_SANITIZER) every budget is 3 times
# longer and the deadline 540 s (ctest allows 600).
SLOW=1
[ -n "${FF_TEST_SANITIZER:-}" ] && SLOW=3
DEADLINE_S=${DEADLINE_S:-$( ((SLOW > 1)) && echo 540 || echo 270)}
export BATCH=${BATCH:-256}
export FF_PYTHON=${FF_PYTHON:-python3}
export PYTHONUNBUFFERED=1 CMOCKA_MESSAGE_OUTPUT=stdout
START=$SECONDS
mkdir -p "$OUT" && rm -f "$OUT/summary.txt" "$OUT/results.json" "$OUT/logs.tar.gz"
SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/ff-device.XXXXXX")
export SCRATCH LOGS=$SCRATCH/logs FIGS=$SCRATCH/figures FF_TEST_TMP=$SCRATCH/tmp DATA=$SCRATCH/data
mkdir -p "$LOGS" "$FIGS" "$FF_TEST_TMP"
: >"$SCRATCH/steps.tsv"
REPORT="python3 $ROOT/tests/device/report.py --scratch $SCRATCH"
failed=0 cut=0
# Line-buffered output for every program a step runs (glibc stdio), where coreutils has
# stdbuf; not under a sanitizer, whose runtime must be the first library loaded.
LINEBUF=""
command -v stdbuf >/dev/null && [ -z "${FF_TEST_SANITIZER:-}" ] && LINEBUF="stdbuf -oL -eL"

left() { echo $((DEADLINE_S - (SECONDS - START))); }

# record NAME RESULT SECS BUDGET OPTIONAL NOTE: a line on stdout and in steps.tsv;
# $OUT is rewritten unless the step did not run (the next one's write has it).
record() {
  printf '%-14s %-8s %5s  %s\n' "$1" "$2" "$3" "$6"
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" "${6//$'\t'/ }" >>"$SCRATCH/steps.tsv"
  case $2 in FAIL | TIMEOUT) ((${5:-0})) || failed=1 ;; esac
  [ -f "$LOGS/$1.log" ] || [ "$1" = binaries ] || [ "$1" = total ] && write_out
  true
}

write_out() {
  $REPORT write --out "$OUT" --elapsed $((SECONDS - START)) >/dev/null 2>"$SCRATCH/report.err" ||
    echo "run.sh: report.py: $(tail -n 1 "$SCRATCH/report.err")" >&2
}

selected() { [ -z "$ONLY" ] || [[ $ONLY == *",$1,"* ]]; }

# step NAME BUDGET_S [--cuda] [--optional] [--always] FUNCTION: runs FUNCTION (exported)
# under timeout, its output in $LOGS/NAME.log; FIG=$FIGS/NAME.json is where
# it may write its figures. Exit 77 from it means skipped (its last line says
# why). --always: also under --only (what other steps need).
step() {
  local name=$1 budget=$2 cuda=0 optional=0 always=0
  shift 2
  while [ "${1:0:2}" = -- ]; do
    case $1 in --cuda) cuda=1 ;; --optional) optional=1 ;; --always) always=1 ;; esac
    shift
  done
  local fn=$1
  ((always)) || selected "$name" || return 0
  budget=$((budget * SLOW))
  if ((cuda && DRY)); then
    record "$name" SKIP 0 "$budget" $optional "needs CUDA (dry run on $DEVICE)"
    return
  fi
  local l
  l=$(left)
  if ((optional && l < budget + 10)); then
    record "$name" SKIP 0 "$budget" $optional "optional: ${l} s left, its budget is ${budget} s"
    return
  fi
  if ((l < 15)); then
    record "$name" SKIP 0 "$budget" $optional "no time left"
    cut=$((cut + 1))
    return
  fi
  ((budget > l - 10)) && budget=$((l - 10))
  echo "== $name (budget ${budget} s)" >"$LOGS/$name.log"
  local t0=$SECONDS rc=0
  FIG=$FIGS/$name.json timeout -k 5 "$budget" $LINEBUF bash -c "$fn" >>"$LOGS/$name.log" 2>&1 || rc=$?
  local secs=$((SECONDS - t0)) note
  note=$(grep -v '^\s*$' "$LOGS/$name.log" | tail -n 1 | cut -c1-110)
  case $rc in
  0) record "$name" PASS "$secs" "$budget" $optional "$note" ;;
  77) record "$name" SKIP "$secs" "$budget" $optional "$note" ;;
  124 | 137) record "$name" TIMEOUT "$secs" "$budget" $optional \
    "stopped at its budget of $budget s$( ((optional)) && echo " (optional: not a failure)"); log $name.log" ;;
  *) record "$name" FAIL "$secs" "$budget" $optional "exit $rc: $note" ;;
  esac
}

# ------------------------------------------------------------ the carry set

unpack() { # .tar.xz (make device-carry) or .tar.gz (ctest's)
  local archive=$1 dest=$SCRATCH
  if [[ $archive == *.gz ]] || command -v xz >/dev/null; then
    tar -C "$dest" -xf "$archive"
  else # no xz binary: Python's tarfile reads .tar.xz itself
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$archive" "$dest"
  fi
}

BIN=${FF_DEVICE_BIN:-}
CARRY_NOTE=""
if [ -n "$BIN" ]; then
  CARRY_NOTE="programs from $BIN"
else
  ARCHIVE=${FF_DEVICE_CARRY:-$ROOT/build-carry/carry.tar.xz}
  if [ -f "$ARCHIVE" ] && unpack "$ARCHIVE"; then
    BIN=$SCRATCH/carry
    CARRY_NOTE="$(basename "$ARCHIVE") ($(($(stat -c %s "$ARCHIVE") >> 20)) MiB): $(head -n 1 "$BIN/MANIFEST.txt" | cut -c1-80)"
  fi
fi
export BIN
# A program of the set: BIN/bin (carry), BIN/tests or BIN (build tree).
prog() {
  local p
  for p in "$BIN/bin/$1" "$BIN/tests/$1" "$BIN/$1"; do [ -x "$p" ] && { echo "$p"; return; }; done
  echo "$BIN/bin/$1" # missing: the caller's exec says so
}
export -f prog
DEADLINE_S=$DEADLINE_S ONLY=$ONLY CARRY_NOTE=$CARRY_NOTE python3 - "$SCRATCH/meta.json" <<'EOF'
import json, os, platform, sys, time
e = os.environ
json.dump({"device": e["DEVICE"], "dry_run": e["DRY"] == "1", "deadline_s": int(e["DEADLINE_S"]),
           "only": [s for s in e["ONLY"].split(",") if s], "carry": e["CARRY_NOTE"], "bin": e["BIN"],
           "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "host": platform.node(), "kernel": platform.release(),
           "cpus": len(os.sched_getaffinity(0)), "batch": int(e["BATCH"])}, open(sys.argv[1], "w"))
EOF
if [ -z "$BIN" ] || [ ! -x "$(prog test_pool)" ]; then
  record binaries FAIL 0 0 0 "no carry set: run \`make device-carry\` here and carry build-carry/carry.tar.xz"
  $REPORT print
  exit 1
fi
if ! version=$("$(prog fusionflow)" --version 2>&1); then # a library or glibc the machine lacks
  record binaries FAIL $((SECONDS - START)) 0 0 "the carried programs do not run here: $(echo "$version" | tail -n 1 | cut -c1-90)"
  $REPORT print
  exit 1
fi
record binaries PASS $((SECONDS - START)) 0 0 "$version; $CARRY_NOTE"

# The image set: the same JPEGs on any machine (make_images, seed 1); 512 of
# ImageNet's sizes on a GPU (two batches of 256), 48 in the dry run.
images() { "$(prog make_images)" "$DATA" "$( ((DRY)) && echo 48 || echo 512)" 1; }
export -f images
step images 30 --always images

# ------------------------------------------------------------ the steps

gpu() {
  command -v nvidia-smi >/dev/null || { echo "no nvidia-smi"; exit 77; }
  local q
  q=$(nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv,noheader) || exit 1
  echo "$q"
  python3 - "$q" "$(uname -r)" <<'EOF' >"$FIG"
import json, sys
name, total, used, driver = [x.strip() for x in sys.argv[1].splitlines()[0].split(",")]
kernel = sys.argv[2]
print(json.dumps({"name": name, "memory_total": total, "memory_used": used, "driver": driver, "kernel": kernel,
                  "runtime": "gVisor" if kernel.startswith("4.4.0") else "firecracker" if "fc" in kernel else "?"}))
EOF
  echo "$q, kernel $(uname -r)"
}

# Every kernel's registers, spills and occupancy (the carry build's ptxas -v).
ptxas() {
  [ -f "$BIN/ptxas.json" ] || { echo "no ptxas.json in $BIN (tests/device/prepare.sh makes it)"; exit 77; }
  cp "$BIN/ptxas.json" "$FIG"
  python3 "$ROOT/tests/device/ptxas.py" --print "$BIN/ptxas.json"
}

# Every op and policy as microbatches on emu:0 and on the device, byte for
# byte against the CPU (the ops on the CPU's decoded images: no device
# decode); on a GPU the cuda:0 case must have run.
bit_identity() {
  "$(prog test_device)" || exit 1
  if ((!DRY)) && grep -q "SKIPPED \] every_op_and_policy_on_cuda" "$LOGS/bit_identity.log"; then
    echo "the cuda:0 comparison was skipped: no usable GPU"
    exit 1
  fi
  echo "every op and policy bit-identical on $( ((DRY)) && echo emu:0 || echo "emu:0 and cuda:0") (device decode off)"
}

# Mixup/CutMix on the device batch against the CPU-mixed batches, byte for byte.
batch_mix() {
  "$(prog test_batch_mix)" || exit 1
  if ((!DRY)) && grep -q "SKIPPED \] cuda_mixed_batches" "$LOGS/batch_mix.log"; then
    echo "the cuda:0 comparison was skipped: no usable GPU"
    exit 1
  fi
  echo "mixup_cutmix on the device batch bit-identical on $( ((DRY)) && echo emu:0 || echo "emu:0 and cuda:0") (device decode off)"
}

# Bit identity of every pipeline at 224x224, the stages alone, the pool.
device_check() { "$(prog device_check)" "$DEVICE" "$( ((DRY)) && echo 4 || echo "$BATCH")" --json "$FIG"; }

memcheck() {
  local cs
  cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  [ -x "$cs" ] || { echo "no compute-sanitizer on this machine"; exit 77; }
  "$cs" --tool memcheck --error-exitcode 1 --leak-check no "$(prog device_check)" "$DEVICE" 16 >"$SCRATCH/memcheck.out" 2>&1
  local rc=$?
  cat "$SCRATCH/memcheck.out"
  if grep -q "Device not supported\|error 999\|cudaErrorUnknown" "$SCRATCH/memcheck.out" && ((rc)); then
    echo "compute-sanitizer refuses this machine ($(uname -r): gVisor refuses it)"
    exit 77
  fi
  grep "ERROR SUMMARY" "$SCRATCH/memcheck.out" | tail -n 1
  exit $rc
}

# FF_PYTHON_PRELOAD: what the Python must load first (a sanitizer build's runtime).
with_python() {
  if [ -n "${FF_PYTHON_PRELOAD:-}" ]; then export LD_PRELOAD=$FF_PYTHON_PRELOAD ASAN_OPTIONS=detect_leaks=0; fi
  PYTHONPATH=$BIN/python${PYTHONPATH:+:$PYTHONPATH} "$FF_PYTHON" "$@"
}
export -f with_python
dlpack_torch() { with_python "$ROOT/tests/device/dlpack_check.py" "$DEVICE" "$DATA" --json "$FIG"; }

# nvJPEG (loaded by path: FF_NVJPEG_LIBRARY, nothing on LD_LIBRARY_PATH).
nvjpeg_env() { [ -f "$BIN/nvjpeg/libnvjpeg.so.13" ] && export FF_NVJPEG_LIBRARY=$BIN/nvjpeg/libnvjpeg.so.13; true; }
export -f nvjpeg_env
nvjpeg() {
  nvjpeg_env
  with_python "$ROOT/tests/device/loader_bench.py" nvjpeg "$DEVICE" "$DATA" --cli "$(prog fusionflow)" \
    --batch "$( ((DRY)) && echo 16 || echo "$BATCH")" --json "$FIG"
}
e2e() {
  nvjpeg_env
  with_python "$ROOT/tests/device/loader_bench.py" e2e "$DEVICE" "$DATA" --cli "$(prog fusionflow)" \
    $( ((DRY)) && echo "--batch 8 --batches 2" || echo "--batch $BATCH --batches 8") --json "$FIG"
}

trainer() { # THREADS
  nvjpeg_env
  "$(prog trainer_standin)" --threads "$1" --step-ms 20 --data "$DATA" --json "$FIG"
}
trainer_1() { trainer 1; }
trainer_2() { trainer 2; }
export -f trainer

# Batch $BATCH x 4 on a GPU; 8 x 2 on emu (the emulator's memcpy, not PCIe).
transport() {
  if ((DRY)); then "$(prog transport)" "$DEVICE" 8 2; else "$(prog transport)" "$DEVICE" "$BATCH" 4; fi
}
# The unit tests whose cuda:0 cases run on a GPU (test_offload's nvJPEG case on the image set;
# it skips where nvJPEG does not load, which the nvjpeg step reports). Not in the dry run:
# its emu cases are ctest's test_offload.
offload() {
  nvjpeg_env
  FF_DEMO_DATA=$DATA "$(prog test_offload)" || exit 1
  if ((!DRY)) && grep -q "SKIPPED \] fast_consumer_waits_less_with_cuda" "$LOGS/offload.log"; then
    echo "the cuda:0 cases were skipped: no usable GPU"
    exit 1
  fi
  grep -h "vs libjpeg-turbo" "$LOGS/offload.log" | tail -n 1
  echo "test_offload passed$( ((DRY)) || echo ", its cuda:0 cases included")"
}
pool() { "$(prog test_pool)"; }

# The node benchmark as CPU-only processes (bench/node.py) on the machine's cores; not in the
# dry run (it would take half its time here; ctest's test_node covers the coordinator).
node_bench() {
  ((DRY)) && { echo "CPU-only benchmark: not in the dry run"; exit 77; }
  python3 "$ROOT/bench/node.py" --bin "$(dirname "$(prog node_member)")" --data "$DATA" --seconds 2 --json >"$FIG" &&
    python3 "$ROOT/bench/node.py" --print "$FIG"
}
export -f gpu ptxas bit_identity batch_mix device_check memcheck dlpack_torch nvjpeg e2e trainer_1 trainer_2 \
  transport offload pool node_bench

step gpu 15 --cuda gpu
step ptxas 10 ptxas
step bit_identity 60 bit_identity
step device_check 60 device_check
step dlpack_torch 60 dlpack_torch
step nvjpeg 60 nvjpeg
step e2e 60 e2e
step trainer_1 60 --cuda trainer_1
step trainer_2 45 --cuda trainer_2
step batch_mix 30 batch_mix
step transport 30 transport
step offload 60 --cuda offload
step pool 20 pool
step memcheck 90 --cuda --optional memcheck
step node_bench 90 --optional node_bench

record total "$( ((failed)) && echo FAIL || echo PASS)" $((SECONDS - START)) "$DEADLINE_S" 0 \
  "$( ((cut)) && echo "$cut step(s) not run for lack of time (DEADLINE_S=$DEADLINE_S; --only reruns them); ")$OUT: summary.txt results.json logs.tar.gz"
echo
$REPORT print
rm -rf "$SCRATCH"
exit "$failed"
