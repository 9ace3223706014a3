"""Synthetic stand-in for sglang's communicator.py (sglang 0.5.15 to 0.5.18)."""

import logging

from sglang.srt.layers.dp_attention import is_dp_attention_enabled
from sglang.srt.layers.flashinfer_comm_fusion import is_flashinfer_allreduce_unavailable
from sglang.srt.server_args import get_global_server_args
from sglang.srt.utils import (
    get_bool_env_var,
    is_cuda,
    is_flashinfer_available,
    is_gfx95_supported,
    is_hip,
    is_npu,
    is_sm90_supported,
    is_sm100_supported,
)

_is_cuda = is_cuda()
_is_flashinfer_available = is_flashinfer_available()
_is_sm90_supported = _is_cuda and is_sm90_supported()
_is_sm100_supported = _is_cuda and is_sm100_supported()
_use_aiter = get_bool_env_var("SGLANG_USE_AITER") and is_hip()
_is_gfx95_supported = is_gfx95_supported()
_is_npu = is_npu()

logger = logging.getLogger(__name__)


FUSE_ALLREDUCE_MAX_BATCH_SIZE = 2048


def apply_flashinfer_allreduce_fusion(batch_size: int):
    return (
        # NOTE: flashinfer 0.6.1 caused performance regression on sm100 for allreduce fusion
        # Ref: https://github.com/sgl-project/sglang/issues/17237
        (_is_sm90_supported or _is_sm100_supported)
        and _is_flashinfer_available
        and batch_size > 0
        and batch_size <= FUSE_ALLREDUCE_MAX_BATCH_SIZE
        and not is_dp_attention_enabled()
        and get_global_server_args().enable_flashinfer_allreduce_fusion
        and not is_flashinfer_allreduce_unavailable()
    )


class LayerCommunicator:
    """Synthetic: asks the gate once per layer and batch."""

    def __init__(self, is_last_layer: bool = False):
        self.is_last_layer = is_last_layer

    def should_fuse_mlp_allreduce_with_next_layer(self, batch_size: int) -> bool:
        if self.is_last_layer:
            return False
        return apply_flashinfer_allreduce_fusion(batch_size)
