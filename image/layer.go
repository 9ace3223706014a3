package image

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// LayerFile is one regular file of a patch layer.
type LayerFile struct {
	Path string // inside the image, no leading "/"
	Data []byte
	Exec bool // mode 0755 instead of 0644
}

// LayerSpec is the content of a patch layer.
type LayerSpec struct {
	Files     []LayerFile
	Whiteouts []string // paths to hide from the base ("dir/name" becomes "dir/.wh.name")
	// Dirs are directories to create (they are not in the base); parents
	// that exist in the base get no entry, so their metadata is kept.
	Dirs []string
	Time time.Time // every entry's mtime
}

// BuildTime is the fixed time every entry of a patch layer carries:
// $SOURCE_DATE_EPOCH when set (seconds since the epoch), else the epoch.
func BuildTime() (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: not a number of seconds", s)
	}
	return time.Unix(n, 0).UTC(), nil
}

// LayerTar writes the layer's uncompressed tar: entries sorted by path,
// uid/gid 0, modes 0644/0755, every mtime spec.Time. The same spec always
// gives the same bytes.
func LayerTar(spec LayerSpec) ([]byte, error) {
	type ent struct {
		name string
		h    *tar.Header
		data []byte
	}
	seen := map[string]bool{}
	var ents []ent
	add := func(name string, h *tar.Header, data []byte) error {
		name = cleanName(name)
		if name == "" || !fs.ValidPath(name) {
			return fmt.Errorf("layer entry %q: not a path inside the image", name)
		}
		if seen[name] {
			return fmt.Errorf("layer entry %s: given twice", name)
		}
		seen[name] = true
		h.Name = name
		ents = append(ents, ent{name, h, data})
		return nil
	}
	mt := spec.Time.UTC().Truncate(time.Second)
	hdr := func(typ byte, mode int64, size int64) *tar.Header {
		return &tar.Header{Typeflag: typ, Mode: mode, Size: size, ModTime: mt, Format: tar.FormatPAX}
	}
	for _, d := range spec.Dirs {
		if err := add(d, hdr(tar.TypeDir, 0o755, 0), nil); err != nil {
			return nil, err
		}
	}
	for _, f := range spec.Files {
		mode := int64(0o644)
		if f.Exec {
			mode = 0o755
		}
		if err := add(f.Path, hdr(tar.TypeReg, mode, int64(len(f.Data))), f.Data); err != nil {
			return nil, err
		}
	}
	for _, w := range spec.Whiteouts {
		w = cleanName(w)
		dir, base := path.Split(w)
		if base == "" || strings.HasPrefix(base, ".wh.") {
			return nil, fmt.Errorf("whiteout %q: not a path", w)
		}
		if err := add(dir+".wh."+base, hdr(tar.TypeReg, 0o644, 0), nil); err != nil {
			return nil, err
		}
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].name < ents[j].name })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range ents {
		if e.h.Typeflag == tar.TypeDir {
			e.h.Name += "/"
		}
		if err := tw.WriteHeader(e.h); err != nil {
			return nil, fmt.Errorf("layer entry %s: %w", e.name, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, fmt.Errorf("layer entry %s: %w", e.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// NewLayer makes the patch layer, gzip-compressed, with the layer media
// type that matches the base (OCI or Docker). The layer is small and lives
// in memory; nothing of the base is read.
func NewLayer(spec LayerSpec, oci bool) (v1.Layer, error) {
	b, err := LayerTar(spec)
	if err != nil {
		return nil, err
	}
	mt := types.DockerLayer
	if oci {
		mt = types.OCILayer
	}
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, tarball.WithMediaType(mt))
}

// ConfigSpec is what a patch layer changes in the image config.
type ConfigSpec struct {
	Env       map[string]string // appended, or overriding a base variable of the same name
	Labels    map[string]string
	CreatedBy string // the history entry for the layer
	Time      time.Time
	// SetCreated sets the image's created time to Time (SOURCE_DATE_EPOCH);
	// otherwise the base's is kept.
	SetCreated bool
}

// Append returns base plus layer, with the config changed as spec says.
// Entrypoint, Cmd and everything else of the base config are kept; base
// layers are referenced by digest and never read.
func Append(base v1.Image, layer v1.Layer, spec ConfigSpec) (v1.Image, error) {
	mt, err := layer.MediaType()
	if err != nil {
		return nil, err
	}
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:     layer,
		MediaType: mt,
		History: v1.History{
			Created:   v1.Time{Time: spec.Time.UTC()},
			CreatedBy: spec.CreatedBy,
			Comment:   "smpatch",
		},
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("reading base config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.Config.Env = MergeEnv(cf.Config.Env, spec.Env)
	if len(spec.Labels) > 0 && cf.Config.Labels == nil {
		cf.Config.Labels = map[string]string{}
	}
	for k, v := range spec.Labels {
		cf.Config.Labels[k] = v
	}
	if spec.SetCreated {
		cf.Created = v1.Time{Time: spec.Time.UTC()}
	}
	return mutate.ConfigFile(img, cf)
}

// MergeEnv overrides base's variables that env names, in place, and appends
// the others sorted by name.
func MergeEnv(base []string, env map[string]string) []string {
	out := make([]string, 0, len(base)+len(env))
	done := map[string]bool{}
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if v, ok := env[k]; ok {
			if done[k] {
				continue
			}
			kv = k + "=" + v
			done[k] = true
		}
		out = append(out, kv)
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		if !done[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		out = append(out, k+"="+env[k])
	}
	return out
}

func envSet(k string) bool { return os.Getenv(k) != "" }
