#!/usr/bin/python3
"""Throughput of WebDataset shards: fusionflow's tar: source, local (indexed,
read by offset) and streamed over loopback HTTP, against its imagefolder:
source on the same images, and against webdataset + torch DataLoader with
the same pipeline and as many workers as fusionflow has threads.

The shards are written once by `fusionflow shards make` from the folder
(--images of them, taken in ImageFolder order through symlinks), served by
Python's http.server on 127.0.0.1 for the HTTP runs. Each peer runs one
epoch after a warm-up epoch (the page cache and the shard index warm);
peers alternate --repeats times and the median images/s is reported.

    $(scripts/test-venv.sh) bench/shards.py --data build/demo-data --threads 2
"""
import argparse
import functools
import http.server
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PIPELINE = ("decode | random_resized_crop(size=224) | random_horizontal_flip | "
            "normalize(mean=imagenet, std=imagenet)")


def subset(data, out, images):
    """out/<class>/<file> links to the first `images` files of data in ImageFolder order."""
    classes = sorted(d for d in os.listdir(data) if os.path.isdir(os.path.join(data, d)))
    files = [(c, f) for c in classes for f in sorted(os.listdir(os.path.join(data, c)))]
    step = max(1, len(files) // images)
    for c, f in files[::step][:images]:
        os.makedirs(os.path.join(out, c), exist_ok=True)
        os.symlink(os.path.join(data, c, f), os.path.join(out, c, f))
    return out


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def serve(folder):
    handler = functools.partial(QuietHandler, directory=folder)
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, f"http://127.0.0.1:{httpd.server_address[1]}"


def fusionflow_run(source, threads, batch_size, epoch):
    import fusionflow

    with fusionflow.Loader(source, PIPELINE, batch_size=batch_size, num_threads=threads, seed=0,
                           device="cpu", output="numpy") as loader:
        for warm in (True, False):
            loader.set_epoch(epoch * 2 + (0 if warm else 1))
            t0, n = time.perf_counter(), 0
            for _, y in loader:
                n += len(y)
            dt = time.perf_counter() - t0
        return n / dt


def webdataset_run(urls, threads, batch_size, epoch):
    import torch
    import torchvision.transforms as T
    import webdataset as wds

    tf = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(),
                    T.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))])
    ds = (wds.WebDataset(urls, shardshuffle=len(urls), nodesplitter=wds.split_by_node, empty_check=False)
          .shuffle(1000).decode("pil").to_tuple("jpg;jpeg;png", "cls").map_tuple(tf, lambda c: c)
          .batched(batch_size, partial=True))
    loader = wds.WebLoader(ds, batch_size=None, num_workers=threads, persistent_workers=True)
    torch.manual_seed(epoch)
    for warm in (True, False):
        t0, n = time.perf_counter(), 0
        for _, y in loader:
            n += len(y)
        dt = time.perf_counter() - t0
    return n / dt


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=os.path.join(ROOT, "build", "demo-data"), help="an ImageFolder tree")
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "fusionflow"), help="the fusionflow executable")
    ap.add_argument("--images", type=int, default=600, help="images taken from --data (default 600)")
    ap.add_argument("--threads", type=int, default=2, help="fusionflow threads = DataLoader workers (default 2)")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--shard-size", default="8M", help="shard size for `shards make` (default 8M)")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--skip-webdataset", action="store_true")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        os.environ.setdefault("FF_CACHE_DIR", os.path.join(tmp, "cache"))
        folder = subset(args.data, os.path.join(tmp, "folder"), args.images)
        shards = os.path.join(tmp, "shards")
        subprocess.run([args.cli, "shards", "make", folder, shards, "--shard-size", args.shard_size], check=True,
                       stderr=subprocess.DEVNULL)
        names = sorted(n for n in os.listdir(shards) if n.endswith(".tar"))
        last = len(names) - 1
        httpd, base = serve(shards)
        peers = {
            "fusionflow imagefolder:": lambda e: fusionflow_run(f"imagefolder:{folder}", args.threads,
                                                                args.batch_size, e),
            "fusionflow tar: local (indexed)": lambda e: fusionflow_run(
                f"tar:{shards}/shard-{{000000..{last:06d}}}.tar", args.threads, args.batch_size, e),
            "fusionflow tar: http (streamed)": lambda e: fusionflow_run(
                f"tar:{base}/shard-{{000000..{last:06d}}}.tar", args.threads, args.batch_size, e),
        }
        if not args.skip_webdataset:
            peers["webdataset + DataLoader, local"] = lambda e: webdataset_run(
                [os.path.join(shards, n) for n in names], args.threads, args.batch_size, e)
            peers["webdataset + DataLoader, http"] = lambda e: webdataset_run(
                [f"{base}/{n}" for n in names], args.threads, args.batch_size, e)
        results = {k: [] for k in peers}
        for r in range(args.repeats):
            for name, run in peers.items():
                results[name].append(run(r))
                print(f"  {name}: {results[name][-1]:.1f} images/s", file=sys.stderr)
        httpd.shutdown()
    folder_rate = statistics.median(results["fusionflow imagefolder:"])
    print(f"{args.images} images in {len(names)} shards, {args.threads} threads/workers, batch {args.batch_size}, "
          f"median of {args.repeats}\n")
    print("| peer | images/s | vs imagefolder: |")
    print("|---|---|---|")
    for name, rates in results.items():
        m = statistics.median(rates)
        print(f"| {name} | {m:.1f} | {m / folder_rate:.2f}x |")


if __name__ == "__main__":
    main()
