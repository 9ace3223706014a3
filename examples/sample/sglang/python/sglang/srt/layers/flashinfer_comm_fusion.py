"""Synthetic stand-in for sglang's layers/flashinfer_comm_fusion.py."""

import logging

import torch

from sglang.srt.utils import (
    ceil_align,
    is_flashinfer_available,
    is_sm90_supported,
    is_sm100_supported,
)

logger = logging.getLogger(__name__)

_flashinfer_allreduce_unavailable = not is_flashinfer_available()


def _mnnvl_supported(is_multi_node: bool) -> bool:
    """Whether the mnnvl backend is usable on the current system."""
    if is_sm100_supported():
        return True
    return is_sm90_supported() and not is_multi_node


def _resolve_backend(backend: str, is_multi_node: bool = False) -> str:
    """Resolve the requested FlashInfer allreduce fusion backend."""
    if not (is_sm90_supported() or is_sm100_supported()):
        raise ValueError(
            "FlashInfer allreduce fusion requires SM90 or SM10X NVIDIA GPUs."
        )

    if backend == "auto":
        if is_multi_node or is_sm100_supported():
            return "mnnvl"
        return "trtllm"
    if backend == "mnnvl" and not _mnnvl_supported(is_multi_node):
        raise ValueError("mnnvl is not available here")
    return backend


def is_flashinfer_allreduce_unavailable() -> bool:
    return _flashinfer_allreduce_unavailable


def uses_cutedsl_ar_fusion() -> bool:
    return False


def _flashinfer_trtllm_workspace_allocation_sizes(cuda_driver, prop, world_size, sizes):
    """Synthetic: the multicast-granularity step of the workspace preflight."""
    allocation_sizes = []
    for allocation_size in sizes:
        mc_prop = cuda_driver.CUmulticastObjectProp()
        mc_prop.numDevices = world_size
        mc_prop.size = allocation_size
        mc_prop.handleTypes = prop.requestedHandleTypes

        err, mc_granularity = cuda_driver.cuMulticastGetGranularity(
            mc_prop,
            cuda_driver.CUmulticastGranularity_flags.CU_MULTICAST_GRANULARITY_RECOMMENDED,
        )
        if err != cuda_driver.CUresult.CUDA_SUCCESS:
            raise RuntimeError(
                "cuMulticastGetGranularity failed for FlashInfer "
                f"workspace preflight: {err}"
            )

        allocation_size = ceil_align(allocation_size, mc_granularity)
        allocation_sizes.append(allocation_size)
    return allocation_sizes
