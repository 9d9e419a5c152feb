#!/usr/bin/python3
"""Side-by-side throughput: fusionflow vs torchvision's DataLoader vs plain decoding.

Runs, in one invocation and on the same ImageFolder:
  fusionflow    `fusionflow bench ... --json` (the CLI), parsed from its JSON summary;
  fusionflow-dct  the same pipeline with decode(dct_scale=true): the opt-in DCT-domain
                downscale of JPEGs (faster; not torchvision's pixels), beside the
                exact default;
  fusionflow-plain  the same with the standard pipeline (crop, flip, normalize): run
                beside an augmented --pipeline, it gives the policy's cost as a ratio
                of two runs taken side by side (not in the default --only);
  torchvision   torch DataLoader over torchvision.datasets.ImageFolder with the
                equivalent PIL transforms, num_workers = --threads;
  decode-only   bench/decode_only: full libjpeg decode of every file on --threads
                threads, nothing else (the CPU's ceiling for any loader that decodes
                every image in full).
The page cache is warmed first so every peer reads from memory. Peers run
alternately --repeats times; the median of each is reported.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

# fusionflow pipeline text for each --pipeline choice; the torchvision transforms
# for the same choice are built in tv_transform().
_HEAD = "decode | random_resized_crop(size=224) | random_horizontal_flip | "
_TAIL = "normalize(mean=imagenet, std=imagenet)"
PIPELINES = {
    "standard": _HEAD + _TAIL,
    "rand_augment": _HEAD + "rand_augment(num_ops=2, magnitude=9) | " + _TAIL,
    "trivial_augment_wide": _HEAD + "trivial_augment_wide | " + _TAIL,
    "auto_augment": _HEAD + "auto_augment(policy=imagenet) | " + _TAIL,
    "aug_mix": _HEAD + "aug_mix | " + _TAIL,
    # DeiT's RandAugment (timm, Pillow semantics), as timm's create_transform builds it
    # with auto_augment="rand-m9-mstd0.5-inc1" and interpolation="bicubic"
    "timm_rand_augment": _HEAD + 'timm_rand_augment(config="rand-m9-mstd0.5-inc1", interpolation=bicubic, '
                         "img_mean=(124, 116, 104)) | " + _TAIL,
    # DeiT's whole training transform: timm's create_transform with interpolation="random"
    # (bilinear or bicubic per sample, in the crop and in RandAugment) and re_prob=0.25, re_mode="pixel"
    "deit": "decode | random_resized_crop(size=224, interpolation=random) | random_horizontal_flip | "
            'timm_rand_augment(config="rand-m9-mstd0.5-inc1", img_mean=(124, 116, 104)) | ' + _TAIL +
            " | random_erasing(p=0.25, mode=pixel)",
    # DeiT III's 3-Augment and DINO's global view (bicubic crops, as the recipes)
    "three_augment": "decode | random_resized_crop(size=224, interpolation=bicubic) | random_horizontal_flip | "
                     "three_augment | " + _TAIL,
    "dino_global": "decode | random_resized_crop(size=224, scale=(0.4, 1.0), interpolation=bicubic) | "
                   "random_horizontal_flip | random_apply(p=0.8, [color_jitter(brightness=0.4, contrast=0.4, "
                   "saturation=0.2, hue=0.1)]) | random_grayscale(p=0.2) | "
                   "gaussian_blur(kernel_size=23, sigma=(0.1, 2.0)) | " + _TAIL,
}

IMG_EXT = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


def log(msg):
    print("compare: " + msg, file=sys.stderr, flush=True)


def list_images(root):
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        out.extend(os.path.join(dirpath, f) for f in sorted(filenames)
                   if f.lower().endswith(IMG_EXT))
    return out


def warm_page_cache(files):
    t0 = time.monotonic()
    total = 0
    for f in files:
        with open(f, "rb") as fp:
            while True:
                b = fp.read(1 << 20)
                if not b:
                    break
                total += len(b)
    log("page cache warmed: %d files, %.1f MiB in %.2f s"
        % (len(files), total / 2**20, time.monotonic() - t0))


# ---------------------------------------------------------------- fusionflow

def run_fusionflow(args, pipeline=None, dct_scale=False):
    text = PIPELINES[pipeline or args.pipeline]
    if dct_scale:
        text = text.replace("decode |", "decode(dct_scale=true) |", 1)
    cmd = [args.cli, "bench",
           "--source", "imagefolder:" + args.data,
           "--pipeline", text,
           "--batch-size", str(args.batch_size),
           "--batches", str(args.batches),
           "--warmup", str(args.warmup),
           "--threads", str(args.threads),
           "--json"]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=args.timeout)
    if p.returncode != 0:
        raise RuntimeError("fusionflow bench failed (rc %d): %s"
                           % (p.returncode, p.stderr.strip()[-2000:]))
    try:
        summary = json.loads(p.stdout)   # --json prints one object on stdout
    except ValueError:
        raise RuntimeError("no JSON summary in fusionflow's output:\n" + p.stdout[-2000:])
    if "images_per_s" not in summary:
        raise RuntimeError("fusionflow's summary has no images_per_s: %r" % summary)
    return summary


# ---------------------------------------------------------------- torchvision

class _PilBlur:
    """DeiT's and DINO's GaussianBlur: Pillow's blur of a radius uniform in (0.1, 2)."""

    def __call__(self, img):
        import random
        from PIL import ImageFilter
        return img.filter(ImageFilter.GaussianBlur(radius=random.uniform(0.1, 2.0)))


class _PilSolarize:
    """DeiT III's Solarization (ImageOps.solarize, threshold 128)."""

    def __call__(self, img):
        from PIL import ImageOps
        return ImageOps.solarize(img)


def tv_transform(pipeline):
    """torchvision's reference recipe for the same pipeline (PIL path: the
    policies run on PIL images, as in references/classification/presets.py;
    3-Augment as DeiT III's new_data_aug_generator, DINO's first global view
    as its DataAugmentationDINO)."""
    from torchvision import transforms as T
    if pipeline in ("timm_rand_augment", "deit"):  # timm's own training transform (needs timm)
        from timm.data import create_transform
        import timm.data.auto_augment as taa
        # Pillow 13's ImageOps.posterize refuses 0 bits, which timm asks for at magnitude 10
        # (mstd noise reaches it): black, as earlier Pillow gave (and fusionflow gives)
        for name in ("Posterize", "PosterizeIncreasing", "PosterizeOriginal"):
            taa.NAME_TO_OP[name] = _posterize_0_black
        interpolation, re_prob = ("random", 0.25) if pipeline == "deit" else ("bicubic", 0.0)
        return create_transform(224, is_training=True, auto_augment="rand-m9-mstd0.5-inc1",
                                interpolation=interpolation, re_prob=re_prob, re_mode="pixel")
    tail = [T.ToTensor(), T.Normalize(IMAGENET_MEAN, IMAGENET_STD)]
    bicubic = T.InterpolationMode.BICUBIC
    if pipeline == "three_augment":
        return T.Compose([T.RandomResizedCrop(224, interpolation=bicubic), T.RandomHorizontalFlip(),
                          T.RandomChoice([T.RandomGrayscale(p=1.0), _PilSolarize(), _PilBlur()]),
                          T.ColorJitter(0.3, 0.3, 0.3)] + tail)
    if pipeline == "dino_global":
        return T.Compose([T.RandomResizedCrop(224, scale=(0.4, 1.0), interpolation=bicubic), T.RandomHorizontalFlip(),
                          T.RandomApply([T.ColorJitter(0.4, 0.4, 0.2, 0.1)], p=0.8), T.RandomGrayscale(p=0.2),
                          _PilBlur()] + tail)
    policy = {
        "standard": [],
        "rand_augment": [T.RandAugment(num_ops=2, magnitude=9)],
        "trivial_augment_wide": [T.TrivialAugmentWide()],
        "auto_augment": [T.AutoAugment(T.AutoAugmentPolicy.IMAGENET)],
        "aug_mix": [T.AugMix()],
    }[pipeline]
    return T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip()] + policy +
                     [T.ToTensor(), T.Normalize(IMAGENET_MEAN, IMAGENET_STD)])


def _posterize_0_black(img, bits, **_):
    import timm.data.auto_augment as taa
    from PIL import Image
    return Image.new(img.mode, img.size) if bits == 0 else taa.posterize(img, bits)


def _worker_init(_):
    import torch
    torch.set_num_threads(1)


def run_torchvision(args):
    import torch
    from torch.utils.data import DataLoader, RandomSampler
    from torchvision.datasets import ImageFolder

    torch.set_num_threads(1)
    ds = ImageFolder(args.data, transform=tv_transform(args.pipeline))
    total = args.warmup + args.batches
    # shuffle=True over as many epochs as the run needs, without the worker
    # restart a new epoch would cost with persistent_workers=False
    sampler = RandomSampler(ds, replacement=False, num_samples=total * args.batch_size)
    dl = DataLoader(ds, batch_size=args.batch_size, sampler=sampler,
                    num_workers=args.threads, persistent_workers=False,
                    pin_memory=False, drop_last=True, worker_init_fn=_worker_init)
    it = iter(dl)
    t_start = time.monotonic()
    for _ in range(args.warmup):          # includes the workers' start-up
        next(it)
    t0 = time.monotonic()
    n = 0
    for _ in range(args.batches):
        x, _y = next(it)
        n += x.shape[0]
    t1 = time.monotonic()
    del it
    return {"images_per_s": n / (t1 - t0), "samples": n, "batches": args.batches,
            "elapsed_s": t1 - t0, "warmup_s": t0 - t_start, "threads": args.threads}


# ---------------------------------------------------------------- decode only

def run_decode_only(args):
    cmd = [args.decode_only, "--threads", str(args.threads), args.data]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=args.timeout)
    if p.returncode != 0:
        raise RuntimeError("fusionflow bench failed (rc %d): %s" % (p.returncode, p.stderr.strip()))
    return json.loads(p.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------- main

def run_fusionflow_plain(args):
    return run_fusionflow(args, "standard")


def run_fusionflow_dct(args):
    return run_fusionflow(args, dct_scale=True)


PEERS = [("fusionflow", run_fusionflow), ("fusionflow-dct", run_fusionflow_dct),
         ("fusionflow-plain", run_fusionflow_plain),
         ("torchvision", run_torchvision), ("decode-only", run_decode_only)]


def find_exe(path):
    if os.path.isfile(path) and os.access(path, os.X_OK):
        return os.path.abspath(path)
    return shutil.which(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default="build/demo-data")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--batches", type=int, default=60, help="timed batches per run")
    ap.add_argument("--warmup", type=int, default=5, help="untimed batches first")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--cli", default="build/fusionflow")
    ap.add_argument("--decode-only", default="build/decode_only")
    ap.add_argument("--pipeline", choices=sorted(PIPELINES), default="standard")
    ap.add_argument("--only", default="fusionflow,fusionflow-dct,torchvision,decode-only",
                    help="comma-separated subset of peers to run")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per run")
    ap.add_argument("--json", action="store_true",
                    help="print the results as JSON on stdout (the table goes to stderr)")
    args = ap.parse_args()
    if args.threads < 1 or args.batch_size < 1 or args.batches < 1 or args.warmup < 0 \
            or args.repeats < 1:
        ap.error("--threads, --batch-size, --batches, --repeats must be >= 1")

    if not os.path.isdir(args.data):
        sys.exit("compare: no data folder %s (make demo-data, or scripts/demo-data.py DIR)"
                 % args.data)
    args.data = os.path.abspath(args.data)
    files = list_images(args.data)
    if not files:
        sys.exit("compare: no images under %s" % args.data)

    wanted = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = set(wanted) - {n for n, _ in PEERS}
    if unknown:
        ap.error("unknown peer(s) in --only: %s" % ", ".join(sorted(unknown)))
    peers, skipped = [], {}
    for name, fn in PEERS:
        if name not in wanted:
            continue
        if name in ("fusionflow", "fusionflow-dct", "fusionflow-plain"):
            exe = find_exe(args.cli)
            if not exe:
                skipped[name] = "not built (%s)" % args.cli
                continue
            args.cli = exe
        elif name == "decode-only":
            exe = find_exe(args.decode_only)
            if not exe:
                skipped[name] = "not built (%s)" % args.decode_only
                continue
            args.decode_only = exe
        elif name == "torchvision":
            try:
                import torch  # noqa: F401
                import torchvision  # noqa: F401
            except ImportError as e:
                skipped[name] = "torch/torchvision missing (%s); use /usr/bin/python3" % e
                continue
        peers.append((name, fn))
    for name, why in skipped.items():
        log("skipping %s: %s" % (name, why))

    log("%d images in %s; batch %d, %d+%d batches, %d threads, %d repeat(s)"
        % (len(files), args.data, args.batch_size, args.warmup, args.batches,
           args.threads, args.repeats))
    warm_page_cache(files)

    runs = {name: [] for name, _ in peers}
    errors = {}
    for r in range(args.repeats):
        for name, fn in peers:            # alternate peers within each repeat
            if name in errors:
                continue
            try:
                res = fn(args)
            except Exception as e:        # report the others anyway
                errors[name] = str(e)
                log("%s failed: %s" % (name, e))
                continue
            runs[name].append(res)
            log("repeat %d/%d  %-16s %9.1f images/s"
                % (r + 1, args.repeats, name, res["images_per_s"]))

    results = {}
    for name, rs in runs.items():
        if rs:
            rates = [x["images_per_s"] for x in rs]
            results[name] = {"images_per_s": statistics.median(rates),
                             "runs": rs}
    tv = results.get("torchvision", {}).get("images_per_s")
    dec = results.get("decode-only", {}).get("images_per_s")
    ff = results.get("fusionflow", {}).get("images_per_s")
    # the pipeline's rate over the plain one's, per repeat (the two ran side by side), then the median
    pairs = list(zip(runs.get("fusionflow", []), runs.get("fusionflow-plain", [])))
    share_of_plain = statistics.median(a["images_per_s"] / b["images_per_s"] for a, b in pairs) if pairs else None

    out_stream = sys.stderr if args.json else sys.stdout
    lines = ["", "%-16s %12s %14s" % ("loader", "images/s", "vs torchvision"),
             "-" * 44]
    for name, _ in PEERS:
        if name in results:
            rate = results[name]["images_per_s"]
            ratio = "%13.2fx" % (rate / tv) if tv else "%14s" % "-"
            lines.append("%-16s %12.1f %s" % (name, rate, ratio))
        else:
            why = skipped.get(name) or errors.get(name) or "not run"
            lines.append("%-16s %12s   (%s)" % (name, "-", why.splitlines()[0][:60]))
    if ff and dec:
        lines.append("")
        lines.append("fusionflow reaches %.0f%% of the decode-only limit (%.1f images/s)"
                     % (100.0 * ff / dec, dec))
    if share_of_plain is not None:
        lines.append("")
        lines.append("fusionflow runs %s at %.0f%% of the standard pipeline's rate (median of %d side-by-side pairs)"
                     % (args.pipeline, 100.0 * share_of_plain, len(pairs)))
    print("\n".join(lines), file=out_stream)

    if args.json:
        doc = {
            "config": {"data": args.data, "images": len(files), "threads": args.threads,
                       "batch_size": args.batch_size, "batches": args.batches,
                       "warmup": args.warmup, "repeats": args.repeats,
                       "pipeline": args.pipeline,
                       "fusionflow_pipeline": PIPELINES[args.pipeline]},
            "results": results,
            "skipped": skipped,
            "errors": errors,
            "ratio_vs_torchvision": {n: results[n]["images_per_s"] / tv
                                     for n in results} if tv else {},
            "fusionflow_share_of_decode_only": (ff / dec) if ff and dec else None,
            "fusionflow_share_of_plain": share_of_plain,
        }
        print(json.dumps(doc, indent=2))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
