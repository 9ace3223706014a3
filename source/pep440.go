package source

import (
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/hashicorp/go-version"

	"github.com/smpatch/smpatch/internal/lazyre"
)

// PEP 440 versions (0.5.3rc2, 0.5.6.post2, 0.0.0.dev9596+g29b7f22d8) are
// normalised here, once, into go-version values. go-version cannot express
// post-releases or PEP 440's pre-release order, so comparisons go through
// ComparePEP440 and Satisfies, which read the PEP 440 parts back from the
// value's original text.
//
// The go-version text of a PEP 440 version is its release, then "-" and the
// pre/post/dev parts, then "+" and the local label:
//
//	0.5.6.post2              -> 0.5.6-post2
//	0.5.3rc2                 -> 0.5.3-rc2
//	0.0.0.dev9596+g29b7f22d8 -> 0.0.0-dev9596+g29b7f22d8
//
// VersionString turns it back into canonical PEP 440 text.

// pep440 is a parsed PEP 440 version.
type pep440 struct {
	release []int64
	pre     string // "a", "b", "rc" or ""
	preN    int64
	post    int64 // -1: none
	dev     int64 // -1: none
	local   []string
}

// memo remembers a pure function's answers by input text: the catalog's
// overlap check and Satisfies read the same few version texts (those inside
// constraints too) again and again. It is emptied when it grows past
// memoMax entries, so odd inputs cannot make it grow for ever. Answers are
// shared: callers must not modify them.
type memo[V any] struct {
	mu sync.Mutex
	m  map[string]V
}

const memoMax = 1024

func (c *memo[V]) get(key string, f func(string) V) V {
	c.mu.Lock()
	v, ok := c.m[key]
	c.mu.Unlock()
	if ok {
		return v
	}
	v = f(key)
	c.mu.Lock()
	if c.m == nil || len(c.m) >= memoMax {
		c.m = make(map[string]V)
	}
	c.m[key] = v
	c.mu.Unlock()
	return v
}

type parseResult struct {
	p   *pep440
	err error
}

var parsed memo[parseResult]

// parsePEP440 parses s (once per text; the result is shared and must not
// be modified).
func parsePEP440(s string) (*pep440, error) {
	r := parsed.get(s, func(s string) parseResult {
		p, err := parsePEP440Text(s)
		return parseResult{p, err}
	})
	return r.p, r.err
}

// pep440Expr is PEP 440's version syntax, case-insensitive, with the
// groups parsePEP440Text reads: epoch, release, pre-release word and
// number, implicit post number ("-N"), post word and number, dev word and
// number, local label.
var pep440Expr = lazyre.New(`(?i)^\s*v?` +
	`(?:([0-9]+)!)?` + // epoch
	`([0-9]+(?:\.[0-9]+)*)` + // release
	`(?:[-_.]?(a|b|c|rc|alpha|beta|pre|preview)[-_.]?([0-9]+)?)?` + // pre
	`(?:-([0-9]+)|[-_.]?(post|rev|r)[-_.]?([0-9]+)?)?` + // post
	`(?:[-_.]?(dev)[-_.]?([0-9]+)?)?` + // dev
	`(?:\+([a-z0-9]+(?:[-_.][a-z0-9]+)*))?` + // local
	`\s*$`)

func parsePEP440Text(s string) (*pep440, error) {
	m := pep440Expr().FindStringSubmatch(s)
	if m == nil {
		return nil, fmt.Errorf("malformed version %q (not PEP 440)", s)
	}
	epoch, release, pre, preN, postN, post, postLN, dev, devN, local := m[1], m[2], m[3], m[4], m[5], m[6], m[7], m[8], m[9], m[10]
	if epoch != "" {
		if e, err := strconv.ParseInt(epoch, 10, 64); err != nil || e != 0 {
			return nil, fmt.Errorf("version %q: epochs are not supported", s)
		}
	}
	p := &pep440{post: -1, dev: -1}
	for _, seg := range strings.Split(release, ".") {
		n, err := strconv.ParseInt(seg, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("version %q: release segment %q: out of range", s, seg)
		}
		p.release = append(p.release, n)
	}
	num := func(t string) (int64, error) {
		if t == "" {
			return 0, nil
		}
		n, err := strconv.ParseInt(t, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("version %q: number %q: out of range", s, t)
		}
		return n, nil
	}
	var err error
	if pre != "" {
		switch strings.ToLower(pre) {
		case "a", "alpha":
			p.pre = "a"
		case "b", "beta":
			p.pre = "b"
		default:
			p.pre = "rc"
		}
		if p.preN, err = num(preN); err != nil {
			return nil, err
		}
	}
	switch {
	case postN != "":
		if p.post, err = num(postN); err != nil {
			return nil, err
		}
	case post != "":
		if p.post, err = num(postLN); err != nil {
			return nil, err
		}
	}
	if dev != "" {
		if p.dev, err = num(devN); err != nil {
			return nil, err
		}
	}
	if local != "" {
		p.local = strings.FieldsFunc(strings.ToLower(local), func(r rune) bool { return r == '.' || r == '-' || r == '_' })
	}
	return p, nil
}

// suffix is the pre/post/dev part without a leading separator: "rc2.post1.dev3".
func (p *pep440) suffix() string {
	var parts []string
	if p.pre != "" {
		parts = append(parts, p.pre+strconv.FormatInt(p.preN, 10))
	}
	if p.post >= 0 {
		parts = append(parts, "post"+strconv.FormatInt(p.post, 10))
	}
	if p.dev >= 0 {
		parts = append(parts, "dev"+strconv.FormatInt(p.dev, 10))
	}
	return strings.Join(parts, ".")
}

func (p *pep440) releaseString() string {
	segs := make([]string, len(p.release))
	for i, n := range p.release {
		segs[i] = strconv.FormatInt(n, 10)
	}
	return strings.Join(segs, ".")
}

// goText is the text handed to go-version.
func (p *pep440) goText() string {
	s := p.releaseString()
	if suf := p.suffix(); suf != "" {
		s += "-" + suf
	}
	if len(p.local) > 0 {
		s += "+" + strings.Join(p.local, ".")
	}
	return s
}

// String is the canonical PEP 440 form.
func (p *pep440) String() string {
	s := p.releaseString()
	if p.pre != "" {
		s += p.pre + strconv.FormatInt(p.preN, 10)
	}
	if p.post >= 0 {
		s += ".post" + strconv.FormatInt(p.post, 10)
	}
	if p.dev >= 0 {
		s += ".dev" + strconv.FormatInt(p.dev, 10)
	}
	if len(p.local) > 0 {
		s += "+" + strings.Join(p.local, ".")
	}
	return s
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// compare orders two versions as PEP 440 does:
// X.devN < XaN < XbN < XrcN < X < X.postN, with trailing zeros of the release
// ignored and a local label sorting after the same version without one.
func (p *pep440) compare(o *pep440) int {
	n := max(len(p.release), len(o.release))
	for i := range n {
		var a, b int64
		if i < len(p.release) {
			a = p.release[i]
		}
		if i < len(o.release) {
			b = o.release[i]
		}
		if c := cmpInt(a, b); c != 0 {
			return c
		}
	}
	if c := cmpInt(p.preRank(), o.preRank()); c != 0 {
		return c
	}
	if p.pre != "" {
		if c := cmpInt(p.preN, o.preN); c != 0 {
			return c
		}
	}
	// No post sorts before any post; no dev sorts after any dev.
	if c := cmpInt(p.post, o.post); c != 0 {
		return c
	}
	da, db := p.dev, o.dev
	if da < 0 {
		da = 1<<63 - 1
	}
	if db < 0 {
		db = 1<<63 - 1
	}
	if c := cmpInt(da, db); c != 0 {
		return c
	}
	return compareLocal(p.local, o.local)
}

// preRank: dev-only releases first, then a, b, rc, then final (and post) releases.
func (p *pep440) preRank() int64 {
	switch p.pre {
	case "a":
		return 1
	case "b":
		return 2
	case "rc":
		return 3
	}
	if p.post < 0 && p.dev >= 0 {
		return 0
	}
	return 4
}

// compareLocal: numeric segments sort after alphanumeric ones, numbers
// numerically, strings lexically; a shorter prefix sorts first.
func compareLocal(a, b []string) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		na, ea := strconv.ParseInt(a[i], 10, 64)
		nb, eb := strconv.ParseInt(b[i], 10, 64)
		switch {
		case ea == nil && eb == nil:
			if c := cmpInt(na, nb); c != 0 {
				return c
			}
		case ea == nil:
			return 1
		case eb == nil:
			return -1
		default:
			if c := strings.Compare(a[i], b[i]); c != 0 {
				return c
			}
		}
	}
	return cmpInt(int64(len(a)), int64(len(b)))
}

// ParseVersion parses a PEP 440 version ("0.5.6.post2", "v0.6.18rc7",
// "0.0.0.dev9596+g29b7f22d8") into a go-version value. Compare such values
// with ComparePEP440 and check them with Satisfies: go-version's own ordering
// does not know post-releases.
func ParseVersion(s string) (*version.Version, error) {
	p, err := parsePEP440(s)
	if err != nil {
		return nil, err
	}
	v, err := version.NewVersion(p.goText())
	if err != nil {
		return nil, fmt.Errorf("version %q: %w", s, err)
	}
	return v, nil
}

// pepOf reads the PEP 440 parts of a go-version value: from its original
// text, else its canonical go-version text.
func pepOf(v *version.Version) (*pep440, error) {
	if p, err := parsePEP440(v.Original()); err == nil {
		return p, nil
	}
	return parsePEP440(v.String())
}

// VersionString is v in canonical PEP 440 form ("0.5.6.post2"); values that
// are not PEP 440 are printed as go-version prints them.
func VersionString(v *version.Version) string {
	if v == nil {
		return ""
	}
	p, err := pepOf(v)
	if err != nil {
		return v.String()
	}
	return p.String()
}

// ComparePEP440 returns -1, 0 or 1 as a is older than, equal to or newer than
// b under PEP 440 ordering (dev < a < b < rc < release < post).
func ComparePEP440(a, b *version.Version) int {
	pa, errA := pepOf(a)
	pb, errB := pepOf(b)
	if errA != nil || errB != nil {
		return a.Compare(b)
	}
	return pa.compare(pb)
}

// ParseConstraints parses a comma-separated list of PEP 440 comparisons
// (">= 0.5.0, < 0.5.7", "==0.6.17", "~=0.6.16") into go-version constraints.
// "==" is written "=" and "~=" "~>" for go-version; check the result with
// Satisfies, not Constraints.Check.
func ParseConstraints(s string) (version.Constraints, error) {
	cs, err := scanConstraints(s)
	if err != nil {
		return nil, err
	}
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = c.op + " " + c.v.goText()
	}
	vcs, err := version.NewConstraint(strings.Join(parts, ", "))
	if err != nil {
		return nil, fmt.Errorf("constraint %q: %w", s, err)
	}
	return vcs, nil
}

// pepConstraint is one comparison of a constraint text: op as go-version
// writes it ("=", "!=", "<", "<=", ">", ">=", "~>") and the version.
type pepConstraint struct {
	op string
	v  *pep440
}

// scanConstraints reads a constraint text as ParseConstraints does, with
// the same errors, without go-version.
func scanConstraints(s string) ([]pepConstraint, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("empty version constraint")
	}
	var out []pepConstraint
	for one := range strings.SplitSeq(s, ",") {
		op, vs, ok := scanConstraint(one)
		if !ok {
			return nil, fmt.Errorf("constraint %q: a line break inside the version", strings.TrimSpace(one))
		}
		if vs == "" {
			return nil, fmt.Errorf("constraint %q: missing version", strings.TrimSpace(one))
		}
		switch op {
		case "", "==", "===":
			op = "="
		case "~=":
			op = "~>"
		}
		if strings.HasSuffix(vs, ".*") {
			return nil, fmt.Errorf("constraint %q: wildcards are not supported; use >= and <", strings.TrimSpace(one))
		}
		p, err := parsePEP440(vs)
		if err != nil {
			return nil, fmt.Errorf("constraint %q: %w", strings.TrimSpace(one), err)
		}
		if op == "~>" && len(p.release) < 2 {
			return nil, fmt.Errorf("constraint %q: ~= needs at least two release segments", strings.TrimSpace(one))
		}
		out = append(out, pepConstraint{op, p})
	}
	return out, nil
}

// Satisfies reports whether v meets every constraint under PEP 440 ordering.
// Unlike go-version's Check, pre-releases are ordinary versions here:
// 0.5.3rc2 satisfies ">= 0.5.0, < 0.5.7". A local label on v is ignored
// unless the constraint names one.
func Satisfies(cs version.Constraints, v *version.Version) bool {
	if v == nil {
		return false
	}
	pv, err := pepOf(v)
	if err != nil {
		return cs.Check(v)
	}
	for _, c := range cs {
		op, vs, _ := scanConstraint(c.String())
		pc, err := parsePEP440(vs)
		if err != nil {
			if !c.Check(v) {
				return false
			}
			continue
		}
		if !satisfiesOne(pv, op, pc) {
			return false
		}
	}
	return true
}

// SatisfiesText is Satisfies(ParseConstraints(s), v) read straight from
// the constraint text, without go-version's parsing: ok is false, and err
// says why, where ParseConstraints would fail or v is not a PEP 440
// version (then use ParseConstraints and Satisfies).
func SatisfiesText(s string, v *version.Version) (sat bool, err error) {
	cs, err := scanConstraints(s)
	if err != nil {
		return false, err
	}
	if v == nil {
		return false, nil
	}
	pv, err := pepOf(v)
	if err != nil {
		return false, err
	}
	for _, c := range cs {
		if !satisfiesOne(pv, c.op, c.v) {
			return false, nil
		}
	}
	return true, nil
}

// satisfiesOne reports whether pv meets one comparison (op as go-version
// or PEP 440 writes it).
func satisfiesOne(pv *pep440, op string, pc *pep440) bool {
	pvc := *pv
	if len(pc.local) == 0 {
		pvc.local = nil
	}
	cmp := pvc.compare(pc)
	switch op {
	case "", "=", "==", "===":
		return cmp == 0
	case "!=":
		return cmp != 0
	case "<":
		// PEP 440: < V excludes pre-releases of V unless V is one.
		return cmp < 0 && !(pv.isPre() && !pc.isPre() && sameRelease(pv.release, pc.release))
	case "<=":
		return cmp <= 0
	case ">":
		// PEP 440: > V excludes post-releases of V unless V is one.
		return cmp > 0 && !(pv.post >= 0 && pc.post < 0 && sameRelease(pv.release, pc.release))
	case ">=":
		return cmp >= 0
	case "~>", "~=":
		return cmp >= 0 && samePrefix(pv.release, pc.release[:len(pc.release)-1])
	}
	return false
}

// isPre reports whether p is a pre-release (a, b, rc) or a development release.
func (p *pep440) isPre() bool { return p.pre != "" || p.dev >= 0 }

// sameRelease reports whether two release tuples are equal, trailing zeros ignored.
func sameRelease(a, b []int64) bool { return samePrefix(a, b) && samePrefix(b, a) }

// samePrefix reports whether release starts with prefix (missing segments are 0).
func samePrefix(release, prefix []int64) bool {
	for i, n := range prefix {
		var r int64
		if i < len(release) {
			r = release[i]
		}
		if r != n {
			return false
		}
	}
	return true
}
