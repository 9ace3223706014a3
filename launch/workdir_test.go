package launch

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/smpatch/smpatch/matrix"
)

func TestHostWorkdirsRelativeToMatrixFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "bench"), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(workdir string) string {
		p := filepath.Join(dir, "m.toml")
		src := "name = \"w\"\nproject = \"sglang\"\n[axes]\nn = [1]\n[launch]\ncommand = [\"true\"]\nworkdir = \"" + workdir + "\"\n"
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	expand := func(p string) *matrix.Expansion {
		m, err := matrix.Load(p)
		if err != nil {
			t.Fatal(err)
		}
		x, err := m.Expand(matrix.ExpandOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return x
	}

	x := expand(write("bench"))
	t.Chdir(t.TempDir()) // the current directory must not matter
	if err := HostWorkdirs(x); err != nil {
		t.Fatal(err)
	}
	if got, want := x.Cells[0].Workdir, filepath.Join(dir, "bench"); got != want {
		t.Fatalf("workdir = %q, want %q", got, want)
	}

	x = expand(write("missing"))
	err := HostWorkdirs(x)
	if err == nil || !strings.Contains(err.Error(), "is not a directory") {
		t.Fatalf("missing workdir: err = %v", err)
	}

	x = expand(write("/abs/in/image"))
	if err := HostWorkdirs(x); err != nil || x.Cells[0].Workdir != "/abs/in/image" {
		t.Fatalf("absolute workdir changed: %q, %v", x.Cells[0].Workdir, err)
	}
}
