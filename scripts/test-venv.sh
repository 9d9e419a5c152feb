#!/usr/bin/env bash
# Prints the path of a Python that has the test reference of
# tests/requirements.txt (torch, torchvision, timm, NumPy, Pillow, pytest from
# PyPI), creating its virtual environment first if there is none yet.
#
# The environment lives outside the clone, in
#   ${FF_VENV_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/fusionflow}/venv-<hash>
# where <hash> is that of the requirements file: fresh clones and later runs
# reuse it, and a changed pin makes a new one. Creating it downloads about
# 2.7 GB once (torch's Linux wheel needs the CUDA libraries even on the CPU).
# Concurrent callers wait for one another (flock); an environment is used only
# once it is complete and `import torch, torchvision` works in it.
# FF_VENV_PYTHON names the interpreter it is made from (default
# /usr/bin/python3; the pinned wheels are for CPython 3.11, Debian 12's).
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
req=$here/tests/requirements.txt
root=${FF_VENV_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/fusionflow}
hash=$(sha256sum "$req" | cut -c1-16)
venv=$root/venv-$hash
base=${FF_VENV_PYTHON:-/usr/bin/python3}

if [[ ! -e $venv/.complete ]]; then
  mkdir -p "$root"
  exec 9>"$root/.lock"
  flock 9
  if [[ ! -e $venv/.complete ]]; then
    echo "test-venv: creating $venv from $req (downloads about 2.7 GB once)" >&2
    start=$SECONDS
    rm -rf "$venv"
    "$base" -m venv "$venv" >&2
    "$venv/bin/python" -m pip install --quiet --no-deps --disable-pip-version-check \
      --no-cache-dir -r "$req" >&2
    "$venv/bin/python" -c "import torch, torchvision, numpy, PIL, pytest, timm, webdataset, datasets" >&2
    touch "$venv/.complete"
    echo "test-venv: ready in $((SECONDS - start)) s" >&2
  fi
  flock -u 9
fi
echo "$venv/bin/python"
