#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpus: OUT/<target>/<name>, a few hundred
bytes each, made afresh at build time (Pillow for the images, small writers
of our own for what Pillow cannot write: Adam7 interlacing, 16-bit RGB PNG,
16-bit BMP, plain and odd-maxval Netpbm). Usage: make-seeds.py OUT"""
import io
import os
import struct
import sys
import zlib

from PIL import Image

PIPELINES = [
    "decode",
    "decode(dct_scale=false) | center_crop(size=4)",
    "decode | resize(size=7) | center_crop(size=(5, 3))",
    "decode | resize(size=(6, 9), antialias=false) | normalize(mean=imagenet, std=imagenet)",
    "decode | random_resized_crop(size=8, scale=(0.08, 1.0), ratio=(0.75, 1.333)) | random_horizontal_flip",
    "decode | crop(top=-2, left=3, height=9, width=4) | random_vertical_flip(p=1) | to_dtype(dtype=float32)",
    "decode | center_crop(size=8) | rotate(angle=30, interpolation=bilinear, fill=(1, 2, 3)) | shear_x(shear=0.3)",
    "decode | center_crop(size=8) | translate_x(pixels=2) | translate_y(pixels=-3, interpolation=nearest)",
    "decode | center_crop(size=8) | brightness(factor=1.5) | color(factor=0.2) | contrast(factor=2) | sharpness(factor=3)",
    "decode | center_crop(size=8) | posterize(bits=3) | solarize(threshold=100) | autocontrast | equalize | invert",
    "decode | center_crop(size=8) | rand_augment(num_ops=3, magnitude=12, num_magnitude_bins=31)",
    "decode | center_crop(size=8) | trivial_augment_wide",
    "decode | center_crop(size=8) | auto_augment(policy=svhn)",
    "decode | center_crop(size=8) | aug_mix(severity=5, mixture_width=3, chain_depth=2, alpha=0.5, all_ops=true)",
    "decode | resize(size=8) | identity | shear_y(shear=-0.5)",
]

LISTS = [
    b"0\t0\n1\t1\n",
    b"# a comment\n\n/proc/self/exe\t3\n2\t0\r\n",
    b"/nonexistent/a.jpg\t1\n",
    b"0\t9223372036854775807\n",
    b"\xef\xbb\xbf0\t0\n",
    b"0\t1\t2\n0\n\t5\n",
]


def chunk(kind, body):
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def png_raw(width, height, color_type, depth, rows, interlace=0):
    """A PNG from rows of raw pixel bytes (filter 0 on every row)."""
    channels = {0: 1, 2: 3, 4: 2, 6: 4}[color_type]
    bpp = channels * depth // 8
    if interlace:  # Adam7: seven reduced images, one after the other
        passes = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]
        data = b""
        for x0, y0, dx, dy in passes:
            for y in range(y0, height, dy):
                line = b"".join(rows[y][x * bpp:(x + 1) * bpp] for x in range(x0, width, dx))
                if line:
                    data += b"\0" + line
    else:
        data = b"".join(b"\0" + r for r in rows)
    ihdr = struct.pack(">IIBBBBB", width, height, depth, color_type, 0, 0, interlace)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(data)) + chunk(b"IEND", b"")


def gradient(mode, w, h):
    img = Image.new("RGB", (w, h))
    img.putdata([((x * 37) % 256, (y * 59) % 256, ((x + y) * 23) % 256) for y in range(h) for x in range(w)])
    return img.convert(mode)


def encode(img, fmt, **kw):
    buf = io.BytesIO()
    img.save(buf, fmt, **kw)
    return buf.getvalue()


def images():
    out = {
        "baseline.jpg": encode(gradient("RGB", 8, 8), "JPEG", quality=90),
        "progressive.jpg": encode(gradient("RGB", 17, 13), "JPEG", quality=75, progressive=True),
        "gray.jpg": encode(gradient("L", 16, 9), "JPEG"),
        "444.jpg": encode(gradient("RGB", 9, 7), "JPEG", subsampling=0, optimize=True),
        "cmyk.jpg": encode(gradient("CMYK", 8, 8), "JPEG"),
        "rgb.png": encode(gradient("RGB", 5, 3), "PNG"),
        "rgba.png": encode(gradient("RGBA", 4, 4), "PNG"),
        "gray.png": encode(gradient("L", 7, 5), "PNG"),
        "gray-alpha.png": encode(gradient("LA", 3, 6), "PNG"),
        "palette.png": encode(gradient("RGB", 6, 6).convert("P", palette=Image.ADAPTIVE, colors=8), "PNG",
                              transparency=0),
        "gray16.png": encode(gradient("L", 8, 8).convert("I;16"), "PNG"),
        "tall.png": encode(gradient("RGB", 1, 64), "PNG"),
    }
    rows = [bytes((x * 40 + y * 3) % 256 for x in range(7 * 3)) for y in range(5)]
    out["interlaced.png"] = png_raw(7, 5, 2, 8, rows, interlace=1)
    rows16 = [bytes((x * 11 + y) % 256 for x in range(4 * 6)) for y in range(3)]
    out["rgb16.png"] = png_raw(4, 3, 2, 16, rows16)
    out.update(other_formats())
    return out


def bmp_16bit(w, h, masks=None):
    """A 16-bit BMP (5-5-5 without masks, else BI_BITFIELDS), which Pillow cannot write."""
    row = (w * 2 + 3) // 4 * 4
    pixels = b"".join(b"".join(struct.pack("<H", (x * 1234 + y * 77) & 0xFFFF) for x in range(w)).ljust(row, b"\0")
                      for y in range(h))
    extra = struct.pack("<3I", *masks) if masks else b""
    info = struct.pack("<IiiHHIIiiII", 40, w, h, 1, 16, 3 if masks else 0, len(pixels), 0, 0, 0, 0)
    offset = 14 + len(info) + len(extra)
    return b"BM" + struct.pack("<IHHI", offset + len(pixels), 0, 0, offset) + info + extra + pixels


def other_formats():
    """WebP, TIFF, PBM/PGM/PPM and BMP: torchvision's other extensions."""
    anim = [gradient("RGB", 6, 5), gradient("RGB", 6, 5).rotate(90)]
    return {
        "lossy.webp": encode(gradient("RGB", 9, 7), "WEBP", quality=80),
        "lossless-alpha.webp": encode(gradient("RGBA", 5, 4), "WEBP", lossless=True),
        "anim.webp": encode(anim[0], "WEBP", save_all=True, append_images=anim[1:], duration=10),
        "rgb.tif": encode(gradient("RGB", 6, 5), "TIFF"),
        "lzw-gray.tif": encode(gradient("L", 7, 3), "TIFF", compression="tiff_lzw"),
        "palette.tif": encode(gradient("RGB", 4, 4).convert("P", palette=Image.ADAPTIVE, colors=4), "TIFF"),
        "bilevel.tif": encode(gradient("1", 9, 2), "TIFF", compression="group4"),
        "gray16.tif": encode(gradient("L", 3, 3).convert("I;16"), "TIFF"),
        "ycbcr-jpeg.tif": encode(gradient("RGB", 16, 8), "TIFF", compression="jpeg"),
        "rgb.ppm": encode(gradient("RGB", 5, 4), "PPM"),
        "gray.pgm": encode(gradient("L", 4, 3), "PPM"),
        "bilevel.pbm": encode(gradient("1", 11, 2), "PPM"),
        "plain.ppm": b"P3\n# plain\n2 2\n1000\n0 1 2 3 4 5\n999 1000 7 8 9 10\n",
        "plain.pbm": b"P1 3 2 101\n010\n",
        "gray16.pgm": b"P5 2 1 300\n" + bytes([0, 7, 1, 44]),
        "rgb.bmp": encode(gradient("RGB", 5, 3), "BMP"),
        "palette.bmp": encode(gradient("RGB", 5, 3).convert("P", palette=Image.ADAPTIVE, colors=16), "BMP"),
        "bilevel.bmp": encode(gradient("1", 9, 3), "BMP"),
        "rgba.bmp": encode(gradient("RGBA", 3, 3), "BMP"),
        "555.bmp": bmp_16bit(3, 2),
        "565.bmp": bmp_16bit(3, 2, (0xF800, 0x7E0, 0x1F)),
    }


def write(folder, name, data):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


def main():
    root = sys.argv[1]
    imgs = images()
    for name, data in imgs.items():
        write(os.path.join(root, "fuzz_decode"), name, data)
    for i, p in enumerate(PIPELINES):
        write(os.path.join(root, "fuzz_pipeline"), f"pipeline-{i:02d}.txt", p.encode())
    for i, text in enumerate(LISTS):
        write(os.path.join(root, "fuzz_list"), f"list-{i:02d}.txt", text)
    # every pipeline once, on images taken in turn
    names = sorted(imgs)
    for i, p in enumerate(PIPELINES):
        name = names[i % len(names)]
        write(os.path.join(root, "fuzz_decode_ops"), f"{i:02d}-{name}", p.encode() + b"\0" + imgs[name])
    with open(os.path.join(root, ".complete"), "w"):
        pass


if __name__ == "__main__":
    main()
