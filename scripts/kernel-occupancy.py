#!/usr/bin/env python3
"""Registers, spills, shared memory and occupancy of every CUDA kernel, as ptxas gives them.

Compiles src/exec/cuda.cu for one architecture the way the build does
(CMakeLists.txt's ff_cuda_objects: --fmad=false) with `-Xptxas -v`, and prints
one line per kernel: its stage kinds (kernels/stage.h's ff__dstage_kind for the
per-kind kernels), registers per thread, spill stores and loads in bytes,
static shared memory, and the occupancy of its 256-thread blocks computed from
the architecture's limits (the CUDA occupancy calculator's rules: registers
allocated per warp in units of 256, 1 KiB of shared memory reserved per block).
No GPU is needed.

    scripts/kernel-occupancy.py [--arch sm_90] [--nvcc PATH] [--check] [--min-occupancy 0.5]

--check exits 1 when a kernel spills or runs under --min-occupancy (default
0.5); the raw ptxas lines go to stderr with --verbose.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BLOCK = 256  # exec/cuda.cu's BLOCK (kernels/stage_block.h's FF__DBLOCK)

# Per SM: registers, threads, blocks, shared memory (bytes) of the architectures we build for.
LIMITS = {
    "sm_80": dict(regs=65536, threads=2048, blocks=32, smem=167936),
    "sm_86": dict(regs=65536, threads=1536, blocks=16, smem=102400),
    "sm_89": dict(regs=65536, threads=1536, blocks=24, smem=102400),
    "sm_90": dict(regs=65536, threads=2048, blocks=32, smem=233472),
}


def find_nvcc(given):
    for c in (given, os.environ.get("CUDACXX"), "/usr/local/cuda/bin/nvcc", shutil.which("nvcc")):
        if c and os.path.exists(c):
            return c
    sys.exit("kernel-occupancy: no nvcc (give --nvcc PATH)")


def stage_kinds():
    """ff__dstage_kind's names in order, from kernels/stage.h."""
    text = open(os.path.join(ROOT, "src", "kernels", "stage.h")).read()
    body = text[text.index("typedef enum ff__dstage_kind"):text.index("} ff__dstage_kind;")]
    return [m.group(1) for m in re.finditer(r"^\s*FF__DS_(\w+)", body, re.M)]


def kernel_name(mangled, kinds):
    """_Z14ff_elem_kernelILi21EEvPK10ff__dstage -> ff_elem_kernel<PIL_WARP>."""
    m = re.match(r"_Z(\d+)", mangled)
    if not m:
        return mangled
    start = m.end()
    name = mangled[start:start + int(m.group(1))]
    t = re.match(r"ILi(\d+)E", mangled[start + int(m.group(1)):])
    if t:
        k = int(t.group(1))
        name += "<%s>" % (kinds[k] if k < len(kinds) else k)
    return name


def occupancy(regs, smem, lim):
    warps = BLOCK // 32
    warp_regs = -(-regs * 32 // 256) * 256 if regs else 0
    by_regs = (lim["regs"] // warp_regs) // warps if warp_regs else lim["blocks"]
    by_smem = lim["smem"] // (-(-(smem + 1024) // 128) * 128)
    blocks = min(by_regs, by_smem, lim["threads"] // BLOCK, lim["blocks"])
    return blocks, blocks * BLOCK / lim["threads"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--arch", default="sm_90", choices=sorted(LIMITS))
    ap.add_argument("--nvcc")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--min-occupancy", type=float, default=0.5)
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args()
    nvcc = find_nvcc(a.nvcc)
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [nvcc, "-arch=" + a.arch, "-c", os.path.join(ROOT, "src", "exec", "cuda.cu"),
               "-I" + os.path.join(ROOT, "include"), "-I" + os.path.join(ROOT, "src"),
               "-DFF_BUILDING_LIBRARY", "-D_GNU_SOURCE", "--fmad=false", "-Xptxas", "-v",
               "-o", os.path.join(tmp, "cuda.o")]
        r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        sys.stderr.write(r.stdout + r.stderr)
        sys.exit("kernel-occupancy: nvcc failed")
    if a.verbose:
        sys.stderr.write(r.stderr)
    kinds, lim, rows, cur = stage_kinds(), LIMITS[a.arch], [], None
    for line in r.stderr.splitlines():
        m = re.search(r"Compiling entry function '(\w+)'", line)
        if m:
            cur = dict(name=kernel_name(m.group(1), kinds), stores=0, loads=0, regs=0, smem=0)
            rows.append(cur)
            continue
        if cur is None:
            continue
        m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m:
            cur["stores"], cur["loads"] = int(m.group(1)), int(m.group(2))
        m = re.search(r"Used (\d+) registers", line)
        if m:
            cur["regs"] = int(m.group(1))
            s = re.search(r"(\d+) bytes smem", line)
            cur["smem"] = int(s.group(1)) if s else 0
    if not rows:
        sys.exit("kernel-occupancy: ptxas reported no kernel (is the toolkit's ptxas verbose output changed?)")
    bad = 0
    print("%-36s %5s %7s %7s %6s %7s %9s" % ("kernel (" + a.arch + ", 256-thread blocks)", "regs", "spill_st",
                                             "spill_ld", "smem", "blk/SM", "occupancy"))
    for row in sorted(rows, key=lambda r: r["name"]):
        blocks, occ = occupancy(row["regs"], row["smem"], lim)
        short = row["stores"] or row["loads"] or occ < a.min_occupancy
        bad += bool(short)
        print("%-36s %5d %7d %7d %6d %7d %8.1f%%%s" % (row["name"], row["regs"], row["stores"], row["loads"],
                                                     row["smem"], blocks, 100 * occ, "  <-" if short else ""))
    print("%d kernels; %d spill or run under %.0f%% occupancy" % (len(rows), bad, 100 * a.min_occupancy))
    return 1 if a.check and bad else 0


if __name__ == "__main__":
    sys.exit(main())
