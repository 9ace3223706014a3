#!/usr/bin/env bash
# Cell unpatched.fewchan.cgbs128.tp2.qwen-qwen3-30b-a3b of matrix story-sm120-nccl (examples/story/matrix.toml), written by smpatch matrix render.
# Patches: none.
# warn mem-fraction-nccl-presets: NCCL buffer and channel settings shift device memory: a --mem-fraction-static tuned for one NCCL preset may fail KV-pool init ('Not enough memory') under another
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export NCCL_ALGO=Ring
export NCCL_BUFFSIZE=131072
export NCCL_MAX_NCHANNELS=2
export NCCL_MIN_NCHANNELS=1
export NCCL_NTHREADS=64
export NCCL_P2P_LEVEL=SYS
export NCCL_PROTO=LL
# sitecustomize.py sets the NCCL variables again inside Python, before torch loads.
export PYTHONPATH="$here${PYTHONPATH:+:$PYTHONPATH}"
log="${SMPATCH_LOG_DIR:-$here}"/unpatched.fewchan.cgbs128.tp2.qwen-qwen3-30b-a3b.log
echo '### smpatch: cell unpatched.fewchan.cgbs128.tp2.qwen-qwen3-30b-a3b: log '"$log" >&2
rc=0
python3 -m sglang.launch_server --model-path Qwen/Qwen3-30B-A3B --tp 2 --trust-remote-code --mem-fraction-static 0.55 --cuda-graph-max-bs 128 --num-continuous-decode-steps 4 --disable-custom-all-reduce --host 127.0.0.1 --port 30000 >"$log" 2>&1 || rc=$?
echo '### smpatch: cell unpatched.fewchan.cgbs128.tp2.qwen-qwen3-30b-a3b: exit '"$rc" >&2
exit "$rc"
