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
import logging
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import threading
import time

import pytest

from conftest import child_env, cli, sigint_default

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


class QuietServer(http.server.ThreadingHTTPServer):
    """A client that hangs up early (a reading pass stops after a shard's last sample; a close) is
    no server error worth a traceback."""

    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@pytest.fixture(scope="module")
def server(shards):
    root = shards[0]

    def handler(*args, **kw):
        return Handler(*args, directory=root, **kw)

    httpd = QuietServer(("127.0.0.1", 0), handler)
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


# Bounds for the waits of a stalled open: the progress line comes after 2 s, Ctrl-C's answer within
# a second (PROMPT_S allows for a busy machine); under a sanitizer a child starts and stops slower.
SANITIZED = bool(os.environ.get("FF_TEST_SANITIZER"))
SLOW_S = 60 if SANITIZED else 20
PROMPT_S = 10.0 if SANITIZED else 3.0


@pytest.fixture
def stalled_url():
    """The URL of a shard on a server that takes the connection and never answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)  # the kernel completes the connection; nobody ever reads or answers
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/stalled-000.tar"


def lines_of(stream):
    """A queue that gets the lines of stream as they come (read by a thread of its own)."""
    lines = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in stream], daemon=True).start()
    return lines


@pytest.mark.parametrize("command", [["bench", "--source", "tar:URL", "--batches", "1"],
                                     ["shards", "check", "tar:URL"], ["shards", "make", "tar:URL", "OUT"]],
                         ids=["bench", "shards-check", "shards-make"])
def test_cli_says_what_a_stalled_open_waits_for_and_ctrl_c_ends_it(command, stalled_url, tmp_path):
    """A server that takes the connection and never answers: `fusionflow bench` and `fusionflow shards`
    say, once their open has taken 2 s, which shard and attempt it waits for, and Ctrl-C ends them
    with exit status 130."""
    if not os.path.exists(cli()):
        pytest.skip("the fusionflow executable is not next to the package")
    args = [a.replace("URL", stalled_url).replace("OUT", str(tmp_path / "out")) for a in command]
    name = "fusionflow " + " ".join(command[:2] if command[0] == "shards" else command[:1])
    proc = subprocess.Popen([cli()] + args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines = lines_of(proc.stderr)
    try:
        line = lines.get(timeout=SLOW_S)  # the first line it says is the progress line
        assert line.startswith(name + ": opening, ") and stalled_url in line, line
        assert "shard 1 of 1" in line and "attempt 1 of 4" in line, line
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=SLOW_S) == 130
        rest = lines.get(timeout=SLOW_S)
        assert rest == name + ": interrupted while opening the source\n", rest
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


OPENING_CHILD = """
import logging, sys
import fusionflow
logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s %(message)s")
try:
    fusionflow.Loader("tar:" + sys.argv[1], "decode | resize(size=(8, 8))", batch_size=4, output="numpy")
except KeyboardInterrupt as e:
    print("KeyboardInterrupt", repr(e.__context__), flush=True)
    sys.exit(3)
print("opened", flush=True)
"""


def test_ctrl_c_gives_up_a_loader_waiting_for_a_stalled_server(stalled_url):
    """A Loader whose open waits for a server that never answers says so through the "fusionflow"
    logger once it has waited 2 s (INFO, naming the URL, the shard and the attempt), and Ctrl-C
    ends the wait at once with KeyboardInterrupt from the constructor -- not after the retries'
    two minutes, and not as a fusionflow error."""
    proc = subprocess.Popen([sys.executable, "-c", OPENING_CHILD, stalled_url], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=child_env(), preexec_fn=sigint_default)
    out, err = lines_of(proc.stdout), lines_of(proc.stderr)
    try:
        try:
            line = err.get(timeout=SLOW_S)
        except queue.Empty:
            pytest.fail(f"no progress line in {SLOW_S} s")
        assert line.startswith("INFO fusionflow fusionflow.Loader: opening, "), line
        assert f"shard 1 of 1, {stalled_url}, reading, attempt 1 of 4" in line, line
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        answer = out.get(timeout=SLOW_S)
        answered = time.monotonic() - sent
        assert answer == "KeyboardInterrupt None\n", answer + "".join(err.queue)
        assert answered < PROMPT_S, f"KeyboardInterrupt came {answered:.2f} s after SIGINT"
        assert proc.wait(timeout=SLOW_S) == 3
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


class Deadline(Exception):
    pass


def open_without_a_hook(source):
    from fusionflow import _fusionflow as c  # the extension directly: no progress hook to run

    return c.open_loader(source, "decode | resize(size=(8, 8))")


@pytest.mark.parametrize("open_loader", [
    lambda source: fusionflow.Loader(source, "decode | resize(size=(8, 8))", batch_size=4, output="numpy"),
    open_without_a_hook], ids=["Loader", "extension-without-hook"])
def test_a_signal_handlers_exception_gives_the_open_up(open_loader, stalled_url, monkeypatch):
    """What a signal handler raises while a Loader opens a streamed source (here a deadline through
    SIGALRM) gives the open up and is what the constructor raises."""
    monkeypatch.setenv("FF_STREAM_RETRIES", "0")  # without the abort: 30 s, not two minutes

    def deadline(signum, frame):
        raise Deadline("opening took too long")

    before = signal.signal(signal.SIGALRM, deadline)
    try:
        start = time.monotonic()
        signal.setitimer(signal.ITIMER_REAL, 0.5)
        with pytest.raises(Deadline, match="opening took too long"):
            open_loader("tar:" + stalled_url)
        took = time.monotonic() - start
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)
    assert took < 0.5 + PROMPT_S, f"the constructor returned {took:.2f} s after it began"


def progress(t, shard=0, attempt=1, backing_off=False, last_error="", due=True, shard_bytes=0, shard_samples=0):
    return {"shard": f"http://host/s-{shard}.tar", "shard_index": shard, "num_shards": 3, "attempt": attempt,
            "max_attempts": 4, "backing_off": backing_off, "last_error": last_error, "shard_s": 0.0,
            "elapsed_s": t, "due": due, "shard_bytes": shard_bytes, "shard_samples": shard_samples}


def test_the_progress_log_of_an_open_says_the_lines_that_are_due(caplog):
    """A record for each call the open marks due (the rule is the library's: test_tar_index), none for
    the others; INFO for first attempts, WARNING once a read has failed, the dict on the record; while
    a shard is read, its bytes and samples so far."""
    from fusionflow._progress import log_open_progress

    ticks = [progress(1.875, due=False), progress(2.0), progress(2.125, due=False),
             progress(25.875, attempt=2, last_error="timed out", shard_bytes=1234567, shard_samples=12),
             progress(26.0, attempt=2, due=False), progress(27.25, shard=2, shard_bytes=999),
             progress(28.0, shard=2, backing_off=True, attempt=2, last_error="HTTP 503")]
    with caplog.at_level(logging.INFO, logger="fusionflow"):
        for p in ticks:
            log_open_progress(p)
    said = [(r.levelname, r.open_progress["elapsed_s"], r.getMessage()) for r in caplog.records]
    assert [(level, t) for level, t, _ in said] == [("INFO", 2.0), ("WARNING", 25.875), ("INFO", 27.25),
                                                    ("WARNING", 28.0)]
    assert said[0][2] == ("fusionflow.Loader: opening, 2 s: shard 1 of 3, http://host/s-0.tar, reading, attempt 1 "
                          "of 4: 0 bytes, 0 samples so far")
    assert said[1][2] == ("fusionflow.Loader: opening, 26 s: shard 1 of 3, http://host/s-0.tar, reading, attempt 2 "
                          "of 4: 1.2 MB, 12 samples so far (the last failed: timed out)")
    assert said[2][2].endswith("shard 3 of 3, http://host/s-2.tar, reading, attempt 1 of 4: 999 bytes, 0 samples "
                               "so far")
    assert said[3][2].endswith("shard 3 of 3, http://host/s-2.tar, backing off before attempt 2 of 4 (the last "
                               "failed: HTTP 503)")


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
