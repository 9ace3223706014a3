package doctor

import (
	"context"
	"sort"
	"strings"

	"github.com/hashicorp/go-version"

	"github.com/smpatch/smpatch/source"
)

// Patched is t as it reads once changes (repository path → new bytes, nil
// for a removed file) are written: what a launch meets after patches are
// applied, decided before anything is written.
func Patched(t source.Tree, changes map[string][]byte) source.Tree {
	if len(changes) == 0 {
		return t
	}
	return &patched{t: t, changes: changes}
}

type patched struct {
	t       source.Tree
	changes map[string][]byte
}

func (p *patched) Root() string            { return p.t.Root() }
func (p *patched) Kind() source.Kind       { return p.t.Kind() }
func (p *patched) Project() source.Project { return p.t.Project() }
func (p *patched) Version(ctx context.Context) (*version.Version, string, error) {
	return p.t.Version(ctx)
}

func (p *patched) ReadFile(rel string) ([]byte, error) {
	if data, ok := p.changes[rel]; ok {
		if data == nil {
			return nil, &pathError{rel}
		}
		return data, nil
	}
	return p.t.ReadFile(rel)
}

func (p *patched) ListFiles(dir string) ([]string, error) {
	files, err := p.t.ListFiles(dir)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []string
	for _, f := range files {
		if data, ok := p.changes[f]; ok && data == nil {
			continue
		}
		seen[f] = true
		out = append(out, f)
	}
	prefix := strings.TrimSuffix(dir, "/") + "/"
	for f, data := range p.changes {
		if data != nil && !seen[f] && (dir == "" || strings.HasPrefix(f, prefix)) {
			out = append(out, f)
		}
	}
	sort.Strings(out)
	return out, nil
}

// pathError is a removed file: fs.ErrNotExist.
type pathError struct{ rel string }

func (e *pathError) Error() string { return e.rel + ": removed by a patch" }
func (e *pathError) Is(target error) bool {
	return target == fsErrNotExist
}
