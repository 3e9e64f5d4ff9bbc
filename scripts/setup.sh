#!/usr/bin/env bash
# Set-up for conv-e2e: install everything the tests need into one Python.
# Idempotent: run it again at any time; what is there already is kept.
#
#   scripts/setup.sh && lit e2e/
#
# Environment:
#   PYTHON         the Python to install into (default: python3)
#   TORCH_VERSION  torch to install when none is importable (default: 2.13.0, the CPU build
#                  this workplace keeps as a local wheel; a machine that already has torch,
#                  e.g. a ROCm or CUDA build, keeps its own)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-python3}"
pip_install() { "$PY" -m pip install --disable-pip-version-check "$@"; }
has_dist() { "$PY" -m pip show "$1" >/dev/null 2>&1; }

# 1. torch first, by exact version, so that nothing later makes pip pull a CUDA build.
if "$PY" -c "import torch" >/dev/null 2>&1; then
  echo "setup: torch $("$PY" -c 'import torch; print(torch.__version__)') already installed"
else
  pip_install "torch==${TORCH_VERSION:-2.13.0}"
fi

# 2. triton, unless pytorch-triton-rocm (ROCm) already provides the same module:
#    pip must never install both.
pkgs=()
if has_dist pytorch-triton-rocm; then
  echo "setup: pytorch-triton-rocm provides triton; not installing the triton package"
elif "$PY" -c "import triton" >/dev/null 2>&1; then
  echo "setup: triton $("$PY" -c 'import triton; print(triton.__version__)') already installed"
else
  pkgs+=(triton)
fi
# lit and filecheck pinned: the suite relies on their exact behaviour (DESIGN.md, section 7).
pkgs+=("lit==23.1.5" "filecheck==1.0.6" psutil pytest)
pip_install "${pkgs[@]}"

# 3. this repository, editable: the `convgen` and `split-test` commands.
pip_install -e "$ROOT"

# pyenv keeps shims for console scripts: refresh them so `lit` and `convgen` are on PATH.
if command -v pyenv >/dev/null 2>&1; then pyenv rehash >/dev/null 2>&1 || true; fi
if ! command -v lit >/dev/null 2>&1; then
  scripts_dir="$("$PY" -c 'import sysconfig; print(sysconfig.get_path("scripts"))')"
  echo "setup: note: 'lit' is not on PATH; it is in $scripts_dir (add that to PATH)" >&2
fi
echo "setup: done"
