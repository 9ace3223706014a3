package source

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// DetectCheckout reports which project the directory root is a source
// checkout of: sglang has python/sglang/ with an __init__.py; flashinfer has
// flashinfer/__init__.py beside include/ or csrc/.
func DetectCheckout(root string) (Project, bool) {
	if isFile(filepath.Join(root, "python", "sglang", "__init__.py")) || isDir(filepath.Join(root, "python", "sglang", "srt")) {
		return SGLang, true
	}
	if isFile(filepath.Join(root, "flashinfer", "__init__.py")) &&
		(isDir(filepath.Join(root, "include", "flashinfer")) || isDir(filepath.Join(root, "csrc"))) {
		return FlashInfer, true
	}
	return "", false
}

// DetectSitePackages reports whether dir holds the installed package of p.
func DetectSitePackages(dir string, p Project) bool {
	pkg, ok := packageDir(p)
	if !ok {
		return false
	}
	return isFile(filepath.Join(dir, pkg, "__init__.py")) || isDir(filepath.Join(dir, pkg))
}

// ProjectRoots are the repository-relative directories a patch of p may touch.
func ProjectRoots(p Project) []string {
	switch p {
	case SGLang:
		return []string{"python/sglang/"}
	case FlashInfer:
		return []string{"flashinfer/", "include/", "csrc/"}
	}
	return nil
}

// KnownProject reports whether p is a project smpatch knows.
func KnownProject(p Project) bool { return p == SGLang || p == FlashInfer }

// DistName is the name p is installed under (dist-info).
func DistName(p Project) string {
	if p == FlashInfer {
		return "flashinfer-python"
	}
	return string(p)
}

func packageDir(p Project) (string, bool) {
	switch p {
	case SGLang:
		return "sglang", true
	case FlashInfer:
		return "flashinfer", true
	}
	return "", false
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// Resolve finds the tree a command means (README.md, "Command line"):
// repoFlag when set, else $SMPATCH_REPO, else the current directory (or a
// parent) when it is a checkout of project, else project as installed for
// the interpreter python. project "" accepts either project. A directory
// given explicitly may be a checkout or a site-packages directory.
func Resolve(ctx context.Context, repoFlag string, project Project, python string) (WritableTree, error) {
	if repoFlag != "" {
		return openDir(repoFlag, project)
	}
	if env := os.Getenv("SMPATCH_REPO"); env != "" {
		t, err := openDir(env, project)
		if err != nil {
			return nil, fmt.Errorf("$SMPATCH_REPO: %w", err)
		}
		return t, nil
	}
	if cwd, err := os.Getwd(); err == nil {
		for d := cwd; ; {
			if p, ok := DetectCheckout(d); ok && (project == "" || p == project) {
				root, err := cleanRoot(d)
				if err != nil {
					return nil, err
				}
				return newCheckout(root, p), nil
			}
			parent := filepath.Dir(d)
			if parent == d {
				break
			}
			d = parent
		}
	}
	if python == "" {
		python = "python3"
	}
	paths, err := PythonSysPath(ctx, python)
	if err != nil {
		return nil, fmt.Errorf("no --repo given, the current directory is no checkout, and %s could not be asked for its site-packages: %w", python, err)
	}
	sps := SitePackagesDirs(paths)
	candidates := []Project{project}
	if project == "" {
		candidates = []Project{SGLang, FlashInfer}
	}
	for _, p := range candidates {
		d, err := FindDist(sps, DistName(p))
		if err != nil && p == FlashInfer {
			d, err = FindDist(sps, "flashinfer")
		}
		if err == nil && d != nil && d.Location != "" {
			if DetectSitePackages(d.Location, p) {
				return OpenSitePackages(d.Location, p)
			}
			// An editable install: the dist-info is here, the code in a
			// checkout (direct_url.json, a .pth, a finder module).
			e, err := FindEditable([]string{d.Location}, p)
			if err != nil {
				return nil, err
			}
			if e != nil {
				return openEditable(e)
			}
			return OpenSitePackages(d.Location, p)
		}
		for _, sp := range sps {
			if DetectSitePackages(sp, p) {
				return OpenSitePackages(sp, p)
			}
		}
		// setup.py develop keeps the metadata in the checkout: only an
		// egg-link (or a .pth) is left in site-packages.
		e, err := FindEditable(sps, p)
		if err != nil {
			return nil, err
		}
		if e != nil {
			return openEditable(e)
		}
	}
	what := "sglang or flashinfer"
	if project != "" {
		what = string(project)
	}
	where := "site-packages: " + strings.Join(sps, ", ")
	if len(sps) == 0 {
		where = "its sys.path has no existing site-packages directory"
	}
	return nil, fmt.Errorf("no --repo given, the current directory is no checkout of %s, and %s is not installed for %s (%s)",
		what, what, python, where)
}

// openDir opens an explicitly named directory as a checkout, else as a
// site-packages directory holding project.
func openDir(dir string, project Project) (WritableTree, error) {
	root, err := cleanRoot(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: no such directory", dir)
	}
	if err != nil {
		return nil, err
	}
	if p, ok := DetectCheckout(root); ok {
		if project != "" && p != project {
			return nil, fmt.Errorf("%s is a checkout of %s, not %s", dir, p, project)
		}
		return newCheckout(root, p), nil
	}
	// CHECKOUT/python holds sglang/ as site-packages do, but it is part of
	// a checkout: journaling it as an installed tree would put .smpatch/
	// inside the checkout, out of the checkout's own journal and git exclude.
	if parent := filepath.Dir(root); filepath.Base(root) == "python" {
		if p, ok := DetectCheckout(parent); ok && p == SGLang {
			return nil, fmt.Errorf("%s is the python/ directory of the sglang checkout %s: give --repo %s", dir, parent, parent)
		}
	}
	candidates := []Project{project}
	if project == "" {
		candidates = []Project{SGLang, FlashInfer}
	}
	for _, p := range candidates {
		if DetectSitePackages(root, p) {
			return OpenSitePackages(root, p)
		}
	}
	// The site-packages of an editable install holds only a pointer to
	// the checkout: that is the tree.
	for _, p := range candidates {
		e, err := FindEditable([]string{root}, p)
		if err != nil {
			return nil, err
		}
		if e != nil {
			return openEditable(e)
		}
	}
	// A directory inside a checkout (python/sglang, its srt/layers):
	// the checkout is the tree to give.
	for up, n := filepath.Dir(root), 0; n < 6 && up != filepath.Dir(up); up, n = filepath.Dir(up), n+1 {
		if p, ok := DetectCheckout(up); ok && (project == "" || p == project) {
			return nil, fmt.Errorf("%s is inside the %s checkout %s: give --repo %s", dir, p, up, up)
		}
	}
	if project == "" {
		return nil, fmt.Errorf("%s: %w, nor a site-packages directory holding either", dir, ErrUnknownProject)
	}
	return nil, fmt.Errorf("%s: neither a checkout of %s nor a site-packages directory holding it", dir, project)
}
