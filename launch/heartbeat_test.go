package launch

import (
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

// The heartbeat reports the phase, elapsed/limit and the server's last
// line (not smpatch's notes), and stops when told.
func TestHeartbeat(t *testing.T) {
	sigs, err := LoadSignatures(nil)
	if err != nil {
		t.Fatal(err)
	}
	sink := newLogSink(io.Discard, sigs)
	var mu sync.Mutex
	var beats []Beat
	o := Options{HeartbeatEvery: 5 * time.Millisecond, Heartbeat: func(b Beat) {
		mu.Lock()
		beats = append(beats, b)
		mu.Unlock()
	}}
	stop := heartbeat(o, "cell-a", "health", 30*time.Minute, sink)
	io.WriteString(sink, "Loading weights\n")
	io.WriteString(sink, "Capturing cuda graph bs=128 "+strings.Repeat("x", 300)+"\n")
	sink.Note("healthy after 1s")
	time.Sleep(60 * time.Millisecond)
	stop()
	mu.Lock()
	n := len(beats)
	last := beats[n-1]
	mu.Unlock()
	if n < 2 {
		t.Fatalf("%d beats in 60ms every 5ms", n)
	}
	if last.Cell != "cell-a" || last.Phase != "health" || last.Limit != 30*time.Minute || last.Elapsed <= 0 {
		t.Errorf("beat %+v", last)
	}
	if !strings.HasPrefix(last.LastLine, "Capturing cuda graph bs=128 xxx") || len(last.LastLine) > lastLineMax+len("…") {
		t.Errorf("last line %q", last.LastLine)
	}
	if s := (Beat{Cell: "c", Phase: "bench", Elapsed: 20 * time.Second, Limit: 20 * time.Minute, LastLine: "x"}).String(); s != "c: bench 20s/20m0s: x" {
		t.Errorf("String() = %q", s)
	}
	time.Sleep(20 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if len(beats) != n {
		t.Errorf("%d beats after stop", len(beats)-n)
	}
	// No Heartbeat: nothing runs.
	heartbeat(Options{}, "c", "health", time.Second, sink)()
}
