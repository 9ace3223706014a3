#!/usr/bin/env bash
# make demo-image: images without a registry or a Docker daemon.
#
# Writes a small offline base (examples/offline-base: the sample sglang tree
# installed under dist-packages, as an OCI layout), puts the sm120-fusion
# patch on it as one small layer, shows what the layer holds, reads the
# patched package back with the probe, and builds one image per cell of a
# two-cell matrix on the same base.
#
# usage: examples/demo-image.sh [path/to/smpatch]
set -euo pipefail
bin="$(realpath "${1:-bin/smpatch}")"
here="$(cd "$(dirname "$0")" && pwd)"
out="${SMPATCH_DEMO_OUT:-$here/../out/demo-image}"
rm -rf "$out"
mkdir -p "$out"
out="$(realpath "$out")"
export SMPATCH_CATALOG=""
# shellcheck source=examples/demo-lib.sh
. "$here/demo-lib.sh"

step go run ./examples/offline-base -o out/demo-image/base
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
demo_copy_sample "$work/sglang"
(cd "$here/.." && go run ./examples/offline-base -sample "$work/sglang" -o "$out/base")

step smpatch image apply sm120-fusion --base oci:out/demo-image/base --out oci:out/demo-image/images:fusion --env NCCL_MAX_NCHANNELS=2
"$bin" image apply sm120-fusion --base "oci:$out/base" --out "oci:$out/images:fusion" --env NCCL_MAX_NCHANNELS=2

step smpatch image show oci:out/demo-image/images:fusion
"$bin" image show "oci:$out/images:fusion"

step smpatch probe --image oci:out/demo-image/images:fusion
"$bin" probe --image "oci:$out/images:fusion" | sed -n '/^Packages/,/^[A-Z]/p'

cat >"$out/matrix.toml" <<TOML
# Two cells on the offline base: unpatched and with sm120-fusion.
name = "offline"
project = "sglang"

[base]
image = "oci:$out/base"

[axes]
patches = [[], ["sm120-fusion"]]

[launch]
command = ["python3", "-m", "sglang.launch_server", "--port", "30000"]
TOML
step smpatch matrix build out/demo-image/matrix.toml --out out/demo-image/cells
"$bin" matrix build "$out/matrix.toml" --out "$out/cells"

cat <<NEXT

Everything is under out/demo-image/ (OCI layouts: base, images, cells).
What to try next:
  smpatch image apply sm120-fusion --base YOUR/IMAGE:TAG --out oci:out/mine   # a registry base
  smpatch image apply sm120-fusion --base YOUR/IMAGE:TAG --out oci:out/arm --platform linux/arm64   # GH200, GB200, DGX Spark
  smpatch matrix build examples/story/matrix.toml --push REGISTRY/REPO         # one image per cell
NEXT
