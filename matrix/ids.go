package matrix

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
)

// assignIDs gives every cell a slug of its values on the axes that vary;
// cells whose slugs collide get a short hash of their values appended.
func (m *Matrix) assignIDs(cells []*Cell) error {
	if len(cells) == 0 {
		return nil
	}
	varying := make([]bool, len(m.Axes))
	any := false
	for ai := range m.Axes {
		first := cells[0].Values[ai].key()
		for _, c := range cells[1:] {
			if c.idx[ai] >= 0 && c.idx[ai] == cells[0].idx[ai] {
				continue
			}
			if c.Values[ai].key() != first {
				varying[ai] = true
				any = true
				break
			}
		}
	}
	// Slugs of the axis values, computed once.
	valSlugs := make([][]string, len(m.Axes))
	for ai, a := range m.Axes {
		valSlugs[ai] = make([]string, len(a.Values))
		for vi, v := range a.Values {
			valSlugs[ai][vi] = m.valueSlug(a, v)
		}
	}
	// Ids are unique by construction when every cell comes from the product
	// (distinct value tuples) and each axis's slugs are distinct and free of
	// the '.' separator; only otherwise are they counted.
	unique := true
	for ai := range m.Axes {
		seenSlug := map[string]bool{}
		for _, sl := range valSlugs[ai] {
			if seenSlug[sl] || strings.Contains(sl, ".") {
				unique = false
			}
			seenSlug[sl] = true
		}
	}
	for _, c := range cells {
		if slices.Contains(c.idx, -1) {
			unique = false
			break
		}
	}
	for _, inc := range m.Include {
		if inc.ID != "" {
			unique = false
		}
	}
	slugs := make([]string, len(cells))
	var count map[string]int
	if !unique {
		count = make(map[string]int, len(cells))
	}
	var b strings.Builder
	for i, c := range cells {
		b.Reset()
		for ai, a := range m.Axes {
			if !varying[ai] && any {
				continue
			}
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			if vi := c.idx[ai]; vi >= 0 {
				b.WriteString(valSlugs[ai][vi])
			} else {
				b.WriteString(m.valueSlug(a, c.Values[ai].Value))
			}
		}
		slugs[i] = b.String()
		if count != nil {
			count[slugs[i]]++
		}
	}
	if unique {
		for i, c := range cells {
			c.ID = slugs[i]
		}
		return m.checkIDLengths(cells)
	}
	explicit := map[*Cell]*Include{}
	for _, inc := range m.Include {
		if inc.ID == "" {
			continue
		}
		for _, c := range cells {
			if includeMatches(c, inc, m) {
				explicit[c] = inc
			}
		}
	}
	seen := make(map[string]*Cell, len(cells))
	for i, c := range cells {
		id := slugs[i]
		if count[id] > 1 {
			h := sha256.Sum256([]byte(cellKey(c)))
			id += "-" + hex.EncodeToString(h[:])[:6]
		}
		line := 0
		if inc, ok := explicit[c]; ok {
			id, line = inc.ID, inc.Line
		}
		if other, dup := seen[id]; dup {
			if inc, ok := explicit[other]; ok && line == 0 {
				line = inc.Line
			}
			return m.errf(line, "duplicate cell id %q (%s and %s): set id_prefix or an include id", id, describe(other), describe(c))
		}
		c.ID = id
		seen[id] = c
	}
	return m.checkIDLengths(cells)
}

// MaxIDBytes bounds a cell id: it names the cell's directory and its log
// (<id>/<id>.log, logs/<id>.r12.log and the temporary names beside them),
// and a file name has at most 255 bytes.
const MaxIDBytes = 200

// checkIDLengths refuses an id past MaxIDBytes, naming the line of the
// include that set it or of the axis whose value made it longest.
func (m *Matrix) checkIDLengths(cells []*Cell) error {
	for _, c := range cells {
		if len(c.ID) <= MaxIDBytes {
			continue
		}
		line, why := 0, "shorten the values or give the axis an id_prefix"
		for _, inc := range m.Include {
			if inc.ID == c.ID {
				line, why = inc.Line, "shorten the include's id"
			}
		}
		if line == 0 {
			long := -1
			for ai, a := range m.Axes {
				if long < 0 || len(m.valueSlug(a, c.Values[ai].Value)) > len(m.valueSlug(m.Axes[long], c.Values[long].Value)) {
					long = ai
				}
			}
			if long >= 0 {
				line = m.Axes[long].Line
				why = fmt.Sprintf("axis %s makes most of it; shorten its values, or set an include id", m.Axes[long].Name)
			}
		}
		return m.errf(line, "cell id %.40q... is %d bytes, more than %d (it names the cell's directory and log files): %s", c.ID, len(c.ID), MaxIDBytes, why)
	}
	return nil
}

func (m *Matrix) valueSlug(a *Axis, v Value) string {
	s := m.rawSlug(a, v)
	if s == "" || s == m.IDPrefix[a.Name] {
		// Nothing readable is left (" ", "+++"): name the axis and hash the value.
		h := sha256.Sum256([]byte(v.key()))
		s += slug(a.Name) + "-" + hex.EncodeToString(h[:])[:6]
	}
	return s
}

func (m *Matrix) rawSlug(a *Axis, v Value) string {
	prefix, has := m.IDPrefix[a.Name]
	var s string
	switch {
	case a.Name == PatchesAxis:
		if len(v.List) == 0 {
			s = "unpatched"
		} else {
			s = slug(strings.Join(v.List, "-"))
		}
		return prefix + s
	case a.Name == m.ArchAxis:
		maj, min, _ := parseSM(v.Text)
		if !has {
			prefix = "sm"
		}
		return prefix + fmt.Sprintf("%d%d", maj, min)
	case v.Kind == "int" || v.Kind == "float":
		if !has {
			prefix = slug(a.Name)
		}
		return prefix + slug(v.Text)
	case v.Kind == "bool":
		if !has {
			prefix = slug(a.Name)
		}
		if v.Text == "true" {
			return prefix + "-on"
		}
		return prefix + "-off"
	}
	return prefix + slug(v.Text)
}

// slug keeps [a-z0-9.-]: lower case, anything else becomes '-', runs of '-'
// collapse and the ends are trimmed.
func slug(s string) string {
	b := make([]byte, 0, len(s))
	dash := false
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '.':
			b = append(b, byte(r))
			dash = false
		default:
			if !dash {
				b = append(b, '-')
				dash = true
			}
		}
	}
	return strings.Trim(string(b), "-.")
}
