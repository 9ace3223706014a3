package author

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/smpatch/smpatch/internal/tomlfile"
	"github.com/smpatch/smpatch/patches"
	"github.com/smpatch/smpatch/patches/catalog"
	"github.com/smpatch/smpatch/patches/journal"
	"github.com/smpatch/smpatch/source"
)

// replaceVariant is the variant of p whose range admits ver with its
// diffs replaced by one, its name and range kept: its own diff file when
// it has exactly one that no other variant shares, else NAME/VARIANT.diff
// (the diffs key rewritten); base set when known. It returns the entry old
// with that change and the diff files it overwrites with their bytes
// before, to undo.
func replaceVariant(p *catalog.Patch, old []byte, ver, base string) (entryVariant, []byte, map[string][]byte, error) {
	pv, err := source.ParseVersion(ver)
	if err != nil {
		return entryVariant{}, nil, nil, err
	}
	idx := slices.IndexFunc(p.Variants, func(o *catalog.Variant) bool { return o.Admits(pv) })
	if idx < 0 {
		return entryVariant{}, nil, nil, inputf("%s: no variant admits %s: `smpatch refresh %s` without --replace adds one", p.File, ver, p.Name)
	}
	o := p.Variants[idx]
	v := entryVariant{Name: o.Name, Versions: o.Versions, Base: base}
	shared := func(d string) bool {
		for i, w := range p.Variants {
			if i != idx && slices.Contains(w.Diffs, d) {
				return true
			}
		}
		return false
	}
	data := old
	if len(o.Diffs) == 1 && !shared(o.Diffs[0]) {
		v.Diffs = []string{o.Diffs[0]}
	} else {
		v.Diffs = []string{diffName(p.Name, o.Name)}
		if shared(v.Diffs[0]) {
			v.Diffs[0] = diffName(p.Name, o.Name+"-replaced")
		}
		if data, err = setVariantKey(data, idx, "diffs", "["+strconv.Quote(v.Diffs[0])+"]"); err != nil {
			return v, nil, nil, fmt.Errorf("%s: %v", p.File, err)
		}
	}
	if base != "" {
		if data, err = setVariantKey(data, idx, "base", strconv.Quote(base)); err != nil {
			return v, nil, nil, fmt.Errorf("%s: %v", p.File, err)
		}
	}
	undo := map[string][]byte{}
	b, err := readRegular(filepath.Join(p.Origin, v.Diffs[0]), catalog.MaxDiffSize)
	switch {
	case err == nil:
		undo[v.Diffs[0]] = b
	case !errors.Is(err, fs.ErrNotExist):
		return v, nil, nil, inputf("%s: %v", filepath.Join(p.Origin, v.Diffs[0]), err)
	}
	return v, data, undo, nil
}

// setVariantKey sets key of the idx-th [[variant]] of data to value (TOML
// text): its line replaced, or a line added after the header. A value
// written over several lines is refused.
func setVariantKey(data []byte, idx int, key, value string) ([]byte, error) {
	lines := strings.SplitAfter(string(data), "\n")
	li := tomlfile.IndexLines(data)
	repl := key + " = " + value + "\n"
	if n := li.Line(toml.Key{"variant", strconv.Itoa(idx), key}); n > 0 {
		var m map[string]any
		if _, err := toml.Decode(lines[n-1], &m); err != nil {
			return nil, fmt.Errorf("line %d: variant #%d's %s is written over several lines: set it by hand", n, idx+1, key)
		}
		lines[n-1] = repl
		return []byte(strings.Join(lines, "")), nil
	}
	h := li.Line(toml.Key{"variant", strconv.Itoa(idx)})
	if h <= 0 {
		return nil, fmt.Errorf("variant #%d: its header line is not found", idx+1)
	}
	lines = append(lines[:h], append([]string{repl}, lines[h:]...)...)
	return []byte(strings.Join(lines, "")), nil
}

// finishNote marks the journal entry apply --merge or --reject records:
// the files it wrote, to finish by hand, with the bytes they had before.
const finishNote = patches.FinishNote

// IsFinishEntry reports whether e is the entry apply --merge or --reject
// recorded (not a patch applied).
func IsFinishEntry(e *journal.Entry) bool {
	return slices.ContainsFunc(e.Notes, func(n string) bool { return strings.HasPrefix(n, finishNote) })
}

// dropFinishEntry drops name's journal entry when it is the one apply
// --merge or --reject recorded, keeping the tree's files as they are (the
// finished edit).
func dropFinishEntry(ctx context.Context, t source.WritableTree, name string) error {
	e, err := journalEntry(ctx, t, name)
	if err != nil || e == nil || !IsFinishEntry(e) {
		return err
	}
	_, err = journal.Forget(ctx, t, name, journal.Options{})
	return err
}
