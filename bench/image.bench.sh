#!/usr/bin/env bash
# bench/image.bench.sh SMPATCH: 8 cells (2 patch sets x 4 NCCL presets) on a
# 40 MB and on a 2 GB synthetic base image (OCI layouts on disk, random
# incompressible layers generated once into a temp directory and removed
# afterwards; the base's top layer holds a static busybox as /bin/sh), built
# two ways, each the median of 3 runs:
#   smpatch: `smpatch matrix build` into an OCI layout, cold (first build:
#            every layer streamed once to index it) and warm (layer index
#            cached, fresh output); wall time and peak RSS;
#   docker:  what a user would otherwise do: per cell, `docker build`
#            (--no-cache, the classic builder) of a Dockerfile FROM the same
#            base that copies the files of smpatch's top layer (read back
#            from the image smpatch built), removes with RUN rm what that
#            layer whites out (stale bytecode), and sets the same ENV and
#            LABELs; wall time and the daemon's peak RSS (the whole dockerd,
#            so other clients of the daemon count too). The first run's
#            images are checked against smpatch's: same env and labels,
#            whited-out paths absent. The base is loaded into the daemon
#            (`docker load` of a docker-save tarball) before, and that load
#            is timed on its own: a user with the base already pulled does
#            not pay it.
# Ratios: smpatch / docker build, and 2 GB / 40 MB for smpatch (target:
# within 1.5x, i.e. independent of the base's size). A third row times one
# pass of go-containerregistry's mutate.Extract over the base (no digest
# check): what every build would cost if it flattened the base instead of
# keeping a layer index. The load average is printed before and after.
#
# The docker side needs the daemon of scripts/services.sh (DOCKER_HOST or
# SMPATCH_TEST_DOCKER_HOST, as `scripts/services.sh env` prints) and
# /bin/busybox (busybox-static); without them its rows print SKIP and
# smpatch's still run. It runs on the 40 MB base only, unless
# IMAGE_BENCH_DOCKER_BIG=1: on the 2 GB base, writing the docker-save
# tarball and loading it into the daemon add about a minute on a loaded
# 2-core machine and take 4 GB more disk while it runs.
# IMAGE_BENCH_BIG_BYTES overrides the big base's size (default 2 GiB).
set -Eeuo pipefail
trap 'echo "image bench: line $LINENO: exit status $?" >&2' ERR
cd "$(dirname "$0")/.."
. bench/lib.sh
bin="$(realpath "${1:-bin/smpatch}")"
small=$((40 << 20))
big=${IMAGE_BENCH_BIG_BYTES:-$((2 << 30))}
tmp="$(mktemp -d "${TMPDIR:-/tmp}/smpatch-image-bench.XXXXXX")"
tag="smpatch-image-bench-$$"

docker_skip=""
if [ ! -x /bin/busybox ]; then
  docker_skip="no /bin/busybox (busybox-static) for the base's shell"
elif ! docker_daemon; then
  docker_skip="no docker daemon: run scripts/services.sh up docker, then eval \"\$(scripts/services.sh env)\""
fi
if [ -z "$docker_skip" ]; then
  trap 'docker_cleanup "$tag"; rm -rf "$tmp"' EXIT
else
  trap 'rm -rf "$tmp"' EXIT
fi
shell=()
[ ! -x /bin/busybox ] || shell=(-shell /bin/busybox)

go build -o "$tmp/imagebench" ./bench/imagebench
ib="$tmp/imagebench"
echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at the start"

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
extract() { "$ib" measure "$ib" extract -layout "$tmp/$1" 2>/dev/null; } # extract NAME: one mutate.Extract pass

# The dockerd this machine runs, when the daemon is local and there is
# exactly one; its peak RSS
# is reset before each docker run (clear_refs 5) and read after.
dockerd=""
case "${DOCKER_HOST:-unix://}" in unix://*) dockerd=$(pgrep -x dockerd || true) ;; esac
[ "$(echo "$dockerd" | wc -w)" = 1 ] && [ -w "/proc/$dockerd/clear_refs" ] || dockerd=""
hwm_reset() { [ -z "$dockerd" ] || echo 5 >"/proc/$dockerd/clear_refs"; }
hwm() { if [ -n "$dockerd" ]; then awk '/^VmHWM/ { printf "%.1f", $2 / 1024 }' "/proc/$dockerd/status"; else echo "-"; fi; }

dockerbuilds() { # dockerbuilds NAME RUN: the 8 docker builds, "seconds dockerd-MiB"
  local name=$1 run=$2 s e c rss
  hwm_reset
  s=$(now)
  while read -r c; do
    DOCKER_BUILDKIT=0 docker build -q --no-cache -t "$tag/$name-$run:$c" "$tmp/ctx-$name/$c" </dev/null >/dev/null 2>"$tmp/docker.log" ||
      { cat "$tmp/docker.log" >&2; touch "$tmp/failed"; }
  done <"$tmp/cells-$name"
  e=$(now)
  rss=$(hwm)
  echo "$(secs "$s" "$e") $rss"
}

# sameimages NAME RUN: docker's images carry smpatch's env and labels, and
# not the paths smpatch's layer whites out.
sameimages() {
  local name=$1 run=$2 c cid p
  while read -r c; do
    docker inspect "$tag/$name-$run:$c" </dev/null >"$tmp/inspect.json"
    "$ib" same "$tmp/refs-$name.json" "$c" <"$tmp/inspect.json"
    cid=$(docker create --name "$tag-$name-$run" "$tag/$name-$run:$c" true </dev/null)
    while read -r p; do
      [ -n "$p" ] || continue
      if docker cp "$cid:$p" - </dev/null >/dev/null 2>&1; then echo "image bench: $c: docker build left $p" >&2; exit 1; fi
    done <"$tmp/ctx-$name/$c/whiteouts"
    docker rm "$cid" </dev/null >/dev/null
  done <"$tmp/cells-$name"
}

declare -A res
for name in small big; do
  bytes=$small; layers=4
  if [ "$name" = big ]; then bytes=$big; layers=8; fi
  echo "generating the $name base ($((bytes >> 20)) MiB in $layers random layers)..." >&2
  "$ib" gen -dir "$tmp/$name" -bytes "$bytes" -layers "$layers" "${shell[@]}" >/dev/null
  matrix "$tmp/$name" >"$tmp/$name.toml"
  # Cold: a fresh layer index cache each run (the page cache stays warm).
  res[$name.cold]=$(median3 "$(build $name cold 1)" "$(build $name cold 2)" "$(build $name cold 3)")
  check
  # Warm: the index cached by a first build; a fresh output each run.
  build $name warm 0 >/dev/null
  res[$name.warm]=$(median3 "$(build $name warm 1)" "$(build $name warm 2)" "$(build $name warm 3)")
  check
  # go-containerregistry's flattening of the base, one pass.
  res[$name.extract]=$(median3 "$(extract $name)" "$(extract $name)" "$(extract $name)")
  res[$name.docker]="" res[$name.load]=""
  if [ -z "$docker_skip" ] && { [ "$name" = small ] || [ "${IMAGE_BENCH_DOCKER_BIG:-0}" = 1 ]; }; then
    echo "loading the $name base into the daemon and building with docker..." >&2
    "$ib" save -layout "$tmp/$name" -tag "$tag/base:$name" -out "$tmp/$name.tar"
    s=$(now)
    docker load -i "$tmp/$name.tar" >/dev/null
    e=$(now)
    res[$name.load]=$(secs "$s" "$e")
    rm -f "$tmp/$name.tar"
    # Contexts from the last warm build's images (the same bytes every run).
    "$ib" dockerfiles -refs "$tmp/refs-$name.json" -base "$tmp/$name" -from "$tag/base:$name" -ctx "$tmp/ctx-$name" >"$tmp/cells-$name"
    d1=$(dockerbuilds $name 1)
    check
    sameimages $name 1
    d2=$(dockerbuilds $name 2)
    d3=$(dockerbuilds $name 3)
    check
    res[$name.docker]=$(median3 "$d1" "$d2" "$d3")
    docker_cleanup "$tag" # the base and every image built on it
  fi
  rm -rf "$tmp/out-$name" "$tmp/$name" "$tmp"/cache-"$name"-* "$tmp/ctx-$name"
done

why_small=$docker_skip why_big=$docker_skip
[ -n "$why_big" ] || [ "${IMAGE_BENCH_DOCKER_BIG:-0}" = 1 ] || why_big="set IMAGE_BENCH_DOCKER_BIG=1 to include it"
for name in small big; do
  bytes=$small why=$why_small
  if [ "$name" = big ]; then bytes=$big why=$why_big; fi
  awk -v mib=$((bytes >> 20)) -v c="${res[$name.cold]}" -v w="${res[$name.warm]}" -v d="${res[$name.docker]}" \
      -v l="${res[$name.load]}" -v ex="${res[$name.extract]}" -v why="$why" 'BEGIN {
    split(c, a); split(w, b); split(ex, f)
    printf "%d MiB base, 8 cells, median of 3          time (s)  peak RSS (MiB)\n", mib
    printf "  %-40s %8.2f %8.1f\n", "smpatch matrix build, cold index", a[1], a[2]
    printf "  %-40s %8.2f %8.1f\n", "smpatch matrix build, warm index", b[1], b[2]
    printf "  %-40s %8.2f %8.1f\n", "mutate.Extract of the base, one pass", f[1], f[2]
    if (d == "") {
      printf "  %-40s SKIP (%s)\n", "docker build per cell", why
      exit
    }
    split(d, x)
    printf "  %-40s %8.2f %8s (dockerd)\n", "docker build per cell, base loaded", x[1], x[2]
    printf "  %-40s %8.2f\n", "docker load of the base (once)", l
    printf "  smpatch / docker build: cold %.2fx, warm %.2fx; cold / (docker load + build) %.2fx\n", a[1] / x[1], b[1] / x[1], a[1] / (l + x[1])
  }'
done
awk -v sc="${res[small.cold]}" -v sw="${res[small.warm]}" -v bc="${res[big.cold]}" -v bw="${res[big.warm]}" 'BEGIN {
  split(sc, a); split(sw, b); split(bc, c); split(bw, d)
  printf "smpatch, big / small base, cold: time %.2fx, RSS %.2fx\n", c[1] / a[1], c[2] / a[2]
  printf "smpatch, big / small base, warm: time %.2fx, RSS %.2fx (target <= 1.5x)\n", d[1] / b[1], d[2] / b[2]
}'
echo "load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"
