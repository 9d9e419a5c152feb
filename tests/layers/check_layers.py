#!/usr/bin/env python3
"""Checks from the built objects that src/'s dependencies point downward (src/LAYERS).

Every undefined symbol of an object of src/FOLDER (nm) must be defined in FOLDER itself, in a
folder of a lower layer of src/LAYERS, or outside src/ (libc, libjpeg-turbo, ...). The objects
are the library's, the CLI's, the CUDA executor's where it is built, and one per header of
src/ compiled with its static inline functions kept (a header's inline code belongs to the
header's folder). Fails on:
  - a folder not listed in src/LAYERS;
  - a call from a folder to one of the same layer or a higher one (a call from src/kernels/
    upward is named as such);
  - a cycle between folders;
  - a cycle between files of one folder (a file whose object needs a symbol of a file that,
    through others maybe, needs one of its own) that is not one of the known cycles listed in
    src/LAYERS (a smaller part of a known cycle is known too; a known cycle no longer found is
    reported, so that the list only shrinks).

Usage: check_layers.py --layers src/LAYERS --src SRC_DIR --objects LIST [--nm NM]
       check_layers.py --self-test
LIST: a file naming one object per line (as CMake's $<TARGET_OBJECTS> gives them); a header's
object is named after the header (.../layers/<path under src>.h.c.o). Exit status 0 when every
rule holds, 1 when one does not (each finding on a line of its own), 2 on a usage error.
"""
import argparse
import os
import re
import subprocess
import sys


def parse_layers(text):
    """Returns ([set of folders per layer, top first], [known cycles as sets of 'folder/file'])."""
    layers, known = [], []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].split()
        if not line:
            continue
        if line[0] == "known-cycle":
            if len(line) < 3:
                raise ValueError("line %d: a known cycle names two files or more" % n)
            known.append(frozenset(line[1:]))
        else:
            layers.append(set(line))
    seen = set()
    for layer in layers:
        if seen & layer:
            raise ValueError("folder %s is listed twice" % ", ".join(sorted(seen & layer)))
        seen |= layer
    return layers, known


def unit_of(obj, src):
    """'folder/file' of an object under src/ or of a header's object (.../layers/F/X.h.c.o)."""
    norm = obj.replace(os.sep, "/")
    m = re.search(r"/layers/(.+\.h)\.c\.o$", norm)
    if m:
        return m.group(1)
    m = re.search(r"/src/(.+?)\.(?:c|cu)\.o$", norm)
    if m:
        rel = m.group(1)
        for ext in (".c", ".cu"):
            if os.path.exists(os.path.join(src, rel + ext)):
                return rel + ext
        return rel + (".cu" if norm.endswith(".cu.o") else ".c")
    raise ValueError("%s: not an object of src/ nor of a header" % obj)


def read_symbols(objects, nm):
    """{object: (defined global symbols, undefined symbols)}, from one `nm -P -A` of them all."""
    out = subprocess.run([nm, "-P", "-A"] + objects, check=True, capture_output=True, text=True).stdout
    table = {obj: (set(), set()) for obj in objects}
    for line in out.splitlines():
        obj, _, rest = line.partition(": ")
        parts = rest.split()
        if obj not in table or len(parts) < 2:
            continue
        name, kind = parts[0], parts[1]
        defined, undefined = table[obj]
        if kind in ("U", "w", "v"):
            undefined.add(name)
        elif kind in "TDBRCGSWVI" and kind.isupper():
            defined.add(name)
    return table


def sccs(nodes, edges):
    """Strongly connected components with more than one node (Tarjan), each a sorted list."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def check(units, layers, known):
    """units: {'folder/file': (defined, undefined)}. Returns (failures, notes), lists of lines."""
    failures, notes = [], []
    rank = {}
    for i, layer in enumerate(layers):
        for folder in layer:
            rank[folder] = i
    definer = {}
    for unit, (defined, _) in units.items():
        for sym in defined:
            definer.setdefault(sym, set()).add(unit)
    folder_of = lambda unit: unit.split("/", 1)[0]
    for folder in sorted({folder_of(u) for u in units} - set(rank)):
        failures.append("src/%s/ is not listed in src/LAYERS" % folder)
    folder_edges, file_edges, why = {}, {}, {}
    for unit, (_, undefined) in sorted(units.items()):
        here = folder_of(unit)
        for sym in sorted(undefined):
            owners = definer.get(sym)
            if not owners:
                continue  # outside src/: a system or third-party library
            if any(folder_of(o) == here for o in owners):
                for o in owners:
                    if o != unit and folder_of(o) == here:
                        file_edges.setdefault(unit, set()).add(o)
                        why.setdefault((unit, o), sym)
                continue
            for o in sorted(owners):
                there = folder_of(o)
                folder_edges.setdefault(here, set()).add(there)
                why.setdefault((here, there), "%s calls %s of %s" % (unit, sym, o))
                if here not in rank or there not in rank or rank[there] > rank[here]:
                    continue
                if here == "kernels":
                    failures.append("src/kernels/ calls upward: %s calls %s of %s" % (unit, sym, o))
                else:
                    failures.append("%s calls %s of %s: src/%s/ is not below src/%s/ in src/LAYERS"
                                    % (unit, sym, o, there, here))
    for comp in sccs(folder_edges.keys() | {t for ts in folder_edges.values() for t in ts}, folder_edges):
        ring = set(comp)
        links = ["%s -> %s (%s)" % (a, b, why[(a, b)]) for a in comp for b in sorted(folder_edges.get(a, ()))
                 if b in ring]
        failures.append("cycle between folders %s: %s" % (", ".join(comp), "; ".join(links)))
    found = []
    for comp in sccs(file_edges.keys() | {t for ts in file_edges.values() for t in ts}, file_edges):
        ring = set(comp)
        links = ["%s -> %s (%s)" % (a, b, why[(a, b)]) for a in comp for b in sorted(file_edges.get(a, ()))
                 if b in ring]
        match = [k for k in known if ring <= k]
        if match:
            notes.append("known cycle between files %s (to be removed): %s" % (", ".join(comp), "; ".join(links)))
        else:
            failures.append("cycle between files %s: %s" % (", ".join(comp), "; ".join(links)))
        found.append(ring)
    for k in known:
        if not any(ring <= k for ring in found):
            notes.append("known cycle %s is gone: remove it from src/LAYERS" % " ".join(sorted(k)))
    for here in sorted(folder_edges):
        notes.append("src/%s/ uses %s" % (here, ", ".join("src/%s/" % t for t in sorted(folder_edges[here]))))
    return failures, notes


def self_test():
    """The rules on small made-up tables: each must fail where it should, and pass where not."""
    layers, known = parse_layers("cli\nloader\nsched\nexec\nops codec\nkernels core\n"
                                 "known-cycle exec/a.c exec/b.c exec/c.c\n")
    ok = {"cli/main.c": (set(), {"ff_loader_open", "printf"}),
          "loader/loader.c": ({"ff_loader_open"}, {"ff__pool_get", "ff__clamp"}),
          "exec/pool.c": ({"ff__pool_get"}, {"ff__clamp"}),
          "core/util.c": ({"ff__clamp"}, {"memcpy"})}
    cases = [
        ("downward calls", ok, []),
        ("kernels upward", {"kernels/affine_setup.h": (set(), {"ff__probe"}), "ops/affine.c": ({"ff__probe"}, set())},
         ["src/kernels/ calls upward"]),
        ("same layer", {"ops/a.c": (set(), {"ff__c"}), "codec/c.c": ({"ff__c"}, set())}, ["is not below"]),
        ("folder cycle", {"loader/l.c": ({"ff__l"}, {"ff__s"}), "sched/s.c": ({"ff__s"}, {"ff__l"})},
         ["is not below", "cycle between folders loader, sched"]),
        ("unknown folder", {"extra/x.c": (set(), set())}, ["src/extra/ is not listed"]),
        ("new file cycle", {"ops/x.c": ({"ff__x"}, {"ff__y"}), "ops/y.c": ({"ff__y"}, {"ff__x"})},
         ["cycle between files ops/x.c, ops/y.c"]),
        ("known file cycle", {"exec/a.c": ({"ff__a"}, {"ff__b"}), "exec/b.c": ({"ff__b"}, {"ff__a"})}, []),
        ("known cycle grown", {"exec/a.c": ({"ff__a"}, {"ff__d"}), "exec/d.c": ({"ff__d"}, {"ff__a"})},
         ["cycle between files exec/a.c, exec/d.c"]),
    ]
    bad = 0
    for name, units, want in cases:
        failures, _ = check(units, layers, known)
        text = "\n".join(failures)
        good = all(w in text for w in want) and (bool(failures) == bool(want))
        if not good:
            bad += 1
            print("self-test %s: expected %s, got %s" % (name, want or "no failure", failures or "none"))
    _, notes = check(ok, layers, known)
    if not any("is gone" in n for n in notes):
        bad += 1
        print("self-test stale known cycle: not reported")
    print("self-test: %d of %d cases wrong" % (bad, len(cases) + 1))
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--layers")
    ap.add_argument("--src")
    ap.add_argument("--objects", help="file listing the objects, one per line")
    ap.add_argument("--nm", default="nm")
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    if not (args.layers and args.src and args.objects):
        ap.error("--layers, --src and --objects are needed")
    with open(args.layers) as f:
        layers, known = parse_layers(f.read())
    with open(args.objects) as f:
        objects = [line.strip() for line in re.split(r"[\n;]", f.read()) if line.strip()]
    units = {}
    for obj, (defined, undefined) in read_symbols(objects, args.nm).items():
        unit = unit_of(obj, args.src)
        d, u = units.get(unit, (set(), set()))
        units[unit] = (d | defined, u | undefined)
    failures, notes = check(units, layers, known)
    for line in notes:
        print(line)
    for line in failures:
        print("FAIL: " + line)
    print("%d objects of %d files in %d folders: %s" % (len(objects), len(units),
          len({u.split("/", 1)[0] for u in units}), "%d failures" % len(failures) if failures else "layers hold"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
