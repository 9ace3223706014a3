package launch

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/smpatch/smpatch/matrix"
)

// FromExpansion turns a matrix expansion into cells to run, with their
// rendered launch files (matrix.Render), and fills the options the matrix
// decides: metrics, timeouts, baseline, name. refs maps a
// cell id to its image (matrix build's refs file) for the docker runner; a
// cell without patches and without a ref runs the base image when that is a
// registry reference.
func FromExpansion(x *matrix.Expansion, refs map[string]string, o *Options) ([]*Cell, error) {
	m := x.Matrix
	o.Name = m.Name
	o.Baseline = x.Baseline
	o.StartupTimeout = m.Launch.StartupTimeout
	o.BenchTimeout = m.Launch.BenchTimeout
	o.Repeat = m.Launch.Repeat
	o.Metrics = nil
	for _, mt := range m.Launch.Metrics {
		o.Metrics = append(o.Metrics, Metric{Name: mt.Name, Re: mt.Re})
	}
	var cells []*Cell
	for _, mc := range x.Cells {
		c := &Cell{
			ID:      mc.ID,
			Env:     mc.Env,
			Command: mc.Command,
			Workdir: mc.Workdir,
			Health:  mc.Health,
			Bench:   mc.Bench,
			Patches: mc.Patches,
			Image:   refs[mc.ID],
			TP:      mc.TP,
		}
		c.Files = matrix.CellFiles(x, mc)
		if c.Image == "" && len(mc.Patches) == 0 && isRegistryRef(m.Base.Image) {
			c.Image = m.Base.Image
		}
		for _, v := range mc.Values {
			c.Values = append(c.Values, AxisValue{Axis: v.Axis, Value: v.Shown()})
		}
		if mc.Pruned != nil {
			c.Pruned = decisionText(*mc.Pruned)
		}
		for _, d := range mc.Warnings {
			c.Warnings = append(c.Warnings, decisionText(d))
		}
		cells = append(cells, c)
	}
	return cells, nil
}

// HostWorkdirs makes every relative launch workdir of x relative to the
// directory of the matrix file, for cells that run on this host: a matrix
// then runs the same from any current directory. Inside a container (the
// docker runner, Kubernetes) the workdir is a path in the image and is left
// as written.
func HostWorkdirs(x *matrix.Expansion) error {
	base, err := filepath.Abs(filepath.Dir(x.Matrix.File))
	if err != nil {
		return fmt.Errorf("%s: %w", x.Matrix.File, err)
	}
	for _, c := range x.Cells {
		if c.Workdir == "" || filepath.IsAbs(c.Workdir) {
			continue
		}
		dir := filepath.Join(base, c.Workdir)
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return fmt.Errorf("%s: cell %s: workdir %s (relative to the matrix file) is not a directory", x.Matrix.File, c.ID, dir)
		}
		c.Workdir = dir
	}
	return nil
}

func decisionText(d matrix.Decision) string {
	s := d.Rule + ": " + d.Reason
	if d.Source != "" {
		s += " (" + d.Source + ")"
	}
	return s
}

// isRegistryRef tells a registry reference from an OCI layout (oci:DIR) or a
// docker-save tarball, which docker cannot run directly.
func isRegistryRef(s string) bool {
	return s != "" && !strings.HasPrefix(s, "oci:") && !strings.HasSuffix(s, ".tar") && !strings.HasSuffix(s, ".tar.gz")
}
