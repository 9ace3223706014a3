package main

import (
	"archive/zip"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/rogpeppe/go-internal/testscript"
)

// cmdMkWheel is "mkwheel DIR WHEEL [SITE]": a wheel of DIR's files with
// the RECORD pip would write (each file's sha256), and, with SITE, those
// files and that RECORD installed there as pip installs them.
func cmdMkWheel(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 || len(args) > 3 {
		ts.Fatalf("usage: mkwheel DIR WHEEL [SITE]")
	}
	src := ts.MkAbs(args[0])
	files := map[string][]byte{}
	distInfo := ""
	ts.Check(filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		rel = filepath.ToSlash(rel)
		if dir, _, ok := strings.Cut(rel, "/"); ok && strings.HasSuffix(dir, ".dist-info") {
			distInfo = dir
		}
		b, err := os.ReadFile(p)
		files[rel] = b
		return err
	}))
	if distInfo == "" {
		ts.Fatalf("mkwheel: no NAME-VERSION.dist-info in %s", args[0])
	}
	var names []string
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	var rec strings.Builder
	for _, n := range names {
		h := sha256.Sum256(files[n])
		fmt.Fprintf(&rec, "%s,sha256=%s,%d\n", n, base64.RawURLEncoding.EncodeToString(h[:]), len(files[n]))
	}
	fmt.Fprintf(&rec, "%s/RECORD,,\n", distInfo)
	files[distInfo+"/RECORD"] = []byte(rec.String())
	names = append(names, distInfo+"/RECORD")
	whl := ts.MkAbs(args[1])
	ts.Check(os.MkdirAll(filepath.Dir(whl), 0o755))
	f, err := os.Create(whl)
	ts.Check(err)
	zw := zip.NewWriter(f)
	for _, n := range names {
		w, err := zw.Create(n)
		ts.Check(err)
		_, err = w.Write(files[n])
		ts.Check(err)
	}
	ts.Check(zw.Close())
	ts.Check(f.Close())
	if len(args) == 3 {
		site := ts.MkAbs(args[2])
		for _, n := range names {
			p := filepath.Join(site, filepath.FromSlash(n))
			ts.Check(os.MkdirAll(filepath.Dir(p), 0o755))
			ts.Check(os.WriteFile(p, files[n], 0o644))
		}
	}
}
