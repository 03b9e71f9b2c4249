# A comment block the change adds above the backend: every line below moves
# down by three, and the finding it holds keeps its identity.

from sglang.srt.layers.attention.base_attn_backend import AttentionBackend, SharedReadEnds


class LateReadBackend(AttentionBackend):
    """Declares IN_REPLAY for decode but gathers through req_to_token in its forward kernel, after the marker."""

    def __init__(self, model_runner):
        self.req_to_token = model_runner.req_to_token_pool.req_to_token

    def shared_read_ends(self, fm):
        if fm.is_decode():
            return SharedReadEnds.IN_REPLAY
        return SharedReadEnds.UNKNOWN

    def forward_decode(self, q, k, v, layer, forward_batch):
        pages = self.req_to_token[forward_batch.req_pool_indices, : forward_batch.seq_lens]
        return q @ pages
