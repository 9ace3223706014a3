#!/usr/bin/env bash
# Cell small.tp1.fusion-off of matrix host venv (testdata/host.toml), written by smpatch matrix render.
# Patches: none.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export HF_HOME=/cache/hf
export RUN_NAME=small.tp1.fusion-off
# sitecustomize.py sets the NCCL variables again inside Python, before torch loads.
export PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}"
export PATH=/opt/venv/bin"${PATH:+:$PATH}"
log="${SMPATCH_LOG_DIR:-$here}"/small.tp1.fusion-off.log
cd /runs/small.tp1.fusion-off
echo '### smpatch: cell small.tp1.fusion-off: log '"$log" >&2
rc=0
python3 -m sglang.launch_server --model-path /models/small --tp 1 --disable-cuda-graph >"$log" 2>&1 || rc=$?
echo '### smpatch: cell small.tp1.fusion-off: exit '"$rc" >&2
exit "$rc"
