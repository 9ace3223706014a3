package source

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
)

// fakePython writes an executable shell script standing in for an interpreter.
func fakePython(t *testing.T, body string) string {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("shell scripts")
	}
	p := filepath.Join(t.TempDir(), "python3")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPythonSysPath(t *testing.T) {
	dir := t.TempDir()
	sp := filepath.Join(dir, "lib", "python3.12", "site-packages")
	// The fake checks that it was started isolated and prints a sys.path.
	py := fakePython(t, `[ "$1" = "-I" ] || { echo "not isolated: $1" >&2; exit 2; }
printf '["", "/usr/lib/python312.zip", "`+sp+`"]'`)
	got, err := PythonSysPath(context.Background(), py)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"", "/usr/lib/python312.zip", sp}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestPythonSysPathErrors(t *testing.T) {
	tests := []struct {
		name, body, want string
	}{
		{"fails", `echo "Traceback (most recent call last):" >&2; echo "ModuleNotFoundError: No module named 'json'" >&2; exit 1`, "No module named 'json'"},
		{"garbage", `echo hello`, "not a JSON list"},
		{"not strings", `echo '[1, 2]'`, "not a JSON list"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			py := fakePython(t, tt.body)
			_, err := PythonSysPath(context.Background(), py)
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), py) {
				t.Fatalf("error %q does not name %q and %q", err, py, tt.want)
			}
		})
	}
	t.Run("absent", func(t *testing.T) {
		_, err := PythonSysPath(context.Background(), filepath.Join(t.TempDir(), "nopython"))
		if err == nil || !strings.Contains(err.Error(), "nopython") {
			t.Fatalf("error %v does not name the interpreter", err)
		}
	})
}

func TestPythonSysPathHang(t *testing.T) {
	py := fakePython(t, `sleep 600`)
	old := PythonTimeout
	PythonTimeout = 200 * time.Millisecond
	defer func() { PythonTimeout = old }()
	_, err := PythonSysPath(context.Background(), py)
	if err == nil {
		t.Fatal("a hanging interpreter gave no error")
	}
	if !strings.Contains(err.Error(), py) || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("error %q does not name the interpreter and the timeout", err)
	}
}

func TestSitePackagesDirs(t *testing.T) {
	dir := t.TempDir()
	sp := filepath.Join(dir, "venv", "lib", "python3.12", "site-packages")
	dp := filepath.Join(dir, "usr", "lib", "python3", "dist-packages")
	other := filepath.Join(dir, "lib", "python3.12")
	for _, d := range []string{sp, dp, other} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "site-packages"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	in := []string{"", other, sp, filepath.Join(dir, "missing", "site-packages"), filepath.Join(dir, "site-packages"), dp, sp + "/"}
	got := SitePackagesDirs(in)
	want := []string{sp, dp}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}
