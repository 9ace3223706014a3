#!/usr/bin/env bash
# Matrix expansion at scale: a 10-axis matrix of 110592 raw cells with 44
# generated rules and the built-in ones, expanded by `smpatch matrix expand`,
# against the alternative a user would otherwise write: a Python
# itertools.product loop with the same excludes and rule conditions.
# Reports wall time, CPU time and peak memory; the target is under 1 s,
# and --json faster than the Python loop that prints JSON, with peak memory
# no larger than the expansion without --json (the document is streamed).
# Usage: bench/matrix.bench.sh path/to/smpatch
set -euo pipefail
bin="$(realpath "${1:-bin/smpatch}")"
cd "$(dirname "$0")/.."
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# The matrix: patches 2 × nccl 4 × x0..x7 (4 4 4 4 3 3 2 3) = 110592 cells.
gen() { # gen KEEP_ALL
  {
    echo 'name = "bench"'
    echo 'max_cells = 200000'
    echo 'rules = ["rules.toml"]'
    echo '[axes]'
    echo 'patches = [[], ["sm120-fusion"]]'
    echo 'nccl = ["default", "fewchan", "tree", "ll128"]'
    i=0
    for n in 4 4 4 4 3 3 2 3; do
      vals=""
      for ((v = 1; v <= n; v++)); do vals="$vals${vals:+, }$((v * 64))"; done
      echo "x$i = [$vals]"
      i=$((i + 1))
    done
    cat <<'TOML'
[presets.nccl.default]
NCCL_MIN_NCHANNELS = "16"
NCCL_BUFFSIZE = "16777216"
[presets.nccl.fewchan]
NCCL_PROTO = "LL"
NCCL_ALGO = "Ring"
NCCL_MAX_NCHANNELS = "2"
NCCL_BUFFSIZE = "131072"
[presets.nccl.tree]
NCCL_ALGO = "Tree"
[presets.nccl.ll128]
NCCL_PROTO = "LL128"
"--disable-cuda-graph" = true
TOML
    if [ "$1" != all ]; then
      printf '[[exclude]]\nx0 = [64, 128]\nx1 = [64, 128, 192]\n[[exclude]]\nx2 = 64\n'
    fi
    cat <<'TOML'
[[include]]
patches = ["sm120-fusion"]
args = ["--enable-flashinfer-allreduce-fusion"]
[launch]
command = ["python3", "-m", "sglang.launch_server", "--tp", "8", "--mem-fraction-static", "0.55",
  "--cuda-graph-max-bs", "{{.x0}}", "--max-running-requests", "{{.x1}}", "--chunked-prefill-size", "{{.x2}}",
  "--x3", "{{.x3}}", "--x4", "{{.x4}}", "--x5", "{{.x5}}", "--x6", "{{.x6}}", "--x7", "{{.x7}}"]
env = { SMPATCH_CELL = "{{.id}}" }
TOML
  } >"$work/bench-$1.toml"
}
gen all
gen some
{
  echo 'version = 1'
  for ((i = 0; i < 44; i++)); do
    action=warn
    [ $((i % 4)) = 0 ] && action=prune
    printf '[[rule]]\nname = "r%d"\naction = "%s"\nreason = "bench rule %d"\nsource = "https://example.com/%d"\n[rule.when]\n' $i $action $i $i
    case $((i % 4)) in
      0) printf 'axis = { x%d = %d, x%d = [64, 128] }\n' $((i % 8)) $((64 * (1 + i % 2))) $(((i + 1) % 8)) ;;
      1) printf 'env = { NCCL_PROTO = "LL" }\nflags = ["--x%d"]\n' $((i % 8)) ;;
      2) printf 'patches = ["sm120-fusion"]\nflag_values = { "--x%d" = "128" }\n' $((i % 8)) ;;
      3) printf 'cuda_graphs = true\nvaries = ["NCCL_BUFFSIZE"]\naxis = { x%d = 64 }\n' $((i % 8)) ;;
    esac
  done
} >"$work/rules.toml"

measure() { # measure LABEL CMD...
  local out="$work/time.txt"
  if ! /usr/bin/time -f '%e' true 2>/dev/null; then # no GNU time: wall clock only
    local t0 t1
    t0=$(date +%s.%N)
    "${@:2}" >/dev/null
    t1=$(date +%s.%N)
    printf '%-56s %6.2f s wall\n' "$1" "$(awk "BEGIN{print $t1 - $t0}")"
    return
  fi
  /usr/bin/time -f '%e %U %S %M' -o "$out" "${@:2}" >/dev/null
  read -r secs user sys kib <"$out"
  printf '%-56s %6.2f s wall %6.2f s cpu %6d MiB peak\n' "$1" "$secs" "$(awk "BEGIN{print $user + $sys}")" $((kib / 1024))
}

"$bin" matrix expand --max-cells 200000 "$work/bench-some.toml" | tail -1
"$bin" matrix expand --max-cells 200000 "$work/bench-all.toml" | tail -1
measure "smpatch matrix expand (110592 raw, excludes, 44 rules + built-in)" "$bin" matrix expand --max-cells 200000 "$work/bench-some.toml"
measure "smpatch matrix expand (110592 raw, all kept, 44 rules + built-in)" "$bin" matrix expand --max-cells 200000 "$work/bench-all.toml"
measure "smpatch matrix expand --json (all kept)" "$bin" matrix expand --max-cells 200000 --json "$work/bench-all.toml"

if command -v python3 >/dev/null; then
  # The same product, excludes and rule conditions as a hand-written loop.
  cat >"$work/naive.py" <<'PY'
import itertools, json, sys
axes = {"patches": [(), ("sm120-fusion",)], "nccl": ["default", "fewchan", "tree", "ll128"]}
for i, n in enumerate([4, 4, 4, 4, 3, 3, 2, 3]):
    axes[f"x{i}"] = [64 * (v + 1) for v in range(n)]
env = {"default": {"NCCL_MIN_NCHANNELS": "16", "NCCL_BUFFSIZE": "16777216"},
       "fewchan": {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring", "NCCL_MAX_NCHANNELS": "2", "NCCL_BUFFSIZE": "131072"},
       "tree": {"NCCL_ALGO": "Tree"}, "ll128": {"NCCL_PROTO": "LL128"}}
keep_all = sys.argv[1] == "all"
as_json = len(sys.argv) > 2 and sys.argv[2] == "json"
w = sys.stdout.write
n = 0
if as_json:
    w('{\n  "name": "bench",\n  "cells": [')
names = list(axes)
out = []
for vals in itertools.product(*axes.values()):
    c = dict(zip(names, vals))
    if not keep_all and ((c["x0"] in (64, 128) and c["x1"] in (64, 128, 192)) or c["x2"] == 64):
        continue
    e = dict(env[c["nccl"]]); e["SMPATCH_CELL"] = ".".join(str(v) for v in vals)
    cmd = ["python3", "-m", "sglang.launch_server", "--tp", "8", "--cuda-graph-max-bs", str(c["x0"])]
    cmd += [f"--x{i}" for i in range(3, 8)]
    if c["nccl"] == "ll128":
        cmd.append("--disable-cuda-graph")
    pruned, warns = None, []
    for i in range(44):
        k = i % 4
        if k == 0:
            hit = c[f"x{i % 8}"] == 64 * (1 + i % 2) and c[f"x{(i + 1) % 8}"] in (64, 128)
        elif k == 1:
            hit = e.get("NCCL_PROTO") == "LL" and f"--x{i % 8}" in cmd
        elif k == 2:
            hit = "sm120-fusion" in c["patches"] and str(c[f"x{i % 8}"]) == "128"
        else:
            hit = "--disable-cuda-graph" not in cmd and c[f"x{i % 8}"] == 64
        if hit:
            if k == 0:
                pruned = f"r{i}"; break
            warns.append(f"r{i}")
    if as_json:
        cell = {"id": e["SMPATCH_CELL"], "values": [{"axis": k, "value": str(v)} for k, v in c.items()],
                "env": dict(sorted(e.items())), "args": [], "patches": list(c["patches"]), "command": cmd,
                "origin": "product"}
        if pruned:
            cell["pruned"] = {"rule": pruned, "action": "prune"}
        if warns:
            cell["warnings"] = [{"rule": w, "action": "warn"} for w in warns]
        w(("," if n else "") + "\n    " + json.dumps(cell, indent=2).replace("\n", "\n    "))
        n += 1
    else:
        out.append((c, e, cmd, pruned, warns))
if as_json:
    w("\n  ]\n}\n")
else:
    print(len(out), "cells")
PY
  measure "python3 itertools.product loop (excludes, 44 rules)" python3 "$work/naive.py" some
  measure "python3 itertools.product loop (all kept, 44 rules)" python3 "$work/naive.py" all
  # The same loop printing each cell as indented JSON as it goes (fewer keys
  # per cell than smpatch's document: a lower bound for Python).
  measure "python3 loop printing JSON (all kept, 44 rules)" python3 "$work/naive.py" all json
fi

# The library alone, without process start and printing.
go test -run '^$' -bench 'Expand' -benchtime 5x -benchmem ./matrix | grep '^Benchmark'
