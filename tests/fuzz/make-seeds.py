#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpus: OUT/<target>/<name>, a few hundred
bytes each, made afresh at build time (Pillow for the images, small writers
of our own for what Pillow cannot write: Adam7 interlacing, 16-bit RGB PNG,
16-bit BMP, plain and odd-maxval Netpbm, hostile headers; tarfile for
shards; the index cache, policy and recipe texts by hand). Usage:
make-seeds.py OUT"""
import gzip
import io
import os
import struct
import sys
import tarfile
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
    """A 16-bit BMP (5-5-5 without masks, else BI_BITFIELDS), which Pillow cannot write; h < 0: top-down."""
    row = (w * 2 + 3) // 4 * 4
    pixels = b"".join(b"".join(struct.pack("<H", (x * 1234 + y * 77) & 0xFFFF) for x in range(w)).ljust(row, b"\0")
                      for y in range(abs(h)))
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


HOSTILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "hostile")


def hostile_images():
    """Headers that declare more than their bytes hold (tests/data/hostile and by hand)."""
    planar = Image.new("RGB", (5, 4), (10, 20, 30))
    out = {
        "rows-of-gigabytes.tif": open(os.path.join(HOSTILE, "tiff-128-bytes-rows-of-2.7gb.tif"), "rb").read(),
        "planar.tif": encode(planar, "TIFF", planar_configuration=2),
        "cmyk.tif": encode(planar.convert("CMYK"), "TIFF"),
        "huge-plain.pgm": b"P2 9000 9000 255\n1 2 3\n",
        "huge-plain.pbm": b"P1 9000 9000\n0101",
        "huge-raw.ppm": b"P6 9000 9000 255\n\x01\x02\x03",
        "top-down.bmp": bmp_16bit(3, -2),
    }
    return out


def tar_of(members, fmt=tarfile.USTAR_FORMAT):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as t:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def shards(imgs):
    """Streamed shards as they come off the wire: good, odd and broken ones."""
    jpg, png = imgs["baseline.jpg"], imgs["rgb.png"]
    good = tar_of([("a/s0.jpg", jpg), ("a/s0.cls", b"3"), ("a/s1.png", png), ("a/s1.cls", b" 1_0\n")])
    return {
        "good.tar": good,
        "good.tar.gz": gzip.compress(good),
        "pax-long-names.tar": tar_of([("d" * 150 + "/s.jpg", jpg), ("d" * 150 + "/s.cls", b"0")], tarfile.PAX_FORMAT),
        "gnu.tar": tar_of([("s.webp", imgs["lossy.webp"]), ("s.cls", b"2"), ("s.json", b"{}")], tarfile.GNU_FORMAT),
        "problems.tar": tar_of([("x.jpg", jpg), ("y.jpg", jpg), ("y.cls", b"-1"), ("z.cls", b"4"), ("x.jpg", jpg),
                                ("x.cls", b"1"), ("w.jpg", b"not an image at all"), ("w.cls", b"5"), ("README", b"")]),
        "truncated.tar": good[: len(good) // 2],
    }


def cache_texts():
    """Index cache files for the shard and stat fuzz_tar_cache parses against."""
    head = ("fusionflow-tar-index 3\npath /data/train-000.tar\nstat 1048576 1700000000 5 1700000001 7 1234 2049\n"
            "ignored 2\n")
    body = head + "s\t512\t1000\t3\ta/x.jpg\ns\t3072\t20\t0\tb.png\nb\t/data/train-000.tar:c.jpg: no c.cls member\n"
    h = 1469598103934665603
    for byte in body.encode():
        h = ((h ^ byte) * 1099511628211) % (1 << 64)
    return {"body.idx": body.encode(), "signed.idx": (body + "end %016x\n" % h).encode(),
            "stale-v2.idx": b"fusionflow-tar-index 2\npath /data/train-000.tar\nstat 1048576 1700000000 5 1234\n"
                            b"ignored 0\ns\t512\t10\t9223372036854775807\tx.jpg\nend\n",
            "empty-signed.idx": (head + "end %016x\n" % 0).encode()}


POLICIES = [
    b'{"fusionflow_policy": 1, "num_magnitude_bins": 10, "comment": "x", "sub_policies": ['
    b'[{"op": "Posterize", "p": 0.4, "magnitude": 8}, {"op": "Rotate", "p": 0.6, "magnitude": 9}],'
    b'[{"op": "Equalize", "p": 0.8}, {"op": "Equalize", "p": 0.6}]]}',
    b'{"fusionflow_policy": 1, "num_magnitude_bins": 13, "layers": ['
    b'[{"op": "Identity", "p": 0.30}, {"op": "Rotate", "p": 0.05, "magnitude": 12},'
    b' {"op": "ShearX", "p": 0.02, "arg": 0.15, "random_sign": true}],'
    b'[{"op": "TranslateY", "p": 0.5, "arg": 0.1, "of_size": true, "random_sign": true},'
    b' {"op": "brightness", "p": 0.5, "arg": 1.3}, {"op": "Hue", "p": 0, "arg": 0.1}]]}',
    b'{"fusionflow_policy": 2, "sub_policies": []}',
    b'{"fusionflow_policy": 1, "sub_policies": [[{"op": "Warp", "p": 2, "magnitude": -1, "extra": null}]]}',
    b'[1, 2, {"a": "\\u00e9"}',
]

RECIPES = [
    "decode | random_resized_crop(size=224, interpolation=bicubic) | random_horizontal_flip"
    " | timm_rand_augment(config=\"rand-m9-mstd0.5-inc1\", interpolation=bicubic) | normalize(mean=imagenet, std=imagenet)"
    " | random_erasing(p=0.25, mode=pixel, max_count=1) | mixup_cutmix(mixup_alpha=0.8, cutmix_alpha=1.0, prob=1.0,"
    " switch_prob=0.5, mode=batch, label_smoothing=0.1, num_classes=1000)",
    "decode || random_resized_crop(size=224, scale=(0.4, 1)) | random_horizontal_flip | normalize(mean=imagenet, "
    "std=imagenet) || 8 x random_resized_crop(size=96, scale=(0.05, 0.4)) | random_apply(p=0.5, "
    "[gaussian_blur(sigma=(0.1, 2.0), semantics=pil)]) | to_dtype(dtype=float32)",
    "decode || 2 x random_resized_crop(size=32) | random_grayscale(p=0.2) | random_apply(p=0.8, "
    "[color_jitter(brightness=0.8, contrast=0.8, saturation=0.8, hue=0.2)]) | to_dtype(dtype=float32)",
    "decode | resize(size=8) | mixup_cutmix(num_classes=1000, num_classes=1000)",
    "num_classes=1000",
]


def write(folder, name, data):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


def main():
    root = sys.argv[1]
    imgs = images()
    for name, data in list(imgs.items()) + list(hostile_images().items()):
        write(os.path.join(root, "fuzz_decode"), name, data)
    for name, data in shards(imgs).items():
        write(os.path.join(root, "fuzz_tar_stream"), name, data)
    for name, data in cache_texts().items():
        write(os.path.join(root, "fuzz_tar_cache"), name, data)
    for i, data in enumerate(POLICIES):
        write(os.path.join(root, "fuzz_policy"), f"policy-{i:02d}.json", data)
    for i, text in enumerate(RECIPES):  # the first byte: num_classes and the buffer's size
        for first in (3, 0x7B):
            write(os.path.join(root, "fuzz_recipe"), f"recipe-{i:02d}-{first:02x}.txt", bytes([first]) + text.encode())
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
