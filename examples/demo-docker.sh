#!/usr/bin/env bash
# The story's fake matrix (examples/fake/matrix.toml) in real containers:
# a runnable base image is built locally (busybox-static, the static fake
# sglang server, a synthetic installed sglang 0.5.17), smpatch builds one
# image per cell on it (the sm120-fusion cells patched), pushes them to the
# test registry (or, without one, writes a docker-save tarball that is
# docker-loaded), and runs every cell with the docker runner. Inside each
# container the fake server reads the installed communicator.py and logs
# whether the SM120 fusion gate is open; with it open it dies the way the
# story's server did.
#
# Needs a Docker daemon: scripts/services.sh up docker; eval "$(scripts/services.sh env)".
# Usage: examples/demo-docker.sh [path/to/smpatch]
# The results stay in out/demo-docker/ (DEMO_OUT=DIR puts them elsewhere).
set -euo pipefail
cd "$(dirname "$0")/.."
bin="$(realpath "${1:-bin/smpatch}")"
export DOCKER_HOST="${SMPATCH_TEST_DOCKER_HOST:-${DOCKER_HOST:-unix:///var/run/docker.sock}}"
if ! docker version --format '{{.Server.Version}}' >/dev/null 2>&1; then
  echo "demo-docker: no Docker daemon at $DOCKER_HOST: run scripts/services.sh up docker (about half a minute), then eval \"\$(scripts/services.sh env)\"" >&2
  exit 1
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
out="${DEMO_OUT:-out/demo-docker}"
rm -rf "$out"
mkdir -p "$(dirname "$out")"
unset GITHUB_STEP_SUMMARY SMPATCH_REPO
# shellcheck source=examples/demo-lib.sh
. examples/demo-lib.sh

say "the base image: busybox-static, the fake server, sglang 0.5.17 installed"
CGO_ENABLED=0 go build -o "$work/fakeserver" ./testdata/fakeserver
go run ./bench/dockerbase -fakeserver "$work/fakeserver" -out "$work/base"
cp examples/fake/matrix.toml "$work/story.toml"
printf '\n[base]\nimage = "oci:base"\n' >>"$work/story.toml"

say "one image per cell"
if [ -n "${SMPATCH_TEST_REGISTRY:-}" ]; then
  "$bin" matrix build "$work/story.toml" --push "$SMPATCH_TEST_REGISTRY/smpatch-demo/story" --refs "$work/refs.json"
else
  "$bin" matrix build "$work/story.toml" --out "docker-archive:$work/story.tar:smpatch-demo/story"
  docker load -i "$work/story.tar"
fi

say "run them in containers"
code=0
"$bin" matrix run "$work/story.toml" --runner docker --docker-gpus none --refs "$work/refs.json" --out "$out" || code=$?
if [ "$code" -ne 6 ]; then
  echo "demo-docker: expected exit 6 (the fusion cells fail), got $code" >&2
  exit 1
fi

say "what each container's server read"
grep -H 'sm120 fusion gate' "$out"/logs/*.log | sed "s|$out/logs/||"

say "results.md"
cat "$out/results.md"

cat <<EOF

Everything is in $out/: results.md, results.html (one file, no network),
results.csv, results.json, junit.xml and logs/.
What to try next:
  smpatch matrix compare $out --pair unpatched.fewchan.cgbs128:unpatched.default.cgbs128
  smpatch triage $out/logs/*.log
EOF
