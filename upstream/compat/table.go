package compat

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/smpatch/smpatch/internal/lazyre"
	"github.com/smpatch/smpatch/source"
)

// Format is the version of the table's layout this package reads.
const Format = 1

// Table is the compatibility table: every sglang revision read, every
// flashinfer revision read, and every flashinfer name the sglang revisions
// use, resolved in each flashinfer revision.
type Table struct {
	Format  int     `json:"format"`
	Sources Sources `json:"sources"`
	// FlashInfer and SGLang are oldest first (PEP 440 order of their
	// tags), the main branch last.
	FlashInfer []FlashInfer `json:"flashinfer"`
	SGLang     []SGLang     `json:"sglang"`
	// Symbols are sorted by name; each one's runs cover FlashInfer in order.
	Symbols []Symbol `json:"symbols"`
	// MainPins are the changes of sglang main's flashinfer pin over the
	// first-parent history read, oldest first.
	MainPins []PinChange `json:"main_pins,omitempty"`

	bySymbol map[string]*Symbol
	fiIndex  map[string]int
}

// Sources says what was read.
type Sources struct {
	SGLang     Source  `json:"sglang"`
	SGLangMain *Source `json:"sglang_main,omitempty"`
	FlashInfer Source  `json:"flashinfer"`
	// FusionPath are the sglang files whose flashinfer names are the fused
	// all-reduce's.
	FusionPath []string `json:"fusion_path"`
	// Module is the flashinfer JIT module of the fused all-reduce and Major
	// the GPU major its verdicts are for.
	Module string `json:"module"`
	Major  int    `json:"major"`
}

// Source is one history read.
type Source struct {
	Tags   []string `json:"tags,omitempty"`   // the release tags read, oldest first
	Branch string   `json:"branch,omitempty"` // the branch read as main
	Head   string   `json:"head,omitempty"`   // its newest commit
	Date   string   `json:"date,omitempty"`   // that commit's date
	Since  string   `json:"since,omitempty"`  // main's pin history read from this date
}

// Revision is one commit read: a release tag, or a branch's newest commit.
type Revision struct {
	Ref     string `json:"ref"`               // "v0.6.17", or "main"
	Version string `json:"version,omitempty"` // the tag's PEP 440 version; "" for a branch
	Commit  string `json:"commit"`
	Date    string `json:"date"` // committer date, YYYY-MM-DD
}

// Name is the version, or the ref of a branch.
func (r Revision) Name() string {
	if r.Version != "" {
		return r.Version
	}
	return r.Ref
}

// FlashInfer is one flashinfer revision.
type FlashInfer struct {
	Revision
	Fusion Fusion `json:"fusion_sm12"`
}

// Fusion is whether a flashinfer revision builds the fused all-reduce
// module for SM12x, and the code that says so.
type Fusion struct {
	Verdict string `json:"verdict"` // Yes, No or "unknown"
	// Gate is where the JIT gate is and what it admits: "flashinfer/jit/
	// comm.py:192: supported_major_versions=[9, 10, 12]".
	Gate string `json:"gate,omitempty"`
	// Guards counts the `__CUDA_ARCH__ < 1200`-style conditions in the
	// module's comm headers that compile SM12x out; GuardAt is the first.
	Guards  int      `json:"guards"`
	GuardAt string   `json:"guard_at,omitempty"`
	Reasons []string `json:"reasons"`
}

// The fusion verdicts.
const (
	Yes = "yes"
	No  = "no"
)

// SGLang is one sglang revision: its pin and the flashinfer names it uses.
type SGLang struct {
	Revision
	Pin  Pin   `json:"pin"`
	Uses []Use `json:"uses"`
}

// Pin is the flashinfer an sglang tree asks for, with where each part was
// read ("python/pyproject.toml:35").
type Pin struct {
	FlashInfer     string `json:"flashinfer_python,omitempty"` // the exact version (==); "" when not pinned exactly
	Spec           string `json:"spec,omitempty"`              // the requirement as written
	FlashInferFrom string `json:"flashinfer_python_from,omitempty"`
	Cubin          string `json:"flashinfer_cubin,omitempty"`
	CubinFrom      string `json:"flashinfer_cubin_from,omitempty"`
	JITCache       string `json:"flashinfer_jit_cache,omitempty"`
	JITCacheFrom   string `json:"flashinfer_jit_cache_from,omitempty"`
}

// Use is one flashinfer name an sglang tree uses.
type Use struct {
	Symbol string `json:"symbol"`           // "flashinfer.comm.allreduce_fusion"
	Fusion bool   `json:"fusion,omitempty"` // used in the fusion path's files
	At     string `json:"at"`               // the first use: "python/sglang/...py:99"
	Files  int    `json:"files"`            // files that use it
	// Kwargs are the keywords its calls pass; Guarded those passed only
	// under a condition (sglang checks the signature first); Unread the
	// **expansions whose keys were not read.
	Kwargs  []string `json:"kwargs,omitempty"`
	Guarded []string `json:"guarded,omitempty"`
	Unread  []string `json:"unread,omitempty"`
	// Tried: every use is inside a try block; sglang copes with its
	// absence there.
	Tried bool `json:"tried,omitempty"`
}

// Symbol is one flashinfer name across the flashinfer revisions.
type Symbol struct {
	Name string `json:"name"`
	Runs []Run  `json:"runs"`
}

// Run is a stretch of consecutive flashinfer revisions (in Table order)
// where a name resolves the same way.
type Run struct {
	From        string   `json:"from"` // ref of the first revision
	To          string   `json:"to"`   // ref of the last
	State       string   `json:"state"`
	Kind        string   `json:"kind,omitempty"` // module, function, class, value
	File        string   `json:"file,omitempty"`
	Params      []string `json:"params,omitempty"`
	VarKw       bool     `json:"var_kw,omitempty"`
	ParamsKnown bool     `json:"params_known,omitempty"`
	Why         string   `json:"why,omitempty"`
}

// The states of a name in a flashinfer revision.
const (
	Present = "present"
	Missing = "missing"
	Unknown = "unknown"
)

// PinChange is a commit of sglang main that changed its flashinfer pin.
type PinChange struct {
	Commit     string `json:"commit"`
	Date       string `json:"date"`
	Subject    string `json:"subject"`
	FlashInfer string `json:"flashinfer_python"`
	From       string `json:"from"`
}

//go:embed compat.json
var embedded []byte

var defaultTable = sync.OnceValues(func() (*Table, error) { return Parse(embedded) })

// Default is the table embedded in the binary.
func Default() (*Table, error) { return defaultTable() }

// Parse reads a table written by the generator.
func Parse(data []byte) (*Table, error) {
	var t Table
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&t); err != nil {
		return nil, fmt.Errorf("compatibility table: %w", err)
	}
	if t.Format != Format {
		return nil, fmt.Errorf("compatibility table: format %d, this smpatch reads %d", t.Format, Format)
	}
	t.index()
	for _, s := range t.Symbols {
		for _, r := range s.Runs {
			if _, ok := t.fiIndex[r.From]; !ok {
				return nil, fmt.Errorf("compatibility table: %s: run from %q, which is no flashinfer revision of the table", s.Name, r.From)
			}
			if _, ok := t.fiIndex[r.To]; !ok {
				return nil, fmt.Errorf("compatibility table: %s: run to %q, which is no flashinfer revision of the table", s.Name, r.To)
			}
		}
	}
	return &t, nil
}

func (t *Table) index() {
	t.bySymbol = make(map[string]*Symbol, len(t.Symbols))
	for i := range t.Symbols {
		t.bySymbol[t.Symbols[i].Name] = &t.Symbols[i]
	}
	t.fiIndex = make(map[string]int, len(t.FlashInfer))
	for i, f := range t.FlashInfer {
		t.fiIndex[f.Ref] = i
	}
}

// Marshal writes t as the generator does: indented JSON, each use and each
// run on one line, so that a change reads as a change of lines.
func (t *Table) Marshal() ([]byte, error) {
	var b bytes.Buffer
	one := func(v any) error {
		data, err := json.Marshal(v)
		b.Write(data)
		return err
	}
	head := *t
	head.FlashInfer, head.SGLang, head.Symbols, head.MainPins = nil, nil, nil, nil
	data, err := json.MarshalIndent(struct {
		Format  int     `json:"format"`
		Sources Sources `json:"sources"`
	}{head.Format, head.Sources}, "", "  ")
	if err != nil {
		return nil, err
	}
	b.Write(bytes.TrimSuffix(data, []byte("\n}")))
	list := func(name string, n int, each func(i int) error) error {
		fmt.Fprintf(&b, ",\n  %q: [", name)
		for i := range n {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString("\n    ")
			if err := each(i); err != nil {
				return err
			}
		}
		if n > 0 {
			b.WriteString("\n  ")
		}
		b.WriteString("]")
		return nil
	}
	errs := []error{
		list("flashinfer", len(t.FlashInfer), func(i int) error { return one(t.FlashInfer[i]) }),
		list("sglang", len(t.SGLang), func(i int) error {
			s := t.SGLang[i]
			uses := s.Uses
			s.Uses = nil
			data, err := json.Marshal(s)
			if err != nil {
				return err
			}
			b.Write(bytes.TrimSuffix(data, []byte("}")))
			b.WriteString(`,"uses":[`)
			for j, u := range uses {
				if j > 0 {
					b.WriteString(",")
				}
				b.WriteString("\n      ")
				if err := one(u); err != nil {
					return err
				}
			}
			b.WriteString("]}")
			return nil
		}),
		list("symbols", len(t.Symbols), func(i int) error {
			s := t.Symbols[i]
			fmt.Fprintf(&b, `{"name":%q,"runs":[`, s.Name)
			for j, r := range s.Runs {
				if j > 0 {
					b.WriteString(",")
				}
				b.WriteString("\n      ")
				if err := one(r); err != nil {
					return err
				}
			}
			b.WriteString("]}")
			return nil
		}),
		list("main_pins", len(t.MainPins), func(i int) error { return one(t.MainPins[i]) }),
	}
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	b.WriteString("\n}\n")
	// What is written must read back.
	if _, err := Parse(b.Bytes()); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// sameVersion reports whether two PEP 440 versions are the same release
// (a local label, "+cu130", aside).
func sameVersion(a, b string) bool {
	a, _, _ = strings.Cut(strings.TrimSpace(a), "+")
	b, _, _ = strings.Cut(strings.TrimSpace(b), "+")
	if a == "" || b == "" {
		return false
	}
	va, err := source.ParseVersion(a)
	if err != nil {
		return false
	}
	vb, err := source.ParseVersion(b)
	if err != nil {
		return false
	}
	return source.ComparePEP440(va, vb) == 0
}

// isRelease reports whether v is a final release or a post release (no
// rc, dev).
func isRelease(v string) bool {
	pv, err := source.ParseVersion(v)
	return err == nil && releaseRe().MatchString(source.VersionString(pv))
}

var releaseRe = lazyre.New(`^\d+(\.\d+)*(\.post\d+)?$`)
