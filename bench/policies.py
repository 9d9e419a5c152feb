#!/usr/bin/env python3
"""Every augmentation policy end to end: fusionflow against torchvision's
DataLoader with the matching transform, and each fusionflow policy against
fusionflow's pipeline without augmentation (the goal: within 20%).

Runs bench/compare.py once per pipeline and prints one table. Inside each
run the peers alternate: fusionflow with the pipeline, fusionflow with the
standard pipeline (the "vs standard" column is the median of the per-repeat
ratios of these two, taken side by side) and the DataLoader. Use /usr/bin/python3 (Debian's torch/torchvision), or
a Python with timm for the timm_rand_augment and deit rows (DeiT's
RandAugment, and DeiT's whole training transform with random erasing:
timm's create_transform in the DataLoader), e.g. the test venv:

    /usr/bin/python3 bench/policies.py --data build/demo-data [--pipelines a,b] [compare.py options]
    $(scripts/test-venv.sh) bench/policies.py --pipelines timm_rand_augment   (timm's side needs timm)
"""
import argparse
import importlib.util
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PIPELINES = ["standard", "rand_augment", "trivial_augment_wide", "auto_augment", "aug_mix", "timm_rand_augment",
             "deit", "three_augment", "dino_global"]
TIMM = ("timm_rand_augment", "deit")  # rows whose torchvision side is timm's create_transform


def pipeline_list(text):
    names = [n for n in text.split(",") if n]
    unknown = [n for n in names if n not in PIPELINES]
    if unknown:
        raise argparse.ArgumentTypeError("unknown pipeline %s (choose from %s)" % (",".join(unknown), ",".join(PIPELINES)))
    return names


def main():
    ap = argparse.ArgumentParser(
        allow_abbrev=False,  # compare.py's --pipeline is passed on, not taken for --pipelines
        description="Every augmentation policy end to end (bench/compare.py once per pipeline, one table).",
        epilog="Every other option (--data, --cli, --threads, --batch-size, --batches, --warmup, --repeats, "
               "--timeout, ...) is passed to bench/compare.py: see `bench/compare.py --help`.")
    ap.add_argument("--pipelines", type=pipeline_list, metavar="A,B",
                    help="a subset of %s (standard, the baseline, is always run; default: all, less "
                         "timm_rand_augment in a Python without timm)" % ", ".join(PIPELINES))
    args, extra = ap.parse_known_args()
    names = PIPELINES
    if args.pipelines is not None:
        names = ["standard"] + [n for n in args.pipelines if n != "standard"]
    elif importlib.util.find_spec("timm") is None:  # the default set in a Python without timm (make bench)
        names = [n for n in names if n not in TIMM]
        print("policies: no timm in this Python: the %s rows are left out" % " and ".join(TIMM), file=sys.stderr)
    rows, shares = {}, {}
    for name in names:
        peers = "fusionflow,torchvision" if name == "standard" else "fusionflow,fusionflow-plain,torchvision"
        cmd = [sys.executable, os.path.join(HERE, "compare.py"), "--pipeline", name,
               "--only", peers, "--json"] + extra
        print("policies: " + name, file=sys.stderr, flush=True)
        p = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
        if p.returncode != 0:
            sys.exit("policies: compare.py failed for %s" % name)
        doc = json.loads(p.stdout)
        rows[name] = {k: v["images_per_s"] for k, v in doc["results"].items()}
        shares[name] = 1.0 if name == "standard" else doc["fusionflow_share_of_plain"]
    print("\n%-22s %14s %14s %10s %14s" % ("pipeline", "fusionflow/s", "torchvision/s", "ratio",
                                          "vs standard"))
    print("-" * 78)
    for name in names:
        ff, tv = rows[name].get("fusionflow"), rows[name].get("torchvision")
        print("%-22s %14.1f %14.1f %9.2fx %13.0f%%" % (name, ff, tv, ff / tv, 100.0 * shares[name]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
