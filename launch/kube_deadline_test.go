package launch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/smpatch/smpatch/matrix"
)

// testNodeKey labels and taints the node a test makes for itself.
const testNodeKey = "smpatch.io/test-node"

// kubeSandbox is a namespace and a kwok node of one test's own: the node
// has 8 nvidia.com/gpu like the shared one, and a taint keeps every pod but
// the test's off it, so the test's cells wait for GPUs only behind each
// other, whatever else runs on the cluster (other packages' tests share
// it).
type kubeSandbox struct {
	kubeconfig string
	c          *KubeClient
	ns, node   string
}

func newKubeSandbox(t *testing.T) *kubeSandbox {
	t.Helper()
	kc := kubeconfig(t)
	var b [4]byte
	rand.Read(b[:])
	name := "smpatch-test-" + hex.EncodeToString(b[:])
	c, err := NewKubeClient(kc, name)
	if err != nil {
		t.Fatal(err)
	}
	s := &kubeSandbox{kubeconfig: kc, c: c, ns: name, node: name}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.core.Post().Resource("namespaces").Body(ns).Do(ctx).Error(); err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name:        name,
		Labels:      map[string]string{"kubernetes.io/hostname": name, "type": "kwok", testNodeKey: name},
		Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
	}}
	if err := c.core.Post().Resource("nodes").Body(node).Do(ctx).Error(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.remove)
	// The API server taints a new node not-ready and nothing here lifts it
	// (no node lifecycle controller): the test's taint replaces it.
	taint := fmt.Sprintf(`{"spec":{"taints":[{"key":%q,"value":%q,"effect":"NoSchedule"}]}}`, testNodeKey, name)
	if err := c.core.Patch(types.MergePatchType).Resource("nodes").Name(name).Body([]byte(taint)).Do(ctx).Error(); err != nil {
		t.Fatal(err)
	}
	for {
		n := &corev1.Node{}
		err := c.core.Get().Resource("nodes").Name(name).Do(ctx).Into(n)
		q := n.Status.Allocatable[gpuResource]
		sa := c.core.Get().Namespace(name).Resource("serviceaccounts").Name("default").Do(ctx).Error()
		if err == nil && q.Value() == 8 && sa == nil {
			return s
		}
		if ctx.Err() != nil {
			t.Fatalf("node %s (8 GPUs) and namespace %s not ready: %v, %v", name, name, err, sa)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// remove deletes the Jobs and pods, then the namespace, waits for the
// node's pods to go, and deletes the node.
func (s *kubeSandbox) remove() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	bg := metav1.DeletePropagationBackground
	_ = s.c.batch.Delete().Namespace(s.ns).Resource("jobs").Body(&metav1.DeleteOptions{PropagationPolicy: &bg}).Do(ctx).Error()
	_ = s.c.core.Delete().Namespace(s.ns).Resource("pods").Do(ctx).Error()
	_ = s.c.core.Delete().Resource("namespaces").Name(s.ns).Do(ctx).Error()
	for ctx.Err() == nil {
		pods := &corev1.PodList{}
		err := s.c.core.Get().Resource("pods").
			VersionedParams(&metav1.ListOptions{FieldSelector: "spec.nodeName=" + s.node}, s.c.params).Do(ctx).Into(pods)
		if err == nil && len(pods.Items) == 0 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	_ = s.c.core.Delete().Resource("nodes").Name(s.node).Do(ctx).Error()
}

// run renders the matrix's Jobs onto the sandbox's node and runs them all
// eightGPUMatrix is the matrix called name whose cells (one axis, case)
// each ask for all 8 GPUs of the node, run the fake server and take env,
// a kwok stage's variable, as their preset; timeout is both the startup
// and the bench timeout.
func eightGPUMatrix(name string, cells []string, env, timeout string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "name = %q\nbase = { image = \"registry.example/%s:1\" }\n[axes]\ncase = [", name, name)
	for i, c := range cells {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q", c)
	}
	b.WriteString("]\n")
	for _, c := range cells {
		fmt.Fprintf(&b, "[presets.case.%s]\n%s\n", c, env)
	}
	b.WriteString(`[launch]
command = ["fakeserver", "--tp", "8", "--port", "30000"]
health = "http://127.0.0.1:30000/health"
bench = ["fakeserver", "bench", "-url", "http://127.0.0.1:30000"]
metric = 'Output token throughput \(tok/s\):\s+([0-9.]+)'
`)
	fmt.Fprintf(&b, "startup_timeout = %q\nbench_timeout = %q\n", timeout, timeout)
	return b.String()
}

// as one batch, returning the results by cell id and the progress lines.
func (s *kubeSandbox) run(t *testing.T, toml string, during func(context.Context)) (map[string]*Result, string, *Kube) {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "matrix.toml")
	if err := os.WriteFile(file, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := matrix.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	x, err := m.Expand(matrix.ExpandOptions{})
	if err != nil {
		t.Fatal(err)
	}
	k := &Kube{Client: kubeClientFor(s.kubeconfig, s.ns), Jobs: map[string]*batchv1.Job{}, Poll: 100 * time.Millisecond}
	o := &Options{Out: dir, Runner: k}
	cells, err := FromExpansion(x, nil, o)
	if err != nil {
		t.Fatal(err)
	}
	o.defaults()
	for _, mc := range x.Cells {
		j := Job(x, mc, m.Base.Image)
		pod := &j.Spec.Template.Spec
		pod.NodeSelector = map[string]string{testNodeKey: s.node}
		pod.Tolerations = []corev1.Toleration{{Key: testNodeKey, Operator: corev1.TolerationOpEqual, Value: s.node, Effect: corev1.TaintEffectNoSchedule}}
		k.Jobs[mc.ID] = j
	}
	if err := k.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	od, err := holdOut(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer od.close()
	if err := od.mkdirAll(LogsDir); err != nil {
		t.Fatal(err)
	}
	o.out = od
	var mu sync.Mutex
	var progress strings.Builder
	o.Progress = func(format string, args ...any) {
		mu.Lock()
		fmt.Fprintf(&progress, format+"\n", args...)
		mu.Unlock()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if during != nil {
		go during(ctx)
	}
	results := map[string]*Result{}
	err = k.RunBatch(ctx, cells, o, func(c *Cell, r *Result) error {
		results[c.ID] = r
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != len(cells) {
		t.Fatalf("%d results for %d cells:\n%s", len(results), len(cells), progress.String())
	}
	mu.Lock()
	defer mu.Unlock()
	return results, progress.String(), k
}

// Four cells ask for all 8 GPUs of the node and each runs 2.5s, so one of
// them waits at least 7.5s to be scheduled, longer than its bench timeout
// (3s) and its whole deadline (startup_timeout 3s + bench_timeout 3s): it
// still succeeds, since its deadline counts from its pod's start. (Each
// cell's own run leaves 3.5s to its deadline, for a loaded machine.)
func TestKubeQueuedCellKeepsItsDeadline(t *testing.T) {
	s := newKubeSandbox(t)
	results, progress, k := s.run(t, eightGPUMatrix("queue", []string{"q1", "q2", "q3", "q4"}, `SMPATCH_KWOK_RUN = "2500ms"`, "3s"), nil)
	for id, r := range results {
		if r.Status != StatusOK || r.Metrics["metric"] != 82 {
			t.Errorf("%s: %s %q %v\n%s", id, r.Status, r.Reason, r.Metrics, progress)
		}
	}
	// The premise: a cell did wait past its deadline before it started.
	longest := time.Duration(0)
	for id, j := range k.Jobs {
		if d := podDeadline(j); d != 6*time.Second || j.Spec.ActiveDeadlineSeconds != nil {
			t.Fatalf("%s: pod deadline %s, Job deadline %v", id, d, j.Spec.ActiveDeadlineSeconds)
		}
		pods, err := s.c.listPods(context.Background(), "job-name="+j.Name)
		if err != nil || len(pods.Items) != 1 || pods.Items[0].Status.StartTime == nil {
			t.Fatalf("%s: pods %v %v", id, pods, err)
		}
		p := pods.Items[0]
		longest = max(longest, p.Status.StartTime.Sub(p.CreationTimestamp.Time))
	}
	if longest <= 6*time.Second {
		t.Fatalf("no cell waited longer than its deadline to be scheduled (longest %s):\n%s", longest, progress)
	}
	if !regexp.MustCompile(`(?m)^q\d: pod smpatch-q\d-\w+ not scheduled: 0/\d nodes are available: .*Insufficient nvidia.com/gpu`).MatchString(progress) {
		t.Errorf("no cell was seen waiting for GPUs:\n%s", progress)
	}
	t.Logf("longest wait to be scheduled: %s", longest)
}

// A pod that keeps running (kwok runs no kubelet, so nothing on the node
// enforces activeDeadlineSeconds) is stopped by the run at its deadline
// counted from its start: the cell fails naming the deadline and the time
// it ran, its log is read first, and its Job is deleted with its pods.
func TestKubeHangStoppedAtDeadline(t *testing.T) {
	s := newKubeSandbox(t)
	results, progress, k := s.run(t, eightGPUMatrix("hang", []string{"stuck"}, `SMPATCH_KWOK_HANG = "1"`, "1s"), nil)
	r := results["stuck"]
	re := regexp.MustCompile(`^kubernetes: deadline exceeded: pod (smpatch-stuck-\w+) ran ([0-9.]+)s on node ` + s.node +
		`, past its deadline of 2s \(activeDeadlineSeconds, counted from the pod's start; the [0-9.]+m?s it waited to be scheduled does not count\); Job smpatch-stuck deleted$`)
	m := re.FindStringSubmatch(r.Reason)
	if r.Status != StatusFailed || m == nil {
		t.Fatalf("%s %q\n%s", r.Status, r.Reason, progress)
	}
	var ran float64
	fmt.Sscan(m[2], &ran)
	if ran < 2 {
		t.Errorf("stopped after running %gs, before its deadline of 2s", ran)
	}
	log, err := os.ReadFile(r.Log)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"### smpatch: pod " + m[1] + " container bench: running",
		"Output token throughput (tok/s):         82.0",
		"### smpatch: " + r.Reason,
	} {
		if !strings.Contains(string(log), want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	job := k.Jobs["stuck"].Name
	j, err := s.c.getJob(context.Background(), job)
	if err == nil && j.DeletionTimestamp == nil {
		t.Errorf("Job %s is still there, not being deleted", job)
	} else if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	if !strings.Contains(progress, "stuck: pod "+m[1]+" started on node "+s.node+" after ") {
		t.Errorf("no progress line for the pod's start:\n%s", progress)
	}
}

// A pod the kubelet stops at its deadline (here the test writes the status a
// kubelet writes: Failed, reason DeadlineExceeded) fails its cell with that
// reason, not only the Job's BackoffLimitExceeded.
func TestKubeKubeletDeadlineExceeded(t *testing.T) {
	s := newKubeSandbox(t)
	kubelet := func(ctx context.Context) {
		for ctx.Err() == nil {
			time.Sleep(100 * time.Millisecond)
			pods, err := s.c.listPods(ctx, "smpatch.io/cell=late")
			if err != nil || len(pods.Items) != 1 || pods.Items[0].Status.Phase != corev1.PodRunning {
				continue
			}
			p := pods.Items[0]
			now := metav1.Now()
			p.Status.Phase = corev1.PodFailed
			p.Status.Reason = podDeadlineExceeded
			p.Status.Message = "Pod was active on the node longer than the specified deadline"
			for _, css := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
				for i := range css {
					css[i].Ready = false
					css[i].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
						ExitCode: 137, Reason: "Error", StartedAt: *p.Status.StartTime, FinishedAt: now,
					}}
				}
			}
			err = s.c.core.Put().Namespace(s.ns).Resource("pods").Name(p.Name).SubResource("status").Body(&p).Do(ctx).Error()
			if err == nil {
				return
			}
		}
	}
	results, progress, _ := s.run(t, eightGPUMatrix("late", []string{"late"}, `SMPATCH_KWOK_HANG = "1"`, "60s"), kubelet)
	r := results["late"]
	re := regexp.MustCompile(`^kubernetes: deadline exceeded: pod smpatch-late-\w+ ran [0-9.]+m?s on node ` + s.node +
		`, past its deadline of 2m0s \(activeDeadlineSeconds, counted from the pod's start; the [0-9.]+m?s it waited to be scheduled does not count\); ` +
		`the kubelet stopped it: Pod was active on the node longer than the specified deadline; Job failed: BackoffLimitExceeded$`)
	if r.Status != StatusFailed || !re.MatchString(r.Reason) {
		t.Fatalf("%s %q\n%s", r.Status, r.Reason, progress)
	}
	log, err := os.ReadFile(r.Log)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), "container bench: exit 137 (Error)") {
		t.Errorf("log lacks the bench container's end:\n%s", log)
	}
}

// A pod's deadline clock starts when it is on a node and the kubelet took
// it or a container of it runs; a pod only bound, or not bound, waits.
func TestPodStarted(t *testing.T) {
	now := metav1.Now()
	running := corev1.ContainerStatus{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}
	for _, tc := range []struct {
		name string
		pod  corev1.Pod
		want bool
	}{
		{"pending, unscheduled", corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending}}, false},
		{"bound, not yet taken", corev1.Pod{Spec: corev1.PodSpec{NodeName: "n"}, Status: corev1.PodStatus{Phase: corev1.PodPending}}, false},
		{"taken by the kubelet, pulling", corev1.Pod{Spec: corev1.PodSpec{NodeName: "n"}, Status: corev1.PodStatus{Phase: corev1.PodPending, StartTime: &now}}, true},
		{"sidecar starting", corev1.Pod{Spec: corev1.PodSpec{NodeName: "n"}, Status: corev1.PodStatus{Phase: corev1.PodPending, InitContainerStatuses: []corev1.ContainerStatus{running}}}, true},
		{"running", corev1.Pod{Spec: corev1.PodSpec{NodeName: "n"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}, true},
		{"failed", corev1.Pod{Spec: corev1.PodSpec{NodeName: "n"}, Status: corev1.PodStatus{Phase: corev1.PodFailed}}, true},
	} {
		if got := podStarted(&tc.pod); got != tc.want {
			t.Errorf("%s: podStarted = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// The reason for a pod the kubelet stopped reads its times from the pod: it
// ran from its start to its containers' end, and waited from its creation
// to its start; the deadline is the pod's own.
func TestKubeletDeadlineReason(t *testing.T) {
	created := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	start := created.Add(12 * time.Minute)
	d := int64(3000)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "smpatch-c-abcde", CreationTimestamp: metav1.NewTime(created)},
		Spec:       corev1.PodSpec{NodeName: "gpu-3", ActiveDeadlineSeconds: &d},
		Status: corev1.PodStatus{
			Phase: corev1.PodFailed, Reason: podDeadlineExceeded, StartTime: &metav1.Time{Time: start},
			Message: "Pod was active on the node longer than the specified deadline",
			ContainerStatuses: []corev1.ContainerStatus{{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 137, FinishedAt: metav1.NewTime(start.Add(50*time.Minute + time.Second)),
			}}}},
		},
	}
	want := "kubernetes: deadline exceeded: pod smpatch-c-abcde ran 50m1s on node gpu-3, past its deadline of 50m0s " +
		"(activeDeadlineSeconds, counted from the pod's start; the 12m0s it waited to be scheduled does not count); " +
		"the kubelet stopped it: Pod was active on the node longer than the specified deadline"
	if got := kubeletDeadline(p, 0); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
