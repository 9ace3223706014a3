#!/usr/bin/env bash
# smpatch check --range on real history, side by side in one run with the
# loop a user would otherwise write (git checkout -f + git apply --check on
# every first-parent commit that touches the diffs' files). Needs a bare
# clone of the project's history and git; prints wall time, CPU, peak RSS
# (/usr/bin/time) and the load average.
# usage: bench/check.real.sh GIT_DIR FROM TO DIFF... [smpatch binary in $SMPATCH]
#   e.g. bench/check.real.sh ~/sglang.git \
#          "$(git --git-dir ~/sglang.git rev-list --first-parent main --until=2026-01-01 -1)" main \
#          patches/catalog/sm120-fusion/c6-add-norm.diff patches/catalog/sm120-fusion/s5-overrides.diff
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 4 ] || { sed -n 2,10p "$0"; exit 2; }
gitdir="$(realpath "$1")" from=$2 to=$3; shift 3
diffs=(); for d in "$@"; do diffs+=("$(realpath "$d")"); done
bin="$(realpath "${SMPATCH:-bin/smpatch}")"
command -v git >/dev/null || { echo "check.real: git not found"; exit 2; }
[ -x /usr/bin/time ] || { echo "check.real: /usr/bin/time not found"; exit 2; }
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
export XDG_CACHE_HOME="$tmp/cache"
mapfile -t paths < <(sed -n 's|^+++ b/||p' "${diffs[@]}" | sort -u)
args=(check --upstream "${PROJECT:-sglang}=file://$gitdir@$to" --range "$from..$to")
echo "filling the cache (not measured)"; "$bin" "${args[@]}" >/dev/null 2>&1 || true
git clone -q --no-checkout "$gitdir" "$tmp/work"
echo "load before: $(cat /proc/loadavg)"
/usr/bin/time -f "smpatch check --range: %e s wall, %U s user, %S s sys, %M KB peak RSS" \
  "$bin" "${args[@]}" >"$tmp/smpatch.txt" 2>"$tmp/smpatch.err" || true
tail -1 "$tmp/smpatch.err"
sed -n '/ over /p' "$tmp/smpatch.txt"
loop() {
  local n=0 ok=0
  for c in $(git -C "$tmp/work" rev-list --first-parent --reverse "$from..$to" -- "${paths[@]}"); do
    git -C "$tmp/work" checkout -q -f "$c"
    if git -C "$tmp/work" apply --check "${diffs[@]}" 2>/dev/null; then ok=$((ok+1)); fi
    n=$((n+1))
  done
  echo "git loop: $n commits touching ${#paths[@]} files, apply --check succeeded on $ok"
}
export -f loop; export tmp from to; export paths_s="${paths[*]}" diffs_s="${diffs[*]}"
/usr/bin/time -f "git checkout -f + apply --check loop: %e s wall, %U s user, %S s sys, %M KB peak RSS" \
  bash -c 'paths=($paths_s); diffs=($diffs_s); loop' 2>&1
echo "load after: $(cat /proc/loadavg)"
