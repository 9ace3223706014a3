#!/usr/bin/env bash
# coverage.sh: where each catalog patch applies on real sglang history.
#
#   SGLANG_GIT_DIR=~/src/sglang/.git scripts/coverage.sh [BIN] > docs/coverage.md
#
# Runs `smpatch check --range ... --format json` on every release tag from
# COVERAGE_FIRST_TAG (v0.5.8) on, and over the first-parent history of
# COVERAGE_BRANCH (main) since COVERAGE_SINCE (2026-01-01), then turns the
# JSON into Markdown tables (scripts/coverage.py). The JSON files stay in
# COVERAGE_OUT (a temporary directory unless set); with COVERAGE_REUSE=1,
# JSON files already there are used again instead of walking again. SGLANG_GIT_DIR is a clone
# of sglang (its work tree or its git directory, bare or not) holding that
# branch and the tags; nothing in it is changed.
set -euo pipefail

bin=${1:-bin/smpatch}
here=$(cd "$(dirname "$0")" && pwd)
if [[ -z "${SGLANG_GIT_DIR:-}" ]]; then
	echo "coverage: set SGLANG_GIT_DIR to a clone of sglang with its main branch and release tags (e.g. SGLANG_GIT_DIR=~/src/sglang make coverage)" >&2
	exit 2
fi
[[ -x "$bin" ]] || { echo "coverage: $bin: no smpatch binary (make build)" >&2; exit 1; }
gitdir=$SGLANG_GIT_DIR
[[ -d "$gitdir/.git" ]] && gitdir=$gitdir/.git
git --git-dir="$gitdir" rev-parse --git-dir >/dev/null 2>&1 || {
	echo "coverage: SGLANG_GIT_DIR=$SGLANG_GIT_DIR: not a git repository" >&2
	exit 1
}
gitdir=$(cd "$gitdir" && pwd)
branch=${COVERAGE_BRANCH:-main}
since=${COVERAGE_SINCE:-2026-01-01}
first_tag=${COVERAGE_FIRST_TAG:-v0.5.8}
out=${COVERAGE_OUT:-$(mktemp -d)}
mkdir -p "$out"

# smpatch reads history from a checkout: a directory whose .git file points
# at the clone, with just enough of a tree to be recognised as sglang.
repo=$(mktemp -d)
trap 'rm -rf "$repo"' EXIT
echo "gitdir: $gitdir" >"$repo/.git"
mkdir -p "$repo/python/sglang/srt"

g() { git --git-dir="$gitdir" "$@"; }

# Release tags, oldest first (PEP 440 order is close enough to sort -V for
# sglang's vX.Y.Z[rcN|.postN] tags once rc sorts before the release).
tags=$(g tag --list 'v[0-9]*' | sed 's/rc/~rc/' | sort -V | sed 's/~rc/rc/' |
	awk -v first="$first_tag" '$0 == first { on = 1 } on')
for t in $tags; do
	[[ -n "${COVERAGE_REUSE:-}" && -s "$out/tag-$t.json" ]] && continue
	echo "coverage: $t" >&2
	"$bin" check --repo "$repo" --range "$t..$t" --format json >"$out/tag-$t.json" || [[ $? == 4 ]]
done

# The branch: from the parent of its first first-parent commit since $since.
first=$(g rev-list --first-parent --since="$since" "$branch" | tail -n 1)
[[ -n "$first" ]] || { echo "coverage: no commit on $branch since $since" >&2; exit 1; }
base=$(g rev-parse "$first^")
echo "coverage: $branch from $(g log -1 --format='%h %cs' "$first") to $(g log -1 --format='%h %cs' "$branch")" >&2
# The walk is split into COVERAGE_JOBS (4) consecutive ranges run side by
# side; each range starts where the one before ends, so their changes read
# as one history (scripts/coverage.py joins them).
jobs=${COVERAGE_JOBS:-4}
mapfile -t fp < <(g rev-list --first-parent "$base..$branch")
n=${#fp[@]}
bounds=("$base")
for ((i = jobs - 1; i >= 1; i--)); do
	bounds+=("${fp[i * n / jobs]}")
done
bounds+=("$(g rev-parse "$branch")")
pids=()
for ((i = 0; i < jobs; i++)); do
	f="$out/branch-$i.json"
	[[ -n "${COVERAGE_REUSE:-}" && -s "$f" ]] && continue
	("$bin" check --repo "$repo" --range "${bounds[i]}..${bounds[i + 1]}" --format json >"$f.tmp" || [[ $? == 4 ]]) && mv "$f.tmp" "$f" &
	pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
for ((i = 0; i < jobs; i++)); do
	[[ -s "$out/branch-$i.json" ]] || { echo "coverage: the walk over ${bounds[i]}..${bounds[i + 1]} failed" >&2; exit 1; }
done

"$bin" list --json >"$out/list.json"
for p in $(python3 -c 'import json,sys; print(" ".join(p["name"] for p in json.load(open(sys.argv[1]))["patches"] if p["project"] == "sglang"))' "$out/list.json"); do
	"$bin" show "$p" --json >"$out/show-$p.json"
done
python3 "$here/coverage.py" "$out" "$branch" "$since" "$(g log -1 --format='%H %cs' "$branch")"
