#!/usr/bin/env bash
# Runs one long stage of a make target with its output in a log, and says on
# stderr that it started, how long it has run every 30 s (with the log's last
# progress line: make's "[ 45%] Building C object ...", Ninja's "[12/80] ...",
# also indented as pip -v shows them), and how long it took:
#   scripts/stage.sh NAME LOG COMMAND [ARGS...]
# On failure: the log's last 40 lines, and the command's exit status.
set -uo pipefail
name=$1 log=$2
shift 2
every=${FF_STAGE_EVERY_S:-30}
elapsed() { local s=$((SECONDS - start)); ((s >= 60)) && printf '%dm%02ds' $((s / 60)) $((s % 60)) || printf '%d s' "$s"; }
start=$SECONDS
mkdir -p "$(dirname "$log")"
echo "$name: started (log: $log)" >&2
"$@" >"$log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null; exit 130' INT TERM
next=$every
while kill -0 "$pid" 2>/dev/null; do
  sleep 0.2
  if ((SECONDS - start >= next)); then
    next=$((next + every))
    last=$(grep -E '^ *\[ *[0-9]+(%|/[0-9]+)\]' "$log" 2>/dev/null | tail -1 | sed 's/^ *//' | cut -c1-90)
    echo "$name: $(elapsed)${last:+, $last}" >&2
  fi
done
wait "$pid"
rc=$?
trap - INT TERM
if ((rc)); then
  tail -40 "$log" >&2
  echo "$name: failed after $(elapsed) (exit status $rc; log: $log)" >&2
  exit "$rc"
fi
echo "$name: done in $(elapsed)" >&2
