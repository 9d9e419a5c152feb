#!/usr/bin/env bash
# Runs every fuzz target of a FF_FUZZ build for SECONDS each, one after the
# other: the corpus grows in BUILD/fuzz-corpus/<target> (kept between runs),
# starting from the seeds; a crash, leak, timeout (10 s an input) or RSS past
# 2 GB is saved as BUILD/fuzz-crashes/<target>-* and fails the run.
# Usage: tests/fuzz/run.sh BUILD SECONDS
set -uo pipefail
build=$1 seconds=$2
mkdir -p "$build/fuzz-crashes"
failed=()
for bin in "$build"/tests/fuzz/fuzz_*; do
  [[ -x $bin && -f $bin ]] || continue
  name=$(basename "$bin")
  corpus=$build/fuzz-corpus/$name
  mkdir -p "$corpus"
  echo "== $name: $seconds s"
  if ! "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$build/fuzz-crashes/$name-" "$corpus" "$build/fuzz-seeds/$name" \
      >"$build/fuzz-crashes/$name.log" 2>&1; then
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
