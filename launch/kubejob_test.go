package launch

import (
	"bytes"
	"encoding/json"
	"flag"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/smpatch/smpatch/matrix"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/render")

// storyExpansion is the story example, its file named the same on every
// machine.
func storyExpansion(t *testing.T) *matrix.Expansion {
	t.Helper()
	m, err := matrix.Load(filepath.Join("..", "examples", "story", "matrix.toml"))
	if err != nil {
		t.Fatal(err)
	}
	m.File = "examples/story/matrix.toml"
	x, err := m.Expand(matrix.ExpandOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// render is matrix render's output: the plain files and the Jobs.
func render(t *testing.T, x *matrix.Expansion, refs map[string]string) map[string][]byte {
	t.Helper()
	files, err := matrix.Render(x, matrix.RenderOptions{Refs: refs, Job: JobYAML})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestRenderGolden pins every file of the story's render, Jobs pinned by
// digest, a pruned cell and cells without an image among them.
func TestRenderGolden(t *testing.T) {
	files := render(t, storyExpansion(t), map[string]string{
		"sm120-fusion.fewchan.cgbs128.tp8.moonshotai-kimi-k2.5": "registry.example/story@sha256:1111111111111111111111111111111111111111111111111111111111111111",
		"unpatched.default.cgbs512.tp8.moonshotai-kimi-k2.5":    "registry.example/story@sha256:2222222222222222222222222222222222222222222222222222222222222222",
	})
	dir := filepath.Join("testdata", "render", "story")
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
	got := slices.Sorted(maps.Keys(files))
	if !slices.Equal(got, want) {
		t.Fatalf("files = %q\nwant %q (go test ./launch -run TestRenderGolden -update)", got, want)
	}
	for _, name := range got {
		w, _ := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
		if !bytes.Equal(files[name], w) {
			t.Errorf("%s differs from the golden file (go test ./launch -run TestRenderGolden -update):\n%s", name, files[name])
		}
	}
}

// TestRenderJobs decodes every job.yaml strictly back into a batch/v1 Job
// and checks what a cluster relies on.
func TestRenderJobs(t *testing.T) {
	x := storyExpansion(t)
	digest := "registry.example/story@sha256:2222222222222222222222222222222222222222222222222222222222222222"
	files := render(t, x, map[string]string{"unpatched.default.cgbs512.tp8.moonshotai-kimi-k2.5": digest})
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
	x := storyExpansion(t)
	local := "oci:/tmp/out@sha256:3333333333333333333333333333333333333333333333333333333333333333"
	files := render(t, x, map[string]string{"unpatched.default.cgbs512.tp8.moonshotai-kimi-k2.5": local})
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

// A Job keeps a relative workdir as written: it is a path in the image.
func TestJobRelativeWorkdir(t *testing.T) {
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
	m, err := matrix.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	x, err := m.Expand(matrix.ExpandOptions{})
	if err != nil {
		t.Fatal(err)
	}
	files := render(t, x, nil)
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

// A Job is never rendered with a deadline that is not positive or a probe
// port out of 1..65535: the matrix refuses the timeouts and the port, and
// the Job checks them again for an expansion made otherwise.
func TestJobRefusesBadDeadlineAndPort(t *testing.T) {
	m, err := matrix.Parse("m.toml", []byte("name = \"j\"\n[base]\nimage = \"registry.example/s:1\"\n[axes]\nmode = [\"a\"]\n[launch]\ncommand = [\"python3\"]\nbench = [\"b\"]\nhealth = \"http://127.0.0.1:30000/health\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	x, err := m.Expand(matrix.ExpandOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := x.Cells[0]
	if _, err := JobYAML(x, c, "registry.example/s:1"); err != nil {
		t.Fatal(err)
	}
	m.Launch.StartupTimeout, m.Launch.BenchTimeout = time.Duration(1<<62), time.Duration(1<<62)
	if _, err := JobYAML(x, c, "registry.example/s:1"); err == nil || !strings.Contains(err.Error(), "activeDeadlineSeconds") {
		t.Errorf("an overflowing deadline: %v", err)
	}
	m.Launch.StartupTimeout, m.Launch.BenchTimeout = time.Minute, time.Minute
	if p := healthProbe("http://127.0.0.1:99999/health", time.Minute); p != nil {
		t.Errorf("port 99999 made a probe: %+v", p)
	}
}
