#!/usr/bin/env python3
"""Batch-level and multi-view recipes end to end: fusionflow against torch's
DataLoader with the recipe's own torchvision transforms on the same folder and
the same number of workers, and the share of batch preparation the Mixup /
CutMix batch stage takes.

  mixup      decode | random_resized_crop(224) | random_horizontal_flip | normalize
             | mixup_cutmix(0.8, 1.0, label smoothing 0.1)     (DeiT's batch stage; its
             RandAugment and random erasing are left out here: see bench/RESULTS.md)
             vs DataLoader(ImageFolder(RandomResizedCrop, flip, ToTensor, Normalize))
             + timm's Mixup on each batch in the loop
  multicrop  decode || 2 x random_resized_crop(224, scale=(0.4, 1)) | flip | normalize
             || 8 x random_resized_crop(96, scale=(0.05, 0.4)) | flip | normalize
             (DINO's crops, without its colour jitter, blur and solarize)
             vs DataLoader with DINO's crop list as the transform

Use the test venv (torch, torchvision, timm): $(scripts/test-venv.sh) bench/recipes.py --data DIR
"""
import argparse
import json
import os
import sys

from _timing import time_batches

NORM = "normalize(mean=imagenet, std=imagenet)"
MIX = "mixup_cutmix(mixup_alpha=0.8, cutmix_alpha=1.0, label_smoothing=0.1, num_classes={k})"
PLAIN = f"decode | random_resized_crop(size=224) | random_horizontal_flip | {NORM}"
MULTI = (f"decode || 2 x random_resized_crop(size=224, scale=(0.4, 1)) | random_horizontal_flip | {NORM}"
         f" || 8 x random_resized_crop(size=96, scale=(0.05, 0.4)) | random_horizontal_flip | {NORM}")


def first_dim(batch):
    x = batch[0]
    return (x[0] if isinstance(x, list) else x).shape[0]


def run_ff(root, pipeline, args):
    import fusionflow
    with fusionflow.Loader(root, pipeline, batch_size=args.batch_size, num_threads=args.workers, device="cpu",
                           drop_last=True, output="torch") as loader:
        n, dt = time_batches(loader, args.batches, args.warmup, first_dim)
        s = loader.stats()
    prep = s["read_ns"] + s["decode_ns"] + s["ops_ns"] + s["batch_stage_ns"]
    return {"images_per_s": n / dt, "batch_stage_share": s["batch_stage_ns"] / prep if prep else 0.0}


def run_torch(root, transform, args, mixup=None):
    import torch
    from torchvision import datasets
    ds = datasets.ImageFolder(root, transform=transform)
    dl = torch.utils.data.DataLoader(ds, batch_size=args.batch_size, shuffle=True, num_workers=args.workers,
                                     drop_last=True, persistent_workers=True)
    step = (lambda batch: mixup(*batch)) if mixup else None
    n, dt = time_batches(dl, args.batches, args.warmup, first_dim, step=step)
    return {"images_per_s": n / dt}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="an ImageFolder tree")
    ap.add_argument("--workers", type=int, default=2, help="fusionflow threads = DataLoader workers (2)")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--batches", type=int, default=10, help="timed batches per run (10)")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    import timm.data
    from torchvision import transforms as T
    k = len([d for d in os.listdir(args.data) if os.path.isdir(os.path.join(args.data, d))])
    norm = T.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
    plain_tf = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(), norm])
    g = T.Compose([T.RandomResizedCrop(224, scale=(0.4, 1)), T.RandomHorizontalFlip(), T.ToTensor(), norm])
    loc = T.Compose([T.RandomResizedCrop(96, scale=(0.05, 0.4)), T.RandomHorizontalFlip(), T.ToTensor(), norm])
    multi_tf = lambda img: [g(img), g(img)] + [loc(img) for _ in range(8)]  # noqa: E731
    mix = timm.data.Mixup(mixup_alpha=0.8, cutmix_alpha=1.0, label_smoothing=0.1, num_classes=k)
    res = {
        "mixup": {"fusionflow": run_ff(args.data, PLAIN + " | " + MIX.format(k=k), args),
                  "fusionflow_without_stage": run_ff(args.data, PLAIN, args),
                  "dataloader": run_torch(args.data, plain_tf, args, mix)},
        "multicrop": {"fusionflow": run_ff(args.data, MULTI, args),
                      "dataloader": run_torch(args.data, multi_tf, args)},
    }
    if args.json:
        print(json.dumps(res, indent=1))
        return 0
    for name, r in res.items():
        ff, dl = r["fusionflow"]["images_per_s"], r["dataloader"]["images_per_s"]
        extra = ""
        if "batch_stage_share" in r["fusionflow"] and name == "mixup":
            extra = "  batch stage %.1f%% of preparation; without the stage %.1f/s" % (
                100 * r["fusionflow"]["batch_stage_share"], r["fusionflow_without_stage"]["images_per_s"])
        print("%-10s fusionflow %8.1f/s  DataLoader %8.1f/s  %5.2fx%s" % (name, ff, dl, ff / dl, extra))
    return 0


if __name__ == "__main__":
    sys.exit(main())
