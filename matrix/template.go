package matrix

import (
	"fmt"
	"strings"
	"text/template"
	"text/template/parse"
)

// tmpl is one template string of the launch section, parsed once. Plain
// strings (no "{{") are kept as they are; templates made only of text and
// {{.field}} actions are filled in by concatenation; anything else runs
// through text/template (missingkey=error).
type tmpl struct {
	text string
	segs []seg // the fast path; nil when t is used
	t    *template.Template
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

func newTmpl(s string, axes map[string]int) (*tmpl, error) {
	if !strings.Contains(s, "{{") {
		return &tmpl{text: s}, nil
	}
	t, err := template.New("").Option("missingkey=error").Parse(s)
	if err != nil {
		return nil, err
	}
	if segs, ok := simpleSegs(t.Tree.Root, axes); ok {
		return &tmpl{text: s, segs: segs}, nil
	}
	return &tmpl{text: s, t: t}, nil
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
		if len(t.segs) == 1 {
			return segValue(t.segs[0], c), nil
		}
		b.Reset()
		for _, sg := range t.segs {
			b.WriteString(segValue(sg, c))
		}
		return b.String(), nil
	case t.t == nil:
		return t.text, nil
	}
	b.Reset()
	if err := t.t.Execute(b, data()); err != nil {
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
	t, err := template.New("").Option("missingkey=error").Parse(s)
	if err != nil {
		return fmt.Errorf("template %q: %v", s, err)
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
