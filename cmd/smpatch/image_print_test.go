package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/smpatch/smpatch/image"
)

// What a base image names (file paths, env, labels) is printed one record
// a line also into a pipe: a name holding a line break cannot spoof a
// line of smpatch's own ("wrote ...").
func TestImagePrintsOneRecordALine(t *testing.T) {
	evil := "python/x.py\nwrote oci:/tmp/evil"
	var b bytes.Buffer
	printImageApply(&b, &imageApplyResult{Ref: "oci:out", Status: image.StatusBuilt,
		Files: []image.ManifestFile{{ImagePath: evil}}, Whiteouts: []string{"a\rb"},
		Patches: []imagePatchResult{{Name: "p", Variant: "v", VariantReason: "r\x1b]52;c;QQ==\x07"}}}, false)
	show := &imageShowResult{Ref: "r", Env: []string{"A=1\nlabel spoofed=1"}, Labels: map[string]string{"k\n": "v\nno smpatch manifest"},
		Manifest: &image.Manifest{Files: []image.ManifestFile{{ImagePath: evil}}, Whiteouts: []string{evil}}}
	printImageShow(&b, show, false)
	for _, line := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
		if strings.HasPrefix(line, "wrote oci:/tmp/evil") || strings.HasPrefix(line, "label spoofed") || line == "no smpatch manifest" {
			t.Errorf("a spoofed line: %q", line)
		}
	}
	if strings.ContainsAny(b.String(), "\r\x1b\x07") {
		t.Errorf("raw control characters:\n%q", b.String())
	}
	if got := strings.Count(b.String(), "\n"); got != 9 {
		t.Errorf("%d lines:\n%s", got, b.String())
	}
}
