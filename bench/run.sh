#!/usr/bin/env bash
# make bench: every benchmark script in bench/ (NAME.bench.sh), each comparing
# smpatch with the alternative a user would otherwise use, in the same run.
set -euo pipefail
cd "$(dirname "$0")/.."
bin="$(realpath "${1:-bin/smpatch}")"
for s in bench/*.bench.sh; do
  [ -e "$s" ] || continue
  echo "== $s"
  "$s" "$bin"
done
