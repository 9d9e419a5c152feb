#!/usr/bin/env bash
# dry_run.sh OUT — ctest device_run_dry: tests/device/run.sh emu:0 with $OUT = OUT
# (emptied first), then what the device machine lets come back, asserted:
#   - run.sh exits 0; every step that needs no CUDA passed, the CUDA ones are
#     SKIP with the reason;
#   - OUT holds exactly summary.txt, results.json and logs.tar.gz (the machine
#     returns at most 8 files), nothing deeper than OUT/a/b/file, names of
#     letters, digits, '.', '_' and '-', each file under 16 MiB, all under 64;
#   - results.json has one object per step (result, seconds, figures or the
#     log's last lines) and the key figures; logs.tar.gz holds every step's log;
#   - the last 12,000 characters of the output (all the machine returns as
#     text) hold the whole summary table and every key-figure line;
#   - `run.sh --only pool` runs that step alone (and what it needs);
#   - no scratch folder is left in TMPDIR.
# The programs: FF_DEVICE_CARRY (an archive, as on the device) or FF_DEVICE_BIN.
set -euo pipefail
OUT=$(mkdir -p "$1" && cd "$1" && pwd)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
fail() { echo "dry run: $*" >&2; exit 1; }
rm -rf "${OUT:?}"/* "$OUT"/.[!.]* 2>/dev/null || true
export TMPDIR=$OUT.tmp
rm -rf "$TMPDIR" && mkdir -p "$TMPDIR"
log=$TMPDIR.log
t0=$SECONDS
OUT=$OUT "$ROOT/tests/device/run.sh" emu:0 >"$log" 2>&1 || { cat "$log"; fail "run.sh emu:0 failed"; }
cat "$log"
echo "dry run: run.sh emu:0 took $((SECONDS - t0)) s"

files=$(cd "$OUT" && find . -mindepth 1 | sed 's|^\./||' | sort)
[ "$files" = $'logs.tar.gz\nresults.json\nsummary.txt' ] || fail "OUT holds $(echo "$files" | tr '\n' ' ')"
find "$OUT" -mindepth 3 | grep -q . && fail "something in OUT is deeper than OUT/a/b/file"
find "$OUT" -mindepth 1 | sed "s|^$OUT/||" | tr '/' '\n' | grep -v '^[A-Za-z0-9._-]*$' && fail "a name in OUT has other characters"
total=0
for f in "$OUT"/*; do
  size=$(stat -c %s "$f")
  ((size < 16 << 20)) || fail "$f is $size bytes: over 16 MiB"
  total=$((total + size))
done
((total < 64 << 20)) || fail "OUT holds $total bytes: over 64 MiB"

python3 - "$OUT" "$log" <<'EOF' || fail "results.json, logs.tar.gz or the output's tail is not as it should be"
import json, os, sys, tarfile
out, log = sys.argv[1], sys.argv[2]
r = json.load(open(os.path.join(out, "results.json")))
steps = {s["step"]: s for s in r["steps"]}
assert r["result"] == "PASS" and r["dry_run"] is True, (r["result"], r["dry_run"])
cuda = {"gpu", "trainer_1", "trainer_2", "offload", "memcheck"}
need = {"binaries", "images", "bit_identity", "device_check", "dlpack_torch", "nvjpeg", "e2e", "batch_mix",
        "transport", "pool"}
for name in cuda:
    assert steps[name]["result"] == "SKIP" and "needs CUDA" in steps[name]["note"], steps[name]
for name in need:
    s = steps[name]
    assert s["result"] == "PASS", s
    assert isinstance(s["secs"], int) and (s["figures"] is not None or s.get("lines")), s
for name, keys in {"device_check": ["pipelines", "stages", "pool"], "dlpack_torch": ["runs"],
                   "nvjpeg": ["backends"], "e2e": ["runs"], "transport": ["upload_gb_per_s"]}.items():
    assert all(k in steps[name]["figures"] for k in keys), (name, steps[name]["figures"])
k = r["key_figures"]
for key in ("bit_identity", "memcheck", "dlpack", "nvjpeg", "stages_alone", "end_to_end", "trainer", "ptxas"):
    assert key in k, key
assert k["stages_alone"]["kernels"] > 0 and k["end_to_end"]["device, host output"]["images_per_s"] > 0, k
assert k["nvjpeg"][0]["psnr_db"] > 30, k["nvjpeg"]
with tarfile.open(os.path.join(out, "logs.tar.gz")) as t:
    logs = {os.path.basename(n)[:-4] for n in t.getnames()}
assert need - {"binaries"} <= logs, logs
tail = open(log, errors="replace").read()[-12000:]
assert "== key figures" in tail and tail.rstrip().splitlines()[-1].startswith("ptxas"), tail[-500:]
summary = tail[tail.rindex("== fusionflow device check"):]
for name in need | cuda:
    assert "\n" + name + " " in summary, name
print("dry run: results.json has %d steps and the key figures; the output's tail holds the summary (%d chars)"
      % (len(r["steps"]), len(summary)))
EOF

OUT=$OUT "$ROOT/tests/device/run.sh" --only pool emu:0 >"$log" 2>&1 || { cat "$log"; fail "run.sh --only pool failed"; }
python3 - "$OUT/results.json" <<'EOF' || fail "--only pool ran other steps"
import json, sys
ran = [s["step"] for s in json.load(open(sys.argv[1]))["steps"]]
assert ran == ["binaries", "images", "pool"], ran
EOF
[ -z "$(ls -A "$TMPDIR")" ] || fail "run.sh left $(ls "$TMPDIR") in its TMPDIR"
rm -rf "$TMPDIR" "$log"
echo "dry run: OUT holds the three files ($((total >> 10)) KiB), within the device machine's limits; --only works"
