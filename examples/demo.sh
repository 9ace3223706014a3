#!/usr/bin/env bash
# make demo: the main job on the bundled sample tree.
#
# Copies examples/sample/sglang (a small synthetic sglang checkout) to a
# temporary directory, applies the built-in sm120-fusion and
# sm120-fusion-auto patches, prints the
# diff it made and the status, reverts it, and shows the tree is back byte
# for byte (sha256 of every file before and after).
#
# usage: examples/demo.sh [path/to/smpatch]
set -euo pipefail
bin="$(realpath "${1:-bin/smpatch}")"
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=examples/demo-lib.sh
. "$here/demo-lib.sh"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
tree="$work/sglang"
demo_copy_sample "$tree"
demo_copy_sample "$work/untouched"
export SMPATCH_CATALOG=""

# Every file of the tree with its sha256, the journal directory left out
# (it exists only while a patch is applied).
sums() {
  (cd "$tree" && find . -name .smpatch -prune -o -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
}

sums >"$work/before.sha256"

step smpatch list
"$bin" list

# The gate, on saved probe reports of the story's host (eight RTX PRO 6000,
# SM 12.0, PCIe): with flashinfer 0.6.16.post4 it refuses (exit 3) and
# writes nothing; with 0.6.17 every requirement is met.
hosts="$here/hosts"
step smpatch apply sm120-fusion --check-arch --probe-file examples/hosts/rtx-pro-6000x8-flashinfer-0.6.16.json --repo "$tree"
rc=0
"$bin" apply sm120-fusion --check-arch --probe-file "$hosts/rtx-pro-6000x8-flashinfer-0.6.16.json" --repo "$tree" || rc=$?
echo "(exit $rc: refused, nothing written)"
[ "$rc" = 3 ] || { echo "expected exit 3 from the gate, got $rc" >&2; exit 1; }

step smpatch apply sm120-fusion sm120-fusion-auto --check-arch --probe-file examples/hosts/rtx-pro-6000x8-flashinfer-0.6.17.json --repo "$tree"
"$bin" apply sm120-fusion sm120-fusion-auto --check-arch --probe-file "$hosts/rtx-pro-6000x8-flashinfer-0.6.17.json" --repo "$tree"

step diff -ru untouched sglang
(cd "$work" && diff -ru --exclude=.smpatch untouched sglang | sed -E 's/^((---|\+\+\+) [^\t]*)\t.*/\1/') || true

step smpatch status --repo "$tree"
"$bin" status --repo "$tree"

step smpatch apply sm120-fusion --repo "$tree"   "# again: nothing to do"
"$bin" apply sm120-fusion --repo "$tree"

step smpatch revert --repo "$tree"
"$bin" revert --repo "$tree"

step smpatch status --repo "$tree"
"$bin" status --repo "$tree"

sums >"$work/after.sha256"
step "sha256 of every file, before apply and after revert"
n=$(wc -l <"$work/before.sha256")
if cmp -s "$work/before.sha256" "$work/after.sha256" && [ ! -e "$tree/.smpatch" ]; then
  echo "identical: all $n files are back byte for byte, and no journal is left"
else
  diff "$work/before.sha256" "$work/after.sha256" || true
  echo "DIFFERENT: the tree did not come back" >&2
  exit 1
fi

cat <<'NEXT'

What to try next:
  mkdir -p ~/src && cp -R examples/sample/sglang ~/src/sglang   # a copy to try the commands on
  smpatch show sm120-fusion --repo ~/src/sglang     # what it would change there
  smpatch probe -o host.json                        # on the GPU host: what it can build
  make demo-matrix                                  # the story's experiments on a fake server
NEXT
