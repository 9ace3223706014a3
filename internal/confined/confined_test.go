package confined

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

func setup(t *testing.T) (dir, outside string, r *os.Root) {
	t.Helper()
	base := t.TempDir()
	dir, outside = filepath.Join(base, "out"), filepath.Join(base, "outside")
	os.MkdirAll(filepath.Join(dir, "logs"), 0o755)
	os.MkdirAll(outside, 0o755)
	os.WriteFile(filepath.Join(outside, "bashrc"), []byte("mine\n"), 0o644)
	r, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return dir, outside, r
}

func TestNeverThroughALink(t *testing.T) {
	dir, outside, r := setup(t)
	os.Symlink(filepath.Join(outside, "bashrc"), filepath.Join(dir, "logs", "a.log"))
	os.Symlink("../outside", filepath.Join(dir, "cells"))
	os.WriteFile(filepath.Join(dir, "inside"), []byte("x"), 0o644)
	os.Symlink("inside", filepath.Join(dir, "logs", "b.log"))
	var ee *EntryError
	if _, err := Create(r, "logs/a.log", 0o644); !errors.As(err, &ee) || ee.Kind != "a symbolic link" {
		t.Errorf("create through a link out: %v", err)
	}
	if _, err := Create(r, "logs/b.log", 0o644); !errors.As(err, &ee) {
		t.Errorf("create through a link inside: %v", err)
	}
	if _, err := Append(r, "logs/a.log", 0o644); !errors.As(err, &ee) {
		t.Errorf("append through a link: %v", err)
	}
	if _, err := Create(r, "cells/x/run.sh", 0o755); err == nil {
		t.Error("created through a linked directory that leads out")
	}
	if err := MkdirAll(r, "cells/x"); err == nil {
		t.Error("made a directory through a link out")
	}
	if err := WriteFile(r, "logs/a.log", []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "bashrc")); string(b) != "mine\n" {
		t.Errorf("the link's target changed: %q", b)
	}
	if fi, _ := os.Lstat(filepath.Join(dir, "logs", "a.log")); !fi.Mode().IsRegular() {
		t.Error("WriteFile did not replace the link by a file")
	}
	if err := CheckTree(dir, 100); !errors.As(err, &ee) {
		t.Errorf("CheckTree: %v", err)
	}
	if err := CheckTree(dir, 2); err == nil {
		t.Error("CheckTree walked past its bound")
	}
}

func TestNamedPipeRefused(t *testing.T) {
	dir, _, r := setup(t)
	syscall.Mkfifo(filepath.Join(dir, "logs", "p.log"), 0o644)
	done := make(chan error, 1)
	go func() {
		_, err := Create(r, "logs/p.log", 0o644)
		done <- err
	}()
	select {
	case err := <-done:
		var ee *EntryError
		if !errors.As(err, &ee) || ee.Kind != "a named pipe" {
			t.Errorf("a named pipe: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Create blocked on a named pipe")
	}
	f, err := Create(r, "logs/ok.log", 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("x")
	f.Close()
}
