#!/usr/bin/python3
"""Derive a small ImageNet-like ImageFolder from the photographs on this machine.

Usage: demo-data.py DIR [--count N] [--classes K] [--seed S] [--jobs J]

Sources: the JPEG photographs shipped by the Debian packages mate-backgrounds
(/usr/share/backgrounds/mate) and plasma-workspace-wallpapers
(/usr/share/wallpapers). Selection rule (deterministic):
  * JPEG files only (the PNGs in both packages are rendered artwork);
  * not under a folder named "abstract" or "desktop" (MATE's artwork folders);
  * symlinks resolved, and per Plasma theme only its largest picture is kept
    (the themes ship the same picture in several sizes);
  * pictures whose shorter side is under 800 px are skipped;
  * a short list of Plasma themes that are illustrations, not photographs,
    is skipped (NOT_PHOTOS below).

Each output sample is a random crop of one source, resized so that both sides
lie in 300..800 px (random aspect ratio), saved as JPEG with a random quality
in 75..95, mostly 4:2:0 (about 20% 4:4:4), about 3% grayscale and about 10%
progressive. Every random choice is drawn up front from random.Random(seed), so
the output is byte-identical on every run. DIR/.complete marks a finished set.
"""
import argparse
import multiprocessing
import os
import random
import sys
import time

try:
    from PIL import Image
except ImportError:
    sys.exit("demo-data: Pillow is missing; run with /usr/bin/python3 "
             "(apt-get install python3-pil)")

SOURCE_ROOTS = ["/usr/share/backgrounds/mate", "/usr/share/wallpapers"]
SKIP_DIRS = {"abstract", "desktop"}
NOT_PHOTOS = {"Autumn", "Flow", "Honeywave", "PastelHills", "SafeLanding", "Shell"}
MIN_SHORT_SIDE = 800
WORK_LONG_SIDE = 1600       # sources are kept in memory downsampled to this
OUT_MIN, OUT_MAX = 300, 800
PACKAGES = "mate-backgrounds plasma-workspace-wallpapers"


def log(msg):
    print("demo-data: " + msg, file=sys.stderr, flush=True)


def find_sources():
    """Return the sorted list of source photograph paths."""
    best = {}   # group key -> (area, path)
    for root in SOURCE_ROOTS:
        if not os.path.isdir(root):
            continue
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
            for name in sorted(filenames):
                if not name.lower().endswith((".jpg", ".jpeg")):
                    continue
                if name.lower().startswith("screenshot"):
                    continue
                path = os.path.realpath(os.path.join(dirpath, name))
                rel = os.path.relpath(path, root).split(os.sep)
                if root.endswith("wallpapers"):
                    if rel[0] in NOT_PHOTOS:
                        continue
                    key = "plasma/" + rel[0]          # one picture per theme
                else:
                    key = "mate/" + "/".join(rel)
                try:
                    with Image.open(path) as im:
                        w, h = im.size
                except OSError:
                    continue
                if min(w, h) < MIN_SHORT_SIDE:
                    continue
                area = w * h
                if key not in best or (area, path) > best[key]:
                    best[key] = (area, path)
    return sorted(p for _, p in best.values())


def plan(sources, count, classes, seed):
    """Draw every random parameter up front. Returns per-source task lists."""
    rng = random.Random(seed)
    tasks = {i: [] for i in range(len(sources))}
    per_class = [0] * classes
    for k in range(count):
        cls = k % classes
        # class c draws from sources c, c+classes, c+2*classes, ...
        pool = list(range(cls % len(sources), len(sources), classes)) or [cls % len(sources)]
        src = pool[rng.randrange(len(pool))]
        aspect = rng.uniform(0.6, 1.6)                  # width / height
        long_side = rng.randint(OUT_MIN + 100, OUT_MAX)
        if aspect >= 1:
            w, h = long_side, max(OUT_MIN, round(long_side / aspect))
        else:
            w, h = max(OUT_MIN, round(long_side * aspect)), long_side
        t = dict(
            out="class_%02d/%05d.jpg" % (cls, per_class[cls]),
            size=(w, h),
            scale=rng.uniform(0.15, 1.0),               # share of the max crop
            cx=rng.random(), cy=rng.random(),           # crop position
            quality=rng.randint(75, 95),
            subsampling=0 if rng.random() < 0.2 else 2,  # 0: 4:4:4, 2: 4:2:0
            gray=rng.random() < 0.03,
            progressive=rng.random() < 0.10,
        )
        per_class[cls] += 1
        tasks[src].append(t)
    return tasks


def render(job):
    """Worker: decode one source once, then cut all its samples."""
    path, outdir, tasks = job
    with Image.open(path) as im:
        im.draft("RGB", (WORK_LONG_SIDE, WORK_LONG_SIDE))   # DCT-domain downscale
        im = im.convert("RGB")
    if max(im.size) > WORK_LONG_SIDE:
        f = WORK_LONG_SIDE / max(im.size)
        im = im.resize((round(im.width * f), round(im.height * f)), Image.LANCZOS)
    sw, sh = im.size
    for t in tasks:
        w, h = t["size"]
        # largest crop of the output's aspect ratio that fits, scaled down by area
        a = w / h
        cw, ch = (sw, sw / a) if sw / a <= sh else (sh * a, sh)
        s = t["scale"] ** 0.5
        cw, ch = max(16, cw * s), max(16, ch * s)
        x0 = (sw - cw) * t["cx"]
        y0 = (sh - ch) * t["cy"]
        box = (round(x0), round(y0), round(x0 + cw), round(y0 + ch))
        out = im.resize((w, h), Image.BILINEAR, box=box, reducing_gap=None)
        if t["gray"]:
            out = out.convert("L")
        kw = dict(quality=t["quality"], progressive=t["progressive"], optimize=False)
        if not t["gray"]:
            kw["subsampling"] = t["subsampling"]
        out.save(os.path.join(outdir, t["out"]), "JPEG", **kw)
    return len(tasks)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--seed", type=int, default=20230401)
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    if args.count < 1 or not 1 <= args.classes <= 100:
        ap.error("need --count >= 1 and 1 <= --classes <= 100")

    marker = os.path.join(args.dir, ".complete")
    if os.path.exists(marker):
        log("%s is already there (remove %s to regenerate)" % (args.dir, marker))
        return 0

    t0 = time.monotonic()
    sources = find_sources()
    if not sources:
        sys.exit("demo-data: no source photographs found under %s; install them with\n"
                 "  sudo apt-get install %s   (or scripts/install-deps.sh)"
                 % (" and ".join(SOURCE_ROOTS), PACKAGES))
    log("%d source photographs, %d images in %d classes -> %s"
        % (len(sources), args.count, args.classes, args.dir))

    tasks = plan(sources, args.count, args.classes, args.seed)
    for c in range(args.classes):
        os.makedirs(os.path.join(args.dir, "class_%02d" % c), exist_ok=True)
    # biggest jobs first so the two workers finish together
    jobs = [(sources[i], args.dir, tasks[i]) for i in range(len(sources)) if tasks[i]]
    jobs.sort(key=lambda j: (-len(j[2]), j[0]))
    done = 0
    with multiprocessing.Pool(max(1, args.jobs)) as pool:
        for n in pool.imap_unordered(render, jobs):
            done += n
            log("%d/%d images" % (done, args.count))
    with open(marker, "w") as f:
        f.write("%d images, %d classes, seed %d\n" % (args.count, args.classes, args.seed))
    log("done in %.1f s" % (time.monotonic() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
