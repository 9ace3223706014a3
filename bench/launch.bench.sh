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
# Each side runs 5 times; the medians are compared. Output is read whole
# (no `| head` under pipefail, which fails by SIGPIPE when the reader stops).
med() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
t() { local s e; s=$(date +%s.%N); "$@" > /dev/null; e=$(date +%s.%N); awk -v s="$s" -v e="$e" 'BEGIN { printf "%.3f\n", e - s }'; }
g=$(for i in 1 2 3 4 5; do t grep -m1 -nE "$pattern" "$log"; done | med)
s=$(for i in 1 2 3 4 5; do t "$bin" triage "$log"; done | med)
echo "grep -nE (first match): ${g}s (median of 5)"
echo "smpatch triage:          ${s}s (median of 5)"
awk -v g="$g" -v s="$s" 'BEGIN { printf "ratio triage/grep:       %.2fx\n", s / g }'
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
out=$("$bin" triage "$log")
sed -n 1,2p <<< "$out"
