package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestErrorLineEscaped checks that the error line never carries control
// characters from its input to the terminal: a log file name with an OSC
// 52 clipboard write and an ESC sequence in it.
func TestErrorLineEscaped(t *testing.T) {
	var out, errb bytes.Buffer
	name := t.TempDir() + "/\x1b]52;c;cm0gLXJmIH4=\x07\x1b[2J.log"
	if code := run([]string{"triage", name}, &out, &errb); code == 0 {
		t.Fatalf("triage of a missing log: exit 0")
	}
	got := errb.String()
	if strings.ContainsAny(got, "\x1b\x07") || strings.Count(got, "\n") != 1 {
		t.Errorf("stderr carries control characters or several lines: %q", got)
	}
	if !strings.Contains(got, `\x1b]52;c;cm0gLXJmIH4=\x07\x1b[2J.log`) {
		t.Errorf("stderr does not show the name escaped: %q", got)
	}
}
