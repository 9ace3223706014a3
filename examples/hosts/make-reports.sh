#!/usr/bin/env bash
# Regenerates the saved probe reports of the story's host: eight RTX PRO 6000
# Blackwell GPUs (SM 12.0) on PCIe, CUDA 12.9, with the flashinfer release
# the story ran (0.6.16.post4: trtllm_comm gate [9, 10]) and the first one
# whose gate admits SM 12.x (0.6.17: [9, 10, 12]). Both are of the host as
# the story ran it: ACS redirecting P2P on every root port, the IOMMU
# translating, no RegistryDwords (synthetic-host.sh acs). A third report,
# rtx-pro-6000x8-p2p-ready.json, is the same host set up for peer traffic
# (synthetic-host.sh p2p) with flashinfer 0.6.17.
#
# No GPU is needed: the host is synthetic (a scripted nvidia-smi, a CUDA
# version.json, /sys and /proc trees, dist-info, triton's ptxas and
# flashinfer sources shaped like those releases), and the reports are what
# `smpatch probe -o` reads from it.
#
# usage: examples/hosts/make-reports.sh [path/to/smpatch]
set -euo pipefail
bin="$(realpath "${1:-bin/smpatch}")"
here="$(cd "$(dirname "$0")" && pwd)"
# A fixed root, so the paths inside the reports are the same on every run.
root=/tmp/smpatch-story-host
rm -rf "$root"
mkdir -p "$root/bin" "$root/cuda/bin"
trap 'rm -rf "$root"' EXIT

cat >"$root/bin/nvidia-smi" <<'SMI'
#!/bin/sh
# nvidia-smi of eight RTX PRO 6000 Blackwell GPUs on PCIe, P2P reads OK,
# no NVLink (`topo -p2p n` says NS, not supported, for every pair).
if [ "$1" = topo ]; then
  pair=OK
  [ "$3" = n ] && pair=NS
  printf ' \tGPU0\tGPU1\tGPU2\tGPU3\tGPU4\tGPU5\tGPU6\tGPU7\t\n'
  for i in 0 1 2 3 4 5 6 7; do
    printf ' GPU%s\t' $i
    for j in 0 1 2 3 4 5 6 7; do
      if [ $i = $j ]; then printf 'X\t'; else printf '%s\t' "$pair"; fi
    done
    printf '\n'
  done
  printf '\nLegend:\n\n  X    = Self\n  OK   = Status Ok\n'
  exit 0
fi
for i in 0 1 2 3 4 5 6 7; do
  echo "$i, NVIDIA RTX PRO 6000 Blackwell Server Edition, GPU-0000000$i-5a1e-4b0c-9d6e-00000000000$i, 12.0, 580.65.06, 97887 MiB"
done
SMI
chmod 0755 "$root/bin/nvidia-smi"
cat >"$root/cuda/version.json" <<'J'
{
   "cuda" : {
      "name" : "CUDA SDK",
      "version" : "12.9.1"
   }
}
J

# site-packages VERSION GATE: torch, NCCL, sglang and flashinfer dist-info,
# and flashinfer's comm generator with the given supported_major_versions.
site() {
  local sp="$root/$1/site-packages" fi="$2" gate="$3" excl="$4"
  mkdir -p "$sp/flashinfer/jit" "$sp/flashinfer/data/include/flashinfer/comm" "$sp/torch"
  dist() { mkdir -p "$sp/$1.dist-info"; printf 'Metadata-Version: 2.1\nName: %s\nVersion: %s\n' "$2" "$3" >"$sp/$1.dist-info/METADATA"; }
  dist torch-2.9.1 torch 2.9.1
  dist triton-3.5.1 triton 3.5.1
  mkdir -p "$sp/triton/backends/nvidia/bin"
  cat >"$sp/triton/backends/nvidia/bin/ptxas" <<'PTXAS'
#!/bin/sh
# The ptxas of CUDA 12.8 that triton 3.5 bundles: it knows sm_120a, not sm_121a.
if [ "$1" = --version ]; then
  echo 'ptxas: NVIDIA (R) Ptx optimizing assembler'
  echo 'Cuda compilation tools, release 12.8, V12.8.93'
  exit 0
fi
echo '--gpu-name <gpu name>                               (-arch)'
echo "        Allowed values for this option:  'compute_120','compute_120a','sm_100','sm_100a',"
echo "        'sm_101','sm_101a','sm_120','sm_120a','sm_75','sm_80','sm_86','sm_89','sm_90','sm_90a'."
echo "        Default value:  'sm_52'."
PTXAS
  chmod 0755 "$sp/triton/backends/nvidia/bin/ptxas"
  dist nvidia_nccl_cu12-2.27.3 nvidia-nccl-cu12 2.27.3
  dist sglang-0.5.9 sglang 0.5.9
  dist sgl_kernel-0.3.21 sgl-kernel 0.3.21
  dist "flashinfer_python-$fi" flashinfer-python "$fi"
  printf '__version__ = "2.9.1+cu129"\ncuda = "12.9"\n' >"$sp/torch/version.py"
  printf '__version__ = "%s"\n' "$fi" >"$sp/flashinfer/_build_meta.py"
  cat >"$sp/flashinfer/jit/comm.py" <<PY
def gen_trtllm_comm_module() -> JitSpec:
    nvcc_flags = current_compilation_context.get_nvcc_flags_list(
        supported_major_versions=$gate
    )
    return gen_jit_spec(
        "trtllm_comm",
        [jit_env.FLASHINFER_CSRC_DIR / "trtllm_allreduce.cu"],
        extra_cuda_cflags=nvcc_flags,
    )
PY
  cat >"$sp/flashinfer/compilation_context.py" <<'PY'
        if major == 12 and cuda_version < (12, 9):
            raise RuntimeError("SM 12.x requires CUDA >= 12.9")
PY
  {
    echo '#pragma once'
    echo '__global__ void oneshot_kernel(float* out) {'
    echo "#if (defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900)$excl)"
    echo '  out[threadIdx.x] = 1.0f;'
    echo '#endif'
    echo '}'
  } >"$sp/flashinfer/data/include/flashinfer/comm/trtllm_allreduce.cuh"
  echo "$sp"
}

old=$(site fi-0.6.16.post4 0.6.16.post4 '[9, 10]' ' && (__CUDA_ARCH__ < 1200)')
new=$(site fi-0.6.17 0.6.17 '[9, 10, 12]' '')
"$here/synthetic-host.sh" "$root/acs" acs
"$here/synthetic-host.sh" "$root/p2p" p2p
export PATH="$root/bin:$PATH" CUDA_HOME="$root/cuda"
report() { # HOST SITE-PACKAGES NAME
  SMPATCH_SYSFS="$root/$1/sys" SMPATCH_PROCFS="$root/$1/proc" "$bin" probe --site-packages "$2" -o "$here/$3" >/dev/null
  echo "wrote $here/$3"
}
report acs "$old" rtx-pro-6000x8-flashinfer-0.6.16.json
report acs "$new" rtx-pro-6000x8-flashinfer-0.6.17.json
report p2p "$new" rtx-pro-6000x8-p2p-ready.json
