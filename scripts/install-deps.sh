#!/usr/bin/env bash
# Installs fusionflow's build, test and demo dependencies on Debian 12, and
# with --bench also the peers the benchmarks compare against (OpenCV, and
# Debian's torchvision for bench/compare.py's DataLoader). The
# test reference itself (torch and torchvision from PyPI) is not a Debian
# package: scripts/test-venv.sh makes its environment, which `make test` calls.
# Idempotent: checks each package with dpkg-query first and does nothing
# (no apt-get update, no network) when everything is already installed.
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config
  libjpeg62-turbo-dev libspng-dev libcmocka-dev
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
