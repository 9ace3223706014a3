package matrix

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/render")

// goldenMatrix is the story example with a probe report and refs, so that
// every render output appears: jobs pinned by digest, a pruned cell, a cell
// without an image.
func storyExpansion(t *testing.T, probe *ProbeFacts) *Expansion {
	t.Helper()
	m, err := Load(filepath.Join("..", "examples", "story", "matrix.toml"))
	if err != nil {
		t.Fatal(err)
	}
	m.File = "examples/story/matrix.toml" // stable across machines
	x, err := m.Expand(ExpandOptions{Probe: probe})
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func TestRenderGolden(t *testing.T) {
	story := storyExpansion(t, nil)
	host, err := Load(filepath.Join("testdata", "host.toml"))
	if err != nil {
		t.Fatal(err)
	}
	host.File = "testdata/host.toml"
	hostX, err := host.Expand(ExpandOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		x    *Expansion
		refs map[string]string
	}{
		{"story", story, map[string]string{
			"sm120-fusion.fewchan.cgbs128.tp8.moonshotai-kimi-k2.5": "registry.example/story@sha256:1111111111111111111111111111111111111111111111111111111111111111",
			"unpatched.default.cgbs512.tp8.moonshotai-kimi-k2.5":    "registry.example/story@sha256:2222222222222222222222222222222222222222222222222222222222222222",
		}},
		{"host", hostX, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files, err := Render(tc.x, RenderOptions{Refs: tc.refs})
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, filepath.Join("testdata", "render", tc.name), files)
		})
	}
}

func checkGolden(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	if *update {
		os.RemoveAll(dir)
		for name, data := range files {
			p := filepath.Join(dir, filepath.FromSlash(name))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	var want []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			want = append(want, filepath.ToSlash(rel))
		}
		return nil
	})
	got := sortedKeys(files)
	if !slices.Equal(got, want) {
		t.Fatalf("files = %q\nwant %q (go test ./matrix -run TestRenderGolden -update)", got, want)
	}
	for _, name := range got {
		w, _ := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
		if !bytes.Equal(files[name], w) {
			t.Errorf("%s differs from the golden file (go test ./matrix -run TestRenderGolden -update):\n%s", name, files[name])
		}
	}
}

// TestRenderJobs decodes every job.yaml strictly back into a batch/v1 Job
// and checks what a cluster relies on.
func TestRenderJobs(t *testing.T) {
	x := storyExpansion(t, nil)
	digest := "registry.example/story@sha256:2222222222222222222222222222222222222222222222222222222222222222"
	files, err := Render(x, RenderOptions{Refs: map[string]string{"unpatched.default.cgbs512.tp8.moonshotai-kimi-k2.5": digest}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for name, data := range files {
		if !strings.HasSuffix(name, "/job.yaml") {
			continue
		}
		n++
		var job batchv1.Job
		if err := yaml.UnmarshalStrict(data, &job); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		id := strings.TrimSuffix(name, "/job.yaml")
		c := x.Cell(id)
		if job.APIVersion != "batch/v1" || job.Kind != "Job" || len(job.Name) > 63 || strings.Contains(job.Name, ".") {
			t.Errorf("%s: type/name %s %s %q", name, job.APIVersion, job.Kind, job.Name)
		}
		if job.Spec.BackoffLimit == nil || *job.Spec.BackoffLimit != 0 {
			t.Errorf("%s: backoffLimit %v", name, job.Spec.BackoffLimit)
		}
		pod := job.Spec.Template.Spec
		if pod.RestartPolicy != corev1.RestartPolicyNever {
			t.Errorf("%s: restartPolicy %s", name, pod.RestartPolicy)
		}
		if pod.NodeSelector["nvidia.com/gpu.compute.major"] != "12" {
			t.Errorf("%s: nodeSelector %v", name, pod.NodeSelector)
		}
		// The story has a bench and a local health URL: the server is a
		// native sidecar with a startup probe, the bench the main container.
		if len(pod.InitContainers) != 1 || len(pod.Containers) != 1 {
			t.Fatalf("%s: %d init containers, %d containers", name, len(pod.InitContainers), len(pod.Containers))
		}
		ctr := pod.InitContainers[0]
		if ctr.Name != "server" || ctr.RestartPolicy == nil || *ctr.RestartPolicy != corev1.ContainerRestartPolicyAlways {
			t.Errorf("%s: server is not a sidecar: %+v", name, ctr.RestartPolicy)
		}
		if p := ctr.StartupProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/health" || p.HTTPGet.Port.IntValue() != 30000 ||
			int(p.PeriodSeconds*p.FailureThreshold) != int(x.Matrix.Launch.StartupTimeout.Seconds()) {
			t.Errorf("%s: startup probe %+v", name, p)
		}
		bench := pod.Containers[0]
		if got := append(slices.Clone(bench.Command), bench.Args...); !slices.Equal(got, c.Bench) {
			t.Errorf("%s: bench %q, want %q", name, got, c.Bench)
		}
		// The deadline is the pod's, which the kubelet counts from the
		// pod's start on its node; a Job's would count time spent pending.
		if d := pod.ActiveDeadlineSeconds; d == nil || *d != 50*60 {
			t.Errorf("%s: pod activeDeadlineSeconds %v", name, d)
		}
		if d := job.Spec.ActiveDeadlineSeconds; d != nil {
			t.Errorf("%s: the Job has a deadline of its own (%d s), counting time pending", name, *d)
		}
		if _, ok := bench.Resources.Limits["nvidia.com/gpu"]; ok {
			t.Errorf("%s: the bench container asks for GPUs", name)
		}
		if q := ctr.Resources.Limits["nvidia.com/gpu"]; q.Value() != int64(c.TP) {
			t.Errorf("%s: gpu limit %v", name, q.String())
		}
		if got := append(slices.Clone(ctr.Command), ctr.Args...); !slices.Equal(got, c.Command) {
			t.Errorf("%s: command %q, want %q", name, got, c.Command)
		}
		env := map[string]string{}
		for _, e := range ctr.Env {
			env[e.Name] = e.Value
		}
		if !maps.Equal(env, c.Env) {
			t.Errorf("%s: env %v, want %v", name, env, c.Env)
		}
		if len(pod.Volumes) != 1 || pod.Volumes[0].EmptyDir == nil || pod.Volumes[0].EmptyDir.Medium != corev1.StorageMediumMemory ||
			len(ctr.VolumeMounts) != 1 || ctr.VolumeMounts[0].MountPath != "/dev/shm" {
			t.Errorf("%s: /dev/shm volume missing", name)
		}
		wantImage := "lmsysorg/sglang:v0.5.9-cu129"
		if id == "unpatched.default.cgbs512.tp8.moonshotai-kimi-k2.5" {
			wantImage = digest
		}
		if ctr.Image != wantImage || bench.Image != wantImage {
			t.Errorf("%s: images %s, %s, want %s", name, ctr.Image, bench.Image, wantImage)
		}
	}
	// Five unpatched runnable cells; the patched ones have no ref, so no Job.
	if n != 5 {
		t.Errorf("%d jobs, want 5", n)
	}
	if _, ok := files["sm120-fusion.fewchan.cgbs128.tp8.moonshotai-kimi-k2.5/job.yaml"]; ok {
		t.Error("a patched cell got a Job running the unpatched base image")
	}
	if _, ok := files["unpatched.tree.cgbs128.tp8.moonshotai-kimi-k2.5/run.sh"]; ok {
		t.Error("a pruned cell was rendered")
	}
}

func TestRenderIndexAndGitHub(t *testing.T) {
	x := storyExpansion(t, nil)
	files, err := Render(x, RenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var idx struct {
		Cells []struct {
			ID       string
			Runnable bool
			Pruned   *Decision
		}
	}
	if err := json.Unmarshal(files["index.json"], &idx); err != nil {
		t.Fatal(err)
	}
	if len(idx.Cells) != 12 || idx.Cells[5].Runnable || idx.Cells[5].Pruned == nil || idx.Cells[5].Pruned.Rule != "nccl-tree-cuda-graphs" {
		t.Errorf("index = %+v", idx)
	}
	var gh struct{ Include []map[string]string }
	if err := json.Unmarshal(files["github-matrix.json"], &gh); err != nil {
		t.Fatal(err)
	}
	if len(gh.Include) != 9 || gh.Include[0]["id"] != "unpatched.default.cgbs512.tp8.moonshotai-kimi-k2.5" || gh.Include[0]["nccl"] != "default" {
		t.Errorf("github matrix = %+v", gh)
	}
}

func TestGitHubMatrixSplits(t *testing.T) {
	x := expand(t, "[axes]\na = "+intRange(300)+"\n"+launch, ExpandOptions{MaxCells: 300, NoDefaultRules: true})
	files := githubMatrix(x)
	if len(files) != 2 {
		t.Fatalf("files = %v", sortedKeys(files))
	}
	for name, want := range map[string]int{"github-matrix-1.json": 256, "github-matrix-2.json": 44} {
		var gh struct{ Include []map[string]string }
		if err := json.Unmarshal(files[name], &gh); err != nil || len(gh.Include) != want {
			t.Errorf("%s: %d entries, %v", name, len(gh.Include), err)
		}
	}
}

func intRange(n int) string {
	var s []string
	for i := 0; i < n; i++ {
		s = append(s, strconv.Itoa(i))
	}
	return "[" + strings.Join(s, ", ") + "]"
}

func TestWriteRender(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	if err := WriteRender(dir, map[string][]byte{"index.json": []byte("{}"), "a/run.sh": []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "a", "run.sh")); err != nil || fi.Mode()&0o111 == 0 {
		t.Fatalf("run.sh: %v %v", fi, err)
	}
	// A second render replaces the first: stale cells go.
	if err := WriteRender(dir, map[string][]byte{"index.json": []byte("{}"), "b/run.sh": []byte("y")}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "a")); !os.IsNotExist(err) {
		t.Errorf("stale cell dir kept: %v", err)
	}
	// A directory that is not ours is refused and left alone.
	other := t.TempDir()
	os.WriteFile(filepath.Join(other, "notes.txt"), []byte("mine"), 0o644)
	if err := WriteRender(other, map[string][]byte{"index.json": []byte("{}")}); err == nil {
		t.Fatal("overwrote a directory not written by render")
	}
	if b, _ := os.ReadFile(filepath.Join(other, "notes.txt")); string(b) != "mine" {
		t.Error("foreign directory changed")
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"plain": "plain", "a b": "'a b'", "it's": `'it'\''s'`, "": "''", "$HOME": "'$HOME'",
		`Output \(tok/s\)`: `'Output \(tok/s\)'`, "--x=1": "--x=1",
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestHealthProbe(t *testing.T) {
	for _, tt := range []struct {
		url     string
		path    string
		port    int
		noProbe bool
	}{
		{url: "http://127.0.0.1:30000/health", path: "/health", port: 30000},
		{url: "http://localhost/v1/models?x=1", path: "/v1/models?x=1", port: 80},
		{url: "https://localhost:8443", path: "/", port: 8443},
		{url: "http://gpu-node-3:30000/health", noProbe: true},
		{url: "", noProbe: true},
		{url: "tcp://127.0.0.1:1", noProbe: true},
	} {
		p := healthProbe(tt.url, 30*time.Minute)
		if tt.noProbe {
			if p != nil {
				t.Errorf("%q: probe %+v", tt.url, p)
			}
			continue
		}
		if p == nil || p.HTTPGet.Path != tt.path || p.HTTPGet.Port.IntValue() != tt.port || p.FailureThreshold != 180 {
			t.Errorf("%q: probe %+v", tt.url, p)
		}
	}
}

func TestJobName(t *testing.T) {
	long := strings.Repeat("sm120-fusion.", 10)
	for _, id := range []string{"unpatched.default.cgbs512.tp8.moonshotai-kimi-k2.5", long} {
		n := jobName(id)
		if len(n) > 63 || strings.Contains(n, ".") || strings.HasSuffix(n, "-") {
			t.Errorf("jobName(%q) = %q", id, n)
		}
		if l := labelValue(id); len(l) > 63 {
			t.Errorf("labelValue(%q) = %q", id, l)
		}
	}
}

// TestRenderLocalRefNoJob: matrix build --out writes refs to an OCI layout
// on this machine (oci:DIR@sha256:...); a cluster cannot pull those, so the
// cell gets no Job, and index.json and SUMMARY.md say why.
func TestRenderLocalRefNoJob(t *testing.T) {
	x := storyExpansion(t, nil)
	local := "oci:/tmp/out@sha256:3333333333333333333333333333333333333333333333333333333333333333"
	files, err := Render(x, RenderOptions{Refs: map[string]string{"unpatched.default.cgbs512.tp8.moonshotai-kimi-k2.5": local}})
	if err != nil {
		t.Fatal(err)
	}
	if y, ok := files["unpatched.default.cgbs512.tp8.moonshotai-kimi-k2.5/job.yaml"]; ok {
		t.Fatalf("a Job for a cell whose image is an OCI layout on this machine:\n%s", y)
	}
	if _, ok := files["unpatched.default.cgbs128.tp8.moonshotai-kimi-k2.5/job.yaml"]; !ok {
		t.Error("the other unpatched cells lost their Jobs")
	}
	var idx struct {
		Cells []struct {
			ID, Image, Job string
			NoJob          string `json:"no_job"`
		}
	}
	if err := json.Unmarshal(files["index.json"], &idx); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, c := range idx.Cells {
		if c.ID == "unpatched.default.cgbs512.tp8.moonshotai-kimi-k2.5" {
			found = true
			if c.Image != local || c.Job != "" || !strings.Contains(c.NoJob, "--push") {
				t.Errorf("index.json: image %q job %q no_job %q", c.Image, c.Job, c.NoJob)
			}
		}
	}
	if !found {
		t.Error("index.json lacks the cell")
	}
	if !strings.Contains(string(files["SUMMARY.md"]), "its image is local ("+local+")") {
		t.Errorf("SUMMARY.md does not say why the Job is missing:\n%s", files["SUMMARY.md"])
	}
}

// TestRenderRelativeWorkdir: run.sh runs on this host (by hand, from
// slurm.sbatch), so a relative workdir is taken from the matrix file's
// directory, as matrix run does; the Job keeps it as written (a path in the
// image).
func TestRenderRelativeWorkdir(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "m.toml")
	src := `name = "wd"
project = "sglang"
[base]
image = "registry.example/sglang:1"
[axes]
mode = ["a"]
[launch]
command = ["python3", "bench.py", "--tp", "1"]
workdir = "scripts"
`
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := Load(file)
	if err != nil {
		t.Fatal(err)
	}
	x, err := m.Expand(ExpandOptions{})
	if err != nil {
		t.Fatal(err)
	}
	files, err := Render(x, RenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := "cd " + shellQuote(filepath.Join(dir, "scripts")) + "\n"
	if !strings.Contains(string(files["a/run.sh"]), want) {
		t.Errorf("run.sh lacks %q:\n%s", want, files["a/run.sh"])
	}
	var job batchv1.Job
	if err := yaml.UnmarshalStrict(files["a/job.yaml"], &job); err != nil {
		t.Fatal(err)
	}
	for _, c := range append(job.Spec.Template.Spec.InitContainers, job.Spec.Template.Spec.Containers...) {
		if c.WorkingDir != "scripts" {
			t.Errorf("job container %s: workingDir %q, want it as written", c.Name, c.WorkingDir)
		}
	}
}

// TestRenderHostileText checks that text from a matrix file never becomes
// a command in run.sh or slurm.sbatch: control characters in names and
// reasons are escaped in comments, and ids are quoted.
func TestRenderHostileText(t *testing.T) {
	src := `name = "n"
[axes]
x = ["a", "b"]
[launch]
command = ["python3", "-c", "print(1)\ntouch /tmp/pwned-arg"]
`
	m, err := Parse("m.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	// What Load refuses, a program may still set.
	m.Name = "evil\ntouch /tmp/pwned-name\r\x1b]52;c;AAAA\x07"
	m.File = "dir/x\ntouch /tmp/pwned-file.toml"
	x, err := m.Expand(ExpandOptions{NoDefaultRules: true})
	if err != nil {
		t.Fatal(err)
	}
	files, err := Render(x, RenderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range files {
		if !strings.HasSuffix(name, ".sh") && !strings.HasSuffix(name, ".sbatch") {
			continue
		}
		if strings.ContainsAny(string(b), "\r\x1b\x07") {
			t.Errorf("%s holds raw control characters", name)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "touch") {
				t.Errorf("%s: a line became a command: %q", name, line)
			}
		}
	}
}

// TestMatrixControlCharacters checks that Load refuses control
// characters in the name and line breaks in env values, with file:line.
func TestMatrixControlCharacters(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"name = \"a\\nb\"\n[axes]\nx = [1]\n[launch]\ncommand = [\"x\"]\n", "m.toml:1: name"},
		{"name = \"a\"\n[axes]\nx = [1]\n[launch]\ncommand = [\"x\"]\nenv = { A = \"1\\nB=2\" }\n", "m.toml:6: launch.env.A"},
		{"name = \"a\"\n[axes]\nn = [\"p\"]\n[presets.n.p]\nNCCL_X = \"1\\r\"\n[launch]\ncommand = [\"x\"]\n", "m.toml:5: presets.n.p.NCCL_X"},
	} {
		_, err := Parse("m.toml", []byte(tc.src))
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %s...", tc.src, err, tc.want)
		}
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "a\nb.toml")
	os.WriteFile(p, []byte("name = \"a\"\n"), 0o644)
	if _, err := Load(p); err == nil || !strings.Contains(err.Error(), "control character") {
		t.Errorf("file name with a newline: %v", err)
	}
	// A value that only a template puts in the env is refused at render.
	src := "name = \"a\"\n[axes]\nx = [\"1\\nrm -rf ~\"]\n[launch]\ncommand = [\"x\"]\nenv = { V = \"{{.x}}\" }\n"
	m, err := Parse("m.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	x, err := m.Expand(ExpandOptions{NoDefaultRules: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Render(x, RenderOptions{}); err == nil || !strings.Contains(err.Error(), "env V") {
		t.Errorf("templated env with a newline rendered: %v", err)
	}
}

// TestWriteRenderMarker checks that only a directory holding an earlier
// render's marker is replaced: one that merely has an index.json is not.
func TestWriteRenderMarker(t *testing.T) {
	user := t.TempDir()
	os.WriteFile(filepath.Join(user, "index.json"), []byte(`{"mine": true}`), 0o644)
	err := WriteRender(user, map[string][]byte{"index.json": []byte("{}")})
	if !errors.Is(err, ErrNotRendered) {
		t.Fatalf("replaced a user's directory with an index.json: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(user, "index.json")); string(b) != `{"mine": true}` {
		t.Error("user's index.json changed")
	}
	os.WriteFile(filepath.Join(user, RenderMarker), []byte(`{"format": "smpatch-render", "version": 99}`), 0o644)
	if err := WriteRender(user, map[string][]byte{"index.json": []byte("{}")}); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Errorf("newer marker: %v", err)
	}
	dir := filepath.Join(t.TempDir(), "out")
	if err := WriteRender(dir, map[string][]byte{"index.json": []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, RenderMarker)); err != nil {
		t.Fatalf("no marker written: %v", err)
	}
	if err := WriteRender(dir, map[string][]byte{"index.json": []byte("{}")}); err != nil {
		t.Errorf("second render refused: %v", err)
	}
}

// TestShellQuoteRoundTrip checks quoted words with control characters
// against bash itself.
func TestShellQuoteRoundTrip(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	for _, s := range []string{"a\nb", "x'\\\r\x1b]52;c;QQ==\x07y", "\x7f1", "é\u0085", "$(touch /tmp/x)\n"} {
		q := shellQuote(s)
		if strings.ContainsAny(q, "\n\r") {
			t.Errorf("shellQuote(%q) = %s spans lines", s, q)
		}
		out, err := exec.Command(bash, "-c", "printf %s "+q).Output()
		if err != nil || string(out) != s {
			t.Errorf("bash reads shellQuote(%q) = %s as %q, %v", s, q, out, err)
		}
	}
}
