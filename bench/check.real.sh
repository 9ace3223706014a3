#!/usr/bin/env bash
# smpatch check --range on real history, side by side in one run with the
# loops a user would otherwise write: git checkout -f + git apply --check on
# every first-parent commit of the range (what --range walks), and on only
# the commits that change a file the diffs name. Needs a bare clone of the
# project's history and git; prints wall time, CPU, peak RSS (/usr/bin/time)
# and the load average, and the ratios.
# usage: bench/check.real.sh GIT_DIR FROM TO [DIFF...]
#   SMPATCH: the binary (bin/smpatch), PROJECT: the project (sglang),
#   RUNS: warm runs of smpatch, of which the median counts (5),
#   FILES: without DIFFs, the files to make diffs against (below).
# The DIFFs are checked as one patch of their own (every version), beside
# the built-in catalog's patches for the project. Without DIFFs, one diff per
# file of $FILES is made at FROM (a comment line added after line 40), so the
# patch applies at FROM and drifts, then conflicts, as upstream edits those
# files, and the walk plans every state it meets.
#   e.g. bench/check.real.sh ~/sglang.git "$(git --git-dir ~/sglang.git rev-parse main~200)" main
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 3 ] || { sed -n 2,16p "$0"; exit 2; }
gitdir="$(realpath "$1")" from=$2 to=$3; shift 3
bin="$(realpath "${SMPATCH:-bin/smpatch}")"
project="${PROJECT:-sglang}"
command -v git >/dev/null || { echo "check.real: git not found"; exit 2; }
[ -x /usr/bin/time ] || { echo "check.real: /usr/bin/time not found"; exit 2; }
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
export XDG_CACHE_HOME="$tmp/cache"
git clone -q --no-checkout "$gitdir" "$tmp/work"
git -C "$tmp/work" checkout -q -f "$from"

diffs=()
if [ $# -gt 0 ]; then
  for d in "$@"; do diffs+=("$(realpath "$d")"); done
else
  for f in ${FILES:-python/sglang/srt/server_args.py python/sglang/srt/layers/communicator.py python/sglang/srt/managers/scheduler.py}; do
    [ -f "$tmp/work/$f" ] || { echo "check.real: $f is not in $from"; exit 2; }
    d="$tmp/$(basename "$f").diff"
    sed -i '40a # smpatch bench' "$tmp/work/$f"
    git -C "$tmp/work" diff -- "$f" >"$d"
    git -C "$tmp/work" checkout -q -f -- "$f"
    diffs+=("$d")
  done
fi
mkdir -p "$tmp/catalog/bench-real"
{
  printf 'name = "bench-real"\nproject = "%s"\nsummary = "The diffs check.real.sh was given"\n\n[[variant]]\nname = "any"\ndiffs = [' "$project"
  sep=""
  for d in "${diffs[@]}"; do
    cp "$d" "$tmp/catalog/bench-real/"
    printf '%s"bench-real/%s"' "$sep" "$(basename "$d")"; sep=", "
  done
  printf ']\n'
} >"$tmp/catalog/bench-real.toml"
mapfile -t paths < <(sed -n 's|^+++ b/||p' "${diffs[@]}" | sort -u)
args=(check --catalog "$tmp/catalog" --upstream "$project=file://$gitdir@$to" --range "$from..$to")
echo "filling the cache (not measured)"; "$bin" "${args[@]}" >/dev/null 2>&1 || true

all=$(git -C "$tmp/work" rev-list --first-parent --count "$from..$to")
touching=$(git -C "$tmp/work" rev-list --first-parent --count "$from..$to" -- "${paths[@]}")
echo "range $from..$to: $all first-parent commits, $touching of them change ${paths[*]}"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
# smpatch: the median of $RUNS warm runs (the machine may be shared).
for _ in $(seq "${RUNS:-5}"); do
  /usr/bin/time -o "$tmp/one.time" -f "%e %U %S %M" "$bin" "${args[@]}" >"$tmp/smpatch.txt" 2>"$tmp/smpatch.err" || true
  tail -1 "$tmp/one.time" >>"$tmp/runs.time"
done
sort -n "$tmp/runs.time" | sed -n "$(( (${RUNS:-5} + 1) / 2 ))p" >"$tmp/smpatch.time"
sed -n '/ over /,/^$/p' "$tmp/smpatch.txt"
loop() { # loop REV-LIST-ARGS...: checkout + apply --check on each commit
  local n=0 ok=0
  for c in $(git -C "$tmp/work" rev-list --first-parent --reverse "$@"); do
    git -C "$tmp/work" checkout -q -f "$c"
    if git -C "$tmp/work" apply --check "${diffs[@]}" 2>/dev/null; then ok=$((ok+1)); fi
    n=$((n+1))
  done
  echo "$n commits, git apply --check succeeded on $ok"
}
git -C "$tmp/work" checkout -q -f "$from"
/usr/bin/time -o "$tmp/all.time" -f "%e %U %S %M" bash -c "$(declare -f loop); tmp='$tmp'; diffs=(${diffs[*]}); loop '$from..$to'" >"$tmp/all.txt"
git -C "$tmp/work" checkout -q -f "$from"
/usr/bin/time -o "$tmp/touching.time" -f "%e %U %S %M" bash -c "$(declare -f loop); tmp='$tmp'; diffs=(${diffs[*]}); loop '$from..$to' -- ${paths[*]}" >"$tmp/touching.txt"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
# /usr/bin/time writes "Command exited with non-zero status N" first when it did.
show() { tail -1 "$2" | awk -v what="$1" -v n="${3:+  ($3)}" '{ printf "  %-44s %7.2f s wall, %6.2f s CPU, %4d MB peak RSS%s\n", what, $1, $2 + $3, $4 / 1024, n }'; }
show "smpatch check --range (warm, median)" "$tmp/smpatch.time" "of $(cut -d' ' -f1 "$tmp/runs.time" | tr '\n' ' ')s"
show "checkout -f + apply --check, every commit" "$tmp/all.time" "$(cat "$tmp/all.txt")"
show "checkout -f + apply --check, touching only" "$tmp/touching.time" "$(cat "$tmp/touching.txt")"
read -r e _ < <(tail -1 "$tmp/smpatch.time"); read -r a _ < <(tail -1 "$tmp/all.time"); read -r t _ < <(tail -1 "$tmp/touching.time")
awk -v e="$e" -v a="$a" -v t="$t" 'BEGIN { if (e < 0.01) e = 0.01
  printf "  ratio loop / smpatch: %.1fx against every commit (target >= 20x), %.1fx against the touching commits\n", a / e, t / e }'
