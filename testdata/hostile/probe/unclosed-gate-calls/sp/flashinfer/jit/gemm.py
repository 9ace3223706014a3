# Synthetic flashinfer JIT module for smpatch's hostile-input tests.
def gen_gemm_sm90_module():
    nvcc_flags = current_compilation_context.get_nvcc_flags_list(
        supported_major_versions=[9, 10, 12]
    )
    return gen_jit_spec("gemm_sm90", [jit_env.FLASHINFER_CSRC_DIR / "gemm.cu"], extra_cuda_cflags=nvcc_flags)
