"""The decoder against Pillow, an independent reference that uses the same
libjpeg-turbo: full JPEG decodes (CMYK included) must be bit-identical,
region decodes must equal Pillow's full decode cropped, DCT-scaled decodes
must equal Pillow's draft() mode, and PNGs of every kind must equal Pillow's
convert('RGB') -- except 16-bit gray, which Pillow clips at 255 where we keep
the high byte, as torchvision.io + to_dtype(scale=True) does."""
import ctypes
import os
import struct
import zlib

import numpy as np
import pytest
from PIL import Image

if not os.environ.get("FF_SHIM"):
    pytest.skip("FF_SHIM (path of the ff_shim library) is not set", allow_module_level=True)

_lib = ctypes.CDLL(os.environ["FF_SHIM"])
_lib.ff_shim_decode.restype = ctypes.c_int
_lib.ff_shim_decode.argtypes = [ctypes.c_char_p] + [ctypes.c_int] * 6 + [
    ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int),
    ctypes.c_char_p, ctypes.c_int]

W, H = 227, 151


def ff_decode(path, crop=(0, 0, 0, 0), min_size=(0, 0)):
    out = np.zeros(W * H * 3 * 4, np.uint8)  # room for any test image
    w, h = ctypes.c_int(), ctypes.c_int()
    msg = ctypes.create_string_buffer(512)
    st = _lib.ff_shim_decode(str(path).encode(), *crop, *min_size, out.ctypes.data, out.size,
                             ctypes.byref(w), ctypes.byref(h), msg, len(msg))
    assert st == 0, msg.value.decode()
    return out[: w.value * h.value * 3].reshape(h.value, w.value, 3)


def pil_rgb(path):
    with Image.open(path) as im:
        return np.asarray(im.convert("RGB"))


def test_pixels(channels, seed=0, dtype=np.uint8):
    """Gradients plus noise, so chroma changes from pixel to pixel."""
    rng = np.random.default_rng(seed)
    top = 65535 if dtype == np.uint16 else 255
    y, x = np.mgrid[0:H, 0:W]
    base = (x * 3 + y * 5)[..., None] * np.arange(1, channels + 1) * (top // 255)
    noise = rng.integers(0, top // 4, (H, W, channels))
    return ((base + noise) % (top + 1)).astype(dtype)


test_pixels.__test__ = False  # a helper, not a test


def save(tmp_path, name, im, **kw):
    p = tmp_path / name
    im.save(p, **kw)
    return p


JPEG_KINDS = {
    "baseline_420": lambda: (Image.fromarray(test_pixels(3)), {"subsampling": 2}),
    "baseline_422": lambda: (Image.fromarray(test_pixels(3)), {"subsampling": 1}),
    "baseline_444": lambda: (Image.fromarray(test_pixels(3)), {"subsampling": 0}),
    "progressive_420": lambda: (Image.fromarray(test_pixels(3)), {"progressive": True}),
    "gray": lambda: (Image.fromarray(test_pixels(1)[..., 0]), {}),
}


@pytest.fixture(params=sorted(JPEG_KINDS))
def jpeg_path(request, tmp_path):
    im, kw = JPEG_KINDS[request.param]()
    return save(tmp_path, request.param + ".jpg", im, quality=90, **kw)


def test_jpeg_full_decode_equals_pillow(jpeg_path):
    np.testing.assert_array_equal(ff_decode(jpeg_path), pil_rgb(jpeg_path))


def test_jpeg_region_equals_pillow_cropped(jpeg_path):
    ref = pil_rgb(jpeg_path)
    rng = np.random.default_rng(1)
    regions = [(0, 0, W, H), (1, 1, 1, 1), (W - 5, H - 7, 5, 7), (16, 16, 32, 32), (17, 9, 100, 120)]
    for _ in range(10):
        cw, ch = int(rng.integers(1, W + 1)), int(rng.integers(1, H + 1))
        regions.append((int(rng.integers(0, W - cw + 1)), int(rng.integers(0, H - ch + 1)), cw, ch))
    for x, y, cw, ch in regions:
        got = ff_decode(jpeg_path, (x, y, cw, ch))
        np.testing.assert_array_equal(got, ref[y:y + ch, x:x + cw], err_msg=f"region {(x, y, cw, ch)}")


@pytest.mark.parametrize("kind", ["baseline_420", "baseline_422", "progressive_420"])
def test_jpeg_one_pixel_wide_region_at_the_edge_equals_pillow(tmp_path, kind):
    """One or two columns at the left and right edges, the whole height, on an
    image whose width - 2 is a multiple of the iMCU width: libjpeg-turbo drops
    fancy upsampling for a window that leaves a chroma plane fewer than 2
    columns, so the decoder keeps its window wider than that."""
    im, kw = JPEG_KINDS[kind]()
    im = im.crop((0, 0, 16 * 12 + 2, H))
    p = save(tmp_path, kind + ".jpg", im, quality=90, **kw)
    ref = pil_rgb(p)
    w = ref.shape[1]
    for x, cw in [(0, 1), (0, 2), (1, 1), (w - 1, 1), (w - 2, 2), (w - 2, 1), (w - 3, 1)]:
        for y, ch in [(0, H), (5, 40)]:
            got = ff_decode(p, (x, y, cw, ch))
            np.testing.assert_array_equal(got, ref[y:y + ch, x:x + cw], err_msg=f"region {(x, y, cw, ch)}")


@pytest.mark.parametrize("kind", ["baseline_420", "baseline_422", "baseline_444", "progressive_420"])
@pytest.mark.parametrize("reduce", [2, 4, 8])
def test_jpeg_dct_scaled_equals_pillow_draft(tmp_path, kind, reduce):
    im, kw = JPEG_KINDS[kind]()
    p = save(tmp_path, kind + ".jpg", im, quality=90, **kw)
    with Image.open(p) as ref:
        ref.draft("RGB", (W // reduce, H // reduce))
        assert ref.size == (-(-W // reduce), -(-H // reduce))  # DCT scaling 1/reduce
        want = np.asarray(ref.convert("RGB"))
    got = ff_decode(p, min_size=want.shape[1::-1])
    np.testing.assert_array_equal(got, want)


def test_cmyk_jpeg_equals_pillow(tmp_path):
    """Pillow writes the Adobe marker (inverted inks); we use its rounding."""
    p = save(tmp_path, "cmyk.jpg", Image.fromarray(test_pixels(4), "CMYK"), quality=90)
    np.testing.assert_array_equal(ff_decode(p), pil_rgb(p))


def without_app14(data):
    """The JPEG bytes with their Adobe APP14 segments removed."""
    out, i = bytearray(data[:2]), 2
    while data[i] == 0xFF and data[i + 1] != 0xDA:  # markers up to the first scan
        n = 2 + struct.unpack(">H", data[i + 2:i + 4])[0]
        if not (data[i + 1] == 0xEE and data[i + 4:i + 9] == b"Adobe"):
            out += data[i:i + n]
        i += n
    return bytes(out + data[i:])


@pytest.mark.filterwarnings("ignore:The image decoding:DeprecationWarning")
def test_cmyk_jpeg_without_adobe_marker_equals_pillow(tmp_path):
    """Without the Adobe marker the inks are read as stored, the same as with
    it: Pillow and torchvision.io both do (a plain-inks reading turns the
    usual files black)."""
    from torchvision.io import ImageReadMode, decode_jpeg
    import torch
    src = save(tmp_path, "adobe.jpg", Image.fromarray(test_pixels(4), "CMYK"), quality=90)
    p = tmp_path / "plain.jpg"
    p.write_bytes(without_app14(src.read_bytes()))
    with Image.open(p) as im:
        assert im.mode == "CMYK" and "adobe" not in im.info
    want = pil_rgb(p)
    tv = decode_jpeg(torch.frombuffer(bytearray(p.read_bytes()), dtype=torch.uint8),
                     mode=ImageReadMode.RGB).permute(1, 2, 0).numpy()
    assert np.abs(tv.astype(int) - want).max() <= 1  # torchvision truncates C*K/255, Pillow rounds
    np.testing.assert_array_equal(ff_decode(p), want)


def write_png(path, pixels, color_type):
    """A minimal PNG writer for what Pillow cannot write (16-bit RGB/RGBA)."""
    h, w = pixels.shape[:2]
    raw = pixels.astype(">u2").tobytes() if pixels.dtype == np.uint16 else pixels.tobytes()
    stride = len(raw) // h
    data = b"".join(b"\0" + raw[i * stride:(i + 1) * stride] for i in range(h))

    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    depth = 16 if pixels.dtype == np.uint16 else 8
    ihdr = struct.pack(">IIBBBBB", w, h, depth, color_type, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(data))
                     + chunk(b"IEND", b""))
    return path


def palette_image(transparency):
    im = Image.fromarray(test_pixels(3)).quantize(colors=64)
    if transparency:
        im.info["transparency"] = 3
    return im


PNG_KINDS = {
    "rgb8": lambda p: save(p.parent, p.name, Image.fromarray(test_pixels(3))),
    "rgba8": lambda p: save(p.parent, p.name, Image.fromarray(test_pixels(4), "RGBA")),
    "gray8": lambda p: save(p.parent, p.name, Image.fromarray(test_pixels(1)[..., 0])),
    "gray_alpha8": lambda p: save(p.parent, p.name, Image.fromarray(test_pixels(2), "LA")),
    "palette": lambda p: save(p.parent, p.name, palette_image(False)),
    "palette_trns": lambda p: save(p.parent, p.name, palette_image(True), transparency=3),
    "rgb_trns": lambda p: save(p.parent, p.name, Image.fromarray(test_pixels(3)), transparency=(1, 2, 3)),
    "rgb16": lambda p: write_png(p, test_pixels(3, dtype=np.uint16), 2),
    "rgba16": lambda p: write_png(p, test_pixels(4, dtype=np.uint16), 6),
    "gray_alpha16": lambda p: write_png(p, test_pixels(2, dtype=np.uint16), 4),
}


@pytest.mark.parametrize("kind", sorted(PNG_KINDS))
def test_png_equals_pillow_convert_rgb(tmp_path, kind):
    p = PNG_KINDS[kind](tmp_path / (kind + ".png"))
    np.testing.assert_array_equal(ff_decode(p), pil_rgb(p))
    np.testing.assert_array_equal(ff_decode(p, (5, 7, 30, 40)), pil_rgb(p)[7:47, 5:35])


@pytest.mark.filterwarnings("ignore:The image decoding:DeprecationWarning")
def test_png_gray16_keeps_high_byte_as_torchvision_io(tmp_path):
    """Pillow's convert('RGB') clips 16-bit gray at 255; we keep the high
    byte, as torchvision.io.decode_png + to_dtype(uint8, scale=True) does."""
    import torch
    from torchvision.io import decode_png
    from torchvision.transforms.v2.functional import to_dtype
    p = save(tmp_path, "gray16.png", Image.fromarray(test_pixels(1, dtype=np.uint16)[..., 0]))
    t = decode_png(torch.frombuffer(bytearray(p.read_bytes()), dtype=torch.uint8))
    assert t.dtype == torch.uint16
    want = to_dtype(t, torch.uint8, scale=True)[0].numpy()
    np.testing.assert_array_equal(ff_decode(p), np.repeat(want[..., None], 3, axis=2))


REPRO = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "hostile")


@pytest.mark.parametrize("progressive", [False, True])
@pytest.mark.parametrize("trailer", [1, 4095, 4097, 5000, 70000])
def test_jpeg_with_trailing_data_decodes_as_pillow_decodes_it(tmp_path, progressive, trailer):
    """Phone motion photos append a video after the end-of-image marker:
    Pillow decodes such a file, and so must we, to the same pixels."""
    clean = save(tmp_path, "clean.jpg", Image.fromarray(test_pixels(3, seed=4)), quality=90,
                 progressive=progressive)
    data = clean.read_bytes() + np.random.default_rng(trailer).integers(0, 256, trailer, np.uint8).tobytes()
    p = tmp_path / "trailer.jpg"
    p.write_bytes(data)
    np.testing.assert_array_equal(ff_decode(p), pil_rgb(p))
    np.testing.assert_array_equal(ff_decode(p), pil_rgb(clean))


def test_reproducer_jpeg_trailer_5k_decodes_as_pillow_decodes_it():
    p = os.path.join(REPRO, "refused-jpeg-trailer-5k.jpg")
    got = ff_decode(p, crop=(0, 0, 0, 0))
    np.testing.assert_array_equal(got, pil_rgb(p))


def test_truncated_jpeg_is_refused_as_pillow_refuses_it(tmp_path):
    """Cut in the middle of its scan: Pillow raises 'image file is
    truncated'; a full decode here fails too."""
    clean = save(tmp_path, "clean.jpg", Image.fromarray(test_pixels(3, seed=5)), quality=90)
    p = tmp_path / "cut.jpg"
    p.write_bytes(clean.read_bytes()[: clean.stat().st_size // 2])
    with pytest.raises(OSError):
        pil_rgb(p)
    with pytest.raises(AssertionError, match="truncated JPEG"):
        ff_decode(p)


def test_corrupt_jpeg_data_decodes_to_pillows_pixels(tmp_path):
    """Bad Huffman codes: libjpeg repairs the image and Pillow returns it
    without a word; we return the same pixels (and count a warning, which
    the loader tests check)."""
    clean = save(tmp_path, "clean.jpg", Image.fromarray(test_pixels(3, seed=6)), quality=90)
    data = bytearray(clean.read_bytes())
    for i in range(len(data) // 2, len(data) // 2 + 64, 2):
        data[i], data[i + 1] = 0xFF, 0x00
    p = tmp_path / "corrupt.jpg"
    p.write_bytes(bytes(data))
    want = pil_rgb(p)
    assert not np.array_equal(want, pil_rgb(clean))  # the damage shows
    np.testing.assert_array_equal(ff_decode(p), want)


def smooth_photo(h, w):
    """A smooth, photo-like RGB image: the DCT reduction then blurs it only a
    little, so any shift of the crop box shows in the PSNR."""
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    img = np.stack([128 + 60 * np.sin(x / 23.0 + c) * np.cos(y / 31.0 - c) + 40 * np.sin((x + y) / 57.0 + 2 * c)
                    for c in range(3)], -1)
    return np.clip(img, 0, 255).astype(np.uint8)


def psnr(a, b):
    mse = ((a.astype(np.float64) - b.astype(np.float64)) ** 2).mean()
    return float("inf") if mse == 0 else 10 * np.log10(255.0 ** 2 / mse)


@pytest.mark.skipif(not os.environ.get("FF_CLI"), reason="FF_CLI (path of the fusionflow CLI) is not set")
@pytest.mark.parametrize("box", [(37, 51, 601, 803), (3, 5, 455, 461), (13, 7, 917, 1111), (101, 203, 500, 450),
                                 (0, 0, 960, 1200)])
def test_dct_scaled_crop_keeps_torchvisions_box(tmp_path, box):
    """A DCT-scaled decode of a crop that is then resized resamples the
    crop's exact fractional box from the reduced image: against torchvision's
    full decode + resized_crop only the reduction's blur is left (about
    52-55 dB here; snapping the box to the reduced grid gave 40-47 dB), and
    without DCT scaling the result is the same to a level."""
    import subprocess
    import torch
    import torchvision.transforms.functional as TF
    p = save(tmp_path, "smooth.jpg", Image.fromarray(smooth_photo(960, 1200)), quality=95)
    top, left, h, w = box
    ref = TF.resized_crop(torch.from_numpy(pil_rgb(p).copy()).permute(2, 0, 1), top, left, h, w, [224, 224],
                          antialias=True).permute(1, 2, 0).numpy()
    got = {}
    for dct in ("true", "false"):
        out = tmp_path / f"out-{dct}.png"
        pipeline = (f"decode(dct_scale={dct}) | crop(top={top}, left={left}, height={h}, width={w}) "
                    "| resize(size=(224, 224))")
        subprocess.run([os.environ["FF_CLI"], "augment", str(p), str(out), "--pipeline", pipeline], check=True,
                       capture_output=True, timeout=60)
        got[dct] = np.asarray(Image.open(out).convert("RGB"))
    assert np.abs(got["false"].astype(int) - ref).max() <= 1
    assert psnr(got["true"], ref) > 51.0, f"{psnr(got['true'], ref):.2f} dB"


@pytest.mark.skipif(not os.environ.get("FF_CLI"), reason="FF_CLI (path of the fusionflow CLI) is not set")
def test_default_decode_gives_torchvisions_eval_pixels(tmp_path):
    """The standard evaluation pipeline on a large JPEG, with the default decode: the bits
    of Pillow's full decode + TF.resize(256, antialias) + center_crop(224), within the one
    level the tensor resize allows (test_ops_golden). With dct_scale=true, the opt-in, the
    1/2 reduction's blur shows (several levels) -- so the default is what makes it exact."""
    import subprocess
    import torch
    import torchvision.transforms.functional as TF
    rng = np.random.default_rng(4)
    img = np.clip(smooth_photo(900, 1100).astype(int) + rng.integers(-40, 41, (900, 1100, 3)), 0, 255)
    p = save(tmp_path, "photo.jpg", Image.fromarray(img.astype(np.uint8)), quality=90)
    ref = TF.center_crop(TF.resize(torch.from_numpy(pil_rgb(p).copy()).permute(2, 0, 1), 256, antialias=True),
                         224).permute(1, 2, 0).numpy().astype(int)
    got = {}
    for decode in ("decode", "decode(dct_scale=true)"):
        out = tmp_path / "out.png"
        subprocess.run([os.environ["FF_CLI"], "augment", str(p), str(out), "--pipeline",
                        f"{decode} | resize(size=256) | center_crop(size=224)"], check=True, capture_output=True,
                       timeout=60)
        got[decode] = np.abs(np.asarray(Image.open(out).convert("RGB")).astype(int) - ref)
    assert got["decode"].max() <= 1 and (got["decode"] > 0).mean() < 0.01
    assert got["decode(dct_scale=true)"].max() > 2
