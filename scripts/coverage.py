"""coverage.py DIR BRANCH SINCE "HEAD_SHA HEAD_DATE" COMPAT_JSON UNREACHABLE:
docs/coverage.md from the JSON that scripts/coverage.sh collected in DIR
(smpatch check --format json, smpatch list --json, smpatch show --json) and
the compatibility table COMPAT_JSON (upstream/compat/compat.json: each tag's
pinned flashinfer, and whether it builds the module a patch requires).
Reads nothing else."""

import glob
import json
import os
import re
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def tag_key(name):
    # v0.5.10rc0 < v0.5.10 < v0.5.10.post1
    m = re.match(r"v(\d+)\.(\d+)\.(\d+)(rc\d+)?(\.post\d+)?$", name)
    if not m:
        return (9999, name)
    a, b, c, rc, post = m.groups()
    return (int(a), int(b), int(c), 0 if rc else 1, int(rc[2:]) if rc else 0, int(post[5:]) if post else 0)


def cell(s):
    return (s or "").replace("|", "\\|").replace("\n", " ")


def main():
    out, branch, since, head, compat_path, unreachable = sys.argv[1:7]
    head_sha, head_date = head.split()
    patches = [p["name"] for p in load(os.path.join(out, "list.json"))["patches"] if p["project"] == "sglang"]
    tags = {}
    for path in glob.glob(os.path.join(out, "tag-*.json")):
        tag = os.path.basename(path)[len("tag-"):-len(".json")]
        tags[tag] = {r["patch"]: r for r in load(path)["results"]}
    # The branch: one walk for the whole catalog.
    walk = {r["patch"]: r for r in load(os.path.join(out, "branch.json"))["results"]}
    compat = Compat(load(compat_path))
    shows = {p: load(os.path.join(out, f"show-{p}.json")) for p in patches}

    w = []
    w.append("# Coverage on real sglang history\n")
    w.append("Made by `make coverage` (`scripts/coverage.sh`, then `scripts/coverage.py`) from")
    w.append("`smpatch check --range ... --format json` on a clone of sglang; regenerate it,")
    w.append("do not edit it. Statuses are those of `smpatch check` (docs/upstream.md). \"Applies\" says the")
    w.append("patch's hunks fit the tree; \"runs with the pinned flashinfer\" is a separate fact, from the")
    w.append("compatibility table (docs/compatibility.md): whether the flashinfer that release pins builds the")
    w.append("module the patch requires (its `[requires] flashinfer_module`) for the GPU it is for.\n")
    any_walk = next(iter(walk.values()))["range"]
    w.append(f"- release tags: {', '.join(sorted(tags, key=tag_key))}")
    w.append(f"- `{branch}`, first parents, from `{any_walk['base'][:12]}` (the parent of the first commit"
             f" since {since}) to `{head_sha[:12]}` ({head_date}): {any_walk['commits']} commits walked,"
             f" once for the whole catalog")
    if unreachable:
        w.append(f"- not reachable here: {unreachable}; no tree of them was read, and the variants meant for them stay predicted")
    # The variants the catalog marks predicted, and why; one line.
    pred = [(p, v) for p in patches for v in shows[p]["variants"] if v.get("predicted")]
    if pred:
        names = ", ".join(f"{p} {v['name']} ({v['versions'] or 'any version'})" for p, v in pred)
        notes = "; ".join(dict.fromkeys(v["predicted"] for _, v in pred))
        w.append(f"- predicted, not measured: {names}: {notes}")
    w.append("")
    for p in patches:
        sh = shows[p]
        w.append(f"## {p}\n")
        w.append(f"{sh['summary']}\n")
        module = (sh.get("requires") or {}).get("flashinfer_module") or ""
        majors = (sh.get("requires") or {}).get("gpu_sm_major") or []
        runs_col = bool(module) and compat.module == module and compat.major in majors
        w.append("### Release tags\n")
        if runs_col:
            w.append(f"| tag | commit | status | variant | version | detail | pinned flashinfer | runs with it on SM{compat.major}x |")
            w.append("| --- | --- | --- | --- | --- | --- | --- | --- |")
        else:
            w.append("| tag | commit | status | variant | version | detail |")
            w.append("| --- | --- | --- | --- | --- | --- |")
        counts, runs = {}, []
        for t in sorted(tags, key=tag_key):
            r = tags[t].get(p)
            if r is None:
                continue
            counts[r["status"]] = counts.get(r["status"], 0) + 1
            detail = r.get("detail", "")
            if r["status"] in ("applies", "already-upstream"):
                detail = "hunks: " + ", ".join(f"{n} {k}" for k, n in sorted(r.get("hunks", {}).items()))
            row = f"| {t} | `{r['commit'][:10]}` | {r['status']} | {r.get('variant') or '-'} | {r.get('version') or '-'} | {cell(detail)} |"
            if runs_col:
                pin, verdict, why = compat.pinned(t)
                runs.append((t, verdict))
                row += f" {pin} | {cell(why)} |"
            w.append(row)
        w.append("")
        w.append("Tags: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) + ".")
        if runs_col:
            yes = [t for t, v in runs if v == "yes"]
            w.append(f"Runs with the pinned flashinfer on SM{compat.major}x: {len(yes)} of {len(runs)}"
                     + (f" ({', '.join(yes)})" if yes else "") + ".")
        w.append("")
        r = walk.get(p)
        if r is not None:
            rg = r["range"]
            label = f"`{branch}`" if branch == "main" else f"`main` (the clone's `{branch}`)"
            w.append(f"### {label} since {since}\n")
            w.append(f"{rg['commits']} first-parent commits walked, {rg['planned']} planned (those that changed the patch's files).")
            w.append("Each row is a window: from its first commit up to the next row's.\n")
            w.append("| first commit | date | status | subject of the first commit | detail |")
            w.append("| --- | --- | --- | --- | --- |")
            w.append(f"| `{rg['base'][:12]}` | - | {rg['start']} | (start of the walk) | |")
            for c in rg["changes"]:
                w.append(f"| `{c['commit'][:12]}` | {c['date'][:10]} | {c['to']} | {cell(c['subject'])} | {cell(c.get('detail', ''))} |")
            w.append("")
            w.append(f"At `{head_sha[:12]}` ({head_date}): {r['status']}, variant {r.get('variant') or '-'}.")
            if runs_col:
                w.append(compat.main_line())
            w.append("")
        unc = sh.get("uncovered") or []
        if unc:
            w.append("### Shapes the catalog does not cover (`smpatch show`)\n")
            for u in unc:
                w.append(f"- {u}")
            w.append("")
    sys.stdout.write("\n".join(w))


class Compat:
    """What the compatibility table says of a release's pinned flashinfer."""

    def __init__(self, table):
        self.t = table
        self.module = table["sources"]["module"]
        self.major = table["sources"]["major"]
        self.fi = {f["version"]: f for f in table["flashinfer"] if f.get("version")}
        self.sg = {s["ref"]: s for s in table["sglang"]}

    def first_fusion(self):
        for f in self.t["flashinfer"]:
            if f["fusion_sm12"]["verdict"] == "yes" and re.match(r"^\d+(\.\d+)*(\.post\d+)?$", f.get("version", "")):
                return f["version"]
        return None

    def pinned(self, tag):
        """(pin cell, verdict, why) for sglang release tag."""
        s = self.sg.get(tag)
        if s is None:
            return "-", "unknown", "not in the compatibility table"
        pin = s["pin"].get("flashinfer_python")
        if not pin:
            return "-", "unknown", "no exact flashinfer pin read"
        f = self.fi.get(pin)
        if f is None:
            return pin, "unknown", f"flashinfer {pin} is not in the compatibility table"
        fu = f["fusion_sm12"]
        if fu["verdict"] == "yes":
            return pin, "yes", f"yes: {fu.get('gate', '')}"
        if fu["verdict"] == "no":
            first = self.first_fusion()
            guards = f"; {fu['guards']} `< 1200` guard(s)" if fu.get("guards") else ""
            return pin, "no", f"no: {fu.get('gate', '')}{guards}" + (f"; needs flashinfer {first}" if first else "")
        return pin, "unknown", "; ".join(fu.get("reasons") or ["unknown"])

    def verdict(self, version):
        f = self.fi.get(version or "")
        return f["fusion_sm12"]["verdict"] if f else "unknown"

    def main_line(self):
        s = self.sg.get("main")
        if s is None:
            return ""
        pin = s["pin"].get("flashinfer_python")
        verdict = self.verdict(pin)
        line = f"It pins flashinfer {pin or '-'}, which builds {self.module} for SM{self.major}x: {verdict}"
        changes = self.t.get("main_pins", [])
        since = self.t["sources"].get("sglang_main", {}).get("since", "")
        if changes and changes[-1]["flashinfer_python"] == pin:
            c = changes[-1]
            line += f"; pinned since `{c['commit'][:10]}` ({c['date']}, {cell(c['subject'])})"
            before = {self.verdict(x["flashinfer_python"]) for x in changes[:-1]}
            if verdict == "yes" and before == {"no"}:
                line += f"; none of the {len(changes) - 1} pin changes before it since {since} gave a flashinfer that builds it"
        return line + "."


if __name__ == "__main__":
    main()
