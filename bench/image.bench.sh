#!/usr/bin/env bash
# bench/image.bench.sh SMPATCH: `smpatch matrix build` of 8 cells (2 patch
# sets x 4 NCCL presets) on a 40 MB and on a 2 GB synthetic base image (OCI
# layouts on disk, random incompressible layers generated once into a temp
# directory and removed afterwards). Reports wall time and peak RSS for each
# base, cold (first build: every layer streamed once to index it) and warm
# (layer index cached, fresh output), each the median of 3 runs, and the
# 2 GB / 40 MB ratios. Target:
# within 1.5x, i.e. independent of the base's size. The alternative, a
# Dockerfile per cell, rebuilds or re-exports the whole base per image.
#
# IMAGE_BENCH_BIG_BYTES overrides the big base's size (default 2 GiB).
set -euo pipefail
cd "$(dirname "$0")/.."
bin="$(realpath "${1:-bin/smpatch}")"
small=$((40 << 20))
big=${IMAGE_BENCH_BIG_BYTES:-$((2 << 30))}
tmp="$(mktemp -d "${TMPDIR:-/tmp}/smpatch-image-bench.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

go build -o "$tmp/imagebench" ./bench/imagebench
ib="$tmp/imagebench"

matrix() { # matrix BASE_DIR
  cat <<TOML
name = "image-bench"
project = "sglang"
[base]
image = "oci:$1"
[axes]
patches = [[], ["sm120-fusion"]]
nccl = ["default", "fewchan", "ll128", "p2psys"]
[presets.nccl.default]
NCCL_MIN_NCHANNELS = "16"
NCCL_MAX_NCHANNELS = "16"
NCCL_BUFFSIZE = "16777216"
[presets.nccl.fewchan]
NCCL_MIN_NCHANNELS = "1"
NCCL_MAX_NCHANNELS = "2"
NCCL_BUFFSIZE = "131072"
[presets.nccl.ll128]
NCCL_PROTO = "LL128"
[presets.nccl.p2psys]
NCCL_P2P_LEVEL = "SYS"
[launch]
command = ["python3", "-m", "sglang.launch_server", "--tp", "8"]
TOML
}

# median3 "t1 r1" "t2 r2" "t3 r3": the run with the median time.
median3() { printf '%s\n' "$@" | sort -n | sed -n 2p; }

build() { # build NAME KIND RUN: one measured matrix build
  local name=$1 kind=$2 run=$3 out
  if [ "$kind" = cold ]; then export XDG_CACHE_HOME="$tmp/cache-$name-$run"; else export XDG_CACHE_HOME="$tmp/cache-$name-warm"; fi
  rm -rf "$tmp/out-$name"
  out=$("$ib" measure "$bin" matrix build "$tmp/$name.toml" --out "$tmp/out-$name" --refs "$tmp/refs-$name.json" 2>"$tmp/$name.log")
  if ! grep -q '^8 built, 0 skipped, 0 failed' "$tmp/$name.log"; then
    cat "$tmp/$name.log" >&2
    touch "$tmp/failed" # command substitution hides the exit status
  fi
  echo "$out"
}
check() { if [ -e "$tmp/failed" ]; then echo "image bench: a build failed" >&2; exit 1; fi; }

declare -A res
for name in small big; do
  bytes=$small; layers=4
  if [ "$name" = big ]; then bytes=$big; layers=8; fi
  echo "generating the $name base ($((bytes >> 20)) MiB in $layers random layers)..." >&2
  "$ib" gen -dir "$tmp/$name" -bytes "$bytes" -layers "$layers" >/dev/null
  matrix "$tmp/$name" >"$tmp/$name.toml"
  # Cold: a fresh layer index cache each run (the page cache stays warm).
  res[$name.cold]=$(median3 "$(build $name cold 1)" "$(build $name cold 2)" "$(build $name cold 3)")
  check
  # Warm: the index cached by a first build; a fresh output each run.
  build $name warm 0 >/dev/null
  res[$name.warm]=$(median3 "$(build $name warm 1)" "$(build $name warm 2)" "$(build $name warm 3)")
  check
  rm -rf "$tmp/out-$name" "$tmp/$name" "$tmp"/cache-"$name"-*
done

awk -v sc="${res[small.cold]}" -v sw="${res[small.warm]}" -v bc="${res[big.cold]}" -v bw="${res[big.warm]}" \
    -v sb="$small" -v bb="$big" 'BEGIN {
  split(sc, a); split(sw, b); split(bc, c); split(bw, d)
  printf "%-28s %10s %10s\n", "smpatch matrix build, 8 cells", "time (s)", "peak RSS (MiB)"
  printf "%-28s %10.2f %10.1f\n", sprintf("%d MiB base, cold", sb / 1048576), a[1], a[2]
  printf "%-28s %10.2f %10.1f\n", sprintf("%d MiB base, cold", bb / 1048576), c[1], c[2]
  printf "%-28s %10.2f %10.1f\n", sprintf("%d MiB base, warm index", sb / 1048576), b[1], b[2]
  printf "%-28s %10.2f %10.1f\n", sprintf("%d MiB base, warm index", bb / 1048576), d[1], d[2]
  printf "ratio big/small, cold: time %.2fx, RSS %.2fx\n", c[1] / a[1], c[2] / a[2]
  printf "ratio big/small, warm: time %.2fx, RSS %.2fx (target <= 1.5x)\n", d[1] / b[1], d[2] / b[2]
}'
