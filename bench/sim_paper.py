#!/usr/bin/env python3
"""The shape of FusionFlow's single-machine results (PVLDB 17(4), 2023), in
simulation: the speed-up of cooperative offload ("ours") over CPU-only as the
CPU cores per GPU shrink, on an 8-GPU node.

1. Measures the CPU cost of a RandAugment pipeline per sample on this machine
   with `fusionflow bench --json` (1 thread; or takes --profile FILE).
2. Runs `fusionflow sim --json --profile ...` for each core count and prints
   one table, with the goal: ours removes >= 90% of the stall CPU-only leaves
   while slowing the trainer by < 5%.

--placement split models today's default (the CPU reads and decodes a device
sample, the GPU runs its ops); --placement device models whole-sample offload
(the CPU only reads it; the GPU decodes too, --gpu-decode-ms per sample). Both
take what stays on the CPU from the profile's measured read/decode/ops split.

    python3 bench/sim_paper.py --cli build/fusionflow --data build/demo-data --placement split
    python3 bench/sim_paper.py --cli build/fusionflow --profile /tmp/ff-sim-profile.json --placement device
"""
import argparse
import json
import os
import subprocess
import sys

RAND_AUGMENT = ("decode | random_resized_crop(size=224) | random_horizontal_flip | "
                "rand_augment(num_ops=2, magnitude=9) | normalize(mean=imagenet, std=imagenet)")


def run_json(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit("sim_paper: %s failed:\n%s" % (" ".join(cmd), p.stderr))
    return json.loads(p.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", default="build/fusionflow")
    ap.add_argument("--data", default="build/demo-data", help="ImageFolder to profile the pipeline on")
    ap.add_argument("--profile", help="an existing `fusionflow bench --json` output (skips the measurement)")
    ap.add_argument("--profile-out", default="/tmp/ff-sim-profile.json")
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--cores", default="8,12,16,24,32,48,64", help="node core counts to simulate")
    ap.add_argument("--step-ms", type=float, default=80.0,
                    help="ResNet-50-like step for --batch-size (default 80 ms for 256: 3200 images/s per GPU)")
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--batches", type=int, default=300)
    ap.add_argument("--gpu-ms", type=float, default=0.08, help="GPU time per sample")
    ap.add_argument("--launch-ms", type=float, default=0.05, help="GPU time per microbatch")
    ap.add_argument("--cpu-cv", type=float, default=0.5, help="spread of the per-sample CPU cost")
    ap.add_argument("--device-cpu-frac", default="0",
                    help="share of a device sample's CPU cost left on the CPU (0: decode on the GPU too; "
                         "'decode': the profile's read+decode share)")
    ap.add_argument("--placement", choices=["split", "device"],
                    help="what a device sample leaves on the CPU, from the profile (overrides --device-cpu-frac)")
    ap.add_argument("--gpu-decode-ms", type=float, default=0.25,
                    help="--placement device: GPU time of a decode (assumed: 4,000 images/s of JPEG engines)")
    ap.add_argument("--decode-on", choices=["engines", "sms"], default="engines",
                    help="--placement device: the JPEG engines (hardware backend) or the SMs (hybrid)")
    ap.add_argument("--host-decode-share", type=float, default=0.0,
                    help="--placement device: share of the CPU decode left on the host (0: hardware engine)")
    ap.add_argument("--no-sync", action="store_true",
                    help="trainers step independently (default: lockstep, as data-parallel training)")
    args = ap.parse_args()

    profile = args.profile
    if not profile:
        cmd = [args.cli, "bench", "--source", "imagefolder:" + args.data, "--pipeline", RAND_AUGMENT,
               "--threads", "1", "--batch-size", "64", "--warmup", "3", "--batches", "20", "--json"]
        print("sim_paper: profiling: " + " ".join(cmd), file=sys.stderr, flush=True)
        prof = run_json(cmd)
        with open(args.profile_out, "w") as f:
            json.dump(prof, f)
        profile = args.profile_out
    with open(profile) as f:
        prof = json.load(f)
    work = prof["read_s"] + prof["decode_s"] + prof["ops_s"]
    cpu_ms = 1e3 * work / prof["samples"]
    print("profile: %s, %d samples on %d thread(s): %.3f ms of CPU per sample (read %.0f%%, decode %.0f%%, ops %.0f%%)"
          % (profile, prof["samples"], prof["threads"], cpu_ms, 100 * prof["read_s"] / work,
             100 * prof["decode_s"] / work, 100 * prof["ops_s"] / work))

    rows = []
    for cores in [int(c) for c in args.cores.split(",")]:
        cmd = [args.cli, "sim", "--json", "--profile", profile, "--gpus", str(args.gpus), "--cores", str(cores),
               "--step-ms", str(args.step_ms), "--batch-size", str(args.batch_size), "--batches", str(args.batches),
               "--cpu-cv", str(args.cpu_cv), "--gpu-ms-per-sample", str(args.gpu_ms),
               "--gpu-launch-ms", str(args.launch_ms)]
        if args.placement:
            cmd += ["--placement", args.placement, "--gpu-decode-ms-per-sample", str(args.gpu_decode_ms),
                    "--host-decode-share", str(args.host_decode_share), "--decode-on", args.decode_on]
        else:
            cmd += ["--device-cpu-frac", args.device_cpu_frac]
        if args.no_sync:
            cmd.append("--no-sync")
        res = run_json(cmd)
        inputs = res["inputs"]
        rows.append((cores, {r["strategy"]: r for r in res["results"]}))

    full = args.batch_size / (args.step_ms * 1e-3) * args.gpus
    print("node: %d GPUs, step %g ms per batch of %d (full speed %.0f samples/s for the node), GPU %.3g ms/sample "
          "+ %.3g ms/microbatch, CPU cv %.2g, device CPU fraction %.3g, trainers %s"
          % (args.gpus, args.step_ms, args.batch_size, full, args.gpu_ms, args.launch_ms, args.cpu_cv,
             inputs["device_cpu_frac"]["value"], "independent" if args.no_sync else "in lockstep"))
    print("placement %s; inputs: %s" % (args.placement or "by --device-cpu-frac", ", ".join(
        "%s %.4g (%s)" % (k, v["value"], v["source"]) for k, v in inputs.items())))
    print()
    print("| cores | cores/GPU | cpu-only samples/s | cpu-only stall | gpu-only samples/s | static (share) samples/s "
          "| ours samples/s | ours stall | ours device share | ours slowdown | ours vs cpu-only | stall removed | goal |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for cores, r in rows:
        cpu, gpu, st, ours = r["cpu-only"], r["gpu-only"], r["static"], r["ours"]
        removed = 1 - ours["stall_share"] / cpu["stall_share"] if cpu["stall_share"] > 0.005 else None
        goal = "-" if removed is None else ("met" if removed >= 0.9 and ours["slowdown"] < 0.05 else "not met")
        print("| %d | %.3g | %.0f | %.1f%% | %.0f | %.0f (%.2f) | %.0f | %.1f%% | %.1f%% | %.1f%% | %.2fx | %s | %s |"
              % (cores, cores / args.gpus, cpu["samples_per_s_node"], 100 * cpu["stall_share"],
                 gpu["samples_per_s_node"], st["samples_per_s_node"], st["static_share"], ours["samples_per_s_node"],
                 100 * ours["stall_share"], 100 * ours["device_share"], 100 * ours["slowdown"],
                 ours["samples_per_s_node"] / cpu["samples_per_s_node"],
                 "-" if removed is None else "%.0f%%" % (100 * removed), goal))
    return 0


if __name__ == "__main__":
    sys.exit(main())
