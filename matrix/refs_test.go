package matrix

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A named pipe given as --refs once hung matrix render for good.
func TestReadRefsNamedPipe(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "refs.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("no named pipes here:", err)
	}
	_, err := ReadRefs(fifo)
	if err == nil || !strings.HasSuffix(err.Error(), "refs.json: not a regular file (a named pipe): not read") {
		t.Fatalf("got %v", err)
	}
}
