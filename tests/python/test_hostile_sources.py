"""Sources that fight back, through the fusionflow CLI and fusionflow.Loader:
a run whose every sample fails, an HTTP server on 127.0.0.1 that redirects
for ever, sends without end, drips, announces a member of gigabytes, cuts
its body short, sends a header line of megabytes or resets the connection
inside a member, and pipe: commands that outlive their output. Each must
end promptly with one clear message naming the limit it met; every limit's
window is shrunk here to 2 s or less through its environment variable
(docs/limits.md), and every child runs under a timeout that fails the test
instead of hanging the suite.

Nothing here depends on torch: the run without torch (FF_TEST_NO_TORCH)
skips the module instead of repeating it."""
import http.server
import logging
import os
import random
import socket
import struct
import subprocess
import sys
import tarfile
import threading
import time

import pytest

from conftest import cli, make_image

if os.environ.get("FF_TEST_NO_TORCH"):
    pytest.skip("torch-independent: run once, in the run with torch", allow_module_level=True)

# A watchdog on every child: a hang fails the test. Sanitizers slow children down.
SANITIZED = bool(os.environ.get("FF_TEST_SANITIZER"))
WATCHDOG_S = 120 if SANITIZED else 60


# Every window of the limits shrunk to 2 s or less (docs/limits.md), no retries unless a test asks.
# The rate is far from both sides of it: the drip sends 40 bytes/s, the slow server 3,300, so that
# neither a busy machine nor a descheduled server thread moves a transfer across 500 bytes/s.
LIMITS = {"FF_STREAM_RETRIES": "0", "FF_STREAM_BACKOFF_MS": "10", "FF_STREAM_STALL_S": "2",
          "FF_STREAM_MIN_BYTES_PER_S": "500", "FF_PIPE_EXIT_GRACE_MS": "300"}
PIPE = "decode | resize(size=(16, 16))"


def need_cli():
    if not os.path.exists(cli()):
        pytest.skip("the fusionflow executable is not next to the package")


def run_cli(args, env=None, timeout=WATCHDOG_S):
    try:
        return subprocess.run([cli()] + args, capture_output=True, text=True, timeout=timeout,
                              env=dict(os.environ, **(env or {})))
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"fusionflow {' '.join(args[:1])} still ran after {timeout} s: {(e.stderr or b'')[-2000:]!r}")


@pytest.mark.parametrize("length", [["--batches", "4"], ["--epochs", "3"]], ids=["batches", "epochs"])
def test_bench_where_every_sample_fails_ends_saying_so(tmp_path, length):
    """A list whose files are all missing, under --on-error skip: every epoch hands out nothing.
    bench --batches once spun over empty epochs for ever; now the first empty epoch ends the run,
    which says that no sample could be read and exits 1."""
    need_cli()
    listing = tmp_path / "all-missing.tsv"
    listing.write_text("".join(f"gone/{i}.jpg\t0\n" for i in range(3)))
    res = run_cli(["bench", "--source", f"list:{listing}", "--pipeline", "decode | resize(size=(16, 16))",
                   "--batch-size", "2", "--threads", "2", "--on-error", "skip"] + length)
    assert res.returncode == 1, res.stderr
    assert "no sample could be read: all 3 tried failed; the first: " in res.stderr, res.stderr
    assert "No such file or directory" in res.stderr


def test_augment_on_a_jpeg_with_corrupt_entropy_data_warns(tmp_path):
    """libjpeg repairs bad Huffman codes and the image decodes, as Pillow decodes it: bench lists
    such a sample as a warning, and fusionflow augment, which used to exit 0 in silence, says it."""
    need_cli()
    path = str(tmp_path / "damaged.jpg")
    make_image(path, 64, 64, random.Random(3))
    data = bytearray(open(path, "rb").read())
    for i in range(len(data) // 2, len(data) // 2 + 64, 2):
        data[i:i + 2] = b"\xff\x00"
    open(path, "wb").write(data)
    res = run_cli(["augment", path, str(tmp_path / "out.png"), "--pipeline", "decode | resize(size=(16, 16))"])
    assert res.returncode == 0, res.stderr
    assert "fusionflow augment: warning: " in res.stderr and "damaged.jpg" in res.stderr, res.stderr
    assert "Corrupt JPEG data" in res.stderr



# ------------------------------------------------------------------ a hostile server

def tar_member(name, data):
    """One tar member: header and data padded to 512-byte blocks."""
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info.tobuf(format=tarfile.USTAR_FORMAT) + data + b"\0" * (-len(data) % 512)


def member_header(name, size):
    info = tarfile.TarInfo(name)
    info.size = size
    return info.tobuf(format=tarfile.USTAR_FORMAT)


@pytest.fixture(scope="module")
def good_shard(tmp_path_factory):
    """A shard of 4 small JPEGs labelled 0..3 (about 4 KB), and its sample members for endless streams."""
    root = tmp_path_factory.mktemp("hostile")
    rng = random.Random(5)
    members = []
    for k in range(4):
        path = str(root / f"s{k}.jpg")
        make_image(path, 24, 24, rng)
        members.append((f"s{k:05d}.jpg", open(path, "rb").read(), str(k).encode()))
    body = b"".join(tar_member(n, d) + tar_member(n[:-4] + ".cls", c) for n, d, c in members) + b"\0" * 1024
    return body, members


class Hostile(http.server.BaseHTTPRequestHandler):
    """Each path is one way of misbehaving; `counts` counts the requests of each path."""

    protocol_version = "HTTP/1.1"
    shard = b""
    members = []
    counts = {}

    def log_message(self, *args):
        pass

    def send_body_headers(self, length=None, extra=()):
        self.send_response(200)
        if length is not None:
            self.send_header("Content-Length", str(length))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()

    def do_GET(self):
        path = self.path.split("?")[0]
        Hostile.counts[path] = Hostile.counts.get(path, 0) + 1
        getattr(self, "serve_" + path.strip("/").split("/")[0].replace("-", "_").replace(".tar", ""))()

    def redirect(self, to):
        self.send_response(302)
        self.send_header("Location", to)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def serve_good(self):
        self.send_body_headers(len(self.shard))
        self.wfile.write(self.shard)

    def serve_loop(self):  # a redirect to itself, for ever
        self.redirect("/loop.tar")

    def serve_hop(self):  # /hop/N.tar: N redirects, then the good shard
        n = int(self.path.split("/")[2].split(".")[0])
        self.redirect(f"/hop/{n - 1}.tar" if n > 1 else "/good.tar")

    def serve_to_file(self):  # a redirect out of http
        self.redirect("file:///etc/passwd")

    def serve_endless(self):  # valid samples without end, no Content-Length
        self.send_body_headers(extra=[("Connection", "close")])
        k = 0
        while True:
            name, data, _ = self.members[k % len(self.members)]
            self.wfile.write(tar_member(f"e{k:09d}.jpg", data) + tar_member(f"e{k:09d}.cls", b"1"))
            k += 1

    def serve_endless_junk(self):  # members of no sample without end
        self.send_body_headers(extra=[("Connection", "close")])
        junk = tar_member("notes.txt", b"x" * 65536)
        while True:
            self.wfile.write(junk)

    def serve_drip(self):  # the good shard at about 40 bytes a second
        self.send_body_headers(len(self.shard))
        for i in range(0, len(self.shard), 2):
            self.wfile.write(self.shard[i:i + 2])
            self.wfile.flush()
            time.sleep(0.05)

    def serve_slow(self):  # the good shard (11 kB) at about 3.3 kB a second for 3.3 s: slow, not stalled
        self.send_body_headers(len(self.shard))
        for i in range(0, len(self.shard), 500):
            self.wfile.write(self.shard[i:i + 500])
            self.wfile.flush()
            time.sleep(0.15)

    def big_member(self, head, size):
        """A member of `size` bytes starting with head (then zeros), a label, then the good shard."""
        body = member_header("big.jpg", size)
        tail = b"\0" * (-size % 512) + tar_member("big.cls", b"9") + self.shard
        self.send_body_headers(len(body) + size + len(tail))
        self.wfile.write(body + head)
        chunk = b"\0" * (1 << 20)
        left = size - len(head)
        while left > 0:
            self.wfile.write(chunk[:min(left, len(chunk))])
            left -= len(chunk)
        self.wfile.write(tail)

    def serve_big_jpeg(self):  # 64 MiB that start as a JPEG
        self.big_member(b"\xff\xd8\xff\xe0", 64 << 20)

    def serve_big_zeros(self):  # 64 MiB of zeros named .jpg
        self.big_member(b"", 64 << 20)

    def serve_short(self):  # a Content-Length 1000 bytes shorter than the shard
        self.send_body_headers(len(self.shard) - 1000)
        self.wfile.write(self.shard[:-1000])

    def serve_huge_header(self):  # a header line of 8 MB
        self.send_response(200)
        self.send_header("X-Filler", "y" * (8 << 20))
        self.send_header("Content-Length", str(len(self.shard)))
        self.end_headers()
        self.wfile.write(self.shard)

    def serve_reset(self):  # half the shard, then a reset in the middle of a member
        self.send_body_headers(len(self.shard))
        self.wfile.write(self.shard[:len(self.shard) // 2 + 100])
        self.wfile.flush()
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        os.close(self.connection.detach())  # the descriptor itself, at once: a reset, not a FIN
        self.close_connection = True


class QuietServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], (ConnectionError, OSError)):
            super().handle_error(request, client_address)


@pytest.fixture(scope="module")
def hostile(good_shard):
    Hostile.shard, Hostile.members = good_shard
    httpd = QuietServer(("127.0.0.1", 0), Hostile)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def bench(source, *extra, env=None, timeout=WATCHDOG_S):
    """fusionflow bench over one epoch of source under on_error=skip: (result, seconds)."""
    start = time.monotonic()
    res = run_cli(["bench", "--source", source, "--pipeline", PIPE, "--batch-size", "2", "--on-error", "skip",
                   "--threads", "1"] + list(extra), env=dict(LIMITS, **(env or {})), timeout=timeout)
    return res, time.monotonic() - start


def test_redirects_are_followed_up_to_the_limit_and_only_to_http(hostile):
    """A 302 to itself made thousands of requests and blamed the peer; now the sixth redirect ends the
    read, the message names the limit, and a redirect out of http(s) is refused."""
    need_cli()
    Hostile.counts.clear()
    res, _ = bench(f"tar:{hostile}/loop.tar")
    assert res.returncode == 1 and "more than 5 redirects (FF_HTTP_MAX_REDIRECTS)" in res.stderr, res.stderr
    assert Hostile.counts["/loop.tar"] == 6
    res, _ = bench(f"tar:{hostile}/hop/5.tar")
    assert res.returncode == 0 and "4 of 4 samples" in res.stderr, res.stderr
    res, _ = bench(f"tar:{hostile}/hop/2.tar", env={"FF_HTTP_MAX_REDIRECTS": "1"})
    assert res.returncode == 1 and "more than 1 redirects" in res.stderr, res.stderr
    res, _ = bench(f"tar:{hostile}/to-file.tar")
    assert res.returncode == 1 and "protocol other than http or https" in res.stderr, res.stderr


def test_an_endless_stream_ends_the_counting_pass_at_its_limit(hostile):
    need_cli()
    res, took = bench(f"tar:{hostile}/endless.tar", env={"FF_STREAM_MAX_SHARD_SAMPLES": "50"})
    assert res.returncode == 1, res.stderr
    assert "more than 50 samples in the shard (FF_STREAM_MAX_SHARD_SAMPLES)" in res.stderr, res.stderr
    res, took = bench(f"tar:{hostile}/endless-junk.tar", env={"FF_STREAM_MAX_SHARD_BYTES": str(4 << 20)})
    assert res.returncode == 1, res.stderr
    assert "more than 4194304 bytes of tar data (FF_STREAM_MAX_SHARD_BYTES)" in res.stderr, res.stderr


def test_a_drip_is_a_stall_and_a_slow_server_is_not(hostile, monkeypatch, caplog):
    """40 bytes a second passed the old 1 byte/s rule (hours for a shard); under 500 bytes/s over a
    window of 2 s of waiting it is a stall. A server at 3.3 kB/s is slow and is read to its end, and
    the progress line after 2 s shows the bytes and samples so far."""
    need_cli()
    res, took = bench(f"tar:{hostile}/drip.tar")
    assert res.returncode == 1, res.stderr
    assert "stalled: " in res.stderr and "under 500 bytes/s (FF_STREAM_MIN_BYTES_PER_S, FF_STREAM_STALL_S)" \
        in res.stderr, res.stderr
    assert "after retries" not in res.stderr  # FF_STREAM_RETRIES=0
    import fusionflow

    for k, v in LIMITS.items():
        monkeypatch.setenv(k, v)
    with caplog.at_level(logging.INFO, logger="fusionflow"):
        with fusionflow.Loader(f"tar:{hostile}/slow.tar", PIPE, batch_size=2, output="numpy") as loader:
            assert loader.dataset_size == 4
    lines = [r.getMessage() for r in caplog.records if "opening" in r.getMessage()]
    assert lines and "reading, attempt 1 of 1: " in lines[0] and " kB, " in lines[0], lines
    assert lines[0].endswith(" samples so far") and " 0 samples" not in lines[0], lines


@pytest.mark.parametrize("path,extra,words", [
    ("big-jpeg", ["--max-member-bytes", "8M"],
     "big.jpg: a member of 67108864 bytes, over max_member_bytes (8388608): refused before reading it"),
    ("big-zeros", [], "big.jpg: not an image (JPEG, PNG, WebP, TIFF, PBM/PGM/PPM or BMP) by its first bytes: "
                      "refused before reading its 67108864 bytes")], ids=["over-the-limit", "not-an-image"])
def test_a_streamed_member_is_refused_before_it_is_held(hostile, path, extra, words):
    """A 64 MiB member: over max_member_bytes, or not an image by its first bytes. It was held three
    times (read buffer, store, worker) before the decoder refused it; now it is passed over unheld,
    so the process's peak RSS stays below the member's size, and the shard's other samples come."""
    need_cli()
    wrapper = ("import resource, subprocess, sys\n"
               "r = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
               "sys.stderr.write(r.stderr)\n"
               "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)\n"
               "sys.exit(r.returncode)\n")
    args = [sys.executable, "-c", wrapper, cli(), "bench", "--source", f"tar:{hostile}/{path}.tar", "--pipeline",
            PIPE, "--batch-size", "1", "--on-error", "skip", "--threads", "1"] + extra
    res = subprocess.run(args, capture_output=True, text=True, timeout=WATCHDOG_S, env=dict(os.environ, **LIMITS))
    assert res.returncode == 0, res.stderr
    assert words in res.stderr, res.stderr
    assert "skipped 1 bad sample" in res.stderr and "5 of 5 samples" in res.stderr
    peak = int(res.stdout.split()[-1])
    if not SANITIZED:  # a sanitizer's shadow memory and quarantine are not the loader's
        assert peak < 64 << 20, f"peak RSS {peak / 2**20:.0f} MiB for a 64 MiB member"


def test_messages_name_the_cause_not_a_symptom(hostile):
    """A short Content-Length once said '(byte -30)', a header line of 8 MB 'Out of memory', a reset
    'Failure when receiving data from the peer'."""
    need_cli()
    res, _ = bench(f"tar:{hostile}/short.tar")
    assert "(byte -30)" not in res.stderr and "Truncated tar archive" in res.stderr, res.stderr
    res, _ = bench(f"tar:{hostile}/huge-header.tar")
    assert res.returncode == 1 and "response headers are too large" in res.stderr, res.stderr
    Hostile.counts.clear()
    res, _ = bench(f"tar:{hostile}/reset.tar", env={"FF_STREAM_RETRIES": "1"})
    assert res.returncode == 1 and "Connection reset by peer (after retries)" in res.stderr, res.stderr
    assert Hostile.counts["/reset.tar"] == 2


# ------------------------------------------------------------------ pipe: commands

@pytest.fixture
def shard_file(good_shard, tmp_path):
    path = tmp_path / "good.tar"
    path.write_bytes(good_shard[0])
    return str(path)


def sleeper():
    """A sleep no other run on the machine starts: `ps` checks see this test's processes only."""
    return f"sleep 1000.{os.getpid()}{random.randrange(10**6):06d}"


def still_running(words, within_s=10):
    """Whether a process whose arguments hold `words` is still there after within_s (a killed
    process may take a moment to leave the table on a busy machine)."""
    deadline = time.monotonic() + within_s
    while words in subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout:
        if time.monotonic() > deadline:
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize("command,signal_name", [("cat {shard}; {sleep}", "SIGTERM"),
                                                 ("trap '' TERM; cat {shard}; {sleep}", "SIGKILL")],
                         ids=["sigterm", "deaf-to-sigterm"])
def test_a_command_that_outlives_its_output_is_ended_and_named(shard_file, command, signal_name, monkeypatch):
    """The command writes a whole shard and sleeps on: the open waited in waitpid for ever. Now it is
    given FF_PIPE_EXIT_GRACE_MS after its shard ended, then SIGTERM (and SIGKILL as long after), said
    in one line, and its samples come."""
    need_cli()
    monkeypatch.delenv("LD_PRELOAD", raising=False)  # a sanitizer's runtime is not for sh and sleep
    sleep = sleeper()
    res, took = bench("tar:pipe:" + command.format(shard=shard_file, sleep=sleep))
    assert res.returncode == 0 and "4 of 4 samples" in res.stderr, res.stderr
    said = [x for x in res.stderr.splitlines() if "after its shard ended" in x]
    assert len(said) == 1 and said[0].startswith("fusionflow: pipe:") and f"ended with {signal_name}" in said[0] \
        and "(FF_PIPE_EXIT_GRACE_MS=300)" in said[0], res.stderr
    assert not still_running(sleep)


def test_a_command_that_writes_nothing_is_a_stall(monkeypatch):
    need_cli()
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    sleep = sleeper()
    res, took = bench("tar:pipe:" + sleep)
    assert res.returncode == 1 and "stalled: 0 bytes in " in res.stderr, res.stderr
    assert not still_running(sleep)
