package source

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// Dist is one installed distribution, read from its *.dist-info directory.
type Dist struct {
	Name     string // as written in METADATA ("flashinfer-python")
	Version  string // as written in METADATA ("0.6.17")
	Location string // the site-packages directory that holds it
	DistInfo string // the *.dist-info (or *.egg-info) directory
	// Metadata holds the METADATA header fields, each key as written, values
	// in order (Requires-Dist repeats).
	Metadata map[string][]string
}

// NormalizeDistName is the PEP 503 normal form of a distribution name:
// lower case, runs of "-", "_" and "." become one "-".
func NormalizeDistName(name string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.TrimSpace(name) {
		if r == '-' || r == '_' || r == '.' {
			dash = true
			continue
		}
		if dash && b.Len() > 0 {
			b.WriteByte('-')
		}
		dash = false
		if r >= 'A' && r <= 'Z' {
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// FindDist finds the distribution name (any spelling PEP 503 treats as the
// same) in the site-packages directories, first directory first, as Python's
// import system would. A distribution that is not installed is an error
// satisfying errors.Is(err, fs.ErrNotExist).
func FindDist(sitePackages []string, name string) (*Dist, error) {
	return findDist(osReader{}, sitePackages, name)
}

// FindDistFS is FindDist over an fs.FS (an image filesystem, say): the
// site-packages paths are slash-separated and have no leading "/".
func FindDistFS(fsys fs.FS, sitePackages []string, name string) (*Dist, error) {
	return findDist(fsReader{fsys}, sitePackages, name)
}

type dirReader interface {
	readDir(dir string) ([]fs.DirEntry, error)
	readFile(name string) ([]byte, error)
	join(elem ...string) string
}

type osReader struct{}

func (osReader) readDir(dir string) ([]fs.DirEntry, error) { return os.ReadDir(dir) }
func (osReader) readFile(name string) ([]byte, error)      { return os.ReadFile(name) }
func (osReader) join(elem ...string) string                { return filepath.Join(elem...) }

type fsReader struct{ fsys fs.FS }

func (r fsReader) readDir(dir string) ([]fs.DirEntry, error) {
	return fs.ReadDir(r.fsys, strings.TrimPrefix(path.Clean(dir), "/"))
}
func (r fsReader) readFile(name string) ([]byte, error) {
	return fs.ReadFile(r.fsys, strings.TrimPrefix(path.Clean(name), "/"))
}
func (fsReader) join(elem ...string) string { return path.Join(elem...) }

func findDist(r dirReader, sitePackages []string, name string) (*Dist, error) {
	want := NormalizeDistName(name)
	if want == "" {
		return nil, fmt.Errorf("empty distribution name")
	}
	for _, sp := range sitePackages {
		ents, err := r.readDir(sp)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return nil, fmt.Errorf("%s: %w", sp, err)
		}
		// dist-info before egg-info; sorted for a stable pick.
		var cands []string
		for _, e := range ents {
			n := e.Name()
			if !strings.HasSuffix(n, ".dist-info") && !strings.HasSuffix(n, ".egg-info") {
				continue
			}
			if distDirName(n) == want {
				cands = append(cands, n)
			}
		}
		sort.SliceStable(cands, func(i, j int) bool {
			return strings.HasSuffix(cands[i], ".dist-info") && !strings.HasSuffix(cands[j], ".dist-info")
		})
		for _, c := range cands {
			dir := r.join(sp, c)
			file := "METADATA"
			if strings.HasSuffix(c, ".egg-info") {
				file = "PKG-INFO"
			}
			data, err := r.readFile(r.join(dir, file))
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					continue // a leftover directory without metadata is not an install
				}
				return nil, fmt.Errorf("%s: %w", r.join(dir, file), err)
			}
			md := ParseMetadata(data)
			d := &Dist{Location: sp, DistInfo: dir, Metadata: md}
			d.Name = first(md["Name"])
			d.Version = first(md["Version"])
			if d.Name == "" || NormalizeDistName(d.Name) != want {
				continue
			}
			if d.Version == "" {
				return nil, fmt.Errorf("%s: no Version field", r.join(dir, file))
			}
			return d, nil
		}
	}
	return nil, fmt.Errorf("distribution %s not found in %s: %w", name, strings.Join(sitePackages, ", "), fs.ErrNotExist)
}

// distDirName is the normalised distribution name of a "NAME-VERSION.dist-info"
// directory (NAME has no "-" there: wheels escape it as "_").
func distDirName(dir string) string {
	base := strings.TrimSuffix(strings.TrimSuffix(dir, ".dist-info"), ".egg-info")
	if i := strings.IndexByte(base, '-'); i >= 0 {
		base = base[:i]
	}
	return NormalizeDistName(base)
}

// ParseMetadata reads the header fields of a core-metadata file (METADATA or
// PKG-INFO): "Key: value" lines up to the first empty line, continuation
// lines folded into the value before them.
func ParseMetadata(data []byte) map[string][]string {
	md := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	var lastKey string
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if line == "" {
			break
		}
		if (line[0] == ' ' || line[0] == '\t') && lastKey != "" {
			vs := md[lastKey]
			vs[len(vs)-1] += "\n" + strings.TrimSpace(line)
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			lastKey = ""
			continue
		}
		k = strings.TrimSpace(k)
		md[k] = append(md[k], strings.TrimSpace(v))
		lastKey = k
	}
	return md
}

func first(vs []string) string {
	if len(vs) == 0 {
		return ""
	}
	return vs[0]
}

// EditableDir reads a dist-info's direct_url.json (PEP 610) and returns the
// local directory an editable install (pip install -e) was made from, as a
// slash-separated absolute path. It reports false for anything else: no
// file, not editable, not a file:// URL.
func EditableDir(directURLJSON []byte) (string, bool) {
	var du struct {
		URL     string `json:"url"`
		DirInfo struct {
			Editable bool `json:"editable"`
		} `json:"dir_info"`
	}
	if json.Unmarshal(directURLJSON, &du) != nil || !du.DirInfo.Editable {
		return "", false
	}
	u, err := url.Parse(du.URL)
	if err != nil || u.Scheme != "file" || u.Path == "" {
		return "", false
	}
	return path.Clean(u.Path), true
}
