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
# tool printing its version: the floor under every other row, with a Go
# hello-world built the way smpatch is (CGO_ENABLED=0, -trimpath,
# -ldflags '-s -w') beside it.
#
# `git apply` + `git apply -R` run beside them on a diff made from the tree
# smpatch produces (`diff -ruN` of the original and the patched copy: the
# catalog's diffs carry 2-line contexts that git apply refuses at an
# offset). Beside each median wall time is the mean CPU time (user +
# system) of the same runs, taken from bash's `times` builtin around each
# one, so no extra process sits inside a measurement either.
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
# $BENCH_CORETREE: a tree bench/coretree built before (-shape c4-s3), for a
# machine without Go.
if [ -n "${BENCH_CORETREE:-}" ]; then
  cp -R "$BENCH_CORETREE" "$tree_src/tree"
else
  go run ./bench/coretree -shape c4-s3 "$tree_src/tree"
fi
cat "${diffs[@]}" >"$tree_src/c4-s3.diff"

have_patch=1
if ! command -v patch >/dev/null 2>&1; then
  have_patch=0
  echo "GNU patch is not installed: the comparison is skipped (nothing is installed by this script)"
fi
have_git=1
if ! command -v git >/dev/null 2>&1; then
  have_git=0
  echo "git is not installed: the git apply comparison is skipped"
fi

# The diff git apply takes: what smpatch writes, as diff -ruN shows it.
cp -R "$tree_src/tree" "$tree_src/patched"
"$bin" apply sm120-fusion sm120-fusion-auto --repo "$tree_src/patched" >/dev/null
(cd "$tree_src" && diff -ruN -x .smpatch tree patched >git.diff) || [ $? -eq 1 ]
rm -rf "$tree_src/patched"

# A Go hello-world built as smpatch is, for the start-up row.
# $BENCH_HELLO: one built before, for a machine without Go.
hello="${BENCH_HELLO:-}"
if [ -z "$hello" ] && command -v go >/dev/null 2>&1; then
  mkdir -p "$tree_src/hello"
  printf 'package main\n\nimport "fmt"\n\nfunc main() { fmt.Println("hello") }\n' >"$tree_src/hello/main.go"
  if (cd "$tree_src/hello" && CGO_ENABLED=0 GO111MODULE=off go build -trimpath -ldflags '-s -w' -o hello main.go) 2>/dev/null; then
    hello="$tree_src/hello/hello"
  fi
fi

# now_us: microseconds, from bash's clock when it has one (bash >= 5).
if [ -n "${EPOCHREALTIME:-}" ]; then
  now_us() { local t=${EPOCHREALTIME/[^0-9]/}; echo $((10#$t)); }
else
  now_us() { echo $(($(date +%s%N) / 1000)); }
fi
# cpu_us: user + system time of every child this shell waited for, in
# microseconds (bash's times builtin, read back without a subshell).
times_file="$tree_src/times"
cpu_now=0
cpu_read() {
  times >"$times_file"
  local _a _b cu cs
  { read -r _a _b; read -r cu cs; } <"$times_file"
  cpu_now=$(($(tosec "$cu") + $(tosec "$cs")))
}
tosec() { local m=${1%%m*} s=${1#*m}; s=${s%s}; local w=${s%.*} f=${s#*.}; echo $(((10#$m * 60 + 10#$w) * 1000000 + 10#$f * 1000)); }
median() { sort -n | awk '{a[NR]=$1} END {if (NR==0) {print 0} else if (NR%2) {print a[(NR+1)/2]} else {print int((a[NR/2]+a[NR/2+1])/2)}}'; }
ms() { awk -v n="$1" 'BEGIN {printf "%.1f ms", n/1e3}'; }
ms2() { awk -v n="$1" 'BEGIN {printf "%.2f ms", n/1e3}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b==0) print "n/a"; else printf "%.1fx", a/b}'; }
load() { cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || uptime | sed 's/.*load average: //'; }

# timed KEY CMD...: runs CMD once; appends its wall time to W_KEY and adds
# its CPU time to C_KEY.
declare -A W C
timed() {
  local key=$1 t0 t1 c0
  shift
  cpu_read; c0=$cpu_now
  t0=$(now_us)
  "$@"
  t1=$(now_us)
  cpu_read
  W[$key]+="$((t1 - t0)) "
  C[$key]=$((${C[$key]:-0} + cpu_now - c0))
}
wmed() { printf '%s\n' ${W[$1]:-0} | median; }
cmean() { echo $((${C[$1]:-0} / runs)); }

# bench_on BASE LABEL: runs every tool $runs times under BASE and prints a table.
bench_on() {
  local base="$1" label="$2"
  local work; work="$(mktemp -d "$base/smpatch-bench.XXXXXX")"
  scratch_dirs+=("$work")
  W=() C=()
  local i load0
  load0="$(load)"
  for ((i = 0; i < runs; i++)); do
    rm -rf "$work/s" "$work/g" "$work/a"
    cp -R "$tree_src/tree" "$work/s"
    cp -R "$tree_src/tree" "$work/g"
    cp -R "$tree_src/tree" "$work/a"
    timed sv "$bin" --version >/dev/null
    timed sa "$bin" apply sm120-fusion sm120-fusion-auto --repo "$work/s" >/dev/null
    timed sr "$bin" revert --repo "$work/s" >/dev/null
    if ! cmp -s "$work/s/python/sglang/srt/server_args.py" "$tree_src/tree/python/sglang/srt/server_args.py"; then
      echo "core.bench: smpatch revert did not restore server_args.py" >&2; exit 1
    fi
    if [ "$have_patch" = 1 ]; then
      timed gv patch --version >/dev/null
      timed ga patch -s -p1 -d "$work/g" -i "$tree_src/c4-s3.diff" >/dev/null
      timed gr patch -s -R -p1 -d "$work/g" -i "$tree_src/c4-s3.diff" >/dev/null
    fi
    if [ "$have_git" = 1 ]; then
      timed xv git --version >/dev/null
      timed xa git -C "$work/a" apply -p1 "$tree_src/git.diff"
      timed xr git -C "$work/a" apply -R -p1 "$tree_src/git.diff"
      if ! cmp -s "$work/a/python/sglang/srt/server_args.py" "$tree_src/tree/python/sglang/srt/server_args.py"; then
        echo "core.bench: git apply -R did not restore server_args.py" >&2; exit 1
      fi
    fi
    if [ -n "$hello" ]; then
      timed hv "$hello" >/dev/null
    fi
  done
  echo "$label: median wall (mean CPU) of $runs runs, communicator.py $(wc -c <"$tree_src/tree/python/sglang/srt/layers/communicator.py") B, server_args.py $(wc -c <"$tree_src/tree/python/sglang/srt/server_args.py") B; load average $load0 before, $(load) after ($(nproc 2>/dev/null || echo '?') CPUs)"
  local k
  local sar=$(($(wmed sa) + $(wmed sr))) gar=$(($(wmed ga) + $(wmed gr))) xar=$(($(wmed xa) + $(wmed xr)))
  local csar=$(($(cmean sa) + $(cmean sr))) cgar=$(($(cmean ga) + $(cmean gr))) cxar=$(($(cmean xa) + $(cmean xr)))
  printf '  %-15s %22s %22s %7s %22s %7s\n' "" "smpatch" "GNU patch" "ratio" "git apply" "ratio"
  row() { # name wall-s cpu-s wall-g cpu-g wall-x cpu-x
    printf '  %-15s %9s (%9s) %9s (%9s) %7s %9s (%9s) %7s\n' "$1" "$(ms "$2")" "$(ms2 "$3")" "$(ms "$4")" "$(ms2 "$5")" "$(ratio "$3" "$5")" "$(ms "$6")" "$(ms2 "$7")" "$(ratio "$3" "$7")"
  }
  row apply "$(wmed sa)" "$(cmean sa)" "$(wmed ga)" "$(cmean ga)" "$(wmed xa)" "$(cmean xa)"
  row revert "$(wmed sr)" "$(cmean sr)" "$(wmed gr)" "$(cmean gr)" "$(wmed xr)" "$(cmean xr)"
  row "apply + revert" "$sar" "$csar" "$gar" "$cgar" "$xar" "$cxar"
  row "start-up" "$(wmed sv)" "$(cmean sv)" "$(wmed gv)" "$(cmean gv)" "$(wmed xv)" "$(cmean xv)"
  if [ -n "$hello" ]; then
    printf '  %-15s %9s (%9s)   (ratios: CPU; smpatch start-up %s the hello-world)\n' "Go hello-world" "$(ms "$(wmed hv)")" "$(ms2 "$(cmean hv)")" "$(ratio "$(cmean sv)" "$(cmean hv)")"
  else
    echo "  (ratios: CPU; no Go toolchain, no hello-world row)"
  fi
}

bench_on "${TMPDIR:-/tmp}" "disk (${TMPDIR:-/tmp}, $(df -T "${TMPDIR:-/tmp}" 2>/dev/null | awk 'NR==2 {print $2}'))"
if [ -d /dev/shm ] && [ -w /dev/shm ]; then
  bench_on /dev/shm "tmpfs (/dev/shm)"
fi
