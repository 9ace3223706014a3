package launch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Kube creates each cell's Job (Job: the image from matrix build's
// refs, the GPUs as nvidia.com/gpu, the pod's deadline) in a namespace,
// follows them all at once and reads back each one's end: the Job's
// condition, the containers' exit codes, the warning events (Insufficient
// nvidia.com/gpu, DeadlineExceeded, BackoffLimitExceeded) and the pods'
// logs, from which the metrics are read. The cluster's scheduler decides
// what runs at once. A pod's activeDeadlineSeconds counts from its start on
// its node, never while it waits to be scheduled; the run enforces it
// itself too (a node whose kubelet does not stops nothing), ending the cell
// and deleting its Job. Every Job is first sent as a server-side dry run,
// so a manifest the API server refuses stops the run before anything is
// created. On Ctrl-C it deletes the Jobs (and their pods) it created.
type Kube struct {
	// Client connects to the cluster, for the namespace that holds the
	// Jobs (NewKubeClient); Check calls it once.
	Client func() (*KubeClient, error)
	// Jobs is each cell's Job, by cell id (Job renders them).
	Jobs map[string]*batchv1.Job
	// Poll is the time between two looks at pods and events (1s when 0);
	// Jobs themselves are watched.
	Poll time.Duration

	client  *KubeClient
	maxGPUs int64
}

// Kind implements Runner.
func (*Kube) Kind() RunnerKind { return RunnerKubernetes }

// Start implements Runner; Kubernetes runs cells only as a batch.
func (*Kube) Start(context.Context, *Cell, io.Writer) (Server, error) {
	return nil, errors.New("the kubernetes runner creates the cells' Jobs at once (RunBatch)")
}

// RunLabel marks every Job and pod of one run (a random id), so the run
// watches and deletes only its own.
const RunLabel = "smpatch.io/run"

// Check implements Runner: it connects, checks that the namespace exists
// and sends every Job to the API server as a server-side dry run
// (ValidateJobs), before anything is written or created.
func (k *Kube) Check(ctx context.Context) error {
	if err := k.connect(); err != nil {
		return err
	}
	nctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := k.client.checkNamespace(nctx); err != nil {
		return err
	}
	// Every Job, before anything is written or created: a manifest the API
	// server refuses stops the run here.
	ids := make([]string, 0, len(k.Jobs))
	for id := range k.Jobs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	cells := make([]*Cell, len(ids))
	for i, id := range ids {
		cells[i] = &Cell{ID: id}
	}
	vctx, vcancel := context.WithTimeout(ctx, 2*time.Minute)
	defer vcancel()
	return k.ValidateJobs(vctx, cells)
}

// connect makes the client once.
func (k *Kube) connect() error {
	if k.client != nil {
		return nil
	}
	if k.Client == nil {
		return errors.New("kubernetes runner: no cluster to connect to")
	}
	c, err := k.Client()
	if err != nil {
		return err
	}
	k.client = c
	return nil
}

// ValidateJobs sends every cell's Job to the API server as a server-side
// dry run; the first refusal names its cell.
func (k *Kube) ValidateJobs(ctx context.Context, cells []*Cell) error {
	if err := k.connect(); err != nil {
		return err
	}
	for _, c := range cells {
		job := k.Jobs[c.ID]
		if job == nil {
			return fmt.Errorf("cell %s: no Job to create", c.ID)
		}
		if job.Spec.Template.Spec.Containers[0].Image == "" {
			return fmt.Errorf("cell %s: no image to run (build the cells' images with smpatch matrix build --push REPO, then pass --refs)", c.ID)
		}
		// AlreadyExists comes after validation: the manifest is fine, and a
		// Job an earlier run left is replaced when the run creates its own.
		if _, err := k.client.createJob(ctx, job, true); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("cell %s: the API server refuses its Job %s: %w", c.ID, job.Name, err)
		}
	}
	return nil
}

// kubeTask is one cell's Job as the run follows it.
type kubeTask struct {
	cell    *Cell
	job     string
	created time.Time
	pending string // why its pod is not scheduled, while it is not
	// waiting is since when the pod has been unschedulable with nothing
	// else of this run running (which could free what it lacks).
	waiting time.Time
	gpus    int64  // nvidia.com/gpu the pod asks for
	never   string // why no node could ever take it
	done    bool

	// deadline is the pod's activeDeadlineSeconds (0 for none), counted
	// from started: when the run first saw the pod started on its node.
	deadline time.Duration
	started  time.Time
	pod      string // the pod seen started, and its node
	node     string
	ended    bool   // the pod was last seen Succeeded or Failed
	stopped  string // why the run ended the cell itself, its reason
}

// RunBatch implements BatchRunner.
func (k *Kube) RunBatch(ctx context.Context, cells []*Cell, o *Options, record func(*Cell, *Result) error) error {
	if k.client == nil {
		if err := k.Check(ctx); err != nil {
			return err
		}
	}
	r := &kubeRun{k: k, c: k.client, o: o, record: record, id: newRunID(), byJob: map[string]*kubeTask{}}
	r.sel = RunLabel + "=" + r.id
	k.maxGPUs = k.nodeGPUs(ctx)
	if !r.create(ctx, cells) {
		return r.cleanup()
	}
	poll := k.Poll
	if poll <= 0 {
		poll = time.Second
	}
	return r.follow(ctx, poll)
}

// kubeRun is one RunBatch: the Jobs it created, labelled with its id, and
// the cells' tasks.
type kubeRun struct {
	k       *Kube
	c       *KubeClient
	o       *Options
	record  func(*Cell, *Result) error
	id, sel string // the run's id, and the label selector of its Jobs and pods

	tasks   []*kubeTask
	byJob   map[string]*kubeTask
	created []string // the Jobs created, to delete on Ctrl-C
	left    int      // tasks not done
	recErr  error
}

// create creates every cell's Job; a cell whose Job cannot be created
// fails. It reports false when ctx ended first.
func (r *kubeRun) create(ctx context.Context, cells []*Cell) bool {
	ns := r.c.Namespace()
	for _, cell := range cells {
		if ctx.Err() != nil {
			return false
		}
		job := r.k.Jobs[cell.ID].DeepCopy()
		job.Namespace = ns
		setLabel(&job.ObjectMeta, RunLabel, r.id)
		setLabel(&job.Spec.Template.ObjectMeta, RunLabel, r.id)
		if err := r.k.replaceStale(ctx, job.Name); err != nil {
			r.fail(cell, "kubernetes: "+oneLineErr(err))
			continue
		}
		got, err := r.c.createJob(ctx, job, false)
		if err != nil {
			if ctx.Err() != nil {
				return false
			}
			r.fail(cell, "kubernetes: create Job "+job.Name+": "+oneLineErr(err))
			continue
		}
		r.created = append(r.created, got.Name)
		t := &kubeTask{cell: cell, job: got.Name, created: time.Now(), gpus: jobGPUs(got), deadline: podDeadline(got)}
		r.tasks = append(r.tasks, t)
		r.byJob[got.Name] = t
		r.o.Progress("%s: created Job %s/%s", r.o.tag(cell.ID), ns, got.Name)
	}
	r.left = len(r.tasks)
	return true
}

// fail records a cell that never got a Job.
func (r *kubeRun) fail(cell *Cell, reason string) {
	res := newResult(cell, *r.o)
	res.Log = ""
	res.Status, res.Reason = StatusFailed, reason
	progressResult(r.o, cell, res)
	r.recErr = errors.Join(r.recErr, r.record(cell, res))
}

// done records a task's result.
func (r *kubeRun) done(t *kubeTask, res *Result) {
	r.recErr = errors.Join(r.recErr, r.record(t.cell, res))
}

// cleanup deletes the Jobs the run created and their pods.
func (r *kubeRun) cleanup() error {
	dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var errs error
	for _, name := range r.created {
		errs = errors.Join(errs, r.c.deleteJob(dctx, name))
	}
	if len(r.created) > 0 {
		errs = errors.Join(errs, r.c.deletePods(dctx, r.sel))
		r.o.Progress("kubernetes: deleted %d Job(s) of run %s in namespace %s", len(r.created), r.id, r.c.Namespace())
	}
	return errs
}

// follow watches the Jobs until every task is done, polling the pods and
// the deadlines; when ctx ends it deletes what the run created.
func (r *kubeRun) follow(ctx context.Context, poll time.Duration) error {
	tick := time.NewTicker(poll)
	defer tick.Stop()
	// wake comes at the next pod deadline, so that a pod is stopped at its
	// deadline rather than at the first poll after it.
	wake := time.NewTimer(time.Hour)
	defer wake.Stop()
	w := r.k.watch(ctx, r.sel)
	for r.left > 0 {
		var jobs []batchv1.Job
		select {
		case <-ctx.Done():
			return errors.Join(r.recErr, r.cleanup())
		case j, ok := <-w:
			if !ok {
				w = r.k.watch(ctx, r.sel)
				continue
			}
			jobs = append(jobs, j)
		case <-tick.C:
			list, err := r.c.listJobs(ctx, r.sel)
			if err != nil {
				if ctx.Err() == nil {
					r.o.Progress("kubernetes: list Jobs: %s", oneLineErr(err))
				}
				continue
			}
			jobs = list.Items
			r.k.checkPending(ctx, r.tasks, r.sel, r.o)
		case <-wake.C:
			r.k.checkPending(ctx, r.tasks, r.sel, r.o)
		}
		for i := range jobs {
			t := r.byJob[jobs[i].Name]
			if t == nil || t.done {
				continue
			}
			end := jobEnd(&jobs[i])
			if end == nil {
				continue
			}
			t.done = true
			r.left--
			r.done(t, r.k.collect(ctx, t, &jobs[i], end, r.o))
		}
		r.endUnschedulable(ctx)
		r.endOverdue(ctx)
		wake.Reset(nextDeadline(r.tasks, poll))
	}
	return r.recErr
}

// endUnschedulable fails the cells whose pod the scheduler could not place
// past the startup timeout (they would wait for GPUs forever) and deletes
// their Jobs.
func (r *kubeRun) endUnschedulable(ctx context.Context) {
	for _, t := range r.tasks {
		if t.done || t.pending == "" || (t.never == "" && (t.waiting.IsZero() || time.Since(t.waiting) <= r.o.StartupTimeout)) {
			continue
		}
		j, err := r.c.getJob(ctx, t.job)
		if err != nil {
			continue
		}
		t.done = true
		r.left--
		res := r.k.collect(ctx, t, j, jobEnd(j), r.o)
		r.deleteJob(t.job)
		r.done(t, res)
	}
}

// endOverdue fails the cells whose pod ran past its deadline, counted from
// its start on its node, and deletes their Jobs: the kubelet stops such a
// pod where it enforces activeDeadlineSeconds; where it does not (or not
// yet), the run does.
func (r *kubeRun) endOverdue(ctx context.Context) {
	for _, t := range r.tasks {
		if t.done || t.deadline <= 0 || t.started.IsZero() || t.ended || time.Since(t.started) <= t.deadline {
			continue
		}
		j, err := r.c.getJob(ctx, t.job)
		if err != nil || jobEnd(j) != nil {
			continue // an ended Job is read when the Jobs are
		}
		t.done = true
		r.left--
		t.stopped = deadlineReason(t.pod, t.node, time.Since(t.started), t.deadline, t.started.Sub(t.created)) +
			"; Job " + t.job + " deleted"
		res := r.k.collect(ctx, t, j, nil, r.o)
		r.deleteJob(t.job)
		r.done(t, res)
	}
}

// deleteJob deletes a Job of the run and its pods, whatever happens to the
// run's context.
func (r *kubeRun) deleteJob(name string) {
	dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = r.c.deleteJob(dctx, name)
	_ = r.c.deletePods(dctx, "job-name="+name)
}

// nextDeadline is the time until the first deadline of a pod still running
// (an hour when none; a poll when one is past but its Job could not be
// read).
func nextDeadline(tasks []*kubeTask, poll time.Duration) time.Duration {
	next := time.Hour
	for _, t := range tasks {
		if t.done || t.deadline <= 0 || t.started.IsZero() || t.ended {
			continue
		}
		d := time.Until(t.started.Add(t.deadline)) + time.Millisecond
		if d <= 0 {
			d = poll
		}
		next = min(next, d)
	}
	return next
}

// podDeadline is the activeDeadlineSeconds of a Job's pod, 0 for none.
func podDeadline(j *batchv1.Job) time.Duration {
	if d := j.Spec.Template.Spec.ActiveDeadlineSeconds; d != nil && *d > 0 {
		return time.Duration(*d) * time.Second
	}
	return 0
}

// podStarted reports whether a pod has started on its node: the kubelet
// took it (status.startTime) or a container of it runs or ran.
func podStarted(p *corev1.Pod) bool {
	if p.Spec.NodeName == "" {
		return false
	}
	if p.Status.StartTime != nil || p.Status.Phase == corev1.PodRunning || podEnded(p) {
		return true
	}
	for _, cs := range containerStatuses(p) {
		if cs.State.Running != nil || cs.State.Terminated != nil {
			return true
		}
	}
	return false
}

// containerStatuses is every container's status of p, init containers
// first.
func containerStatuses(p *corev1.Pod) []corev1.ContainerStatus {
	return append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...)
}

func podEnded(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// podDeadlineExceeded is the reason the kubelet sets on a pod it stopped at
// its activeDeadlineSeconds.
const podDeadlineExceeded = "DeadlineExceeded"

// deadlineReason says that a pod ran past its deadline: how long it ran
// (counted from its start on its node) and, apart, how long it waited to be
// scheduled, which does not count.
func deadlineReason(pod, node string, ran, deadline, waited time.Duration) string {
	where := ""
	if node != "" {
		where = " on node " + node
	}
	return fmt.Sprintf("kubernetes: deadline exceeded: pod %s ran %s%s, past its deadline of %s (activeDeadlineSeconds, counted from the pod's start; the %s it waited to be scheduled does not count)",
		pod, roundDur(ran), where, deadline, roundDur(max(waited, 0)))
}

func roundDur(d time.Duration) time.Duration { return d.Round(100 * time.Millisecond) }

// kubeletDeadline is the reason of a pod the kubelet stopped at its
// deadline, from the pod's own times: its start on the node to its
// containers' last finish, and its creation to its start.
func kubeletDeadline(p *corev1.Pod, deadline time.Duration) string {
	var ran, waited time.Duration
	if st := p.Status.StartTime; st != nil {
		waited = st.Sub(p.CreationTimestamp.Time)
		var last time.Time
		for _, cs := range containerStatuses(p) {
			if term := cs.State.Terminated; term != nil && term.FinishedAt.After(last) {
				last = term.FinishedAt.Time
			}
		}
		if last.IsZero() {
			last = time.Now()
		}
		ran = last.Sub(st.Time)
	}
	if d := p.Spec.ActiveDeadlineSeconds; d != nil && *d > 0 {
		deadline = time.Duration(*d) * time.Second
	}
	r := deadlineReason(p.Name, p.Spec.NodeName, ran, deadline, waited) + "; the kubelet stopped it"
	if m := strings.TrimSpace(p.Status.Message); m != "" {
		r += ": " + m
	}
	return r
}

// watch streams the run's Jobs as they change; the channel closes when the
// watch ends (the caller watches again).
func (k *Kube) watch(ctx context.Context, sel string) <-chan batchv1.Job {
	ch := make(chan batchv1.Job)
	go func() {
		defer close(ch)
		w, err := k.client.watchJobs(ctx, sel)
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			return
		}
		defer w.Stop()
		for ev := range w.ResultChan() {
			if j, ok := ev.Object.(*batchv1.Job); ok {
				select {
				case ch <- *j:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return ch
}

// replaceStale deletes a Job of the cell's name that an earlier run of
// smpatch left (it was killed before it could), and refuses to touch one
// that smpatch did not create.
func (k *Kube) replaceStale(ctx context.Context, name string) error {
	old, err := k.client.getJob(ctx, name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if old.Labels["app.kubernetes.io/managed-by"] != "smpatch" {
		return fmt.Errorf("Job %s/%s exists and was not made by smpatch; delete or rename it", k.client.Namespace(), name)
	}
	if err := k.client.deleteJob(ctx, name); err != nil {
		return err
	}
	for i := 0; i < 120; i++ {
		if _, err := k.client.getJob(ctx, name); apierrors.IsNotFound(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	return fmt.Errorf("Job %s/%s left by an earlier run is still being deleted", k.client.Namespace(), name)
}

// checkPending notes, for each cell whose pod the scheduler cannot place,
// the scheduler's reason ("0/1 nodes are available: 1 Insufficient
// nvidia.com/gpu."), and for each pod when it was first seen started on
// its node (its deadline's clock) and whether it has ended.
func (k *Kube) checkPending(ctx context.Context, tasks []*kubeTask, sel string, o *Options) {
	pods, err := k.client.listPods(ctx, sel)
	if err != nil {
		return
	}
	byJob := map[string]*corev1.Pod{}
	for i := range pods.Items {
		p := &pods.Items[i]
		byJob[p.Labels["job-name"]] = p
	}
	for _, t := range tasks {
		p := byJob[t.job]
		if t.done || p == nil {
			continue
		}
		if t.started.IsZero() && podStarted(p) {
			t.started, t.pod, t.node = time.Now(), p.Name, p.Spec.NodeName
			o.Progress("%s: pod %s started on node %s after %s pending", o.tag(t.cell.ID), p.Name, p.Spec.NodeName, roundDur(t.started.Sub(t.created)))
		}
		t.ended = podEnded(p)
		why := ""
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable {
				why = cond.Message
			}
		}
		if why != "" && why != t.pending {
			o.Progress("%s: pod %s not scheduled: %s", o.tag(t.cell.ID), p.Name, why)
		}
		t.pending = why
	}
	// A pending pod may wait while other cells of this run hold the GPUs;
	// its clock runs only while none of them runs.
	busy := false
	for _, t := range tasks {
		if !t.done && t.pending == "" {
			busy = true
		}
	}
	for _, t := range tasks {
		switch {
		case t.done || t.pending == "":
			t.waiting = time.Time{}
		case busy:
			t.waiting = time.Time{}
		case t.waiting.IsZero():
			t.waiting = time.Now()
		}
		if t.pending != "" && t.never == "" && k.maxGPUs >= 0 && t.gpus > k.maxGPUs {
			t.never = fmt.Sprintf("no node has %d %s (the most any node has: %d)", t.gpus, gpuResource, k.maxGPUs)
		}
	}
}

// jobGPUs is what a Job's pod asks for of nvidia.com/gpu: its containers'
// limits and its sidecars'.
func jobGPUs(j *batchv1.Job) int64 {
	var n int64
	spec := j.Spec.Template.Spec
	for _, c := range append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...) {
		if q, ok := c.Resources.Limits[gpuResource]; ok {
			n += q.Value()
		}
	}
	return n
}

// nodeGPUs is the most nvidia.com/gpu any node can give, -1 when the nodes
// cannot be listed (the user may not be allowed to).
func (k *Kube) nodeGPUs(ctx context.Context) int64 {
	nodes, err := k.client.listNodes(ctx)
	if err != nil {
		return -1
	}
	var most int64
	for _, n := range nodes.Items {
		if q, ok := n.Status.Allocatable[gpuResource]; ok && q.Value() > most {
			most = q.Value()
		}
	}
	return most
}

// jobEnd is the Job's final condition (Complete or Failed), nil while it
// runs.
func jobEnd(j *batchv1.Job) *batchv1.JobCondition {
	for i := range j.Status.Conditions {
		c := &j.Status.Conditions[i]
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return c
		}
	}
	return nil
}

func setLabel(m *metav1.ObjectMeta, k, v string) {
	if m.Labels == nil {
		m.Labels = map[string]string{}
	}
	m.Labels[k] = v
}

func newRunID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return time.Now().UTC().Format("20060102t150405") + "-" + hex.EncodeToString(b[:])
}
