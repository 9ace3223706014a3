package launch

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// What a cell's Job left: its pods' states, logs and events, read into the
// cell's log and result.

// collect reads what the cell's Job left: its pods' container states and
// logs, the warning events of the Job and its pods; writes the cell's log
// and makes its result.
func (k *Kube) collect(ctx context.Context, t *kubeTask, job *batchv1.Job, end *batchv1.JobCondition, o *Options) *Result {
	cell := t.cell
	r := newResult(cell, *o)
	r.Started = t.created.UTC().Format(time.RFC3339)
	f, err := o.out.createLog(r.Log)
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
