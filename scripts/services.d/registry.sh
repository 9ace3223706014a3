# Container registry (Debian's docker-registry, distribution 2.8): plain HTTP
# on 127.0.0.1, 5000 when free, filesystem storage under the service folder.
# Exports SMPATCH_TEST_REGISTRY=127.0.0.1:PORT.

registry_up() {
  local dir port
  dir="$(svc_dir registry)"
  if svc_running "$dir/pid" && [ -s "$dir/port" ] && svc_port_busy "$(cat "$dir/port")"; then
    echo "registry: already running, listening on 127.0.0.1:$(cat "$dir/port") (pid $(cat "$dir/pid"))"
    return 0
  fi
  svc_stop "$dir/pid" 5
  svc_need docker-registry docker-registry
  port="$(svc_free_port "${SMPATCH_REGISTRY_PORT:-5000}")"
  mkdir -p "$dir/data"
  cat >"$dir/config.yml" <<CONF
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $dir/data
  delete:
    enabled: true
http:
  addr: 127.0.0.1:$port
CONF
  echo "$port" >"$dir/port"
  svc_start "$dir/pid" "$dir/log" docker-registry serve "$dir/config.yml"
  if ! svc_wait 30 registry svc_port_busy "$port" || ! svc_running "$dir/pid"; then
    tail -n 20 "$dir/log" >&2 || true
    svc_stop "$dir/pid" 5
    rm -f "$dir/port"
    svc_die "registry did not start listening on 127.0.0.1:$port (log: $dir/log)"
  fi
  echo "registry: listening on 127.0.0.1:$port (pid $(cat "$dir/pid"), data $dir/data, log $dir/log)"
}

registry_down() {
  local dir="$SMPATCH_SERVICES_DIR/registry"
  if svc_running "$dir/pid"; then
    svc_stop "$dir/pid" 10
    echo "registry: stopped"
  fi
  rm -f "$dir/pid" "$dir/port"
}

registry_env() {
  local dir="$SMPATCH_SERVICES_DIR/registry"
  if svc_running "$dir/pid" && [ -s "$dir/port" ]; then
    echo "export SMPATCH_TEST_REGISTRY=127.0.0.1:$(cat "$dir/port")"
  fi
}

registry_status() {
  local dir="$SMPATCH_SERVICES_DIR/registry"
  if svc_running "$dir/pid" && [ -s "$dir/port" ]; then
    echo "registry: running on 127.0.0.1:$(cat "$dir/port") (pid $(cat "$dir/pid"))"
  else
    echo "registry: stopped"
  fi
}
