# Synthetic flashinfer JIT module for smpatch's hostile-input tests.
def gen_trtllm_comm_module():
    nvcc_flags = current_compilation_context.get_nvcc_flags_list(
        supported_major_versions=[9, 10]
    )
    return gen_jit_spec("trtllm_comm", [jit_env.FLASHINFER_CSRC_DIR / "trtllm_allreduce.cu"], extra_cuda_cflags=nvcc_flags)
