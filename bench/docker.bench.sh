#!/usr/bin/env bash
# Containers: smpatch against what a user would do by hand, on the real
# Docker daemon of scripts/services.sh.
#   runs:  8 fake cells end to end (start, health, bench, logs, stop) with
#          smpatch's local runner, its docker runner, and a plain shell loop
#          doing the same launches with `docker run` per cell;
#   build: the sm120-fusion image of the runnable test base, by smpatch
#          (image apply to a docker-save tarball, then docker load) and by
#          `docker build` of a Dockerfile copying the same patched files onto
#          the same base (--no-cache, the classic builder), median of 3.
# Skips, saying so, when no daemon answers.
set -euo pipefail
cd "$(dirname "$0")/.."
bin="$(realpath "${1:-bin/smpatch}")"
. bench/lib.sh
if ! docker_daemon; then
  echo "SKIP (no docker daemon): run scripts/services.sh up docker, then eval \"\$(scripts/services.sh env)\""
  exit 0
fi
work="$(mktemp -d)"
tag="smpatch-bench-$$"
trap 'docker_cleanup "$tag"; rm -rf "$work"' EXIT

CGO_ENABLED=0 go build -o "$work/bin/fakeserver" ./testdata/fakeserver
go run ./bench/dockerbase -fakeserver "$work/bin/fakeserver" -out "$work/base" >/dev/null
export PATH="$work/bin:$PATH"
unset GITHUB_STEP_SUMMARY SMPATCH_REPO

port=30170
cat >"$work/bench.toml" <<TOML
name = "bench"
project = "sglang"
[base]
image = "oci:base"
[axes]
patches = [[]]
cuda_graph_max_bs = [16, 32, 48, 64, 80, 96, 112, 128]
[id_prefix]
cuda_graph_max_bs = "cgbs"
[launch]
command = ["fakeserver", "-mode", "story", "-delay", "200ms", "--cuda-graph-max-bs", "{{.cuda_graph_max_bs}}", "--port", "$port"]
health = "http://127.0.0.1:$port/health"
bench = ["fakeserver", "bench", "-url", "http://127.0.0.1:$port"]
metric = 'Output token throughput \(tok/s\):\s+([0-9.]+)'
TOML
"$bin" matrix build "$work/bench.toml" --out "docker-archive:$work/bench.tar:$tag/cells" >/dev/null
docker load -i "$work/bench.tar" >/dev/null
cpus="$(nproc)"
echo "machine: $cpus cores, load $(cut -d' ' -f1-3 /proc/loadavg); dockerd $(docker version --format '{{.Server.Version}}')"

s=$(now)
"$bin" matrix run "$work/bench.toml" --runner local --out "$work/local" >/dev/null 2>&1
e=$(now)
t_local=$(secs "$s" "$e")

s=$(now)
"$bin" matrix run "$work/bench.toml" --runner docker --docker-gpus none --refs "$work/refs.json" --out "$work/docker" >/dev/null 2>&1
e=$(now)
t_docker=$(secs "$s" "$e")
grep -c '| ok |' "$work/docker/results.md" | grep -qx 8 || { echo "docker runner: not every cell ok" >&2; cat "$work/docker/results.md" >&2; exit 1; }

# What a user would script by hand: run, wait for health, bench, keep the
# logs, stop, remove.
healthy() { (exec 3<>"/dev/tcp/127.0.0.1/$port" && printf 'GET /health HTTP/1.0\r\n\r\n' >&3 && head -1 <&3 | grep -q ' 200 ') 2>/dev/null; }
mkdir -p "$work/loop"
s=$(now)
for b in 16 32 48 64 80 96 112 128; do
  n="$tag-loop-$b"
  docker run -d --rm --name "$n" --network=host --ipc=host "$tag/cells:cgbs$b" \
    fakeserver -mode story -delay 200ms --cuda-graph-max-bs "$b" --port "$port" >/dev/null
  until healthy; do sleep 0.1; done
  docker exec "$n" fakeserver bench -url "http://127.0.0.1:$port" >"$work/loop/$b.bench"
  docker logs "$n" >"$work/loop/$b.log" 2>&1
  docker stop -t 10 "$n" >/dev/null
done
e=$(now)
t_loop=$(secs "$s" "$e")
grep -h 'Output token throughput' "$work/loop/"*.bench | wc -l | grep -qx 8

echo "8 fake cells end to end (start, health, bench, logs, stop):"
echo "  smpatch matrix run --runner local:   ${t_local}s"
echo "  smpatch matrix run --runner docker:  ${t_docker}s"
echo "  shell loop of docker run per cell:   ${t_loop}s"
echo "  docker runner / shell loop: $(ratio "$t_docker" "$t_loop"); docker runner / local runner: $(ratio "$t_docker" "$t_local")"

# The image: smpatch's build (and docker load, to have it in the daemon)
# against docker build of the same files on the same base.
go run ./bench/dockerbase -fakeserver "$work/bin/fakeserver" -out "$work/base-docker" -tar "$work/base-docker.tar" -tag "$tag/base:1" >/dev/null
docker load -i "$work/base-docker.tar" >/dev/null
"$bin" image apply sm120-fusion --base "oci:$work/base" --tag "oci:$work/fusion" --json >"$work/fusion.json"
ctx="$work/ctx"
mkdir -p "$ctx"
paths=$(grep -o '"image_path": *"[^"]*"' "$work/fusion.json" | sed 's/.*: *"//; s/"$//')
{
  echo "FROM $tag/base:1"
  for p in $paths; do
    mkdir -p "$ctx/$(dirname "${p#/}")"
    echo "COPY ${p#/} $p"
  done
} >"$ctx/Dockerfile"
# The patched bytes, taken from smpatch's image so both builds copy the same.
"$bin" image apply sm120-fusion --base "oci:$work/base" --tag "docker-archive:$work/fusion.tar:$tag/fusion:1" >/dev/null
docker load -i "$work/fusion.tar" >/dev/null
cid=$(docker create "$tag/fusion:1" true)
for p in $paths; do docker cp "$cid:$p" "$ctx/${p#/}"; done
docker rm "$cid" >/dev/null

ts=() tl=() td=()
for i in 1 2 3; do
  rm -f "$work/f$i.tar"
  s=$(now)
  "$bin" image apply sm120-fusion --base "oci:$work/base" --tag "docker-archive:$work/f$i.tar:$tag/f$i:1" >/dev/null
  m=$(now)
  docker load -i "$work/f$i.tar" >/dev/null
  e=$(now)
  ts+=("$(secs "$s" "$m")") tl+=("$(secs "$s" "$e")")
  s=$(now)
  DOCKER_BUILDKIT=0 docker build -q --no-cache -t "$tag/d$i:1" "$ctx" >/dev/null 2>&1
  e=$(now)
  td+=("$(secs "$s" "$e")")
done
b_s=$(median3 "${ts[@]}") b_l=$(median3 "${tl[@]}") b_d=$(median3 "${td[@]}")
echo "the sm120-fusion image on the test base ($(echo "$paths" | wc -w) patched files), median of 3:"
echo "  smpatch image apply (docker-save tarball):  ${b_s}s"
echo "  ... plus docker load into the daemon:       ${b_l}s"
echo "  docker build (COPY the same files, --no-cache): ${b_d}s"
echo "  smpatch+load / docker build: $(ratio "$b_l" "$b_d"); smpatch alone / docker build: $(ratio "$b_s" "$b_d")"
