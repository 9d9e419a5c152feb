#!/usr/bin/env bash
# Runs every fuzz target of a FF_FUZZ build for SECONDS each, JOBS of them at
# a time (default: the number of cores; libFuzzer runs one input at a time,
# so two targets on two cores take the time of one): the corpus grows in
# BUILD/fuzz-corpus/<target> (kept between runs), starting from the seeds; a
# crash, leak, timeout (10 s an input) or RSS past 2 GB is saved as
# BUILD/fuzz-crashes/<target>-* and fails the run. Each target's figures are
# printed when it ends, in the targets' order.
# Usage: tests/fuzz/run.sh BUILD SECONDS [JOBS]
set -uo pipefail
build=$1 seconds=$2 jobs=${3:-$(nproc)}
mkdir -p "$build/fuzz-crashes"

fuzz_one() {  # fuzz_one BIN: runs it, leaves its log and status in fuzz-crashes/
  local bin=$1 name corpus rc=0
  name=$(basename "$bin")
  corpus=$build/fuzz-corpus/$name
  mkdir -p "$corpus"
  "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$build/fuzz-crashes/$name-" "$corpus" "$build/fuzz-seeds/$name" \
    >"$build/fuzz-crashes/$name.log" 2>&1 || rc=$?
  echo "$rc" >"$build/fuzz-crashes/$name.rc"
}

bins=()
for bin in "$build"/tests/fuzz/fuzz_*; do
  [[ -x $bin && -f $bin ]] && bins+=("$bin")
done
echo "fuzz: ${#bins[@]} targets, $seconds s each, $jobs at a time"
running=()
for bin in "${bins[@]}"; do
  while (( ${#running[@]} >= jobs )); do
    wait -n 2>/dev/null || true
    alive=()
    for pid in "${running[@]}"; do kill -0 "$pid" 2>/dev/null && alive+=("$pid"); done
    running=("${alive[@]}")
  done
  rm -f "$build/fuzz-crashes/$(basename "$bin").rc"
  fuzz_one "$bin" &
  running+=($!)
done
wait

failed=()
for bin in "${bins[@]}"; do
  name=$(basename "$bin")
  echo "== $name: $seconds s"
  rc=$(cat "$build/fuzz-crashes/$name.rc" 2>/dev/null || echo "no status")
  if [[ $rc != 0 ]]; then
    failed+=("$name")
    tail -n 60 "$build/fuzz-crashes/$name.log"
  fi
  grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb" "$build/fuzz-crashes/$name.log" | tr '\n' ' '
  echo
done
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "fuzz: failed: ${failed[*]} (inputs in $build/fuzz-crashes)" >&2
  exit 1
fi
