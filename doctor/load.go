package doctor

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
	"sync"

	"github.com/smpatch/smpatch/internal/lazyre"
	"github.com/smpatch/smpatch/internal/tomlfile"
)

// builtinRules are the rule files of rules/ (ID.toml), with the windows
// measured on sglang's history (windows.json).
//
//go:embed rules/*.toml rules/windows.json
var builtinRules embed.FS

// ruleFile is one ID.toml as the decoder fills it.
type ruleFile struct {
	Title    string   `toml:"title"`
	Severity string   `toml:"severity"`
	Happens  string   `toml:"happens"`
	Note     string   `toml:"note"`
	Sources  []string `toml:"sources"`
	When     []Cond   `toml:"when"`
	Remedy   []Remedy `toml:"remedy"`
}

var ruleIDRe = lazyre.New(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// ParseRule decodes and checks one rule file; name is its file name
// (ID.toml), which gives the rule its id.
func ParseRule(name string, data []byte) (*Rule, error) {
	id, ok := strings.CutSuffix(path.Base(name), ".toml")
	if !ok || !ruleIDRe().MatchString(id) {
		return nil, fmt.Errorf("%s: a rule file is named ID.toml, ID in lower case words joined by -", name)
	}
	var rf ruleFile
	md, err := tomlfile.Decode(name, data, &rf)
	if err != nil {
		return nil, err
	}
	lines := tomlfile.IndexLines(data)
	if err := tomlfile.UnknownError(name, md, nil, lines.Line); err != nil {
		return nil, err
	}
	r := &Rule{ID: id, Title: rf.Title, Severity: Severity(rf.Severity), Happens: strings.TrimSpace(rf.Happens), Note: strings.TrimSpace(rf.Note),
		Sources: rf.Sources, When: rf.When, Remedy: rf.Remedy, File: name}
	bad := func(key string, format string, args ...any) error {
		return tomlfile.Errorf(name, lines.Line([]string{key}), format, args...)
	}
	switch {
	case strings.TrimSpace(r.Title) == "":
		return nil, bad("title", "no title")
	case r.Severity != Blocker && r.Severity != Warning && r.Severity != Info:
		return nil, bad("severity", "severity %q: want blocker, warning or info", rf.Severity)
	case r.Happens == "":
		return nil, bad("happens", "no happens: what the launch meets (the error text, or \"runs, but slower: ...\")")
	case len(r.Sources) == 0:
		return nil, bad("sources", "no sources: the issue or pull request the rule comes from")
	case len(r.When) == 0:
		return nil, bad("when", "no [[when]] conditions")
	case len(r.Remedy) == 0:
		return nil, bad("remedy", "no [[remedy]]")
	}
	for _, s := range r.Sources {
		if !strings.HasPrefix(s, "https://") {
			return nil, bad("sources", "source %q: want an https:// address", s)
		}
	}
	for i := range r.When {
		where := fmt.Sprintf("when %d", i+1)
		if err := r.When[i].check(where); err != nil {
			return nil, tomlfile.Errorf(name, lines.Line([]string{"when", fmt.Sprint(i)}), "%v", err)
		}
	}
	for i, rm := range r.Remedy {
		if rm.kinds() != 1 {
			return nil, tomlfile.Errorf(name, lines.Line([]string{"remedy", fmt.Sprint(i)}), "remedy %d: exactly one of patch, flag, env, install, setting, run", i+1)
		}
	}
	return r, nil
}

// LoadRules reads every ID.toml of dir in fsys, sorted by id.
func LoadRules(fsys fs.FS, dir string) ([]*Rule, error) {
	names, err := fs.Glob(fsys, path.Join(dir, "*.toml"))
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%s: no rule files (ID.toml)", dir)
	}
	var rules []*Rule
	for _, n := range names {
		data, err := tomlfile.ReadFile(fsys, n)
		if err != nil {
			return nil, err
		}
		r, err := ParseRule(n, data)
		if err != nil {
			return nil, err
		}
		rules = append(rules, r)
	}
	sort.Slice(rules, func(i, j int) bool { return rules[i].ID < rules[j].ID })
	return rules, nil
}

var builtin struct {
	once  sync.Once
	rules []*Rule
	err   error
}

// Rules are the built-in rules, sorted by id, loaded once.
func Rules() ([]*Rule, error) {
	builtin.once.Do(func() {
		builtin.rules, builtin.err = LoadRules(builtinRules, "rules")
		if builtin.err != nil {
			builtin.err = errors.Join(errors.New("the built-in doctor rules"), builtin.err)
		}
	})
	return builtin.rules, builtin.err
}
