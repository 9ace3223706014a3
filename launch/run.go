package launch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/smpatch/smpatch/internal/bounded"
	"github.com/smpatch/smpatch/internal/shell"
)

// Run runs the cells and writes the results into o.Out. Cells run in order,
// o.Concurrency at a time; consecutive cells that share a patch set run
// between one Apply and one Revert of that set, so the tree is patched as
// each cell expects and ends as it began. A cancelled ctx stops the cells
// running now, reverts, writes what finished and returns ctx's error; a cell
// that was interrupted is not recorded, so --resume runs it again.
//
// With o.Resume, cells results.jsonl has a result for are kept, except those
// o.Only names: they run again (the way to redo one cell of a finished run).
//
// The error is for the run itself (bad options, I/O, a revert that failed);
// failed cells are counted in the Summary.
func Run(ctx context.Context, cells []*Cell, o Options) (*Summary, error) {
	o.defaults()
	if err := checkCells(ctx, cells, o); err != nil {
		return nil, err
	}
	od, prev, err := openResults(o)
	if err != nil {
		return nil, err
	}
	defer od.close()
	o.out = od

	s := &Summary{Name: o.Name, Runner: o.Runner.Kind(), Baseline: o.Baseline, Meta: startMeta(&o, cells)}
	if o.Repeat > 1 {
		s.Repeat = o.Repeat
	}
	for _, m := range o.Metrics {
		s.Metrics = append(s.Metrics, m.Name)
	}
	only := map[string]bool{}
	for _, id := range o.Only {
		only[id] = true
	}
	var todo []*Cell
	index := map[string]int{}
	for i, c := range cells {
		r := &Result{ID: c.ID, Values: c.Values, Patches: nonNil(c.Patches), Warnings: c.Warnings, Launch: shell.Join(c.Command)}
		switch p := prev[c.ID]; {
		case c.Pruned != "":
			r.Status, r.Reason = StatusPruned, c.Pruned
		case only[c.ID]: // asked for by name: runs even if it finished before
			todo = append(todo, c)
		case p != nil && p.Finished() && len(p.Samples) >= o.Repeat*btoi(o.Repeat > 1):
			r = p
			r.Resumed = true
		case len(only) > 0:
			r.Status, r.Reason = StatusSkipped, "not selected by --only"
		default:
			todo = append(todo, c)
		}
		s.Results = append(s.Results, r)
		index[c.ID] = i
	}

	o.pos = map[string]int{}
	for i, c := range todo {
		o.pos[c.ID] = i + 1
	}

	var mu sync.Mutex // guards s.Results entries and the jsonl file
	record := func(c *Cell, r *Result) error {
		mu.Lock()
		defer mu.Unlock()
		if c.repeat > 0 {
			// The cell's result so far, all its samples: the last line
			// of results.jsonl for the cell holds them all.
			r = addSample(s.Results[index[c.ID]], r, c.repeat)
		}
		s.Results[index[c.ID]] = r
		return appendJSONL(od, r)
	}
	for _, c := range todo {
		if o.Repeat > 1 {
			s.Results[index[c.ID]] = &Result{ID: c.ID, Values: c.Values, Patches: nonNil(c.Patches), Warnings: c.Warnings, Launch: shell.Join(c.Command)}
		}
	}

	var runErr error
	// Repeats go round-robin: every cell once, then every cell again; a
	// scheduler (BatchRunner) gets each round as one batch.
	batch, isBatch := o.Runner.(BatchRunner)
run:
	for k := 1; k <= max(o.Repeat, 1); k++ {
		if isBatch {
			if ctx.Err() != nil || len(todo) == 0 {
				break run
			}
			cells := make([]*Cell, len(todo))
			for i, c := range todo {
				cells[i] = forRepeat(c, k, o.Repeat)
			}
			if err := batch.RunBatch(ctx, cells, &o, record); err != nil {
				runErr = err
				break run
			}
			continue
		}
		for _, grp := range groupByPatches(todo) {
			if ctx.Err() != nil {
				break run
			}
			cells := make([]*Cell, len(grp))
			for i, c := range grp {
				cells[i] = forRepeat(c, k, o.Repeat)
			}
			if err := runGroupOfCells(ctx, cells, o, record); err != nil {
				runErr = err
				break run
			}
		}
	}
	if ctx.Err() != nil {
		s.Interrupted = true
		for _, r := range s.Results {
			if r.Status == "" {
				r.Status, r.Reason = StatusSkipped, "interrupted"
			}
		}
	}
	for _, r := range s.Results {
		if r.Status == "" { // not reached after an error
			r.Status, r.Reason = StatusSkipped, "not run"
		}
	}
	s.count()
	s.computeDeltas()
	s.Meta.Finished = time.Now().UTC().Format(time.RFC3339)
	if err := s.writeFiles(od.root); err != nil && runErr == nil {
		runErr = err
	}
	if o.StepSummary != "" {
		if err := s.AppendStepSummary(o.StepSummary); err != nil {
			warn := o.Warn
			if warn == nil {
				warn = func(format string, args ...any) { fmt.Fprintf(os.Stderr, "smpatch: warning: "+format+"\n", args...) }
			}
			warn("%v", err)
		}
	}
	if runErr == nil && ctx.Err() != nil {
		runErr = ctx.Err()
	}
	return s, runErr
}

// openResults checks the results directory, reads what --resume keeps
// before writing anything (a results file that does not parse leaves the
// directory as it was), then holds the directory for the run and starts
// results.jsonl.
func openResults(o Options) (*outDir, map[string]*Result, error) {
	if err := checkOut(o.Out); err != nil {
		return nil, nil, err
	}
	prev := map[string]*Result{}
	if o.Resume {
		var err error
		if prev, err = readJSONL(nil, filepath.Join(o.Out, ResultsJSONL)); err != nil {
			return nil, nil, err
		}
	}
	od, err := holdOut(o.Out)
	if err != nil {
		return nil, nil, err
	}
	if err = od.mkdirAll(LogsDir); err == nil {
		if o.Resume {
			err = repairTail(od)
		} else {
			err = od.writeFile(ResultsJSONL, nil, 0o644)
		}
	}
	if err != nil {
		od.close()
		return nil, nil, err
	}
	return od, prev, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// checkCells refuses what cannot run, before anything starts.
func checkCells(ctx context.Context, cells []*Cell, o Options) error {
	if o.Out == "" {
		return errors.New("no results directory")
	}
	ids := map[string]bool{}
	for _, c := range cells {
		if ids[c.ID] {
			return fmt.Errorf("cell id %q appears twice", c.ID)
		}
		ids[c.ID] = true
		if c.ID == "" || strings.ContainsAny(c.ID, `/\`) || c.ID == "." || c.ID == ".." {
			return fmt.Errorf("cell id %q cannot name a log file", c.ID)
		}
		if c.Health != "" {
			if u, err := url.Parse(c.Health); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return fmt.Errorf("cell %s: health %q is not an http(s) URL", c.ID, c.Health)
			}
		}
		if c.Pruned == "" && len(c.Command) == 0 {
			return fmt.Errorf("cell %s: no command to run", c.ID)
		}
	}
	for _, id := range o.Only {
		if !ids[id] {
			return fmt.Errorf("--only %s: no such cell%s", id, didYouMean(id, cells))
		}
	}
	if o.Baseline != "" && !ids[o.Baseline] {
		return fmt.Errorf("baseline %s: no such cell", o.Baseline)
	}
	if o.Runner.Kind() == RunnerLocal && o.Patcher == nil {
		for _, c := range cells {
			if c.Pruned == "" && len(c.Patches) > 0 && (len(o.Only) == 0 || contains(o.Only, c.ID)) {
				return fmt.Errorf("cell %s has patches (%s) but there is no tree to apply them to", c.ID, strings.Join(c.Patches, ", "))
			}
		}
	}
	return o.Runner.Check(ctx)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// didYouMean suggests the cell ids that contain id or that id contains.
func didYouMean(id string, cells []*Cell) string {
	var close []string
	for _, c := range cells {
		if strings.Contains(c.ID, id) || strings.Contains(id, c.ID) {
			close = append(close, c.ID)
		}
	}
	if len(close) == 0 || len(close) > 5 {
		return ""
	}
	return " (did you mean " + strings.Join(close, ", ") + "?)"
}

// groupByPatches splits the cells, in order, into runs of consecutive cells
// with the same patch set: each run is applied once and reverted once, and
// the cells still run in the matrix's order.
func groupByPatches(cells []*Cell) [][]*Cell {
	var groups [][]*Cell
	prev := ""
	for i, c := range cells {
		k := strings.Join(c.Patches, "\x00")
		if i == 0 || k != prev {
			groups = append(groups, nil)
		}
		groups[len(groups)-1] = append(groups[len(groups)-1], c)
		prev = k
	}
	return groups
}

// runGroupOfCells applies the group's patches (local runner), runs its
// cells and reverts. Only a failed revert is an error: the tree did not
// end as it began.
func runGroupOfCells(ctx context.Context, cells []*Cell, o Options, record func(*Cell, *Result) error) error {
	names := cells[0].Patches
	patch := o.Runner.Kind() == RunnerLocal && len(names) > 0
	if patch {
		o.Progress("apply %s", strings.Join(names, ", "))
		if err := o.Patcher.Apply(ctx, cells[0].ID, names); err != nil {
			// Apply is all or nothing, but revert anyway: it is a no-op for
			// patches that are not applied.
			rerr := revert(o, names)
			if ctx.Err() != nil {
				return rerr
			}
			for _, c := range cells {
				r := newResult(c, o)
				r.Status = StatusFailed
				r.Reason = "patch: " + oneLineErr(err)
				r.Log = "" // the cell never started: it has no log
				r.Triage = &Match{Label: "patch-not-applied", Fatal: true, Meaning: "the cell's patches do not apply to this tree", Try: "smpatch apply --dry-run " + strings.Join(names, " ")}
				o.Progress("%s: failed: %s", o.tag(c.ID), r.Reason)
				if err := record(c, r); err != nil {
					return errors.Join(err, rerr)
				}
			}
			return rerr
		}
	}
	var recErr error
	var errMu sync.Mutex
	var pool *gpuPool
	if len(o.GPUs) > 0 {
		pool = newGPUPool(o.GPUs)
	}
	sem := make(chan struct{}, o.Concurrency)
	var wg sync.WaitGroup
	for _, c := range cells {
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		if ctx.Err() != nil { // interrupted while this cell waited for a slot
			<-sem
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			var r *Result
			if cc, gpus, err := lendGPUs(ctx, pool, c); err != nil {
				if ctx.Err() != nil {
					return
				}
				r = newResult(c, o)
				r.Status, r.Reason = StatusFailed, "gpus: "+err.Error()
				o.Progress("%s: failed: %s", o.tag(c.ID), r.Reason)
			} else {
				r = runCell(ctx, cc, o)
				if pool != nil && gpus != nil {
					pool.release(gpus)
				}
			}
			if r == nil { // interrupted: not recorded
				return
			}
			if c.repeat > 0 {
				o.Progress("%s: repeat %d of %d done", o.tag(c.ID), c.repeat, o.Repeat)
			}
			if err := record(c, r); err != nil {
				errMu.Lock()
				recErr = errors.Join(recErr, err)
				errMu.Unlock()
			}
		}()
	}
	wg.Wait()
	if patch {
		if err := revert(o, names); err != nil {
			return errors.Join(recErr, err)
		}
	}
	return recErr
}

// lendGPUs returns the cell to run: with a pool, a copy that uses TP GPUs
// from it (the caller releases them), unless the cell picks its own.
func lendGPUs(ctx context.Context, pool *gpuPool, c *Cell) (*Cell, []string, error) {
	if pool == nil {
		return c, nil, nil
	}
	if _, own := c.Env["CUDA_VISIBLE_DEVICES"]; own {
		return c, nil, nil
	}
	gpus, err := pool.acquire(ctx, max(c.TP, 1))
	if err != nil {
		return nil, nil, err
	}
	cc := *c
	cc.gpus = gpus
	return &cc, gpus, nil
}

// revert runs even when the run's context is cancelled: the tree must end as
// it began.
func revert(o Options, names []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	o.Progress("revert %s", strings.Join(names, ", "))
	if err := o.Patcher.Revert(ctx, names); err != nil {
		return fmt.Errorf("revert %s: %w", strings.Join(names, ", "), err)
	}
	return nil
}

func oneLineErr(err error) string {
	s := strings.TrimSpace(err.Error())
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

func newResult(c *Cell, o Options) *Result {
	return &Result{ID: c.ID, Values: c.Values, Patches: nonNil(c.Patches), Runner: o.Runner.Kind(),
		Warnings: c.Warnings, Log: repeatLogPath(o.Out, c), Launch: shell.Join(c.Command)}
}

// writeCellFiles writes a cell's rendered launch files into the results
// directory's cells/<id>/ and returns the path of its run.sh.
func writeCellFiles(od *outDir, id string, files map[string][]byte) (string, error) {
	dir := CellsDir + "/" + id
	if err := od.mkdirAll(dir); err != nil {
		return "", err
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		mode := os.FileMode(0o644)
		if strings.HasSuffix(name, ".sh") {
			mode = 0o755
		}
		if err := od.writeFile(dir+"/"+name, files[name], mode); err != nil {
			return "", err
		}
	}
	abs, err := filepath.Abs(od.name(dir + "/run.sh"))
	if err != nil {
		return "", err
	}
	return abs, nil
}

// runCell runs one cell to its end. It returns nil when ctx was cancelled
// before the cell finished.
func runCell(ctx context.Context, c *Cell, o Options) *Result {
	r := newResult(c, o)
	start := time.Now()
	r.Started = start.UTC().Format(time.RFC3339)
	o.Progress("%s: start", o.tag(c.ID))

	f, err := o.out.createLog(r.Log)
	if err != nil {
		r.Status, r.Reason = StatusFailed, oneLineErr(err)
		return r
	}
	defer f.Close()
	sink := newLogSink(f, o.Signatures)
	sink.Note(fmt.Sprintf("cell %s (runner %s): %s", c.ID, o.Runner.Kind(), shell.Join(c.Command)))
	if o.Runner.Kind() == RunnerLocal && c.Files["run.sh"] != nil {
		script, err := writeCellFiles(o.out, c.ID, c.Files)
		if err != nil {
			r.Status, r.Reason = StatusFailed, oneLineErr(err)
			return r
		}
		c.script = script
		sink.Note("started through " + script)
	}

	failed := func(reason string) {
		r.Status, r.Reason = StatusFailed, reason
	}
	var srv Server
	if c.Health != "" && probe(ctx, &http.Client{Timeout: 2 * time.Second}, c.Health) {
		// Another server (one an earlier run left behind) holds the port:
		// its health and its benchmark would pass for this cell's.
		err = fmt.Errorf("%s already answers before the cell's server started: another server holds its port; stop it", c.Health)
	} else {
		srv, err = o.Runner.Start(ctx, c, sink)
	}
	if err != nil {
		failed("start: " + oneLineErr(err))
		sink.Note(r.Reason)
	} else {
		interrupted := serveCell(ctx, c, o, srv, sink, r, start, failed)
		if err := srv.Stop(o.StopGrace); err != nil {
			if r.Status == StatusOK {
				failed("stop: " + oneLineErr(err))
			} else {
				sink.Note("stop: " + oneLineErr(err))
			}
		}
		if interrupted {
			sink.Note("interrupted")
			o.Progress("%s: interrupted", o.tag(c.ID))
			return nil
		}
		// After Stop: the server's last output is in the log by now.
		if r.Status == StatusFailed {
			sink.Note(r.Reason)
		}
	}
	r.Seconds = secondsSince(start)
	v := sink.Verdict(r.Log)
	if r.Status == StatusFailed {
		if v.Known {
			r.Triage = v.Cause
		} else {
			r.Tail = lastN(v.Tail, 8)
			r.LastLine = v.LastLine
		}
	}
	if r.Status == StatusOK {
		o.Progress("%s: ok%s", o.tag(c.ID), metricsText(r.Metrics))
	} else {
		label := "unknown"
		if r.Triage != nil {
			label = r.Triage.Label
		}
		o.Progress("%s: failed: %s [%s]", o.tag(c.ID), r.Reason, label)
	}
	return r
}

func lastN(s []string, n int) []string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func metricsText(m map[string]float64) string {
	keys := slices.Sorted(maps.Keys(m))
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(" " + k + "=" + formatFloat(m[k]))
	}
	return b.String()
}

// serveCell waits for the server, benchmarks it and fills r. It reports
// whether ctx was cancelled.
func serveCell(ctx context.Context, c *Cell, o Options, srv Server, sink *logSink, r *Result, start time.Time, failed func(string)) (interrupted bool) {
	if c.Health == "" {
		return runJob(ctx, c, o, srv, sink, r, failed)
	}
	stopBeat := heartbeat(o, o.tag(c.ID), "health", o.StartupTimeout, sink)
	err := waitHealthy(ctx, c.Health, o, srv, sink)
	stopBeat()
	switch {
	case ctx.Err() != nil:
		return true
	case err != nil:
		failed(err.Error())
		return false
	}
	hs := secondsSince(start)
	r.HealthySeconds = &hs
	sink.Note(fmt.Sprintf("healthy after %.1fs", hs))
	if len(c.Bench) == 0 {
		r.Status = StatusOK
		return false
	}
	sink.Note("bench: " + strings.Join(c.Bench, " "))
	var out bytes.Buffer
	bctx, cancel := context.WithTimeout(ctx, o.BenchTimeout)
	stopBeat = heartbeat(o, o.tag(c.ID), "bench", o.BenchTimeout, sink)
	err = srv.Exec(bctx, c.Bench, &teeWriter{sink, &out})
	stopBeat()
	timedOut := bctx.Err() == context.DeadlineExceeded
	cancel()
	switch {
	case ctx.Err() != nil:
		return true
	case timedOut:
		failed(fmt.Sprintf("bench did not finish within %s", o.BenchTimeout))
	case err != nil:
		failed("bench: " + oneLineErr(err))
	}
	if r.Status == StatusFailed {
		return false
	}
	metrics, err := captureMetrics(o.Metrics, out.Bytes())
	if err != nil {
		failed(err.Error())
		return false
	}
	r.Metrics, r.Status = metrics, StatusOK
	return false
}

// runJob waits for a command that is its own benchmark (no health URL).
func runJob(ctx context.Context, c *Cell, o Options, srv Server, sink *logSink, r *Result, failed func(string)) (interrupted bool) {
	timer := time.NewTimer(o.StartupTimeout + o.BenchTimeout)
	defer timer.Stop()
	stopBeat := heartbeat(o, o.tag(c.ID), "run", o.StartupTimeout+o.BenchTimeout, sink)
	defer stopBeat()
	select {
	case <-ctx.Done():
		return true
	case <-timer.C:
		failed(fmt.Sprintf("did not finish within %s", o.StartupTimeout+o.BenchTimeout))
	case <-sink.Fatal():
		failed("fatal log line")
	case <-srv.Exited():
		if err := srv.ExitErr(); err != nil {
			failed("exited: " + oneLineErr(err))
		}
	}
	if r.Status == StatusFailed {
		return false
	}
	// Stop ends workers left behind and waits for the output still in flight.
	if err := srv.Stop(o.StopGrace); err != nil {
		failed("stop: " + oneLineErr(err))
		return false
	}
	data, err := readTail(r.Log, maxMetricsLog)
	if err != nil {
		failed(oneLineErr(err))
		return false
	}
	metrics, err := captureMetrics(o.Metrics, data)
	if err != nil {
		failed(err.Error())
		return false
	}
	r.Metrics, r.Status = metrics, StatusOK
	return false
}

type teeWriter struct {
	a, b interface{ Write([]byte) (int, error) }
}

func (t *teeWriter) Write(p []byte) (int, error) {
	t.b.Write(p)
	return t.a.Write(p)
}

// waitHealthy polls url until it answers 200. The server exiting, a fatal
// line in its log, the timeout or ctx end the wait at once.
func waitHealthy(ctx context.Context, url string, o Options, srv Server, sink *logSink) error {
	client := &http.Client{Timeout: max(o.HealthInterval, 2*time.Second)}
	deadline := time.NewTimer(o.StartupTimeout)
	defer deadline.Stop()
	// Probe often at first (a small server is up at once), then every
	// HealthInterval.
	interval := min(50*time.Millisecond, o.HealthInterval)
	for {
		if probe(ctx, client, url) {
			return nil
		}
		wait := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			wait.Stop()
			return ctx.Err()
		case <-srv.Exited():
			wait.Stop()
			if err := srv.ExitErr(); err != nil {
				return fmt.Errorf("server exited before it was healthy: %s", oneLineErr(err))
			}
			return errors.New("server exited with status 0 before it was healthy")
		case <-sink.Fatal():
			wait.Stop()
			return errors.New("fatal log line before the server was healthy")
		case <-deadline.C:
			wait.Stop()
			return fmt.Errorf("not healthy after %s (%s)", o.StartupTimeout, url)
		case <-wait.C:
		}
		interval = min(interval*2, o.HealthInterval)
	}
}

func probe(ctx context.Context, client *http.Client, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// captureMetrics reads every metric from out: the last match of its regex,
// first group (or the whole match without a group), as a number.
// maxMetricsLog is how much of the end of a cell's log the metrics are
// read from: the bench's output comes last and the last match wins, while a
// server's own log before it may run to gigabytes.
const maxMetricsLog = 64 << 20

// readTail reads at most the last max bytes of the regular file path.
func readTail(path string, max int64) ([]byte, error) {
	f, fi, err := bounded.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return tailOf(f, fi.Size(), max, path)
}

// readTailFS is readTail of name in fsys.
func readTailFS(fsys fs.FS, name string, max int64) ([]byte, error) {
	f, err := openRegular(fsys, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	return tailOf(f, fi.Size(), max, name)
}

func tailOf(f fs.File, size, max int64, what string) ([]byte, error) {
	if off := size - max; off > 0 {
		s, ok := f.(io.Seeker)
		if !ok {
			return nil, fmt.Errorf("%s: cannot seek", what)
		}
		if _, err := s.Seek(off, io.SeekStart); err != nil {
			return nil, err
		}
	}
	return bounded.ReadAll(f, int(max), what)
}

// openRegular opens name in fsys when it is a regular file (a named pipe
// there would block the open; fs.FS cannot open without blocking, so it
// looks first).
func openRegular(fsys fs.FS, name string) (fs.File, error) {
	fi, err := fs.Stat(fsys, name)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file (%s): not read", name, bounded.Kind(fi.Mode()))
	}
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: not a regular file: not read", name)
	}
	return f, nil
}

func captureMetrics(metrics []Metric, out []byte) (map[string]float64, error) {
	if len(metrics) == 0 {
		return nil, nil
	}
	got := map[string]float64{}
	var missing []string
	for _, m := range metrics {
		all := m.Re.FindAllSubmatch(out, -1)
		if len(all) == 0 {
			missing = append(missing, m.Name)
			continue
		}
		last := all[len(all)-1]
		text := last[0]
		if len(last) > 1 {
			text = last[1]
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(string(text)), 64)
		if err != nil {
			return nil, fmt.Errorf("metric %s: %q is not a number", m.Name, text)
		}
		got[m.Name] = v
	}
	if len(missing) > 0 {
		return got, fmt.Errorf("metric %s not found in the bench output", strings.Join(missing, ", "))
	}
	return got, nil
}
