"""Streamed tar: shards (http:// from a server on 127.0.0.1 started here,
pipe:, compressed files) through fusionflow.Loader.

Each sample's label is its own number, so the labels of a batch say which
samples it holds: coverage (each sample at most once per epoch, all of them
with one rank), equal batch counts per rank, determinism (threads, runs),
the two-level shuffle, exact resume. Then the network failing: a server
that drops the connection mid-shard (retried), one that keeps dropping it
(a per-shard error naming the URL), a 404.
"""
import gzip
import http.server
import io
import os
import queue
import shutil
import signal
import socket
import subprocess
import tarfile
import threading

import pytest

from conftest import cli

np = pytest.importorskip("numpy")
fusionflow = pytest.importorskip("fusionflow")

PIPELINE = "decode | random_resized_crop(size=16) | random_horizontal_flip"


@pytest.fixture(autouse=True)
def quick_retries(tmp_path, monkeypatch):
    monkeypatch.setenv("FF_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("FF_STREAM_BACKOFF_MS", "10")


def write_shard(path, images, first):
    """A shard of the given image files; sample k is labelled first + k."""
    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tar:
        for k, image in enumerate(images):
            for name, data in ((f"s{first + k:05d}{os.path.splitext(image)[1]}", open(image, "rb").read()),
                               (f"s{first + k:05d}.cls", str(first + k).encode())):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))


@pytest.fixture(scope="module")
def shards(folder, tmp_path_factory):
    """Shards of 1..5 samples (uneven on purpose) from the folder's 21 images, labels 0..20."""
    _, paths, _ = folder
    root = tmp_path_factory.mktemp("stream")
    sizes = [5, 3, 1, 4, 2, 5, 1]
    names, start = [], 0
    for i, n in enumerate(sizes):
        name = root / f"part-{i:03d}.tar"
        write_shard(name, paths[start:start + n], start)
        names.append(str(name))
        start += n
    return str(root), names, start


class Handler(http.server.SimpleHTTPRequestHandler):
    """Serves the shard folder; cut[name]: the numbers (1, 2, ...) of the
    requests for name that get the full Content-Length but only half the
    body, then a closed connection."""

    cut = {}
    requests = {}

    def log_message(self, *args):
        pass

    def do_GET(self):
        name = self.path.lstrip("/")
        Handler.requests[name] = Handler.requests.get(name, 0) + 1
        path = os.path.join(self.directory, name)
        if Handler.requests[name] not in Handler.cut.get(name, ()) or not os.path.exists(path):
            return super().do_GET()
        data = open(path, "rb").read()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data[: len(data) // 2])
        self.wfile.flush()
        self.close_connection = True


@pytest.fixture(scope="module")
def server(shards):
    root = shards[0]

    def handler(*args, **kw):
        return Handler(*args, directory=root, **kw)

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def url_pattern(server, count=7):
    return f"tar:{server}/part-{{000..{count - 1:03d}}}.tar"


def run(source, epoch=0, **kw):
    args = dict(batch_size=3, seed=5, num_threads=2, output="numpy")
    args.update(kw)
    with fusionflow.Loader(source, PIPELINE, **args) as loader:
        loader.set_epoch(epoch)
        out = [(np.asarray(x).copy(), np.asarray(y).copy()) for x, y in loader]
        return out, len(loader), loader.stats()


def labels(batches):
    return [int(v) for _, y in batches for v in y]


def test_one_rank_reads_every_sample_once_shuffled(shards, server):
    _, _, total = shards
    seen = []
    for epoch in (0, 1):
        got, _, _ = run(url_pattern(server), epoch)
        assert sorted(labels(got)) == list(range(total))
        seen.append(labels(got))
    assert seen[0] != seen[1] and seen[0] != sorted(seen[0])


def test_order_is_the_same_whatever_the_threads_and_runs(shards, server):
    a, _, _ = run(url_pattern(server), 1, num_threads=1)
    b, _, _ = run(url_pattern(server), 1, num_threads=3)
    c, _, _ = run(url_pattern(server), 1, num_threads=2, prefetch=1)
    for x, y in ((a, b), (a, c)):
        assert len(x) == len(y)
        for (xa, ya), (xb, yb) in zip(x, y):
            assert np.array_equal(ya, yb) and np.array_equal(xa, xb)
    d, _, _ = run(url_pattern(server), 1, seed=6)
    assert labels(d) != labels(a)


@pytest.mark.parametrize("count", [3, 5, 7])
@pytest.mark.parametrize("world", [1, 2, 3])
def test_every_rank_the_same_batches_and_no_sample_twice(shards, server, count, world):
    sizes = [5, 3, 1, 4, 2, 5, 1][:count]
    largest, total = max(sizes), sum(sizes)
    per_rank = (total - (world - 1) * largest) // world
    source = url_pattern(server, count)
    if per_rank <= 0:
        with pytest.raises(ValueError, match="cannot give"):
            run(source, world_size=world, rank=0)
        return
    for epoch in (0, 3):
        seen = []
        for rank in range(world):
            for threads in (1, 2):
                got, n, _ = run(source, epoch, world_size=world, rank=rank, num_threads=threads)
                assert n == len(got) == -(-per_rank // 3)
                assert len(labels(got)) == per_rank
            seen += labels(got)
        assert len(seen) == len(set(seen)) and set(seen) <= set(range(total))


def test_shuffle_buffer_zero_and_no_shuffle(shards, server):
    _, names, total = shards
    got, _, _ = run(url_pattern(server), shuffle=False)
    assert labels(got) == list(range(total))
    local, _, _ = run("tar:" + "::".join(names), shuffle=False)
    for (xa, ya), (xb, yb) in zip(got, local):
        assert np.array_equal(ya, yb) and np.array_equal(xa, xb)
    shard_only, _, _ = run(url_pattern(server), shuffle_buffer=0)
    runs, cur = [], [labels(shard_only)[0]]  # the shards stay whole, in a permuted order
    for v in labels(shard_only)[1:]:
        if v == cur[-1] + 1:
            cur.append(v)
        else:
            runs.append(cur)
            cur = [v]
    runs.append(cur)
    assert sorted(v for r in runs for v in r) == list(range(total)) and len(runs) <= 7


def test_resume_mid_epoch_is_exact(shards, server):
    full, _, _ = run(url_pattern(server), 2, world_size=2, rank=1)
    args = dict(batch_size=3, seed=5, num_threads=2, output="numpy", world_size=2, rank=1)
    with fusionflow.Loader(url_pattern(server), PIPELINE, **args) as a:
        a.set_epoch(2)
        it = iter(a)
        next(it)
        next(it)
        state = a.state_dict()
    with fusionflow.Loader(url_pattern(server), PIPELINE, **args) as b:
        b.load_state_dict(state)
        rest = [(np.asarray(x).copy(), np.asarray(y).copy()) for x, y in b]
    assert len(rest) == len(full) - 2
    for (xa, ya), (xb, yb) in zip(rest, full[2:]):
        assert np.array_equal(ya, yb) and np.array_equal(xa, xb)


def test_pipe_and_compressed_shards(shards, tmp_path, monkeypatch):
    # a sanitizer's runtime preloaded into this Python must not be preloaded into the commands
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    _, names, total = shards
    gz = []
    for n in names:
        out = tmp_path / (os.path.basename(n) + ".gz")
        with open(n, "rb") as f, gzip.open(out, "wb") as g:
            shutil.copyfileobj(f, g)
        gz.append(str(out))
    want, _, _ = run("tar:" + "::".join(names), shuffle=False)
    for source in ("tar:" + "::".join(gz), "tar:" + "::".join(f"pipe:cat {n}" for n in names)):
        got, _, _ = run(source, shuffle=False)
        assert labels(got) == list(range(total))
        for (xa, ya), (xb, yb) in zip(got, want):
            assert np.array_equal(xa, xb)
    with pytest.raises(fusionflow.Error, match="exited with status"):
        run("tar:pipe:exit 3")


def test_a_pipe_closed_mid_stream_ends_quietly_and_a_failing_one_still_reports(big_folder, tmp_path, monkeypatch,
                                                                               capfd):
    """Closing the loader stops its command: no "Broken pipe" from it (Python
    ignores SIGPIPE, and its commands inherit that). A command that fails
    still says so itself and fails its shard."""
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    _, paths, _ = big_folder
    shard = tmp_path / "big.tar"
    write_shard(shard, paths * 2, 0)  # megabytes: far more than the pipe and the reader's store hold
    for _ in range(3):
        with fusionflow.Loader(f"tar:pipe:cat {shard}", PIPELINE, batch_size=2, shuffle=False, num_threads=1,
                               output="numpy") as loader:
            next(iter(loader))
    err = capfd.readouterr().err
    assert "Broken pipe" not in err and "write error" not in err, err
    with pytest.raises(fusionflow.Error, match="exited with status 1"):
        run(f"tar:pipe:cat {tmp_path / 'missing.tar'}")
    assert "missing.tar: No such file or directory" in capfd.readouterr().err


def test_cli_says_what_a_stalled_open_waits_for_and_ctrl_c_ends_it():
    """A server that takes the connection and never answers: `fusionflow bench` says, once its open
    has taken 2 s, which shard and attempt it waits for, and Ctrl-C ends it with exit status 130."""
    if not os.path.exists(cli()):
        pytest.skip("the fusionflow executable is not next to the package")
    slow = 60 if os.environ.get("FF_TEST_SANITIZER") else 20
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)  # the kernel completes the connection; nobody ever reads or answers
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/stalled-000.tar"
        proc = subprocess.Popen([cli(), "bench", "--source", f"tar:{url}", "--batches", "1"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        lines = queue.Queue()
        reader = threading.Thread(target=lambda: [lines.put(line) for line in proc.stderr], daemon=True)
        reader.start()
        try:
            line = lines.get(timeout=slow)  # the first line it says is the progress line
            assert url in line and "shard 1 of 1" in line and "attempt 1 of 4" in line, line
            proc.send_signal(signal.SIGINT)
            assert proc.wait(timeout=slow) == 130
            reader.join(timeout=slow)
            rest = "".join(lines.queue)
            assert "interrupted while opening" in rest, rest
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def cutting(name, numbers):
    Handler.requests.clear()
    Handler.cut = {name: set(numbers)}


def test_connection_dropped_mid_shard_is_retried(shards, server):
    _, _, total = shards
    cutting("part-003.tar", (2, 3))  # counted at open, then twice cut in the middle, then whole
    try:
        got, _, s = run(url_pattern(server))
    finally:
        Handler.cut = {}
    assert sorted(labels(got)) == list(range(total)) and s["skipped"] == 0
    assert Handler.requests["part-003.tar"] >= 4  # and a fifth when the reader has gone on into epoch 1


def test_connection_always_dropped_fails_the_shard_naming_the_url(shards, server):
    _, _, total = shards
    url = f"{server}/part-000.tar"
    cutting("part-000.tar", range(2, 100))  # whole when counted at open, then always cut
    try:
        got, _, s = run(url_pattern(server), on_error="skip")
        lost = set(range(total)) - set(labels(got))
        assert lost and lost <= set(range(5)) and s["skipped"] == len(lost)
        assert all(url in m and "after retries" in m for m in s["skipped_samples"])
        cutting("part-000.tar", range(2, 100))
        with pytest.raises(fusionflow.Error, match="part-000.tar"):
            run(url_pattern(server))
    finally:
        Handler.cut = {}


def test_not_found_and_cut_at_open(shards, server):
    with pytest.raises(fusionflow.Error, match=r"missing\.tar: cannot read the shard: HTTP 404"):
        run(f"tar:{server}/part-000.tar::{server}/missing.tar")
    got, _, s = run(f"tar:{server}/part-000.tar::{server}/missing.tar", on_error="skip")
    assert sorted(labels(got)) == list(range(5)) and s["skipped"] == 1
    assert "missing.tar" in s["skipped_samples"][0]
    cutting("part-001.tar", range(1, 100))
    try:
        with pytest.raises(fusionflow.Error, match="part-001.tar"):
            run(f"tar:{server}/part-001.tar")
    finally:
        Handler.cut = {}
    with pytest.raises(fusionflow.Error, match="replace"):
        run(url_pattern(server), on_error="replace")


def test_close_mid_epoch_is_prompt(shards, server):
    import time

    with fusionflow.Loader(url_pattern(server), PIPELINE, batch_size=2, seed=5, num_threads=2,
                           output="numpy") as loader:
        next(iter(loader))
        t0 = time.monotonic()
    assert time.monotonic() - t0 < 5
