"""Leaving early: break, Ctrl-C (SIGINT to a child process) and interpreter exit
return promptly even while a slow batch is being prepared."""
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import fusionflow
from conftest import child_env, sigint_default

# About 0.1 s per sample on one thread: a batch of 32 takes seconds, a sample does not;
# the Ctrl-C tests wait for a batch of 256 (some 25 s), so that the signal lands in the wait
# even when a loaded machine delays the parent by seconds.
# "Promptly" is PROMPT_S (more under sanitizers, where every sample is slower too).
# ThreadSanitizer makes the pixel loops some 50x slower: there a pipeline without
# them (a region decode, 0.1 s per sample measured) keeps that true. Under any
# sanitizer on a busy 2-core machine a sample took up to 4 s (AddressSanitizer's
# close 3.0-4.1 s, a child's five batches over a minute): there "promptly" is still
# well under a batch, and a child gets five minutes before it counts as hung.
SANITIZED = bool(os.environ.get("FF_TEST_SANITIZER"))
TSAN = "thread" in os.environ.get("FF_TEST_SANITIZER", "")
PROMPT_S = 6.0 if SANITIZED else 2.0
SLOW_PIPE = ("decode(dct_scale=false) | center_crop(size=32)" if TSAN
             else "decode(dct_scale=false) | aug_mix(mixture_width=8, chain_depth=3) | resize(size=(32, 32))")
HUNG_S = 300 if SANITIZED else 60


@pytest.fixture(scope="module")
def slow_list(big_folder, tmp_path_factory):
    """256 samples of large images (the 8 files of big_folder, each 32 times)."""
    root, paths, labels = big_folder
    listing = tmp_path_factory.mktemp("slow") / "slow.txt"
    listing.write_text("".join(f"{p}\t{l}\n" for _ in range(32) for p, l in zip(paths, labels)))
    return "list:" + str(listing)


def test_break_then_close_returns_promptly(slow_list):
    loader = fusionflow.Loader(slow_list, SLOW_PIPE, batch_size=4, num_threads=1, prefetch=4, output="numpy")
    for _ in loader:
        break  # the workers are busy preparing the next batches
    start = time.monotonic()
    loader.close()
    assert time.monotonic() - start < PROMPT_S


def test_garbage_collecting_a_busy_loader_returns_promptly(slow_list):
    loader = fusionflow.Loader(slow_list, SLOW_PIPE, batch_size=32, num_threads=1, output="numpy")
    time.sleep(0.2)
    start = time.monotonic()
    del loader
    assert time.monotonic() - start < PROMPT_S


CHILD = textwrap.dedent("""
    import sys, time
    import fusionflow
    loader = fusionflow.Loader(sys.argv[1], sys.argv[2], batch_size=256, num_threads=1, output="numpy")
    print("ready", flush=True)
    try:
        for images, labels in loader:
            print("batch", flush=True)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        start = time.monotonic()
        loader.close()
        print("closed %.3f" % (time.monotonic() - start), flush=True)
        sys.exit(3)
    print("finished", flush=True)
""")


def read_line(proc, deadline):
    line = proc.stdout.readline()
    assert time.monotonic() < deadline, "the child took too long"
    return line.strip()


def test_ctrl_c_interrupts_the_wait_for_a_slow_batch(slow_list):
    proc = subprocess.Popen([sys.executable, "-c", CHILD, slow_list, SLOW_PIPE], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=child_env(), preexec_fn=sigint_default)
    try:
        assert read_line(proc, time.monotonic() + 60) == "ready"
        time.sleep(0.5)  # now inside next(), waiting for a batch that takes seconds
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        line = read_line(proc, sent + 30)
        answered = time.monotonic() - sent
        assert line == "interrupted", proc.stderr.read()
        assert answered < PROMPT_S, f"KeyboardInterrupt came {answered:.2f} s after SIGINT"
        closed = read_line(proc, sent + 30)
        assert closed.startswith("closed") and float(closed.split()[1]) < PROMPT_S
        assert proc.wait(timeout=10) == 3
        assert time.monotonic() - sent < PROMPT_S + 4
    finally:
        proc.kill()
        proc.wait()


def test_ctrl_c_without_a_handler_ends_the_process_promptly(slow_list):
    code = "import sys, fusionflow\n" \
           "loader = fusionflow.Loader(sys.argv[1], sys.argv[2], batch_size=256, num_threads=1, output='numpy')\n" \
           "print('ready', flush=True)\n" \
           "for batch in loader: pass\n"
    proc = subprocess.Popen([sys.executable, "-c", code, slow_list, SLOW_PIPE], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=child_env(), preexec_fn=sigint_default)
    try:
        assert read_line(proc, time.monotonic() + 60) == "ready"
        time.sleep(0.5)
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        rc = proc.wait(timeout=20)
        assert time.monotonic() - sent < PROMPT_S + 2
        assert rc != 0 and "KeyboardInterrupt" in proc.stderr.read()
    finally:
        proc.kill()
        proc.wait()


def test_interpreter_exit_with_an_open_loader_and_held_batches(slow_list, folder):
    code = textwrap.dedent("""
        import sys, fusionflow
        small = fusionflow.Loader(sys.argv[3], "decode | resize(size=(8, 8))", batch_size=4, output="numpy")
        kept = next(iter(small))  # a batch still referenced at exit
        slow = fusionflow.Loader(sys.argv[1], sys.argv[2], batch_size=32, num_threads=1, output="numpy")
        print("exiting", flush=True)
    """)
    start = time.monotonic()
    out = subprocess.run([sys.executable, "-c", code, slow_list, SLOW_PIPE, folder[0]], capture_output=True,
                         text=True, timeout=60, env=child_env())
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "exiting" and out.stderr == ""
    assert time.monotonic() - start < 10.0


def test_iteration_goes_on_after_an_interrupted_wait(slow_list):
    """A batch that arrives after Ctrl-C is not lost: the next next() returns it."""
    code = textwrap.dedent("""
        import os, signal, sys, threading, fusionflow
        loader = fusionflow.Loader(sys.argv[1], sys.argv[2], batch_size=8, num_threads=1, output="numpy")
        it = iter(loader)
        seen = []
        while len(seen) < 5:
            if len(seen) == 2:  # interrupt the wait for batch 2 (several tenths of a second of work)
                threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT)).start()
            try:
                images, labels = next(it)
                seen.append(loader.last_batch.index)
            except KeyboardInterrupt:
                seen.append("interrupt")
        print(seen)
    """)
    out = subprocess.run([sys.executable, "-c", code, slow_list, SLOW_PIPE], capture_output=True, text=True,
                         timeout=HUNG_S, env=child_env(), preexec_fn=sigint_default)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[0, 1, 'interrupt', 2, 3]"
