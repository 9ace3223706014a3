#!/usr/bin/env bash
# smpatch check --range over a synthetic upstream history (500 commits, a
# ~250 KB target file), beside what a user would otherwise script: git
# checkout + git apply --check for every commit. Both run here, on the same
# repository, in the same run. Two histories: the target changes in 10% of
# the commits (flashinfer's most edited file, fused_moe/core.py at 282 KB,
# changed in 7% of the 981 commits from v0.6.0 to v0.6.18rc7), and a stress
# case where it changes in 60%.
# Wall times are medians; CPU time (user + system) and peak RSS come from
# /usr/bin/time when it is there, and the load average is printed before
# and after (the machine may be shared).
# With SGLANG_GIT naming a bare clone of sglang (any fork with upstream's
# hashes), bench/check.real.sh runs too, on its last 200 first-parent
# commits of main.
# usage: bench/check.bench.sh [path/to/smpatch]   (COMMITS=500, TOUCH="10 60", SGLANG_GIT)
set -euo pipefail
cd "$(dirname "$0")/.."
bin="$(realpath "${1:-bin/smpatch}")"
commits="${COMMITS:-500}"
command -v git >/dev/null || { echo "check.bench: git not found; skipped"; exit 0; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/gencheck" ./bench/gencheck
now() { date +%s%N; }
# timed FILE CMD...: runs CMD, and when /usr/bin/time is there appends
# "CPU-seconds peak-KB" to FILE.
timed() {
  local f=$1; shift
  if [ -x /usr/bin/time ]; then /usr/bin/time -a -o "$f" -f "%U %S %M" "$@"; else "$@"; fi
}
ms() { echo $(( ($2 - $1) / 1000000 )); }
# The last release tag ends the range: a tag is never re-fetched, so the warm
# run is the walk alone (a branch name would ask the remote for news first).
end="v0.6.$((commits / 100))"

for touch in ${TOUCH:-10 60}; do
  gen="$tmp/gen$touch"
  "$tmp/gencheck" -out "$gen" -commits "$commits" -touch "$touch"
  repo="$gen/repo.git"
  export XDG_CACHE_HOME="$gen/cache"
  args=(check --upstream "flashinfer=file://$repo@$end" --range "v0.6.0..$end" --catalog "$gen/catalog")

  # smpatch: the first run fills the cache (clone); the next five are the
  # walk alone, of which the median counts (the machine may be shared).
  t0=$(now); "$bin" "${args[@]}" >"$gen/cold.txt" || true
  t1=$(now)
  cold=$(ms "$t0" "$t1")
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  runs=()
  for _ in 1 2 3 4 5; do
    t1=$(now); timed "$gen/warm.time" "$bin" "${args[@]}" >"$gen/warm.txt" || true
    t2=$(now); runs+=("$(ms "$t1" "$t2")")
  done
  warm=$(printf '%s\n' "${runs[@]}" | sort -n | sed -n 3p)
  sed -n '/ over /,/^$/p' "$gen/warm.txt"

  # The alternative: a clone, then checkout + apply --check per commit.
  git clone -q "$repo" "$gen/work"
  diff="$gen/catalog/trtllm-comm-sm12/gate.diff"
  t3=$(now)
  timed "$gen/loop.time" bash -c '
    n=0; ok=0
    for c in $(git -C "$1" rev-list --first-parent --reverse "v0.6.0..$2"); do
      git -C "$1" checkout -q "$c"
      if git -C "$1" apply --check "$3" 2>/dev/null; then ok=$((ok+1)); fi
      n=$((n+1))
    done
    echo "$n $ok" >"$4"' loop "$gen/work" "$end" "$diff" "$gen/loop.count"
  t4=$(now)
  loop=$(ms "$t3" "$t4")
  read -r n ok <"$gen/loop.count"

  echo "target changed in $touch% of commits; commits walked: $n (git apply --check succeeded on $ok)"
  echo "  smpatch check --range (cache warm):      ${warm} ms (median of ${runs[*]})"
  if [ -s "$gen/warm.time" ]; then
    awk '{print $1 + $2, $3}' "$gen/warm.time" | sort -n |
      awk '{c[NR]=$1; m[NR]=$2} END {i=int((NR+1)/2); printf "    CPU %.2f s (median), peak RSS %d MB\n", c[i], m[i]/1024}'
    awk '{printf "  git loop CPU: %.2f s (its git processes included)\n", $1+$2}' "$gen/loop.time"
  fi
  echo "  smpatch check --range (incl. clone):     ${cold} ms"
  echo "  git checkout + git apply --check loop:   ${loop} ms"
  awk -v a="$loop" -v b="$warm" -v c="$cold" 'BEGIN {
    if (b < 1) b = 1; if (c < 1) c = 1
    printf "  ratio loop / smpatch: %.1fx warm, %.1fx including the clone (target >= 20x)\n", a / b, a / c }'
  echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo
done

if [ -n "${SGLANG_GIT:-}" ]; then
  echo "real history: $SGLANG_GIT, main~200..main"
  SMPATCH="$bin" bench/check.real.sh "$SGLANG_GIT" "$(git --git-dir "$SGLANG_GIT" rev-parse main~200)" main
fi
