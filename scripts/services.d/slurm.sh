# shellcheck shell=bash
# One Slurm node for the tests: munged, slurmctld and slurmd on this host,
# eight GPUs declared as GRES (character devices made under the service's
# folder, major 195 like /dev/nvidiaN), no slurmdbd (sacct reads the
# jobcomp/filetxt file). Sourced by scripts/services.sh; defines slurm_up,
# slurm_down, slurm_env, slurm_status. Needs root (mknod, munge).
#
# Knobs: SMPATCH_SLURM_CTLD_PORT (default 16817), SMPATCH_SLURM_SLURMD_PORT
# (default 16818), SMPATCH_SLURM_GPUS (default 8).

slurm__dir() { echo "${SMPATCH_SERVICES_DIR:-/tmp/smpatch-services}/slurm"; }

slurm_up() {
	local d host cpus mem gpus i ctld slurmd
	d=$(svc_dir slurm)
	if svc_running "$d/slurmctld.pid" && svc_running "$d/slurmd.pid" && svc_running "$d/munged.pid"; then
		slurm__ready "$d" && { slurm__where "$d"; return 0; }
	fi
	svc_need slurmctld slurm-wlm munge
	svc_need munged munge
	host=$(hostname -s)
	cpus=$(nproc)
	mem=$(awk '/MemTotal/ {print int($2/1024/2)}' /proc/meminfo)
	gpus=${SMPATCH_SLURM_GPUS:-8}
	# Daemons of an earlier up keep their ports: rewrite nothing under them.
	if [[ -s $d/slurm.conf ]] && { svc_running "$d/slurmctld.pid" || svc_running "$d/slurmd.pid"; }; then
		ctld=$(sed -n 's/^SlurmctldPort=//p' "$d/slurm.conf")
		slurmd=$(sed -n 's/^SlurmdPort=//p' "$d/slurm.conf")
	else
		ctld=$(svc_free_port "${SMPATCH_SLURM_CTLD_PORT:-16817}")
		slurmd=$(svc_free_port "${SMPATCH_SLURM_SLURMD_PORT:-$((ctld + 1))}")
	fi
	mkdir -p "$d/state" "$d/spool" "$d/dev" "$d/munge" "$d/log"
	chmod 700 "$d/munge"
	# GRES gpus need device files; these carry the NVIDIA major number and
	# open nothing real.
	for ((i = 0; i < gpus; i++)); do
		[[ -c $d/dev/nvidia$i ]] || mknod "$d/dev/nvidia$i" c 195 "$i"
	done
	if [[ ! -s $d/munge/munge.key ]]; then
		dd if=/dev/urandom of="$d/munge/munge.key" bs=1024 count=1 status=none
		chmod 400 "$d/munge/munge.key"
	fi
	if ! svc_running "$d/munged.pid"; then
		rm -f "$d/munge/munge.sock"
		svc_start "$d/munged.pid" "$d/log/munged.log" munged --foreground --force \
			--key-file="$d/munge/munge.key" --socket="$d/munge/munge.sock" \
			--pid-file="$d/munge/munged.pid" --log-file="$d/log/munged.log" \
			--seed-file="$d/munge/munged.seed"
		svc_wait 10 munged test -S "$d/munge/munge.sock" || svc_die "munged did not start: $d/log/munged.log"
	fi
	cat >"$d/slurm.conf" <<CONF
# Written by scripts/services.sh: one node, ${gpus} GRES GPUs, no slurmdbd.
# The GPUs bound a job here, not the few cores of a test machine: each core
# may be shared by up to 8 jobs.
ClusterName=smpatch
SlurmctldHost=${host}(127.0.0.1)
SlurmctldPort=${ctld}
SlurmdPort=${slurmd}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=${d}/munge/munge.sock
StateSaveLocation=${d}/state
SlurmdSpoolDir=${d}/spool
SlurmctldPidFile=${d}/slurmctld.pid.self
SlurmdPidFile=${d}/slurmd.pid.self
SlurmctldLogFile=${d}/log/slurmctld.log
SlurmdLogFile=${d}/log/slurmd.log
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=${d}/jobcomp.txt
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
MpiDefault=none
ReturnToService=2
SlurmdTimeout=30
MinJobAge=600
KillWait=5
NodeName=${host} NodeAddr=127.0.0.1 CPUs=${cpus} RealMemory=${mem} Gres=gpu:${gpus} State=UNKNOWN
PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:8
CONF
	cat >"$d/gres.conf" <<CONF
AutoDetect=off
NodeName=${host} Name=gpu File=${d}/dev/nvidia[0-$((gpus - 1))]
CONF
	# cgroup.conf is read even when no cgroup plugin is used.
	printf "CgroupPlugin=cgroup/v1\nIgnoreSystemd=yes\n" >"$d/cgroup.conf"
	export SLURM_CONF=$d/slurm.conf
	if ! svc_running "$d/slurmctld.pid"; then
		svc_start "$d/slurmctld.pid" "$d/log/slurmctld.out" slurmctld -D -i -f "$d/slurm.conf"
	fi
	if ! svc_running "$d/slurmd.pid"; then
		svc_start "$d/slurmd.pid" "$d/log/slurmd.out" slurmd -D -f "$d/slurm.conf"
	fi
	svc_wait 60 "slurm node" slurm__ready "$d" ||
		svc_die "the Slurm node did not come up: $d/log/slurmctld.log, $d/log/slurmd.log ($(SLURM_CONF=$d/slurm.conf sinfo -h -o '%T %E' 2>&1 | head -1))"
	slurm__where "$d"
}

# slurm__ready: the node is idle (or already running jobs) for the controller.
slurm__ready() {
	local st
	st=$(SLURM_CONF=$1/slurm.conf sinfo -h -N -o '%T' 2>/dev/null | head -1)
	case "$st" in idle* | mixed* | allocated*) return 0 ;; esac
	return 1
}

slurm__where() {
	local port
	port=$(sed -n 's/^SlurmctldPort=//p' "$1/slurm.conf")
	echo "slurm: slurmctld on 127.0.0.1:$port, node $(hostname -s) with gres gpu:${SMPATCH_SLURM_GPUS:-8}; SLURM_CONF=$1/slurm.conf"
}

slurm_down() {
	local d
	d=$(slurm__dir)
	[[ -d $d ]] || return 0
	# Jobs still running belong to this controller: cancel them first.
	if svc_running "$d/slurmctld.pid"; then
		SLURM_CONF=$d/slurm.conf scancel --full --quiet --user="$(id -un)" 2>/dev/null || true
	fi
	svc_stop "$d/slurmd.pid"
	svc_stop "$d/slurmctld.pid"
	svc_stop "$d/munged.pid"
	echo "slurm: stopped"
}

slurm_env() {
	local d
	d=$(slurm__dir)
	svc_running "$d/slurmctld.pid" && svc_running "$d/slurmd.pid" || return 0
	echo "export SLURM_CONF=$d/slurm.conf"
	echo "export SMPATCH_TEST_SLURM=$d/slurm.conf"
}

slurm_status() {
	local d
	d=$(slurm__dir)
	if svc_running "$d/slurmctld.pid" && svc_running "$d/slurmd.pid"; then
		echo "slurm: running ($(SLURM_CONF=$d/slurm.conf sinfo -h -N -o '%N %T %G' 2>&1 | head -1))"
	else
		echo "slurm: stopped"
	fi
}
