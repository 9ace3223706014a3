package matrix

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/smpatch/smpatch/internal/bounded"
	"github.com/smpatch/smpatch/internal/confined"
)

// RenderMarker is the file that marks a directory smpatch matrix render
// wrote. It names the files that render wrote (a format, its version and
// the list), so that the next render replaces those and nothing else: the
// logs run.sh wrote beside them, a Slurm job's slurm-*.out, a user's notes.
const RenderMarker = ".smpatch-render"

// renderFormat is the marker's version: 2 lists the files; 1 (no list)
// is read as every file of the names render writes.
const renderFormat = 2

type renderMarker struct {
	Format  string   `json:"format"`
	Version int      `json:"version"`
	Files   []string `json:"files,omitempty"`
}

// maxMarkerSize bounds what is read of a render marker: a few dozen bytes
// per file of 65536 cells.
const maxMarkerSize = 64 << 20

// maxMarkerFiles bounds the files a marker may list: render writes at most
// four a cell of MaxFileCells, and a few for the matrix.
const maxMarkerFiles = 4*MaxFileCells + 1024

// ErrNotRendered is returned by WriteRender for an existing directory it
// must not replace.
var ErrNotRendered = errors.New("not written by smpatch matrix render")

// stagePrefix starts the name of the directory a render is written into
// before its files move into place.
const stagePrefix = ".smpatch-render.tmp-"

// readMarker returns the files an earlier render wrote into the directory
// r is: those its marker lists, or, for a marker of version 1, the files
// of the names render writes.
func readMarker(r *os.Root, dir string) ([]string, error) {
	b, err := bounded.ReadFile(r.FS(), RenderMarker, maxMarkerSize)
	if err != nil {
		return nil, fmt.Errorf("%s is not empty and was %w (no %s marker); choose another --out or remove it", dir, ErrNotRendered, RenderMarker)
	}
	var mk renderMarker
	if json.Unmarshal(b, &mk) != nil || mk.Format != "smpatch-render" || mk.Version < 1 {
		return nil, fmt.Errorf("%s: %s is not a render marker; %w: choose another --out or remove it", dir, RenderMarker, ErrNotRendered)
	}
	if mk.Version > renderFormat {
		return nil, fmt.Errorf("%s: written by a newer smpatch (render format %d); choose another --out", dir, mk.Version)
	}
	if mk.Version == 1 {
		return renderedBefore(r)
	}
	if len(mk.Files) > maxMarkerFiles {
		return nil, fmt.Errorf("%s: %s lists %d files, more than render writes (%d); %w: choose another --out or remove it", dir, RenderMarker, len(mk.Files), maxMarkerFiles, ErrNotRendered)
	}
	for _, f := range mk.Files {
		if !fs.ValidPath(f) || f == "." || f == RenderMarker {
			return nil, fmt.Errorf("%s: %s lists %q, not a file render writes; %w: choose another --out or remove it", dir, RenderMarker, f, ErrNotRendered)
		}
	}
	return mk.Files, nil
}

// renderedBefore lists the regular files of r named as render names them
// (a marker of version 1 has no list).
func renderedBefore(r *os.Root) ([]string, error) {
	var out []string
	top, err := fs.ReadDir(r.FS(), ".")
	if err != nil {
		return nil, err
	}
	for _, e := range top {
		n := e.Name()
		switch {
		case e.Type().IsRegular() && (n == "index.json" || n == "SUMMARY.md" || n == "slurm.sbatch" || strings.HasPrefix(n, "github-matrix") && strings.HasSuffix(n, ".json")):
			out = append(out, n)
		case e.IsDir() && !strings.HasPrefix(n, "."):
			sub, err := fs.ReadDir(r.FS(), n)
			if err != nil {
				return nil, err
			}
			for _, f := range sub {
				if f.Type().IsRegular() && slices.Contains([]string{"run.sh", "env", "sitecustomize.py", "job.yaml"}, f.Name()) {
					out = append(out, n+"/"+f.Name())
				}
			}
		}
	}
	return out, nil
}

// WriteRender puts rendered files under dir. An existing dir is written
// into only when it is empty or holds the marker of an earlier render;
// then exactly the files that render wrote are replaced or removed, and
// everything else in dir is left as it is. Every file is written first
// into a directory of its own inside dir, so that a render that fails
// there leaves dir as it was; the files then move into place, and the
// marker, listing them, comes last. A file to write whose name is taken by
// something the earlier render did not write is refused before anything
// changes. Nothing is written through a symbolic link found in dir.
func WriteRender(dir string, files map[string][]byte) (err error) {
	if _, ok := files[RenderMarker]; ok {
		return fmt.Errorf("%s: a rendered file may not be named %s", dir, RenderMarker)
	}
	names := sortedKeys(files)
	for _, n := range names {
		if !fs.ValidPath(n) || n == "." || strings.HasPrefix(n, stagePrefix) {
			return fmt.Errorf("%s: %q is not a file name render writes", dir, n)
		}
	}
	made := false
	if fi, err := os.Lstat(dir); err == nil {
		if fi.Mode()&os.ModeSymlink != 0 {
			return fmt.Errorf("%s is a symbolic link; name the directory itself", dir)
		}
		if !fi.IsDir() {
			return fmt.Errorf("%s exists and is not a directory", dir)
		}
	} else if !os.IsNotExist(err) {
		return err
	} else {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		made = true
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer r.Close()
	defer func() {
		if err != nil && made {
			os.Remove(dir) // only when still empty
		}
	}()
	entries, err := fs.ReadDir(r.FS(), ".")
	if err != nil {
		return err
	}
	var before []string
	if len(entries) > 0 {
		if before, err = readMarker(r, dir); err != nil {
			return err
		}
	}
	if err := checkNames(r, dir, names, before); err != nil {
		return err
	}
	stage, err := makeStage(r)
	if err != nil {
		return err
	}
	defer r.RemoveAll(stage)
	for _, n := range names {
		if err := writeStaged(r, stage, n, files[n]); err != nil {
			return err
		}
	}
	for _, n := range names {
		if err := r.MkdirAll(path.Dir(n), 0o755); err != nil {
			return err
		}
		if err := r.Rename(path.Join(stage, n), n); err != nil {
			return err
		}
	}
	removeStale(r, before, files)
	mk, _ := json.MarshalIndent(renderMarker{Format: "smpatch-render", Version: renderFormat, Files: names}, "", "  ")
	return confined.WriteFile(r, RenderMarker, append(mk, '\n'), 0o644)
}

// checkNames refuses a name to write that something other than an earlier
// render's file holds: a directory, a link, a named pipe, a user's file.
func checkNames(r *os.Root, dir string, names, before []string) error {
	ours := map[string]bool{}
	for _, n := range before {
		ours[n] = true
	}
	dirs := map[string]bool{}
	for _, n := range names {
		// The directories on the way: none may be a link (an os.Root
		// would refuse one that leads out, in less plain words).
		for d := path.Dir(n); d != "." && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
			fi, err := r.Lstat(d)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return err
			}
			if !fi.IsDir() {
				what := bounded.Kind(fi.Mode())
				if fi.Mode()&fs.ModeSymlink != 0 {
					what = "a symbolic link"
				}
				return fmt.Errorf("%s is %s, where render writes a directory; remove it or choose another --out", filepath.Join(dir, filepath.FromSlash(d)), what)
			}
		}
		fi, err := r.Lstat(n)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		p := filepath.Join(dir, filepath.FromSlash(n))
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			return fmt.Errorf("%s is a symbolic link: render replaces only files it wrote; remove it", p)
		case !fi.Mode().IsRegular():
			return fmt.Errorf("%s is %s: render replaces only files it wrote; move it away", p, bounded.Kind(fi.Mode()))
		case !ours[n]:
			return fmt.Errorf("%s was not written by smpatch matrix render (the marker does not list it); move it away or choose another --out", p)
		}
	}
	return nil
}

func makeStage(r *os.Root) (string, error) {
	for range 10 {
		var b [6]byte
		rand.Read(b[:])
		name := stagePrefix + hex.EncodeToString(b[:])
		if err := r.Mkdir(name, 0o755); err == nil {
			return name, nil
		} else if !errors.Is(err, fs.ErrExist) {
			return "", err
		}
	}
	return "", errors.New("no name free for a staging directory")
}

func writeStaged(r *os.Root, stage, name string, data []byte) error {
	p := path.Join(stage, name)
	if err := r.MkdirAll(path.Dir(p), 0o755); err != nil {
		return err
	}
	mode := os.FileMode(0o644)
	if strings.HasSuffix(name, ".sh") || strings.HasSuffix(name, ".sbatch") {
		mode = 0o755
	}
	f, err := r.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = r.Chmod(p, mode)
	}
	return err
}

// removeStale removes the files the earlier render wrote that this one
// does not, and then the directories they leave empty. Only regular
// files (or a link put in a file's place) are removed.
func removeStale(r *os.Root, before []string, files map[string][]byte) {
	dirs := map[string]bool{}
	for _, n := range before {
		if _, keep := files[n]; keep {
			continue
		}
		fi, err := r.Lstat(n)
		if err != nil || fi.IsDir() {
			continue
		}
		if r.Remove(n) == nil && path.Dir(n) != "." {
			dirs[path.Dir(n)] = true
		}
	}
	for _, d := range sortedKeys(dirs) {
		r.Remove(d) // fails, as it should, when something else is left in it
	}
}
