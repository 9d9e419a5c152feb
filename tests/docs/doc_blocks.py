#!/usr/bin/env python3
"""Runs every code block of README.md, python/README.md and docs/*.md, so that the docs
cannot rot, and checks their relative links (and those of CHANGELOG.md and bench/*.md).

Blocks are taken from the Markdown by their fence's language:
  sh, bash   run by bash -e -o pipefail in the page's working folder
  python     run in this interpreter (its own globals, the page's folder as cwd)
  c          compiled against include/ (-std=c17 -Wall -Wextra -Werror); one with a main()
             is linked with the built library (--lib-dir) and run with the demo data as argv[1]
  pipeline   pipeline text, checked by `fusionflow plan` on the demo data
  json       parsed
  other      (text, none) not code: left alone
A block whose fence follows the line `<!-- no-run: REASON -->` (blank lines between allowed)
is only checked: bash -n, compile(), the C compiler's -fsyntax-only, json parsed.

Each page gets its own working folder under --work, laid out as the repository root is after
`make demo`: build/fusionflow (the CLI under test), build/demo-data (a small generated
ImageFolder: 3 classes of 8 JPEGs, not the 2,000-photo set) and photo.jpg. Blocks of a page
run in order in that folder, so a block may use what an earlier one wrote.

Usage: doc_blocks.py --root SRC --cli FUSIONFLOW --work DIR [--lib-dir DIR] [--timeout S] [FILE.md ...]
Also checks that docs/img/throughput.svg is bench/RESULTS.md's table (scripts/doc-pictures.py
--check). Exit status 0 when every block ran (or was checked), every link resolves and the
chart is current, else 1.
"""
import argparse
import contextlib
import gc
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import traceback

FENCE = re.compile(r"^(`{3,})\s*([\w+-]*)\s*$")
NO_RUN = re.compile(r"^<!--\s*no-run:\s*(.+?)\s*-->$")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
RUN_LANGS = {"sh", "bash", "python", "c", "pipeline", "json"}
# A block that needs one of these where it is not installed is skipped, not failed: make test
# runs this in the test environment, which has them all.
OPTIONAL_MODULES = {"torch", "torchvision", "timm"}
SKIP = "skip: "


class Block:
    def __init__(self, page, line, lang, text, no_run):
        self.page, self.line, self.lang, self.text, self.no_run = page, line, lang, text, no_run

    def where(self):
        return f"{self.page}:{self.line} ({self.lang})"


def blocks_of(path, rel):
    """The fenced blocks of a Markdown file, with the no-run marker before each."""
    out, lines = [], open(path, encoding="utf-8").read().split("\n")
    i, marker = 0, None
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m:
            fence, lang, start = m.group(1), m.group(2).lower(), i + 1
            j = start
            while j < len(lines) and lines[j].strip() != fence:
                j += 1
            if j == len(lines):
                raise SystemExit(f"{rel}:{i + 1}: unclosed code fence")
            out.append(Block(rel, i + 1, lang, "\n".join(lines[start:j]) + "\n", marker))
            i, marker = j + 1, None
            continue
        n = NO_RUN.match(lines[i].strip())
        if n:
            marker = n.group(1)
        elif lines[i].strip():
            marker = None
        i += 1
    return out


def slug(heading):
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to '-'."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path):
    found, in_code = set(), False
    for line in open(path, encoding="utf-8"):
        if FENCE.match(line.rstrip("\n")):
            in_code = not in_code
        elif not in_code and line.startswith("#"):
            found.add(slug(line.lstrip("#")))
    return found


def check_links(path, rel):
    errors, in_code = [], False
    for n, line in enumerate(open(path, encoding="utf-8"), 1):
        if FENCE.match(line.rstrip("\n")):
            in_code = not in_code
            continue
        if in_code:
            continue
        for target in LINK.findall(line):
            if re.match(r"[a-z]+:", target):
                continue  # http:, mailto:, ...
            file_part, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
            if not os.path.exists(dest):
                errors.append(f"{rel}:{n}: link to a missing file: {target}")
            elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                errors.append(f"{rel}:{n}: link to a missing heading: {target}")
    return errors


def make_demo_data(folder):
    """3 classes x 8 JPEGs of 48..160 px: gradients, stripes and noise (Pillow), and the
    .complete marker that `make demo`'s data set has beside its class folders."""
    import random
    from PIL import Image
    rng = random.Random(0)
    for c in range(3):
        os.makedirs(os.path.join(folder, f"class_{c:02d}"), exist_ok=True)
        for k in range(8):
            w, h = rng.randint(48, 160), rng.randint(48, 160)
            px = [((x * (3 + c) + y) % 256, (y * (5 + k)) % 256, (x ^ y ^ rng.randrange(16)) % 256)
                  for y in range(h) for x in range(w)]
            im = Image.new("RGB", (w, h))
            im.putdata(px)
            if k == 7:
                im = im.convert("L")
            im.save(os.path.join(folder, f"class_{c:02d}", f"{k:05d}.jpg"), quality=85 + k)
    with open(os.path.join(folder, ".complete"), "w") as f:
        f.write("3 classes\n")


def page_folder(work, page, cli, data):
    folder = os.path.join(work, re.sub(r"[^\w.-]", "_", page))
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(os.path.join(folder, "build"))
    os.symlink(cli, os.path.join(folder, "build", "fusionflow"))
    os.symlink(data, os.path.join(folder, "build", "demo-data"))
    shutil.copy(os.path.join(data, "class_00", "00000.jpg"), os.path.join(folder, "photo.jpg"))
    return folder


class Timeout(Exception):
    pass


def on_alarm(signum, frame):
    raise Timeout("the block took too long")


def run_python(block, folder, timeout):
    try:
        code = compile(block.text, block.where(), "exec")
    except SyntaxError:
        return traceback.format_exc(limit=0)
    if block.no_run:
        return None
    out = io.StringIO()
    cwd = os.getcwd()
    os.chdir(folder)
    signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(timeout)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            exec(code, {"__name__": "__main__"})
        return None
    except ModuleNotFoundError as e:
        if e.name in OPTIONAL_MODULES:
            return SKIP + f"{e.name} is not installed in {sys.executable}"
        return out.getvalue() + traceback.format_exc()
    except BaseException:  # noqa: B902 -- a block's SystemExit or KeyboardInterrupt is a failure too
        return out.getvalue() + traceback.format_exc()
    finally:
        signal.alarm(0)
        os.chdir(cwd)
        gc.collect()  # loaders the block left open close here


def run_shell(block, folder, timeout):
    args = ["bash", "-n"] if block.no_run else ["bash", "-e", "-o", "pipefail"]
    try:
        r = subprocess.run(args + ["-c", block.text], cwd=folder, capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return "the block took too long"
    return None if r.returncode == 0 else f"exit status {r.returncode}\n{r.stdout}{r.stderr}"


def run_c(block, folder, args, timeout):
    src = os.path.join(folder, f"block{block.line}.c")
    with open(src, "w") as f:
        f.write(block.text)
    cc = [os.environ.get("CC", "cc"), "-std=c17", "-Wall", "-Wextra", "-Werror",
          "-I", os.path.join(args.root, "include"), src]
    link = "int main(" in block.text and not block.no_run and args.lib_dir
    exe = os.path.join(folder, f"block{block.line}")
    cmd = cc + (["-o", exe, "-L", args.lib_dir, "-lfusionflow", f"-Wl,-rpath,{args.lib_dir}"] if link
                else ["-fsyntax-only"])
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        return f"{' '.join(cmd)}\n{r.stderr}"
    if link:
        try:
            r = subprocess.run([exe, "build/demo-data"], cwd=folder, capture_output=True, text=True,
                               timeout=timeout)
        except subprocess.TimeoutExpired:
            return "the program took too long"
        if r.returncode:
            return f"the program exited with {r.returncode}\n{r.stdout}{r.stderr}"
    return None


def run_pipeline(block, folder, timeout):
    if block.no_run:
        return None
    text = " ".join(block.text.split())
    try:
        r = subprocess.run(["build/fusionflow", "plan", "--source", "build/demo-data", "--index", "0",
                            "--pipeline", text], cwd=folder, capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return "fusionflow plan took too long"
    return None if r.returncode == 0 else r.stderr


def run_block(block, folder, args):
    if block.lang in ("sh", "bash"):
        return run_shell(block, folder, args.timeout)
    if block.lang == "python":
        return run_python(block, folder, args.timeout)
    if block.lang == "c":
        return run_c(block, folder, args, args.timeout)
    if block.lang == "pipeline":
        return run_pipeline(block, folder, args.timeout)
    try:
        json.loads(block.text)
    except ValueError as e:
        return f"not JSON: {e}"
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", required=True, help="the repository")
    ap.add_argument("--cli", required=True, help="the built fusionflow")
    ap.add_argument("--work", required=True, help="a scratch folder (emptied first)")
    ap.add_argument("--lib-dir", help="the folder of the built libfusionflow.so (C blocks are linked and run)")
    ap.add_argument("--timeout", type=int, default=150, help="seconds a block may take (default 150: `fusionflow check` imports torch)")
    ap.add_argument("pages", nargs="*", help="Markdown files relative to --root (default: all)")
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    args.root = root
    docs = sorted("docs/" + f for f in os.listdir(os.path.join(root, "docs")) if f.endswith(".md"))
    pages = args.pages or (["README.md", "python/README.md", "CHANGELOG.md", "bench/README.md",
                            "bench/RESULTS.md"] + docs)
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    data = os.path.join(os.path.abspath(args.work), "demo-data")
    make_demo_data(data)
    failures, counts, start = [], {"ran": 0, "checked": 0, "skipped": 0, "not code": 0}, time.monotonic()
    for page in pages:
        path = os.path.join(root, page)
        failures += check_links(path, page)
        folder = page_folder(os.path.abspath(args.work), page, os.path.abspath(args.cli), data)
        for block in blocks_of(path, page):
            if block.lang not in RUN_LANGS:
                counts["not code"] += 1
                continue
            t = time.monotonic()
            error = run_block(block, folder, args)
            kind = "checked" if block.no_run else "ran"
            note = f"  ({block.no_run})" if block.no_run else ""
            if error and error.startswith(SKIP):
                kind, note, error = "skipped", f"  ({error[len(SKIP):]})", None
            counts[kind] += 1
            state = "FAIL" if error else kind
            print(f"{state:7} {block.where()} {time.monotonic() - t:5.1f} s{note}", flush=True)
            if error:
                failures.append(f"{block.where()}:\n{error.rstrip()}")
    chart = subprocess.run([sys.executable, os.path.join(root, "scripts", "doc-pictures.py"), "--check"],
                           capture_output=True, text=True)
    if chart.returncode:
        failures.append(chart.stderr.strip() or "scripts/doc-pictures.py --check failed")
    print(f"doc blocks: {counts['ran']} ran, {counts['checked']} checked without running, "
          f"{counts['skipped']} skipped, {counts['not code']} not code, in {time.monotonic() - start:.1f} s")
    if failures:
        print("\n".join(["", "FAILED:"] + failures), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
