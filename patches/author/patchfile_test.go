package author

import (
	"strings"
	"testing"
)

const formatPatch = `From 0123456789abcdef0123456789abcdef01234567 Mon Sep 17 00:00:00 2001
From: =?UTF-8?q?Ren=C3=A9e=20Dev?= <dev@example.com>
Date: Tue, 4 Aug 2026 10:00:00 +0200
Subject: [PATCH 1/1] Allow the fused all-reduce
 on SM12x

Body text.
---
 python/sglang/srt/layers/communicator.py | 2 +-

diff --git a/python/sglang/srt/layers/communicator.py b/python/sglang/srt/layers/communicator.py
--- a/python/sglang/srt/layers/communicator.py
+++ b/python/sglang/srt/layers/communicator.py
@@ -1,2 +1,2 @@
 a
-b
+c
-- 
2.43.0
`

func TestParsePatchFile(t *testing.T) {
	pf, err := ParsePatchFile("x.patch", []byte(formatPatch))
	if err != nil {
		t.Fatal(err)
	}
	if pf.Subject != "Allow the fused all-reduce on SM12x" {
		t.Errorf("subject %q", pf.Subject)
	}
	if pf.Author != "Renée Dev <dev@example.com>" {
		t.Errorf("author %q", pf.Author)
	}
	if pf.Commit != "0123456789abcdef0123456789abcdef01234567" || len(pf.Files) != 1 {
		t.Errorf("commit %q, %d files", pf.Commit, len(pf.Files))
	}
	series := formatPatch + strings.Replace(formatPatch, "communicator.py", "other.py", -1)
	if _, err := ParsePatchFile("s.patch", []byte(series)); err == nil || !strings.Contains(err.Error(), "s.patch:20: a second patch") {
		t.Errorf("series: %v", err)
	}
	bin := "diff --git a/python/sglang/x.bin b/python/sglang/x.bin\nindex 1..2\nGIT binary patch\nliteral 3\n"
	if _, err := ParsePatchFile("b.patch", []byte(bin)); err == nil || !strings.Contains(err.Error(), "b.patch:3: a binary patch") {
		t.Errorf("binary: %v", err)
	}
}

func FuzzParsePatchFile(f *testing.F) {
	f.Add([]byte(formatPatch))
	f.Add([]byte("From x\nSubject: =?utf-8?b?AAAA?=\n\n--- a/p\n+++ b/p\n@@ -1 +1 @@\n-a\n+b\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		pf, err := ParsePatchFile("f.patch", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f.patch") {
				t.Fatalf("error without its source: %v", err)
			}
			return
		}
		for _, fd := range pf.Files {
			if strings.HasPrefix(fd.Path(), "/") || strings.Contains("/"+fd.Path()+"/", "/../") {
				t.Fatalf("path outside the tree: %q", fd.Path())
			}
		}
	})
}
