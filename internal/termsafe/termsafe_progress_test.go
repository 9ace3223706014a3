package termsafe

import (
	"bytes"
	"testing"
)

func TestProgressWriterKeepsCarriageReturns(t *testing.T) {
	var b bytes.Buffer
	w := NewProgressWriter(&b)
	if _, err := w.Write([]byte("Counting objects: 1%\rCounting objects: 2%\x1b]52;c;aGk=\x07\r")); err != nil {
		t.Fatal(err)
	}
	want := "Counting objects: 1%\rCounting objects: 2%\\x1b]52;c;aGk=\\x07\r"
	if b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}
