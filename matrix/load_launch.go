package matrix

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/smpatch/smpatch/internal/lazyre"
)

// The [launch] and [requires.PATCH] tables of a matrix file.

type fileRequires struct {
	TP     []int64 `toml:"tp"`
	P2P    *bool   `toml:"p2p"`
	NVLink *bool   `toml:"nvlink"`
}

type fileLaunch struct {
	Command        []string          `toml:"command"`
	Env            map[string]string `toml:"env"`
	Workdir        string            `toml:"workdir"`
	Health         string            `toml:"health"`
	Bench          []string          `toml:"bench"`
	Metric         string            `toml:"metric"`
	Metrics        map[string]string `toml:"metrics"`
	StartupTimeout string            `toml:"startup_timeout"`
	BenchTimeout   string            `toml:"bench_timeout"`
	TP             int64             `toml:"tp"`
	Baseline       any               `toml:"baseline"`
	Repeat         int64             `toml:"repeat"`
}

func (m *Matrix) loadLaunch(fl fileLaunch) error {
	l := &m.Launch
	if len(fl.Command) == 0 {
		return m.errf(m.line("launch"), "launch.command is missing: a matrix needs a command to start each cell")
	}
	l.Command = fl.Command
	l.Env = map[string]string{}
	for _, k := range sortedKeys(fl.Env) {
		if !envKeyRe().MatchString(k) {
			return m.errf(m.line("launch", "env", k), "launch.env: %q is not an environment variable name", k)
		}
		if err := envValueErr(fl.Env[k]); err != nil {
			return m.errf(m.line("launch", "env", k), "launch.env.%s: %v", k, err)
		}
		l.Env[k] = fl.Env[k]
	}
	l.Workdir, l.Health, l.Bench = fl.Workdir, fl.Health, fl.Bench
	// What reaches run.sh is refused here, with its line, when no line of
	// a script can carry it; a template's output is checked per cell.
	for _, f := range []struct {
		key  string
		list []string
	}{{"command", l.Command}, {"bench", l.Bench}, {"workdir", []string{l.Workdir}}, {"health", []string{l.Health}}} {
		for i, s := range f.list {
			if err := textErr(s); err != nil {
				where := "launch." + f.key
				if len(f.list) > 1 || f.key == "command" || f.key == "bench" {
					where = fmt.Sprintf("%s[%d]", where, i)
				}
				return m.errf(m.lineOf(m.line("launch", f.key), s), "%s: %v", where, err)
			}
		}
	}
	if fl.Metric != "" {
		if fl.Metrics == nil {
			fl.Metrics = map[string]string{}
		}
		if _, dup := fl.Metrics["metric"]; dup {
			return m.errf(m.line("launch", "metric"), "launch.metric and launch.metrics.metric are both set")
		}
		fl.Metrics["metric"] = fl.Metric
	}
	for _, name := range sortedKeys(fl.Metrics) {
		line := m.line("launch", "metrics", name)
		if name == "metric" && fl.Metric != "" {
			line = m.line("launch", "metric")
		}
		re, err := lazyre.Compile(fl.Metrics[name])
		if err != nil {
			return m.errf(line, "launch metric %q: %v", name, err)
		}
		if re.NumSubexp() < 1 {
			return m.errf(line, "launch metric %q: the regex needs a group around the number", name)
		}
		l.Metrics = append(l.Metrics, Metric{Name: name, Regex: fl.Metrics[name], Re: re})
	}
	var err error
	if l.StartupTimeout, err = duration(fl.StartupTimeout, DefaultStartupTimeout); err != nil {
		return m.errf(m.line("launch", "startup_timeout"), "launch.startup_timeout: %v", err)
	}
	if l.BenchTimeout, err = duration(fl.BenchTimeout, DefaultBenchTimeout); err != nil {
		return m.errf(m.line("launch", "bench_timeout"), "launch.bench_timeout: %v", err)
	}
	if fl.TP < 0 || fl.TP > 1024 {
		return m.errf(m.line("launch", "tp"), "launch.tp: %d is not a GPU count", fl.TP)
	}
	l.TP = int(fl.TP)
	if fl.Repeat < 0 || fl.Repeat > 1000 {
		return m.errf(m.line("launch", "repeat"), "launch.repeat: %d is not a number of runs per cell (1 to 1000)", fl.Repeat)
	}
	l.Repeat = max(int(fl.Repeat), 1)
	switch b := fl.Baseline.(type) {
	case nil:
	case string:
		l.BaselineID = b
	case map[string]any:
		x, err := m.parseMatch(b, "launch", "baseline")
		if err != nil {
			return err
		}
		l.Baseline = x
	default:
		return m.errf(m.line("launch", "baseline"), "launch.baseline: want a cell id or a table of axis values")
	}
	// Every template field must name an axis (or the cell id).
	check := func(where string, line int, s string) error {
		if err := checkTemplate(s, m.axis); err != nil {
			return m.errf(m.lineOf(line, s), "%s: %v%s", where, err, m.axisHint())
		}
		return nil
	}
	for i, s := range l.Command {
		if err := check(fmt.Sprintf("launch.command[%d]", i), m.line("launch", "command"), s); err != nil {
			return err
		}
	}
	for i, s := range l.Bench {
		if err := check(fmt.Sprintf("launch.bench[%d]", i), m.line("launch", "bench"), s); err != nil {
			return err
		}
	}
	for _, k := range sortedKeys(l.Env) {
		if err := check("launch.env."+k, m.line("launch", "env", k), l.Env[k]); err != nil {
			return err
		}
	}
	if err := check("launch.workdir", m.line("launch", "workdir"), l.Workdir); err != nil {
		return err
	}
	return check("launch.health", m.line("launch", "health"), l.Health)
}

// lineOf finds the line at or after start (a key's line) that holds text,
// for the elements of a list written over several lines.
func (m *Matrix) lineOf(start int, text string) int {
	if start <= 0 || text == "" {
		return start
	}
	for i := start - 1; i < len(m.src) && i < start+500; i++ {
		if strings.Contains(m.src[i], text) {
			return i + 1
		}
	}
	return start
}

func duration(s string, def time.Duration) (time.Duration, error) {
	if s == "" {
		return def, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, err
	}
	if d <= 0 {
		return 0, fmt.Errorf("%s is not a positive duration", s)
	}
	if d > MaxLaunchTimeout {
		return 0, fmt.Errorf("%s is longer than %s", s, MaxLaunchTimeout)
	}
	return d, nil
}

// MaxLaunchTimeout bounds startup_timeout and bench_timeout (30 days):
// their sum is a pod's activeDeadlineSeconds and a Slurm task's --time,
// and past about 290 years it would overflow into a negative one.
const MaxLaunchTimeout = 30 * 24 * time.Hour

// envValueErr refuses what an environment file (KEY=VALUE per line, as
// docker --env-file reads it) cannot hold: a line break or a NUL.
func envValueErr(v string) error {
	if strings.ContainsAny(v, "\n\r\x00") {
		return fmt.Errorf("value %q has a line break or NUL: an environment file cannot hold it", shortText(v))
	}
	return textErr(v)
}

// catalogTPRules are prune rules for the [requires] tp of the catalog
// patches the matrix uses (sizes names them): a cell with such a patch at
// another TP is pruned before every other rule, whatever the host has.
func (m *Matrix) catalogTPRules(sizes func(string) ([]int, string)) []*Rule {
	seen := map[string]bool{}
	var names []string
	_ = m.CheckPatches(func(p string) error {
		if !seen[p] {
			seen[p] = true
			names = append(names, p)
		}
		return nil
	})
	slices.Sort(names)
	var rules []*Rule
	for _, p := range names {
		tp, where := sizes(p)
		if len(tp) == 0 {
			continue
		}
		rules = append(rules, &Rule{Name: "catalog-requires-" + p + "-tp", Action: "prune",
			Reason: fmt.Sprintf("%s is for tensor parallel %v only (its [requires] tp)", p, tp),
			Source: where, Where: where, when: cond{patches: []string{p}, tpOutside: tp}, file: where})
	}
	return rules
}

// loadRequires turns [requires.PATCH] tables into prune rules that run
// before every other rule: a cell with the patch is pruned when its TP is
// not one of tp, or when the probe report shows NVLink (nvlink = false),
// no NVLink (nvlink = true) or a pair of GPUs without P2P (p2p = true).
func (m *Matrix) loadRequires(req map[string]fileRequires) error {
	for _, patch := range sortedKeys(req) {
		r := req[patch]
		line := m.line("requires", patch)
		where := fmt.Sprintf("%s:%d", m.File, line)
		if patch == "" || slug(patch) != patch {
			return m.errf(line, "requires.%s: a patch name is lower case letters, digits, '.' and '-'", patch)
		}
		add := func(kind, reason string, c cond) {
			c.patches = []string{patch}
			m.requireRules = append(m.requireRules, &Rule{Name: "requires-" + patch + "-" + kind, Action: "prune",
				Reason: reason, Source: where, Where: where, NeedsProbe: c.nvlink != nil || c.p2p != nil, when: c, file: m.File})
		}
		if len(r.TP) > 0 {
			var tp []int
			for _, n := range r.TP {
				if n < 1 || n > 1024 {
					return m.errf(m.line("requires", patch, "tp"), "requires.%s.tp: %d is not a tensor-parallel size", patch, n)
				}
				tp = append(tp, int(n))
			}
			add("tp", fmt.Sprintf("%s is for tensor parallel %v only", patch, tp), cond{tpOutside: tp})
		}
		if r.NVLink != nil {
			linked := !*r.NVLink
			why := patch + " is for GPUs without NVLink; the probe report shows NVLink"
			if *r.NVLink {
				why = patch + " needs NVLink; the probe report shows none"
			}
			add("nvlink", why, cond{nvlink: &linked})
		}
		if r.P2P != nil {
			if !*r.P2P {
				return m.errf(m.line("requires", patch, "p2p"), "requires.%s.p2p = false: a cell cannot require P2P to be missing; leave it out", patch)
			}
			no := false
			add("p2p", patch+" needs P2P between every pair of GPUs; the probe report shows a pair without", cond{p2p: &no})
		}
	}
	return nil
}
