package launch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
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
	c := k.client
	ns := c.Namespace()
	run := newRunID()
	sel := RunLabel + "=" + run
	poll := k.Poll
	if poll <= 0 {
		poll = time.Second
	}
	var tasks []*kubeTask
	byJob := map[string]*kubeTask{}
	var created []string
	cleanup := func() error {
		dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var errs error
		for _, name := range created {
			errs = errors.Join(errs, c.deleteJob(dctx, name))
		}
		if len(created) > 0 {
			errs = errors.Join(errs, c.deletePods(dctx, sel))
			o.Progress("kubernetes: deleted %d Job(s) of run %s in namespace %s", len(created), run, ns)
		}
		return errs
	}
	k.maxGPUs = k.nodeGPUs(ctx)
	var recErr error
	for _, cell := range cells {
		if ctx.Err() != nil {
			return cleanup()
		}
		job := k.Jobs[cell.ID].DeepCopy()
		job.Namespace = ns
		setLabel(&job.ObjectMeta, RunLabel, run)
		setLabel(&job.Spec.Template.ObjectMeta, RunLabel, run)
		if err := k.replaceStale(ctx, job.Name); err != nil {
			r := newResult(cell, *o)
			r.Log = ""
			r.Status, r.Reason = StatusFailed, "kubernetes: "+oneLineErr(err)
			progressResult(o, cell, r)
			recErr = errors.Join(recErr, record(cell, r))
			continue
		}
		got, err := c.createJob(ctx, job, false)
		if err != nil {
			if ctx.Err() != nil {
				return cleanup()
			}
			r := newResult(cell, *o)
			r.Log = ""
			r.Status, r.Reason = StatusFailed, "kubernetes: create Job "+job.Name+": "+oneLineErr(err)
			progressResult(o, cell, r)
			recErr = errors.Join(recErr, record(cell, r))
			continue
		}
		created = append(created, got.Name)
		t := &kubeTask{cell: cell, job: got.Name, created: time.Now(), gpus: jobGPUs(got), deadline: podDeadline(got)}
		tasks = append(tasks, t)
		byJob[got.Name] = t
		o.Progress("%s: created Job %s/%s", o.tag(cell.ID), ns, got.Name)
	}
	left := len(tasks)
	tick := time.NewTicker(poll)
	defer tick.Stop()
	// wake comes at the next pod deadline, so that a pod is stopped at its
	// deadline rather than at the first poll after it.
	wake := time.NewTimer(time.Hour)
	defer wake.Stop()
	w := k.watch(ctx, sel)
	for left > 0 {
		var jobs []batchv1.Job
		select {
		case <-ctx.Done():
			return errors.Join(recErr, cleanup())
		case j, ok := <-w:
			if !ok {
				w = k.watch(ctx, sel)
				continue
			}
			jobs = append(jobs, j)
		case <-tick.C:
			list, err := c.listJobs(ctx, sel)
			if err != nil {
				if ctx.Err() == nil {
					o.Progress("kubernetes: list Jobs: %s", oneLineErr(err))
				}
				continue
			}
			jobs = list.Items
			k.checkPending(ctx, tasks, sel, o)
		case <-wake.C:
			k.checkPending(ctx, tasks, sel, o)
		}
		for i := range jobs {
			t := byJob[jobs[i].Name]
			if t == nil || t.done {
				continue
			}
			end := jobEnd(&jobs[i])
			if end == nil {
				continue
			}
			t.done = true
			left--
			recErr = errors.Join(recErr, record(t.cell, k.collect(ctx, t, &jobs[i], end, o)))
		}
		// A pod the scheduler cannot place past the startup timeout would
		// wait for GPUs forever: the cell fails and its Job goes.
		for _, t := range tasks {
			if t.done || t.pending == "" || (t.never == "" && (t.waiting.IsZero() || time.Since(t.waiting) <= o.StartupTimeout)) {
				continue
			}
			j, err := c.getJob(ctx, t.job)
			if err != nil {
				continue
			}
			t.done = true
			left--
			r := k.collect(ctx, t, j, jobEnd(j), o)
			dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			_ = c.deleteJob(dctx, t.job)
			_ = c.deletePods(dctx, "job-name="+t.job)
			cancel()
			recErr = errors.Join(recErr, record(t.cell, r))
		}
		// A pod past its deadline, counted from its start on its node: the
		// kubelet stops it where it enforces activeDeadlineSeconds; where
		// it does not (or not yet), the run does, and the cell fails.
		for _, t := range tasks {
			if t.done || t.deadline <= 0 || t.started.IsZero() || t.ended || time.Since(t.started) <= t.deadline {
				continue
			}
			j, err := c.getJob(ctx, t.job)
			if err != nil || jobEnd(j) != nil {
				continue // an ended Job is read when the Jobs are
			}
			t.done = true
			left--
			t.stopped = deadlineReason(t.pod, t.node, time.Since(t.started), t.deadline, t.started.Sub(t.created)) +
				"; Job " + t.job + " deleted"
			r := k.collect(ctx, t, j, nil, o)
			dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			_ = c.deleteJob(dctx, t.job)
			_ = c.deletePods(dctx, "job-name="+t.job)
			cancel()
			recErr = errors.Join(recErr, record(t.cell, r))
		}
		wake.Reset(nextDeadline(tasks, poll))
	}
	return recErr
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

// collect reads what the cell's Job left: its pods' container states and
// logs, the warning events of the Job and its pods; writes the cell's log
// and makes its result.
func (k *Kube) collect(ctx context.Context, t *kubeTask, job *batchv1.Job, end *batchv1.JobCondition, o *Options) *Result {
	cell := t.cell
	r := newResult(cell, *o)
	r.Started = t.created.UTC().Format(time.RFC3339)
	f, err := os.Create(r.Log)
	if err != nil {
		r.Status, r.Reason = StatusFailed, oneLineErr(err)
		return r
	}
	defer f.Close()
	sink := newLogSink(f, o.Signatures)
	sink.Note(fmt.Sprintf("cell %s (runner kubernetes): Job %s/%s", cell.ID, k.client.Namespace(), t.job))

	pods, _ := k.client.listPods(ctx, "job-name="+t.job)
	var items []corev1.Pod
	if pods != nil {
		items = pods.Items
		sort.Slice(items, func(i, j int) bool { return items[i].CreationTimestamp.Before(&items[j].CreationTimestamp) })
	}
	var failures []string
	var overdue *corev1.Pod // stopped by the kubelet at its deadline
	for i := range items {
		if items[i].Status.Reason == podDeadlineExceeded {
			overdue = &items[i]
		}
	}
	benchOut := tailBuffer{max: maxMetricsLog}
	benchName := ""
	if cs := job.Spec.Template.Spec.Containers; len(cs) > 0 {
		benchName = cs[0].Name
	}
	for _, p := range items {
		statuses := containerStatuses(&p)
		for _, cs := range statuses {
			state := "running"
			if term := cs.State.Terminated; term != nil {
				state = fmt.Sprintf("exit %d (%s)", term.ExitCode, term.Reason)
				if term.ExitCode != 0 {
					failures = append(failures, fmt.Sprintf("%s exited %d (%s)", cs.Name, term.ExitCode, term.Reason))
				}
			} else if wt := cs.State.Waiting; wt != nil {
				state = "waiting: " + wt.Reason
				if wt.Message != "" {
					state += ": " + wt.Message
				}
				if wt.Reason != "ContainerCreating" && wt.Reason != "PodInitializing" {
					failures = append(failures, cs.Name+" "+state)
				}
			}
			sink.Note(fmt.Sprintf("pod %s container %s: %s", p.Name, cs.Name, state))
			if cs.State.Waiting != nil {
				continue
			}
			if err := k.copyLog(ctx, sink, &benchOut, p.Name, cs.Name, cs.Name == benchName); err != nil {
				sink.Note(fmt.Sprintf("pod %s container %s: no log: %s", p.Name, cs.Name, oneLineErr(err)))
			}
		}
	}
	var warnings []string
	uids := []string{string(job.UID)}
	for _, p := range items {
		uids = append(uids, string(p.UID))
	}
	for _, uid := range uids {
		evs, err := k.client.events(ctx, uid)
		if err != nil {
			continue
		}
		sort.Slice(evs.Items, func(i, j int) bool { return eventTime(&evs.Items[i]).Before(eventTime(&evs.Items[j])) })
		for _, e := range evs.Items {
			line := fmt.Sprintf("event %s %s/%s: %s: %s", e.Type, strings.ToLower(e.InvolvedObject.Kind), e.InvolvedObject.Name, e.Reason, strings.TrimSpace(e.Message))
			sink.Note(line)
			if e.Type == corev1.EventTypeWarning {
				warnings = append(warnings, e.Reason+": "+strings.TrimSpace(e.Message))
			}
		}
	}

	switch {
	case end != nil && end.Type == batchv1.JobComplete:
		r.Seconds = end.LastTransitionTime.Sub(t.created).Seconds()
		metrics, err := captureMetrics(o.Metrics, benchOut.Bytes())
		if err != nil {
			r.Status, r.Reason = StatusFailed, err.Error()
		} else {
			r.Metrics, r.Status = metrics, StatusOK
		}
	case overdue != nil:
		r.Seconds = secondsSince(t.created)
		r.Status = StatusFailed
		r.Reason = kubeletDeadline(overdue, t.deadline)
		if end != nil {
			r.Reason += "; Job failed: " + end.Reason
		}
	case t.stopped != "":
		r.Seconds = secondsSince(t.created)
		r.Status = StatusFailed
		r.Reason = t.stopped
	case end != nil:
		r.Seconds = end.LastTransitionTime.Sub(t.created).Seconds()
		r.Status = StatusFailed
		r.Reason = "kubernetes: Job failed: " + end.Reason
		if end.Message != "" {
			r.Reason += ": " + end.Message
		}
		if len(failures) > 0 {
			r.Reason += "; " + strings.Join(failures, "; ")
		}
	default:
		r.Seconds = secondsSince(t.created)
		r.Status = StatusFailed
		if t.never != "" {
			r.Reason = "kubernetes: not schedulable: " + t.never + ": " + t.pending
		} else {
			r.Reason = fmt.Sprintf("kubernetes: not scheduled within %s: %s", o.StartupTimeout, t.pending)
		}
	}
	if r.Status == StatusFailed {
		for _, w := range warnings {
			sink.Note("warning: " + w)
		}
		sink.Note(r.Reason) // last: the table shows a failure's last line
		v := sink.Verdict(r.Log)
		if v.Known {
			r.Triage = v.Cause
		} else {
			r.Tail = lastN(v.Tail, 8)
		}
	}
	progressResult(o, cell, r)
	return r
}

// copyLog streams a container's log into the cell's log (at most
// MaxCellLog of it, and ending with a newline), and, for the bench, the
// end of it into bench.
func (k *Kube) copyLog(ctx context.Context, sink *logSink, bench *tailBuffer, pod, container string, isBench bool) error {
	w := &lastByte{w: sink}
	var dst io.Writer = w
	if isBench {
		dst = io.MultiWriter(w, bench)
	}
	n, err := k.client.logs(ctx, pod, container, dst, MaxCellLog)
	if w.last != 0 && w.last != '\n' {
		sink.Write([]byte("\n"))
	}
	if n == MaxCellLog {
		sink.Note(fmt.Sprintf("pod %s container %s: the log past %d GiB was not read", pod, container, MaxCellLog>>30))
	}
	return err
}

// lastByte passes writes on and remembers the last byte written.
type lastByte struct {
	w    io.Writer
	last byte
}

func (l *lastByte) Write(p []byte) (int, error) {
	if len(p) > 0 {
		l.last = p[len(p)-1]
	}
	return l.w.Write(p)
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	buf []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

// Bytes is the last max bytes written.
func (t *tailBuffer) Bytes() []byte {
	if len(t.buf) > t.max {
		return t.buf[len(t.buf)-t.max:]
	}
	return t.buf
}

func eventTime(e *corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
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
