from sglang.srt.layers.attention.base_attn_backend import AttentionBackend
from sglang.srt.model_executor.runner_utils.capture_mode import get_is_capture_mode


class CaptureGuardBackend(AttentionBackend):
    """Re-plans from req_to_token only when no graph is being captured (an eager forward), in two shapes of guard;
    its own gather after the helpers return is captured like any forward read."""

    def __init__(self, model_runner):
        self.req_to_token = model_runner.req_to_token_pool.req_to_token

    def _replan(self, forward_batch):
        if get_is_capture_mode():
            return
        self.pages = self.req_to_token[forward_batch.req_pool_indices]

    def _eager_only(self, forward_batch):
        if not get_is_capture_mode() and forward_batch.seq_lens is not None:
            self.more = self.req_to_token[forward_batch.req_pool_indices, 1]

    def forward_decode(self, q, k, v, layer, forward_batch):
        self._replan(forward_batch)
        self._eager_only(forward_batch)
        late = self.req_to_token[forward_batch.req_pool_indices, 0]
        return q @ late
