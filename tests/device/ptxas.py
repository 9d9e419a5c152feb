#!/usr/bin/env python3
"""ptxas.py — every kernel's registers, spills and theoretical occupancy on
sm_90 (H100/H200), from the compiler's own report (`nvcc -Xptxas=-v`, which
tests/device/prepare.sh captures while it builds the carry set).

    ptxas.py [--ptx DIR] [--block 256] LOG...  > ptxas.json
    ptxas.py --print ptxas.json

Occupancy is the CUDA occupancy calculator's for compute capability 9.0:
64 warps, 32 blocks and 65,536 registers per multiprocessor (allocated per
warp in units of 256, in 4 sub-partitions), 228 KiB of shared memory per
multiprocessor with 1 KiB reserved per block, dynamic shared memory 0. The
block size is the kernel's `__launch_bounds__` (`.maxntid` in the PTX under
--ptx DIR) or --block (the tree's launches use 256), and the line says
which. `register_limited` is the occupancy the registers alone allow, for
any block size. scripts/kernel-occupancy.py uses the same calculator and
parser (for the other architectures of SM too); this file needs nothing but
Python, as the GPU machine has it.
"""
import json
import os
import re
import subprocess
import sys

# Per multiprocessor: warps, blocks, shared memory (bytes); every one of these
# has 65,536 registers in 4 sub-partitions, allocated per warp in units of 256.
SM = {
    "sm_80": dict(warps=64, blocks=32, smem=164 * 1024),
    "sm_86": dict(warps=48, blocks=16, smem=100 * 1024),
    "sm_89": dict(warps=48, blocks=24, smem=100 * 1024),
    "sm_90": dict(warps=64, blocks=32, smem=228 * 1024),
}
REGS_SM, REG_UNIT, SUBPARTITIONS = 65536, 256, 4
SMEM_RESERVED, SMEM_UNIT = 1024, 128


def ceil_to(x, unit):
    return -(-x // unit) * unit


def occupancy(regs, smem, block, arch="sm_90"):
    """(blocks per SM, occupancy, the limiting resource, occupancy the registers alone allow)."""
    sm = SM[arch]
    warps = -(-block // 32)
    regs_per_warp = ceil_to(max(regs, 1) * 32, REG_UNIT)
    warps_by_regs = SUBPARTITIONS * ((REGS_SM // SUBPARTITIONS) // regs_per_warp)
    limits = {
        "warps": sm["warps"] // warps,
        "blocks": sm["blocks"],
        "registers": warps_by_regs // warps,
        "shared memory": sm["smem"] // ceil_to(smem + SMEM_RESERVED, SMEM_UNIT),
    }
    blocks = min(limits.values())
    limiter = min(limits, key=lambda k: limits[k])
    return blocks, blocks * warps / sm["warps"], limiter, min(warps_by_regs, sm["warps"]) / sm["warps"]


def parse_lines(lines, kernels=None):
    """{mangled name: figures} from ptxas -v output lines, added to `kernels`."""
    kernels = {} if kernels is None else kernels
    cur = None
    for line in lines:
        m = re.search(r"Compiling entry function '([^']+)' for '(sm_\w+)'", line)
        if m:
            cur = m.group(1)
            kernels[cur] = {"arch": m.group(2)}
            continue
        if cur is None:
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m:
            kernels[cur].update(stack_bytes=int(m.group(1)), spill_store_bytes=int(m.group(2)),
                                spill_load_bytes=int(m.group(3)))
        m = re.search(r"Used (\d+) registers", line)
        if m:
            k = kernels[cur]
            k["registers"] = int(m.group(1))
            b = re.search(r"used (\d+) barriers", line)
            s = re.search(r"(\d+) bytes smem", line)
            k["barriers"] = int(b.group(1)) if b else 0
            k["smem_bytes"] = int(s.group(1)) if s else 0
            cur = None
    return kernels


def parse_logs(paths):
    """{mangled name: figures} from ptxas -v logs (several, any order)."""
    kernels = {}
    for path in paths:
        with open(path, errors="replace") as f:
            parse_lines(f, kernels)
    return kernels


def launch_bounds(ptx_dir):
    """{mangled name: max threads per block} from .maxntid in the PTX files."""
    bounds = {}
    if not ptx_dir or not os.path.isdir(ptx_dir):
        return bounds
    for name in sorted(os.listdir(ptx_dir)):
        if not name.endswith(".ptx"):
            continue
        text = open(os.path.join(ptx_dir, name), errors="replace").read()
        for m in re.finditer(r"\.entry\s+(\w+)\s*\((.*?)\)\s*([^{]*)\{", text, re.S):
            n = re.search(r"\.maxntid\s+(\d+)\s*,\s*(\d+)\s*,\s*(\d+)", m.group(3))
            if n:
                bounds[m.group(1)] = int(n.group(1)) * int(n.group(2)) * int(n.group(3))
    return bounds


def demangle(names):
    try:
        out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True)
        return dict(zip(names, out.stdout.splitlines()))
    except (OSError, subprocess.CalledProcessError):
        return {n: n for n in names}


def report(logs, ptx_dir, block):
    kernels = parse_logs(logs)
    bounds = launch_bounds(ptx_dir)
    pretty = demangle(sorted(kernels))
    rows = []
    for mangled in sorted(kernels):
        k = kernels[mangled]
        if "registers" not in k:
            continue
        b = bounds.get(mangled, block)
        blocks, occ, limiter, reg_occ = occupancy(k["registers"], k["smem_bytes"], b)
        rows.append(dict(name=pretty[mangled].split("(")[0], mangled=mangled, **k, block=b,
                         block_from="launch_bounds" if mangled in bounds else "assumed",
                         blocks_per_sm=blocks, occupancy=round(occ, 4), limiter=limiter,
                         register_limited=round(reg_occ, 4)))
    return {"source": "nvcc -Xptxas=-v (the carry build)", "kernels": rows}


def table(rep):
    lines = ["%-28s %5s %6s %6s %5s %6s %7s %9s  %s" % ("kernel", "regs", "spill", "stack", "smem", "block",
                                                          "blk/SM", "occupancy", "limit (registers alone)")]
    for k in rep["kernels"]:
        lines.append("%-28s %5d %6d %6d %5d %5d%s %7d %8.0f%%  %s (%.0f%%)" % (
            k["name"][:28], k["registers"], k["spill_store_bytes"] + k["spill_load_bytes"], k["stack_bytes"],
            k["smem_bytes"], k["block"], "" if k["block_from"] == "launch_bounds" else "*", k["blocks_per_sm"],
            100 * k["occupancy"], k["limiter"], 100 * k["register_limited"]))
    lines.append("(* block size assumed: no __launch_bounds__; sm_90 occupancy calculator, dynamic shared memory 0)")
    ks = rep["kernels"]
    if ks:
        low = min(ks, key=lambda k: k["occupancy"])
        lines.append("%d kernels: lowest occupancy %.0f%% (%s, %d registers), %d spill bytes in all"
                     % (len(ks), 100 * low["occupancy"], low["name"], low["registers"],
                        sum(k["spill_store_bytes"] + k["spill_load_bytes"] for k in ks)))
    return "\n".join(lines)


def main(argv):
    if len(argv) == 2 and argv[0] == "--print":
        print(table(json.load(open(argv[1]))))
        return 0
    ptx_dir, block, logs = None, 256, []
    it = iter(argv)
    for a in it:
        if a == "--ptx":
            ptx_dir = next(it, None)
        elif a == "--block":
            block = int(next(it, "256"))
        else:
            logs.append(a)
    if not logs:
        print(__doc__, file=sys.stderr)
        return 2
    rep = report(logs, ptx_dir, block)
    if not rep["kernels"]:
        print("ptxas.py: no 'Compiling entry function' report in " + ", ".join(logs), file=sys.stderr)
        return 1
    json.dump(rep, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
