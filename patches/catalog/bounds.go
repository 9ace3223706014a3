package catalog

import (
	"fmt"
	"io"
	"io/fs"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/smpatch/smpatch/internal/bounded"
)

// A catalog directory is input like any other: the bounds below hold for
// every one, the built-in catalog included (docs/security.md lists them).
const (
	// MaxDirEntries is the most entries the top of a catalog directory may
	// have (NAME.toml files, their diff directories, a series, a README,
	// .git...). A directory of a million files is refused after reading
	// this many names.
	MaxDirEntries = 4096
	// MaxPatches is the most NAME.toml files one catalog directory may
	// have, and the most names its series may list.
	MaxPatches = 1024
	// MaxCatalogs is the most catalog directories one command loads.
	MaxCatalogs = 64
	// MaxCatalogBytes is the most bytes one catalog directory's files
	// (NAME.toml files, their diffs, the series) may add up to.
	MaxCatalogBytes = 64 << 20
	// MaxVariants is the most [[variant]] tables a patch may have, and
	// MaxDiffs the most diffs a variant may name.
	MaxVariants = 64
	MaxDiffs    = 64
	// MaxSeriesSize is the most bytes a series file may have.
	MaxSeriesSize = 64 << 10
	// MaxTextLen is the most bytes one text of a catalog entry (summary,
	// link, variant name, rule description, ...) may have.
	MaxTextLen = 4096
)

// budget counts the bytes one catalog directory has made the loader read.
type budget struct {
	dir  string
	left int
}

// take counts n bytes read for what, refusing past MaxCatalogBytes.
func (b *budget) take(n int, what string) error {
	if b == nil {
		return nil
	}
	b.left -= n
	if b.left < 0 {
		return fmt.Errorf("%s: the catalog %s holds more than %s of patch files: not read", what, b.dir, bounded.SizeText(MaxCatalogBytes))
	}
	return nil
}

// readEntry reads one file of a catalog: a regular file inside it, never a
// symbolic link (one that leads out would read what the catalog does not
// hold; os.Root already refuses a directory on the way that leads out), a
// named pipe, a device or a directory, of at most max bytes. what names it
// in errors.
func readEntry(fsys fs.FS, name, what string, max int) ([]byte, error) {
	// No directory on the way may be a symbolic link either.
	for i := 0; i < len(name); i++ {
		if name[i] != '/' {
			continue
		}
		if fi, err := fs.Lstat(fsys, name[:i]); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return nil, fmt.Errorf("%s: %s is a symbolic link: not read (a catalog's files are regular files inside its directory)", what, name[:i])
		}
	}
	fi, err := fs.Lstat(fsys, name)
	if err != nil {
		return nil, err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return nil, fmt.Errorf("%s: a symbolic link: not read (a catalog's files are regular files inside its directory)", what)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file (%s): not read", what, bounded.Kind(fi.Mode()))
	}
	if fi.Size() > int64(max) {
		return nil, fmt.Errorf("%s: larger than %s: not read", what, bounded.SizeText(max))
	}
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// The file may have been swapped since the look: check what was
	// opened too.
	if st, err := f.Stat(); err != nil {
		return nil, err
	} else if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file (%s): not read", what, bounded.Kind(st.Mode()))
	}
	return bounded.ReadAll(f, max, what)
}

// topNames lists the names at the top of fsys, at most MaxDirEntries of
// them (read in chunks, so a huge directory is refused without listing
// it all), sorted.
func topNames(fsys fs.FS, display string) ([]string, error) {
	f, err := fsys.Open(".")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", display, err)
	}
	defer f.Close()
	rd, ok := f.(fs.ReadDirFile)
	if !ok {
		return nil, fmt.Errorf("%s: not a directory", display)
	}
	var names []string
	for {
		es, err := rd.ReadDir(256)
		for _, e := range es {
			names = append(names, e.Name())
		}
		if len(names) > MaxDirEntries {
			return nil, fmt.Errorf("%s: more than %d entries: not a catalog directory (not read)", display, MaxDirEntries)
		}
		if err == io.EOF || (err == nil && len(es) == 0) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", display, err)
		}
	}
	return names, nil
}

// badRune is the first control character of s (a C0 or C1 control, DEL,
// or a bidirectional override that reorders what a terminal shows), with
// its byte offset; ok is false when s has none. Tab and newline count
// only when allowWS is false.
func badRune(s string, allowWS bool) (r rune, at int, ok bool) {
	for i, c := range s {
		switch {
		case c == utf8.RuneError:
			if _, n := utf8.DecodeRuneInString(s[i:]); n == 1 {
				return c, i, true
			}
		case allowWS && (c == '\n' || c == '\t'):
		case unicode.IsControl(c), c >= 0x202a && c <= 0x202e, c >= 0x2066 && c <= 0x2069:
			return c, i, true
		}
	}
	return 0, 0, false
}

// badPathRune is badRune for a path of a diff, which may name a file
// whose name is not UTF-8 (the journal keeps such names, and they are
// shown escaped): control characters only.
func badPathRune(s string) (rune, bool) {
	for _, c := range s {
		if c != utf8.RuneError && (unicode.IsControl(c) || c >= 0x202a && c <= 0x202e || c >= 0x2066 && c <= 0x2069) {
			return c, true
		}
	}
	return 0, false
}

// oneLine folds the tabs and line breaks of a catalog text into single
// spaces: a summary or a description is one line wherever it is shown.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\n\t") {
		return s
	}
	return strings.Join(strings.Fields(s), " ")
}

// text checks a text the catalog shows (key names it): no control
// character but the tabs and line breaks prose may have, which are folded
// into spaces (a name may have neither), at most MaxTextLen bytes.
func (l *loader) text(line int, key, s string, name bool) (string, error) {
	if r, at, bad := badRune(s, !name); bad {
		return "", l.errf(line, "%s: control character %U at byte %d: not allowed in catalog text", key, r, at)
	}
	if len(s) > MaxTextLen {
		return "", l.errf(line, "%s: %d bytes, more than the %d a catalog text may have", key, len(s), MaxTextLen)
	}
	return oneLine(s), nil
}
