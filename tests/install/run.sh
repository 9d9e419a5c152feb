#!/usr/bin/env bash
# run.sh BUILD SRC — installs BUILD into a temporary prefix and builds the
# C example of docs/c-library.md against it the three documented ways: pkg-config with
# the shared library (rpath), pkg-config with the static library, and CMake's
# find_package; then runs each on a small generated image folder. Checks that
# the static program needs no libfusionflow.so and the shared one finds it
# through its rpath alone. Exit status non-zero on any failure.
set -euo pipefail
BUILD=$(cd "$1" && pwd)
SRC=$(cd "$2" && pwd)
CC=${CC:-cc}
work=$(mktemp -d "${TMPDIR:-/tmp}/ff-install.XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"
fail() { echo "install test: $*" >&2; exit 1; }

cmake --install "$BUILD" --prefix "$prefix" >"$work/install.log" || { cat "$work/install.log"; fail "cmake --install"; }
awk '/^```c$/ { inside = 1; next } /^```$/ { inside = 0 } inside' "$SRC/docs/c-library.md" >"$work/example.c"
grep -q "int main" "$work/example.c" || fail "no C example with main() in docs/c-library.md"

# 3 classes x 2 images of 32x24 RGB, as PNGs written with Python's zlib
python3 - "$work/data" <<'PY'
import os, struct, sys, zlib
def png(path, w, h, seed):
    raw = b"".join(b"\0" + bytes((x * 7 + y * 3 + seed * 40 + c * 85) % 256 for x in range(w) for c in range(3))
                   for y in range(h))
    chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
for k in range(6):
    folder = os.path.join(sys.argv[1], f"class{k % 3}")
    os.makedirs(folder, exist_ok=True)
    png(os.path.join(folder, f"img{k}.png"), 32, 24, k)
PY

run() { # NAME PROGRAM: runs it on the data, expects both epochs' counts
  local out
  out=$(env -u LD_LIBRARY_PATH "$2" "$work/data" 2>&1) || fail "$1: the example failed: $out"
  [ "$out" = $'epoch 0: 6 images\nepoch 1: 6 images' ] || fail "$1: unexpected output: $out"
  echo "install test: $1 ok"
}

export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
# shellcheck disable=SC2046 # pkg-config's words are separate arguments
$CC "$work/example.c" -o "$work/shared" $(pkg-config --cflags --libs fusionflow) \
    -Wl,-rpath,"$(pkg-config --variable=libdir fusionflow)" || fail "pkg-config fusionflow: link failed"
readelf -d "$work/shared" | grep -q "NEEDED.*libfusionflow.so" || fail "shared: does not link libfusionflow.so"
run "pkg-config fusionflow (shared)" "$work/shared"

# shellcheck disable=SC2046
$CC "$work/example.c" -o "$work/static" $(pkg-config --cflags --libs fusionflow-static) ||
  fail "pkg-config fusionflow-static: link failed"
! readelf -d "$work/static" | grep -q "NEEDED.*libfusionflow" || fail "static: still needs libfusionflow.so"
run "pkg-config fusionflow-static" "$work/static"

mkdir -p "$work/cmake"
cp "$work/example.c" "$work/cmake/example.c"
cat >"$work/cmake/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.20)
project(example C)
find_package(fusionflow 0.1 REQUIRED)
add_executable(example_shared example.c)
target_link_libraries(example_shared PRIVATE fusionflow::fusionflow)
add_executable(example_static example.c)
target_link_libraries(example_static PRIVATE fusionflow::fusionflow_static)
CM
cmake -S "$work/cmake" -B "$work/cmake/build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_COMPILER="$CC" \
      >"$work/cmake.log" 2>&1 && cmake --build "$work/cmake/build" >>"$work/cmake.log" 2>&1 ||
  { cat "$work/cmake.log"; fail "find_package(fusionflow): build failed"; }
run "find_package fusionflow::fusionflow" "$work/cmake/build/example_shared"
run "find_package fusionflow::fusionflow_static" "$work/cmake/build/example_static"
echo "install test: 4 passed, 0 failed"
