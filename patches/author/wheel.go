package author

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/smpatch/smpatch/internal/bounded"
	"github.com/smpatch/smpatch/internal/termsafe"
	"github.com/smpatch/smpatch/source"
)

// maxRecord is the most bytes a dist-info RECORD may have.
const maxRecord = 16 << 20

// maxCacheEntries bounds the walk of pip's cache for a wheel.
const maxCacheEntries = 200000

// record is a dist-info RECORD: site-packages path -> sha256 (raw).
type record map[string][]byte

// parseRecord reads a RECORD (CSV: path, sha256=URLSAFE-B64, size);
// entries without a hash (RECORD itself, bytecode) are left out. src
// names it in errors (src:line).
func parseRecord(src string, data []byte) (record, error) {
	r := csv.NewReader(bytes.NewReader(data))
	r.FieldsPerRecord = -1
	out := record{}
	for line := 1; ; line++ {
		row, err := r.Read()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", src, line, err)
		}
		if len(row) < 2 || row[1] == "" {
			continue
		}
		algo, sum, ok := strings.Cut(row[1], "=")
		if !ok || algo != "sha256" {
			continue
		}
		h, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(sum, "="))
		if err != nil || len(h) != sha256.Size {
			return nil, fmt.Errorf("%s:%d: %s: bad sha256 %q", src, line, row[0], sum)
		}
		p := path.Clean(row[0])
		if path.IsAbs(p) || strings.HasPrefix(p, "../") || p == ".." {
			continue // a file installed outside site-packages (scripts)
		}
		out[p] = h
	}
}

// WheelPristine is the wheel a site-packages tree was installed from:
// wheel, or one pip's cache holds; every file read from it must have the
// sha256 its installed RECORD lists, so a wheel of another build is
// refused. Without a wheel, only the RECORD's hashes are known: a changed
// file then has no pristine bytes and is refused with a line.
func WheelPristine(t source.Tree, wheel string) (pr *Pristine, err error) {
	dist, ferr := source.FindDist([]string{t.Root()}, source.DistName(t.Project()))
	if ferr != nil {
		return nil, inputf("%s: no dist-info of %s (%v): its RECORD hashes are needed to check a pristine source", t.Root(), source.DistName(t.Project()), ferr)
	}
	recPath := filepath.Join(dist.DistInfo, "RECORD")
	data, err := readRegular(recPath, maxRecord)
	if err != nil {
		return nil, inputf("%s: %v", recPath, err)
	}
	rec, err := parseRecord(recPath, data)
	if err != nil {
		return nil, &InputError{err.Error()}
	}
	if wheel == "" {
		wheel = findCachedWheel(dist.Name, dist.Version)
	}
	pr = &Pristine{Desc: fmt.Sprintf("%s %s's RECORD (no wheel)", dist.Name, dist.Version)}
	var zr *zip.ReadCloser
	if wheel != "" {
		if fi, err := os.Stat(wheel); err != nil {
			return nil, inputf("%s: %v", wheel, err)
		} else if !fi.Mode().IsRegular() {
			return nil, inputf("%s: not a regular file (%s): not a wheel", wheel, bounded.Kind(fi.Mode()))
		}
		if zr, err = zip.OpenReader(wheel); err != nil {
			return nil, inputf("%s: not a wheel: %v", wheel, err)
		}
		defer func() {
			if pr == nil {
				zr.Close()
			}
		}()
		if err := checkMembers(wheel, zr.File); err != nil {
			return nil, err
		}
		sum, err := fileSHA256(wheel)
		if err != nil {
			return nil, err
		}
		pr.Desc = fmt.Sprintf("wheel %s", filepath.Base(wheel))
		pr.Base = fmt.Sprintf("wheel %s sha256:%s", filepath.Base(wheel), sum)
	}
	inWheel := map[string]*zip.File{}
	if zr != nil {
		for _, f := range zr.File {
			inWheel[path.Clean(f.Name)] = f
		}
	}
	for p := range rec {
		if rel, ok := source.PackageToRepoPath(t.Project(), p); ok {
			pr.files = append(pr.files, rel)
		}
	}
	sort.Strings(pr.files)
	pr.unchanged = func(rel string, cur []byte) bool {
		p, ok := source.RepoToPackagePath(t.Project(), rel)
		h := sha256.Sum256(cur)
		return ok && rec[p] != nil && bytes.Equal(rec[p], h[:])
	}
	pr.read = func(rel string) ([]byte, error) {
		p, ok := source.RepoToPackagePath(t.Project(), rel)
		if !ok || rec[p] == nil {
			return nil, nil
		}
		if zr == nil {
			return nil, inputf("%s: differs from the hash in %s and no wheel of %s %s is at hand to read its pristine bytes: give --wheel FILE (pip download %s==%s --no-deps)",
				source.ShownPath(t, rel), recPath, dist.Name, dist.Version, dist.Name, dist.Version)
		}
		f := inWheel[p]
		if f == nil {
			return nil, inputf("%s: %s is not in the wheel, yet its RECORD lists it: not the wheel it was installed from", wheel, p)
		}
		if f.UncompressedSize64 > MaxFileSize {
			return nil, inputf("%s: %s: %d bytes, more than %d", wheel, p, f.UncompressedSize64, MaxFileSize)
		}
		rc, err := f.Open()
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", wheel, p, err)
		}
		defer rc.Close()
		b, err := bounded.ReadAll(rc, MaxFileSize, wheel+": "+p)
		if err != nil {
			return nil, err
		}
		if h := sha256.Sum256(b); !bytes.Equal(h[:], rec[p]) {
			return nil, inputf("%s: %s does not have the sha256 %s lists: not the wheel %s %s was installed from", wheel, p, recPath, dist.Name, dist.Version)
		}
		if b == nil {
			b = []byte{}
		}
		return b, nil
	}
	return pr, nil
}

// findCachedWheel looks for NAME-VERSION-*.whl in pip's cache
// ($PIP_CACHE_DIR, else $XDG_CACHE_HOME/pip or ~/.cache/pip): its built
// wheels, and its HTTP cache bodies that are that wheel. "" when none.
func findCachedWheel(name, ver string) string {
	dir := os.Getenv("PIP_CACHE_DIR")
	if dir == "" {
		base := os.Getenv("XDG_CACHE_HOME")
		if base == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return ""
			}
			base = filepath.Join(home, ".cache")
		}
		dir = filepath.Join(base, "pip")
	}
	stem := strings.ReplaceAll(source.NormalizeDistName(name), "-", "_") + "-" + ver + "-"
	distInfo := strings.ReplaceAll(source.NormalizeDistName(name), "-", "_") + "-" + ver + ".dist-info/RECORD"
	found, n := "", 0
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if n++; err != nil || n > maxCacheEntries || found != "" {
			return fs.SkipAll
		}
		if !d.Type().IsRegular() {
			return nil
		}
		switch {
		case strings.HasSuffix(p, ".whl") && strings.HasPrefix(strings.ToLower(d.Name()), strings.ToLower(stem)):
			found = p
		case strings.HasSuffix(p, ".body"):
			if zr, err := zip.OpenReader(p); err == nil {
				for _, f := range zr.File {
					if strings.EqualFold(f.Name, distInfo) {
						found = p
						break
					}
				}
				zr.Close()
			}
		}
		return nil
	})
	return found
}

func fileSHA256(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return fmt.Sprintf("%x", h.Sum(nil)), nil
}

// readRegular reads a regular file of at most max bytes.
func readRegular(p string, max int) ([]byte, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, errors.New("not a regular file (" + bounded.Kind(fi.Mode()) + ")")
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return bounded.ReadAll(f, max, p)
}

// maxWheelMembers bounds the members of a wheel read.
const maxWheelMembers = 200000

// checkMembers refuses a wheel with a member outside it (an absolute path,
// "..", a backslash path), a name twice, or too many members.
func checkMembers(wheel string, fs []*zip.File) error {
	if len(fs) > maxWheelMembers {
		return inputf("%s: %d members, more than %d: not a wheel smpatch reads", wheel, len(fs), maxWheelMembers)
	}
	seen := map[string]bool{}
	for i, f := range fs {
		n := f.Name
		c := path.Clean(n)
		if n == "" || path.IsAbs(n) || strings.Contains(n, "\\") || c == ".." || strings.HasPrefix(c, "../") || strings.ContainsRune(n, 0) {
			return inputf("%s: member #%d %q is outside the wheel: not read", wheel, i+1, termsafe.Line(n))
		}
		if seen[c] {
			return inputf("%s: member %q twice: not read", wheel, termsafe.Line(n))
		}
		seen[c] = true
	}
	return nil
}
