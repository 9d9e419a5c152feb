#!/usr/bin/env python3
"""report.py — tests/device/run.sh's results: what comes back from the device
machine, and the text that ends its output.

    report.py --scratch DIR write --out OUT [--elapsed S]
    report.py --scratch DIR print

DIR is run.sh's scratch folder: meta.json, steps.tsv (a line per step: name,
result, seconds, budget, optional, note), figures/STEP.json (what a step
measured), logs/STEP.log. `write` (after every step) replaces OUT's three
files: summary.txt, results.json (one object per step, its figures, or the
last lines of its log when it wrote none; then the key figures) and
logs.tar.gz (every log, each cut to its last 2 MiB so that the archive stays
far under the 16 MiB a file may have). `print` writes the summary table and
the key figures to stdout: the end of run.sh's output, so that the last
12,000 characters answer even if no file comes back. Standard library only.
A figure a build does not report is "n/a"; goals are reported, not asserted.
"""
import argparse
import io
import json
import os
import re
import sys
import tarfile

LOG_TAIL_BYTES = 2 << 20
KERNEL_GOAL = 50000
E2E_GOAL = 0.7


def load(scratch):
    meta = json.load(open(os.path.join(scratch, "meta.json"))) if os.path.exists(
        os.path.join(scratch, "meta.json")) else {}
    steps = []
    for line in open(os.path.join(scratch, "steps.tsv")):
        f = line.rstrip("\n").split("\t")
        if len(f) < 6:
            continue
        name, result, secs, budget, optional, note = f[:6]
        step = {"step": name, "result": result, "secs": int(secs or 0), "budget_s": int(budget or 0),
                "optional": optional == "1", "note": note, "figures": None}
        fig = os.path.join(scratch, "figures", name + ".json")
        log = os.path.join(scratch, "logs", name + ".log")
        if os.path.exists(fig):
            try:
                step["figures"] = json.load(open(fig))
            except ValueError as e:
                step["figures_error"] = "unreadable figures: %s" % e
        if name == "binaries":
            manifest = os.path.join(meta.get("bin", ""), "MANIFEST.txt")
            step["figures"] = {"bin": meta.get("bin"), "carry": meta.get("carry"),
                               "manifest": open(manifest).read().splitlines()[:8] if os.path.isfile(manifest) else None}
        if step["figures"] is None and name == "transport" and os.path.exists(log):
            step["figures"] = transport_figures(open(log, errors="replace").read())
        if step["figures"] is None and os.path.exists(log):
            lines = [x for x in open(log, errors="replace").read().splitlines() if x.strip()]
            step["lines"] = [x[:200] for x in lines[-20:]]
        steps.append(step)
    return meta, steps


def transport_figures(text):
    """transport's "label key value ..." lines as {label: {key: value}}."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"upload_gbs_(\w+) ([\d.]+)", line)
        if m:
            out.setdefault("upload_gb_per_s", {})[m.group(1)] = float(m.group(2))
            continue
        parts = line.split()
        if len(parts) >= 3 and len(parts) % 2 == 1 and parts[0].startswith(("host_", "device_")):
            try:
                out[parts[0]] = {parts[i]: float(parts[i + 1]) for i in range(1, len(parts), 2)}
            except ValueError:
                pass
    return out or None


def by_name(steps):
    return {s["step"]: s for s in steps}


def fig(steps, name, *path, default="n/a"):
    """A figure of a step by its path of keys and indexes, or default."""
    x = by_name(steps).get(name, {}).get("figures")
    for p in path:
        try:
            x = x[p]
        except (KeyError, IndexError, TypeError):
            return default
    return default if x is None else x


def num(x, fmt="%.0f"):
    return fmt % x if isinstance(x, (int, float)) and not isinstance(x, bool) else "n/a"


def key_figures(meta, steps):
    """The Benchmark's figures, computed from the steps' own: a dict, and its lines of text."""
    s = by_name(steps)
    k, lines = {}, []
    res = lambda n: s[n]["result"] if n in s else "not run"

    # bit identity, every one with device decode off
    pipes = fig(steps, "device_check", "pipelines", default=[])
    same = sum(1 for p in pipes if p.get("bit_identical"))
    k["bit_identity"] = {"device_decode": "off", "test_device": res("bit_identity"),
                         "device_check_pipelines": "%d/%d" % (same, len(pipes)),
                         "device_input": fig(steps, "device_check", "stages", "kernels_bit_identical"),
                         "batch_mix": res("batch_mix"), "dlpack_torch": res("dlpack_torch")}
    lines.append("bit identity (device decode off): test_device %s; device_check %s pipelines, device input %s; "
                 "batch_mix %s; DLPack %s" % (res("bit_identity"), k["bit_identity"]["device_check_pipelines"],
                                              {True: "ok", False: "DIFFERS"}.get(k["bit_identity"]["device_input"],
                                                                                 "n/a"),
                                              res("batch_mix"), res("dlpack_torch")))
    k["memcheck"] = {"result": res("memcheck"), "note": s.get("memcheck", {}).get("note", "")}
    lines.append("memcheck: %s %s" % (res("memcheck"), k["memcheck"]["note"][:90]))
    runs = fig(steps, "dlpack_torch", "runs", default=[])
    k["dlpack"] = {"torch": fig(steps, "dlpack_torch", "torch"), "runs": runs}
    lines.append("DLPack into torch %s: %s" % (k["dlpack"]["torch"], "; ".join(
        "%s %s batches %s (%s; decoders %s)" % (r.get("name"), r.get("batches"), "equal" if r.get("equal") else "DIFFER",
                                                "/".join(r.get("kinds", [])), r.get("decoders", "n/a")) for r in runs)
        or "n/a"))

    # nvJPEG
    backs = fig(steps, "nvjpeg", "backends", default=[])
    k["nvjpeg"] = []
    parts = []
    for b in backs:
        t = b.get("throughput", {})
        row = {"backend": b.get("backend"), "decoder": b.get("decoder", "n/a"), "psnr_db": b.get("psnr_db", "n/a"),
               "mean_abs_diff": b.get("mean_abs_diff", "n/a"), "max_abs_diff": b.get("max_abs_diff", "n/a"),
               "device_images_per_s": t.get("device_images_per_s", "n/a"),
               "end_to_end_images_per_s": t.get("images_per_s", "n/a"), "error": b.get("error")}
        k["nvjpeg"].append(row)
        parts.append("%s (%s) %s images/s end to end (%s by device time), PSNR %s dB" % (
            row["backend"], row["decoder"], num(row["end_to_end_images_per_s"]), num(row["device_images_per_s"]),
            num(row["psnr_db"], "%.1f")) if not row["error"] else "%s: %s" % (row["backend"], row["error"][:60]))
    lines.append("nvJPEG batch %s vs libjpeg-turbo (bound PSNR > %s dB): %s" % (
        fig(steps, "nvjpeg", "batch"), num(fig(steps, "nvjpeg", "psnr_bound_db")), "; ".join(parts) or "n/a"))

    # each stage alone, and the loader end to end beside them
    st = fig(steps, "device_check", "stages", default={})
    # The decode stage alone: the decode-only run's end-to-end rate (the decoder bounds it) of the
    # backend the loader chose in the e2e runs, else the faster one.
    decoded = [r for r in k["nvjpeg"] if isinstance(r["end_to_end_images_per_s"], (int, float)) and
               r["end_to_end_images_per_s"] > 0 and "nvjpeg" in str(r["decoder"])]
    e2e = {r.get("name"): r for r in fig(steps, "e2e", "runs", default=[])}
    used = e2e.get("device, host output", {}).get("device_decoder")  # the backend the loader chose
    decode = next((r for r in decoded if used and used in str(r["decoder"])), None) or (
        max(decoded, key=lambda r: r["end_to_end_images_per_s"]) if decoded else None)
    stages = {"decode": decode["end_to_end_images_per_s"] if decode else "n/a",
              "decode_by": decode["decoder"] if decode else "n/a",
              "upload": st.get("upload_images_per_s", "n/a"), "kernels": st.get("kernels_images_per_s", "n/a"),
              "upload_kernels": st.get("upload_kernels_images_per_s", "n/a"),
              "download": st.get("download_images_per_s", "n/a"),
              "cpu_decode": (e2e.get("split, host output", {}).get("same_region_decode") or {}).get(
                  "limit_images_per_s", "n/a")}
    kern = stages["kernels"]
    stages["kernels_goal"] = KERNEL_GOAL
    stages["kernels_goal_met"] = kern >= KERNEL_GOAL if isinstance(kern, (int, float)) else "n/a"
    k["stages_alone"] = stages
    lines.append("stages alone, RandAugment 224x224 batch %s, images/s: decode %s (%s; CPU decode %s on %s threads), "
                 "upload %s, kernels %s (goal >= %d: %s), download %s; upload+kernels %s" % (
                     fig(steps, "device_check", "batch"), num(stages["decode"]), stages["decode_by"],
                     num(stages["cpu_decode"]), e2e.get("split, host output", {}).get("threads", "n/a"),
                     num(stages["upload"]), num(kern), KERNEL_GOAL,
                     {True: "met", False: "not met"}.get(stages["kernels_goal_met"], "n/a"),
                     num(stages["download"]), num(stages["upload_kernels"])))
    k["end_to_end"] = {"upload_kernels_alone": stages["upload_kernels"]}
    parts = []
    for name, need in (("device, host output", ("decode", "kernels", "download")),
                       ("device, device output", ("decode", "kernels")),
                       ("split, host output", ("cpu_decode", "upload", "kernels", "download")),
                       ("split, device output", ("cpu_decode", "upload", "kernels"))):
        r = e2e.get(name, {})
        rate = r.get("images_per_s", "n/a")
        alone = [stages[n] for n in need if isinstance(stages[n], (int, float)) and stages[n] > 0]
        slowest = min(alone) if len(alone) == len(need) else "n/a"
        ratio = rate / slowest if isinstance(rate, (int, float)) and isinstance(slowest, (int, float)) else "n/a"
        k["end_to_end"][name] = {"images_per_s": rate, "decoders": r.get("decoders", r.get("device_decoder", "n/a")),
                                 "slowest_stage_alone": slowest, "stages": list(need),
                                 "ratio": round(ratio, 3) if ratio != "n/a" else "n/a",
                                 "goal_met": ratio >= E2E_GOAL if ratio != "n/a" else "n/a"}
        parts.append("%s %s (%s; %sx its slowest stage alone)" % (
            name, num(rate), r.get("decoders", r.get("device_decoder", "n/a")), num(ratio, "%.2f")))
    cpu = e2e.get("cpu", {}).get("images_per_s", "n/a")
    k["end_to_end"]["cpu"] = cpu
    lines.append("loader end to end, images/s (goal >= %.1fx the slowest stage alone; NOT the upload+kernels %s "
                 "above): %s; CPU alone %s" % (E2E_GOAL, num(stages["upload_kernels"]), "; ".join(parts), num(cpu)))

    # the trainer stand-in
    k["trainer"] = {}
    for t in ("trainer_1", "trainer_2"):
        runs = fig(steps, t, "runs", default=[])
        k["trainer"][t] = runs
        if not runs:
            lines.append("trainer stand-in %s: %s" % (t.split("_")[1] + " thread(s)", res(t)))
            continue
        stalls = fig(steps, t, "cpu_stalls")
        parts = ["%s removes %.0f%% of cpu's stall at %+.1f%% step (%s; %s)" % (
            r["placement"], 100 * r["stall_removed"], 100 * r["slowdown"], r.get("decoders", r.get("decoder", "n/a")),
            "goal met" if r["goal_met"] else "not met") for r in runs[1:]]
        lines.append("trainer stand-in, %s CPU thread(s), %.1f ms step: cpu stalls %.0f%%%s; %s" % (
            fig(steps, t, "threads"), fig(steps, t, "step_ms_alone", default=0), 100 * runs[0]["stall"],
            "" if stalls else " (no stall: goal not applicable)", "; ".join(parts)))
    kernels = fig(steps, "ptxas", "kernels", default=[])
    k["ptxas"] = kernels
    # One line for any number of kernels (each kernel's figures: results.json's key_figures.ptxas).
    if kernels:
        low = min(kernels, key=lambda x: x["occupancy"])
        regs = [x["registers"] for x in kernels]
        lines.append("ptxas sm_90: %d kernels, %d-%d registers, %d B spilled in all, occupancy %.0f-%.0f%% "
                     "(lowest: %s, %d registers, %d threads, limited by %s)" % (
                         len(kernels), min(regs), max(regs),
                         sum(x["spill_store_bytes"] + x["spill_load_bytes"] for x in kernels),
                         100 * low["occupancy"], 100 * max(x["occupancy"] for x in kernels), low["name"],
                         low["registers"], low["block"], low["limiter"]))
    else:
        lines.append("ptxas sm_90: n/a")
    return k, lines


def summary_lines(meta, steps):
    out = ["%-14s %-8s %5s  %s" % ("step", "result", "secs", "note")]
    for s in steps:
        out.append("%-14s %-8s %5s  %s" % (s["step"], s["result"], s["secs"], s["note"]))
    return out


def write(args, meta, steps):
    out = args.out
    total = next((s for s in steps if s["step"] == "total"), None)
    k, _ = key_figures(meta, steps)
    doc = dict(meta, elapsed_s=args.elapsed, result=total["result"] if total else "running",
               steps=[s for s in steps if s["step"] != "total"], key_figures=k)
    tmp = os.path.join(out, ".results.json.part")
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(tmp, os.path.join(out, "results.json"))
    head = "fusionflow device check on %s (%s), %s s of %s%s" % (
        meta.get("device"), "dry run" if meta.get("dry_run") else meta.get("host", ""), args.elapsed,
        meta.get("deadline_s"), ", only " + ",".join(meta["only"]) if meta.get("only") else "")
    with open(os.path.join(out, ".summary.txt.part"), "w") as f:
        f.write("\n".join([head, meta.get("carry", "")] + summary_lines(meta, steps)) + "\n")
    os.replace(os.path.join(out, ".summary.txt.part"), os.path.join(out, "summary.txt"))
    logs = os.path.join(args.scratch, "logs")
    tmp = os.path.join(out, ".logs.tar.gz.part")
    with tarfile.open(tmp, "w:gz") as tar:
        for name in sorted(os.listdir(logs)):
            data = open(os.path.join(logs, name), "rb").read()
            if len(data) > LOG_TAIL_BYTES:
                data = b"[... cut: the last 2 MiB follow]\n" + data[-LOG_TAIL_BYTES:]
            info = tarfile.TarInfo("logs/" + name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    os.replace(tmp, os.path.join(out, "logs.tar.gz"))


def show(meta, steps):
    _, lines = key_figures(meta, steps)
    total = next((s for s in steps if s["step"] == "total"), None)
    print("== fusionflow device check on %s: %s in %s s (deadline %s s)%s" % (
        meta.get("device"), total["result"] if total else "unfinished", total["secs"] if total else "?",
        meta.get("deadline_s"), " [dry run]" if meta.get("dry_run") else ""))
    print(meta.get("carry", ""))
    print("\n".join(summary_lines(meta, [s for s in steps if s["step"] != "total"])))
    print("== key figures (every figure: results.json; goals are reported, not asserted)")
    print("\n".join(lines))
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scratch", required=True)
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write")
    w.add_argument("--out", required=True)
    w.add_argument("--elapsed", type=int, default=0)
    sub.add_parser("print")
    args = ap.parse_args()
    meta, steps = load(args.scratch)
    if args.cmd == "write":
        write(args, meta, steps)
    else:
        show(meta, steps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
