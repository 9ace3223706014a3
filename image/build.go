package image

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// ManifestPath is where the patch layer records what it did.
const ManifestPath = "etc/smpatch/manifest.json"

// Label keys set on every built image.
const (
	LabelBaseDigest = "org.opencontainers.image.base.digest"
	LabelBaseName   = "org.opencontainers.image.base.name"
	LabelCell       = "io.smpatch.cell"
	LabelPatchSet   = "io.smpatch.patch-set"
	LabelPatches    = "io.smpatch.patches"
	LabelVersionPfx = "io.smpatch.version." // + project name
)

// Manifest is /etc/smpatch/manifest.json in a built image. Its keys are
// stable.
type Manifest struct {
	Cell          string            `json:"cell,omitempty"`
	Base          ManifestBase      `json:"base"`
	Projects      []ManifestProject `json:"projects"`
	Patches       []ManifestPatch   `json:"patches"`
	PatchSet      string            `json:"patch_set"`
	CatalogDigest string            `json:"catalog_digest,omitempty"`
	Files         []ManifestFile    `json:"files"`
	Whiteouts     []string          `json:"whiteouts"`
	Env           map[string]string `json:"env"`
	Tool          string            `json:"smpatch_version,omitempty"`
}

// ManifestBase names the base image.
type ManifestBase struct {
	Ref      string `json:"ref"`
	Digest   string `json:"digest"`
	Platform string `json:"platform,omitempty"` // "linux/arm64"
}

// ManifestProject is a project found in the base.
type ManifestProject struct {
	Name        string `json:"name"`
	Version     string `json:"version"`
	VersionFrom string `json:"version_from"`
	Root        string `json:"root"` // "/usr/local/lib/python3.12/dist-packages" or the checkout
}

// ManifestPatch is one patch of the set.
type ManifestPatch struct {
	Name    string `json:"name"`
	Project string `json:"project"`
	Variant string `json:"variant"`
	Outcome string `json:"outcome"`
}

// ManifestFile is one file the layer changes.
type ManifestFile struct {
	Path      string   `json:"path"`       // repository-relative
	ImagePath string   `json:"image_path"` // absolute in the image
	Original  string   `json:"original_sha256"`
	New       string   `json:"new_sha256"` // "" when deleted
	Patches   []string `json:"patches"`
}

// Change is one file a patch set changes, by image path.
type Change struct {
	Rel       string // repository-relative, for the manifest
	ImagePath string // in the image, no leading "/"
	Old       []byte // nil when created
	New       []byte // nil when deleted
	Patches   []string
}

// LayerInput is everything one patch layer is made from.
type LayerInput struct {
	Base    v1.Image
	BaseRef string
	// BasePlatform is the base's platform ("linux/arm64"), recorded in
	// the manifest.
	BasePlatform string
	FS           *FS // the base's filesystem (for modes, stale .pyc, missing dirs)
	Cell         string
	Changes      []Change
	Manifest     Manifest // Cell, Base, Files, Whiteouts, Env and PatchSet are filled in
	Env          map[string]string
	Labels       map[string]string // extra labels
	Time         time.Time
	// SetCreated sets the image's created time to Time.
	SetCreated bool
}

// Built is one image made by AppendPatchLayer.
type Built struct {
	Image    v1.Image
	Digest   v1.Hash
	Layer    v1.Layer
	Manifest Manifest
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// PatchSetHash identifies a patch set by what it does: the patches and
// variants, and each changed file's path and new bytes.
func PatchSetHash(ps []ManifestPatch, files []ManifestFile) string {
	type f struct{ Path, New string }
	in := struct {
		Patches []ManifestPatch
		Files   []f
	}{Patches: ps}
	for _, x := range files {
		in.Files = append(in.Files, f{x.Path, x.New})
	}
	b, _ := json.Marshal(in)
	return "sha256:" + sha(b)
}

// staleBytecode lists the base's compiled files of a .py file at p:
// __pycache__/<stem>.*.pyc and a legacy <stem>.pyc beside it.
func staleBytecode(f *FS, p string) []string {
	if !strings.HasSuffix(p, ".py") {
		return nil
	}
	dir, base := path.Split(p)
	dir = strings.TrimSuffix(dir, "/")
	stem := strings.TrimSuffix(base, ".py")
	out := f.Glob(path.Join(dir, "__pycache__"), globEscape(stem)+".*.pyc")
	out = append(out, f.Glob(dir, globEscape(stem)+".pyc")...)
	sort.Strings(out)
	return out
}

func globEscape(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`)
	return r.Replace(s)
}

// AppendPatchLayer builds the patch layer for in.Changes (the files, the
// whiteouts of stale bytecode and of deleted files, the manifest) and
// appends it to the base with the cell's env and labels. The result is a
// function of the inputs only: the same inputs give the same digest.
func AppendPatchLayer(in LayerInput) (*Built, error) {
	baseDigest, err := in.Base.Digest()
	if err != nil {
		return nil, fmt.Errorf("base digest: %w", err)
	}
	m := in.Manifest
	m.Cell = in.Cell
	m.Base = ManifestBase{Ref: in.BaseRef, Digest: baseDigest.String(), Platform: in.BasePlatform}
	m.Env = in.Env
	if m.Env == nil {
		m.Env = map[string]string{}
	}
	if m.Projects == nil {
		m.Projects = []ManifestProject{}
	}
	if m.Patches == nil {
		m.Patches = []ManifestPatch{}
	}
	changes := append([]Change(nil), in.Changes...)
	sort.Slice(changes, func(i, j int) bool { return changes[i].ImagePath < changes[j].ImagePath })

	spec := LayerSpec{Time: in.Time}
	m.Files = []ManifestFile{}
	whiteouts := map[string]bool{}
	for _, c := range changes {
		mf := ManifestFile{Path: c.Rel, ImagePath: "/" + c.ImagePath, Patches: c.Patches}
		if c.Old != nil {
			mf.Original = sha(c.Old)
		}
		if mf.Patches == nil {
			mf.Patches = []string{}
		}
		if c.New == nil {
			whiteouts[c.ImagePath] = true
		} else {
			mf.New = sha(c.New)
			exec := false
			if _, e, err := in.FS.resolve(c.ImagePath, true); err == nil {
				exec = e.mode&0o111 != 0
			}
			spec.Files = append(spec.Files, LayerFile{Path: c.ImagePath, Data: c.New, Exec: exec})
		}
		for _, w := range staleBytecode(in.FS, c.ImagePath) {
			whiteouts[w] = true
		}
		m.Files = append(m.Files, mf)
	}
	m.Whiteouts = []string{}
	for w := range whiteouts {
		spec.Whiteouts = append(spec.Whiteouts, w)
		m.Whiteouts = append(m.Whiteouts, "/"+w)
	}
	sort.Strings(spec.Whiteouts)
	sort.Strings(m.Whiteouts)
	m.PatchSet = PatchSetHash(m.Patches, m.Files)

	mb, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	spec.Files = append(spec.Files, LayerFile{Path: ManifestPath, Data: append(mb, '\n')})
	spec.Dirs = missingDirs(in.FS, spec)

	layer, err := NewLayer(spec, isOCI(in.Base))
	if err != nil {
		return nil, err
	}
	labels := map[string]string{
		LabelBaseDigest: baseDigest.String(),
		LabelPatchSet:   m.PatchSet,
	}
	if in.BaseRef != "" {
		labels[LabelBaseName] = in.BaseRef
	}
	if in.Cell != "" {
		labels[LabelCell] = in.Cell
	}
	var names []string
	for _, p := range m.Patches {
		names = append(names, p.Name)
	}
	labels[LabelPatches] = strings.Join(names, ",")
	for _, p := range m.Projects {
		if p.Version != "" {
			labels[LabelVersionPfx+p.Name] = p.Version
		}
	}
	for k, v := range in.Labels {
		labels[k] = v
	}
	img, err := Append(in.Base, layer, ConfigSpec{
		Env:        in.Env,
		Labels:     labels,
		CreatedBy:  createdBy(in.Cell, m),
		Time:       in.Time,
		SetCreated: in.SetCreated,
	})
	if err != nil {
		return nil, err
	}
	d, err := img.Digest()
	if err != nil {
		return nil, err
	}
	return &Built{Image: img, Digest: d, Layer: layer, Manifest: m}, nil
}

func createdBy(cell string, m Manifest) string {
	var ps []string
	for _, p := range m.Patches {
		s := p.Name
		if p.Variant != "" {
			s += "@" + p.Variant
		}
		ps = append(ps, s)
	}
	s := "smpatch: patch set " + m.PatchSet
	if len(ps) > 0 {
		s += " (" + strings.Join(ps, ", ") + ")"
	} else {
		s += " (no patches)"
	}
	if cell != "" {
		s += " for cell " + cell
	}
	return s
}

// missingDirs lists the parent directories of the layer's entries that the
// base does not have (those that exist keep their metadata).
func missingDirs(f *FS, spec LayerSpec) []string {
	need := map[string]bool{}
	add := func(p string) {
		for d := path.Dir(p); d != "." && d != "/" && d != ""; d = path.Dir(d) {
			if f.IsDir(d) {
				break
			}
			need[d] = true
		}
	}
	for _, x := range spec.Files {
		add(x.Path)
	}
	for _, w := range spec.Whiteouts {
		add(w)
	}
	out := make([]string, 0, len(need))
	for d := range need {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}
