#!/usr/bin/env bash
# Installs fusionflow's build, test and demo dependencies on Debian 12 (clang
# and its libFuzzer runtime for the clang build and the fuzz targets; ccache,
# which the Makefile compiles through when it is there, optional), and
# with --bench also the peers the benchmarks compare against (OpenCV, and
# Debian's torchvision for bench/compare.py's DataLoader); with --nvjpeg only
# NVIDIA's nvJPEG for the GPU device check (below). The test reference itself
# (torch and torchvision from PyPI) is not a Debian package:
# scripts/test-venv.sh makes its environment, which `make test` calls.
# Idempotent: checks each package with dpkg-query first and does nothing
# (no apt-get update, no network) when everything is already installed.
set -euo pipefail

# --nvjpeg: NVIDIA's nvJPEG for the device check on a GPU machine (the
# library loads it at run time and builds without it): the `nvidia-nvjpeg`
# wheel (about 4 MB) is downloaded once into a cache outside the tree, and its
# libnvjpeg.so.13 copied to build/nvjpeg/, where tests/device/prepare.sh
# takes it into the device check's carry set (for a machine without network).
if [[ "${1:-}" == "--nvjpeg" ]]; then
  cache=${XDG_CACHE_HOME:-$HOME/.cache}/fusionflow/nvjpeg
  mkdir -p "$cache" build/nvjpeg
  if ! ls "$cache"/nvidia_nvjpeg-*.whl >/dev/null 2>&1; then
    python3 -m pip download --no-deps --quiet --dest "$cache" nvidia-nvjpeg
  fi
  wheel=$(ls "$cache"/nvidia_nvjpeg-*.whl | tail -1)
  python3 - "$wheel" build/nvjpeg <<'EOF'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    lib = [n for n in z.namelist() if n.endswith("/libnvjpeg.so.13")][0]
    open(sys.argv[2] + "/libnvjpeg.so.13", "wb").write(z.read(lib))
EOF
  echo "install-deps: build/nvjpeg/libnvjpeg.so.13 from $(basename "$wheel")"
  exit 0
fi

PACKAGES=(
  build-essential cmake pkg-config ccache clang libclang-rt-14-dev
  libjpeg62-turbo-dev libspng-dev libcmocka-dev
  libarchive-dev libcurl4-openssl-dev libwebp-dev libtiff-dev
  libjansson-dev libdlpack-dev
  python3 python3-dev python3-venv python3-numpy python3-pil python3-pytest
  mate-backgrounds plasma-workspace-wallpapers
)
if [[ "${1:-}" == "--bench" ]]; then
  PACKAGES+=(python3-opencv python3-torchvision) # the benchmarks' peers, in Debian's Python
fi

missing=()
for p in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  if [[ "$status" != "install ok installed" ]]; then
    missing+=("$p")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all ${#PACKAGES[@]} packages already installed"
  exit 0
fi

SUDO=()
if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO=(sudo)
  else
    echo "install-deps: need root (or sudo) to install: ${missing[*]}" >&2
    exit 1
  fi
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y --no-install-recommends "${missing[@]}"
