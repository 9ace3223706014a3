package image

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/smpatch/smpatch/internal/testkit/imagetest"
	"github.com/smpatch/smpatch/source"
)

const sp = imagetest.SitePackages

// writeBase writes a small synthetic base layout and returns its directory.
func writeBase(t testing.TB, o imagetest.Options) string {
	t.Helper()
	if o.RandomLayers == 0 {
		o.RandomLayers, o.RandomBytes = 2, 32<<10
	}
	dir := filepath.Join(t.TempDir(), "base")
	if _, err := imagetest.Write(dir, o); err != nil {
		t.Fatal(err)
	}
	return dir
}

type opened struct {
	ref  *Ref
	img  v1.Image
	fs   *FS
	tree *Tree
}

func openBase(t testing.TB, ref string) *opened {
	t.Helper()
	ctx := context.Background()
	r, err := ParseRef(ref)
	if err != nil {
		t.Fatal(err)
	}
	img, err := Open(ctx, r, Remote{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := NewFS(ctx, img, FSOptions{})
	if err != nil {
		t.Fatal(err)
	}
	o := &opened{ref: r, img: img, fs: f}
	loc, err := Locate(f, source.SGLang)
	if err == nil {
		o.tree = NewTree(f, loc, ref)
	}
	return o
}

func patchedCommunicator() string {
	return strings.Replace(imagetest.Communicator, "(_is_sm90_supported or _is_sm100_supported)", "(_is_sm90_supported or _is_sm100_supported or _is_sm120_supported)", 1)
}

func buildOne(t testing.TB, o *opened, cell string, env map[string]string) *Built {
	t.Helper()
	rel := "python/sglang/srt/layers/communicator.py"
	ip, ok := o.tree.ImagePath(rel)
	if !ok {
		t.Fatalf("no image path for %s", rel)
	}
	old, err := o.tree.ReadFile(rel)
	if err != nil {
		t.Fatal(err)
	}
	tm, err := BuildTime()
	if err != nil {
		t.Fatal(err)
	}
	b, err := AppendPatchLayer(LayerInput{
		Base:    o.img,
		BaseRef: o.ref.Raw,
		FS:      o.fs,
		Cell:    cell,
		Changes: []Change{{Rel: rel, ImagePath: ip, Old: old, New: []byte(patchedCommunicator()), Patches: []string{"sm120-gate"}}},
		Manifest: Manifest{
			Projects: []ManifestProject{{Name: "sglang", Version: "0.5.6", VersionFrom: "python/sglang/version.py", Root: "/" + sp}},
			Patches:  []ManifestPatch{{Name: "sm120-gate", Project: "sglang", Variant: ">= 0.5", Outcome: "applies"}},
		},
		Env:  env,
		Time: tm,
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func layerEntries(t testing.TB, l v1.Layer) map[string]*tar.Header {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	out := map[string]*tar.Header{}
	tr := tar.NewReader(rc)
	var order []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = h
		order = append(order, h.Name)
	}
	if !sort.StringsAreSorted(order) {
		t.Errorf("layer entries not sorted: %v", order)
	}
	return out
}

func TestTreeOnImage(t *testing.T) {
	o := openBase(t, "oci:"+writeBase(t, imagetest.Options{}))
	if o.tree == nil {
		t.Fatal("sglang not found")
	}
	v, from, err := o.tree.Version(context.Background())
	if err != nil || v == nil || v.String() != "0.5.6" || from != "python/sglang/version.py" {
		t.Errorf("Version = %v, %q, %v", v, from, err)
	}
	if got := o.tree.Location().SitePackages; got != sp {
		t.Errorf("site-packages = %s", got)
	}
	if _, err := o.fs.ReadFile(sp + "/sglang_hidden_by_upper.py"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("whited-out file readable: %v", err)
	}
	files, err := o.tree.ListFiles("python/sglang/srt")
	if err != nil {
		t.Fatal(err)
	}
	want := "python/sglang/srt/__init__.py,python/sglang/srt/layers/__init__.py,python/sglang/srt/layers/communicator.py,python/sglang/srt/legacy_gate.py,python/sglang/srt/server_args.py"
	if strings.Join(files, ",") != want {
		t.Errorf("ListFiles = %v", files)
	}
	if _, err := o.tree.ReadFile("python/sglang/nope.py"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file error = %v", err)
	}
	d, err := source.FindDistFS(o.fs, o.fs.SitePackages(), "torch")
	if err != nil || d.Version != "2.9.0" {
		t.Errorf("FindDistFS(torch) = %+v, %v", d, err)
	}
}

func TestAppendPatchLayer(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "")
	base := writeBase(t, imagetest.Options{})
	o := openBase(t, "oci:"+base)
	env := map[string]string{"NCCL_DEBUG": "INFO", "NCCL_MIN_NCHANNELS": "1", "NCCL_MAX_NCHANNELS": "2"}
	b := buildOne(t, o, "fewchan", env)

	// The layer: the patched file, whiteouts for its stale bytecode (not
	// for other modules'), the manifest and its new directory.
	ents := layerEntries(t, b.Layer)
	var names []string
	for n := range ents {
		names = append(names, n)
	}
	sort.Strings(names)
	want := []string{
		"etc/smpatch/",
		"etc/smpatch/manifest.json",
		sp + "/sglang/srt/layers/__pycache__/.wh.communicator.cpython-311.pyc",
		sp + "/sglang/srt/layers/__pycache__/.wh.communicator.cpython-312.pyc",
		sp + "/sglang/srt/layers/communicator.py",
	}
	if strings.Join(names, "\n") != strings.Join(want, "\n") {
		t.Errorf("layer entries:\n%s\nwant:\n%s", strings.Join(names, "\n"), strings.Join(want, "\n"))
	}
	for n, h := range ents {
		if h.Uid != 0 || h.Gid != 0 || !h.ModTime.Equal(time.Unix(0, 0)) {
			t.Errorf("%s: uid %d gid %d mtime %v", n, h.Uid, h.Gid, h.ModTime)
		}
		if h.Typeflag == tar.TypeReg && h.Mode != 0o644 || h.Typeflag == tar.TypeDir && h.Mode != 0o755 {
			t.Errorf("%s: mode %o", n, h.Mode)
		}
	}

	// Config: env merged, entrypoint and cmd kept, labels, history.
	cf, err := b.Image.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	gotEnv := strings.Join(cf.Config.Env, " ")
	if wantEnv := "PATH=/usr/local/bin:/usr/bin:/bin NCCL_DEBUG=INFO PYTHONUNBUFFERED=1 NCCL_MAX_NCHANNELS=2 NCCL_MIN_NCHANNELS=1"; gotEnv != wantEnv {
		t.Errorf("env = %s\nwant  %s", gotEnv, wantEnv)
	}
	if strings.Join(cf.Config.Entrypoint, " ") != "/opt/nvidia/nvidia_entrypoint.sh" || strings.Join(cf.Config.Cmd, " ") != "python3" {
		t.Errorf("entrypoint/cmd changed: %v %v", cf.Config.Entrypoint, cf.Config.Cmd)
	}
	baseDigest, _ := o.img.Digest()
	for k, v := range map[string]string{
		LabelBaseDigest:            baseDigest.String(),
		LabelCell:                  "fewchan",
		LabelPatches:               "sm120-gate",
		LabelPatchSet:              b.Manifest.PatchSet,
		LabelVersionPfx + "sglang": "0.5.6",
		"maintainer":               "synthetic",
	} {
		if cf.Config.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, cf.Config.Labels[k], v)
		}
	}
	last := cf.History[len(cf.History)-1]
	if !strings.Contains(last.CreatedBy, b.Manifest.PatchSet) || !strings.Contains(last.CreatedBy, "sm120-gate") {
		t.Errorf("history = %q", last.CreatedBy)
	}

	// Base layers reused by digest.
	bl, _ := o.img.Layers()
	nl, _ := b.Image.Layers()
	if len(nl) != len(bl)+1 {
		t.Fatalf("layers = %d, want %d", len(nl), len(bl)+1)
	}
	for i := range bl {
		d1, _ := bl[i].Digest()
		d2, _ := nl[i].Digest()
		if d1 != d2 {
			t.Errorf("layer %d digest %s, base has %s", i, d2, d1)
		}
	}

	// The manifest.
	var m Manifest
	f, err := NewFS(context.Background(), b.Image, FSOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mb, err := f.ReadFile(ManifestPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(mb, &m); err != nil {
		t.Fatal(err)
	}
	if m.Cell != "fewchan" || m.Base.Digest != baseDigest.String() || len(m.Files) != 1 ||
		m.Files[0].Original != sha([]byte(imagetest.Communicator)) || m.Files[0].New != sha([]byte(patchedCommunicator())) ||
		m.Files[0].ImagePath != "/"+sp+"/sglang/srt/layers/communicator.py" || m.Env["NCCL_MIN_NCHANNELS"] != "1" {
		t.Errorf("manifest = %s", mb)
	}
	// The patched image reads back with the new bytes and without the
	// stale bytecode.
	got, err := f.ReadFile(sp + "/sglang/srt/layers/communicator.py")
	if err != nil || string(got) != patchedCommunicator() {
		t.Errorf("patched file = %q, %v", got, err)
	}
	if f.Exists(sp + "/sglang/srt/layers/__pycache__/communicator.cpython-312.pyc") {
		t.Error("stale bytecode still visible")
	}
	if !f.Exists(sp + "/sglang/srt/layers/__pycache__/layernorm.cpython-312.pyc") {
		t.Error("unrelated bytecode hidden")
	}

	// Same inputs, same digest; a different SOURCE_DATE_EPOCH, another.
	again := buildOne(t, openBase(t, "oci:"+base), "fewchan", env)
	if again.Digest != b.Digest {
		t.Errorf("rebuild digest %s, first %s", again.Digest, b.Digest)
	}
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	later := buildOne(t, o, "fewchan", env)
	if later.Digest == b.Digest {
		t.Error("SOURCE_DATE_EPOCH did not change the digest")
	}
	lents := layerEntries(t, later.Layer)
	if h := lents["etc/smpatch/manifest.json"]; h == nil || h.ModTime.Unix() != 1700000000 {
		t.Errorf("mtime with SOURCE_DATE_EPOCH: %+v", h)
	}
}

func TestMergeEnv(t *testing.T) {
	for _, tc := range []struct {
		base []string
		env  map[string]string
		want string
	}{
		{nil, nil, ""},
		{[]string{"A=1"}, nil, "A=1"},
		{[]string{"A=1", "B=2"}, map[string]string{"B": "3", "C": "4", "0": "z"}, "A=1 B=3 0=z C=4"},
		{[]string{"A=1", "A=2"}, map[string]string{"A": "9"}, "A=9"},
		{[]string{"NOVALUE"}, map[string]string{"NOVALUE": ""}, "NOVALUE="},
	} {
		if got := strings.Join(MergeEnv(tc.base, tc.env), " "); got != tc.want {
			t.Errorf("MergeEnv(%v, %v) = %q, want %q", tc.base, tc.env, got, tc.want)
		}
	}
}
