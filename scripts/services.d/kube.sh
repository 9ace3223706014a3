# shellcheck shell=bash
# Kubernetes control plane for the tests: etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler and kwok (one simulated node with
# nvidia.com/gpu: 8), all built from the Go module proxy into a cache outside
# the repository. Sourced by scripts/services.sh; defines kube_up, kube_down,
# kube_env.
#
# Knobs: SMPATCH_K8S_CACHE (default ~/.cache/smpatch-k8s), SMPATCH_K8S_VERSION
# (default v1.34.4), SMPATCH_KWOK_VERSION (default v0.8.0), SMPATCH_K8S_PORT
# (apiserver port, default 16443), SMPATCH_ETCD_PORT (default 12379).

: "${SMPATCH_K8S_CACHE:=${HOME}/.cache/smpatch-k8s}"
: "${SMPATCH_K8S_VERSION:=v1.34.4}"
: "${SMPATCH_KWOK_VERSION:=v0.8.0}"
: "${SMPATCH_K8S_PORT:=16443}"
: "${SMPATCH_ETCD_PORT:=12379}"

kube__dir() { echo "${SMPATCH_SERVICES_DIR:-/tmp/smpatch-services}/kube"; }
kube__bin() { echo "$SMPATCH_K8S_CACHE/bin-$SMPATCH_K8S_VERSION"; }
kube__log() { echo "kube: $*" >&2; }

# kube_build builds the binaries once per version; later calls return at once.
kube_build() {
	local bin src ver minor staging
	bin=$(kube__bin)
	if [[ -x $bin/kube-apiserver && -x $bin/kube-controller-manager && -x $bin/kube-scheduler && -x $bin/etcd && -x $bin/kwok ]]; then
		return 0
	fi
	command -v go >/dev/null || { kube__log "go not on PATH"; return 1; }
	ver=$SMPATCH_K8S_VERSION
	minor=${ver#v1.}; minor=${minor%%.*}
	staging="v0.${ver#v1.}"
	src=$SMPATCH_K8S_CACHE/src-$ver
	mkdir -p "$src" "$bin"
	kube__log "[$(date -u +%H:%M:%S)] building the control plane $ver in $src: the first time 15-20 minutes on 2 cores (kube-apiserver, controller-manager, scheduler, etcd, kwok from the Go module proxy); later runs reuse $bin"
	svc_heartbeat_start "kube: building the control plane $ver"
	(
		set -euo pipefail
		cd "$src"
		local kmod
		kmod=$(GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$ver" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')
		{
			echo "module smpatch.local/k8s-scratch"
			echo
			echo "go 1.24"
			echo
			echo "require k8s.io/kubernetes $ver"
			echo
			# Every staging module of k8s.io/kubernetes is published on its own
			# with the v0.MINOR.PATCH tag matching v1.MINOR.PATCH.
			sed -n 's#^[[:space:]]*\(k8s.io/[^ ]*\) => ./staging/src/.*#\1#p' "$kmod" | sort -u |
				while read -r m; do echo "replace $m => $m $staging"; done
		} >go.mod
		kube__log "[$(date -u +%H:%M:%S)] resolving modules"
		GOFLAGS=-mod=mod go get "k8s.io/kubernetes/cmd/kube-apiserver@$ver" \
			"k8s.io/kubernetes/cmd/kube-controller-manager@$ver" \
			"k8s.io/kubernetes/cmd/kube-scheduler@$ver"
		# etcd at the version the control plane itself requires (v3.6.x):
		# a newer one would upgrade grpc and friends under it.
		local etcdv
		etcdv=$(GOFLAGS=-mod=mod go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)
		GOFLAGS=-mod=mod go get "go.etcd.io/etcd/server/v3@$etcdv"
		local ld="-s -w"
		local p
		for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
			ld+=" -X $p.gitVersion=$ver -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
		done
		kube__log "[$(date -u +%H:%M:%S)] compiling kube-apiserver, kube-controller-manager, kube-scheduler (the long part)"
		CGO_ENABLED=0 go build -mod=mod -trimpath -ldflags "$ld" -o "$bin/" \
			k8s.io/kubernetes/cmd/kube-apiserver \
			k8s.io/kubernetes/cmd/kube-controller-manager \
			k8s.io/kubernetes/cmd/kube-scheduler
		kube__log "[$(date -u +%H:%M:%S)] compiling etcd"
		CGO_ENABLED=0 go build -mod=mod -trimpath -ldflags "-s -w" -o "$bin/etcd" go.etcd.io/etcd/server/v3
		# kwok follows newer client libraries than the control plane; it gets
		# its own module so the replaces above do not reach it.
		mkdir -p "$src/kwok"
		cd "$src/kwok"
		printf 'module smpatch.local/kwok-scratch\n\ngo 1.24\n' >go.mod
		kube__log "[$(date -u +%H:%M:%S)] compiling kwok"
		GOFLAGS=-mod=mod go get "sigs.k8s.io/kwok/cmd/kwok@$SMPATCH_KWOK_VERSION"
		CGO_ENABLED=0 go build -mod=mod -trimpath -ldflags "-s -w" -o "$bin/kwok" sigs.k8s.io/kwok/cmd/kwok
	)
	local rc=$?
	svc_heartbeat_stop
	kube__log "[$(date -u +%H:%M:%S)] control plane build: $([ "$rc" = 0 ] && echo done || echo "failed (exit $rc)")"
	return "$rc"
}

# kube__certs writes a CA, the apiserver's serving certificate, an admin
# client certificate (system:masters) and the service-account key pair.
kube__certs() {
	local p=$1/pki
	[[ -s $p/admin.crt ]] && return 0
	mkdir -p "$p"
	(
		set -e
		cd "$p"
		openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 3650 -subj "/CN=smpatch-test-ca" 2>/dev/null
		openssl req -newkey rsa:2048 -nodes -keyout apiserver.key -out apiserver.csr -subj "/CN=kube-apiserver" 2>/dev/null
		printf 'subjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc\nextendedKeyUsage=serverAuth\n' >apiserver.ext
		openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out apiserver.crt -days 3650 -extfile apiserver.ext 2>/dev/null
		openssl req -newkey rsa:2048 -nodes -keyout admin.key -out admin.csr -subj "/O=system:masters/CN=smpatch-admin" 2>/dev/null
		printf 'extendedKeyUsage=clientAuth,serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n' >admin.ext
		openssl x509 -req -in admin.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out admin.crt -days 3650 -extfile admin.ext 2>/dev/null
		openssl genrsa -out sa.key 2048 2>/dev/null
		openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
		rm -f ./*.csr ./*.ext
	)
}

# kube__kwok_config: the simulated node's life (Ready, 8 GPUs) and the pods'
# (scheduled: running; then, after half a second or the Go duration in the
# env variable SMPATCH_KWOK_RUN, complete, or fail with the exit code of
# SMPATCH_KWOK_EXIT; or keep running while SMPATCH_KWOK_HANG is set), plus
# a canned log for every container.
kube__kwok_config() {
	local d=$1
	# CRI log format (time, stream, F for a full line), as kubelets keep them.
	cat >"$d/canned.log" <<'LOG'
2026-01-01T00:00:00.000000000Z stdout F [kwok] canned log of a simulated container
2026-01-01T00:00:00.100000000Z stdout F server is ready
2026-01-01T00:00:00.200000000Z stdout F Output token throughput (tok/s):         82.0
2026-01-01T00:00:00.300000000Z stdout F output throughput: 82.00 tok/s
2026-01-01T00:00:00.400000000Z stdout F last_ttft: 0.20 s
LOG
	cat >"$d/kwok.yaml" <<YAML
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  enableDebuggingHandlers: true
  podPlayStageParallelism: 4
  nodePlayStageParallelism: 4
  nodeLeaseParallelism: 4
  podsOnNodeSyncParallelism: 1
  enablePodsOnNodeSyncListPager: true
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterLogs
metadata:
  name: canned
spec:
  selector: {}
  logs:
  - containers: []
    logsFile: $d/canned.log
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: smpatch-node-ready
spec:
  resourceRef: {apiGroup: v1, kind: Node}
  selector:
    matchExpressions:
    - {key: '.status.conditions.[] | select( .type == "Ready" ) | .status', operator: NotIn, values: ['True']}
  next:
    statusTemplate: |
      {{ \$now := Now }}
      capacity: &res {cpu: "64", memory: 512Gi, pods: "110", nvidia.com/gpu: "8"}
      allocatable: *res
      conditions:
      - {type: Ready, status: "True", reason: KubeletReady, message: kwok, lastHeartbeatTime: {{ \$now | Quote }}, lastTransitionTime: {{ \$now | Quote }}}
      addresses:
      - {type: InternalIP, address: {{ NodeIP | Quote }}}
      daemonEndpoints:
        kubeletEndpoint: {Port: {{ NodePort }}}
      nodeInfo: {architecture: amd64, operatingSystem: linux, kubeletVersion: kwok, containerRuntimeVersion: kwok}
      phase: Running
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: smpatch-pod-run
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchExpressions:
    - {key: '.metadata.deletionTimestamp', operator: DoesNotExist}
    - {key: '.status.phase', operator: In, values: ['Pending']}
    - {key: '.spec.nodeName', operator: Exists}
  next:
    statusTemplate: |
      {{ \$now := Now }}
      conditions:
      - {type: Initialized, status: "True", lastTransitionTime: {{ \$now | Quote }}}
      - {type: Ready, status: "True", lastTransitionTime: {{ \$now | Quote }}}
      - {type: ContainersReady, status: "True", lastTransitionTime: {{ \$now | Quote }}}
      - {type: PodScheduled, status: "True", lastTransitionTime: {{ \$now | Quote }}}
      initContainerStatuses:
      {{ range .spec.initContainers }}
      - {name: {{ .name | Quote }}, image: {{ .image | Quote }}, ready: true, started: true, restartCount: 0, state: {running: {startedAt: {{ \$now | Quote }}}}}
      {{ end }}
      containerStatuses:
      {{ range .spec.containers }}
      - {name: {{ .name | Quote }}, image: {{ .image | Quote }}, ready: true, started: true, restartCount: 0, state: {running: {startedAt: {{ \$now | Quote }}}}}
      {{ end }}
      hostIP: {{ NodeIPWith .spec.nodeName | Quote }}
      podIP: {{ PodIPWith .spec.nodeName false .metadata.uid .metadata.name .metadata.namespace | Quote }}
      phase: Running
      startTime: {{ \$now | Quote }}
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: smpatch-pod-end
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchExpressions:
    - {key: '.metadata.deletionTimestamp', operator: DoesNotExist}
    - {key: '.status.phase', operator: In, values: ['Running']}
    - {key: '.spec.containers.[].env.[]? | select( .name == "SMPATCH_KWOK_HANG" ) | .name', operator: DoesNotExist}
  delay:
    durationMilliseconds: 500
    durationFrom: {jq: {expression: '.spec.containers[0].env[]? | select( .name == "SMPATCH_KWOK_RUN" ) | .value'}}
  next:
    statusTemplate: |
      {{ \$now := Now }}
      {{ \$code := 0 }}
      {{ range (index .spec.containers 0).env }}{{ if eq .name "SMPATCH_KWOK_EXIT" }}{{ \$code = .value }}{{ end }}{{ end }}
      initContainerStatuses:
      {{ range .spec.initContainers }}
      - {name: {{ .name | Quote }}, image: {{ .image | Quote }}, ready: false, started: false, restartCount: 0, state: {terminated: {exitCode: 0, reason: Completed, startedAt: {{ \$now | Quote }}, finishedAt: {{ \$now | Quote }}}}}
      {{ end }}
      containerStatuses:
      {{ range .spec.containers }}
      - {name: {{ .name | Quote }}, image: {{ .image | Quote }}, ready: false, started: false, restartCount: 0, state: {terminated: {exitCode: {{ \$code }}, reason: {{ if eq (printf "%v" \$code) "0" }}Completed{{ else }}Error{{ end }}, startedAt: {{ \$now | Quote }}, finishedAt: {{ \$now | Quote }}}}}
      {{ end }}
      phase: {{ if eq (printf "%v" \$code) "0" }}Succeeded{{ else }}Failed{{ end }}
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: smpatch-pod-delete
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchExpressions:
    - {key: '.metadata.deletionTimestamp', operator: Exists}
  next:
    finalizers: {empty: true}
    delete: true
YAML
}

kube__kubeconfig() {
	local d=$1 port=$2
	cat >"$d/kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- name: smpatch
  cluster:
    server: https://127.0.0.1:$port
    certificate-authority: $d/pki/ca.crt
users:
- name: admin
  user:
    client-certificate: $d/pki/admin.crt
    client-key: $d/pki/admin.key
contexts:
- name: smpatch
  context: {cluster: smpatch, user: admin}
current-context: smpatch
KC
}

kube__curl() {
	local d=$1
	shift
	curl -fsS --cacert "$d/pki/ca.crt" --cert "$d/pki/admin.crt" --key "$d/pki/admin.key" "$@"
}

kube_up() {
	local d bin port eport peer kport node
	d=$(svc_dir kube)
	bin=$(kube__bin)
	if svc_running "$d/kwok.pid" && svc_running "$d/kube-apiserver.pid" && [[ -s $d/port ]] &&
		kube__curl "$d" "https://127.0.0.1:$(cat "$d/port")/readyz" >/dev/null 2>&1; then
		kube__where "$d"
		return 0
	fi
	svc_need openssl openssl
	svc_need curl curl
	kube_build || svc_die "building the control plane failed"
	kube__certs "$d"
	kube__kwok_config "$d"
	if [[ -s $d/port ]] && svc_running "$d/kube-apiserver.pid"; then
		port=$(cat "$d/port") eport=$(cat "$d/etcd-port") kport=$(cat "$d/kwok-port")
	else
		port=$(svc_free_port "$SMPATCH_K8S_PORT")
		eport=$(svc_free_port "$SMPATCH_ETCD_PORT")
		peer=$(svc_free_port $((eport + 1)))
		kport=$(svc_free_port 16250)
		echo "$port" >"$d/port"
		echo "$eport" >"$d/etcd-port"
		echo "$peer" >"$d/etcd-peer-port"
		echo "$kport" >"$d/kwok-port"
	fi
	peer=$(cat "$d/etcd-peer-port")
	kube__kubeconfig "$d" "$port"
	mkdir -p "$d/log"
	if ! svc_running "$d/etcd.pid"; then
		# A test cluster starts empty: Jobs and pods left by an earlier run
		# that was cut short would otherwise hold the node's GPUs.
		rm -rf "$d/etcd"
		svc_start "$d/etcd.pid" "$d/log/etcd.log" "$bin/etcd" --name smpatch --data-dir "$d/etcd" \
			--listen-client-urls "http://127.0.0.1:$eport" --advertise-client-urls "http://127.0.0.1:$eport" \
			--listen-peer-urls "http://127.0.0.1:$peer" --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
			--initial-cluster "smpatch=http://127.0.0.1:$peer" --unsafe-no-fsync --log-level warn
		svc_wait 30 etcd curl -fsS "http://127.0.0.1:$eport/health" || svc_die "etcd did not start: $d/log/etcd.log"
	fi
	if ! svc_running "$d/kube-apiserver.pid"; then
		svc_start "$d/kube-apiserver.pid" "$d/log/kube-apiserver.log" "$bin/kube-apiserver" \
			--etcd-servers "http://127.0.0.1:$eport" --bind-address 127.0.0.1 --advertise-address 127.0.0.1 \
			--secure-port "$port" --tls-cert-file "$d/pki/apiserver.crt" --tls-private-key-file "$d/pki/apiserver.key" \
			--client-ca-file "$d/pki/ca.crt" --authorization-mode Node,RBAC \
			--service-account-issuer https://kubernetes.default.svc --service-account-key-file "$d/pki/sa.pub" \
			--service-account-signing-key-file "$d/pki/sa.key" --service-cluster-ip-range 10.0.0.0/24 \
			--kubelet-client-certificate "$d/pki/admin.crt" --kubelet-client-key "$d/pki/admin.key" \
			--enable-priority-and-fairness=false --profiling=false
	fi
	svc_wait 60 kube-apiserver kube__curl "$d" "https://127.0.0.1:$port/readyz" ||
		svc_die "kube-apiserver did not become ready: $d/log/kube-apiserver.log"
	if ! svc_running "$d/kube-controller-manager.pid"; then
		svc_start "$d/kube-controller-manager.pid" "$d/log/kube-controller-manager.log" "$bin/kube-controller-manager" \
			--kubeconfig "$d/kubeconfig" --leader-elect=false --bind-address 127.0.0.1 --secure-port 0 \
			--service-account-private-key-file "$d/pki/sa.key" --root-ca-file "$d/pki/ca.crt" \
			--controllers '*,-nodeipam,-nodelifecycle,-cloud-node-lifecycle,-service,-route' --profiling=false
	fi
	if ! svc_running "$d/kube-scheduler.pid"; then
		svc_start "$d/kube-scheduler.pid" "$d/log/kube-scheduler.log" "$bin/kube-scheduler" \
			--kubeconfig "$d/kubeconfig" --leader-elect=false --bind-address 127.0.0.1 --secure-port 0 --profiling=false
	fi
	node=smpatch-gpu-0
	if ! kube__curl "$d" "https://127.0.0.1:$port/api/v1/nodes/$node" >/dev/null 2>&1; then
		kube__curl "$d" -X POST -H 'Content-Type: application/json' "https://127.0.0.1:$port/api/v1/nodes" -d '{
			"apiVersion": "v1", "kind": "Node",
			"metadata": {"name": "'$node'", "labels": {"kubernetes.io/hostname": "'$node'", "type": "kwok", "nvidia.com/gpu.compute.major": "12"},
				"annotations": {"kwok.x-k8s.io/node": "fake"}},
			"spec": {"taints": []}}' >/dev/null || svc_die "could not create node $node"
	fi
	# The API server taints a new node not-ready; the node lifecycle
	# controller that would lift it is off (kwok's node has no kubelet
	# heartbeat to judge), so lift it here.
	kube__curl "$d" -X PATCH -H 'Content-Type: application/merge-patch+json' \
		"https://127.0.0.1:$port/api/v1/nodes/$node" -d '{"spec": {"taints": null}}' >/dev/null ||
		svc_die "could not lift the taints of node $node"
	if ! svc_running "$d/kwok.pid"; then
		svc_start "$d/kwok.pid" "$d/log/kwok.log" "$bin/kwok" --kubeconfig "$d/kubeconfig" --config "$d/kwok.yaml" \
			--manage-all-nodes=true --node-ip 127.0.0.1 --node-port "$kport" --server-address "127.0.0.1:$kport" \
			--tls-cert-file "$d/pki/admin.crt" --tls-private-key-file "$d/pki/admin.key"
	fi
	svc_wait 60 "node $node ready" kube__node_ready "$d" "$port" "$node" ||
		svc_die "node $node did not become ready: $d/log/kwok.log"
	svc_wait 60 "service account default/default" kube__curl "$d" "https://127.0.0.1:$port/api/v1/namespaces/default/serviceaccounts/default" ||
		svc_die "no default service account: $d/log/kube-controller-manager.log"
	kube__where "$d"
}

kube__node_ready() {
	kube__curl "$1" "https://127.0.0.1:$2/api/v1/nodes/$3" | grep -q '"nvidia.com/gpu": "8"'
}

kube__where() {
	echo "kube: kube-apiserver on https://127.0.0.1:$(cat "$1/port") (etcd 127.0.0.1:$(cat "$1/etcd-port"), kwok node smpatch-gpu-0 with nvidia.com/gpu: 8 on 127.0.0.1:$(cat "$1/kwok-port")); KUBECONFIG=$1/kubeconfig"
}

kube_down() {
	local d p
	d=$(kube__dir)
	[[ -d $d ]] || return 0
	for p in kwok kube-scheduler kube-controller-manager kube-apiserver etcd; do
		svc_stop "$d/$p.pid"
	done
	echo "kube: stopped"
}

kube_env() {
	local d
	d=$(kube__dir)
	svc_running "$d/kube-apiserver.pid" && svc_running "$d/kwok.pid" || return 0
	echo "export SMPATCH_TEST_KUBECONFIG=$d/kubeconfig"
}

kube_status() {
	local d
	d=$(kube__dir)
	if svc_running "$d/kube-apiserver.pid" && svc_running "$d/kwok.pid"; then
		echo "kube: running ($(kube__where "$d"))"
	else
		echo "kube: stopped"
	fi
}
