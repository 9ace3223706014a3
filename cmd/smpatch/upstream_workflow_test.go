package main

import (
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/smpatch/smpatch/upstream"
)

// workflow is the part of GitHub's workflow schema .github/workflows/upstream.yml uses;
// strict decoding rejects any key outside it (a typo such as "run-on").
type workflow struct {
	Name string `json:"name"`
	On   struct {
		Schedule         []struct{ Cron string } `json:"schedule"`
		PullRequest      any                     `json:"pull_request"`
		WorkflowDispatch any                     `json:"workflow_dispatch"`
	} `json:"on"`
	Permissions map[string]string `json:"permissions"`
	Jobs        map[string]struct {
		RunsOn         string `json:"runs-on"`
		TimeoutMinutes int    `json:"timeout-minutes"`
		Steps          []struct {
			Name string            `json:"name"`
			Uses string            `json:"uses"`
			Run  string            `json:"run"`
			If   string            `json:"if"`
			With map[string]string `json:"with"`
		} `json:"steps"`
	} `json:"jobs"`
}

// TestUpstreamWorkflow parses the workflow strictly and checks that every
// smpatch command line it runs names commands and flags that exist.
func TestUpstreamWorkflow(t *testing.T) {
	data, err := os.ReadFile("../../.github/workflows/upstream.yml")
	if err != nil {
		t.Fatal(err)
	}
	var wf workflow
	if err := yaml.UnmarshalStrict(data, &wf); err != nil {
		t.Fatalf("upstream.yml: %v", err)
	}
	var keys struct {
		On map[string]any `json:"on"`
	}
	if err := yaml.Unmarshal(data, &keys); err != nil {
		t.Fatal(err)
	}
	if _, ok := keys.On["pull_request"]; !ok || len(wf.On.Schedule) == 0 || wf.On.Schedule[0].Cron == "" {
		t.Fatalf("upstream.yml must run on a schedule and on pull_request: %v", keys.On)
	}
	var lines []string
	for name, job := range wf.Jobs {
		if job.RunsOn == "" || len(job.Steps) == 0 {
			t.Errorf("job %s: no runs-on or no steps", name)
		}
		for _, s := range job.Steps {
			if (s.Uses == "") == (s.Run == "") {
				t.Errorf("job %s step %q: exactly one of uses and run", name, s.Name)
			}
			for _, l := range strings.Split(s.Run, "\n") {
				if args := smpatchArgs(l); args != nil {
					lines = append(lines, l)
					if err := checkCommandLine(args); err != nil {
						t.Errorf("job %s: %q: %v", name, l, err)
					}
				}
			}
		}
	}
	want := "smpatch check --upstream sglang@main --upstream flashinfer@main --format github"
	if !slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, want) }) {
		t.Errorf("no step runs %q; smpatch lines: %q", want, lines)
	}
}

// smpatchArgs returns the arguments of a shell line whose command is
// smpatch (after any VAR=value assignments), up to a redirection, pipe or
// list operator; nil when the line runs something else.
func smpatchArgs(line string) []string {
	f := strings.Fields(line)
	i := 0
	for i < len(f) && strings.Contains(f[i], "=") && !strings.HasPrefix(f[i], "-") {
		i++
	}
	if i == len(f) || (f[i] != "smpatch" && !strings.HasSuffix(f[i], "/smpatch")) {
		return nil
	}
	args := []string{}
	for _, a := range f[i+1:] {
		if strings.ContainsAny(a[:1], "|&;>") {
			break
		}
		args = append(args, a)
	}
	return args
}

// checkCommandLine resolves args in the real command tree and parses its
// flags; values of --format and --upstream are checked too.
func checkCommandLine(args []string) error {
	root := newRootCmd(&Globals{}, io.Discard, io.Discard)
	c, rest, err := root.Find(args)
	if err != nil {
		return err
	}
	if c == root {
		return errString("no smpatch command named")
	}
	if err := c.ParseFlags(rest); err != nil {
		return err
	}
	if f := c.Flags().Lookup("format"); f != nil && !slices.Contains(upstream.Formats, f.Value.String()) {
		return errString("unknown --format " + f.Value.String())
	}
	if vs, err := c.Flags().GetStringArray("upstream"); err == nil {
		for _, v := range vs {
			if _, err := upstream.ParseTarget(v); err != nil {
				return err
			}
		}
	}
	return nil
}

type errString string

func (e errString) Error() string { return string(e) }

func TestCheckCommandLine(t *testing.T) {
	for _, tc := range []struct {
		line string
		ok   bool
	}{
		{"./bin/smpatch check --upstream sglang@main --format github", true},
		{"smpatch check --upstream sglang@main --format junit > x.xml || true", true},
		{"smpatch checkout sglang@v0.5.6 --into dir", true},
		{"smpatch chek --upstream sglang@main", false},
		{"smpatch check --upstrem sglang@main", false},
		{"smpatch check --format xml", false},
		{"smpatch check --upstream vllm@main", false},
		{"smpatch", false},
	} {
		args := smpatchArgs(tc.line)
		if args == nil {
			t.Fatalf("%q: not recognised as an smpatch line", tc.line)
		}
		if err := checkCommandLine(args); (err == nil) != tc.ok {
			t.Errorf("%q: err = %v, want ok=%v", tc.line, err, tc.ok)
		}
	}
	for _, l := range []string{"CGO_ENABLED=0 go build -o bin/smpatch ./cmd/smpatch", "echo smpatch"} {
		if smpatchArgs(l) != nil {
			t.Errorf("%q taken for an smpatch invocation", l)
		}
	}
}
