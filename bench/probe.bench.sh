#!/usr/bin/env bash
# smpatch probe beside what a user would otherwise run, in the same run:
#   1. the full `smpatch probe` vs `python -c 'import torch'` (the cheapest
#      way to ask torch anything about the GPU), medians of $RUNS runs, ratio;
#   2. the full probe of a synthetic eight-GPU host (its /sys and /proc from
#      examples/hosts/synthetic-host.sh, an nvidia-smi script answering at
#      once) beside the same probe with an empty /sys and /proc: what reading
#      the PCIe, IOMMU and driver facts costs;
#   3. the fatbin scan of one CUDA library (libtorch_cuda.so when torch is
#      installed, or $FATBIN_FILE) vs `cuobjdump --list-elf` on the same file.
# Usage: bench/probe.bench.sh [path/to/smpatch]   (env: PYTHON, RUNS, FATBIN_FILE)
set -uo pipefail
bin="${1:-bin/smpatch}"
py="${PYTHON:-python3}"
runs="${RUNS:-5}"

now() { date +%s.%N; }
# median_of CMD...: runs CMD $runs times (output discarded), prints the median seconds.
median_of() {
  local ts=() t0 t1
  for _ in $(seq "$runs"); do
    t0=$(now); "$@" >/dev/null 2>&1; t1=$(now)
    ts+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.4f", b-a}')")
  done
  printf '%s\n' "${ts[@]}" | sort -g | awk '{a[NR]=$1} END{print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (a > 0) printf "%.1fx", b/a; else print "n/a" }'; }

echo "probe: smpatch probe --python $py --json (median of $runs)"
probe_s=$(median_of "$bin" probe --python "$py" --json)
echo "  smpatch probe:          ${probe_s}s"
if "$py" -c 'import torch' >/dev/null 2>&1; then
  torch_s=$(median_of "$py" -c 'import torch')
  echo "  python -c 'import torch': ${torch_s}s"
  echo "  ratio (import torch / probe): $(ratio "$probe_s" "$torch_s")"
else
  echo "  python -c 'import torch': torch is not importable with $py; no comparison"
fi

host=$(mktemp -d)
trap 'rm -rf "$host"' EXIT
"$(dirname "$0")/../examples/hosts/synthetic-host.sh" "$host/h" acs
mkdir -p "$host/bin" "$host/sp" "$host/empty"
cat >"$host/bin/nvidia-smi" <<'SMI'
#!/bin/sh
if [ "$1" = topo ]; then
  printf ' \tGPU0\tGPU1\tGPU2\tGPU3\tGPU4\tGPU5\tGPU6\tGPU7\n'
  for i in 0 1 2 3 4 5 6 7; do printf ' GPU%s\tX\tOK\tOK\tOK\tOK\tOK\tOK\tOK\n' $i; done
  exit 0
fi
for i in 0 1 2 3 4 5 6 7; do
  echo "$i, NVIDIA RTX PRO 6000 Blackwell Server Edition, GPU-0000000$i-5a1e-4b0c-9d6e-00000000000$i, 12.0, 580.65.06, 97887 MiB"
done
SMI
chmod 0755 "$host/bin/nvidia-smi"
echo "synthetic host: smpatch probe of eight GPUs' /sys and /proc (median of $runs)"
facts_s=$(median_of env PATH="$host/bin:$PATH" SMPATCH_SYSFS="$host/h/sys" SMPATCH_PROCFS="$host/h/proc" "$bin" probe --site-packages "$host/sp" --json)
bare_s=$(median_of env PATH="$host/bin:$PATH" SMPATCH_SYSFS="$host/empty" SMPATCH_PROCFS="$host/empty" "$bin" probe --site-packages "$host/sp" --json)
echo "  with the host's /sys and /proc: ${facts_s}s"
echo "  with an empty /sys and /proc:   ${bare_s}s"

file="${FATBIN_FILE:-}"
if [ -z "$file" ]; then
  loc=$("$bin" probe --python "$py" --json 2>/dev/null | sed -n '/"torch": {/,/}/s/.*"location": "\(.*\)".*/\1/p' | sed -n 1p)
  [ -n "$loc" ] && [ -f "$loc/torch/lib/libtorch_cuda.so" ] && file="$loc/torch/lib/libtorch_cuda.so"
fi
if [ -z "$file" ]; then
  echo "fatbin: no libtorch_cuda.so found and FATBIN_FILE unset; skipped"
  exit 0
fi
echo "fatbin: $file ($(du -h "$file" | cut -f1))"
scan_s=$(median_of "$bin" probe --scan "$file")
echo "  smpatch probe --scan:   ${scan_s}s"
"$bin" probe --scan "$file" | sed 's/^/    /'
if command -v cuobjdump >/dev/null 2>&1; then
  cu_s=$(median_of cuobjdump --list-elf "$file")
  echo "  cuobjdump --list-elf:   ${cu_s}s"
  echo "  ratio (cuobjdump / scan): $(ratio "$scan_s" "$cu_s")"
else
  echo "  cuobjdump not on PATH; no comparison"
fi
