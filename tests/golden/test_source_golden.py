"""The imagefolder source against torchvision.datasets.ImageFolder: same
sample order (classes sorted by name, os.walk folders sorted by path, files
sorted by name), same paths, same labels, same choice of files (torchvision's
default IMG_EXTENSIONS, in any case)."""
import os

import pytest
from torchvision.datasets import ImageFolder

from conftest import FFError


def touch(path, data=b"\xff\xd8\xff"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def torchvision_index(root):
    ds = ImageFolder(str(root), loader=lambda p: p)  # its default extensions
    return [(p, label) for p, label in ds.samples], ds.classes


def make_tricky_tree(root):
    files = [
        "cat/b.jpg", "cat/a-1.jpg", "cat/A.PNG", "cat/x.JPEG", "cat/notes.txt", "cat/a.jpg",
        "cat/a/z.jpg", "cat/a/b/y.png", "cat/a-1/w.jpg", "cat/a.b/v.jpeg", "cat/A/u.jpg",
        "cat/.hidden.jpg", "cat/no_ext", "cat/double.jpg.txt", "cat/tar.gz.png",
        "Cat/upper.jpg", "Cat/UPPER.JPG", "Cat/10.jpg", "Cat/9.jpg", "Cat/1.jpg",
        "dog/d 1.jpg", "dog/d_1.jpg", "dog/d-1.jpg", "dog/D.jpg", "dog/sub dir/s.png",
        "Zebra/z.png", "_under/u.jpg", "été/é.jpg", "été/e.jpg", "10class/x.png", "9class/x.png",
        "dog/readme.md", "Zebra/inner/.jpg",
        "cat/p.ppm", "cat/P2.PPM", "cat/b.bmp", "cat/B.BMP", "dog/g.pgm", "dog/G.Pgm", "dog/t.tif", "dog/T.TIF",
        "dog/t.tiff", "dog/t2.TiFf", "Zebra/w.webp", "Zebra/W.WEBP", "Zebra/anim.gif", "Zebra/x.jfif",
        "Zebra/y.jp2", "Zebra/z.tga", "Zebra/s.svg", "Zebra/h.heic", "Zebra/a.avif", "dog/w.webp.bak",
    ]
    for f in files:
        touch(root / f)
    (root / "cat" / "folder.jpg").mkdir()  # a folder named like an image: not a sample
    (root / "cat" / "folder.jpg" / "in.jpg").write_bytes(b"x")
    (root / "root_file.jpg").write_bytes(b"x")  # outside any class: ignored
    (root / "empty_sub_parent" / "empty_sub").mkdir(parents=True)  # a class without images
    touch(root / "empty_sub_parent" / "only.txt")


def test_tricky_names_order_and_labels_equal_image_folder(shim, tmp_path):
    root = tmp_path / "data"
    make_tricky_tree(root)
    # torchvision refuses a class without images; compare on a tree without it
    (root / "empty_sub_parent" / "only.txt").unlink()
    (root / "empty_sub_parent" / "empty_sub").rmdir()
    (root / "empty_sub_parent").rmdir()
    want, classes = torchvision_index(root)
    got = shim.index(f"imagefolder:{root}")
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        assert g == w, f"sample {k}: ours {g}, torchvision {w}"
    assert classes == sorted(classes) and len(set(lbl for _, lbl in got)) == len(classes)


def test_class_without_images(shim, tmp_path):
    """torchvision raises; we must either refuse it too or keep its label
    slot (so the other classes' labels still equal class_to_idx)."""
    root = tmp_path / "data"
    make_tricky_tree(root)
    with pytest.raises(FileNotFoundError):
        torchvision_index(root)
    try:
        got = shim.index(f"imagefolder:{root}")
    except FFError as e:
        assert "empty_sub_parent" in e.message
        return
    classes = sorted(e.name for e in os.scandir(root) if e.is_dir())
    class_to_idx = {c: i for i, c in enumerate(classes)}
    for path, label in got:
        rel = os.path.relpath(path, root)
        assert class_to_idx[rel.split(os.sep)[0]] == label, (path, label)


def test_many_files_sorted_like_python(shim, tmp_path):
    root = tmp_path / "many"
    names = [f"{i}.jpg" for i in range(120)] + [f"img_{i:03d}.PNG" for i in range(40)]
    for c in ("b", "a", "B"):
        for n in names:
            touch(root / c / n)
    want, _ = torchvision_index(root)
    assert shim.index(f"imagefolder:{root}") == want


def test_symlinked_class_and_sub_folder_are_followed(shim, tmp_path):
    outside = tmp_path / "outside"
    touch(outside / "o1.jpg")
    touch(outside / "deep" / "o2.png")
    root = tmp_path / "data"
    touch(root / "real" / "r.jpg")
    (root / "linked").symlink_to(outside, target_is_directory=True)
    (root / "real" / "sublink").symlink_to(outside, target_is_directory=True)
    want, _ = torchvision_index(root)
    assert shim.index(f"imagefolder:{root}") == want


def test_list_source_paths_relative_to_the_list_and_labels(shim, tmp_path):
    touch(tmp_path / "imgs" / "a.jpg")
    touch(tmp_path / "imgs" / "b c.png")
    abs_path = tmp_path / "abs.jpg"
    touch(abs_path)
    lst = tmp_path / "train.txt"
    lst.write_text(f"# comment\nimgs/a.jpg\t3\n\nimgs/b c.png\t0\n{abs_path}\t12\n")
    assert shim.index(f"list:{lst}") == [
        (f"{tmp_path}/imgs/a.jpg", 3), (f"{tmp_path}/imgs/b c.png", 0), (str(abs_path), 12)]


@pytest.mark.parametrize("spec,needle", [
    ("imagefolder:{tmp}/missing", "missing"),
    ("imagefolder:{tmp}/empty", "no class folders"),
    ("list:{tmp}/nolist.txt", "nolist.txt"),
    ("bogus:{tmp}", "imagefolder"),
])
def test_bad_sources_are_refused_with_a_message(shim, tmp_path, spec, needle):
    (tmp_path / "empty").mkdir()
    with pytest.raises(FFError) as e:
        shim.index(spec.format(tmp=tmp_path))
    assert needle in e.value.message


def test_bad_list_line_names_file_and_line(shim, tmp_path):
    lst = tmp_path / "l.txt"
    touch(tmp_path / "a.jpg")
    lst.write_text("a.jpg\t1\na.jpg 2\n")
    with pytest.raises(FFError) as e:
        shim.index(f"list:{lst}")
    assert "l.txt:2" in e.value.message


def test_symlink_cycles_are_left_out_and_the_rest_equals_image_folder(shim, tmp_path):
    """torchvision follows a link back to an ancestor until the kernel's
    ELOOP (every image then comes dozens of times); we do not enter it.
    Everything else is ImageFolder's index: its samples whose path does not
    go through the looping links, in its order."""
    root = tmp_path / "data"
    touch(root / "c" / "a.jpg")
    touch(root / "c" / "s" / "b.jpg")
    touch(root / "d" / "x.png")
    outside = tmp_path / "outside"
    touch(outside / "o.jpg")
    (root / "c" / "s" / "up").symlink_to("..", target_is_directory=True)  # one: two would take torchvision minutes
    (root / "c" / "out").symlink_to(outside, target_is_directory=True)
    (root / "d" / "sib").symlink_to(outside, target_is_directory=True)
    want, _ = torchvision_index(root)
    assert len(want) > 40  # torchvision followed the cycles
    looping = ("/up/",)
    want = [(p, lbl) for p, lbl in want if not any(part in p + "/" for part in looping)]
    got = shim.index(f"imagefolder:{root}")
    assert got == want
