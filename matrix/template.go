package matrix

import (
	"fmt"
	"strings"
	"text/template"
	"text/template/parse"
)

// tmpl is one template string of the launch section, parsed once. Plain
// strings (no "{{") are kept as they are.
type tmpl struct {
	text string
	t    *template.Template
}

func newTmpl(s string) (*tmpl, error) {
	if !strings.Contains(s, "{{") {
		return &tmpl{text: s}, nil
	}
	t, err := template.New("").Option("missingkey=error").Parse(s)
	if err != nil {
		return nil, err
	}
	return &tmpl{text: s, t: t}, nil
}

func (t *tmpl) exec(data map[string]string, b *strings.Builder) (string, error) {
	if t.t == nil {
		return t.text, nil
	}
	b.Reset()
	if err := t.t.Execute(b, data); err != nil {
		return "", err
	}
	return b.String(), nil
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
