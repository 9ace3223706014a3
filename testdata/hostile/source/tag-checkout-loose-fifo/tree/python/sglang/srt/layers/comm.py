from sglang.srt.utils import is_sm90_supported, is_sm100_supported

_is_sm90_supported = is_sm90_supported()
_is_sm100_supported = is_sm100_supported()


def apply_fusion(batch_size):
    if not (_is_sm90_supported or _is_sm100_supported):
        return False
    return batch_size <= 256  # my own tuning
