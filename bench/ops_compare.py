#!/usr/bin/python3
"""Per-op microbenchmarks on one thread: fusionflow's CPU ops vs torchvision vs OpenCV.

Runs, in one invocation and on the same 224x224 RGB uint8 test image:
  fusionflow    bench/ops_bench (C, the library's internal op functions), parsed
                from its JSON; it also writes the test images this script reuses;
  torchvision   torchvision.transforms.functional on a uint8 CHW tensor
                (torch.set_num_threads(1)); the policies' ops through
                torchvision.transforms.autoaugment._apply_op with the same magnitudes;
                for the pil_* rows Pillow's own op on a PIL image (what torchvision,
                timm and DINO call on PIL images);
  OpenCV        the nearest cv2 equivalent(s) (cv2.setNumThreads(1)) on the HWC
                array; where several calls fit, each is timed and the fastest one
                is compared (the JSON keeps them all);
  Pillow        for the pil_* rows (timm's ops with Pillow's arithmetic), in
                the torchvision column: Image.rotate / Image.transform(AFFINE).
Each figure is the median over --runs runs of N calls, N calibrated so that a
run takes about --target-ms (timeit-style; Python peers include the ~0.1-0.5 us
of a Python call). The sides take turns op by op: each round of an op times
fusionflow (ops_bench --only that op) and then its peers, --rounds rounds per
op and repeat, so that a drift of the machine moves both sides of a round
alike; each figure is the median over all rounds, and ff/cv2 the median of the
rounds' own ratios (the JSON keeps every round's). fusionflow's in-place ops are reported net of the memcpy that
restores their input (see bench/ops_bench.c). Pin to one core for stable numbers:
  taskset -c 1 /usr/bin/python3 bench/ops_compare.py --ops-bench build/ops_bench --repeats 3
"""
import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

# The magnitudes bench/ops_bench.c uses (RandAugment, magnitude 9 of 31 bins,
# on a 224-pixel image; rotate by 20 degrees).
SHEAR = 0.09
TRANSLATE = 30.0
ROTATE = 20.0
FACTOR = 1.27          # brightness, color, contrast, sharpness factor
POSTERIZE = 7
SOLARIZE = 178.5
MIX_M0 = 0.3
MIX_W = (0.35, 0.21, 0.14)

# Rows of the table, in order: (op, short description of the OpenCV side).
OPS = [
    "shear_x_nearest", "shear_x_bilinear", "shear_y_nearest", "shear_y_bilinear",
    "translate_x_nearest", "translate_x_bilinear", "translate_y_nearest", "translate_y_bilinear",
    "rotate_nearest", "rotate_bilinear",
    "brightness", "color", "contrast", "sharpness", "posterize", "solarize",
    "autocontrast", "equalize", "invert", "fused_posterize_solarize_brightness",
    "resize_320x290_to_224_antialias", "resize_320x290_to_224_bilinear", "resize_150_to_224_upscale",
    "hflip", "normalize_nchw_f32", "aug_mix_mixing", "rotate_bilinear_via_ops_run",
    "resize_320x290_to_224_bicubic", "hue", "grayscale", "gaussian_blur_k5", "gaussian_blur_k23",
    "random_erasing_pixel", "random_erasing_const", "pil_gaussian_blur_r1.5",
]
# timm's geometric ops with Pillow's arithmetic (fusionflow's pil ops; the
# torchvision column of these rows is Pillow itself, as timm calls it).
PIL_WARP_OPS = ["pil_rotate_bicubic", "pil_rotate_bilinear", "pil_shear_x_bicubic", "pil_shear_x_bilinear"]
OPS += PIL_WARP_OPS
PIL_FILL = (124, 116, 104)  # timm's img_mean
HUE = 0.1
BLUR_SIGMA = 1.5
ERASE_BOX = (60, 50, 90, 112)  # top, left, height, width


def log(msg):
    print("ops_compare: " + msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- timing

def time_call(fn, target_s, runs):
    """Median seconds per call over `runs` runs of n calls (n calibrated to target_s)."""
    fn()
    fn()
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        dt = time.perf_counter() - t0
        if dt >= target_s * 0.5 or n >= 1 << 24:
            n = max(1, int(n * target_s / dt)) if dt > 0 else n
            break
        n *= 2 if dt > 0 and target_s * 0.5 / dt < 8 else 8
    per = []
    for _ in range(runs):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        per.append((time.perf_counter() - t0) / n)
    return {"us": statistics.median(per) * 1e6, "min_us": min(per) * 1e6, "max_us": max(per) * 1e6,
            "n": n, "runs": runs}


# ---------------------------------------------------------------- fusionflow

def run_ops_bench(args, image_dir=None, op=None):
    """ops_bench's JSON: the timings of op (all of --only without one), or,
    with image_dir, no timings: it writes the test images there."""
    cmd = [args.ops_bench, "--target-ms", str(args.target_ms), "--runs", str(args.runs)]
    if image_dir:
        cmd += ["--list", "--dump-images", image_dir]
    elif op:
        cmd += ["--only", op]
    elif args.only:
        cmd += ["--only", args.only]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=args.timeout)
    if p.returncode != 0:
        raise RuntimeError("ops_bench failed (rc %d): %s" % (p.returncode, p.stderr.strip()[-2000:]))
    if image_dir:
        return {}
    got = json.loads(p.stdout)
    return {op: got[op]} if op and op in got else {} if op else got


def load_images(image_dir):
    def rd(name, w, h):
        return np.fromfile(os.path.join(image_dir, name), np.uint8).reshape(h, w, 3)
    return {"224": rd("img224.rgb", 224, 224), "320x290": rd("img320x290.rgb", 320, 290),
            "150": rd("img150.rgb", 150, 150)}


# ---------------------------------------------------------------- torchvision

def torchvision_peers(imgs):
    import torch
    import torchvision.transforms.functional as F
    from torchvision.transforms import InterpolationMode
    from torchvision.transforms.autoaugment import _apply_op

    torch.set_num_threads(1)

    def chw(a):
        return torch.from_numpy(a).permute(2, 0, 1).contiguous()

    t224, t320, t150 = chw(imgs["224"]), chw(imgs["320x290"]), chw(imgs["150"])
    NEAREST, BILINEAR = InterpolationMode.NEAREST, InterpolationMode.BILINEAR

    def op(name, mag, interp=NEAREST):
        return lambda: _apply_op(t224, name, mag, interpolation=interp, fill=None)

    peers = {}
    for short, tv_name, mag in [("shear_x", "ShearX", SHEAR), ("shear_y", "ShearY", SHEAR),
                                ("translate_x", "TranslateX", TRANSLATE),
                                ("translate_y", "TranslateY", TRANSLATE), ("rotate", "Rotate", ROTATE)]:
        peers[short + "_nearest"] = op(tv_name, mag, NEAREST)
        peers[short + "_bilinear"] = op(tv_name, mag, BILINEAR)
    peers["rotate_bilinear_via_ops_run"] = peers["rotate_bilinear"]
    peers["brightness"] = op("Brightness", FACTOR - 1.0)
    peers["color"] = op("Color", FACTOR - 1.0)
    peers["contrast"] = op("Contrast", FACTOR - 1.0)
    peers["sharpness"] = op("Sharpness", FACTOR - 1.0)
    peers["posterize"] = op("Posterize", float(POSTERIZE))
    peers["solarize"] = op("Solarize", SOLARIZE)
    peers["autocontrast"] = op("AutoContrast", 0.0)
    peers["equalize"] = op("Equalize", 0.0)
    peers["invert"] = op("Invert", 0.0)
    peers["fused_posterize_solarize_brightness"] = lambda: F.adjust_brightness(
        F.solarize(F.posterize(t224, POSTERIZE), SOLARIZE), FACTOR)
    peers["resize_320x290_to_224_antialias"] = lambda: F.resize(t320, [224, 224], BILINEAR, antialias=True)
    peers["resize_320x290_to_224_bilinear"] = lambda: F.resize(t320, [224, 224], BILINEAR, antialias=False)
    peers["resize_150_to_224_upscale"] = lambda: F.resize(t150, [224, 224], BILINEAR, antialias=True)
    peers["hflip"] = lambda: F.hflip(t224)
    peers["normalize_nchw_f32"] = lambda: F.normalize(
        F.convert_image_dtype(t224, torch.float32), IMAGENET_MEAN, IMAGENET_STD)

    # AugMix.forward's mixing with the chains left out (aug = batch each time)
    batch = t224.view(1, 3, 224, 224)
    m0 = torch.tensor([MIX_M0]).view(1, 1, 1, 1)
    ws = [torch.tensor([w]).view(1, 1, 1, 1) for w in MIX_W]

    def mixing():
        mix = m0 * batch
        for w in ws:
            mix.add_(w * batch)
        return mix.view(3, 224, 224).to(dtype=torch.uint8)
    peers["aug_mix_mixing"] = mixing
    peers["resize_320x290_to_224_bicubic"] = lambda: F.resize(t320, [224, 224], InterpolationMode.BICUBIC,
                                                              antialias=True)
    peers["hue"] = lambda: F.adjust_hue(t224, HUE)
    peers["grayscale"] = lambda: F.rgb_to_grayscale(t224, num_output_channels=3)
    peers["gaussian_blur_k5"] = lambda: F.gaussian_blur(t224, [5, 5], [BLUR_SIGMA, BLUR_SIGMA])
    peers["gaussian_blur_k23"] = lambda: F.gaussian_blur(t224, [23, 23], [BLUR_SIGMA, BLUR_SIGMA])
    f224 = F.normalize(F.convert_image_dtype(t224, torch.float32), IMAGENET_MEAN, IMAGENET_STD)
    top, left, eh, ew = ERASE_BOX
    peers["random_erasing_pixel"] = lambda: F.erase(f224, top, left, eh, ew,
                                                    torch.empty([3, eh, ew], dtype=torch.float32).normal_(),
                                                    inplace=True)
    peers["random_erasing_const"] = lambda: F.erase(f224, top, left, eh, ew, torch.tensor([0.0])[:, None, None],
                                                    inplace=True)
    from PIL import Image, ImageFilter
    pil224 = Image.fromarray(imgs["224"])
    peers["pil_gaussian_blur_r1.5"] = lambda: pil224.filter(ImageFilter.GaussianBlur(radius=BLUR_SIGMA))
    peers.update(pillow_peers(imgs))
    return peers


def pil_warp_matrix(op, w, h):
    """Pillow's output-to-input matrix of the pil_* row (Image.rotate's, or timm's shear_x)."""
    if op.startswith("pil_shear_x"):
        return [1.0, SHEAR, 0.0, 0.0, 1.0, 0.0]
    r = -math.radians(ROTATE)
    a = [round(math.cos(r), 15), round(math.sin(r), 15), 0.0, round(-math.sin(r), 15), round(math.cos(r), 15), 0.0]
    a[2] = a[0] * -w / 2 + a[1] * -h / 2 + w / 2
    a[5] = a[3] * -w / 2 + a[4] * -h / 2 + h / 2
    return a


def pillow_peers(imgs):
    """The pil_* rows through Pillow (Image.rotate, Image.transform(AFFINE)), as timm applies them."""
    from PIL import Image
    img = Image.fromarray(imgs["224"])
    peers = {}
    for op in PIL_WARP_OPS:
        resample = Image.BICUBIC if op.endswith("bicubic") else Image.BILINEAR
        if op.startswith("pil_rotate"):
            peers[op] = lambda r=resample: img.rotate(ROTATE, resample=r, fillcolor=PIL_FILL)
        else:
            peers[op] = lambda r=resample, m=pil_warp_matrix(op, 224, 224): img.transform(
                img.size, Image.AFFINE, m, resample=r, fillcolor=PIL_FILL)
    return peers


# ---------------------------------------------------------------- OpenCV

def _inverse_affine(w, h, angle, translate, shear, center):
    """torchvision's inverse matrix for F.affine/F.rotate on a tensor, as an
    OpenCV pixel-coordinate inverse map (use with WARP_INVERSE_MAP)."""
    from torchvision.transforms.functional import _get_inverse_affine_matrix
    if center is None:
        center_f = [0.0, 0.0]
    else:
        center_f = [1.0 * (c - s * 0.5) for c, s in zip(center, [w, h])]
    m = _get_inverse_affine_matrix(center_f, angle, [1.0 * t for t in translate], 1.0, shear)
    # torchvision's frame: pixel j at x = j + 0.5 - w/2
    ox, oy = 0.5 - w * 0.5, 0.5 - h * 0.5
    t0 = m[0] * ox + m[1] * oy + m[2] - ox
    t1 = m[3] * ox + m[4] * oy + m[5] - oy
    return np.array([[m[0], m[1], t0], [m[3], m[4], t1]], np.float64)


def opencv_peers(imgs):
    """op → list of (label, fn); the fastest of each list is compared."""
    import cv2
    cv2.setNumThreads(1)
    img, img320, img150 = imgs["224"], imgs["320x290"], imgs["150"]
    h, w = img.shape[:2]
    ident = np.arange(256, dtype=np.int32)

    def lut_of(table):
        return np.clip(table, 0, 255).astype(np.uint8)

    def brightness_table(f):
        return lut_of(np.trunc(np.float32(f) * ident.astype(np.float32)))

    posterize_t = lut_of(ident & (0xFF << (8 - POSTERIZE)) & 0xFF)
    solarize_t = lut_of(np.where(ident.astype(np.float32) < np.float32(SOLARIZE), ident, 255 - ident))
    brightness_t = brightness_table(FACTOR)
    invert_t = lut_of(255 - ident)
    fused_t = brightness_t[solarize_t[posterize_t]]

    mats = {
        "shear_x": _inverse_affine(w, h, 0.0, [0, 0], [math.degrees(math.atan(SHEAR)), 0.0], [0, 0]),
        "shear_y": _inverse_affine(w, h, 0.0, [0, 0], [0.0, math.degrees(math.atan(SHEAR))], [0, 0]),
        "translate_x": _inverse_affine(w, h, 0.0, [int(TRANSLATE), 0], [0.0, 0.0], None),
        "translate_y": _inverse_affine(w, h, 0.0, [0, int(TRANSLATE)], [0.0, 0.0], None),
        "rotate": _inverse_affine(w, h, -ROTATE, [0, 0], [0.0, 0.0], None),  # F.rotate passes -angle
    }
    peers = {}
    for short, m in mats.items():
        for suffix, interp in (("_nearest", cv2.INTER_NEAREST), ("_bilinear", cv2.INTER_LINEAR)):
            flags = interp | cv2.WARP_INVERSE_MAP
            peers[short + suffix] = [(
                "warpAffine(%s)" % ("INTER_NEAREST" if suffix == "_nearest" else "INTER_LINEAR"),
                (lambda m=m, flags=flags: cv2.warpAffine(img, m, (w, h), flags=flags,
                                                         borderMode=cv2.BORDER_CONSTANT, borderValue=0)))]
    peers["rotate_bilinear_via_ops_run"] = peers["rotate_bilinear"]
    for op in PIL_WARP_OPS:  # Pillow's matrix maps pixel centres: shifted by half a pixel each way
        a = pil_warp_matrix(op, w, h)
        m = np.array([[a[0], a[1], a[2] + 0.5 * (a[0] + a[1]) - 0.5],
                      [a[3], a[4], a[5] + 0.5 * (a[3] + a[4]) - 0.5]], np.float64)
        interp = cv2.INTER_CUBIC if op.endswith("bicubic") else cv2.INTER_LINEAR
        peers[op] = [("warpAffine(%s)" % ("INTER_CUBIC" if interp == cv2.INTER_CUBIC else "INTER_LINEAR"),
                      (lambda m=m, flags=interp | cv2.WARP_INVERSE_MAP: cv2.warpAffine(
                          img, m, (w, h), flags=flags, borderMode=cv2.BORDER_CONSTANT, borderValue=PIL_FILL)))]

    peers["brightness"] = [("LUT", lambda: cv2.LUT(img, brightness_t)),
                           ("convertScaleAbs", lambda: cv2.convertScaleAbs(img, alpha=FACTOR))]

    def color():
        gray = cv2.cvtColor(img, cv2.COLOR_RGB2GRAY)
        return cv2.addWeighted(img, FACTOR, cv2.cvtColor(gray, cv2.COLOR_GRAY2RGB), 1.0 - FACTOR, 0)
    peers["color"] = [("cvtColor x2+addWeighted", color)]

    def contrast_aw():
        mean = cv2.mean(cv2.cvtColor(img, cv2.COLOR_RGB2GRAY))[0]
        return cv2.addWeighted(img, FACTOR, img, 0.0, (1.0 - FACTOR) * mean)

    def contrast_lut():
        mean = cv2.mean(cv2.cvtColor(img, cv2.COLOR_RGB2GRAY))[0]
        t = lut_of(np.trunc(np.float32(FACTOR) * ident + np.float32((1.0 - FACTOR) * mean)))
        return cv2.LUT(img, t)
    peers["contrast"] = [("cvtColor+mean+addWeighted", contrast_aw),
                         ("cvtColor+mean+LUT", contrast_lut)]

    kernel = np.array([[1, 1, 1], [1, 5, 1], [1, 1, 1]], np.float32) / 13.0

    def sharpness():
        blurred = cv2.filter2D(img, -1, kernel, borderType=cv2.BORDER_REPLICATE)
        return cv2.addWeighted(img, FACTOR, blurred, 1.0 - FACTOR, 0)
    peers["sharpness"] = [("filter2D+addWeighted", sharpness)]

    peers["posterize"] = [("LUT", lambda: cv2.LUT(img, posterize_t)),
                          ("bitwise_and", lambda: cv2.bitwise_and(
                              img, (int(posterize_t[255]),) * 3 + (0,)))]
    peers["solarize"] = [("LUT", lambda: cv2.LUT(img, solarize_t))]

    def autocontrast_lut():
        t = np.empty((256, 1, 3), np.uint8)
        for c, plane in enumerate(cv2.split(img)):
            lo, hi = cv2.minMaxLoc(plane)[:2]
            if hi > lo:
                t[:, 0, c] = lut_of(np.trunc((ident - lo) * np.float32(255.0 / (hi - lo))))
            else:
                t[:, 0, c] = ident
        return cv2.LUT(img, t)

    def autocontrast_normalize():
        return cv2.merge([cv2.normalize(p, None, 0, 255, cv2.NORM_MINMAX) for p in cv2.split(img)])
    peers["autocontrast"] = [("split+minMaxLoc+LUT", autocontrast_lut),
                             ("split+normalize(MINMAX)+merge", autocontrast_normalize)]
    peers["equalize"] = [("split+equalizeHist x3+merge",
                          lambda: cv2.merge([cv2.equalizeHist(p) for p in cv2.split(img)]))]
    peers["invert"] = [("LUT", lambda: cv2.LUT(img, invert_t)), ("bitwise_not", lambda: cv2.bitwise_not(img))]
    peers["fused_posterize_solarize_brightness"] = [("LUT (composed table)", lambda: cv2.LUT(img, fused_t))]

    peers["resize_320x290_to_224_antialias"] = [
        ("resize(INTER_AREA)", lambda: cv2.resize(img320, (224, 224), interpolation=cv2.INTER_AREA))]
    peers["resize_320x290_to_224_bilinear"] = [
        ("resize(INTER_LINEAR)", lambda: cv2.resize(img320, (224, 224), interpolation=cv2.INTER_LINEAR))]
    peers["resize_150_to_224_upscale"] = [
        ("resize(INTER_LINEAR)", lambda: cv2.resize(img150, (224, 224), interpolation=cv2.INTER_LINEAR))]
    peers["hflip"] = [("flip", lambda: cv2.flip(img, 1))]

    mean = np.array(IMAGENET_MEAN, np.float32)
    std = np.array(IMAGENET_STD, np.float32)
    out = np.empty((3, h, w), np.float32)

    def normalize_numpy():
        return np.ascontiguousarray(((img.astype(np.float32) / 255.0 - mean) / std).transpose(2, 0, 1))

    def normalize_cv2():
        for c, plane in enumerate(cv2.split(img)):
            s = 1.0 / (255.0 * IMAGENET_STD[c])
            cv2.addWeighted(plane, s, plane, 0.0, -IMAGENET_MEAN[c] / IMAGENET_STD[c], dst=out[c],
                            dtype=cv2.CV_32F)
        return out
    peers["normalize_nchw_f32"] = [("split+addWeighted(CV_32F) per plane", normalize_cv2),
                                   ("numpy astype/255-mean)/std+transpose", normalize_numpy)]

    def mixing():
        mix = cv2.addWeighted(img, MIX_M0, img, 0.0, 0.0, dtype=cv2.CV_32F)
        for wt in MIX_W:
            mix = cv2.addWeighted(mix, 1.0, img, wt, 0.0, dtype=cv2.CV_32F)
        return mix.astype(np.uint8)   # numpy: truncation, as torch's .to(uint8)
    peers["aug_mix_mixing"] = [("addWeighted(CV_32F) x4+astype", mixing)]
    peers["resize_320x290_to_224_bicubic"] = [
        ("resize(INTER_CUBIC)", lambda: cv2.resize(img320, (224, 224), interpolation=cv2.INTER_CUBIC))]

    def hue():
        hsv = cv2.cvtColor(img, cv2.COLOR_RGB2HSV_FULL)
        hsv[..., 0] += np.uint8(round(HUE * 256) % 256)  # wraps around as a hue does
        return cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB_FULL)
    peers["hue"] = [("cvtColor(HSV_FULL)+add+cvtColor", hue)]
    peers["grayscale"] = [("cvtColor(GRAY)+cvtColor(GRAY2RGB)",
                           lambda: cv2.cvtColor(cv2.cvtColor(img, cv2.COLOR_RGB2GRAY), cv2.COLOR_GRAY2RGB))]
    for k in (5, 23):
        peers[f"gaussian_blur_k{k}"] = [(f"GaussianBlur({k}x{k}, REFLECT_101)", lambda k=k: cv2.GaussianBlur(
            img, (k, k), BLUR_SIGMA, borderType=cv2.BORDER_REFLECT_101))]
    plane = np.zeros((3, h, w), np.float32)
    top, left, eh, ew = ERASE_BOX

    noise = np.empty((eh, ew), np.float32)

    def erase_noise():
        for c in range(3):
            cv2.randn(noise, 0.0, 1.0)
            plane[c, top:top + eh, left:left + ew] = noise
        return plane
    peers["random_erasing_pixel"] = [("randn into the box", erase_noise)]

    def erase_const():
        plane[:, top:top + eh, left:left + ew] = 0.0
        return plane
    peers["random_erasing_const"] = [("numpy slice fill", erase_const)]
    # Pillow's blur is three box passes per axis (3 wide at radius 1.5)
    peers["pil_gaussian_blur_r1.5"] = [
        ("GaussianBlur(sigma 1.5, REPLICATE)", lambda: cv2.GaussianBlur(img, (0, 0), BLUR_SIGMA,
                                                                       borderType=cv2.BORDER_REPLICATE)),
        ("blur(3x3, REPLICATE) x3", lambda: cv2.blur(cv2.blur(cv2.blur(img, (3, 3), borderType=cv2.BORDER_REPLICATE),
                                                              (3, 3), borderType=cv2.BORDER_REPLICATE),
                                                     (3, 3), borderType=cv2.BORDER_REPLICATE))]
    return peers


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ops-bench", default="build/ops_bench", help="the built bench/ops_bench.c")
    ap.add_argument("--target-ms", type=float, default=50.0, help="length of one timed run")
    ap.add_argument("--runs", type=int, default=7, help="runs per op; the median is reported")
    ap.add_argument("--repeats", type=int, default=1,
                    help="repeat the whole comparison; the median over repeats is reported")
    ap.add_argument("--rounds", type=int, default=3,
                    help="rounds per op and repeat, each fusionflow then its peers back to back; "
                         "ff/cv2 is the median of the rounds' ratios")
    ap.add_argument("--only", default="", help="comma-separated substrings of op names")
    ap.add_argument("--peers", default="fusionflow,torchvision,opencv")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--json", action="store_true",
                    help="print everything as JSON on stdout (the table goes to stderr)")
    args = ap.parse_args()
    if args.runs < 1 or args.repeats < 1 or args.rounds < 1 or args.target_ms <= 0:
        ap.error("--runs, --repeats, --rounds and --target-ms must be positive")
    peers_wanted = {p.strip() for p in args.peers.split(",") if p.strip()}
    target_s = args.target_ms / 1000.0
    only = [s for s in args.only.split(",") if s]
    ops = [o for o in OPS if not only or any(s in o for s in only)]

    if not (os.path.isfile(args.ops_bench) and os.access(args.ops_bench, os.X_OK)):
        sys.exit("ops_compare: no ops_bench at %s (build it: see bench/README.md)" % args.ops_bench)
    skipped = {}
    image_dir = tempfile.mkdtemp(prefix="ff-ops-")
    try:
        # ops_bench writes the test images the peers use.
        run_ops_bench(args, image_dir)
        imgs = load_images(image_dir)
    finally:
        shutil.rmtree(image_dir, ignore_errors=True)

    tv_fns, cv_fns = {}, {}
    if "torchvision" in peers_wanted:
        try:
            tv_fns = torchvision_peers(imgs)
        except ImportError as e:
            skipped["torchvision"] = "torch/torchvision missing (%s); use /usr/bin/python3" % e
    if "opencv" in peers_wanted:
        try:
            cv_fns = opencv_peers(imgs)
        except ImportError as e:
            skipped["opencv"] = "cv2 missing (%s); apt-get install -y python3-opencv" % e
    for name, why in skipped.items():
        log("skipping %s: %s" % (name, why))
    # One untimed pass over every peer first: glibc's malloc serves blocks
    # above its mmap threshold (128 KiB at start; a 224x224x3 image is 147 KiB)
    # with fresh mmaps, page faults included, until freeing such a block raises
    # the threshold. Without this pass a peer's figure would depend on which
    # ops ran before it (2x for torchvision's affine ops).
    for op in ops:
        for fn in ([tv_fns[op]] if op in tv_fns else []) + [f for _, f in cv_fns.get(op, [])]:
            for _ in range(3):
                fn()

    # one dict per round (of every op) for each side; the rounds' ratios per op
    ff_runs, tv_runs, cv_runs, round_ratios = [], [], [], {}
    for rep in range(args.repeats):
        for rnd in range(args.rounds):
            ff_runs.append({}), tv_runs.append({}), cv_runs.append({})
        for op in ops:
            log("op %s: %d round(s)%s" % (op, args.rounds, ", repeat %d/%d" % (rep + 1, args.repeats)
                                              if args.repeats > 1 else ""))
            for rnd in range(args.rounds):
                k = rep * args.rounds + rnd
                ff, tv, cv = ff_runs[k], tv_runs[k], cv_runs[k]
                if "fusionflow" in peers_wanted:
                    ff.update(run_ops_bench(args, op=op))
                if op in tv_fns:
                    tv[op] = time_call(tv_fns[op], target_s, args.runs)
                    log("torchvision %-36s %9.2f us" % (op, tv[op]["us"]))
                cands = {}
                for label, fn in cv_fns.get(op, []):
                    cands[label] = time_call(fn, target_s, args.runs)
                    log("opencv      %-36s %9.2f us  %s" % (op, cands[label]["us"], label))
                if cands:
                    cv[op] = cands
                if op in ff and cands:
                    ratio = ff[op]["us"] / min(c["us"] for c in cands.values())
                    round_ratios.setdefault(op, []).append(ratio)
                    log("fusionflow  %-36s %9.2f us  ff/cv2 %.2f (round %d)" % (op, ff[op]["us"], ratio, k + 1))

    # the median over the repeats of each op's (and each OpenCV call's) median
    def merge(runs_, keys):
        out = {}
        for k in keys:
            got = [r[k] for r in runs_ if k in r]
            if got:
                out[k] = dict(got[0], us=statistics.median(g["us"] for g in got),
                              repeats_us=[g["us"] for g in got])
        return out
    ff = merge(ff_runs, ops) if "fusionflow" in peers_wanted else {}
    tv = merge(tv_runs, ops)
    cv = {}
    for op in ops:
        cands = merge([r[op] for r in cv_runs if op in r], [lb for lb, _ in cv_fns.get(op, [])])
        if not cands:
            continue
        best = min(cands, key=lambda k: cands[k]["us"])
        cv[op] = dict(cands[best], call=best, candidates=cands)

    rows = []
    for op in ops:
        f = ff.get(op, {}).get("us")
        t = tv.get(op, {}).get("us")
        c = cv.get(op, {}).get("us")
        ratio = statistics.median(round_ratios[op]) if op in round_ratios else None
        rows.append({"op": op, "fusionflow_us": f, "torchvision_us": t, "opencv_us": c,
                     "opencv_call": cv.get(op, {}).get("call"),
                     "ff_over_opencv": ratio, "ff_over_torchvision": f / t if f is not None and t else None,
                     "meets_opencv": (ratio <= 1.0) if ratio is not None else None,
                     "ff_over_opencv_rounds": round_ratios.get(op, [])})

    def fmt(v):
        return "%10.1f" % v if v is not None else "%10s" % "-"
    lines = ["", "%-36s %10s %10s %10s %8s %-10s %s" % (
        "op (224x224 RGB, 1 thread)", "ff us", "tv us", "cv2 us", "ff/cv2", "<= cv2?", "OpenCV call"),
        "-" * 122]
    for r in rows:
        ratio = r["ff_over_opencv"]
        verdict = "-" if ratio is None else ("yes" if ratio <= 1.0 else "no +%.0f%%" % (100 * (ratio - 1)))
        lines.append("%-36s %s %s %s %8s %-10s %s" % (
            r["op"], fmt(r["fusionflow_us"]), fmt(r["torchvision_us"]), fmt(r["opencv_us"]),
            "%.2f" % ratio if ratio is not None else "-", verdict, r["opencv_call"] or ""))
    judged = [r for r in rows if r["meets_opencv"] is not None]
    if judged:
        lines.append("")
        lines.append("%d of %d ops with an OpenCV equivalent are at least as fast as it"
                     % (sum(r["meets_opencv"] for r in judged), len(judged)))
    print("\n".join(lines), file=sys.stderr if args.json else sys.stdout)

    if args.json:
        versions = {}
        for mod in ("torch", "torchvision", "cv2", "numpy"):
            try:
                versions[mod] = __import__(mod).__version__
            except ImportError:
                versions[mod] = None
        doc = {"config": {"target_ms": args.target_ms, "runs": args.runs, "repeats": args.repeats,
                          "rounds": args.rounds,
                          "ops_bench": args.ops_bench,
                          "image": "224x224 RGB uint8 (resize sources 320x290, 150x150)",
                          "versions": versions, "affinity": sorted(os.sched_getaffinity(0))},
               "rows": rows, "fusionflow": ff, "torchvision": tv, "opencv": cv,
               "skipped": skipped}
        print(json.dumps(doc, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
