"""WebDataset shards against webdataset itself: `fusionflow shards make`
writes shards that webdataset reads back as the source's samples (keys,
labels, bytes), the tar: source indexes shards written by webdataset's
TarWriter with webdataset's keys and grouping, shard patterns expand as
braceexpand (webdataset's) expands them, and `fusionflow shards check`
reports counts and every kind of damage."""
import io
import json
import os
import subprocess
import tarfile

import numpy as np
import pytest
from PIL import Image

wds = pytest.importorskip("webdataset")
braceexpand = pytest.importorskip("braceexpand")

# the CLI runs the loader on its threads (FF_GOLDEN_SUBSET=threads keeps these under ThreadSanitizer)
pytestmark = pytest.mark.threads
CLI = os.environ.get("FF_CLI")


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("FF_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """30 images in 3 classes (JPEG, PNG with an upper-case extension), and the
    (path, label) list of torchvision's ImageFolder order."""
    from torchvision.datasets import ImageFolder

    root = tmp_path_factory.mktemp("shards") / "ds"
    rng = np.random.default_rng(1)
    for k in range(30):
        cls = root / ("ant", "bee", "cat")[k % 3]
        cls.mkdir(parents=True, exist_ok=True)
        h, w = int(rng.integers(16, 80)), int(rng.integers(16, 80))
        im = Image.fromarray(rng.integers(0, 255, (h, w, 3)).astype(np.uint8))
        if k % 5 == 0:
            im.save(cls / f"i{k:02d}.PNG", format="PNG")
        else:
            im.save(cls / f"i{k:02d}.jpg", quality=85)
    return root, ImageFolder(str(root), loader=lambda p: p).samples


def cli(*args, timeout=120):
    if not CLI:
        pytest.skip("FF_CLI is not set")
    return subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, timeout=timeout)


def test_shards_make_is_read_back_by_webdataset(dataset, tmp_path):
    root, samples = dataset
    out = tmp_path / "out"
    res = cli("shards", "make", f"imagefolder:{root}", out, "--shard-size", "40KB", "--shard-samples", "8")
    assert res.returncode == 0, res.stderr
    shards = sorted(str(p) for p in out.glob("shard-*.tar"))
    assert len(shards) >= 4
    got = list(wds.WebDataset(shards, shardshuffle=False))
    assert len(got) == len(samples)
    for k, (s, (path, label)) in enumerate(zip(got, samples)):
        ext = os.path.splitext(path)[1][1:].lower()
        assert s["__key__"] == f"{k:06d}"
        assert int(s["cls"].decode()) == label
        with open(path, "rb") as f:
            assert s[ext] == f.read(), path
    # the manifest: per-shard counts as webdataset counts them, and a shard list for tar:@
    lines = [ln.split("\t") for ln in (out / "manifest.tsv").read_text().splitlines() if not ln.startswith("#")]
    for (name, count, size), shard in zip(lines, shards):
        assert os.path.join(out, name) == shard
        assert int(count) == sum(1 for _ in wds.WebDataset(shard, shardshuffle=False))
        assert int(size) == os.path.getsize(shard) and int(size) <= 40 * 1024 or int(count) == 1
    # the same source gives the same bytes
    again = tmp_path / "again"
    assert cli("shards", "make", f"imagefolder:{root}", again, "--shard-size", "40KB",
               "--shard-samples", "8").returncode == 0
    for shard in shards:
        with open(shard, "rb") as a, open(again / os.path.basename(shard), "rb") as b:
            assert a.read() == b.read(), shard


def test_tar_source_groups_as_webdataset(shim, tmp_path):
    """Shards by webdataset's TarWriter, with keys holding folders and dots,
    extra members and several images per sample: our samples are the ones
    webdataset's to_tuple("jpg;jpeg;png;webp", "cls") yields."""
    rng = np.random.default_rng(2)

    def jpeg():
        buf = io.BytesIO()
        Image.fromarray(rng.integers(0, 255, (12, 10, 3)).astype(np.uint8)).save(buf, format="JPEG")
        return buf.getvalue()

    path = str(tmp_path / "w.tar")
    with wds.TarWriter(path) as w:
        w.write({"__key__": "train/a", "jpg": jpeg(), "cls": 3, "json": {"x": 1}})
        w.write({"__key__": "train/b", "png": jpeg(), "jpeg": jpeg(), "cls": 1})
        w.write({"__key__": "dir.v2/c", "jpg": jpeg(), "txt": "hello", "cls": 0})
        w.write({"__key__": "only_text", "txt": "no image here"})
        w.write({"__key__": "d", "JPG": jpeg(), "cls": 2})
    ref = []
    for s in wds.WebDataset(path, shardshuffle=False):
        image = next((e for e in ("jpg", "jpeg", "png", "webp") if e in s), None)
        if image and "cls" in s:
            ref.append((f"{path}:{s['__key__']}.{image}", int(s["cls"].decode()), s[image]))
    got = shim.index(f"tar:{path}")
    assert len(got) == len(ref) == 4
    with tarfile.open(path) as t:
        names = {m.name.lower(): m.name for m in t.getmembers()}
        for (gpath, glabel), (rpath, rlabel, rbytes) in zip(got, ref):
            shard, member = gpath.rsplit(":", 1)
            assert shard == path and member.lower() == rpath.rsplit(":", 1)[1] and glabel == rlabel
            assert t.extractfile(names[member.lower()]).read() == rbytes


@pytest.mark.parametrize("pattern", [
    "a-{000..012}.tar", "b-{0..10..3}.tar", "c-{5..1}.tar", "d-{x,y,z}-{00..02}.tar",
    "e-{a,b{1,2}}.tar", "f-{single}.tar", "g-{-2..2}.tar", "h-{007..9}.tar", "plain.tar"])
def test_brace_patterns_expand_as_braceexpand(shim, tmp_path, pattern):
    want = [str(tmp_path / n) for n in braceexpand.braceexpand(pattern)]
    for n in want:
        with tarfile.open(n, "w") as t:
            info = tarfile.TarInfo("k.jpg")
            data = b"\xff\xd8\xff\xd9"
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
            info = tarfile.TarInfo("k.cls")
            info.size = 1
            t.addfile(info, io.BytesIO(b"0"))
    got = [p.rsplit(":", 1)[0] for p, _ in shim.index(f"tar:{tmp_path}/{pattern}")]
    assert got == want


def test_shards_check_reports_counts_and_damage(dataset, tmp_path):
    root, samples = dataset
    out = tmp_path / "out"
    assert cli("shards", "make", root, out, "--shard-samples", "10").returncode == 0
    res = cli("shards", "check", f"@{out}/manifest.tsv", "--json", "--threads", "2")
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert report["ok"] and report["samples"] == len(samples) and report["per_shard"] == [10, 10, 10]
    assert report["classes"] == 3 and not report["bad"] and report["undecodable"] == 0
    # damage: one image's bytes broken (same size), one shard's .cls replaced by text
    shard0, shard1 = out / "shard-000000.tar", out / "shard-000001.tar"
    with tarfile.open(shard0) as t:
        broken = next(m for m in t.getmembers() if m.name.endswith(".jpg"))
    with open(shard0, "r+b") as f:
        f.seek(broken.offset_data)
        f.write(b"\0" * broken.size)
    with tarfile.open(shard1) as t:
        members = [(m, t.extractfile(m).read()) for m in t.getmembers()]
    with tarfile.open(shard1, "w", format=tarfile.USTAR_FORMAT) as t:
        for m, data in members:
            if m.name == "000012.cls":
                data = b"twelve"
                m.size = len(data)
            t.addfile(m, io.BytesIO(data))
    res = cli("shards", "check", f"{out}/shard-{{000000..000002}}.tar", "--threads", "2")
    assert res.returncode == 1
    assert f"{shard1}:000012.cls" in res.stdout and "not a non-negative integer" in res.stdout
    assert f"UNDECODABLE {shard0}:{broken.name}" in res.stdout
    res = cli("shards", "check", f"@{out}/manifest.tsv", "--json")
    report = json.loads(res.stdout)
    assert not report["ok"] and report["manifest_mismatches"] == 1 and report["undecodable"] == 1


def test_shards_check_reports_duplicates_and_large_labels(dataset, tmp_path):
    root, samples = dataset
    data = open(samples[0][0], "rb").read()
    shard = tmp_path / "dup.tar"
    with tarfile.open(shard, "w", format=tarfile.USTAR_FORMAT) as t:
        for name, payload in [("k0.jpg", data), ("k0.cls", b"0"), ("k1.jpg", data), ("k1.cls", b"1"),
                              ("k1.cls", b"1"), ("k2.jpg", data), ("k2.cls", b"99999999999999999999")]:
            info = tarfile.TarInfo(name)
            info.size = len(payload)
            t.addfile(info, io.BytesIO(payload))
    res = cli("shards", "check", shard, "--threads", "1")
    assert res.returncode == 1 and "OK" not in res.stdout.splitlines()[-1]
    assert f"BAD {shard}:k1.cls: duplicate member" in res.stdout
    assert f"BAD {shard}:k2.cls: the label '99999999999999999999' is out of range" in res.stdout
    import webdataset as wds  # which refuses the repeated member too
    with pytest.raises(ValueError):
        list(wds.WebDataset(str(shard), shardshuffle=False))


def test_shards_make_refuses_stale_output_and_cleans_up_a_failure(dataset, tmp_path):
    root, samples = dataset
    out = tmp_path / "out"
    assert cli("shards", "make", root, out, "--shard-samples", "10").returncode == 0
    before = sorted(p.name for p in out.iterdir())
    res = cli("shards", "make", root, out, "--shard-samples", "5")  # would leave shard-000003.. beside
    assert res.returncode == 1 and str(out) in res.stderr and "not empty" in res.stderr
    assert sorted(p.name for p in out.iterdir()) == before
    # a make that fails mid-way (a .pgm the tar: source would not read) leaves nothing
    Image.new("L", (8, 8)).save(tmp_path / "late.pgm")
    listing = tmp_path / "list.tsv"
    listing.write_text("".join(f"{p}\t{c}\n" for p, c in samples[:12]) + f"{tmp_path / 'late.pgm'}\t0\n")
    res = cli("shards", "make", f"list:{listing}", tmp_path / "failed", "--shard-samples", "5")
    assert res.returncode == 1 and "late.pgm" in res.stderr
    assert not (tmp_path / "failed").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    assert cli("shards", "make", f"list:{listing}", empty, "--shard-samples", "5").returncode == 1
    assert empty.is_dir() and not list(empty.iterdir())
    res = cli("shards", "make", tmp_path / "nonexistent", tmp_path / "o2")
    assert res.returncode == 1 and not (tmp_path / "o2").exists()


def test_shards_cli_usage(tmp_path):
    res = cli("shards", "--help")
    assert res.returncode == 0 and "shards make SRC OUT" in res.stdout and "--shard-size" in res.stdout
    assert cli("shards").returncode == 2
    assert cli("shards", "make", "onlyone").returncode == 2
    res = cli("shards", "make", tmp_path, tmp_path / "o", "--shard-size", "huge")
    assert res.returncode == 2 and "--shard-size" in res.stderr
    res = cli("shards", "check", f"{tmp_path}/none-{{0..3}}.tar")
    assert res.returncode == 1 and "none-0.tar" in res.stderr
