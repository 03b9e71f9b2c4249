from sglang.srt.layers.attention.base_attn_backend import AttentionBackend


class HonestBackend(AttentionBackend):
    """Reads the request-to-token map only in its out-of-graph metadata prep: the base IN_REPLAY holds."""

    def __init__(self, model_runner):
        self.req_to_token = model_runner.req_to_token_pool.req_to_token
        self.kv_indices = None

    def init_forward_metadata_out_graph(self, forward_batch, in_capture=False):
        rows = self.req_to_token[forward_batch.req_pool_indices]
        self.kv_indices = rows

    def forward_decode(self, q, k, v, layer, forward_batch):
        return q @ self.kv_indices

    def forward_extend(self, q, k, v, layer, forward_batch):
        return q @ self.kv_indices
