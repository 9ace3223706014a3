package matrix

import (
	"github.com/smpatch/smpatch/internal/tomlfile"
	"regexp"
	"time"
)

// DefaultMaxCells caps an expansion when neither the file (max_cells) nor
// ExpandOptions.MaxCells says otherwise.
const DefaultMaxCells = 256

// MaxFileCells is the most cells a matrix file's own max_cells may ask for:
// a file from elsewhere must not make smpatch expand, render or build
// millions of cells (gigabytes of memory and disk). More takes the user's
// own ExpandOptions.MaxCells (--max-cells).
const MaxFileCells = 65536

// PatchesAxis is the one axis with a fixed meaning: each value is a list of
// catalog patch names.
const PatchesAxis = "patches"

// Matrix is a loaded matrix file. Load validates it completely; Expand turns
// it into cells.
type Matrix struct {
	File     string // the path it was loaded from, for messages
	Name     string
	Project  string
	MaxCells int    // 0: DefaultMaxCells
	ArchAxis string // the axis holding the GPU architecture (SM), "" when none

	Base    Base
	Axes    []*Axis                       // in the order written in the file
	Presets map[string]map[string]*Preset // axis -> preset name -> preset
	Zip     [][]string                    // groups of axes that vary together
	Exclude []*Match
	Include []*Include
	// IDPrefix gives an axis a short prefix for its values in cell ids
	// (cuda_graph_max_bs = "cgbs" makes "cgbs128").
	IDPrefix map[string]string
	Launch   Launch
	// RuleFiles are the files named by the matrix's rules = [...], resolved
	// against the matrix file's directory.
	RuleFiles []string

	rules []*Rule // loaded from RuleFiles
	// requireRules are the [requires.PATCH] tables as prune rules.
	requireRules []*Rule
	lines        *tomlfile.Lines
	src          []string // the file's lines
	axis         map[string]int
}

// Base is what every cell starts from: a container image or a Python
// environment on the host.
type Base struct {
	// Image is a registry reference, oci:DIR (an OCI layout) or a
	// docker-save tarball.
	Image string `json:"image,omitempty" toml:"image"`
	// Python is the interpreter of a host environment (a venv's bin/python).
	Python string `json:"python,omitempty" toml:"python"`
}

// Axis is one dimension of the matrix.
type Axis struct {
	Name    string  `json:"name"`
	Values  []Value `json:"values"`
	Presets bool    `json:"presets,omitempty"` // values are preset names
	Line    int     `json:"line"`
}

// Value is one value of an axis. Scalars keep their TOML text form; a patch
// set keeps its names in List and their comma-joined form in Text.
type Value struct {
	Text string   `json:"value"`
	List []string `json:"list,omitempty"`
	Kind string   `json:"kind"` // string, int, float, bool, list
}

// Shown is the value as people read it: a patch set in brackets.
func (v Value) Shown() string {
	if v.Kind == "list" {
		return "[" + v.Text + "]"
	}
	return v.Text
}

// AxisValue is a cell's value on one axis.
type AxisValue struct {
	Axis string `json:"axis"`
	Value
}

// Preset is a named bundle of environment variables and server flags,
// selected by an axis value.
type Preset struct {
	Name string            `json:"name"`
	Env  map[string]string `json:"env,omitempty"`
	Args []string          `json:"args,omitempty"`
	Line int               `json:"line"`
}

// Match is an exclude entry (or a baseline): it matches a cell when, for
// every axis it names, the cell's value is one of the listed values.
type Match struct {
	Values map[string][]Value
	Line   int
}

// Include adds a cell (when it names every axis and no cell has those
// values) or extends every cell it matches with env and args. It never
// overwrites a value: a conflicting env variable or flag is an error.
type Include struct {
	Values map[string]Value
	ID     string // optional explicit cell id
	Env    map[string]string
	Args   []string
	Line   int
}

// Launch says how a cell is started and measured. Command, Env values,
// Workdir, Health and Bench are text/template strings over the axis values
// ({{.axis}}) and the cell id ({{.id}}).
type Launch struct {
	Command        []string          `json:"command"`
	Env            map[string]string `json:"env,omitempty"`
	Workdir        string            `json:"workdir,omitempty"`
	Health         string            `json:"health,omitempty"`
	Bench          []string          `json:"bench,omitempty"`
	Metrics        []Metric          `json:"metrics,omitempty"`
	StartupTimeout time.Duration     `json:"startup_timeout"`
	BenchTimeout   time.Duration     `json:"bench_timeout"`
	// TP is the tensor-parallel size (GPUs per cell) when no tp axis exists;
	// 0 means "read --tp/--tp-size from the command".
	TP int `json:"tp,omitempty"`
	// Repeat is how many times each cell runs, a fresh server each time.
	Repeat int `json:"repeat,omitempty"`
	// Baseline selects the cell others are compared with.
	Baseline *Match `json:"-"`
	// BaselineID is the baseline given as a cell id.
	BaselineID string `json:"-"`
}

// Metric is a named regular expression whose first group is the number read
// from the bench output.
type Metric struct {
	Name  string         `json:"name"`
	Regex string         `json:"regex"`
	Re    *regexp.Regexp `json:"-"`
}

// Default launch timeouts.
const (
	DefaultStartupTimeout = 30 * time.Minute
	DefaultBenchTimeout   = 20 * time.Minute
)

// Cell is one variant of the matrix.
type Cell struct {
	ID      string            `json:"id"`
	Values  []AxisValue       `json:"values"` // in axis order
	Env     map[string]string `json:"env"`
	Args    []string          `json:"args"` // server flags from presets, includes and rules
	Patches []string          `json:"patches"`
	Command []string          `json:"command"` // rendered, Args appended
	Workdir string            `json:"workdir,omitempty"`
	Health  string            `json:"health,omitempty"`
	Bench   []string          `json:"bench,omitempty"`
	TP      int               `json:"tp,omitempty"`
	SM      string            `json:"sm,omitempty"` // from the arch axis, "12.0"
	// Origin is "product" or "include FILE:LINE".
	Origin   string     `json:"origin"`
	Extended []string   `json:"extended_by,omitempty"` // include entries that added env or args
	Pruned   *Decision  `json:"pruned,omitempty"`
	Warnings []Decision `json:"warnings,omitempty"`

	idx []int // value index per axis (-1: a value only an include named)
}

// Decision is what a rule did to a cell. A pruning Decision is shared by
// every cell the rule pruned: treat it as read-only.
type Decision struct {
	Rule   string `json:"rule"`
	Action string `json:"action"` // prune, warn, require-flag
	Reason string `json:"reason"`
	Source string `json:"source,omitempty"`
	Where  string `json:"where"`          // rules file:line
	Flag   string `json:"flag,omitempty"` // require-flag: the flag added
}

// Value returns the cell's value on an axis.
func (c *Cell) Value(axis string) (Value, bool) {
	for _, v := range c.Values {
		if v.Axis == axis {
			return v.Value, true
		}
	}
	return Value{}, false
}

// Runnable reports whether no rule pruned the cell.
func (c *Cell) Runnable() bool { return c.Pruned == nil }
