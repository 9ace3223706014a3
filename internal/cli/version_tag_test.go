package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Without smpatch-full, smpatch cannot read git tags: the reason says what
// is missing and how to get it, and names no version.
func TestTagFromFullWithoutCompanion(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	v, _, err := askFull(context.Background(), dir)
	if v != nil || err == nil || !strings.HasPrefix(err.Error(), "git tags not read: reading them takes smpatch-full, and there is no ") || !strings.Contains(err.Error(), "make install") {
		t.Fatalf("askFull = %v, %v", v, err)
	}
}
