"""How close a DCT-scaled random resized crop comes to torchvision's.

For each of the first --images JPEGs of an image folder it draws --boxes
RandomResizedCrop boxes with torchvision's own get_params (seeded), runs
`fusionflow augment` with `decode(dct_scale=...) | crop(box) | resize(224)`
(the planner's lowering of random_resized_crop) and compares the result with
torchvision's reference: the full decode (Pillow, as ImageFolder loads it)
and TF.resized_crop, antialiased. It prints the PSNR over the crops that the
decoder DCT-scaled, with and without DCT scaling, and the share of draws
that were scaled. --cli takes several binaries (e.g. a build before and after
a change) and reports each.

    $(scripts/test-venv.sh) bench/dct_box.py --data build/demo-data --cli build/fusionflow
"""
import argparse
import os
import subprocess
import tempfile

import numpy as np
import torch
import torchvision.transforms as T
import torchvision.transforms.functional as TF
from PIL import Image

SIZE = 224


def jpegs(root, n):
    out = []
    for cls in sorted(os.listdir(root)):
        d = os.path.join(root, cls)
        if os.path.isdir(d):
            out += [os.path.join(d, f) for f in sorted(os.listdir(d)) if f.lower().endswith((".jpg", ".jpeg"))]
    return out[:n]


def mse(a, b):
    return float(((a.astype(np.float64) - b.astype(np.float64)) ** 2).mean())


def psnr_of(total_mse, count):
    return 10 * np.log10(255.0 ** 2 / (total_mse / count)) if count and total_mse else float("inf")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--cli", nargs="+", required=True)
    ap.add_argument("--images", type=int, default=100)
    ap.add_argument("--boxes", type=int, default=4)
    args = ap.parse_args()
    torch.manual_seed(0)
    draws = []
    for path in jpegs(args.data, args.images):
        with Image.open(path) as im:
            full = torch.from_numpy(np.array(im.convert("RGB"))).permute(2, 0, 1)
        for _ in range(args.boxes):
            top, left, h, w = T.RandomResizedCrop.get_params(full, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3))
            ref = TF.resized_crop(full, top, left, h, w, [SIZE, SIZE], antialias=True).permute(1, 2, 0).numpy()
            draws.append((path, (top, left, h, w), ref))
    scaled = [d for d in draws if d[1][2] >= 2 * SIZE and d[1][3] >= 2 * SIZE]  # the decoder reduces these
    print(f"{len(draws)} draws on {args.images} images, {len(scaled)} DCT-scaled ({100 * len(scaled) / len(draws):.1f}%)")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out.png")
        for cli in args.cli:
            for dct in ("true", "false"):
                total, worst = 0.0, float("inf")
                for path, (top, left, h, w), ref in scaled:
                    pipeline = (f"decode(dct_scale={dct}) | crop(top={top}, left={left}, height={h}, width={w})"
                                f" | resize(size=({SIZE}, {SIZE}))")
                    subprocess.run([cli, "augment", path, out, "--pipeline", pipeline], check=True,
                                   capture_output=True)
                    with Image.open(out) as im:
                        e = mse(np.asarray(im.convert("RGB")), ref)
                    total += e
                    worst = min(worst, psnr_of(e, 1))
                print(f"{cli} dct_scale={dct}: PSNR {psnr_of(total, len(scaled)):.2f} dB over the scaled draws "
                      f"(worst draw {worst:.2f} dB)")


if __name__ == "__main__":
    main()
