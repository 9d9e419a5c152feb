#!/usr/bin/env python3
"""How many CPUs per GPU remove the stall of an 8-GPU node with remote workers: measures
each policy's CPU cost per sample here with `fusionflow bench`, then asks `fusionflow sim
--capacity` for (a) local CPU + remote workers and (b) local CPU + the local GPU + remote
workers, and prints one table with every input and its source.

    make build demo-data
    python3 bench/sim_remote.py --data build/demo-data --rounds 3 [--local-cores 8,16] [--gpu-ms 0.05,0.02] [--json]

Policies (decode | random_resized_crop(size=224) | random_horizontal_flip | POLICY |
normalize): RandAugment as timm's rand-m9-mstd0.5, AutoAugment's ImageNet policy, and
DeepAutoAugment's shape (bench/policies/deepaa_shape.json: 5 layers of the 15 image ops at
13 levels, uniform, not the authors' learned probabilities).

The CPU cost of a sample is the worker thread's own CPU time (`cpu_us_per_image` of `bench
--json`, one thread), which other processes on a shared machine do not inflate; its split
into read, decode and ops (what the device placement leaves on the CPU) is the wall-time
split of the same run. Median over --rounds runs taken in turn. The trainer's step, the GPU's
preprocessing cost, the link and the node's cores are assumptions, printed as such. Each
policy also gets `sim --plan` (local cores only: cpu-only, and with the GPU) as the baseline.
A cell reads "local + remote = CPUs per GPU (the GPU's and the remote share of the samples)",
or "never" with the loss at --capacity-max remote CPUs per GPU.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
POLICIES = {
    "RandAugment": 'timm_rand_augment(config="rand-m9-mstd0.5")',
    "AutoAugment": "auto_augment(policy=imagenet)",
    "DeepAutoAugment shape": 'policy_file(path="%s")' % os.path.join(HERE, "policies", "deepaa_shape.json"),
}
PIPELINE = ("decode | random_resized_crop(size=224) | random_horizontal_flip | {policy}"
            " | normalize(mean=imagenet, std=imagenet)")


def machine():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        name = [l.split(":", 1)[1].strip() for l in out.splitlines() if l.startswith("Model name")][0]
        return "%d-core %s (%s)" % (os.cpu_count(), name, platform.machine())
    except (OSError, IndexError):
        return "%d-core %s" % (os.cpu_count(), platform.machine())


def measure(args, policy):
    """Returns (median CPU ms per sample, [per round], the wall split of the median round)."""
    runs = []
    for _ in range(args.rounds):
        cmd = [args.cli, "bench", "--source", "imagefolder:" + args.data, "--pipeline",
               PIPELINE.format(policy=policy), "--threads", "1", "--batch-size", "64",
               "--warmup", str(args.warmup), "--batches", str(args.batches), "--json"]
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode:
            sys.exit("bench failed: %s\n%s" % (" ".join(cmd), res.stderr))
        runs.append(json.loads(res.stdout))
    cpu = [r["same_region_decode"]["cpu_us_per_image"] * 1e-3 for r in runs]
    med = sorted(range(len(runs)), key=lambda i: cpu[i])[len(runs) // 2]
    return cpu[med], cpu, runs[med]


def sim(args, profile_path, mode, local_cores, gpu_ms, source):
    cmd = [args.cli, "sim", mode, "--json", "--profile", profile_path, "--placement", "device",
           "--gpus", str(args.gpus), "--cores", str(local_cores), "--step-ms", str(args.step_ms),
           "--batch-size", str(args.train_batch), "--gpu-ms-per-sample", str(gpu_ms),
           "--gpu-decode-ms-per-sample", str(args.gpu_decode_ms), "--cpu-cv", str(args.cpu_cv)]
    if mode == "--plan":
        cmd += ["--plan-max-cores", str(args.capacity_max)]
    else:
        cmd += ["--remote-bandwidth", str(args.bandwidth), "--remote-latency-ms", str(args.latency_ms),
                "--capacity-max", str(args.capacity_max),
                "--input-source", "remote_bandwidth=assumed: %g Gb/s" % (args.bandwidth * 8e-9),
                "--input-source", "remote_latency_ms=assumed",
                "--input-source", "gpus=assumed: an 8-GPU node",
                "--input-source", "local_cores=assumed: the node's cores",
                "--input-source", "step_ms=assumed: %s" % args.step_note,
                "--input-source", "batch_size=assumed: %s" % args.step_note]
    cmd += ["--input-source", "cpu_ms_per_sample=" + source,
           "--input-source", "cpu_cv=assumed (the profile gives the mean only)",
            "--input-source", "gpu_ms_per_sample=assumed: no GPU measured (the emulated device runs on the CPU)",
            "--input-source", "gpu_decode_ms_per_sample=assumed: the JPEG engines, not measured"]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode:
        sys.exit("sim failed: %s\n%s" % (" ".join(cmd), res.stderr))
    return cmd, json.loads(res.stdout)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--cli", default="build/fusionflow")
    p.add_argument("--data", default="build/demo-data", help="ImageFolder of JPEGs")
    p.add_argument("--rounds", type=int, default=3, help="bench runs per policy, taken in turn")
    p.add_argument("--batches", type=int, default=12, help="timed batches of 64 per bench run")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--gpus", type=int, default=8)
    p.add_argument("--local-cores", default="8,16", help="the node's cores, one sim per value")
    p.add_argument("--step-ms", type=float, default=85.3)
    p.add_argument("--train-batch", type=int, default=256)
    p.add_argument("--step-note", default="ResNet-50 on an H100, batch 256 at 3,000 images/s")
    p.add_argument("--gpu-ms", default="0.05,0.02", help="GPU time of a sample's ops, one sim per value")
    p.add_argument("--gpu-decode-ms", type=float, default=0.25, help="GPU time of a sample's decode (engines)")
    p.add_argument("--cpu-cv", type=float, default=0.3)
    p.add_argument("--bandwidth", type=float, default=1.25e10, help="bytes/s of the node's link")
    p.add_argument("--latency-ms", type=float, default=0.5)
    p.add_argument("--capacity-max", type=int, default=64)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)

    where = machine()
    tmp = tempfile.mkdtemp(prefix="ff-sim-remote-")
    gpu_list = [float(g) for g in args.gpu_ms.split(",")]
    core_list = [int(c) for c in args.local_cores.split(",")]
    rows, inputs = [], None
    costs = {name: measure(args, policy) for name, policy in POLICIES.items()}
    for name, (cpu_ms, cpu_all, run) in costs.items():
        work = run["read_s"] + run["decode_s"] + run["ops_s"]
        k = cpu_ms * 1e-3 * run["samples"] / work  # the wall split scaled to the thread CPU time
        profile = os.path.join(tmp, name.split()[0] + ".json")
        with open(profile, "w") as f:
            json.dump({"samples": run["samples"], "read_s": run["read_s"] * k, "decode_s": run["decode_s"] * k,
                       "ops_s": run["ops_s"] * k, "threads": 1}, f)
        source = "measured by fusionflow bench --threads 1 on %s: thread CPU time, median of %d (%s ms)" % (
            where, args.rounds, ", ".join("%.3f" % c for c in cpu_all))
        row = {"policy": name, "cpu_ms": cpu_ms, "cpu_ms_runs": cpu_all, "plan": {}, "a": {}, "b": {}}
        for g in gpu_list:
            _, plan = sim(args, profile, "--plan", 8, g, source)
            row["plan"]["cpu-only"] = plan["cpu_only_cores_per_gpu"]
            row["plan"]["gpu %g" % g] = plan["ours_cores_per_gpu"]
            for cores in core_list:
                _, out = sim(args, profile, "--capacity", cores, g, source)
                inputs = inputs or out["inputs"]
                local = out["local_cores_per_gpu"]
                for key, label, strat in (("cpu_only_remote_cpus_per_gpu", "a", "cpu-only+remote"),
                                          ("ours_remote_cpus_per_gpu", "b", "ours+remote")):
                    need = out[key]
                    at = out["rows"][need if need >= 0 else -1].get(strat, {})
                    cell = {"local": local, "remote": need, "at": at}
                    row[label]["%g local" % local + ("" if label == "a" else ", gpu %g" % g)] = cell
        rows.append(row)
    if args.json:
        print(json.dumps({"machine": where, "inputs": inputs, "rows": rows}, indent=1))
        return
    print("machine: %s; the sim's inputs (the CPU cost, the node's cores and the GPU cost vary by column):" % where)
    for k, v in inputs.items():
        print("  %-26s %10.4g  %s" % (k, v["value"], v["source"]))

    def cell(c):
        at = c["at"]
        gpu = "GPU %.0f%%, " % (100 * at["device_share"]) if at.get("strategy", "").startswith("ours") else ""
        if c["remote"] < 0:
            return "never (%sloss %.1f%%)" % (gpu, 100 * at["loss"])
        return "%g + %d = **%g** (%sremote %.0f%%)" % (c["local"], c["remote"], c["local"] + c["remote"], gpu,
                                                       100 * at["remote_share"])
    keys_a, keys_b = list(rows[0]["a"]), list(rows[0]["b"])
    plans = list(rows[0]["plan"])
    print("\n| policy | CPU ms/sample | local only: %s | %s | %s |" % (
        " / ".join(plans), " | ".join("(a) " + k for k in keys_a), " | ".join("(b) " + k for k in keys_b)))
    print("|---" * (3 + len(keys_a) + len(keys_b)) + "|")
    for r in rows:
        print("| %s | %.3f (%.3f–%.3f) | %s | %s | %s |" % (
            r["policy"], r["cpu_ms"], min(r["cpu_ms_runs"]), max(r["cpu_ms_runs"]),
            " / ".join(str(r["plan"][k]) for k in plans), " | ".join(cell(r["a"][k]) for k in keys_a),
            " | ".join(cell(r["b"][k]) for k in keys_b)))


if __name__ == "__main__":
    main()
