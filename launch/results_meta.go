package launch

import (
	"slices"
	"strings"
	"time"
)

// RunMeta says where and when a run happened, for the head of the results:
// what a reader of results.html needs to trust or repeat it. A field that
// could not be read says so ("unknown (...)"); none is guessed.
type RunMeta struct {
	// Started and Finished are RFC 3339 times (UTC).
	Started  string `json:"started,omitempty"`
	Finished string `json:"finished,omitempty"`
	// Host is the machine smpatch ran on; with the docker runner the
	// containers ran there, with slurm and kubernetes on the nodes.
	Host string `json:"host,omitempty"`
	// GPUs are the GPUs of the host as the probe read them ("8 x NVIDIA
	// RTX PRO 6000 Blackwell Server Edition (sm 12.0)"), and where from.
	GPUs string `json:"gpus,omitempty"`
	// Smpatch is the version and commit of the smpatch that ran.
	Smpatch string `json:"smpatch,omitempty"`
	// Tree is the tree the local runner patched, TreeVersion the project
	// version read from it and TreeRevision the git commit checked out
	// there; for the other runners, the images the cells ran.
	Tree         string `json:"tree,omitempty"`
	TreeVersion  string `json:"tree_version,omitempty"`
	TreeRevision string `json:"tree_revision,omitempty"`
	// Patches are every patch some cell applies, in catalog-name order.
	Patches []string `json:"patches"`
}

// startMeta is the run's metadata as Run begins: o.Meta's fields, the
// start time and the cells' patches.
func startMeta(o *Options, cells []*Cell) *RunMeta {
	m := &RunMeta{}
	if o.Meta != nil {
		*m = *o.Meta
	}
	m.Started = time.Now().UTC().Format(time.RFC3339)
	m.Patches = []string{}
	for _, c := range cells {
		for _, p := range c.Patches {
			if !slices.Contains(m.Patches, p) {
				m.Patches = append(m.Patches, p)
			}
		}
	}
	slices.Sort(m.Patches)
	return m
}

// metaLines are the metadata as label and text, in the order shown.
func (m *RunMeta) metaLines(runner RunnerKind) [][2]string {
	if m == nil {
		return nil
	}
	var out [][2]string
	add := func(k, v string) {
		if v != "" {
			out = append(out, [2]string{k, v})
		}
	}
	when := m.Started
	if m.Finished != "" {
		when += " to " + m.Finished
		if a, err := time.Parse(time.RFC3339, m.Started); err == nil {
			if b, err := time.Parse(time.RFC3339, m.Finished); err == nil {
				when += " (" + b.Sub(a).String() + ")"
			}
		}
	}
	add("run", when)
	add("host", m.Host+" ("+string(runner)+" runner)")
	add("GPUs", m.GPUs)
	add("smpatch", m.Smpatch)
	tree := m.Tree
	if m.TreeVersion != "" {
		tree += ", version " + m.TreeVersion
	}
	if m.TreeRevision != "" {
		tree += ", commit " + m.TreeRevision
	}
	add("tree", strings.TrimPrefix(tree, ", "))
	if len(m.Patches) > 0 {
		add("patches", strings.Join(m.Patches, ", "))
	} else {
		add("patches", "none")
	}
	return out
}
