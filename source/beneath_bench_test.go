package source

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkReadFile reads a small file four directories deep, through
// openat2 (where the kernel has it) and through the check component by
// component.
func BenchmarkReadFile(b *testing.B) {
	base := os.Getenv("SMPATCH_BENCH_DIR") // e.g. /dev/shm, where only the system calls cost
	root, err := os.MkdirTemp(base, "readfile")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(root)
	p := filepath.Join(root, "python", "sglang", "srt", "layers")
	if err := os.MkdirAll(p, 0o755); err != nil {
		b.Fatal(err)
	}
	for _, f := range []string{"python/sglang/__init__.py", "python/sglang/srt/layers/comm.py"} {
		if err := os.WriteFile(filepath.Join(root, f), []byte("x = 1\n"), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	tr, err := OpenCheckout(root)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		off  bool
	}{{"openat2", false}, {"lstat", true}} {
		b.Run(c.name, func(b *testing.B) {
			noOpenat2.Store(c.off)
			defer noOpenat2.Store(false)
			for b.Loop() {
				if _, err := tr.ReadFile("python/sglang/srt/layers/comm.py"); err != nil {
					b.Fatal(err)
				}
				if _, err := tr.ReadFile("python/sglang/srt/layers/missing.py"); err == nil {
					b.Fatal("missing file read")
				}
			}
		})
	}
}
