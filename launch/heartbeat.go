package launch

import (
	"strings"
	"time"
)

// A heartbeat while a cell waits for health or benchmarks: minutes can
// pass without a line otherwise.

// DefaultHeartbeatEvery is how often Options.Heartbeat is called.
const DefaultHeartbeatEvery = 10 * time.Second

// Beat is one heartbeat: the cell, the phase ("health" or "bench"), the
// time spent in it and its limit, and the server's last log line so far.
type Beat struct {
	Cell     string
	Phase    string
	Elapsed  time.Duration
	Limit    time.Duration
	LastLine string
}

// String is "CELL: health 20s/30m0s: LAST LINE".
func (b Beat) String() string {
	s := b.Cell + ": " + b.Phase + " " + b.Elapsed.Round(time.Second).String() + "/" + b.Limit.String()
	if b.LastLine != "" {
		s += ": " + b.LastLine
	}
	return s
}

// heartbeat calls o.Heartbeat every o.HeartbeatEvery until the returned
// stop is called; without o.Heartbeat it does nothing.
func heartbeat(o Options, cell, phase string, limit time.Duration, sink *logSink) (stop func()) {
	if o.Heartbeat == nil {
		return func() {}
	}
	every := o.HeartbeatEvery
	if every <= 0 {
		every = DefaultHeartbeatEvery
	}
	start := time.Now()
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				o.Heartbeat(Beat{Cell: cell, Phase: phase, Elapsed: time.Since(start), Limit: limit, LastLine: sink.LastLine()})
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

// lastLineMax bounds the last line kept for the heartbeat.
const lastLineMax = 160

func shortLine(l string) string {
	l = strings.TrimSpace(l)
	if len(l) > lastLineMax {
		l = l[:lastLineMax] + "…"
	}
	return l
}
