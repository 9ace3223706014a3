#!/usr/bin/env bash
# smpatch doctor beside what it replaces, in the same run: the whole doctor
# pass (probe or saved report, tree, model, launch flags, every rule)
# against `python -c 'import sglang.srt.server_args'`, the first step of a
# server start (a load that ends in a crash takes minutes more). Medians of
# $RUNS runs.
#
#   DOCTOR_REPO   an sglang checkout or installed tree (default: the sample tree)
#   DOCTOR_MODEL  a model directory with config.json (default: none)
#   DOCTOR_TP     the launch's --tp (default 8)
#   PROBE_FILE    a saved probe report (default: the story host's); the live
#                 probe of this machine is timed too
#   PYTHON        the interpreter whose sglang is imported (default python3)
#
# usage: bench/doctor.bench.sh [path/to/smpatch]
set -uo pipefail
cd "$(dirname "$0")/.."
bin="$(realpath "${1:-bin/smpatch}")"
py="${PYTHON:-python3}"
runs="${RUNS:-7}"
repo="${DOCTOR_REPO:-examples/sample/sglang}"
report="${PROBE_FILE:-examples/hosts/rtx-pro-6000x8-flashinfer-0.6.17.json}"
tp="${DOCTOR_TP:-8}"
model="${DOCTOR_MODEL:-}"

now() { date +%s.%N; }
median_of() {
  local ts=() t0 t1
  for _ in $(seq "$runs"); do
    t0=$(now); "$@" >/dev/null 2>&1; t1=$(now)
    ts+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.4f", b-a}')")
  done
  printf '%s\n' "${ts[@]}" | sort -g | awk '{a[NR]=$1} END{print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (a > 0) printf "%.1fx", b/a; else print "n/a" }'; }

mp="org/model"
margs=()
if [ -n "$model" ]; then mp="$model"; margs=(--model "$model"); fi
launch=(python -m sglang.launch_server --model-path "$mp" --tp "$tp" --enable-flashinfer-allreduce-fusion)

echo "doctor: $repo, --tp $tp${model:+, model $model} (median of $runs)"
saved_s=$(median_of "$bin" doctor --repo "$repo" --probe-file "$report" "${margs[@]}" -- "${launch[@]}")
echo "  smpatch doctor --probe-file $(basename "$report"):  ${saved_s}s"
live_s=$(median_of "$bin" doctor --repo "$repo" --python "$py" "${margs[@]}" -- "${launch[@]}")
echo "  smpatch doctor (live probe of this machine):      ${live_s}s"
"$bin" doctor --repo "$repo" --python "$py" "${margs[@]}" -- "${launch[@]}" | tail -n 1 | sed 's/^/    /'
if "$py" -c 'import sglang.srt.server_args' >/dev/null 2>&1; then
  imp_s=$(median_of "$py" -c 'import sglang.srt.server_args')
  echo "  python -c 'import sglang.srt.server_args':       ${imp_s}s"
  echo "  ratio (import / doctor with the live probe): $(ratio "$live_s" "$imp_s")"
elif "$py" -c 'import torch' >/dev/null 2>&1; then
  # sglang's dependencies are not all here; its server imports torch first.
  imp_s=$(median_of "$py" -c 'import torch')
  echo "  python -c 'import sglang.srt.server_args': sglang is not importable with $py"
  echo "  python -c 'import torch' (the first import of a server start): ${imp_s}s"
  echo "  ratio (import torch / doctor with the live probe): $(ratio "$live_s" "$imp_s")"
else
  echo "  python -c 'import sglang.srt.server_args': sglang is not importable with $py; no comparison"
fi
