#!/usr/bin/env bash
# Test services: brings up, lists and stops the real daemons the tests use
# (a container registry, a Docker daemon, and whatever else services.d/ holds).
#
#   scripts/services.sh up [NAME...]     start (idempotent), print where each listens
#
# NAME: registry (seconds), docker (about 30s with the docker.io install),
# slurm (about a minute with its packages), kube (the first time 15-20
# minutes: the control plane is compiled from the Go module proxy; then
# seconds), chromium (a minute for the package).
#   scripts/services.sh down [NAME...]   stop only what up started (pid files)
#   scripts/services.sh env              export lines for the running services
#   scripts/services.sh status           one line per service
#
# No NAME means every module. Everything lives under
# ${SMPATCH_SERVICES_DIR:-/tmp/smpatch-services}, one folder per service.
# Missing programs are installed with apt-get (Debian, as root).
#
# A module is services.d/NAME.sh, sourced here, defining NAME_up, NAME_down
# and NAME_env (prints `export VAR=value` lines, nothing when not running);
# NAME_status is optional. Modules use the svc_* helpers below.
set -euo pipefail

SVC_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SMPATCH_SERVICES_DIR="${SMPATCH_SERVICES_DIR:-/tmp/smpatch-services}"
export SMPATCH_SERVICES_DIR

# Start order; modules not named here come after, by name. down runs in reverse.
SVC_ORDER=(registry docker slurm kube)

svc_log() { echo "services: [$(date -u +%H:%M:%S)] $*" >&2; }

# svc_phase WHAT: a timestamped header before each service's step.
svc_phase() { printf '\n=== [%s] services: %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

SVC_HB_PID=
# svc_heartbeat_start WHAT: until svc_heartbeat_stop, a line every 30s
# saying WHAT is still running and for how long (long builds are silent).
svc_heartbeat_start() {
  local what="$1" t0
  t0="$(date +%s)"
  (
    while sleep 30; do
      svc_log "$what: still running, $(( ($(date +%s) - t0) / 60 ))m$(( ($(date +%s) - t0) % 60 ))s so far"
    done
  ) &
  SVC_HB_PID=$!
}
svc_heartbeat_stop() {
  if [ -n "$SVC_HB_PID" ]; then
    kill "$SVC_HB_PID" 2>/dev/null || true
    wait "$SVC_HB_PID" 2>/dev/null || true
    SVC_HB_PID=
  fi
}
trap svc_heartbeat_stop EXIT
svc_die() {
  echo "services: $*" >&2
  exit 1
}

# svc_dir NAME: the service's folder, created.
svc_dir() {
  mkdir -p "$SMPATCH_SERVICES_DIR/$1"
  echo "$SMPATCH_SERVICES_DIR/$1"
}

SVC_APT_UPDATED=
# svc_apt_install PKG...: installs packages (apt-get update once per run).
svc_apt_install() {
  command -v apt-get >/dev/null || svc_die "apt-get not found: install $* by hand"
  [ "$(id -u)" = 0 ] || svc_die "installing $* needs root (or install them by hand)"
  local apt=(env DEBIAN_FRONTEND=noninteractive apt-get -q -y -o DPkg::Lock::Timeout=600)
  if [ -z "$SVC_APT_UPDATED" ]; then
    svc_log "apt-get update"
    "${apt[@]}" update </dev/null >&2
    SVC_APT_UPDATED=1
  fi
  svc_log "apt-get install $*"
  "${apt[@]}" install --no-install-recommends "$@" </dev/null >&2
}

# svc_need CMD PKG...: installs PKG... unless CMD is on PATH.
svc_need() {
  local cmd="$1"
  shift
  command -v "$cmd" >/dev/null 2>&1 || svc_apt_install "$@"
  command -v "$cmd" >/dev/null 2>&1 || svc_die "$cmd still missing after installing $*"
}

# svc_running PIDFILE: true when the pid in PIDFILE is alive.
svc_running() {
  local pid
  [ -s "$1" ] || return 1
  pid="$(cat "$1")"
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

# svc_start PIDFILE LOG CMD...: starts CMD detached (its own session, no
# stdin), output to LOG, its pid in PIDFILE.
svc_start() {
  local pidfile="$1" log="$2"
  shift 2
  setsid "$@" </dev/null >>"$log" 2>&1 &
  echo $! >"$pidfile"
}

# svc_stop PIDFILE [GRACE_SECONDS]: SIGTERM to the pid in PIDFILE, SIGKILL
# after the grace (10s), then removes PIDFILE. Touches nothing else.
svc_stop() {
  local pidfile="$1" grace="${2:-10}" pid i
  if ! svc_running "$pidfile"; then
    rm -f "$pidfile"
    return 0
  fi
  pid="$(cat "$pidfile")"
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < grace * 10; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    svc_log "pid $pid ignored SIGTERM for ${grace}s: SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$pidfile"
}

# svc_port_busy PORT: true when something listens on 127.0.0.1:PORT.
svc_port_busy() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# svc_free_port PREFERRED: PREFERRED when free, else the next free port.
svc_free_port() {
  local p="$1"
  while svc_port_busy "$p"; do
    p=$((p + 1))
    [ "$p" -lt "$(($1 + 200))" ] || svc_die "no free port in $1..$p"
  done
  echo "$p"
}

# svc_wait SECONDS WHAT CMD...: retries CMD until it succeeds, for at most
# SECONDS; fails naming WHAT.
svc_wait() {
  local secs="$1" what="$2" i
  shift 2
  for ((i = 0; i < secs * 10; i++)); do
    if "$@" >/dev/null 2>&1; then
      return 0
    fi
    sleep 0.1
  done
  return 1
}

svc_modules() {
  local all=() m f
  for f in "$SVC_ROOT"/services.d/*.sh; do
    [ -e "$f" ] || continue
    all+=("$(basename "$f" .sh)")
  done
  for m in "${SVC_ORDER[@]}"; do
    for f in "${all[@]}"; do
      [ "$f" = "$m" ] && echo "$m"
    done
  done
  for f in "${all[@]}"; do
    case " ${SVC_ORDER[*]} " in *" $f "*) ;; *) echo "$f" ;; esac
  done
}

svc_load() {
  local m
  for m in $(svc_modules); do
    # shellcheck source=/dev/null
    . "$SVC_ROOT/services.d/$m.sh"
  done
}

# svc_check_names NAME...: fails on a name no module has.
svc_check_names() {
  local known m
  known="$(svc_modules | tr '\n' ' ')"
  for m in "$@"; do
    case " $known " in *" $m "*) ;; *) svc_die "unknown service $m (known: ${known% })" ;; esac
  done
}

svc_selected() {
  local m
  if [ "$#" -eq 0 ]; then
    svc_modules
    return
  fi
  # Keep the start order whatever order the names came in.
  for m in $(svc_modules); do
    case " $* " in *" $m "*) echo "$m" ;; esac
  done
}

main() {
  local cmd="${1:-}" m
  [ "$#" -gt 0 ] && shift
  svc_load
  svc_check_names "$@"
  case "$cmd" in
  up)
    mkdir -p "$SMPATCH_SERVICES_DIR"
    for m in $(svc_selected "$@"); do
      svc_phase "up $m"
      "${m}_up"
    done
    svc_phase "up: done (eval \"\$(scripts/services.sh env)\" points the tests at them)"
    ;;
  down)
    for m in $(svc_selected "$@" | tac); do
      svc_phase "down $m"
      "${m}_down"
    done
    ;;
  env)
    echo "export SMPATCH_SERVICES_DIR=$SMPATCH_SERVICES_DIR"
    for m in $(svc_selected "$@"); do
      "${m}_env"
    done
    ;;
  status)
    for m in $(svc_selected "$@"); do
      if declare -F "${m}_status" >/dev/null; then
        "${m}_status"
      elif [ -n "$("${m}_env")" ]; then
        echo "$m: running"
      else
        echo "$m: stopped"
      fi
    done
    ;;
  *)
    echo "usage: $0 up [NAME...] | down [NAME...] | env | status" >&2
    exit 2
    ;;
  esac
}

main "$@"
