#!/usr/bin/env bash
# compat.sh: the compatibility table (upstream/compat/compat.json, embedded in
# smpatch) and docs/compatibility.md, from sglang's and flashinfer's histories.
#
#   SGLANG_GIT_DIR=~/src/sglang FLASHINFER_GIT_DIR=~/src/flashinfer scripts/compat.sh
#
# SGLANG_GIT_DIR holds sglang's release tags (COVERAGE_FIRST_TAG, v0.5.8, on);
# SGLANG_MAIN_DIR (default SGLANG_GIT_DIR) the branch COVERAGE_BRANCH (main)
# read as main, and its pin history since COVERAGE_SINCE (2026-01-01);
# FLASHINFER_GIT_DIR flashinfer's tags (COVERAGE_FLASHINFER_FIRST, v0.6.0rc1,
# on) and FLASHINFER_BRANCH (main). Each is a clone (work tree or git
# directory, bare or not); nothing in it is changed. COVERAGE_UNREACHABLE
# names the releases known upstream that those clones do not have (the
# freshness line of both documents).
set -euo pipefail
cd "$(dirname "$0")/.."
for v in SGLANG_GIT_DIR FLASHINFER_GIT_DIR; do
	if [[ -z "${!v:-}" ]]; then
		echo "compat: set SGLANG_GIT_DIR and FLASHINFER_GIT_DIR to clones of sglang and flashinfer with their release tags (SGLANG_MAIN_DIR too, when main is in another clone)" >&2
		exit 2
	fi
done
first=${COVERAGE_FIRST_TAG:-v0.5.8}
fi_first=${COVERAGE_FLASHINFER_FIRST:-v0.6.0rc1}
json=upstream/compat/compat.json md=docs/compatibility.md
trap 'rm -f "$json.tmp" "$md.tmp"' EXIT
${GO:-go} run ./scripts/compatgen \
	-sglang "$SGLANG_GIT_DIR" -sglang-main "${SGLANG_MAIN_DIR:-$SGLANG_GIT_DIR}" -main-branch "${COVERAGE_BRANCH:-main}" \
	-flashinfer "$FLASHINFER_GIT_DIR" -flashinfer-branch "${FLASHINFER_BRANCH:-main}" \
	-sglang-first "${first#v}" -flashinfer-first "${fi_first#v}" -since "${COVERAGE_SINCE:-2026-01-01}" \
	-unreachable "${COVERAGE_UNREACHABLE-sglang v0.5.19 (September 2026), flashinfer 0.6.18 (final) and 0.7.x}" \
	-json "$json.tmp" -md "$md.tmp"
mv "$json.tmp" "$json"
mv "$md.tmp" "$md"
