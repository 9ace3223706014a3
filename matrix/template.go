package matrix

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/template"
	"text/template/parse"
	"unicode/utf8"
)

// Bounds on the work of a launch section's templates and the size of what
// they make: a file from elsewhere must not make a template write
// gigabytes ({{range 1000000000}}x{{end}}) or run for hours (nested
// ranges), nor its cells hold gigabytes of text that render then writes
// once per cell. A cell's command, bench, environment, workdir and health
// URL together hold at most MaxCellText bytes, and all cells together at
// most MaxExpansionText; its templates take at most MaxTemplateSteps steps
// (an iteration of a range, a call of a template), and the whole
// expansion's at most MaxExpansionSteps. A signal stops a template within
// a step.
const (
	MaxCellText       = 256 << 10
	MaxExpansionText  = 256 << 20
	MaxTemplateSteps  = 1 << 16
	MaxExpansionSteps = 1 << 22
	// maxPrintfWidth bounds a width or precision in printf's format
	// (%01000000000d would build a gigabyte before anything is written).
	maxPrintfWidth = 4096
)

// ErrTooMuch is wrapped by the error of an expansion or a render that
// passed a bound: of a template's work, a cell's text, the rules' warnings,
// the files a render writes.
var ErrTooMuch = errors.New("more than a matrix may make")

// workError is a bound passed: its text, and ErrTooMuch.
type workError struct{ msg string }

func (e *workError) Error() string        { return ErrTooMuch.Error() + ": " + e.msg }
func (e *workError) Is(target error) bool { return target == ErrTooMuch }

func workErr(format string, args ...any) error { return &workError{msg: fmt.Sprintf(format, args...)} }

// budget is what is left: to the cell being rendered (out, steps) and to
// the whole expansion (allSteps, allText). render makes one and every
// template of the launch section draws on it.
type budget struct {
	ctx      context.Context
	out      int
	steps    int
	allSteps int
	allText  int
	health   string // the last health URL found good
}

// expansionSteps is MaxExpansionSteps; a test lowers it to reach the
// bound without millions of steps.
var expansionSteps = MaxExpansionSteps

func newBudget(ctx context.Context) *budget {
	return &budget{ctx: ctx, allSteps: expansionSteps, allText: MaxExpansionText}
}

// cell starts the budget of the next cell.
func (b *budget) cell() { b.out, b.steps = MaxCellText, MaxTemplateSteps }

// step is called at each iteration of a range and each call of a
// template (instrument puts the calls there).
func (b *budget) step() (string, error) {
	b.steps--
	b.allSteps--
	switch {
	case b.steps < 0:
		return "", workErr("more than %d template steps (range iterations, template calls) for one cell", MaxTemplateSteps)
	case b.allSteps < 0:
		return "", workErr("more than %d template steps (range iterations, template calls) for all cells", expansionSteps)
	}
	if b.steps%256 == 0 && b.ctx != nil {
		if err := b.ctx.Err(); err != nil {
			return "", err
		}
	}
	return "", nil
}

// take takes n bytes of text off the cell's budget.
func (b *budget) take(n int) error {
	b.out -= n
	if b.out < 0 {
		return workErr("more than %d KiB of text for one cell (command, bench, environment, workdir, health)", MaxCellText>>10)
	}
	return nil
}

// Write takes a template's output off the budget; past it the template
// fails before the text grows further.
func (b *budget) Write(p []byte) (int, error) {
	if err := b.take(len(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// done counts a finished cell's text (all of it: what templates made and
// what presets and includes added) against the cell's and the whole
// expansion's bounds.
func (b *budget) done(n int) error {
	if n > MaxCellText {
		return workErr("%d KiB of text for one cell (command, bench, environment, workdir, health), more than %d KiB", n>>10, MaxCellText>>10)
	}
	b.allText -= n
	if b.allText < 0 {
		return workErr("more than %d MiB of text for all cells (command, bench, environment, workdir, health)", MaxExpansionText>>20)
	}
	return nil
}

const stepFunc = "smpatchStep"

// funcs are the functions a launch template has beyond text/template's:
// the step counter instrument calls, and a printf whose widths are
// bounded.
func (b *budget) funcs() template.FuncMap {
	return template.FuncMap{stepFunc: b.step, "printf": boundedPrintf}
}

// boundedPrintf is text/template's printf refusing a width or precision
// past maxPrintfWidth, or one taken from an argument (*).
func boundedPrintf(format string, args ...any) (string, error) {
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		n := 0
		for i++; i < len(format) && strings.IndexByte("0123456789.+-# *[]", format[i]) >= 0; i++ {
			switch c := format[i]; {
			case c == '*':
				return "", workErr("printf %q: a width from an argument (*)", format)
			case c >= '0' && c <= '9':
				n = min(n*10+int(c-'0'), 1<<30)
				if n > maxPrintfWidth {
					return "", workErr("printf %q: a width or precision past %d", format, maxPrintfWidth)
				}
			default:
				n = 0
			}
		}
	}
	return fmt.Sprintf(format, args...), nil
}

// instrument puts a call of the step function at the start of every
// range's body and of every template's, so that each iteration and each
// call takes a step.
func instrument(t *template.Template, b *budget) error {
	st, err := template.New("").Funcs(b.funcs()).Parse("{{" + stepFunc + "}}")
	if err != nil {
		return err
	}
	step := st.Tree.Root.Nodes[0]
	var walk func(n parse.Node)
	walk = func(n parse.Node) {
		switch x := n.(type) {
		case *parse.ListNode:
			if x == nil {
				return
			}
			for _, c := range x.Nodes {
				walk(c)
			}
		case *parse.RangeNode:
			walk(x.List)
			walk(x.ElseList)
			if x.List != nil {
				x.List.Nodes = append([]parse.Node{step}, x.List.Nodes...)
			}
		case *parse.IfNode:
			walk(x.List)
			walk(x.ElseList)
		case *parse.WithNode:
			walk(x.List)
			walk(x.ElseList)
		}
	}
	for _, tt := range t.Templates() {
		if tt.Tree == nil || tt.Tree.Root == nil {
			continue
		}
		walk(tt.Tree.Root)
		tt.Tree.Root.Nodes = append([]parse.Node{step}, tt.Tree.Root.Nodes...)
	}
	return nil
}

// tmpl is one template string of the launch section, parsed once. Plain
// strings (no "{{") are kept as they are; templates made only of text and
// {{.field}} actions are filled in by concatenation; anything else runs
// through text/template (missingkey=error).
type tmpl struct {
	text string
	segs []seg // the fast path; nil when t is used
	t    *template.Template
	b    *budget // what the cell's templates have left
}

// seg is literal text (field == segText) or a field: the cell id or an axis.
type seg struct {
	text  string
	field int
}

const (
	segText = -1
	segID   = -2
)

func newTmpl(s string, axes map[string]int, b *budget) (*tmpl, error) {
	if !strings.Contains(s, "{{") {
		return &tmpl{text: s, b: b}, nil
	}
	t, err := template.New("").Option("missingkey=error").Funcs(b.funcs()).Parse(s)
	if err != nil {
		return nil, err
	}
	if segs, ok := simpleSegs(t.Tree.Root, axes); ok && len(t.Templates()) <= 1 {
		return &tmpl{text: s, segs: segs, b: b}, nil
	}
	if err := instrument(t, b); err != nil {
		return nil, err
	}
	return &tmpl{text: s, t: t, b: b}, nil
}

func simpleSegs(root *parse.ListNode, axes map[string]int) ([]seg, bool) {
	var segs []seg
	for _, n := range root.Nodes {
		switch x := n.(type) {
		case *parse.TextNode:
			segs = append(segs, seg{text: string(x.Text), field: segText})
		case *parse.ActionNode:
			p := x.Pipe
			if len(p.Decl) > 0 || len(p.Cmds) != 1 || len(p.Cmds[0].Args) != 1 {
				return nil, false
			}
			f, ok := p.Cmds[0].Args[0].(*parse.FieldNode)
			if !ok || len(f.Ident) != 1 {
				return nil, false
			}
			if f.Ident[0] == "id" {
				segs = append(segs, seg{field: segID})
				continue
			}
			ai, ok := axes[f.Ident[0]]
			if !ok {
				return nil, false
			}
			segs = append(segs, seg{field: ai})
		default:
			return nil, false
		}
	}
	return segs, true
}

// exec fills the template for a cell; data is built by the caller only for
// templates that need text/template.
func (t *tmpl) exec(c *Cell, data func() map[string]string, b *strings.Builder) (string, error) {
	switch {
	case t.segs != nil:
		n := 0
		for _, sg := range t.segs {
			n += len(segValue(sg, c))
		}
		if err := t.b.take(n); err != nil {
			return "", err
		}
		if len(t.segs) == 1 {
			return segValue(t.segs[0], c), nil
		}
		b.Reset()
		for _, sg := range t.segs {
			b.WriteString(segValue(sg, c))
		}
		return b.String(), nil
	case t.t == nil:
		return t.text, t.b.take(len(t.text))
	}
	b.Reset()
	if err := t.t.Execute(io.MultiWriter(t.b, b), data()); err != nil {
		if we := (*workError)(nil); errors.As(err, &we) {
			err = we // the bound, without text/template's wording around it
		}
		return "", err
	}
	return b.String(), nil
}

func segValue(sg seg, c *Cell) string {
	switch sg.field {
	case segText:
		return sg.text
	case segID:
		return c.ID
	}
	return c.Values[sg.field].Text
}

// checkTemplate parses s and reports a field that names no axis (or "id").
func checkTemplate(s string, axes map[string]int) error {
	if !strings.Contains(s, "{{") {
		return nil
	}
	t, err := template.New("").Option("missingkey=error").Funcs((&budget{}).funcs()).Parse(s)
	if err != nil {
		return fmt.Errorf("template %q: %v", shortText(s), err)
	}
	var bad string
	var walk func(n parse.Node)
	walk = func(n parse.Node) {
		if n == nil || bad != "" {
			return
		}
		switch x := n.(type) {
		case *parse.ListNode:
			if x == nil {
				return
			}
			for _, c := range x.Nodes {
				walk(c)
			}
		case *parse.ActionNode:
			walk(x.Pipe)
		case *parse.PipeNode:
			if x == nil {
				return
			}
			for _, c := range x.Cmds {
				walk(c)
			}
		case *parse.CommandNode:
			for _, a := range x.Args {
				walk(a)
			}
		case *parse.FieldNode:
			if _, ok := axes[x.Ident[0]]; !ok && x.Ident[0] != "id" {
				bad = x.Ident[0]
			}
		case *parse.ChainNode:
			walk(x.Node)
		case *parse.IfNode:
			walk(x.Pipe)
			walk(x.List)
			walk(x.ElseList)
		case *parse.RangeNode:
			walk(x.Pipe)
			walk(x.List)
			walk(x.ElseList)
		case *parse.WithNode:
			walk(x.Pipe)
			walk(x.List)
			walk(x.ElseList)
		case *parse.TemplateNode:
			walk(x.Pipe)
		}
	}
	walk(t.Tree.Root)
	if bad != "" {
		return fmt.Errorf("template field .%s names no axis", bad)
	}
	return nil
}

// shortText is s cut to 80 bytes (at a rune boundary, with "..."), for a
// message that quotes it: a 4 MiB template is not one line of an error.
func shortText(s string) string {
	if len(s) <= 80 {
		return s
	}
	n := 77
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}
