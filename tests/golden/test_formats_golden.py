"""torchvision's other image formats (WebP, TIFF, PBM/PGM/PPM, BMP) against
Pillow, torchvision's default loader: every kind Pillow writes (and, written
here byte by byte, the kinds it reads but does not write: plain Netpbm, odd
maxvals, 16-bit BMP) must decode to Pillow's open + convert('RGB'), pixel for
pixel. The decoder goes by the content: a file whose extension lies decodes
as what it holds."""
import struct

import numpy as np
import pytest
from PIL import Image

from test_codec_golden import H, W, ff_decode, pil_rgb, save, test_pixels


def rgb():
    return Image.fromarray(test_pixels(3))


def rgba():
    return Image.fromarray(test_pixels(4))


def gray():
    return Image.fromarray(test_pixels(1)[..., 0])


def palette(colors=256):
    return rgb().convert("P", palette=Image.ADAPTIVE, colors=colors)


def bilevel():
    return gray().convert("1")


FORMATS = {
    "lossy.webp": lambda: (rgb(), {"quality": 80}),
    "lossy-alpha.webp": lambda: (rgba(), {"quality": 80}),
    "lossless.webp": lambda: (rgb(), {"lossless": True}),
    "lossless-alpha.webp": lambda: (rgba(), {"lossless": True}),
    "gray.webp": lambda: (gray(), {"quality": 90}),
    "rgb.tif": lambda: (rgb(), {}),
    "rgb-lzw.tif": lambda: (rgb(), {"compression": "tiff_lzw"}),
    "rgb-deflate.tif": lambda: (rgb(), {"compression": "tiff_adobe_deflate"}),
    "rgb-packbits.tiff": lambda: (rgb(), {"compression": "packbits"}),
    "rgba.tif": lambda: (rgba(), {}),
    "gray.tif": lambda: (gray(), {}),
    "gray-alpha.tif": lambda: (gray().convert("LA"), {}),
    "palette.tif": lambda: (palette(), {}),
    "palette16.tif": lambda: (palette(16), {}),
    "bilevel.tif": lambda: (bilevel(), {}),
    "bilevel-g4.tif": lambda: (bilevel(), {"compression": "group4"}),
    "gray16.tif": lambda: (Image.fromarray(test_pixels(1, dtype=np.uint16)[..., 0] // 200), {}),
    "cmyk.tif": lambda: (rgb().convert("CMYK"), {}),
    "rgb.ppm": lambda: (rgb(), {}),
    "gray.pgm": lambda: (gray(), {}),
    "gray16.pgm": lambda: (Image.fromarray(test_pixels(1, dtype=np.uint16)[..., 0] // 200), {}),
    "bilevel.pbm": lambda: (bilevel(), {}),
    "rgb.bmp": lambda: (rgb(), {}),
    "rgba.bmp": lambda: (rgba(), {}),
    "gray.bmp": lambda: (gray(), {}),
    "palette.bmp": lambda: (palette(), {}),
    "palette16.bmp": lambda: (palette(16), {}),
    "bilevel.bmp": lambda: (bilevel(), {}),
}


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_format_equals_pillow_convert_rgb(tmp_path, name):
    im, kw = FORMATS[name]()
    path = save(tmp_path, name, im, **kw)
    np.testing.assert_array_equal(ff_decode(path), pil_rgb(path))


def test_ycbcr_jpeg_tiff_equals_pillow(tmp_path):
    """JPEG-in-TIFF is YCbCr: both go through libtiff's RGBA interface and libjpeg."""
    path = save(tmp_path, "ycbcr.tif", rgb(), compression="jpeg")
    np.testing.assert_array_equal(ff_decode(path), pil_rgb(path))


def test_animated_webp_gives_its_first_frame(tmp_path):
    frames = [rgb(), rgb().transpose(Image.Transpose.FLIP_LEFT_RIGHT)]
    path = save(tmp_path, "anim.webp", frames[0], save_all=True, append_images=frames[1:], lossless=True)
    with Image.open(path) as im:
        assert im.n_frames == 2
    np.testing.assert_array_equal(ff_decode(path), pil_rgb(path))


def test_region_of_every_format_is_the_full_decode_cropped(tmp_path):
    for name in ["lossy.webp", "rgb-lzw.tif", "rgb.ppm", "palette.bmp"]:
        im, kw = FORMATS[name]()
        path = save(tmp_path, name, im, **kw)
        full = pil_rgb(path)
        np.testing.assert_array_equal(ff_decode(path, crop=(13, 7, 50, 31)), full[7:38, 13:63])


def netpbm(kind, maxval, samples, width, height):
    """Plain (P1..P3) or raw (P4..P6) Netpbm bytes, with a comment in the header."""
    head = f"P{kind}\n# made by the test\n{width} {height}\n" + ("" if kind in (1, 4) else f"{maxval}\n")
    if kind <= 3:
        return head.encode() + " ".join(str(v) for v in samples).encode() + b"\n"
    if maxval > 255:
        return head.encode() + b"".join(struct.pack(">H", v) for v in samples)
    return head.encode() + bytes(samples)


NETPBM = {  # kind, maxval, channels
    "plain-bitmap.pbm": (1, 1, 1),
    "plain-gray.pgm": (2, 255, 1),
    "plain-gray-maxval-1000.pgm": (2, 1000, 1),
    "plain-rgb.ppm": (3, 255, 3),
    "plain-rgb-maxval-7.ppm": (3, 7, 3),
    "gray-maxval-100.pgm": (5, 100, 1),
    "gray-maxval-300.pgm": (5, 300, 1),
    "gray-maxval-65535.pgm": (5, 65535, 1),
    "rgb-maxval-31.ppm": (6, 31, 3),
    "rgb-maxval-1023.ppm": (6, 1023, 3),
    "rgb-maxval-65535.ppm": (6, 65535, 3),
}


@pytest.mark.parametrize("name", sorted(NETPBM))
def test_netpbm_kinds_pillow_reads_equal_pillow(tmp_path, name):
    kind, maxval, channels = NETPBM[name]
    w, h = 37, 11
    rng = np.random.default_rng(kind * 7 + maxval)
    samples = rng.integers(0, maxval + 1, w * h * channels).tolist()
    path = tmp_path / name
    path.write_bytes(netpbm(kind, maxval, samples, w, h))
    np.testing.assert_array_equal(ff_decode(path), pil_rgb(path))


def bmp(bits, width, height, pixel_bytes_of_row, masks=None, top_down=False, palette=b""):
    """A BMP with a 40-byte header (bit fields after it when masks are given)."""
    row = (width * bits + 31) // 32 * 4
    rows = [pixel_bytes_of_row(y).ljust(row, b"\0") for y in range(height)]
    pixels = b"".join(rows if top_down else rows[::-1])
    extra = struct.pack("<3I", *masks) if masks else b""
    colors = len(palette) // 4
    info = struct.pack("<IiiHHIIiiII", 40, width, -height if top_down else height, 1, bits, 3 if masks else 0,
                       len(pixels), 2835, 2835, colors, 0)
    offset = 14 + len(info) + len(extra) + len(palette)
    return b"BM" + struct.pack("<IHHI", offset + len(pixels), 0, 0, offset) + info + extra + palette + pixels


def bmp16(masks=None, top_down=False):
    w, h = 41, 9
    return bmp(16, w, h, lambda y: b"".join(struct.pack("<H", (x * 1601 + y * 313) & 0xFFFF) for x in range(w)),
               masks, top_down)


BMPS = {
    "555.bmp": lambda: bmp16(),
    "555-bitfields.bmp": lambda: bmp16((0x7C00, 0x3E0, 0x1F)),
    "565-bitfields.bmp": lambda: bmp16((0xF800, 0x7E0, 0x1F)),
    "565-top-down.bmp": lambda: bmp16((0xF800, 0x7E0, 0x1F), top_down=True),
    "4bit-top-down.bmp": lambda: bmp(4, 13, 5, lambda y: bytes((x * 37 + y) % 256 for x in range(7)), top_down=True,
                                     palette=b"".join(bytes([i * 16, 255 - i * 9, i * 3, 0]) for i in range(16))),
    "8bit-short-palette.bmp": lambda: bmp(8, 9, 4, lambda y: bytes((x * 29 + y * 5) % 256 for x in range(9)),
                                          palette=b"".join(bytes([i * 20, i * 3, 255 - i * 7, 0]) for i in range(12))),
}


@pytest.mark.parametrize("name", sorted(BMPS))
def test_bmp_kinds_pillow_reads_equal_pillow(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(BMPS[name]())
    np.testing.assert_array_equal(ff_decode(path), pil_rgb(path))


def test_content_decides_not_the_extension(tmp_path):
    """A WebP named .png and a PNG named .bmp decode as what they hold."""
    webp = save(tmp_path, "a.webp", rgb(), lossless=True)
    png = save(tmp_path, "b.png", rgb())
    lying_png, lying_bmp = tmp_path / "a.png", tmp_path / "b.bmp"
    lying_png.write_bytes(webp.read_bytes())
    lying_bmp.write_bytes(png.read_bytes())
    np.testing.assert_array_equal(ff_decode(lying_png), pil_rgb(webp))
    np.testing.assert_array_equal(ff_decode(lying_bmp), pil_rgb(png))
    assert ff_decode(lying_bmp).shape == (H, W, 3)
