package lazyre

import (
	"strings"
	"sync"
	"testing"
)

func TestNewCompilesOnce(t *testing.T) {
	re := New(`^a(b+)$`)
	var wg sync.WaitGroup
	got := make([]any, 8)
	for i := range got {
		wg.Add(1)
		go func() { defer wg.Done(); got[i] = re() }()
	}
	wg.Wait()
	for i := range got {
		if got[i] != got[0] {
			t.Fatalf("call %d returned a different *regexp.Regexp", i)
		}
	}
	if m := re().FindStringSubmatch("abbb"); len(m) != 2 || m[1] != "bbb" {
		t.Fatalf("FindStringSubmatch(abbb) = %q", m)
	}
}

func TestNewPanicsOnFirstUse(t *testing.T) {
	re := New(`(`) // building the function must not panic
	defer func() {
		if recover() == nil {
			t.Fatal("a malformed pattern did not panic on first use")
		}
	}()
	re()
}

func TestCompileBounded(t *testing.T) {
	if _, err := Compile("a{1,9}" + strings.Repeat("b", MaxSource-6)); err != nil {
		t.Fatalf("at the bound: %v", err)
	}
	_, err := Compile(strings.Repeat("a", MaxSource+1))
	if err == nil || err.Error() != "a regular expression of 4097 bytes, more than 4096" {
		t.Fatalf("past the bound: %v", err)
	}
}
