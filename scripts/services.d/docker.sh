# Docker daemon (Debian's docker.io, dockerd 20.10) on a socket of its own:
# data, exec root and socket under the service folder, the registry of
# registry.sh (or 127.0.0.1:5000) as an insecure registry. So that it can
# run beside a system dockerd (which docker.io starts where systemd runs),
# it has a bridge of its own ($SMPATCH_DOCKER_BRIDGE, smpatch0, with
# $SMPATCH_DOCKER_BRIDGE_CIDR, 172.29.77.1/24) and leaves iptables alone:
# published ports go through docker-proxy on the host's loopback, and
# containers have no outbound NAT (nothing here pulls from outside).
# It starts its own containerd. Also installs busybox-static, the rootfs of
# the tests' base image.
# Exports SMPATCH_TEST_DOCKER_HOST=unix://.../docker.sock.

docker_bridge() { echo "${SMPATCH_DOCKER_BRIDGE:-smpatch0}"; }

docker_sock() { echo "$SMPATCH_SERVICES_DIR/docker/docker.sock"; }

docker_ping() {
  docker -H "unix://$(docker_sock)" version --format '{{.Server.Version}}'
}

docker_up() {
  local dir reg
  dir="$(svc_dir docker)"
  svc_need dockerd docker.io
  svc_need docker docker.io
  svc_need ip iproute2
  dpkg -s busybox-static >/dev/null 2>&1 || svc_apt_install busybox-static
  if svc_running "$dir/pid" && docker_ping >/dev/null 2>&1; then
    echo "docker: already running, listening on unix://$(docker_sock) (pid $(cat "$dir/pid"))"
    return 0
  fi
  svc_stop "$dir/pid" 20
  reg="127.0.0.1:5000"
  if [ -s "$SMPATCH_SERVICES_DIR/registry/port" ]; then
    reg="127.0.0.1:$(cat "$SMPATCH_SERVICES_DIR/registry/port")"
  fi
  mkdir -p "$dir/data" "$dir/exec"
  rm -f "$dir/dockerd.pid" "$(docker_sock)"
  if ! ip link show "$(docker_bridge)" >/dev/null 2>&1; then
    ip link add name "$(docker_bridge)" type bridge
    ip addr add "${SMPATCH_DOCKER_BRIDGE_CIDR:-172.29.77.1/24}" dev "$(docker_bridge)"
    echo "$(docker_bridge)" >"$dir/bridge" # ours: down deletes it
  fi
  ip link set "$(docker_bridge)" up
  svc_start "$dir/pid" "$dir/log" dockerd \
    --data-root "$dir/data" --exec-root "$dir/exec" \
    -H "unix://$(docker_sock)" --pidfile "$dir/dockerd.pid" \
    --bridge "$(docker_bridge)" --iptables=false --ip-masq=false \
    --insecure-registry "$reg" --log-level warn
  if ! svc_wait 60 docker docker_ping || ! svc_running "$dir/pid"; then
    tail -n 30 "$dir/log" >&2 || true
    svc_stop "$dir/pid" 20
    svc_die "dockerd did not answer on unix://$(docker_sock) (log: $dir/log)"
  fi
  echo "docker: listening on unix://$(docker_sock) (dockerd $(docker_ping), pid $(cat "$dir/pid"), bridge $(docker_bridge), insecure registry $reg, log $dir/log)"
}

docker_down() {
  local dir="$SMPATCH_SERVICES_DIR/docker"
  if svc_running "$dir/pid"; then
    # dockerd stops its containers and its containerd on SIGTERM.
    svc_stop "$dir/pid" 30
    echo "docker: stopped"
  fi
  rm -f "$dir/pid"
  # dockerd leaves its default network namespace mounted in the exec root.
  if grep -q " $dir/exec/netns/default " /proc/mounts 2>/dev/null; then
    umount "$dir/exec/netns/default" 2>/dev/null || true
  fi
  if [ -s "$dir/bridge" ]; then
    ip link del "$(cat "$dir/bridge")" 2>/dev/null || true
    rm -f "$dir/bridge"
  fi
}

docker_env() {
  local dir="$SMPATCH_SERVICES_DIR/docker"
  if svc_running "$dir/pid" && [ -S "$(docker_sock)" ]; then
    echo "export SMPATCH_TEST_DOCKER_HOST=unix://$(docker_sock)"
  fi
}

docker_status() {
  local dir="$SMPATCH_SERVICES_DIR/docker" v
  if svc_running "$dir/pid" && v="$(docker_ping 2>/dev/null)"; then
    echo "docker: running on unix://$(docker_sock) (dockerd $v, pid $(cat "$dir/pid"))"
  else
    echo "docker: stopped"
  fi
}
