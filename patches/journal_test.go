package patches

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/smpatch/smpatch/source"
)

// tarFiles reads the tar file p: each entry's name and content.
func tarFiles(t *testing.T, p string) map[string]string {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	r := tar.NewReader(f)
	for {
		h, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = string(b)
	}
}

// The journal keeps one tar file per kind and entry, each copy under its
// repository path, so a person can take the originals back by hand.
func TestJournalCopiesAreTars(t *testing.T) {
	root, tr := engineTree(t)
	p := enginePatch(t)
	if _, err := apply(t, p, tr); err != nil {
		t.Fatal(err)
	}
	read := func(kind string) map[string]string {
		return tarFiles(t, filepath.Join(root, source.StateDirName, "demo."+kind+".tar"))
	}
	orig := read("orig")
	if orig[commPath] != commOrig || orig[argsPath] != argsOrig || len(orig) != 2 {
		t.Fatalf("demo.orig.tar holds %d files: %q", len(orig), orig)
	}
	patched := read("patched")
	for _, rel := range []string{commPath, argsPath} {
		b, _ := tr.ReadFile(rel)
		if patched[rel] != string(b) {
			t.Fatalf("demo.patched.tar %s differs from the tree", rel)
		}
	}
	for _, d := range []string{"orig", "patched"} {
		if _, err := os.Stat(filepath.Join(root, source.StateDirName, d)); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("copies written in %s/ too: %v", d, err)
		}
	}
	if _, err := Revert(context.Background(), tr, nil, nil, RevertOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, source.StateDirName)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("journal left after the last revert: %v", err)
	}
}

// Journals of the earlier layouts, one file per copy (KIND/NAME/PATH) and
// one tar per kind in its own directory (KIND/NAME.tar), are still rolled
// back from their copies, and the copies are dropped afterwards.
func TestJournalLegacyCopies(t *testing.T) {
	for _, layout := range []string{"files", "kind-dir-tar"} {
		t.Run(layout, func(t *testing.T) {
			ctx := context.Background()
			root, tr := engineTree(t)
			p := enginePatch(t)
			orig := snapshot(t, root)
			if _, err := apply(t, p, tr); err != nil {
				t.Fatal(err)
			}
			state := filepath.Join(root, source.StateDirName)
			// Rewrite the journal as the older layout had it, with the
			// entry in flight.
			copies := map[string]string{commPath: commOrig, argsPath: argsOrig}
			switch layout {
			case "files":
				for rel, o := range copies {
					f := filepath.Join(state, "orig", "demo", filepath.FromSlash(rel))
					os.MkdirAll(filepath.Dir(f), 0o755)
					if err := os.WriteFile(f, []byte(o), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			case "kind-dir-tar":
				os.MkdirAll(filepath.Join(state, "orig"), 0o755)
				f, err := os.Create(filepath.Join(state, "orig", "demo.tar"))
				if err != nil {
					t.Fatal(err)
				}
				w := tar.NewWriter(f)
				for rel, o := range copies {
					w.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: rel, Mode: 0o644, Size: int64(len(o))})
					w.Write([]byte(o))
				}
				w.Close()
				f.Close()
			}
			os.Remove(filepath.Join(state, "demo.orig.tar"))
			b, _ := os.ReadFile(filepath.Join(state, "state.json"))
			b = []byte(strings.Replace(string(b), `"state": "applied"`, `"state": "pending"`, 1))
			if err := os.WriteFile(filepath.Join(state, "state.json"), b, 0o644); err != nil {
				t.Fatal(err)
			}
			// Edited by hand, the journal is no longer this user's until
			// adopted.
			if _, err := Recover(ctx, tr); err == nil || !strings.Contains(err.Error(), "journal not written by this user") {
				t.Fatalf("edited journal acted on: %v", err)
			}
			if _, err := TrustJournal(ctx, tr); err != nil {
				t.Fatal(err)
			}
			notes, err := Recover(ctx, tr)
			if err != nil || len(notes) != 1 {
				t.Fatalf("recover: %v %v", notes, err)
			}
			if !sameSnap(orig, snapshot(t, root)) {
				t.Fatalf("not rolled back: %s", diffSnap(orig, snapshot(t, root)))
			}
			if _, err := os.Stat(filepath.Join(state, "orig")); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("old copies left: %v", err)
			}
		})
	}
}

// state.json is encoded once and the MAC written into it: the bytes are
// those json.MarshalIndent writes for the signed state (what older readers
// check the MAC against), whatever the entries hold.
func TestSignedStateIsMarshalIndent(t *testing.T) {
	s := &State{Format: stateFormat, Tree: "/t/\"mac\": \"\"", Kind: "checkout", Patches: []*Entry{{
		Name: "a", State: StateApplied, Notes: []string{`"mac": ""`, "é\x01"},
		Files:       []*FileRecord{{Path: "x/\"mac\": \"\".py", Original: strings.Repeat("a", 64)}},
		CreatedDirs: []string{"x"},
	}}}
	got, err := signedState(s)
	if err != nil {
		t.Fatal(err)
	}
	want, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want)+"\n" {
		t.Fatalf("signed bytes differ:\n%s\nwant\n%s", got, want)
	}
	back, err := parseState("state.json", got)
	if err != nil {
		t.Fatal(err)
	}
	if why := checkOwner(back); why != "" {
		t.Fatalf("not trusted: %s", why)
	}
}
