#!/usr/bin/env python3
"""Registers, spills, shared memory and occupancy of every CUDA kernel, as ptxas gives them.

Compiles src/exec/cuda.cu for one architecture the way the build does
(CMakeLists.txt's ff_cuda_objects: --fmad=false) with `-Xptxas -v`, and prints
one line per kernel: its stage kinds (kernels/stage.h's ff__dstage_kind for the
per-kind kernels), registers per thread, spill stores and loads in bytes,
static shared memory, and the occupancy of its 256-thread blocks computed from
the architecture's limits (the CUDA occupancy calculator's rules, as
tests/device/ptxas.py computes them for the device check: registers allocated
per warp in units of 256 in 4 sub-partitions, 1 KiB of shared memory reserved
per block). No GPU is needed.

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
sys.path.insert(0, os.path.join(ROOT, "tests", "device"))
import ptxas  # noqa: E402  (the occupancy calculator and ptxas -v parser)

BLOCK = 256  # exec/cuda.cu's BLOCK (kernels/stage_block.h's FF__DBLOCK)


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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--arch", default="sm_90", choices=sorted(ptxas.SM))
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
    kinds = stage_kinds()
    rows = [dict(name=kernel_name(mangled, kinds), stores=k.get("spill_store_bytes", 0),
                 loads=k.get("spill_load_bytes", 0), regs=k["registers"], smem=k["smem_bytes"])
            for mangled, k in ptxas.parse_lines(r.stderr.splitlines()).items() if "registers" in k]
    if not rows:
        sys.exit("kernel-occupancy: ptxas reported no kernel (is the toolkit's ptxas verbose output changed?)")
    bad = 0
    print("%-36s %5s %7s %7s %6s %7s %9s" % ("kernel (" + a.arch + ", 256-thread blocks)", "regs", "spill_st",
                                             "spill_ld", "smem", "blk/SM", "occupancy"))
    for row in sorted(rows, key=lambda r: r["name"]):
        blocks, occ, _, _ = ptxas.occupancy(row["regs"], row["smem"], BLOCK, a.arch)
        short = row["stores"] or row["loads"] or occ < a.min_occupancy
        bad += bool(short)
        print("%-36s %5d %7d %7d %6d %7d %8.1f%%%s" % (row["name"], row["regs"], row["stores"], row["loads"],
                                                     row["smem"], blocks, 100 * occ, "  <-" if short else ""))
    print("%d kernels; %d spill or run under %.0f%% occupancy" % (len(rows), bad, 100 * a.min_occupancy))
    return 1 if a.check and bad else 0


if __name__ == "__main__":
    sys.exit(main())
