"""coverage.py DIR BRANCH SINCE "HEAD_SHA HEAD_DATE": docs/coverage.md from
the JSON that scripts/coverage.sh collected in DIR (smpatch check --format
json, smpatch list --json, smpatch show --json). Reads nothing else."""

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
    out, branch, since, head = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
    head_sha, head_date = head.split()
    patches = [p["name"] for p in load(os.path.join(out, "list.json"))["patches"] if p["project"] == "sglang"]
    tags = {}
    for path in glob.glob(os.path.join(out, "tag-*.json")):
        tag = os.path.basename(path)[len("tag-"):-len(".json")]
        tags[tag] = {r["patch"]: r for r in load(path)["results"]}
    # The branch walk in consecutive parts (branch-0.json, branch-1.json, ...),
    # each starting where the one before ends: one range per patch.
    parts = sorted(glob.glob(os.path.join(out, "branch-*.json")),
                   key=lambda f: int(os.path.basename(f)[len("branch-"):-len(".json")]))
    walk = {}
    for path in parts:
        for r in load(path)["results"]:
            w = walk.get(r["patch"])
            if w is None:
                walk[r["patch"]] = r
                continue
            rg, nx = w["range"], r["range"]
            if nx["start"] != (rg["changes"][-1]["to"] if rg["changes"] else rg["start"]):
                # A part starts where the one before ended, which reports
                # the same change itself; this only happens when it did not.
                rg["changes"].append({"commit": nx["base"], "date": "", "subject": "(start of a part of the walk)",
                                      "from": "", "to": nx["start"], "detail": ""})
            rg["changes"].extend(nx["changes"])
            rg["commits"] += nx["commits"]
            rg["planned"] += nx["planned"]
            for k in ("status", "variant", "version", "commit", "detail", "hunks"):
                if k in r:
                    w[k] = r[k]
    shows = {p: load(os.path.join(out, f"show-{p}.json")) for p in patches}

    w = []
    w.append("# Coverage on real sglang history\n")
    w.append("Made by `make coverage` (`scripts/coverage.sh`, then `scripts/coverage.py`) from")
    w.append("`smpatch check --range ... --format json` on a clone of sglang; regenerate it,")
    w.append("do not edit it. Statuses are those of `smpatch check` (docs/upstream.md).\n")
    any_walk = next(iter(walk.values()))["range"]
    w.append(f"- release tags: {', '.join(sorted(tags, key=tag_key))}")
    w.append(f"- `{branch}`, first parents, from `{any_walk['base'][:12]}` (the parent of the first commit"
             f" since {since}) to `{head_sha[:12]}` ({head_date}): {any_walk['commits']} commits walked\n")
    # Variants for versions no tree of which was walked: the catalog marks
    # them predicted and says why; one line.
    pred = [(p, v) for p in patches for v in shows[p]["variants"] if v.get("predicted")]
    if pred:
        names = ", ".join(f"{p} {v['name']} ({v['versions'] or 'any version'})" for p, v in pred)
        notes = "; ".join(dict.fromkeys(v["predicted"] for _, v in pred))
        w[-1] = w[-1].rstrip("\n")
        w.append(f"- predicted, not measured: {names}: {notes}\n")
    for p in patches:
        sh = shows[p]
        w.append(f"## {p}\n")
        w.append(f"{sh['summary']}\n")
        w.append("### Release tags\n")
        w.append("| tag | commit | status | variant | version | detail |")
        w.append("| --- | --- | --- | --- | --- | --- |")
        counts = {}
        for t in sorted(tags, key=tag_key):
            r = tags[t].get(p)
            if r is None:
                continue
            counts[r["status"]] = counts.get(r["status"], 0) + 1
            detail = r.get("detail", "")
            if r["status"] in ("applies", "already-upstream"):
                detail = "hunks: " + ", ".join(f"{n} {k}" for k, n in sorted(r.get("hunks", {}).items()))
            w.append(f"| {t} | `{r['commit'][:10]}` | {r['status']} | {r.get('variant') or '-'} | {r.get('version') or '-'} | {cell(detail)} |")
        w.append("")
        w.append("Tags: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) + ".\n")
        r = walk.get(p)
        if r is not None:
            rg = r["range"]
            w.append(f"### `{branch}` since {since}\n")
            w.append(f"{rg['commits']} first-parent commits walked, {rg['planned']} planned (those that changed the patch's files).")
            w.append("Each row is a window: from its first commit up to the next row's.\n")
            w.append("| first commit | date | status | subject of the first commit | detail |")
            w.append("| --- | --- | --- | --- | --- |")
            w.append(f"| `{rg['base'][:12]}` | - | {rg['start']} | (start of the walk) | |")
            for c in rg["changes"]:
                w.append(f"| `{c['commit'][:12]}` | {c['date'][:10]} | {c['to']} | {cell(c['subject'])} | {cell(c.get('detail', ''))} |")
            w.append("")
            w.append(f"At `{head_sha[:12]}` ({head_date}): {r['status']}, variant {r.get('variant') or '-'}.\n")
        unc = sh.get("uncovered") or []
        if unc:
            w.append("### Shapes the catalog does not cover (`smpatch show`)\n")
            for u in unc:
                w.append(f"- {u}")
            w.append("")
    sys.stdout.write("\n".join(w))


if __name__ == "__main__":
    main()
