#!/usr/bin/env bash
# The core benchmark: apply then revert the built-in sm120-fusion and
# sm120-fusion-auto patches
# (variants gate and server-args) on a synthetic sglang checkout whose two target files have
# upstream's size (communicator.py ~140 KB, server_args.py ~250 KB), beside
# GNU patch -p1 / patch -R -p1 with the same diffs on the same files, in the
# same run. Each number is the median of $BENCH_RUNS runs (default 15) of
# one whole process, start to exit, timed by the shell's own clock
# ($EPOCHREALTIME, so no extra process sits inside a measurement); every run
# starts from a fresh copy and the two tools take turns, so a burst of load
# from elsewhere hits both.
#
# smpatch does more than patch: it plans every hunk, takes a lock, writes the
# originals to its journal and fsyncs them, writes each file by temp + fsync
# + rename, re-reads what it wrote, and removes stale bytecode. GNU patch
# fsyncs nothing. The fsync cost belongs to the disk, so the same run is
# repeated on /dev/shm (tmpfs, where fsync is nearly free) when it exists:
# there the ratio shows the engine's own cost. The "start-up" row is each
# tool printing its version: the floor under every other row.
#
# usage: bench/core.bench.sh path/to/smpatch
set -euo pipefail
cd "$(dirname "$0")/.."
bin="$(realpath "${1:-bin/smpatch}")"
runs="${BENCH_RUNS:-15}"
diffs=(patches/catalog/sm120-fusion/gate-c4.diff patches/catalog/sm120-fusion-auto/server-args.diff)
for d in "${diffs[@]}"; do
  [ -f "$d" ] || { echo "core.bench: $d is missing" >&2; exit 1; }
done
export SMPATCH_CATALOG="" SMPATCH_REPO=""

tree_src="$(mktemp -d)"
trap 'rm -rf "$tree_src" "${scratch_dirs[@]:-}"' EXIT
scratch_dirs=()
go run ./bench/coretree -shape c4-s3 "$tree_src/tree"
cat "${diffs[@]}" >"$tree_src/c4-s3.diff"

have_patch=1
if ! command -v patch >/dev/null 2>&1; then
  have_patch=0
  echo "GNU patch is not installed: the comparison is skipped (nothing is installed by this script)"
fi

# now_us: microseconds, from bash's clock when it has one (bash >= 5).
if [ -n "${EPOCHREALTIME:-}" ]; then
  now_us() { local t=${EPOCHREALTIME/[^0-9]/}; echo $((10#$t)); }
else
  now_us() { echo $(($(date +%s%N) / 1000)); }
fi
median() { sort -n | awk '{a[NR]=$1} END {if (NR==0) {print 0} else if (NR%2) {print a[(NR+1)/2]} else {print int((a[NR/2]+a[NR/2+1])/2)}}'; }
ms() { awk -v n="$1" 'BEGIN {printf "%.1f ms", n/1e3}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b==0) print "n/a"; else printf "%.1fx", a/b}'; }
load() { cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || uptime | sed 's/.*load average: //'; }

# bench_on BASE LABEL: runs both tools $runs times under BASE and prints a table.
bench_on() {
  local base="$1" label="$2"
  local work; work="$(mktemp -d "$base/smpatch-bench.XXXXXX")"
  scratch_dirs+=("$work")
  local sa=() sr=() ga=() gr=() sv=() gv=()
  local i t0 t1 load0
  load0="$(load)"
  for ((i = 0; i < runs; i++)); do
    rm -rf "$work/s" "$work/g"
    cp -R "$tree_src/tree" "$work/s"
    cp -R "$tree_src/tree" "$work/g"
    t0=$(now_us); "$bin" --version >/dev/null; t1=$(now_us); sv+=($((t1 - t0)))
    t0=$(now_us); "$bin" apply sm120-fusion sm120-fusion-auto --repo "$work/s" >/dev/null; t1=$(now_us); sa+=($((t1 - t0)))
    t0=$(now_us); "$bin" revert --repo "$work/s" >/dev/null; t1=$(now_us); sr+=($((t1 - t0)))
    if ! cmp -s "$work/s/python/sglang/srt/server_args.py" "$tree_src/tree/python/sglang/srt/server_args.py"; then
      echo "core.bench: smpatch revert did not restore server_args.py" >&2; exit 1
    fi
    if [ "$have_patch" = 1 ]; then
      t0=$(now_us); patch --version >/dev/null; t1=$(now_us); gv+=($((t1 - t0)))
      t0=$(now_us); patch -s -p1 -d "$work/g" <"$tree_src/c4-s3.diff" >/dev/null; t1=$(now_us); ga+=($((t1 - t0)))
      t0=$(now_us); patch -s -R -p1 -d "$work/g" <"$tree_src/c4-s3.diff" >/dev/null; t1=$(now_us); gr+=($((t1 - t0)))
    fi
  done
  local msa msr msv mga mgr mgv
  msa=$(printf '%s\n' "${sa[@]}" | median); msr=$(printf '%s\n' "${sr[@]}" | median); msv=$(printf '%s\n' "${sv[@]}" | median)
  echo "$label: median of $runs runs, communicator.py $(wc -c <"$tree_src/tree/python/sglang/srt/layers/communicator.py") B, server_args.py $(wc -c <"$tree_src/tree/python/sglang/srt/server_args.py") B; load average $load0 before, $(load) after ($(nproc 2>/dev/null || echo '?') CPUs)"
  if [ "$have_patch" = 1 ]; then
    mga=$(printf '%s\n' "${ga[@]}" | median); mgr=$(printf '%s\n' "${gr[@]}" | median); mgv=$(printf '%s\n' "${gv[@]}" | median)
    printf '  %-16s %12s %12s %8s\n' "" "smpatch" "GNU patch" "ratio"
    printf '  %-16s %12s %12s %8s\n' "apply" "$(ms "$msa")" "$(ms "$mga")" "$(ratio "$msa" "$mga")"
    printf '  %-16s %12s %12s %8s\n' "revert" "$(ms "$msr")" "$(ms "$mgr")" "$(ratio "$msr" "$mgr")"
    printf '  %-16s %12s %12s %8s\n' "apply + revert" "$(ms $((msa + msr)))" "$(ms $((mga + mgr)))" "$(ratio $((msa + msr)) $((mga + mgr)))"
    printf '  %-16s %12s %12s %8s\n' "start-up" "$(ms "$msv")" "$(ms "$mgv")" "$(ratio "$msv" "$mgv")"
  else
    printf '  apply %s, revert %s, start-up %s (no GNU patch to compare with)\n' "$(ms "$msa")" "$(ms "$msr")" "$(ms "$msv")"
  fi
}

bench_on "${TMPDIR:-/tmp}" "disk (${TMPDIR:-/tmp}, $(df -T "${TMPDIR:-/tmp}" 2>/dev/null | awk 'NR==2 {print $2}'))"
if [ -d /dev/shm ] && [ -w /dev/shm ]; then
  bench_on /dev/shm "tmpfs (/dev/shm)"
fi
