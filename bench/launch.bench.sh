#!/usr/bin/env bash
# Triage speed: smpatch triage against the grep a user would otherwise run
# over a long sglang log (about 1M lines, the fatal line near the end), with
# the built-in signature patterns joined into one extended regexp. grep only
# finds lines; triage also names the first fatal one, its meaning, what to
# try and the last lines.
set -euo pipefail
bin="$(realpath "${1:-bin/smpatch}")"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
log="$work/server.log"
awk 'BEGIN {
  for (i = 1; i <= 1000000; i++) {
    printf "[2026-03-02 10:%02d:%02d TP%d] Decode batch. #running-req: 1, #token: %d, token usage: 0.01, gen throughput (token/s): 89.50, #queue-req: 0\n", (i/60)%60, i%60, i%8, i
    if (i == 999000) print "RuntimeError: No supported CUDA architectures found for major versions [9, 10]."
  }
}' > "$log"
echo "log: $(wc -l < "$log") lines, $(du -h "$log" | cut -f1)"
pattern='No supported CUDA architectures found for major versions|SM 12\.x requires CUDA >= 12\.9|Not enough memory.*mem-fraction-static|Capture cuda graph failed|CUDA out of memory|CUDA error: out of memory|OutOfMemoryError|requires SM90 or SM10X|(ncclCommInitRank|NCCL error).*(internal error|unhandled system error|unhandled cuda error)|address already in use|an illegal memory access was encountered'
t() { local s e; s=$(date +%s.%N); "$@" > /dev/null; e=$(date +%s.%N); awk -v s="$s" -v e="$e" 'BEGIN { printf "%.2fs", e - s }'; }
echo "grep -nE (first match): $(t grep -m1 -nE "$pattern" "$log")"
echo "smpatch triage:          $(t "$bin" triage "$log")"
# Whole output to a file first: `| head -2` closes the pipe early, and under
# pipefail the SIGPIPE that triage then gets fails the bench (exit 141).
"$bin" triage "$log" > "$work/triage.txt"
head -2 "$work/triage.txt"
