#!/usr/bin/env bash
# Set-up for conv-e2e: install everything the tests need into one Python, at the versions
# in constraints.txt. Idempotent: run it again at any time. torch and triton are kept when
# present (a ROCm or CUDA build); the other packages are brought to the pinned versions.
#
#   scripts/setup.sh && scripts/lit e2e/
#
# Environment:
#   PYTHON   the Python to install into (default: python3)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-python3}"
pip_install() { "$PY" -m pip install --disable-pip-version-check -c "$ROOT/constraints.txt" "$@"; }
has_dist() { "$PY" -m pip show "$1" >/dev/null 2>&1; }

# 1. torch first, by its pinned version, so that nothing later makes pip pull a CUDA build.
#    A machine that has torch (a ROCm or CUDA build) keeps it.
if "$PY" -c "import torch" >/dev/null 2>&1; then
  echo "setup: torch $("$PY" -c 'import torch; print(torch.__version__)') already installed"
else
  pip_install torch
fi

# 2. triton, unless pytorch-triton-rocm (ROCm) already provides the same module:
#    pip must never install both.
if has_dist pytorch-triton-rocm; then
  echo "setup: pytorch-triton-rocm provides triton; not installing the triton package"
elif "$PY" -c "import triton" >/dev/null 2>&1; then
  echo "setup: triton $("$PY" -c 'import triton; print(triton.__version__)') already installed"
else
  pip_install triton
fi

# 3. this repository, editable (the convgen and split-test commands), with what the tests
#    need: lit, filecheck, psutil, pytest, pytest-xdist.
pip_install -e "$ROOT[test]"

# pyenv keeps shims for console scripts: refresh them so `lit` and `convgen` are on PATH.
if command -v pyenv >/dev/null 2>&1; then pyenv rehash >/dev/null 2>&1 || true; fi
echo "setup: done"
