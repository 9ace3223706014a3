#!/usr/bin/env bash
# make coverage walks sglang's history once for the whole catalog: what that
# costs as the catalog grows, on real history, in one run. bench/catwalk
# times upstream.Range over FROM..TO with: the built-in patch ONE alone; the
# whole catalog in one walk; one walk per patch (what a walk per patch would
# cost); N copies of ONE in one walk (N distinct patches of the catalog's
# heaviest shape: a search directory, thousands of states). Each with
# /usr/bin/time (CPU, peak RSS) and the load average before.
# usage: bench/coverage.real.sh GIT_DIR FROM TO
#   ONE: the patch (sm120-fusion), COPIES: the Ns ("1 2 4 8"), RUNS: runs of
#   each, of which the median counts (3).
#   e.g. bench/coverage.real.sh ~/sglang.git "$(git --git-dir ~/sglang.git rev-list --first-parent --since=2026-01-01 main | tail -1)^" main
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 3 ] || { sed -n 2,14p "$0"; exit 2; }
gitdir="$(realpath "$1")" from=$2 to=$3
[ -x /usr/bin/time ] || { echo "coverage.real: /usr/bin/time not found"; exit 2; }
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/catwalk" ./bench/catwalk
one=${ONE:-sm120-fusion} runs=${RUNS:-3}
echo "range $from..$to of $gitdir; cores: $(nproc); load before: $(cut -d' ' -f1-3 /proc/loadavg)"
"$tmp/catwalk" -git "$gitdir" -from "$from" -to "$to" -patches one -one "$one" >/dev/null # page cache
measure() { # measure SET: the median (by wall time) of $runs runs
  : >"$tmp/runs"
  for _ in $(seq "$runs"); do
    /usr/bin/time -o "$tmp/t" -f "%e %U %S %M" "$tmp/catwalk" -git "$gitdir" -from "$from" -to "$to" -patches "$1" -one "$one" >"$tmp/out"
    # catwalk: "SET: W walk(s), P patch(es), C commits, S states planned, T s"
    read -r e u s m <"$tmp/t"
    awk -v e="$e" -v u="$u" -v s="$s" -v m="$m" '{ gsub(",", ""); printf "%s %-9s %s walk(s) %3s patch(es) %6s states  wall %6.2f s  cpu %6.2f s  rss %4d MB\n", e, $1, $2, $4, $8, e, u + s, m / 1024 }' "$tmp/out" >>"$tmp/runs"
  done
  sort -n "$tmp/runs" | sed -n "$(( (runs + 1) / 2 ))p" | cut -d' ' -f2-
}
printf '%s\n' "one patch ($one), the whole catalog, one walk per patch:"
for s in one all each; do measure "$s"; done
printf '%s\n' "N copies of $one in one walk:"
for n in ${COPIES:-1 2 4 8}; do measure "copies:$n"; done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
