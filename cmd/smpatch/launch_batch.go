package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

	"github.com/spf13/pflag"
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
	f.StringVar(&b.Namespace, "namespace", "default", "kubernetes: the namespace of the cells' Jobs (it must exist)")
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

// slurmCommand is the command line each task of the slurm runner runs:
// this smpatch on the same matrix file with the options that decide how a
// cell runs.
func (o *matrixRunOptions) slurmCommand() ([]string, error) {
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
	for _, c := range o.Catalogs {
		cmd = append(cmd, "--catalog", abs(c))
	}
	if o.Python != "" {
		cmd = append(cmd, "--python", o.Python)
	}
	cmd = append(cmd, "matrix", "run", abs(o.File))
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
	return cmd, nil
}
