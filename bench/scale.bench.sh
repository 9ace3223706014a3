#!/usr/bin/env bash
# Scheduler overhead: the same 8 fake cells (testdata/fakeserver, healthy
# after 100ms, then the bench) end to end with the local runner, with
# --runner slurm on the test Slurm node (one job array, 8 tasks at once, one
# GRES GPU each) and with --runner kubernetes on the test control plane (8
# Jobs on kwok's simulated node: its pods run nothing, so that column is the
# scheduling and bookkeeping alone). Prints wall time, time per cell and the
# ratio to the local run. Each scheduler is skipped, saying so, when
# scripts/services.sh has not started it ($SMPATCH_TEST_SLURM,
# $SMPATCH_TEST_KUBECONFIG; eval "$(scripts/services.sh env)").
set -euo pipefail
cd "$(dirname "$0")/.."
bin="$(realpath "${1:-bin/smpatch}")"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
CGO_ENABLED=0 go build -o "$work/bin/fakeserver" ./testdata/fakeserver
export PATH="$work/bin:$PATH"
unset GITHUB_STEP_SUMMARY SMPATCH_REPO
cat >"$work/m.toml" <<'TOML'
name = "scale-bench"
base = { image = "registry.example/scale-bench:1" }
[axes]
port = [31101, 31102, 31103, 31104, 31105, 31106, 31107, 31108]
[launch]
command = ["fakeserver", "-mode", "ok", "-delay", "100ms", "--port", "{{.port}}"]
health = "http://127.0.0.1:{{.port}}/health"
bench = ["fakeserver", "bench", "-url", "http://127.0.0.1:{{.port}}"]
metric = 'Output token throughput \(tok/s\):\s+([0-9.]+)'
tp = 1
startup_timeout = "60s"
bench_timeout = "60s"
TOML
now() { date +%s.%N; }
run() { # NAME ARGS...: runs the matrix, prints "NAME wall"
  local name=$1 s e
  shift
  s=$(now)
  "$bin" matrix run "$work/m.toml" --out "$work/out-$name" "$@" >"$work/$name.out" 2>&1 || {
    echo "$name: matrix run failed:" >&2
    tail -20 "$work/$name.out" >&2
    return 1
  }
  e=$(now)
  grep -q '^8 ok, 0 failed' "$work/$name.out" || { echo "$name: not 8 ok" >&2; tail -5 "$work/$name.out" >&2; return 1; }
  awk -v s="$s" -v e="$e" 'BEGIN { printf "%.2f\n", e - s }'
}
echo "8 cells, 8 at a time; load: $(cut -d' ' -f1-3 /proc/loadavg)"
local_s=$(run local --concurrency 8 --gpus 0,1,2,3,4,5,6,7)
row() { awk -v n="$1" -v w="$2" -v l="$local_s" 'BEGIN { printf "%-28s %7.2fs  %6.2fs/cell  %5.1fx local\n", n, w, w / 8, w / l }'; }
row "local (process groups)" "$local_s"
if [ -n "${SMPATCH_TEST_SLURM:-}" ]; then
  w=$(SLURM_CONF=$SMPATCH_TEST_SLURM run slurm --runner slurm --concurrency 8)
  row "slurm (one job array)" "$w"
else
  echo "slurm: SKIP (no Slurm node: \$SMPATCH_TEST_SLURM is not set; scripts/services.sh up slurm)"
fi
if [ -n "${SMPATCH_TEST_KUBECONFIG:-}" ]; then
  w=$(run kube --runner kubernetes --kubeconfig "$SMPATCH_TEST_KUBECONFIG")
  row "kubernetes (8 Jobs, kwok)" "$w"
else
  echo "kubernetes: SKIP (no control plane: \$SMPATCH_TEST_KUBECONFIG is not set; scripts/services.sh up kube)"
fi
