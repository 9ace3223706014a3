#!/usr/bin/env bash
# coverage.sh: where each catalog patch applies on real sglang history.
#
#   SGLANG_GIT_DIR=~/src/sglang/.git scripts/coverage.sh [BIN] > docs/coverage.md
#
# Runs `smpatch check --range ... --format json` on every release tag from
# COVERAGE_FIRST_TAG (v0.5.8) on, and once over the first-parent history of
# COVERAGE_BRANCH (main) since COVERAGE_SINCE (2026-01-01): one walk plans
# every patch of the catalog at each commit that changes one of its files.
# Then it turns the JSON into Markdown tables (scripts/coverage.py), with
# what the compatibility table (upstream/compat/compat.json, scripts/compat.sh)
# says of each tag's pinned flashinfer beside "applies". The JSON files stay
# in COVERAGE_OUT (a temporary directory unless set); with COVERAGE_REUSE=1,
# JSON files already there are used again instead of walking again.
# SGLANG_GIT_DIR is a clone of sglang (its work tree or its git directory,
# bare or not) holding the tags, SGLANG_MAIN_DIR (default SGLANG_GIT_DIR) one
# holding the branch; nothing in them is changed.
set -euo pipefail

bin=${1:-bin/smpatch}
here=$(cd "$(dirname "$0")" && pwd)
if [[ -z "${SGLANG_GIT_DIR:-}" ]]; then
	echo "coverage: set SGLANG_GIT_DIR to a clone of sglang with its main branch and release tags (e.g. SGLANG_GIT_DIR=~/src/sglang make coverage)" >&2
	exit 2
fi
[[ -x "$bin" ]] || { echo "coverage: $bin: no smpatch binary (make build)" >&2; exit 1; }
# gitdir DIR: the git directory of clone DIR, absolute.
gitdir() {
	local d=$1
	[[ -d "$d/.git" ]] && d=$d/.git
	git --git-dir="$d" rev-parse --git-dir >/dev/null 2>&1 || {
		echo "coverage: $1: not a git repository" >&2
		return 1
	}
	(cd "$d" && pwd)
}
gitdir=$(gitdir "$SGLANG_GIT_DIR")
maindir=$(gitdir "${SGLANG_MAIN_DIR:-$SGLANG_GIT_DIR}")
branch=${COVERAGE_BRANCH:-main}
since=${COVERAGE_SINCE:-2026-01-01}
first_tag=${COVERAGE_FIRST_TAG:-v0.5.8}
out=${COVERAGE_OUT:-$(mktemp -d)}
mkdir -p "$out"

# smpatch reads history from a checkout: a directory whose .git file points
# at the clone, with just enough of a tree to be recognised as sglang.
repo=$(mktemp -d) mainrepo=$(mktemp -d)
trap 'rm -rf "$repo" "$mainrepo"' EXIT
echo "gitdir: $gitdir" >"$repo/.git"
echo "gitdir: $maindir" >"$mainrepo/.git"
mkdir -p "$repo/python/sglang/srt" "$mainrepo/python/sglang/srt"

g() { git --git-dir="$gitdir" "$@"; }
m() { git --git-dir="$maindir" "$@"; }

# Release tags, oldest first (PEP 440 order is close enough to sort -V for
# sglang's vX.Y.Z[rcN|.postN] tags once rc sorts before the release).
tags=$(g tag --list 'v[0-9]*' | sed 's/rc/~rc/' | sort -V | sed 's/~rc/rc/' |
	awk -v first="$first_tag" '$0 == first { on = 1 } on')
for t in $tags; do
	[[ -n "${COVERAGE_REUSE:-}" && -s "$out/tag-$t.json" ]] && continue
	echo "coverage: $t" >&2
	"$bin" check --repo "$repo" --range "$t..$t" --format json >"$out/tag-$t.json" || [[ $? == 4 ]]
done

# The branch, in one walk: from the parent of its first first-parent commit
# since $since.
first=$(m rev-list --first-parent --since="$since" "$branch" | tail -n 1)
[[ -n "$first" ]] || { echo "coverage: no commit on $branch since $since" >&2; exit 1; }
base=$(m rev-parse "$first^")
echo "coverage: $branch from $(m log -1 --format='%h %cs' "$first") to $(m log -1 --format='%h %cs' "$branch")" >&2
f="$out/branch.json"
if [[ -z "${COVERAGE_REUSE:-}" || ! -s "$f" ]]; then
	"$bin" check --repo "$mainrepo" --range "$base..$branch" --format json >"$f.tmp" || [[ $? == 4 ]]
	mv "$f.tmp" "$f"
fi

"$bin" list --json >"$out/list.json"
for p in $(python3 -c 'import json,sys; print(" ".join(p["name"] for p in json.load(open(sys.argv[1]))["patches"] if p["project"] == "sglang"))' "$out/list.json"); do
	"$bin" show "$p" --json >"$out/show-$p.json"
done
python3 "$here/coverage.py" "$out" "$branch" "$since" "$(m log -1 --format='%H %cs' "$branch")" "${COVERAGE_COMPAT:-$here/../upstream/compat/compat.json}" \
	"${COVERAGE_UNREACHABLE-sglang v0.5.19 (September 2026), flashinfer 0.6.18 (final) and 0.7.x}"
