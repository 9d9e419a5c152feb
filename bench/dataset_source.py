#!/usr/bin/env python3
"""Throughput of a Python dataset as the source (the callback source: one
GIL hold per batch of fetches) against the folder source on the same
images, same pipeline and threads: a list of (bytes, label) in memory, and a
Hugging Face datasets.Dataset with the image column cast to
Image(decode=False) (when `datasets` is installed).

Usage: bench/dataset_source.py --data DIR [--threads 2] [--batches 40] [--repeats 3]
(run it with the test venv's python: scripts/test-venv.sh prints it; PYTHONPATH=build/python)
"""
import argparse
import os
import statistics

import fusionflow
from _timing import time_batches

PIPE = "decode | random_resized_crop(size=224) | random_horizontal_flip | normalize(mean=imagenet, std=imagenet)"


def folder_items(root):
    classes = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
    paths, labels = [], []
    for c, name in enumerate(classes):
        for f in sorted(os.listdir(os.path.join(root, name))):
            paths.append(os.path.join(root, name, f))
            labels.append(c)
    return paths, labels


def rate(source, args):
    """images/s over `batches` batches after 3 warm-up batches."""
    with fusionflow.Loader(source, PIPE, batch_size=64, num_threads=args.threads, device="cpu",
                           output="numpy", seed=0) as loader:
        n, dt = time_batches(loader, args.batches, 3, lambda batch: len(batch[1]))
        return n / dt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batches", type=int, default=40)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    paths, labels = folder_items(args.data)
    sources = {"imagefolder": args.data,
               "list of (bytes, label)": [(open(p, "rb").read(), lbl) for p, lbl in zip(paths, labels)]}
    try:
        import datasets
        ds = datasets.Dataset.from_dict({"image": [{"bytes": b, "path": None} for b, _ in sources[
            "list of (bytes, label)"]], "label": labels})
        sources["Hugging Face Dataset"] = ds.cast_column("image", datasets.Image(decode=False))
    except ImportError:
        pass
    results = {name: [] for name in sources}
    for _ in range(args.repeats):  # interleaved, so that the machine's load hits all alike
        for name, source in sources.items():
            results[name].append(rate(source, args))
    base = statistics.median(results["imagefolder"])
    print(f"{len(paths)} images, batch 64, {args.threads} threads, {args.batches} timed batches, "
          f"median of {args.repeats}")
    for name, rates in results.items():
        m = statistics.median(rates)
        print(f"  {name:24s} {m:8.1f} images/s  {m / base:5.2f}x imagefolder")


if __name__ == "__main__":
    main()
