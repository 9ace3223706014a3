package author

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/smpatch/smpatch/source"
)

const commPy = "from sglang.srt.utils import is_sm90_supported\n\n_is_sm90 = is_sm90_supported()\n\n\ndef apply_fusion(n):\n    if not _is_sm90:\n        return False\n    return n <= 128\n"

// wheelFiles are the members of a synthetic sglang 0.5.9 wheel, RECORD
// aside.
func wheelFiles() map[string]string {
	return map[string]string{
		"sglang/__init__.py":                   "",
		"sglang/srt/layers/comm.py":            commPy,
		"sglang-0.5.9.dist-info/METADATA":      "Metadata-Version: 2.1\nName: sglang\nVersion: 0.5.9\n",
		"sglang-0.5.9.dist-info/WHEEL":         "Wheel-Version: 1.0\n",
		"sglang-0.5.9.dist-info/top_level.txt": "sglang\n",
	}
}

func recordOf(files map[string]string) string {
	var names []string
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		h := sha256.Sum256([]byte(files[n]))
		fmt.Fprintf(&b, "%s,sha256=%s,%d\n", n, base64.RawURLEncoding.EncodeToString(h[:]), len(files[n]))
	}
	b.WriteString("sglang-0.5.9.dist-info/RECORD,,\n")
	return b.String()
}

// install writes files and their RECORD as pip installs a wheel into a
// site-packages directory, and returns it.
func install(t *testing.T, files map[string]string, record string) string {
	t.Helper()
	site := filepath.Join(t.TempDir(), "lib", "python3.12", "site-packages")
	all := map[string]string{"sglang-0.5.9.dist-info/RECORD": record}
	for k, v := range files {
		all[k] = v
	}
	for n, c := range all {
		p := filepath.Join(site, n)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return site
}

// writeWheel writes a wheel of files (and RECORD) at p; raw members are
// added as they are.
func writeWheel(t *testing.T, p string, files map[string]string, raw func(*zip.Writer)) {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	var names []string
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		w, err := zw.Create(n)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(files[n]))
	}
	w, _ := zw.Create("sglang-0.5.9.dist-info/RECORD")
	w.Write([]byte(recordOf(files)))
	if raw != nil {
		raw(zw)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func edited(t *testing.T, site string) source.WritableTree {
	t.Helper()
	p := filepath.Join(site, "sglang/srt/layers/comm.py")
	if err := os.WriteFile(p, []byte(strings.Replace(commPy, "if not _is_sm90:", "if not (_is_sm90 or _is_sm120):", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	tr, err := source.OpenSitePackages(site, source.SGLang)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestWheelPristine(t *testing.T) {
	files := wheelFiles()
	site := install(t, files, recordOf(files))
	tr := edited(t, site)
	whl := filepath.Join(t.TempDir(), "sglang-0.5.9-py3-none-any.whl")
	writeWheel(t, whl, files, nil)
	pr, err := WheelPristine(tr, whl)
	if err != nil {
		t.Fatal(err)
	}
	d, err := Compare(context.Background(), tr, pr, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Changes) != 1 || d.Changes[0].Path != "python/sglang/srt/layers/comm.py" || string(d.Changes[0].Old) != commPy {
		t.Fatalf("changes %+v", d.Changes)
	}
	if !strings.HasPrefix(pr.Base, "wheel sglang-0.5.9-py3-none-any.whl sha256:") {
		t.Errorf("base %q", pr.Base)
	}

	// pip's cache: the built wheels directory under $PIP_CACHE_DIR.
	cache := t.TempDir()
	writeWheel(t, filepath.Join(cache, "wheels", "3f", "a1", "sglang-0.5.9-py3-none-any.whl"), files, nil)
	t.Setenv("PIP_CACHE_DIR", cache)
	pr, err = WheelPristine(tr, "")
	if err != nil || pr.Desc != "wheel sglang-0.5.9-py3-none-any.whl" {
		t.Fatalf("from the cache: %v, %+v", err, pr)
	}
	// and an HTTP cache body that is that wheel.
	cache2 := t.TempDir()
	writeWheel(t, filepath.Join(cache2, "http-v2", "a", "b", "c", "d", "e", "0123abcd.body"), files, nil)
	t.Setenv("PIP_CACHE_DIR", cache2)
	if pr, err = WheelPristine(tr, ""); err != nil || !strings.HasPrefix(pr.Desc, "wheel 0123abcd.body") {
		t.Fatalf("from an http body: %v, %+v", err, pr)
	}
	// No wheel at hand: the changed file is refused with the line that gets one.
	t.Setenv("PIP_CACHE_DIR", t.TempDir())
	pr, err = WheelPristine(tr, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Compare(context.Background(), tr, pr, nil); err == nil || !strings.Contains(err.Error(), "pip download sglang==0.5.9 --no-deps") {
		t.Errorf("no wheel: %v", err)
	}
}

func TestWheelPristineHostile(t *testing.T) {
	files := wheelFiles()
	site := install(t, files, recordOf(files))
	tr := edited(t, site)
	dir := t.TempDir()
	compare := func(whl string) error {
		pr, err := WheelPristine(tr, whl)
		if err != nil {
			return err
		}
		_, err = Compare(context.Background(), tr, pr, nil)
		return err
	}

	// Another build: its comm.py is not the one RECORD hashes.
	other := wheelFiles()
	other["sglang/srt/layers/comm.py"] = commPy + "# rebuilt\n"
	writeWheel(t, filepath.Join(dir, "other.whl"), other, nil)
	if err := compare(filepath.Join(dir, "other.whl")); err == nil || !strings.Contains(err.Error(), "does not have the sha256") {
		t.Errorf("another build: %v", err)
	}

	// A member outside the wheel.
	for _, name := range []string{"../evil.py", "/etc/evil.py", "sglang/../../evil.py", `sglang\..\evil.py`} {
		writeWheel(t, filepath.Join(dir, "slip.whl"), files, func(zw *zip.Writer) {
			w, _ := zw.CreateHeader(&zip.FileHeader{Name: name})
			w.Write([]byte("x"))
		})
		if err := compare(filepath.Join(dir, "slip.whl")); err == nil || !strings.Contains(err.Error(), "outside the wheel") {
			t.Errorf("member %q: %v", name, err)
		}
	}

	// A huge member (declared), and one whose header lies about its size
	// (a bomb): bounded, refused.
	huge := wheelFiles()
	huge["sglang/srt/layers/comm.py"] = commPy + strings.Repeat("#", MaxFileSize)
	writeWheel(t, filepath.Join(dir, "huge.whl"), huge, nil)
	if err := compare(filepath.Join(dir, "huge.whl")); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("huge member: %v", err)
	}
	bomb := wheelFiles()
	delete(bomb, "sglang/srt/layers/comm.py")
	writeWheel(t, filepath.Join(dir, "bomb.whl"), bomb, func(zw *zip.Writer) {
		var z bytes.Buffer
		fw, _ := flate.NewWriter(&z, flate.BestCompression)
		zeros := make([]byte, 1<<20)
		for range 64 {
			fw.Write(zeros)
		}
		fw.Close()
		w, err := zw.CreateRaw(&zip.FileHeader{Name: "sglang/srt/layers/comm.py", Method: zip.Deflate,
			CompressedSize64: uint64(z.Len()), UncompressedSize64: uint64(len(commPy)), CRC32: crc32.ChecksumIEEE([]byte(commPy))})
		if err != nil {
			t.Fatal(err)
		}
		w.Write(z.Bytes())
	})
	if err := compare(filepath.Join(dir, "bomb.whl")); err == nil {
		t.Errorf("a bomb read")
	}

	// Not a wheel: a FIFO, a text file.
	os.WriteFile(filepath.Join(dir, "text.whl"), []byte("not a zip"), 0o644)
	if err := compare(filepath.Join(dir, "text.whl")); err == nil || !strings.Contains(err.Error(), "not a wheel") {
		t.Errorf("text: %v", err)
	}

	// A malformed RECORD: a bad hash, a broken CSV line; each with its line.
	for _, rec := range []string{
		"sglang/__init__.py,sha256=nothex!,0\n",
		"sglang/__init__.py,sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0\n\"sglang/srt,sha256=x\n",
	} {
		site := install(t, files, rec)
		tr := edited(t, site)
		_, err := WheelPristine(tr, "")
		if err == nil || !strings.Contains(err.Error(), "RECORD:") {
			t.Errorf("RECORD %q: %v", rec, err)
		}
	}
}
