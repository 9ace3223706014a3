package author

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/smpatch/smpatch/patches"
	"github.com/smpatch/smpatch/patches/udiff"
	"github.com/smpatch/smpatch/source"
	"github.com/smpatch/smpatch/source/gitrepo"
)

var fullCommit = regexp.MustCompile(`^[0-9a-f]{40}$`)

// baseOf is the full file rel at the commit the plan's variant was made
// against ([[variant]] base), read from [upstream] clone, else from the
// repository holding the tree, and where it was read; nil when neither
// holds it (no base recorded, a wheel's, a clone not at hand).
func baseOf(t source.Tree, pl *patches.Plan, rel string) ([]byte, string) {
	if pl.Variant == nil || !fullCommit.MatchString(pl.Variant.Base) {
		return nil, ""
	}
	h := plumbing.NewHash(pl.Variant.Base)
	type place struct{ dir, prefix string }
	var places []place
	if c := pl.Patch.Upstream.Clone; c != "" {
		places = append(places, place{c, ""})
	}
	if t.Kind() == source.KindCheckout {
		places = append(places, place{t.Root(), "-"})
	}
	for _, pc := range places {
		repo, err := gitrepo.Open(pc.dir)
		if err != nil {
			continue
		}
		prefix := ""
		if pc.prefix == "-" {
			if prefix, err = repoPrefix(repo, t.Root()); err != nil {
				continue
			}
		}
		b, err := fileAt(repo, h, prefix+rel)
		if err != nil {
			continue
		}
		return b, fmt.Sprintf("commit %s of %s", pl.Variant.Base[:12], pc.dir)
	}
	return nil, ""
}

// fileAt reads path at commit h of repo, bounded.
func fileAt(repo *git.Repository, h plumbing.Hash, path string) ([]byte, error) {
	c, err := repo.CommitObject(h)
	if err != nil {
		return nil, err
	}
	tr, err := c.Tree()
	if err != nil {
		return nil, err
	}
	f, err := tr.File(path)
	if err != nil {
		return nil, err
	}
	if !f.Mode.IsFile() {
		return nil, errors.New("not a file")
	}
	return readBlob(repo, f.Hash, path)
}

// change is one region [s, e) of the base's lines replaced by lines.
type change struct {
	s, e  int
	lines [][]byte
}

// changesOf are the regions where nw differs from base (lines keeping
// their "\n").
func changesOf(base, nw []byte, bl, nl [][]byte) []change {
	var out []change
	for _, h := range udiff.Hunks(base, nw, 0) {
		c := change{s: h.OldStart - 1, e: h.OldStart - 1 + h.OldLines}
		if h.OldLines == 0 {
			c.s, c.e = h.OldStart, h.OldStart
		}
		if h.NewLines > 0 {
			c.lines = nl[h.NewStart-1 : h.NewStart-1+h.NewLines]
		}
		out = append(out, c)
	}
	return out
}

// merge3 merges the changes base→ours (the tree) and base→theirs (the
// patch's result on base) as diff3 does: a region only one side changed
// takes that side; one both changed alike, once; one they changed apart
// (or next to each other) becomes conflict markers: the tree's lines, the
// base's, the patch's. It returns the result and the count of conflicts.
func merge3(base, ours, theirs []byte, file, label string) ([]byte, int) {
	bl, ol, tl := udiff.SplitKeep(base), udiff.SplitKeep(ours), udiff.SplitKeep(theirs)
	a, b := changesOf(base, ours, bl, ol), changesOf(base, theirs, bl, tl)
	var out bytes.Buffer
	conflicts, pos, i, j := 0, 0, 0, 0
	for i < len(a) || j < len(b) {
		// The next cluster: changes of either side that overlap or touch.
		var ca, cb []change
		s, e := 0, 0
		switch {
		case j >= len(b) || i < len(a) && a[i].s <= b[j].s:
			s, e = a[i].s, a[i].e
			ca = append(ca, a[i])
			i++
		default:
			s, e = b[j].s, b[j].e
			cb = append(cb, b[j])
			j++
		}
		for grew := true; grew; {
			grew = false
			if i < len(a) && a[i].s <= e {
				e = max(e, a[i].e)
				ca = append(ca, a[i])
				i++
				grew = true
			}
			if j < len(b) && b[j].s <= e {
				e = max(e, b[j].e)
				cb = append(cb, b[j])
				j++
				grew = true
			}
		}
		writeLines(&out, bl[pos:s])
		pos = e
		ov, tv := side(bl, s, e, ca), side(bl, s, e, cb)
		switch {
		case len(cb) == 0:
			writeLines(&out, ov)
		case len(ca) == 0:
			writeLines(&out, tv)
		case equalLines(ov, tv):
			writeLines(&out, ov)
		default:
			conflicts++
			fmt.Fprintf(&out, "<<<<<<< %s (the tree)\n", file)
			writeLines(&out, ov)
			eol(&out)
			fmt.Fprintf(&out, "||||||| %s (its base)\n", label)
			writeLines(&out, bl[s:e])
			eol(&out)
			out.WriteString("=======\n")
			writeLines(&out, tv)
			eol(&out)
			fmt.Fprintf(&out, ">>>>>>> %s (the patch)\n", label)
		}
	}
	writeLines(&out, bl[pos:])
	return out.Bytes(), conflicts
}

// side is the base's lines [s, e) with a side's changes cs (inside it).
func side(bl [][]byte, s, e int, cs []change) [][]byte {
	var out [][]byte
	pos := s
	for _, c := range cs {
		out = append(out, bl[pos:c.s]...)
		out = append(out, c.lines...)
		pos = c.e
	}
	return append(out, bl[pos:e]...)
}

func writeLines(b *bytes.Buffer, ls [][]byte) {
	for _, l := range ls {
		b.Write(l)
	}
}

// eol ends b's last line, so that a marker starts a line.
func eol(b *bytes.Buffer) {
	if b.Len() > 0 && b.Bytes()[b.Len()-1] != '\n' {
		b.WriteByte('\n')
	}
}

func equalLines(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}
