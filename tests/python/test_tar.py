"""The tar: source (WebDataset shards) through fusionflow.Loader.

Shards are written here with Python's tarfile (an independent writer) from
the same images as an ImageFolder, in the folder's order, so a tar: loader
must hand out the very batches the folder loader hands out for the same
seed, rank and position. Then each kind of broken shard: a clear error
naming shard and member under on_error="raise", and under "skip" the bad
members left out, counted and listed while every good sample still comes.
"""
import io
import json
import os
import subprocess
import tarfile

import pytest

np = pytest.importorskip("numpy")
fusionflow = pytest.importorskip("fusionflow")

PIPELINE = "decode | random_resized_crop(size=32) | random_horizontal_flip"


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    """Shard indexes cached in this test's folder, never in the user's."""
    monkeypatch.setenv("FF_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def add_member(tar, name, data):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def write_shards(out_dir, paths, labels, per_shard, fmt=tarfile.USTAR_FORMAT, extra=False):
    """Shards out_dir/part-000.tar, ... of per_shard samples: KEY.EXT + KEY.cls
    (and with extra a KEY.json that the source must ignore)."""
    os.makedirs(out_dir, exist_ok=True)
    names = []
    for s in range(0, len(paths), per_shard):
        name = os.path.join(out_dir, f"part-{s // per_shard:03d}.tar")
        with tarfile.open(name, "w", format=fmt) as tar:
            for k in range(s, min(s + per_shard, len(paths))):
                ext = os.path.splitext(paths[k])[1].lower()
                key = f"sample{k:05d}"
                if extra:
                    add_member(tar, f"{key}.json", b"{}")
                with open(paths[k], "rb") as f:
                    add_member(tar, key + ext, f.read())
                add_member(tar, f"{key}.cls", str(labels[k]).encode())
        names.append(name)
    return names


def batches(loader, epoch=0):
    loader.set_epoch(epoch)
    return [(np.asarray(x).copy(), np.asarray(y).copy()) for x, y in loader]


def assert_same_batches(a, b):
    assert len(a) == len(b)
    for k, ((xa, ya), (xb, yb)) in enumerate(zip(a, b)):
        assert np.array_equal(ya, yb), f"batch {k}: labels differ"
        assert np.array_equal(xa, xb), f"batch {k}: images differ"


def open_loader(source, **kw):
    args = dict(batch_size=4, seed=7, num_threads=2, output="numpy")
    args.update(kw)
    return fusionflow.Loader(source, PIPELINE, **args)


@pytest.mark.parametrize("fmt", [tarfile.USTAR_FORMAT, tarfile.PAX_FORMAT, tarfile.GNU_FORMAT])
def test_tar_batches_equal_folder_batches(folder, tmp_path, fmt):
    root, paths, labels = folder
    write_shards(str(tmp_path / "shards"), paths, labels, per_shard=8, fmt=fmt, extra=True)
    pattern = f"tar:{tmp_path}/shards/part-{{000..002}}.tar"
    with open_loader(root) as ref, open_loader(pattern) as got:
        assert got.dataset_size == ref.dataset_size == len(paths)
        for epoch in (0, 1):
            assert_same_batches(batches(got, epoch), batches(ref, epoch))


def test_members_of_no_sample_are_counted_and_bench_reports_them(folder, tmp_path):
    """A .json beside every sample and a member without a suffix: ignored as webdataset ignores
    them, counted in stats() and by fusionflow bench (a line, and ignored_members in --json)."""
    root, paths, labels = folder
    (name,) = write_shards(str(tmp_path / "shards"), paths[:6], labels[:6], per_shard=6, extra=True)
    with tarfile.open(name, "a") as tar:
        add_member(tar, "README", b"no suffix")
    with open_loader(f"tar:{name}") as got:
        assert got.dataset_size == 6
        assert got.stats()["source_ignored_members"] == 7
    from conftest import cli
    if not os.path.exists(cli()):
        return
    base = [cli(), "bench", "--source", f"tar:{name}", "--pipeline", "decode | resize(size=(8, 8))", "--batches", "1"]
    res = subprocess.run(base, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and "ignored 7 tar members that belong to no sample" in res.stderr, res.stderr
    res = subprocess.run(base + ["--json"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and json.loads(res.stdout)["ignored_members"] == 7, res.stdout


def test_tar_ranks_and_resume_equal_folder(folder, tmp_path):
    root, paths, labels = folder
    write_shards(str(tmp_path / "shards"), paths, labels, per_shard=5)
    pattern = f"tar:{tmp_path}/shards/part-{{000..004}}.tar"
    for rank in (0, 1):
        with open_loader(root, rank=rank, world_size=2) as ref, open_loader(pattern, rank=rank, world_size=2) as got:
            assert_same_batches(batches(got, 1), batches(ref, 1))
    with open_loader(pattern) as a:
        full = batches(a, 0)
        a.set_epoch(0)
        it = iter(a)
        next(it)
        next(it)
        state = a.state_dict()
    with open_loader(pattern) as b:
        b.load_state_dict(state)
        rest = [(np.asarray(x).copy(), np.asarray(y).copy()) for x, y in b]
    assert_same_batches(rest, full[2:])


def test_shard_list_file_and_double_colon(folder, tmp_path):
    root, paths, labels = folder
    names = write_shards(str(tmp_path / "shards"), paths, labels, per_shard=10)
    listing = tmp_path / "shards" / "list.txt"
    listing.write_text("# shards\n" + "".join(os.path.basename(n) + "\n" for n in names))
    with open_loader(root, shuffle=False) as ref:
        want = batches(ref)
    with open_loader(f"tar:@{listing}", shuffle=False) as got:
        assert_same_batches(batches(got), want)
    with open_loader("tar:" + "::".join(names), shuffle=False) as got:
        assert_same_batches(batches(got), want)


def edit_index_cache(idx, edit):
    """Rewrites a shard's index cache with edit(text) and, where it ends in a checksum line
    ("end" and the FNV-1a of the lines before it, in hex), a checksum that fits the new text:
    a deliberate edit, which only the checks of the contents can catch."""
    body = edit(idx.read_text()).encode()
    lines = body.splitlines(keepends=True)
    if lines[-1].startswith(b"end ") and len(lines[-1]) == 21:
        body = b"".join(lines[:-1])
        h = 1469598103934665603
        for byte in body:
            h = ((h ^ byte) * 1099511628211) % (1 << 64)
        body += b"end %016x\n" % h
    idx.write_bytes(body)


def test_index_cache_is_used_and_invalidated(folder, tmp_path, cache_dir):
    root, paths, labels = folder
    (name,) = write_shards(str(tmp_path / "shards"), paths, labels, per_shard=len(paths))
    with open_loader(f"tar:{name}", shuffle=False) as l:
        want = batches(l)
    (idx,) = list(cache_dir.glob("tar/*.idx"))
    text = idx.read_text()
    assert os.path.realpath(name) in text
    # a cache whose labels were edited is what a second open reads (it does not read the tar again)
    edit_index_cache(idx, lambda t: t.replace("\t0\tsample00000", "\t2\tsample00000"))
    with open_loader(f"tar:{name}", shuffle=False) as l:
        assert batches(l)[0][1][0] == 2
    # the same edit without a checksum to match: the cache is refused and the tar read again
    idx.write_text(text.replace("\t0\tsample00000", "\t2\tsample00000"))
    with open_loader(f"tar:{name}", shuffle=False) as l:
        assert_same_batches(batches(l), want)
    # the shard changes (a new modification time): the cache is stale and the tar is read again
    edit_index_cache(idx, lambda t: t.replace("\t0\tsample00000", "\t2\tsample00000"))
    st = os.stat(name)
    os.utime(name, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    with open_loader(f"tar:{name}", shuffle=False) as l:
        assert_same_batches(batches(l), want)


def test_a_shard_rewritten_in_place_with_its_mtime_restored_is_read_again(folder, tmp_path, cache_dir):
    """Same size, same inode, modification time put back: only the change time tells, and the
    cached index (keyed on size, mtime and inode alone) served the old labels."""
    root, paths, labels = folder
    (name,) = write_shards(str(tmp_path / "shards"), paths, labels, per_shard=len(paths))
    with open_loader(f"tar:{name}", shuffle=False) as l:
        batches(l)
    st = os.stat(name)
    data = bytearray(open(name, "rb").read())
    with tarfile.open(name) as t:
        for m in t.getmembers():
            if m.name.endswith(".cls"):
                data[m.offset_data:m.offset_data + m.size] = b"7".ljust(m.size)
    with open(name, "r+b") as f:
        f.write(data)
    os.utime(name, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(name).st_size == st.st_size and os.stat(name).st_mtime_ns == st.st_mtime_ns
    with open_loader(f"tar:{name}", shuffle=False) as l:
        got = batches(l)
    assert {int(v) for _, y in got for v in y} == {7}


@pytest.mark.parametrize("field,value", [(2, "9223372036854775807"), (0, "18446744073709551104"),
                                         (1, "9223372036854775808"), (0, "513"), (1, "12x")],
                         ids=["label-int64-max", "offset-near-2^64", "size-2^63", "offset-off-a-block", "garbage"])
def test_a_tampered_index_cache_is_checked_and_rebuilt(folder, tmp_path, cache_dir, field, value):
    """A cache whose sample line cannot be (a label whose class count overflows, data past the end of
    the file or wrapping around 2^64, off a 512-byte block) is not trusted, even with a checksum that
    fits: the shard is scanned again and the batches are the shard's."""
    root, paths, labels = folder
    (name,) = write_shards(str(tmp_path / "shards"), paths, labels, per_shard=len(paths))
    with open_loader(f"tar:{name}", shuffle=False) as l:
        want = batches(l)
    (idx,) = list(cache_dir.glob("tar/*.idx"))

    def sample_line(text):
        return [line for line in text.splitlines() if line.startswith("s\t") and "sample00003" in line]

    original = sample_line(idx.read_text())
    assert len(original) == 1

    def tamper(text):
        out = []
        for line in text.splitlines(keepends=True):
            if line.startswith("s\t") and "sample00003" in line:
                parts = line.split("\t")
                parts[1 + field] = value
                line = "\t".join(parts)
            out.append(line)
        return "".join(out)

    edit_index_cache(idx, tamper)
    with open_loader(f"tar:{name}", shuffle=False) as l:
        assert_same_batches(batches(l), want)
    assert sample_line(idx.read_text()) == original  # rebuilt and stored again


# ------------------------------------------------------------------ bad input

def good_shard(tmp_path, folder, n=6, name="bad.tar"):
    """A one-shard copy of the folder's first n samples; returns (path, member list)."""
    _, paths, labels = folder
    (path,) = write_shards(str(tmp_path / "b"), paths[:n], labels[:n], per_shard=n)
    final = str(tmp_path / "b" / name)
    os.rename(path, final)
    with tarfile.open(final) as t:
        members = t.getmembers()
    return final, members


def raises_naming(source, *names):
    with pytest.raises(fusionflow.Error) as e:
        open_loader(source)
    for n in names:
        assert n in str(e.value), (n, str(e.value))
    return str(e.value)


def skip_run(source, want_samples, want_skipped, *listed):
    with open_loader(source, on_error="skip", shuffle=False) as l:
        got = sum(len(y) for _, y in batches(l))
        s = l.stats()
    assert got == want_samples
    assert s["skipped"] == want_skipped
    for n in listed:
        assert any(n in m for m in s["skipped_samples"]), (n, s["skipped_samples"])


def test_truncated_mid_member(folder, tmp_path):
    path, members = good_shard(tmp_path, folder)
    victim = members[6]  # the image of the fourth sample (members alternate image, cls)
    with open(path, "r+b") as f:
        f.truncate(victim.offset_data + victim.size // 2)
    raises_naming(f"tar:{path}", path, victim.name, "truncated")
    skip_run(f"tar:{path}", 3, 1, victim.name)


def test_truncated_mid_header(folder, tmp_path):
    path, members = good_shard(tmp_path, folder)
    victim = members[8]  # the header of the fifth sample's image
    with open(path, "r+b") as f:
        f.truncate(victim.offset + 200)
    raises_naming(f"tar:{path}", path, members[7].name)
    skip_run(f"tar:{path}", 4, 1, path)


def test_corrupt_header(folder, tmp_path):
    path, members = good_shard(tmp_path, folder)
    with open(path, "r+b") as f:
        f.seek(members[4].offset + 148)  # the checksum field
        f.write(b"garbage!")
    # libarchive skips the damaged header and goes on: the sample whose header it was is lost
    raises_naming(f"tar:{path}", path, members[3].name, "damaged")
    skip_run(f"tar:{path}", 5, 2, "damaged", "sample00002")


def edit_shard(tmp_path, folder, edit):
    """A shard made of the folder's first 4 samples with edit(key, ext, image, label) -> members."""
    _, paths, labels = folder
    path = str(tmp_path / "edited.tar")
    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tar:
        for k in range(4):
            with open(paths[k], "rb") as f:
                data = f.read()
            for name, payload in edit(f"s{k}", os.path.splitext(paths[k])[1], data, labels[k]):
                add_member(tar, name, payload)
    return path


def test_missing_cls(folder, tmp_path):
    path = edit_shard(tmp_path, folder, lambda key, ext, data, label: [(key + ext, data)] + (
        [] if key == "s1" else [(key + ".cls", str(label).encode())]))
    raises_naming(f"tar:{path}", path, "s1", ".cls")
    skip_run(f"tar:{path}", 3, 1, "s1")


@pytest.mark.parametrize("text", [b"cat", b"-1", b"1.5", b"", b"99999999999999999999999"])
def test_label_not_an_integer(folder, tmp_path, text):
    path = edit_shard(tmp_path, folder, lambda key, ext, data, label: [
        (key + ext, data), (key + ".cls", text if key == "s2" else str(label).encode())])
    msg = raises_naming(f"tar:{path}", path, "s2.cls")
    # int() reads the long one: it is a label too large for the class count, not a non-integer
    assert ("out of range" if text.isdigit() else "not a non-negative integer") in msg, msg
    skip_run(f"tar:{path}", 3, 1, "s2.cls")


def test_label_as_python_int_reads_it(folder, tmp_path):
    """webdataset's cls decoder is int(text): white space and '+' are fine."""
    path = edit_shard(tmp_path, folder, lambda key, ext, data, label: [
        (key + ext, data), (key + ".cls", b" +%d\n" % label)])
    with open_loader(f"tar:{path}", shuffle=False, batch_size=4) as l:
        assert list(batches(l)[0][1]) == list(folder[2][:4])


def test_member_repeated_as_a_link_is_a_duplicate(folder, tmp_path):
    """`tar cf x.tar k.jpg k.cls k.cls` stores the second k.cls as a hard link to the first."""
    _, paths, labels = folder
    path = str(tmp_path / "linked.tar")
    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tar:
        for k in range(4):
            with open(paths[k], "rb") as f:
                add_member(tar, f"s{k}" + os.path.splitext(paths[k])[1], f.read())
            add_member(tar, f"s{k}.cls", str(labels[k]).encode())
            if k == 1:
                link = tarfile.TarInfo("s1.cls")
                link.type, link.linkname = tarfile.LNKTYPE, "s1.cls"
                tar.addfile(link)
    raises_naming(f"tar:{path}", path, "s1.cls", "duplicate")
    skip_run(f"tar:{path}", 3, 1, "s1.cls")


def test_duplicate_member_and_repeated_key(folder, tmp_path):
    def dup(key, ext, data, label):
        m = [(key + ext, data), (key + ".cls", str(label).encode())]
        return m + [(key + ".cls", b"0")] if key == "s1" else m
    path = edit_shard(tmp_path, folder, dup)
    raises_naming(f"tar:{path}", path, "s1.cls", "duplicate")
    skip_run(f"tar:{path}", 3, 1, "s1.cls")

    def again(key, ext, data, label):  # s3 is named s0 again, after s1 and s2
        key = "s0" if key == "s3" else key
        return [(key + ext, data), (key + ".cls", str(label).encode())]
    path = edit_shard(tmp_path, folder, again)
    raises_naming(f"tar:{path}", path, "duplicate key", "s0")
    skip_run(f"tar:{path}", 3, 1, "s0")


def test_empty_shard(folder, tmp_path):
    empty = tmp_path / "empty.tar"
    with tarfile.open(empty, "w"):
        pass
    zero = tmp_path / "zero.tar"
    zero.write_bytes(b"")
    only_json = tmp_path / "json.tar"
    with tarfile.open(only_json, "w") as tar:
        add_member(tar, "a.json", b"{}")
    for p in (empty, zero, only_json):
        raises_naming(f"tar:{p}", str(p), "empty")
    path, _ = good_shard(tmp_path, folder, n=3)
    src = f"tar:{path}::{empty}"
    raises_naming(src, str(empty), "empty")
    skip_run(src, 3, 1, str(empty))


def test_missing_shard_and_patterns_naming_nothing(folder, tmp_path):
    path, _ = good_shard(tmp_path, folder, n=3)
    missing = str(tmp_path / "b" / "missing.tar")
    raises_naming(f"tar:{path}::{missing}", missing)
    skip_run(f"tar:{path}::{missing}", 3, 1, missing)
    raises_naming(f"tar:{tmp_path}/none-{{000..009}}.tar", "none-000.tar", "10 shard")
    raises_naming(f"tar:{tmp_path}/x-{{000..009.tar", "without its")
    empty_list = tmp_path / "empty.txt"
    empty_list.write_text("# nothing\n")
    raises_naming(f"tar:@{empty_list}", str(empty_list))
    raises_naming("tar:", "no shard")


def test_compressed_shard_named_tar_is_refused_clearly(folder, tmp_path):
    """A .gz name is streamed (test_stream.py); a gzip file named .tar cannot be read by offset."""
    _, paths, labels = folder
    path = str(tmp_path / "c.tar")
    with tarfile.open(path, "w:gz") as tar:
        with open(paths[0], "rb") as f:
            add_member(tar, "a" + os.path.splitext(paths[0])[1], f.read())
        add_member(tar, "a.cls", b"0")
    raises_naming(f"tar:{path}", path, "gzip")
