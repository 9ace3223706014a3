#!/usr/bin/env bash
# Runs each fuzz target in the module for a short time.
set -euo pipefail
cd "$(dirname "$0")/.."
time="${1:-5s}"
for pkg in $(go list ./...); do
  for f in $(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true); do
    echo "== $pkg $f"
    go test -run '^$' -fuzz "^${f}\$" -fuzztime "$time" "$pkg"
  done
done
