#!/usr/bin/env python3
"""How well the offload split picks its samples: the CPU time of the steps
after decode (what the device takes over; the CPU still reads and decodes)
carried by the samples sent to the device, against the mean sample's.

For each policy, two runs of `fusionflow bench` on `emu:0`, one thread, the
second epoch timed (the first fills the header cache the split predicts
from): one with every sample on the CPU (FF_FORCE_DEVICE_SHARE=0: the mean
ops time per sample), one with a forced device share (default 0.25: the ops
time the CPU keeps). The device samples' mean follows from the two:

    device mean = (mean x samples - CPU ops time kept) / device samples

A split that picks at random gives 1.00x the mean; higher is better. The
device figure is a difference of two timed totals, so the VM's noise is
amplified (by samples / device samples): the two runs alternate --repeats
times and the medians are used.

    /usr/bin/python3 bench/split.py --data build/demo-data [--cli build/fusionflow] [--share 0.25] [--repeats 3]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

POLICIES = ["rand_augment(num_ops=2, magnitude=9)", "trivial_augment_wide", "auto_augment", "aug_mix"]


def ops_per_sample(args, policy, share):
    pipe = ("decode | random_resized_crop(size=224) | random_horizontal_flip | %s | "
            "normalize(mean=imagenet, std=imagenet)" % policy)
    n = sum(len(files) for _, _, files in os.walk(args.data))
    batches = n // args.batch_size
    cmd = [args.cli, "bench", "--source", "imagefolder:" + args.data, "--pipeline", pipe, "--device", "emu:0",
           "--threads", "1", "--batch-size", str(args.batch_size), "--warmup", str(batches + 1),
           "--batches", str(batches), "--json"]
    env = dict(os.environ, FF_FORCE_DEVICE_SHARE=str(share))
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    if p.returncode != 0:
        sys.exit("split: %s failed: %s" % (" ".join(cmd), p.stderr.strip()))
    d = json.loads(p.stdout)
    return d["samples"], d["device_samples"], d["ops_s"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="build/demo-data")
    ap.add_argument("--cli", default="build/fusionflow")
    ap.add_argument("--share", type=float, default=0.25, help="forced device share of the second run")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    print("%-38s %14s %14s %14s %10s" % ("policy", "mean ops us", "CPU kept us", "device us", "vs mean"))
    print("-" * 94)
    for policy in POLICIES:
        alls, kepts = [], []
        for _ in range(args.repeats):
            n, _, all_s = ops_per_sample(args, policy, 0)
            m, dev, kept_s = ops_per_sample(args, policy, args.share)
            alls.append(all_s), kepts.append(kept_s)
        mean, kept_s = statistics.median(alls) / n, statistics.median(kepts)
        device = (mean * m - kept_s) / dev
        print("%-38s %14.1f %14.1f %14.1f %9.2fx" % (policy, 1e6 * mean, 1e6 * kept_s / (m - dev), 1e6 * device,
                                                   device / mean))
    return 0


if __name__ == "__main__":
    sys.exit(main())
