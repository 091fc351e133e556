#!/usr/bin/env bash
# Creates ./.venv (if missing) and installs kinedistill with its test tools into it. Idempotent.
#
# torch goes in first, pinned: on a CPU-only machine a bare "torch" requirement makes pip fetch a
# multi-GB CUDA build. `pip install torch==2.13.0` takes the CPU wheel where the machine provides one
# (as our CI machines do); elsewhere set PIP_EXTRA_INDEX_URL to a CPU wheel index before running this.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
PIP=".venv/bin/python -m pip"
if ! .venv/bin/python -c "import torch" >/dev/null 2>&1; then
  $PIP install -q "torch==${KINEDISTILL_TORCH_VERSION:-2.13.0}"
fi
$PIP install -q -e ".[dev]"
