package upstream

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/smpatch/smpatch/upstream/compat"
)

// CompatMarkdown is docs/compatibility.md for table t; unreachable names
// the releases known upstream that the histories read do not have (the
// freshness line), "" for none.
func CompatMarkdown(t *compat.Table, unreachable string) []byte {
	var b bytes.Buffer
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	w("# sglang and flashinfer releases: what works together, read from their code\n")
	w("Made by `make coverage` (`scripts/compatgen`, from the histories of both projects);")
	w("regenerate it, do not edit it. The same table is embedded in smpatch (package")
	w("upstream/compat): `smpatch apply --check-arch` quotes it for the fusion patches.\n")
	w("- read: %s", readLine(t))
	if unreachable != "" {
		w("- not reachable here: %s; they have no row or column below, and patch variants meant for them stay predicted.", unreachable)
	}
	w("\nHow each fact is read (statically; nothing is installed or run):\n")
	w("- **pin**: `python/pyproject.toml`'s `flashinfer_python==X` (and `flashinfer_cubin`), `docker/Dockerfile`'s")
	w("  `ARG FLASHINFER_VERSION` where it installs `flashinfer-jit-cache` / `flashinfer-cubin` at that version.")
	w("- **SM12x fused all-reduce**: flashinfer's JIT module `%s` for SM %d.x, as `smpatch probe` reads an installed", t.Sources.Module, t.Sources.Major)
	w("  flashinfer: the `supported_major_versions` its generator passes (`flashinfer/jit/comm.py`, or `comm/trtllm_ar.py`")
	w("  in older trees) must admit %d, and no `__CUDA_ARCH__ < %d00` condition may compile its kernels out of", t.Sources.Major, t.Sources.Major)
	w("  `include/flashinfer/comm/trtllm_allreduce.cuh`.")
	w("- **names**: every flashinfer name the `python/sglang` tree imports or reaches through an imported name")
	w("  (`from flashinfer.x import y`, `import flashinfer.x as m` then `m.y(...)`, names assigned from those), resolved")
	w("  in the flashinfer tree the way Python would (a module's definitions and re-exports, `import *`, submodules,")
	w("  class members); for a call, the keywords it passes against the definition's parameters. \"Present as used\"")
	w("  means found, with every keyword taken. Keywords sglang sets only after checking the signature are not counted")
	w("  against it; names used only inside `try` are marked *under try* (sglang copes without them). The fusion path")
	w("  is what %s uses.\n", strings.Join(codeAll(t.Sources.FusionPath), ", "))
	writeFlashInferTable(w, t)
	writeSGLangTable(w, t)
	writeMatrix(w, t)
	writeDetails(w, t)
	if len(t.MainPins) > 0 && t.Sources.SGLangMain != nil {
		m := t.Sources.SGLangMain
		w("## sglang `%s`: its flashinfer pin over time\n", m.Branch)
		w("First-parent commits since %s that changed `flashinfer_python` in `python/pyproject.toml`.\n", m.Since)
		w("| commit | date | pin | subject |")
		w("| --- | --- | --- | --- |")
		for _, p := range t.MainPins {
			w("| `%s` | %s | %s | %s |", p.Commit[:10], p.Date, p.FlashInfer, mdCell(p.Subject))
		}
		w("")
	}
	return bytes.TrimRight(b.Bytes(), "\n")
}

func readLine(t *compat.Table) string {
	span := func(tags []string) string {
		if len(tags) == 0 {
			return "no release tags"
		}
		return fmt.Sprintf("release tags %s to %s (%d)", tags[0], tags[len(tags)-1], len(tags))
	}
	s := "sglang " + span(t.Sources.SGLang.Tags)
	if m := t.Sources.SGLangMain; m != nil {
		s += fmt.Sprintf(" and `%s` (as main) at `%s` (%s)", m.Branch, short(m.Head), m.Date)
	}
	s += "; flashinfer " + span(t.Sources.FlashInfer.Tags)
	if f := t.Sources.FlashInfer; f.Branch != "" {
		s += fmt.Sprintf(" and `%s` at `%s` (%s)", f.Branch, short(f.Head), f.Date)
	}
	return s
}

func codeAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = "`" + s + "`"
	}
	return out
}

func mdCell(s string) string { return strings.NewReplacer("|", "\\|", "\n", " ").Replace(s) }

func yesNo(f compat.Fusion) string {
	switch f.Verdict {
	case compat.Yes:
		return "**yes**"
	case compat.No:
		return "no"
	}
	return "unknown"
}

// writeFlashInferTable lists the flashinfer revisions, consecutive ones
// with the same verdict, gate and guards in one row.
func writeFlashInferTable(w func(string, ...any), t *compat.Table) {
	w("## flashinfer: the fused all-reduce on SM%d\n", t.Sources.Major*10)
	w("| flashinfer | dates | builds for SM%d.x | JIT gate | `< %d00` guards in its comm headers |", t.Sources.Major, t.Sources.Major)
	w("| --- | --- | --- | --- | --- |")
	fs := t.FlashInfer
	for i := 0; i < len(fs); {
		j := i
		for j+1 < len(fs) && fs[j+1].Fusion.Verdict == fs[i].Fusion.Verdict && fs[j+1].Fusion.Gate == fs[i].Fusion.Gate &&
			fs[j+1].Fusion.Guards == fs[i].Fusion.Guards && fs[j+1].Fusion.GuardAt == fs[i].Fusion.GuardAt {
			j++
		}
		names := fs[i].Ref
		dates := fs[i].Date
		if j > i {
			names = fmt.Sprintf("%s … %s (%d)", fs[i].Ref, fs[j].Ref, j-i+1)
			dates += " … " + fs[j].Date
		}
		guards := "none"
		if f := fs[i].Fusion; f.Guards > 0 {
			guards = fmt.Sprintf("%d, the first at `%s`", f.Guards, f.GuardAt)
		}
		w("| %s | %s | %s | `%s` | %s |", names, dates, yesNo(fs[i].Fusion), mdCell(fs[i].Fusion.Gate), guards)
		i = j + 1
	}
	w("")
}

// writeSGLangTable lists the sglang revisions: the pin, whether it builds
// the fusion, and the flashinfer to install for it.
func writeSGLangTable(w func(string, ...any), t *compat.Table) {
	w("## sglang: the flashinfer it pins, and the one its fusion on SM%d needs\n", t.Sources.Major*10)
	w("| sglang | date | flashinfer_python | flashinfer-cubin | flashinfer-jit-cache | pinned builds SM%d.x fusion | names with the pin | to install for SM%d.x fusion | names with it |", t.Sources.Major, t.Sources.Major)
	w("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, s := range t.SGLang {
		p := s.Pin
		pin := "-"
		if p.FlashInfer != "" {
			pin = fmt.Sprintf("%s (`%s`)", p.FlashInfer, p.FlashInferFrom)
		} else if p.Spec != "" {
			pin = fmt.Sprintf("`%s`", p.Spec)
		}
		fusion, withPin := "-", "-"
		if f, ok := t.FlashInferAt(p.FlashInfer); ok && p.FlashInfer != "" {
			fusion = yesNo(f.Fusion)
			if r, ok := t.Check(s.Name(), f.Name()); ok {
				withPin = counts(r)
			}
		} else if p.FlashInfer != "" {
			fusion = "not read"
		}
		install, withInstall := "-", "-"
		if fusion == "no" || fusion == "not read" {
			if r, ok := t.Install(s.Name()); ok {
				install, withInstall = r.FlashInfer.Name(), counts(r)
			} else {
				install = "none read"
			}
		}
		w("| %s | %s | %s | %s | %s | %s | %s | %s | %s |", s.Ref, s.Date, pin, orDash(p.Cubin), orDash(p.JITCache), fusion, withPin, install, withInstall)
	}
	w("")
	w("\"names\": N of M flashinfer names present as used; the fusion path's in brackets.\n")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func counts(r *compat.Report) string {
	return fmt.Sprintf("%d of %d (fusion path %d of %d)", r.OK, r.Symbols, r.FusionOK, r.FusionSymbols)
}

// matrixColumns are the flashinfer revisions that matter: every sglang
// revision's pin, the first release of each fusion verdict change, the
// newest tag and main.
func matrixColumns(t *compat.Table) []compat.FlashInfer {
	want := map[string]bool{}
	for _, s := range t.SGLang {
		if f, ok := t.FlashInferAt(s.Pin.FlashInfer); ok && s.Pin.FlashInfer != "" {
			want[f.Ref] = true
		}
	}
	if f, ok := t.FirstFusion(); ok {
		want[f.Ref] = true
	}
	for i, f := range t.FlashInfer {
		if i > 0 && f.Fusion.Verdict != t.FlashInfer[i-1].Fusion.Verdict {
			want[f.Ref] = true
		}
	}
	for i := len(t.FlashInfer) - 1; i >= 0 && i >= len(t.FlashInfer)-2; i-- {
		want[t.FlashInfer[i].Ref] = true
	}
	var out []compat.FlashInfer
	for _, f := range t.FlashInfer {
		if want[f.Ref] {
			out = append(out, f)
		}
	}
	return out
}

func writeMatrix(w func(string, ...any), t *compat.Table) {
	cols := matrixColumns(t)
	w("## The matrix: sglang × the flashinfer releases that matter\n")
	w("Each cell: flashinfer names present as used, of those the sglang tree uses (the fusion path's after the")
	w("slash: its names present of its names); **pin** marks the flashinfer that sglang pins. The second row says")
	w("whether that flashinfer builds the fused all-reduce for SM%d.x.\n", t.Sources.Major)
	head := []string{"sglang"}
	sep := []string{"---"}
	fusion := []string{fmt.Sprintf("*SM%d.x fusion*", t.Sources.Major)}
	for _, f := range cols {
		head = append(head, f.Name())
		sep = append(sep, "---")
		fusion = append(fusion, yesNo(f.Fusion))
	}
	w("| %s |", strings.Join(head, " | "))
	w("| %s |", strings.Join(sep, " | "))
	w("| %s |", strings.Join(fusion, " | "))
	for _, s := range t.SGLang {
		row := []string{s.Ref}
		for _, f := range cols {
			r, ok := t.Check(s.Name(), f.Name())
			if !ok {
				row = append(row, "-")
				continue
			}
			c := fmt.Sprintf("%d/%d · %d/%d", r.OK, r.Symbols, r.FusionOK, r.FusionSymbols)
			if r.Pinned {
				c = "**pin** " + c
			}
			row = append(row, c)
		}
		w("| %s |", strings.Join(row, " | "))
	}
	w("")
}

// writeDetails says, per sglang revision, what its names lack in its pin
// and in the flashinfer to install.
func writeDetails(w func(string, ...any), t *compat.Table) {
	w("## What each sglang release's names lack\n")
	w("Against its pin, and against the flashinfer to install for the fusion on SM%d.x when the pin lacks it", t.Sources.Major)
	w("(every flashinfer revision is in the table, embedded in smpatch; `upstream/compat/compat.json` has the names'")
	w("definitions and parameters per flashinfer revision).\n")
	for _, s := range t.SGLang {
		w("### sglang %s\n", s.Ref)
		var against []string
		if s.Pin.FlashInfer != "" {
			against = append(against, s.Pin.FlashInfer)
		}
		if r, ok := t.Install(s.Name()); ok && !slices.Contains(against, r.FlashInfer.Name()) {
			if f, ok := t.FlashInferAt(s.Pin.FlashInfer); !ok || f.Fusion.Verdict != compat.Yes {
				against = append(against, r.FlashInfer.Name())
			}
		}
		if len(against) == 0 {
			w("No exact flashinfer pin read, and no flashinfer in the table builds the fusion with its names.\n")
			continue
		}
		for _, fi := range against {
			r, ok := t.Check(s.Name(), fi)
			if !ok {
				w("- flashinfer %s: not in the table", fi)
				continue
			}
			what := "its pin"
			if !r.Pinned {
				what = "to install for SM" + fmt.Sprint(t.Sources.Major*10)
			}
			line := fmt.Sprintf("- flashinfer %s (%s, SM%d.x fusion %s): %d of %d names present as used", fi, what, t.Sources.Major, yesNo(r.Fusion), r.OK, r.Symbols)
			if len(r.Problems) == 0 {
				w("%s.", line)
				continue
			}
			w("%s; not:", line)
			for _, p := range r.Problems {
				note := p.Why
				if p.Tried {
					note = "used only under try; " + note
				}
				if p.Fusion {
					note = "fusion path; " + note
				}
				w("  - `%s` at `%s`: %s%s", p.Symbol, p.At, mdCell(problemWord(p)), ifNote(note))
			}
		}
		w("")
	}
}

func problemWord(p compat.Finding) string {
	if len(p.Keywords) > 0 {
		return "keyword " + strings.Join(p.Keywords, ", ") + " not taken"
	}
	return p.State
}

func ifNote(s string) string {
	if s == "" {
		return ""
	}
	return " (" + mdCell(s) + ")"
}
