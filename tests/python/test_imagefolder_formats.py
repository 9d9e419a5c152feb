"""A folder source holding every extension torchvision's ImageFolder takes
(in upper and lower case), files it does not take, and a file whose
extension lies, against torchvision.datasets.ImageFolder with its default
loader (Pillow, convert('RGB')): the same classes and class_to_idx, the same
samples in the same order with the same targets and pixels; the files it
leaves out are counted."""
import os

import pytest

from conftest import np, Image

import fusionflow

torchvision_folder = pytest.importorskip("torchvision.datasets.folder")

SIZE = 16
# (name, how Pillow writes it): every IMG_EXTENSIONS entry, some in upper case
IMAGES = [
    ("a.jpg", "JPEG"), ("b.JPEG", "JPEG"), ("c.png", "PNG"), ("d.PPM", "PPM"), ("e.bmp", "BMP"),
    ("f.pgm", "PPM"), ("g.tif", "TIFF"), ("h.TIFF", "TIFF"), ("i.webp", "WEBP"), ("j.WebP", "WEBP"),
    ("k.Bmp", "PNG"),  # a PNG named .bmp: both go by the content
]
OTHERS = ["notes.txt", "anim.gif", "photo.jfif", "scan.jp2", "pic.tga", "x.webp.bak", "README"]


def pixels(seed, mode):
    rng = np.random.default_rng(seed)
    img = Image.fromarray(rng.integers(0, 256, (SIZE, SIZE, 3), dtype=np.uint8))
    return img.convert(mode)


def make_tree(root):
    n = 0
    for c, cls in enumerate(["Bird", "ant", "cat"]):
        d = os.path.join(root, cls)
        os.makedirs(os.path.join(d, "sub"))
        for i, (name, fmt) in enumerate(IMAGES):
            mode = "L" if name.endswith(".pgm") else "RGBA" if fmt in ("WEBP", "TIFF") and i % 2 else "RGB"
            kw = {"lossless": True} if fmt == "WEBP" else {"quality": 92} if fmt == "JPEG" else {}
            where = d if i % 4 else os.path.join(d, "sub")
            pixels(c * 100 + i, mode).save(os.path.join(where, name), fmt, **kw)
        for name in OTHERS:
            with open(os.path.join(d, name), "wb") as f:
                f.write(b"not an image " + name.encode())
            n += 1
    return n


def test_every_extension_equals_torchvision_image_folder(tmp_path):
    root = str(tmp_path / "tree")
    ignored = make_tree(root)
    ref = torchvision_folder.ImageFolder(root)
    assert len(ref.samples) == 3 * len(IMAGES)
    with fusionflow.Loader(root, f"decode | center_crop(size={SIZE})", batch_size=len(ref.samples),
                           shuffle=False, num_threads=2, output="numpy") as loader:
        assert loader.classes == ref.classes == ["Bird", "ant", "cat"]
        assert loader.class_to_idx == ref.class_to_idx
        assert loader.dataset_size == len(ref.samples)
        (images, labels), = list(loader)
        assert loader.stats()["source_ignored_files"] == ignored
    assert labels.tolist() == ref.targets
    for k, (path, _) in enumerate(ref.samples):
        want = np.asarray(ref.loader(path))
        np.testing.assert_array_equal(images[k], want, err_msg=path)


def test_list_sources_have_no_class_names(tmp_path):
    p = tmp_path / "x.png"
    pixels(0, "RGB").save(p)
    (tmp_path / "l.tsv").write_text(f"{p}\t4\n")
    with fusionflow.Loader(str(tmp_path / "l.tsv"), "decode | center_crop(size=8)", batch_size=1, output="numpy") as loader:
        assert loader.classes is None and loader.class_to_idx is None
        assert loader.stats()["source_ignored_files"] == 0
