package main

import (
	batchv1 "k8s.io/api/batch/v1"

	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

	"github.com/spf13/pflag"

	"github.com/smpatch/smpatch/launch"
	"github.com/smpatch/smpatch/matrix"
)

// batchOptions are the flags of matrix run for the scheduler runners.
type batchOptions struct {
	Partition  string
	SbatchArgs []string
	Namespace  string
	Kubeconfig string
	Smpatch    string
}

func (b *batchOptions) addBatchFlags(f *pflag.FlagSet) {
	f.StringVar(&b.Partition, "partition", "", "slurm: sbatch --partition")
	f.StringArrayVar(&b.SbatchArgs, "sbatch-arg", nil, "slurm: a further sbatch option, e.g. --sbatch-arg=--account=gpu (repeatable)")
	f.StringVar(&b.Smpatch, "node-smpatch", "", "slurm: the smpatch the nodes run (default: this executable; it must be on a path the nodes share)")
	f.StringVar(&b.Namespace, "namespace", "default", "kubernetes: the namespace of the cells' Jobs (created when missing)")
	f.StringVar(&b.Kubeconfig, "kubeconfig", "", "kubernetes: the kubeconfig (default $KUBECONFIG, else ~/.kube/config)")
}

// selfPath is the smpatch executable as it was started: the path on PATH
// when started by name (not resolved through links, so a link named
// smpatch still runs as smpatch).
func selfPath() (string, error) {
	if p, err := exec.LookPath(os.Args[0]); err == nil {
		return filepath.Abs(p)
	}
	return os.Executable()
}

// slurmRunner builds the slurm runner: each task runs this smpatch on the
// same matrix file with the options that decide how a cell runs.
func slurmRunner(g *globalOptions, file string, o *matrixRunOptions) (launch.Runner, error) {
	self := o.Smpatch
	if self == "" {
		var err error
		if self, err = selfPath(); err != nil {
			return nil, fmt.Errorf("slurm runner: cannot find this executable: %w", err)
		}
	}
	abs := func(p string) string {
		if a, err := filepath.Abs(p); err == nil {
			return a
		}
		return p
	}
	cmd := []string{self}
	for _, c := range g.Catalogs {
		cmd = append(cmd, "--catalog", abs(c))
	}
	if g.Python != "" {
		cmd = append(cmd, "--python", g.Python)
	}
	cmd = append(cmd, "matrix", "run", abs(file))
	if o.ProbeFile != "" {
		cmd = append(cmd, "--probe-file", abs(o.ProbeFile))
	}
	if o.MaxCells != 0 {
		cmd = append(cmd, "--max-cells", strconv.Itoa(o.MaxCells))
	}
	for _, r := range o.Rules {
		cmd = append(cmd, "--rules", abs(r))
	}
	if o.NoDefault {
		cmd = append(cmd, "--no-default-rules")
	}
	if o.Repo != "" {
		cmd = append(cmd, "--repo", abs(o.Repo))
	}
	for _, s := range o.Signatures {
		cmd = append(cmd, "--signatures", abs(s))
	}
	cmd = append(cmd, "--stop-grace", o.StopGrace.String())
	return launch.Slurm{Command: cmd, Partition: o.Partition, Args: o.SbatchArgs}, nil
}

// kubeRunner builds the kubernetes runner: each cell's Job as matrix
// render writes it, with the cell's image (--refs, else base.image).
func kubeRunner(x *matrix.Expansion, cells []*launch.Cell, o *matrixRunOptions) (launch.Runner, error) {
	images := map[string]string{}
	for _, c := range cells {
		images[c.ID] = c.Image
	}
	k := &launch.Kube{Kubeconfig: o.Kubeconfig, Namespace: o.Namespace, Jobs: map[string]*batchv1.Job{}}
	for _, mc := range x.Cells {
		if mc.Pruned == nil {
			k.Jobs[mc.ID] = matrix.Job(x, mc, images[mc.ID])
		}
	}
	return k, nil
}
