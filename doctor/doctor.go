package doctor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/smpatch/smpatch/internal/lazyre"
	"github.com/smpatch/smpatch/probe"
	"github.com/smpatch/smpatch/source"
)

// Inputs are what one doctor pass reads. Anything left out is unknown,
// and the report says so.
type Inputs struct {
	// Tree is the sglang tree (a checkout, an installed package, an
	// image's); nil when none could be opened, NoTree says why.
	Tree   source.Tree
	NoTree string
	// Requires are the Requires-Dist lines of the installed sglang when
	// the tree is an image's (a checkout's pins are read from its
	// python/pyproject.toml, an installed package's from its dist-info).
	Requires []string
	// Host is the probe's report: the GPUs, driver, toolkit and the
	// packages installed beside the tree; nil when none, NoHost says why.
	Host     *probe.Report
	HostFrom string // "live probe", a report's path
	NoHost   string
	// ModelDir is --model; "" takes the launch's --model-path when it is
	// a local directory.
	ModelDir string
	// Launch is the server command line (nil for none).
	Launch []string
	// Env is the environment the launch runs in; the launch's own
	// NAME=VALUE words are laid over it.
	Env map[string]string
	// PatchFit, when set, says in a few words how a catalog patch a
	// remedy names fares on Tree ("applies (variant gate)", "already
	// applied", "does not apply: ..."); it is asked once per patch, only
	// for findings. Doctor knows no engine: the command supplies it.
	PatchFit func(ctx context.Context, patch string) string
}

// Report is one doctor pass: what it read, what the launch will meet
// (Findings), the rules it could not decide and why, and what it could
// not read.
type Report struct {
	Tree      string            `json:"tree"`
	Version   string            `json:"sglang_version"`
	Host      string            `json:"host"`
	Model     string            `json:"model"`
	Launch    []string          `json:"launch"`
	Findings  []Finding         `json:"findings"`
	Undecided []Undecided       `json:"undecided"`
	Unknown   map[string]string `json:"unknown"`
	Rules     int               `json:"rules"`
	Blockers  int               `json:"blockers"`
	Warnings  int               `json:"warnings"`
	Infos     int               `json:"infos"`
}

// Run reads the inputs into facts and decides every rule on them. Inputs
// that are not what they must be (a config.json that is missing or not
// JSON, an architecture the tree has no model for, a launch that is not
// sglang, a tree whose version cannot be read) are errors: *InputError,
// *NotSGLangError.
func Run(ctx context.Context, in Inputs, rules []*Rule) (*Report, error) {
	f := newFacts()
	rep := &Report{Launch: in.Launch, Unknown: map[string]string{}, Findings: []Finding{}, Undecided: []Undecided{}}
	if in.Launch == nil {
		rep.Launch = []string{}
	}
	var tr *treeReader
	if in.Tree != nil {
		tr = &treeReader{t: in.Tree}
		v, err := tr.version(ctx, in.Host)
		if err != nil {
			return nil, err
		}
		rep.Tree, rep.Version = in.Tree.Root(), v
		f.set("sglang.version", tr.versionFrom, v)
		tr.pins(f, in.Requires)
		compatFacts(f, v)
	} else {
		why := in.NoTree
		if why == "" {
			why = "no sglang tree given"
		}
		for _, fam := range []string{"sglang", "pin", "flag", "moe"} {
			f.unknownBecause(fam, why)
		}
	}
	hostFacts(f, in.Host, in.NoHost)
	rep.Host = in.HostFrom
	if in.Host == nil {
		rep.Host = "none: " + in.NoHost
	}
	env := map[string]string{}
	for k, v := range in.Env {
		env[k] = v
	}
	var findings []Finding
	modelDir := in.ModelDir
	if in.Launch != nil {
		l, err := ParseLaunch(in.Launch)
		if err != nil {
			return nil, err
		}
		for k, v := range l.Env {
			env[k] = v
		}
		f.set("launch.entry", "the launch", l.Entry)
		lf, err := launchFacts(f, tr, l)
		if err != nil {
			return nil, err
		}
		findings = append(findings, lf...)
		if modelDir == "" {
			modelDir = launchModelDir(f)
		}
	} else {
		f.unknownBecause("flag", "no launch given (smpatch doctor ... -- LAUNCH COMMAND)")
		f.unknownBecause("launch", "no launch given")
	}
	envFacts(f, env, in.Launch != nil)
	if err := modelFacts(f, tr, modelDir, in.ModelDir != "", rep); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	derivedFacts(f, tr)
	var e *evaluator
	if in.Tree != nil {
		e = newEvaluator(f, in.Tree, "")
		if in.PatchFit != nil {
			fits := map[string]string{}
			e.patchFit = func(name string) string {
				if v, ok := fits[name]; ok {
					return v
				}
				fits[name] = in.PatchFit(ctx, name)
				return fits[name]
			}
		}
	} else {
		e = newEvaluator(f, nil, in.NoTree)
	}
	for _, r := range rules {
		fd, ud := e.rule(r)
		switch {
		case fd != nil:
			findings = append(findings, *fd)
		case ud != nil:
			rep.Undecided = append(rep.Undecided, *ud)
		}
	}
	rep.Rules = len(rules)
	rep.Findings = sortFindings(findings)
	for _, fd := range rep.Findings {
		switch fd.Severity {
		case Blocker:
			rep.Blockers++
		case Warning:
			rep.Warnings++
		default:
			rep.Infos++
		}
	}
	for k, v := range f.Unknown() {
		rep.Unknown[k] = v
	}
	return rep, nil
}

// sortFindings orders findings blockers first, then warnings, then info,
// each by rule id.
func sortFindings(fs []Finding) []Finding {
	rank := map[Severity]int{Blocker: 0, Warning: 1, Info: 2}
	out := append([]Finding{}, fs...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0; j-- {
			a, b := out[j-1], out[j]
			if rank[a.Severity] < rank[b.Severity] || rank[a.Severity] == rank[b.Severity] && a.Rule <= b.Rule {
				break
			}
			out[j-1], out[j] = b, a
		}
	}
	return out
}

// envFacts records the environment the launch runs in: env.NAME for the
// variables the rules read are known, set or not.
func envFacts(f *Facts, env map[string]string, launch bool) {
	from := "environment"
	if launch {
		from = "the launch's environment"
	}
	f.envFrom = from
	f.env = env
}

// launchModelDir is the launch's --model-path when it is a local directory.
func launchModelDir(f *Facts) string {
	p := f.first("flag.model_path")
	if p == "" {
		return ""
	}
	if st, err := os.Stat(p); err == nil && st.IsDir() {
		return p
	}
	return ""
}

// modelFacts reads the model directory (explicit: --model) and checks its
// architecture against the tree's models.
func modelFacts(f *Facts, tr *treeReader, dir string, explicit bool, rep *Report) error {
	if dir == "" {
		why := "no --model, and the launch's --model-path is not a local directory"
		if p := f.first("flag.model_path"); p != "" {
			why = "--model-path " + p + " is not a local directory: its config.json was not read"
		} else if _, ok, _ := f.Lookup("flag.model_path"); !ok {
			why = "no --model and no launch"
		}
		f.unknownBecause("model", why)
		f.unknownBecause("moe", why)
		f.unknownBecause("attn", why)
		rep.Model = "none: " + why
		return nil
	}
	m, err := ReadModel(dir)
	if err != nil {
		return err
	}
	archs, err := m.Architectures()
	if err != nil {
		return &InputError{Where: dir + "/config.json", Why: err.Error()}
	}
	rep.Model = dir
	if tr != nil {
		known, err := tr.modelClasses()
		if err != nil {
			return err
		}
		if known != nil && !anyIn(archs, known) {
			if _, ok := m.Config["auto_map"]; !ok {
				return &InputError{Where: dir + "/config.json", Why: fmt.Sprintf("architectures %s: no model class of this sglang tree implements it (%s/*.py EntryClass), and config.json has no auto_map for the Transformers backend", strings.Join(archs, ", "), modelsDir)}
			}
		}
	}
	m.addFacts(f, archs)
	return nil
}

func anyIn(xs []string, set map[string]bool) bool {
	for _, x := range xs {
		if set[x] {
			return true
		}
	}
	return false
}

// treeReader reads what the facts need from the sglang tree, each file
// once.
type treeReader struct {
	t           source.Tree
	versionFrom string
	sa          *ServerArgs
	saErr       error
	saRead      bool
}

// version is the tree's sglang version: what the tree says (version.py,
// dist-info, a git tag), else python/sglang/_version.py (which pip
// install -e writes from setuptools-scm), else the installed sglang the
// report shows at the tree's own location. Unknown is an *InputError.
func (tr *treeReader) version(ctx context.Context, host *probe.Report) (string, error) {
	v, from, err := tr.t.Version(ctx)
	if err != nil {
		return "", err
	}
	if v != nil {
		tr.versionFrom = from
		return source.VersionString(v), nil
	}
	if data, err := tr.t.ReadFile(scmVersionFile); err == nil {
		if loc := scmVersionRe().FindSubmatchIndex(data); loc != nil {
			if pv, err := source.ParseVersion(string(data[loc[2]:loc[3]])); err == nil {
				tr.versionFrom = fmt.Sprintf("%s:%d", scmVersionFile, lineAt(data, loc[0]))
				return source.VersionString(pv), nil
			}
		}
	}
	return "", &InputError{Where: tr.t.Root(), Why: "the sglang version is unknown (" + strings.TrimPrefix(from, "unknown: ") + "); a checkout installed with pip install -e has python/sglang/_version.py, an installed sglang its dist-info"}
}

// scmVersionFile is what setuptools-scm writes at install (sglang's
// pyproject names it): "__version__ = version = '0.5.18'".
const scmVersionFile = "python/sglang/_version.py"

var scmVersionRe = lazyre.New(`(?m)^__version__\s*=\s*(?:version\s*=\s*)?['"]([^'"]+)['"]`)

// serverArgs is the tree's server_args.py, read once.
func (tr *treeReader) serverArgs() (*ServerArgs, error) {
	if !tr.saRead {
		tr.saRead = true
		data, err := tr.t.ReadFile(ServerArgsFile)
		if err != nil {
			tr.saErr = fmt.Errorf("%s: %w", ServerArgsFile, err)
		} else if tr.sa, err = ParseServerArgs(data); err != nil {
			tr.saErr = err
		}
	}
	return tr.sa, tr.saErr
}

func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }

var fsErrNotExist = fs.ErrNotExist
