#!/usr/bin/env bash
# Cell big.tp4.fusion-off of matrix host venv (testdata/host.toml), written by smpatch matrix render.
# Patches: none.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export HF_HOME=/cache/hf
export NCCL_DEBUG=INFO
export RUN_NAME=big.tp4.fusion-off
# sitecustomize.py sets the NCCL variables again inside Python, before torch loads.
export PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}"
export PATH=/opt/venv/bin"${PATH:+:$PATH}"
log="${SMPATCH_LOG_DIR:-$here}"/big.tp4.fusion-off.log
cd /runs/big.tp4.fusion-off
echo '### smpatch: cell big.tp4.fusion-off: log '"$log" >&2
rc=0
python3 -m sglang.launch_server --model-path /models/big --tp 4 --disable-cuda-graph >"$log" 2>&1 || rc=$?
echo '### smpatch: cell big.tp4.fusion-off: exit '"$rc" >&2
exit "$rc"
