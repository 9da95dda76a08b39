#!/usr/bin/env bash
# Create .venv and install AirPatrol into it. Usage: scripts/install.sh [--dev]
# torch is pinned to the build that matches the rest of the stack; set TORCH_SPEC to change it
# (e.g. TORCH_SPEC="torch torchvision --index-url https://download.pytorch.org/whl/cpu" for a CPU-only build).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
extras=""
[ "${1:-}" = "--dev" ] && extras="[dev]"
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
if ! .venv/bin/python -c "import torch, torchvision" 2>/dev/null; then
  # shellcheck disable=SC2086
  .venv/bin/python -m pip install -q ${TORCH_SPEC:-torch==2.14.1 torchvision==0.29.1}
fi
.venv/bin/python -m pip install -q -e ".${extras}"
# OpenVINO's usage telemetry is opt-in; make sure nothing phones home from an edge box.
.venv/bin/python -m pip uninstall -q -y openvino-telemetry 2>/dev/null || true
echo "AirPatrol installed in .venv ($(.venv/bin/airpatrol --help >/dev/null && echo ok))"
