#!/usr/bin/env bash
# The core benchmark: apply then revert the built-in sm120-fusion patch
# (variant c4-s3) on a synthetic sglang checkout whose two target files have
# upstream's size (communicator.py ~140 KB, server_args.py ~250 KB), beside
# GNU patch -p1 / patch -R -p1 with the same diffs on the same files, in the
# same run. Each number is the median of $BENCH_RUNS runs (default 9) of one
# whole process, start to exit; every run starts from a fresh copy.
#
# smpatch does more than patch: it plans every hunk, takes a lock, writes the
# originals to its journal and fsyncs them, writes each file by temp + fsync
# + rename, re-reads and hashes what it wrote, and removes stale bytecode.
# GNU patch fsyncs nothing. The fsync cost belongs to the disk, so the same
# run is repeated on /dev/shm (tmpfs, where fsync is nearly free) when it
# exists: there the ratio shows the engine's own cost.
#
# usage: bench/core.bench.sh path/to/smpatch
set -euo pipefail
cd "$(dirname "$0")/.."
bin="$(realpath "${1:-bin/smpatch}")"
runs="${BENCH_RUNS:-9}"
diffs=(patches/catalog/sm120-fusion/c4-communicator.diff patches/catalog/sm120-fusion/s3-server-args.diff)
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

now_ns() { date +%s%N; }
median() { sort -n | awk '{a[NR]=$1} END {if (NR==0) {print 0} else if (NR%2) {print a[(NR+1)/2]} else {print int((a[NR/2]+a[NR/2+1])/2)}}'; }
ms() { awk -v n="$1" 'BEGIN {printf "%.1f ms", n/1e6}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b==0) print "n/a"; else printf "%.1fx", a/b}'; }

# bench_on BASE: runs both tools $runs times under BASE and prints a table.
bench_on() {
  local base="$1" label="$2"
  local work; work="$(mktemp -d "$base/smpatch-bench.XXXXXX")"
  scratch_dirs+=("$work")
  local sa=() sr=() ga=() gr=()
  local i t0 t1
  for ((i = 0; i < runs; i++)); do
    rm -rf "$work/s" "$work/g"
    cp -R "$tree_src/tree" "$work/s"
    cp -R "$tree_src/tree" "$work/g"
    t0=$(now_ns); "$bin" apply sm120-fusion --repo "$work/s" >/dev/null; t1=$(now_ns); sa+=($((t1 - t0)))
    t0=$(now_ns); "$bin" revert --repo "$work/s" >/dev/null; t1=$(now_ns); sr+=($((t1 - t0)))
    if ! cmp -s "$work/s/python/sglang/srt/server_args.py" "$tree_src/tree/python/sglang/srt/server_args.py"; then
      echo "core.bench: smpatch revert did not restore server_args.py" >&2; exit 1
    fi
    if [ "$have_patch" = 1 ]; then
      t0=$(now_ns); patch -s -p1 -d "$work/g" <"$tree_src/c4-s3.diff" >/dev/null; t1=$(now_ns); ga+=($((t1 - t0)))
      t0=$(now_ns); patch -s -R -p1 -d "$work/g" <"$tree_src/c4-s3.diff" >/dev/null; t1=$(now_ns); gr+=($((t1 - t0)))
    fi
  done
  local msa msr mga mgr
  msa=$(printf '%s\n' "${sa[@]}" | median); msr=$(printf '%s\n' "${sr[@]}" | median)
  echo "$label: median of $runs runs, communicator.py $(wc -c <"$tree_src/tree/python/sglang/srt/layers/communicator.py") B, server_args.py $(wc -c <"$tree_src/tree/python/sglang/srt/server_args.py") B"
  if [ "$have_patch" = 1 ]; then
    mga=$(printf '%s\n' "${ga[@]}" | median); mgr=$(printf '%s\n' "${gr[@]}" | median)
    printf '  %-16s %12s %12s %8s\n' "" "smpatch" "GNU patch" "ratio"
    printf '  %-16s %12s %12s %8s\n' "apply" "$(ms "$msa")" "$(ms "$mga")" "$(ratio "$msa" "$mga")"
    printf '  %-16s %12s %12s %8s\n' "revert" "$(ms "$msr")" "$(ms "$mgr")" "$(ratio "$msr" "$mgr")"
    printf '  %-16s %12s %12s %8s\n' "apply + revert" "$(ms $((msa + msr)))" "$(ms $((mga + mgr)))" "$(ratio $((msa + msr)) $((mga + mgr)))"
  else
    printf '  apply %s, revert %s (no GNU patch to compare with)\n' "$(ms "$msa")" "$(ms "$msr")"
  fi
}

bench_on "${TMPDIR:-/tmp}" "disk (${TMPDIR:-/tmp}, $(df -T "${TMPDIR:-/tmp}" 2>/dev/null | awk 'NR==2 {print $2}'))"
if [ -d /dev/shm ] && [ -w /dev/shm ]; then
  bench_on /dev/shm "tmpfs (/dev/shm)"
fi
