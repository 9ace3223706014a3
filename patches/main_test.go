package patches

import (
	"os"
	"testing"
)

// TestMain keeps the journal key of the tests (and of the processes they
// start, which inherit it) in a directory of their own, never the user's.
func TestMain(m *testing.M) {
	if os.Getenv("SMPATCH_TEST_STATE") == "" {
		d, err := os.MkdirTemp("", "smpatch-test-state")
		if err != nil {
			panic(err)
		}
		os.Setenv("XDG_STATE_HOME", d)
		os.Setenv("SMPATCH_TEST_STATE", d)
		code := m.Run()
		os.RemoveAll(d)
		os.Exit(code)
	}
	os.Exit(m.Run())
}
