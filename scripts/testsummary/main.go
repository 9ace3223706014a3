// Command testsummary reads `go test -json` on stdin and prints what a
// plain `go test` prints (a line per package, the output of failed tests),
// then one line naming the tests that were skipped and why: those that
// need a service of scripts/services.sh grouped by service, with the
// command that starts them, and the others by reason. It exits 1 when a
// test or a package failed, or when no test event was read.
//
//	go test -json ./... | go run ./scripts/testsummary
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/smpatch/smpatch/internal/words"
)

// event is one line of test2json (go doc test2json).
type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	ImportPath string
	Elapsed    float64
}

// services maps the name a skip gives a missing service ("SKIP (no
// docker): ...") to its module of scripts/services.sh.
var services = map[string]string{
	"registry": "registry", "docker": "docker", "docker CLI": "docker", "slurm": "slurm",
	"kubernetes": "kube", "chromium": "chromium",
}

var skipRe = regexp.MustCompile(`SKIP(?:PED)?:? \(no ([a-zA-Z ]+)\)|SKIPPED: no ([a-z]+)`)

type key struct{ pkg, test string }

// summary is what was read so far.
type summary struct {
	out       io.Writer
	started   time.Time
	buf       map[key][]string // output of each running test
	failed    []string
	packages  int
	pkgFailed int
	events    int
	// skips by service module, and the others by reason
	bySvc    map[string][]string
	byReason map[string][]string
}

func newSummary(out io.Writer) *summary {
	return &summary{out: out, started: time.Now(), buf: map[key][]string{},
		bySvc: map[string][]string{}, byReason: map[string][]string{}}
}

func (s *summary) event(e event) {
	s.events++
	k := key{e.Package, e.Test}
	switch {
	case e.Action == "build-output":
		fmt.Fprint(s.out, e.Output)
	case e.Action == "build-fail":
		s.pkgFailed++
	case e.Test == "" && e.Action == "output":
		// The package's own lines: "ok  pkg  1.2s", "FAIL pkg", panics.
		if o := e.Output; o != "PASS\n" && o != "FAIL\n" && !strings.HasPrefix(o, "=== ") && !strings.HasPrefix(o, "testing: warning: no tests") {
			fmt.Fprint(s.out, o)
		}
	case e.Test == "" && (e.Action == "pass" || e.Action == "fail" || e.Action == "skip"):
		s.packages++
		if e.Action == "fail" {
			s.pkgFailed++
		}
	case e.Action == "output":
		s.buf[k] = append(s.buf[k], e.Output)
	case e.Action == "fail":
		s.failed = append(s.failed, e.Package+"."+e.Test)
		fmt.Fprint(s.out, strings.Join(s.buf[k], ""))
		delete(s.buf, k)
	case e.Action == "skip":
		s.skip(e, strings.Join(s.buf[k], ""))
		delete(s.buf, k)
	case e.Action == "pass":
		delete(s.buf, k)
	}
}

// skip files a skipped test under its service or its reason.
func (s *summary) skip(e event, output string) {
	name := e.Package + "." + e.Test
	if m := skipRe.FindStringSubmatch(output); m != nil {
		what := m[1] + m[2]
		if svc, ok := services[what]; ok {
			s.bySvc[svc] = append(s.bySvc[svc], name)
			return
		}
	}
	reason := "no reason given"
	for _, l := range strings.Split(output, "\n") {
		l = strings.TrimSpace(l)
		if i := strings.Index(l, ".go:"); i > 0 && !strings.HasPrefix(l, "---") {
			if _, after, ok := strings.Cut(l[i:], ": "); ok {
				reason = after
				break
			}
		}
	}
	// A helper that is a subprocess of another test is no skipped work.
	if strings.HasPrefix(reason, "run by ") {
		return
	}
	if len(reason) > 60 {
		reason = reason[:57] + "..."
	}
	s.byReason[reason] = append(s.byReason[reason], name)
}

// skippedLine is the last line: what was skipped and why.
func (s *summary) skippedLine() string {
	n := 0
	var svcs []string
	for svc, tests := range s.bySvc {
		n += len(tests)
		svcs = append(svcs, svc)
	}
	slices.SortFunc(svcs, func(a, b string) int {
		if d := len(s.bySvc[b]) - len(s.bySvc[a]); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	var parts []string
	if n > 0 {
		var names []string
		for _, svc := range svcs {
			names = append(names, fmt.Sprintf("%s %d", svcName(svc), len(s.bySvc[svc])))
		}
		parts = append(parts, fmt.Sprintf("%s need %s (scripts/services.sh up %s)", words.Count(n, "test", "tests"), strings.Join(names, ", "), strings.Join(svcs, " ")))
	}
	var reasons []string
	for r := range s.byReason {
		reasons = append(reasons, r)
	}
	slices.SortFunc(reasons, func(a, b string) int {
		if d := len(s.byReason[b]) - len(s.byReason[a]); d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	for _, r := range reasons {
		parts = append(parts, fmt.Sprintf("%s: %s", words.Count(len(s.byReason[r]), "test", "tests"), r))
	}
	if len(parts) == 0 {
		return "skipped: none"
	}
	return "skipped: " + strings.Join(parts, "; ")
}

func svcName(svc string) string {
	if svc == "kube" {
		return "kubernetes"
	}
	return svc
}

// read reads test2json lines from r; other lines (go's own messages)
// are passed through.
func (s *summary) read(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			fmt.Fprintf(s.out, "%s\n", line)
			continue
		}
		s.event(e)
	}
	return sc.Err()
}

func (s *summary) finish() int {
	d := time.Since(s.started).Round(time.Second)
	code := 0
	switch {
	case s.events == 0:
		fmt.Fprintln(s.out, "testsummary: no test events read (pipe `go test -json` into it)")
		return 1
	case len(s.failed) > 0 || s.pkgFailed > 0:
		fmt.Fprintf(s.out, "FAIL: %s in %s failed, in %s: %s\n", words.Count(len(s.failed), "test", "tests"),
			words.Count(s.pkgFailed, "package", "packages"), d, strings.Join(s.failed, " "))
		code = 1
	default:
		fmt.Fprintf(s.out, "all tests passed: %s in %s\n", words.Count(s.packages, "package", "packages"), d)
	}
	fmt.Fprintln(s.out, s.skippedLine())
	return code
}

func main() {
	s := newSummary(os.Stdout)
	if err := s.read(os.Stdin); err != nil {
		fmt.Fprintf(os.Stderr, "testsummary: reading stdin: %v\n", err)
		os.Exit(1)
	}
	os.Exit(s.finish())
}
