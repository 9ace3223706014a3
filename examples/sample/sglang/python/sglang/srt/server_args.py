"""Synthetic stand-in for sglang's server_args.py (the annotated shape of
sglang 0.5.14 to 0.5.18): a few ServerArgs fields whose flags
add_cli_args_from_dataclass derives, and the deprecated fusion switch.
Written for smpatch's examples, not copied from sglang."""

import argparse
import dataclasses
from typing import List, Literal, Optional

from sglang.srt.arg_groups.arg_utils import NS, A, Arg, add_cli_args_from_dataclass


@dataclasses.dataclass
class ServerArgs:
    """Server-wide configuration (a sample)."""

    model_path: A[str, Arg(help="The path of the model weights.", aliases=["--model"]), NS("model")]
    trust_remote_code: A[bool, "Whether or not to allow custom models defined on the Hub in their own modeling files.", NS("model")] = False
    host: A[str, "The host of the HTTP server.", NS("server")] = "127.0.0.1"
    port: A[int, "The port of the HTTP server.", NS("server")] = 30000
    mem_fraction_static: A[Optional[float], "The fraction of the memory used for static allocation.", NS("memory")] = None
    tp_size: A[int, Arg(help="The tensor parallelism size.", aliases=["--tensor-parallel-size"]), NS("parallel")] = 1
    ep_size: A[int, "The expert parallelism size.", NS("parallel")] = 1
    quantization: A[Optional[str], "The quantization method.", NS("model")] = None
    kv_cache_dtype: A[str, "Data type for kv cache storage.", NS("model")] = "auto"
    attention_backend: A[Optional[str], "Choose the kernels for attention layers.", NS("exec.kernel")] = None
    moe_runner_backend: A[str, "Choose the runner backend for MoE.", NS("exec.moe")] = "auto"
    enable_flashinfer_allreduce_fusion: A[bool, Arg(no_cli=True), NS("exec.comm")] = False
    flashinfer_allreduce_fusion_backend: A[
        Optional[Literal["auto", "trtllm", "mnnvl"]],
        Arg(help="Enable FlashInfer allreduce fusion and choose backend. Requires SM90 or SM10X NVIDIA GPUs."),
        NS("exec.comm"),
    ] = None
    disable_custom_all_reduce: A[bool, "Disable the custom all-reduce kernel and fall back to NCCL.", NS("exec.comm")] = False
    disable_cuda_graph: A[bool, "Disable cuda graph.", NS("exec")] = False
    cuda_graph_bs: A[Optional[List[int]], "Set the list of batch sizes for cuda graph.", NS("exec")] = None
    cuda_graph_max_bs: A[Optional[int], "Set the maximum batch size for cuda graph.", NS("exec")] = None
    num_continuous_decode_steps: A[int, "Run multiple continuous decoding steps to reduce scheduling overhead.", NS("exec")] = 1

    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser):
        add_cli_args_from_dataclass(parser, ServerArgs)
        parser.add_argument(
            "--enable-flashinfer-allreduce-fusion",
            action="store_true",
            help="(Deprecated: use --flashinfer-allreduce-fusion-backend=auto) "
            "Enable FlashInfer allreduce fusion with Residual RMSNorm.",
        )
