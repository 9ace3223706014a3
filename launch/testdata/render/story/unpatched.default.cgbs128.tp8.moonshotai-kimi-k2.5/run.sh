#!/usr/bin/env bash
# Cell unpatched.default.cgbs128.tp8.moonshotai-kimi-k2.5 of matrix story-sm120-nccl (examples/story/matrix.toml), written by smpatch matrix render.
# Patches: none.
# warn mem-fraction-nccl-presets: NCCL buffer and channel settings shift device memory: a --mem-fraction-static tuned for one NCCL preset may fail KV-pool init ('Not enough memory') under another
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export NCCL_BUFFSIZE=16777216
export NCCL_MAX_NCHANNELS=16
export NCCL_MIN_NCHANNELS=16
export NCCL_NTHREADS=512
# sitecustomize.py sets the NCCL variables again inside Python, before torch loads.
export PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}"
log="${SMPATCH_LOG_DIR:-$here}"/unpatched.default.cgbs128.tp8.moonshotai-kimi-k2.5.log
echo '### smpatch: cell unpatched.default.cgbs128.tp8.moonshotai-kimi-k2.5: log '"$log" >&2
rc=0
python3 -m sglang.launch_server --model-path moonshotai/Kimi-K2.5 --tp 8 --trust-remote-code --mem-fraction-static 0.55 --cuda-graph-max-bs 128 --num-continuous-decode-steps 4 --disable-custom-all-reduce --host 127.0.0.1 --port 30000 >"$log" 2>&1 || rc=$?
echo '### smpatch: cell unpatched.default.cgbs128.tp8.moonshotai-kimi-k2.5: exit '"$rc" >&2
exit "$rc"
