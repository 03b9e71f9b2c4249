from sglang.srt.layers.attention.base_attn_backend import SharedReadEnds
from sglang.srt.utils import is_cuda


def make_external_event(device_module):
    if not is_cuda():
        return None
    try:
        return device_module.Event(external=True)
    except TypeError:
        return None


def maybe_publish_prefill_shared_read_done(model_runner, shared_read_ends, device_module):
    if shared_read_ends is not SharedReadEnds.PRE_REPLAY:
        return
    read_done = device_module.Event()
    read_done.record()
    model_runner.shared_read_done_event = read_done
