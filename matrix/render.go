package matrix

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/smpatch/smpatch/internal/bounded"
	"github.com/smpatch/smpatch/internal/shell"
)

// GitHubMatrixLimit is the most jobs a GitHub Actions matrix may hold.
const GitHubMatrixLimit = 256

// RenderOptions change what Render writes.
type RenderOptions struct {
	// Refs pins images: cell id -> repo@sha256:... (written by matrix build).
	Refs map[string]string
	// Job writes the job.yaml of a runnable cell that has a registry
	// image (launch.JobYAML: a Kubernetes Job); nil writes none.
	Job func(x *Expansion, c *Cell, image string) ([]byte, error)
}

// Render returns the launch specs of an expansion as files, relative path
// -> contents: per runnable cell <id>/run.sh, <id>/env, <id>/sitecustomize.py
// and, through opts.Job, <id>/job.yaml; for the whole matrix index.json,
// SUMMARY.md, github-matrix.json (github-matrix-N.json past 256 cells) and
// slurm.sbatch. Nothing is written: WriteRender puts the files on disk.
func Render(x *Expansion, opts RenderOptions) (map[string][]byte, error) {
	files := map[string][]byte{}
	type indexCell struct {
		ID       string            `json:"id"`
		Dir      string            `json:"dir,omitempty"`
		Runnable bool              `json:"runnable"`
		Values   map[string]string `json:"values"`
		Patches  []string          `json:"patches"`
		Image    string            `json:"image,omitempty"`
		Job      string            `json:"job,omitempty"`
		NoJob    string            `json:"no_job,omitempty"` // why job.yaml is missing
		Pruned   *Decision         `json:"pruned,omitempty"`
		Warnings []Decision        `json:"warnings,omitempty"`
	}
	index := struct {
		Name     string      `json:"name"`
		File     string      `json:"file"`
		Baseline string      `json:"baseline,omitempty"`
		Shard    Shard       `json:"shard"`
		Steps    Steps       `json:"steps"`
		Cells    []indexCell `json:"cells"`
	}{Name: x.Matrix.Name, File: filepath.ToSlash(x.Matrix.File), Baseline: x.Baseline, Shard: x.Shard, Steps: x.Steps, Cells: []indexCell{}}

	total := 0
	for _, c := range x.Cells {
		ic := indexCell{ID: c.ID, Runnable: c.Pruned == nil, Values: map[string]string{}, Patches: c.Patches, Pruned: c.Pruned, Warnings: c.Warnings}
		for _, v := range c.Values {
			ic.Values[v.Axis] = v.Text
		}
		if c.Pruned == nil {
			ic.Dir = c.ID
			for _, k := range sortedKeys(c.Env) {
				if !envNameOK(k) {
					return nil, fmt.Errorf("cell %s: %q is not an environment variable name", c.ID, k)
				}
				if err := envValueErr(c.Env[k]); err != nil {
					return nil, fmt.Errorf("cell %s: env %s: %w", c.ID, k, err)
				}
			}
			for name, data := range CellFiles(x, c) {
				files[c.ID+"/"+name] = data
				total += len(data)
			}
			if total > MaxRenderBytes {
				return nil, fmt.Errorf("%s: %w: the render would write more than %d MiB (cell %s and those before it)", x.Matrix.File, ErrTooMuch, MaxRenderBytes>>20, c.ID)
			}
			image, why := cellImage(x.Matrix, c, opts.Refs)
			ic.Image = image
			if why != "" {
				ic.NoJob = why
			} else if opts.Job != nil {
				y, err := opts.Job(x, c, image)
				if err != nil {
					return nil, fmt.Errorf("cell %s: %w", c.ID, err)
				}
				files[c.ID+"/job.yaml"] = y
				ic.Job = c.ID + "/job.yaml"
			}
		}
		index.Cells = append(index.Cells, ic)
	}
	b, err := json.MarshalIndent(index, "", "  ")
	if err != nil {
		return nil, err
	}
	files["index.json"] = append(b, '\n')
	for name, data := range githubMatrix(x) {
		files[name] = data
	}
	files["SUMMARY.md"] = summary(x, opts)
	files["slurm.sbatch"] = slurm(x)
	if err := renderSize(files); err != nil {
		return nil, fmt.Errorf("%s: %w", x.Matrix.File, err)
	}
	return files, nil
}

// MaxRenderBytes bounds what one render writes (it is built in memory
// first): a natural matrix of 65536 cells renders to a few hundred MiB.
const MaxRenderBytes = 1 << 30

func renderSize(files map[string][]byte) error {
	n := 0
	for _, d := range files {
		n += len(d)
	}
	if n > MaxRenderBytes {
		return fmt.Errorf("%w: the render would write %d MiB, more than %d MiB", ErrTooMuch, n>>20, MaxRenderBytes>>20)
	}
	return nil
}

// CellFiles are the files a runnable cell runs from, by name: run.sh, env
// and sitecustomize.py. A pruned cell has none.
func CellFiles(x *Expansion, c *Cell) map[string][]byte {
	if c.Pruned != nil {
		return nil
	}
	return map[string][]byte{
		"run.sh":           runScript(x, c),
		"env":              envFile(c),
		"sitecustomize.py": sitecustomize(c),
	}
}

// envNameOK reports whether k is a plain environment variable name.
func envNameOK(k string) bool {
	if k == "" || k[0] >= '0' && k[0] <= '9' {
		return false
	}
	return strings.IndexFunc(k, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_')
	}) < 0
}

// MaxRefsSize bounds a refs file: a few hundred bytes per cell.
const MaxRefsSize = 4 << 20

// ReadRefs reads a refs file: a JSON object of cell id -> image reference.
// It is read like every input file: a regular file (a named pipe would
// block forever) of at most MaxRefsSize bytes.
func ReadRefs(path string) (map[string]string, error) {
	data, err := bounded.ReadFile(nil, path, MaxRefsSize)
	if err != nil {
		return nil, err
	}
	var refs map[string]string
	if err := json.Unmarshal(data, &refs); err != nil {
		return nil, fmt.Errorf("%s: want a JSON object of cell id to image reference: %v", path, err)
	}
	for _, id := range sortedKeys(refs) {
		if err := ImageRefErr(refs[id]); err != nil {
			return nil, fmt.Errorf("%s: cell %s: %v", path, id, err)
		}
	}
	return refs, nil
}

// cellImage picks the image of a cell's Job: its pinned ref, else the base
// image when the cell has no patches and the base is a registry reference.
// A non-empty reason means the cell gets no Job; the image may still be
// known (a ref to a local OCI layout, which a cluster cannot pull).
func cellImage(m *Matrix, c *Cell, refs map[string]string) (string, string) {
	if r := refs[c.ID]; r != "" {
		if isLocalImage(r) {
			return r, "its image is local (" + r + "): a cluster cannot pull it; build with smpatch matrix build --push REPO and pass those refs"
		}
		return r, ""
	}
	b := m.Base.Image
	switch {
	case b == "":
		return "", "the base is not an image"
	case isLocalImage(b):
		return "", "the base image is local (" + b + "): push it and pass --refs"
	case len(c.Patches) > 0:
		return "", "the cell has patches: build its image (smpatch matrix build) and pass --refs"
	}
	return b, ""
}

// isLocalImage reports whether an image reference names something on this
// machine (an OCI layout, a docker-save tarball, a path) rather than a
// registry.
func isLocalImage(s string) bool {
	return strings.HasPrefix(s, "oci:") || strings.HasSuffix(s, ".tar") || strings.HasSuffix(s, ".tar.gz") || strings.HasPrefix(s, "/") || strings.HasPrefix(s, ".")
}

// hostWorkdir is where run.sh changes to on this host: a relative workdir
// is relative to the matrix file's directory, as for matrix run, so that
// run.sh (by hand, or from slurm.sbatch) works from any directory. Jobs use
// the workdir as written: it is a path in the image.
func hostWorkdir(m *Matrix, wd string) string {
	if filepath.IsAbs(wd) || m.File == "" {
		return wd
	}
	base, err := filepath.Abs(filepath.Dir(m.File))
	if err != nil {
		return wd
	}
	return filepath.Join(base, wd)
}

func runScript(x *Expansion, c *Cell) []byte {
	m := x.Matrix
	var b bytes.Buffer
	fmt.Fprintf(&b, "#!/usr/bin/env bash\n")
	fmt.Fprintf(&b, "# Cell %s of matrix %s (%s), written by smpatch matrix render.\n", shell.Comment(c.ID), shell.Comment(m.Name), shell.Comment(filepath.ToSlash(m.File)))
	if len(c.Patches) > 0 {
		ps := shell.Comment(strings.Join(c.Patches, " "))
		fmt.Fprintf(&b, "# Patches: %s (the environment must have them: smpatch apply %s).\n", ps, ps)
	} else {
		fmt.Fprintf(&b, "# Patches: none.\n")
	}
	for _, d := range c.Warnings {
		fmt.Fprintf(&b, "# %s %s: %s\n", shell.Comment(d.Action), shell.Comment(d.Rule), shell.Comment(d.Reason))
	}
	b.WriteString("set -euo pipefail\n")
	b.WriteString("here=\"$(cd \"$(dirname \"${BASH_SOURCE[0]}\")\" && pwd)\"\n")
	for _, k := range sortedKeys(c.Env) {
		fmt.Fprintf(&b, "export %s=%s\n", k, shell.Quote(c.Env[k]))
	}
	b.WriteString("# sitecustomize.py sets the NCCL variables again inside Python, before torch loads.\n")
	b.WriteString("export PYTHONPATH=\"$here${PYTHONPATH:+:$PYTHONPATH}\"\n")
	if m.Base.Python != "" {
		fmt.Fprintf(&b, "export PATH=%s\"${PATH:+:$PATH}\"\n", shell.Quote(filepath.Dir(m.Base.Python)))
	}
	fmt.Fprintf(&b, "log=\"${SMPATCH_LOG_DIR:-$here}\"/%s\n", shell.Quote(c.ID+".log"))
	if c.Workdir != "" {
		fmt.Fprintf(&b, "cd %s\n", shell.Quote(hostWorkdir(m, c.Workdir)))
	}
	// run.sh's own lines start like smpatch's notes in a cell's log, which
	// triage never takes for the server's.
	fmt.Fprintf(&b, "echo %s\"$log\" >&2\n", shell.Quote(NotePrefix+"cell "+c.ID+": log "))
	b.WriteString("rc=0\n")
	fmt.Fprintf(&b, "%s >\"$log\" 2>&1 || rc=$?\n", shell.Join(c.Command))
	fmt.Fprintf(&b, "echo %s\"$rc\" >&2\n", shell.Quote(NotePrefix+"cell "+c.ID+": exit "))
	b.WriteString("exit \"$rc\"\n")
	return b.Bytes()
}

// NotePrefix starts every line smpatch's own scripts and runs write into
// a cell's log; triage never matches such a line.
const NotePrefix = "### smpatch: "

// envFile is KEY=VALUE per line, as docker --env-file and systemd read it:
// the values as they are, not shell words (docker would keep the quotes).
// It is not a script: run.sh, which is, quotes them.
func envFile(c *Cell) []byte {
	var b bytes.Buffer
	b.WriteString("# KEY=VALUE per line for docker --env-file; values are verbatim, not shell words: not for sourcing (run.sh sets them).\n")
	for _, k := range sortedKeys(c.Env) {
		fmt.Fprintf(&b, "%s=%s\n", k, c.Env[k]) // Render refused line breaks
	}
	return b.Bytes()
}

func sitecustomize(c *Cell) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Cell %s, written by smpatch matrix render: sets the cell's NCCL\n", shell.Comment(c.ID))
	b.WriteString("# variables when Python starts, before anything imports torch or NCCL.\n")
	b.WriteString("# run.sh puts this directory first on PYTHONPATH.\n")
	b.WriteString("import os\n")
	n := 0
	for _, k := range sortedKeys(c.Env) {
		if strings.HasPrefix(k, "NCCL_") {
			v, _ := json.Marshal(c.Env[k])
			fmt.Fprintf(&b, "os.environ[%q] = %s\n", k, v)
			n++
		}
	}
	if n == 0 {
		b.WriteString("# (this cell sets no NCCL variables)\n")
	}
	return b.Bytes()
}

// GitHubInclude is the include list of a GitHub Actions matrix: one entry
// per runnable cell with its id and axis values.
func GitHubInclude(x *Expansion) []map[string]string {
	include := []map[string]string{}
	for _, c := range x.Cells {
		if c.Pruned != nil {
			continue
		}
		e := map[string]string{"id": c.ID}
		for _, v := range c.Values {
			e[v.Axis] = v.Text
		}
		include = append(include, e)
	}
	return include
}

func githubMatrix(x *Expansion) map[string][]byte {
	include := GitHubInclude(x)
	out := map[string][]byte{}
	enc := func(part []map[string]string) []byte {
		b, _ := json.MarshalIndent(map[string]any{"include": part}, "", "  ")
		return append(b, '\n')
	}
	if len(include) <= GitHubMatrixLimit {
		out["github-matrix.json"] = enc(include)
		return out
	}
	for i := 0; i*GitHubMatrixLimit < len(include); i++ {
		end := min((i+1)*GitHubMatrixLimit, len(include))
		out[fmt.Sprintf("github-matrix-%d.json", i+1)] = enc(include[i*GitHubMatrixLimit : end])
	}
	return out
}

func mdEscape(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}

func summary(x *Expansion, opts RenderOptions) []byte {
	m := x.Matrix
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Matrix %s\n\n", m.Name)
	fmt.Fprintf(&b, "From `%s`: %d cells, %d to run, %d pruned", filepath.ToSlash(m.File), len(x.Cells), x.Steps.Runnable, x.Steps.Pruned)
	if x.Shard.Count > 1 {
		fmt.Fprintf(&b, " (shard %d/%d of %d cells)", x.Shard.Index, x.Shard.Count, x.Total)
	}
	b.WriteString(".\n")
	if x.Baseline != "" {
		fmt.Fprintf(&b, "Baseline: `%s`.\n", x.Baseline)
	}
	fmt.Fprintf(&b, "\nExpansion: product %s → zip %d → exclude %d → include %d (%d added, %d extended) → rules %d to run.\n\n",
		CountString(x.Steps.Product), x.Steps.Zip, x.Steps.Exclude, x.Steps.Include, x.Steps.Added, x.Steps.Extended, x.Steps.Runnable)
	b.WriteString("| cell |")
	for _, a := range m.Axes {
		fmt.Fprintf(&b, " %s |", mdEscape(a.Name))
	}
	b.WriteString(" status |\n|---|")
	for range m.Axes {
		b.WriteString("---|")
	}
	b.WriteString("---|\n")
	for _, c := range x.Cells {
		fmt.Fprintf(&b, "| `%s` |", c.ID)
		for _, v := range c.Values {
			fmt.Fprintf(&b, " %s |", mdEscape(v.Shown()))
		}
		var st []string
		if c.ID == x.Baseline {
			st = append(st, "baseline")
		}
		if c.Pruned != nil {
			st = append(st, fmt.Sprintf("**pruned** by `%s`: %s", c.Pruned.Rule, mdEscape(c.Pruned.Reason)))
		} else {
			st = append(st, "run")
			if _, why := cellImage(m, c, opts.Refs); why != "" {
				st = append(st, "no job.yaml: "+why)
			}
		}
		for _, d := range c.Warnings {
			what := d.Action
			if d.Flag != "" {
				what += " " + d.Flag
			}
			st = append(st, fmt.Sprintf("%s `%s`", what, d.Rule))
		}
		fmt.Fprintf(&b, " %s |\n", strings.Join(st, "; "))
	}
	// Reasons once per rule, with their sources.
	seen := map[string]Decision{}
	for _, c := range x.Cells {
		if c.Pruned != nil {
			seen[c.Pruned.Rule] = *c.Pruned
		}
		for _, d := range c.Warnings {
			seen[d.Rule] = d
		}
	}
	if len(seen) > 0 {
		b.WriteString("\n## Rules that matched\n\n")
		for _, n := range sortedKeys(seen) {
			d := seen[n]
			fmt.Fprintf(&b, "- `%s` (%s): %s (source: %s)\n", n, d.Action, mdEscape(d.Reason), d.Source)
		}
	}
	if len(x.Notes) > 0 {
		b.WriteString("\n## Notes\n\n")
		for _, n := range x.Notes {
			fmt.Fprintf(&b, "- %s\n", mdEscape(n))
		}
	}
	return b.Bytes()
}

func slurm(x *Expansion) []byte {
	var ids []string
	gpus := 1
	for _, c := range x.Cells {
		if c.Pruned == nil {
			ids = append(ids, c.ID)
			gpus = max(gpus, c.TP)
		}
	}
	var b bytes.Buffer
	b.WriteString("#!/usr/bin/env bash\n")
	fmt.Fprintf(&b, "# Matrix %s as a Slurm job array, one task per runnable cell:\n", shell.Comment(x.Matrix.Name))
	b.WriteString("#   sbatch slurm.sbatch   (from this directory)\n")
	fmt.Fprintf(&b, "#SBATCH --job-name=%s\n", shell.Quote(SlugOr(x.Matrix.Name, "smpatch")))
	if len(ids) > 0 {
		fmt.Fprintf(&b, "#SBATCH --array=0-%d\n", len(ids)-1)
	}
	fmt.Fprintf(&b, "#SBATCH --gres=gpu:%d\n", gpus)
	b.WriteString("#SBATCH --nodes=1\n#SBATCH --exclusive\n#SBATCH --output=slurm-%A_%a.out\n")
	b.WriteString("set -euo pipefail\n")
	b.WriteString("cells=(\n")
	for _, id := range ids {
		fmt.Fprintf(&b, "  %s\n", shell.Quote(id))
	}
	b.WriteString(")\n")
	b.WriteString("dir=\"${SLURM_SUBMIT_DIR:-$(pwd)}\"\n")
	b.WriteString("exec bash \"$dir/${cells[$SLURM_ARRAY_TASK_ID]}/run.sh\"\n")
	return b.Bytes()
}

// Slug names the matrix in paths (matrix run's default results directory):
// its name as [a-z0-9.-], else its file's name without the extension, else
// "matrix".
func (m *Matrix) Slug() string {
	if t := slug(m.Name); t != "" {
		return t
	}
	base := filepath.Base(m.File)
	return SlugOr(strings.TrimSuffix(base, filepath.Ext(base)), "matrix")
}

// SlugOr is s as [a-z0-9.-] (other runs of characters become one dash, and
// none starts or ends it), or def when nothing is left.
func SlugOr(s, def string) string {
	if t := slug(s); t != "" {
		return t
	}
	return def
}
