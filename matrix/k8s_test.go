package matrix

import (
	"bytes"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/yaml"
)

// TestJobYAMLRoundTrip decodes each Job strictly into k8s.io/api's
// batch/v1 Job and writes it back with k8s.io/api's own types: the bytes
// must not change, so the local types write exactly what k8s.io/api would
// (field names, omitempty, quantities, probe ports).
func TestJobYAMLRoundTrip(t *testing.T) {
	x := storyExpansion(t, nil)
	var base *Cell
	for _, c := range x.Cells {
		if c.Pruned == nil {
			base = c
			break
		}
	}
	if base == nil {
		t.Fatal("the story has no runnable cell")
	}
	vary := map[string]func(c *Cell){
		"story":             func(c *Cell) {},
		"no bench":          func(c *Cell) { c.Bench = nil },
		"remote health":     func(c *Cell) { c.Health = "http://gpu-node-3:30000/health" },
		"https health":      func(c *Cell) { c.Health = "https://localhost:8443/v1/models?x=1" },
		"no sm, no patches": func(c *Cell) { c.SM, c.Patches = "", nil },
		"command only":      func(c *Cell) { c.Command, c.Bench = c.Command[:1], c.Bench[:1] },
		"tp 0, empty env":   func(c *Cell) { c.TP, c.Env = 0, map[string]string{"EMPTY": ""} },
		"tp 2000, workdir":  func(c *Cell) { c.TP, c.Workdir = 2000, "scripts" },
		"tp 1500":           func(c *Cell) { c.TP = 1500 },
	}
	for name, f := range vary {
		c := *base
		c.Env = map[string]string{}
		for k, v := range base.Env {
			c.Env[k] = v
		}
		f(&c)
		got, err := jobYAML(x, &c, "registry.example/img:tag")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var job batchv1.Job
		if err := yaml.UnmarshalStrict(got, &job); err != nil {
			t.Fatalf("%s: %v\n%s", name, err, got)
		}
		again, err := yaml.Marshal(&job)
		if err != nil {
			t.Fatal(err)
		}
		again = bytes.TrimSuffix(again, []byte("status: {}\n"))
		if !bytes.Equal(got, again) {
			t.Errorf("%s: k8s.io/api writes it differently:\n--- ours\n%s--- k8s.io/api\n%s", name, got, again)
		}
	}
}

func TestQuantity(t *testing.T) {
	for n, want := range map[int]string{0: "0", 1: "1", 8: "8", 999: "999", 1000: "1k", 1500: "1500", 2000: "2k", 1000000: "1M", 3000000000: "3G"} {
		if got := quantity(n); got != want {
			t.Errorf("quantity(%d) = %q, want %q", n, got, want)
		}
	}
}
