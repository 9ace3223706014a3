package matrix

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// The last steps of an expansion: each cell's command and environment
// rendered from the templates, its TP, and the baseline.

// render fills Command, Env (launch.env), Workdir, Health, Bench and TP.
func (m *Matrix) render(ctx context.Context, cells []*Cell) error {
	l := &m.Launch
	bud := newBudget(ctx)
	compile := func(ss []string) ([]*tmpl, error) {
		out := make([]*tmpl, len(ss))
		for i, s := range ss {
			t, err := newTmpl(s, m.axis, bud)
			if err != nil {
				return nil, err
			}
			out[i] = t
		}
		return out, nil
	}
	cmd, err := compile(l.Command)
	if err != nil {
		return m.errf(m.line("launch", "command"), "launch.command: %v", err)
	}
	bench, err := compile(l.Bench)
	if err != nil {
		return m.errf(m.line("launch", "bench"), "launch.bench: %v", err)
	}
	envKeys := sortedKeys(l.Env)
	envVals := make([]string, len(envKeys))
	for i, k := range envKeys {
		envVals[i] = l.Env[k]
	}
	env, err := compile(envVals)
	if err != nil {
		return m.errf(m.line("launch", "env"), "launch.env: %v", err)
	}
	one, err := compile([]string{l.Workdir, l.Health})
	if err != nil {
		return m.errf(m.line("launch"), "launch: %v", err)
	}
	var b strings.Builder
	var c *Cell
	data := func() map[string]string {
		d := make(map[string]string, len(c.Values)+1)
		for _, v := range c.Values {
			d[v.Axis] = v.Text
		}
		d["id"] = c.ID
		return d
	}
	run := func(ts []*tmpl, out []string) ([]string, error) {
		for _, t := range ts {
			s, err := t.exec(c, data, &b)
			if err != nil {
				return nil, err
			}
			out = append(out, s)
		}
		return out, nil
	}
	tpFlags := []string{"--tp", "--tp-size", "--tensor-parallel-size"}
	for _, c = range cells {
		if err := ctx.Err(); err != nil {
			return err
		}
		bud.cell()
		out, err := run(cmd, make([]string, 0, len(cmd)+len(c.Args)+1))
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			return m.errf(m.line("launch", "command"), "launch.command for %s: %w", c.ID, err)
		}
		c.Command = append(out, c.Args...)
		if c.Args == nil {
			c.Args = []string{}
		}
		if len(bench) > 0 {
			if c.Bench, err = run(bench, nil); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return m.errf(m.line("launch", "bench"), "launch.bench for %s: %w", c.ID, err)
			}
		}
		for i, k := range envKeys {
			v, err := env[i].exec(c, data, &b)
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return m.errf(m.line("launch", "env", k), "launch.env.%s for %s: %w", k, c.ID, err)
			}
			c.Env[k] = v
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if c.Workdir, err = one[0].exec(c, data, &b); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return m.errf(m.line("launch", "workdir"), "launch.workdir for %s: %w", c.ID, err)
		}
		if c.Health, err = one[1].exec(c, data, &b); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return m.errf(m.line("launch", "health"), "launch.health for %s: %w", c.ID, err)
		}
		if err := m.checkRendered(c, bud); err != nil {
			return err
		}
		if c.TP == 0 {
			c.TP = l.TP
		}
		if c.TP == 0 {
			c.TP = tpFromCommand(c.Command, tpFlags)
		}
	}
	return nil
}

// checkRendered refuses, naming the cell and the launch key, what a
// template produced that no script can carry (the file's own text was
// checked at load), and a health URL that is not one.
func (m *Matrix) checkRendered(c *Cell, bud *budget) error {
	n := len(c.Workdir) + len(c.Health)
	for _, a := range c.Command {
		n += len(a)
	}
	for _, a := range c.Bench {
		n += len(a)
	}
	for k, v := range c.Env {
		n += len(k) + len(v)
	}
	if err := bud.done(n); err != nil {
		return m.errf(m.line("launch"), "cell %s: %w", c.ID, err)
	}
	for i, a := range c.Command {
		if err := textErr(a); err != nil {
			return m.errf(m.line("launch", "command"), "launch.command for %s: argument %d: %v", c.ID, i, err)
		}
	}
	for i, a := range c.Bench {
		if err := textErr(a); err != nil {
			return m.errf(m.line("launch", "bench"), "launch.bench for %s: argument %d: %v", c.ID, i, err)
		}
	}
	for _, k := range sortedKeys(c.Env) {
		if err := envValueErr(c.Env[k]); err != nil {
			line := m.line("launch", "env", k)
			if _, own := m.Launch.Env[k]; !own {
				line = 0 // a preset's or an include's, checked at load
			}
			return m.errf(line, "cell %s: env %s: %v", c.ID, k, err)
		}
	}
	if err := textErr(c.Workdir); err != nil {
		return m.errf(m.line("launch", "workdir"), "launch.workdir for %s: %w", c.ID, err)
	}
	if c.Health != bud.health { // most cells share one URL: parsed once
		if err := healthErr(c.Health); err != nil {
			return m.errf(m.line("launch", "health"), "launch.health for %s: %w", c.ID, err)
		}
		bud.health = c.Health
	}
	return nil
}

// healthErr refuses a health URL that is not http(s) with a host, or
// whose port is not 1 to 65535.
func healthErr(h string) error {
	if h == "" {
		return nil
	}
	if err := textErr(h); err != nil {
		return err
	}
	u, err := url.Parse(h)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an http(s) URL", h)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("%q: port %s is not 1 to 65535", h, p)
		}
	}
	return nil
}

func tpFromCommand(cmd, flags []string) int {
	for i, a := range cmd {
		k, v, eq := strings.Cut(a, "=")
		if !slices.Contains(flags, k) {
			continue
		}
		if !eq && i+1 < len(cmd) {
			v = cmd[i+1]
		}
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			return n
		}
	}
	return 0
}

func (m *Matrix) resolveBaseline(x *Expansion, cells []*Cell) error {
	l := &m.Launch
	switch {
	case l.BaselineID != "":
		for _, c := range cells {
			if c.ID == l.BaselineID {
				x.Baseline = c.ID
				break
			}
		}
		if x.Baseline == "" {
			return m.errf(m.line("launch", "baseline"), "launch.baseline: no cell has id %q", l.BaselineID)
		}
	case l.Baseline != nil:
		var found []*Cell
		for _, c := range cells {
			ok := true
			for name, vals := range l.Baseline.Values {
				k := c.Values[m.axis[name]].key()
				if !slices.ContainsFunc(vals, func(v Value) bool { return v.key() == k }) {
					ok = false
					break
				}
			}
			if ok {
				found = append(found, c)
			}
		}
		switch len(found) {
		case 0:
			return m.errf(l.Baseline.Line, "launch.baseline matches no cell")
		case 1:
			x.Baseline = found[0].ID
		default:
			return m.errf(l.Baseline.Line, "launch.baseline matches %d cells (%s, %s, ...): name more axes", len(found), found[0].ID, found[1].ID)
		}
	}
	if x.Baseline != "" {
		if c := cellByID(cells, x.Baseline); c != nil && c.Pruned != nil {
			x.Notes = append(x.Notes, fmt.Sprintf("the baseline cell %s is pruned by rule %s", c.ID, c.Pruned.Rule))
		}
	}
	return nil
}

func cellByID(cells []*Cell, id string) *Cell {
	for _, c := range cells {
		if c.ID == id {
			return c
		}
	}
	return nil
}
