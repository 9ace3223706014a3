#!/usr/bin/env bash
# Start-up: `smpatch --version` beside a Go hello-world and a cobra-only
# command line (a root with smpatch's global flags and a dozen
# subcommands), all built the same way (CGO_ENABLED=0, -trimpath, -ldflags
# '-s -w'); with $BENCH_BEFORE, also that binary (an earlier smpatch, to
# compare releases side by side). Go runs every linked package's init
# before main, so start-up follows what a program links.
#
# With perf: `perf stat -e task-clock,page-faults` of each, in batches of
# 10 runs (CPU time and page faults, the median batch of $BENCH_RUNS/10);
# without it, wall-clock time the same way. The load average is
# printed beside the table: on a loaded machine every row grows.
#
# usage: bench/startup.bench.sh path/to/smpatch
set -euo pipefail
cd "$(dirname "$0")/.."
bin="$(realpath "${1:-bin/smpatch}")"
runs="${BENCH_RUNS:-100}"
before="${BENCH_BEFORE:-}"
[ -z "$before" ] || [ -x "$before" ] || { echo "startup.bench: \$BENCH_BEFORE=$before is not an executable" >&2; exit 1; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# $BENCH_STARTUP_BINS: a directory holding hello and cobraonly built before
# the same way, for a machine without Go (a GPU host).
for p in hello cobraonly; do
  if [ -n "${BENCH_STARTUP_BINS:-}" ]; then
    cp "$BENCH_STARTUP_BINS/$p" "$work/$p"
  else
    CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$work/$p" "./bench/startup/$p"
  fi
done

load() { cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || uptime | sed 's/.*load average: //'; }
size() { awk -v b="$(wc -c <"$1")" 'BEGIN {printf "%.1f MB", b/1e6}'; }

have_perf=0
if command -v perf >/dev/null 2>&1 && perf stat -e task-clock true >/dev/null 2>&1; then
  have_perf=1
fi
# measure NAME PROG ARGS...: one batch of 10 runs of PROG into $work/NAME
# ("CPU_MS PAGE_FAULTS" with perf, else "WALL_MS -"). The programs take
# turns batch by batch, so a burst of load from elsewhere hits them all.
measure() {
  local name="$1"; shift
  if [ "$have_perf" = 1 ]; then
    perf stat -x, -r 10 -e task-clock,page-faults "$@" 2>&1 >/dev/null |
      awk -F, '$3 == "task-clock" {t=$1} $3 == "page-faults" {f=$1} END {printf "%.3f %d\n", t, f}' >>"$work/res.$name"
  else
    local v=() t0 t1 i
    for ((i = 0; i < 10; i++)); do
      t0=$(date +%s%N); "$@" >/dev/null; t1=$(date +%s%N); v+=($(((t1 - t0) / 1000)))
    done
    printf '%s\n' "${v[@]}" | sort -n | awk '{a[NR]=$1} END {printf "%.3f -\n", a[int((NR+1)/2)]/1e3}' >>"$work/res.$name"
  fi
}
# result NAME: the median batch's "MS FAULTS".
result() { sort -n "$work/res.$1" | awk '{a[NR]=$0} END {print a[int((NR+1)/2)]}'; }

echo "machine: $(nproc) cores, load $(load); $runs runs each; $([ "$have_perf" = 1 ] && echo 'perf stat: CPU time (task-clock), page faults' || echo 'no perf: median wall time')"
for ((r = 0; r < (runs + 9) / 10; r++)); do
  measure hello "$work/hello"
  measure cobraonly "$work/cobraonly" --version
  measure lean "$bin" --version
  [ -z "$before" ] || measure before "$before" --version
done
read -r h hf < <(result hello)
printf '%-26s %9s %7s %8s %9s\n' "" "ms" "faults" "vs hello" "size"
row() {
  local name="$1" key="$2" prog="$3"
  local t f
  read -r t f < <(result "$key")
  printf '%-26s %9.2f %7s %8s %9s\n' "$name" "$t" "$f" "$(awk -v a="$t" -v b="$h" 'BEGIN {printf "%.1fx", a/b}')" "$(size "$prog")"
}
row "hello-world" hello "$work/hello"
row "cobra-only" cobraonly "$work/cobraonly"
row "smpatch --version" lean "$bin"
[ -z "$before" ] || row "\$BENCH_BEFORE --version" before "$before"
echo "load after: $(load)"
