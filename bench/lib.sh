# bench/lib.sh: helpers shared by the bench scripts (sourced, not run).

now() { date +%s.%N; }
# secs START END: the seconds between two `now`s, two decimals.
secs() { awk -v s="$1" -v e="$2" 'BEGIN { printf "%.2f", e - s }'; }
# ratio A B: A / B as "1.23x".
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2fx", a / b }'; }
# median3 "t1 ..." "t2 ..." "t3 ...": the line whose first number is the median.
median3() { printf '%s\n' "$@" | sort -n | sed -n 2p; }

# docker_daemon: true when a Docker daemon answers, with DOCKER_HOST taken
# from SMPATCH_TEST_DOCKER_HOST (scripts/services.sh env) or the caller's.
docker_daemon() {
  export DOCKER_HOST="${SMPATCH_TEST_DOCKER_HOST:-${DOCKER_HOST:-}}"
  [ -n "$DOCKER_HOST" ] || unset DOCKER_HOST
  command -v docker >/dev/null && docker version --format '{{.Server.Version}}' >/dev/null 2>&1
}

# docker_cleanup PREFIX: removes the containers named PREFIX-* and the
# images whose name starts with PREFIX (a bench's own, never another's).
docker_cleanup() {
  docker ps -aq --filter "name=^$1-" | xargs -r docker rm -f >/dev/null 2>&1 || true
  docker images --format '{{.Repository}}:{{.Tag}}' | grep "^$1" | xargs -r docker rmi >/dev/null 2>&1 || true
}
