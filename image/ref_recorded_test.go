package image

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRecordedRefIgnoresPathSpelling(t *testing.T) {
	dir := t.TempDir()
	tarball := filepath.Join(dir, "base.tar")
	if err := os.WriteFile(tarball, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	for _, tc := range []struct{ in, want string }{
		{"oci:./bases/cuda", "oci:cuda"},
		{"oci:/srv/bases/cuda/", "oci:cuda"},
		{"oci:bases/cuda:v1", "oci:cuda:v1"},
		{"./base.tar", "base.tar"},
		{tarball, "base.tar"},
		{"lmsysorg/sglang:v0.5.9-cu129", "lmsysorg/sglang:v0.5.9-cu129"},
	} {
		r, err := ParseRef(tc.in)
		if err != nil {
			t.Fatalf("ParseRef(%q): %v", tc.in, err)
		}
		if got := r.Recorded(); got != tc.want {
			t.Errorf("ParseRef(%q).Recorded() = %q, want %q", tc.in, got, tc.want)
		}
	}
}
