package source

import (
	"fmt"
	"strings"
)

// OpenSitePackages opens the package of p installed in the site-packages
// directory dir. Repository paths map to package paths: sglang's
// python/sglang/... is sglang/...; flashinfer's flashinfer/... stays, and its
// include/ and csrc/ live under flashinfer/data/.
func OpenSitePackages(dir string, p Project) (WritableTree, error) {
	if !KnownProject(p) {
		return nil, fmt.Errorf("unknown project %q", p)
	}
	root, err := cleanRoot(dir)
	if err != nil {
		return nil, err
	}
	if !DetectSitePackages(root, p) {
		if e, _ := FindEditable([]string{root}, p); e != nil {
			return nil, fmt.Errorf("%s: no installed %s package here: it is an editable install of the checkout %s (%s); give --repo %s", dir, p, e.Checkout, e.Via, e.Checkout)
		}
		return nil, fmt.Errorf("%s: no installed %s package here", dir, p)
	}
	return &dirTree{
		root:     root,
		kind:     KindSitePackages,
		project:  p,
		toDisk:   func(rel string) (string, bool) { return RepoToPackagePath(p, rel) },
		fromDisk: func(rel string) (string, bool) { return PackageToRepoPath(p, rel) },
	}, nil
}

// RepoToPackagePath maps a repository-relative path of p to its path
// relative to site-packages; false when the file is not installed.
func RepoToPackagePath(p Project, rel string) (string, bool) {
	switch p {
	case SGLang:
		if r, ok := strings.CutPrefix(rel, "python/sglang/"); ok {
			return "sglang/" + r, true
		}
		if rel == "python/sglang" {
			return "sglang", true
		}
	case FlashInfer:
		for _, d := range []string{"include", "csrc"} {
			if r, ok := strings.CutPrefix(rel, d+"/"); ok {
				return "flashinfer/data/" + d + "/" + r, true
			}
			if rel == d {
				return "flashinfer/data/" + d, true
			}
		}
		if strings.HasPrefix(rel, "flashinfer/") || rel == "flashinfer" {
			return rel, true
		}
	}
	return "", false
}

// PackageToRepoPath is the inverse of RepoToPackagePath.
func PackageToRepoPath(p Project, pkgRel string) (string, bool) {
	switch p {
	case SGLang:
		if r, ok := strings.CutPrefix(pkgRel, "sglang/"); ok {
			return "python/sglang/" + r, true
		}
		if pkgRel == "sglang" {
			return "python/sglang", true
		}
	case FlashInfer:
		for _, d := range []string{"include", "csrc"} {
			if r, ok := strings.CutPrefix(pkgRel, "flashinfer/data/"+d+"/"); ok {
				return d + "/" + r, true
			}
			if pkgRel == "flashinfer/data/"+d {
				return d, true
			}
		}
		if strings.HasPrefix(pkgRel, "flashinfer/") || pkgRel == "flashinfer" {
			return pkgRel, true
		}
	}
	return "", false
}

// ShownPath is the repository-relative path rel as it is in the tree t,
// for people: in a site-packages tree the package path (sglang's
// python/sglang/x.py is sglang/x.py there), elsewhere rel itself.
func ShownPath(t Tree, rel string) string {
	if t == nil || t.Kind() != KindSitePackages {
		return rel
	}
	if p, ok := RepoToPackagePath(t.Project(), rel); ok {
		return p
	}
	return rel
}
