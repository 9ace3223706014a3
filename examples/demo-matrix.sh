#!/usr/bin/env bash
# make demo-matrix: the story's matrix (examples/fake/matrix.toml) against
# testdata/fakeserver, a stand-in for sglang, on any machine: baseline,
# fewchan and fewchan+fusion at --cuda-graph-max-bs 512 and 128. smpatch
# applies sm120-fusion to a copy of examples/sample/sglang for the fusion
# cells, the fake server dies there with flashinfer's arch line, smpatch
# triages it, reverts the patch, and prints the results table.
#
# Three of the six cells fail on purpose: they are the story's failures
# (KV-pool init out of memory with fewchan at 512, and flashinfer's missing
# SM12x arch for the fusion cells), caught, triaged and reported.
#
# Usage: examples/demo-matrix.sh [path/to/smpatch]
# The results stay in out/demo-matrix/ (DEMO_OUT=DIR puts them elsewhere).
set -euo pipefail
cd "$(dirname "$0")/.."
bin="$(realpath "${1:-bin/smpatch}")"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
out="${DEMO_OUT:-out/demo-matrix}"
rm -rf "$out"
mkdir -p "$(dirname "$out")"

# shellcheck source=examples/demo-lib.sh
. examples/demo-lib.sh

say "build the fake sglang server"
CGO_ENABLED=0 go build -o "$work/bin/fakeserver" ./testdata/fakeserver
demo_copy_sample "$work/sglang"
demo_copy_sample "$work/untouched"
export PATH="$work/bin:$PATH"
export SMPATCH_REPO="$work/sglang"   # the tree smpatch patches, and the fake server reads
unset GITHUB_STEP_SUMMARY

say "the cells"
"$bin" matrix expand examples/fake/matrix.toml

say "run them (patch, start, wait for health, bench, triage, stop, revert)"
code=0
"$bin" matrix run examples/fake/matrix.toml --out "$out" || code=$?
if [ "$code" -ne 6 ]; then
  echo "demo: expected exit 6 (some cells failed), got $code" >&2
  exit 1
fi

say "why the fusion cell died"
"$bin" triage "$out/logs/sm120-fusion.fewchan.cgbs128.log"

say "the tree ends as it began"
if diff -r "$work/untouched" "$work/sglang"; then
  echo "$SMPATCH_REPO is byte-identical to examples/sample/sglang"
else
  echo "demo: the tree changed" >&2
  exit 1
fi
"$bin" status

say "results.md (also written to \$GITHUB_STEP_SUMMARY in CI)"
cat "$out/results.md"

cat <<EOF

The failed cells are the point: they are the story's three failures (KV-pool
init out of memory under fewchan at --cuda-graph-max-bs 512; flashinfer's
"No supported CUDA architectures found for major versions [9, 10]" in both
fusion cells), each caught before a benchmark and named by triage.
Everything is in $out/: results.md, results.html, results.csv, results.json,
junit.xml and logs/.
What to try next:
  smpatch matrix compare $out --pair unpatched.fewchan.cgbs128:unpatched.default.cgbs128
  smpatch triage $out/logs/*.log
  open $out/results.html in a browser (one file, no network)
EOF
