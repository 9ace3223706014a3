package main

import (
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/smpatch/smpatch/upstream"
)

// workflow is the part of GitHub's workflow schema the workflows of
// .github/workflows and examples/catalog-ci use; strict decoding rejects
// any key outside it (a typo such as "run-on").
type workflow struct {
	Name string `json:"name"`
	On   struct {
		Schedule         []struct{ Cron string } `json:"schedule"`
		PullRequest      any                     `json:"pull_request"`
		WorkflowDispatch any                     `json:"workflow_dispatch"`
		WorkflowCall     *struct {
			Inputs map[string]struct {
				Description string `json:"description"`
				Type        string `json:"type"`
				Default     any    `json:"default"`
				Required    bool   `json:"required"`
			} `json:"inputs"`
		} `json:"workflow_call"`
	} `json:"on"`
	Permissions map[string]string `json:"permissions"`
	Jobs        map[string]struct {
		RunsOn         string         `json:"runs-on"`
		TimeoutMinutes int            `json:"timeout-minutes"`
		Uses           string         `json:"uses"` // a reusable workflow
		With           map[string]any `json:"with"`
		Steps          []struct {
			Name string            `json:"name"`
			Uses string            `json:"uses"`
			Run  string            `json:"run"`
			If   string            `json:"if"`
			With map[string]string `json:"with"`
			Env  map[string]string `json:"env"`
		} `json:"steps"`
	} `json:"jobs"`
}

// readWorkflow decodes a workflow file strictly.
func readWorkflow(t *testing.T, path string) (workflow, []byte) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var wf workflow
	if err := yaml.UnmarshalStrict(data, &wf); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return wf, data
}

// TestUpstreamWorkflow parses the workflow strictly and checks that every
// smpatch command line it runs names commands and flags that exist.
func TestUpstreamWorkflow(t *testing.T) {
	wf, data := readWorkflow(t, "../../.github/workflows/upstream.yml")
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

// inputRefRE finds ${{ inputs.NAME }} in a workflow's text.
var inputRefRE = regexp.MustCompile(`\$\{\{\s*inputs\.([A-Za-z0-9_-]+)\s*\}\}`)

// TestCatalogCheckWorkflow: the reusable workflow a user's catalog
// repository calls, and the caller examples/catalog-ci ships, parse
// strictly; every input the workflow reads is declared with a type and a
// default; its smpatch line, with each input at its default, names
// commands and flags that exist and values they accept, and writes GitHub
// annotations and the summary (check --format github, --catalog-only);
// no input is spliced into a shell line; the caller runs on a schedule and
// passes only declared inputs.
func TestCatalogCheckWorkflow(t *testing.T) {
	wf, data := readWorkflow(t, "../../.github/workflows/catalog-check.yml")
	if wf.On.WorkflowCall == nil {
		t.Fatal("catalog-check.yml: not a reusable workflow (on.workflow_call)")
	}
	inputs := wf.On.WorkflowCall.Inputs
	defaults := map[string]string{}
	for name, in := range inputs {
		d, ok := in.Default.(string)
		if in.Type != "string" || !ok || in.Description == "" {
			t.Errorf("input %s: want a described string input with a default, got %+v", name, in)
		}
		defaults[name] = d
	}
	for _, m := range inputRefRE.FindAllStringSubmatch(string(data), -1) {
		if _, ok := inputs[m[1]]; !ok {
			t.Errorf("catalog-check.yml reads inputs.%s, which it does not declare", m[1])
		}
	}
	if wf.Permissions["contents"] != "read" || len(wf.Permissions) != 1 {
		t.Errorf("permissions %v: want contents: read alone", wf.Permissions)
	}
	var checked []string
	for name, job := range wf.Jobs {
		if job.RunsOn == "" || len(job.Steps) == 0 || job.TimeoutMinutes == 0 {
			t.Errorf("job %s: no runs-on, steps or timeout", name)
		}
		for _, s := range job.Steps {
			if (s.Uses == "") == (s.Run == "") {
				t.Errorf("job %s step %q: exactly one of uses and run", name, s.Name)
			}
			if strings.Contains(s.Run, "${{") {
				t.Errorf("step %q splices an expression into its shell line; pass it through env", s.Name)
			}
			env := map[string]string{}
			for k, v := range s.Env {
				env[k] = inputRefRE.ReplaceAllStringFunc(v, func(ref string) string {
					return defaults[inputRefRE.FindStringSubmatch(ref)[1]]
				})
			}
			for _, l := range strings.Split(s.Run, "\n") {
				args := smpatchArgs(strings.ReplaceAll(l, `"$RUNNER_TEMP/bin/smpatch"`, "smpatch"))
				if args == nil {
					continue
				}
				for i, a := range args {
					args[i] = os.Expand(strings.Trim(a, `"`), func(k string) string { return env[k] })
				}
				if err := checkCommandLine(args); err != nil {
					t.Errorf("step %q: %q: %v", s.Name, l, err)
				}
				checked = append(checked, strings.Join(args, " "))
			}
		}
	}
	if len(checked) != 1 || !strings.HasPrefix(checked[0], "check ") || !strings.Contains(checked[0], "--format github") || !strings.Contains(checked[0], "--catalog-only") {
		t.Errorf("want one smpatch check --catalog-only --format github line, got %q", checked)
	}

	caller, _ := readWorkflow(t, "../../examples/catalog-ci/smpatch.yml")
	if len(caller.On.Schedule) == 0 || caller.On.Schedule[0].Cron == "" {
		t.Error("examples/catalog-ci/smpatch.yml: no schedule")
	}
	for name, job := range caller.Jobs {
		if !strings.HasSuffix(strings.Split(job.Uses, "@")[0], "/.github/workflows/catalog-check.yml") {
			t.Errorf("caller job %s uses %q, not the catalog-check workflow", name, job.Uses)
		}
		for k := range job.With {
			if _, ok := inputs[k]; !ok {
				t.Errorf("caller job %s passes %s, which catalog-check.yml does not declare", name, k)
			}
		}
	}
}
