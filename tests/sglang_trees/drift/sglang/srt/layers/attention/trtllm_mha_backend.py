from sglang.srt.layers.attention.base_attn_backend import AttentionBackend, SharedReadEnds


class TRTLLMHAAttnBackend(AttentionBackend):
    """At the path and name the release catalog cites: its prefill declaration is what the drift test edits."""

    def __init__(self, model_runner):
        self.req_to_token = model_runner.req_to_token_pool.req_to_token
        self.kv_indices = None

    def init_forward_metadata_out_graph(self, forward_batch, in_capture=False):
        self.kv_indices = self.req_to_token[forward_batch.req_pool_indices]

    def shared_read_ends(self, fm):
        if fm.is_extend():
            return SharedReadEnds.PRE_REPLAY
        return super().shared_read_ends(fm)

    def forward_decode(self, q, k, v, layer, forward_batch):
        return q @ self.kv_indices

    def forward_extend(self, q, k, v, layer, forward_batch):
        return q @ self.kv_indices
