#!/usr/bin/env python3
"""The loader's memory and long runs, measured: what a batch sample and a worker thread cost
in peak RSS, and whether 1,000 open/close cycles and 200 epochs grow anything (resident
memory, file descriptors, threads). Each measurement runs in a process of its own (peak RSS
is per process), on the demo data set with the standard training pipeline (224 x 224 float32
batches).

Usage: bench/robustness.py --data DIR --cli FUSIONFLOW [--cycles 1000] [--epochs 200]
(with the package importable: PYTHONPATH=build/python). Prints a Markdown table."""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

PIPELINE = "decode | random_resized_crop(size=224) | random_horizontal_flip | normalize(mean=imagenet, std=imagenet)"


def peak_rss_mib(cli, data, batch, threads, batches=24):
    """Peak RSS of `fusionflow bench` over `batches` batches, from a parent that runs nothing else."""
    wrapper = ("import resource, subprocess, sys\n"
               "r = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
               "assert r.returncode == 0, r.stderr\n"
               "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n")
    out = subprocess.run([sys.executable, "-c", wrapper, cli, "bench", "--source", data, "--pipeline", PIPELINE,
                          "--batch-size", str(batch), "--threads", str(threads), "--batches", str(batches),
                          "--json"], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[-1]) / 1024


def fit(points):
    """Least squares of rss = a + b * batch + c * threads over (batch, threads, rss) points."""
    import numpy as np

    x = np.array([[1, b, t] for b, t, _ in points], dtype=float)
    y = np.array([r for _, _, r in points], dtype=float)
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    return coef


# A child that opens and closes loaders, or runs epochs, and says its resident memory, file
# descriptors and threads at the checkpoints.
CHILD = r"""
import json, os, sys
import fusionflow

def state():
    with open("/proc/self/statm") as f:
        resident = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    threads = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("Threads:"))
    return {"rss_mib": resident / 2**20, "fds": len(os.listdir("/proc/self/fd")), "threads": threads}

mode, data, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
pipeline = sys.argv[4]
marks = {}
if mode == "cycles":
    for i in range(1, n + 1):
        with fusionflow.Loader(data, pipeline, batch_size=8, num_threads=2, output="numpy") as loader:
            next(iter(loader))
        if i in (n // 10, n):
            marks[i] = state()
else:
    with fusionflow.Loader(data, pipeline, batch_size=16, num_threads=2, output="numpy") as loader:
        for epoch in range(1, n + 1):
            loader.set_epoch(epoch - 1)
            for _ in loader:
                pass
            if epoch in (n // 20, n):
                marks[epoch] = state()
print(json.dumps(marks))
"""


def long_run(mode, data, n):
    out = subprocess.run([sys.executable, "-c", CHILD, mode, data, str(n), PIPELINE], capture_output=True,
                         text=True, check=True)
    marks = json.loads(out.stdout)
    (a, first), (b, last) = sorted(marks.items(), key=lambda kv: int(kv[0]))
    return int(a), first, int(b), last


def small_folder(data, root, classes=2, per_class=32):
    """The first per_class images of the first classes of the demo set: 4 batches of 16 an epoch."""
    for c in sorted(d for d in os.listdir(data) if os.path.isdir(os.path.join(data, d)))[:classes]:
        os.makedirs(os.path.join(root, c))
        for name in sorted(os.listdir(os.path.join(data, c)))[:per_class]:
            shutil.copy(os.path.join(data, c, name), os.path.join(root, c, name))
    return root


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--cli", required=True)
    ap.add_argument("--cycles", type=int, default=1000)
    ap.add_argument("--epochs", type=int, default=200)
    args = ap.parse_args()

    points = [(b, 2, peak_rss_mib(args.cli, args.data, b, 2)) for b in (8, 32, 128)]
    points += [(32, t, peak_rss_mib(args.cli, args.data, 32, t)) for t in (1, 4, 8)]
    a, per_sample, per_thread = fit(points)
    print("| batch size | threads | peak RSS (MiB) |\n|---|---|---|")
    for b, t, r in points:
        print(f"| {b} | {t} | {r:.1f} |")
    print(f"\nfit: {a:.1f} MiB + {per_sample:.2f} MiB per batch sample + {per_thread:.2f} MiB per thread\n")

    with tempfile.TemporaryDirectory() as tmp:
        small = small_folder(args.data, os.path.join(tmp, "small"))
        print("| run | at | RSS (MiB) | fds | threads | at | RSS (MiB) | fds | threads |\n|---|---|---|---|---|---|---|---|---|")
        for mode, n, what in (("cycles", args.cycles, "open/close cycles"), ("epochs", args.epochs, "epochs")):
            i, s, j, e = long_run(mode, small, n)
            print(f"| {n} {what} | {i} | {s['rss_mib']:.1f} | {s['fds']} | {s['threads']} | {j} | {e['rss_mib']:.1f} "
                  f"| {e['fds']} | {e['threads']} |")


if __name__ == "__main__":
    main()
