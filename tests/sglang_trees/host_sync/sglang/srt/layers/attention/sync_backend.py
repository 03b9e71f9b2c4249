from sglang.srt.layers.attention.base_attn_backend import AttentionBackend


class HostSyncBackend(AttentionBackend):
    """Reads req_to_token in decode only after a host sync: that path cannot be captured in a CUDA graph."""

    def __init__(self, model_runner):
        self.req_to_token = model_runner.req_to_token_pool.req_to_token

    def forward_decode(self, q, k, v, layer, forward_batch):
        max_len = int(forward_batch.seq_lens.max().item())
        pages = self.req_to_token[forward_batch.req_pool_indices, :max_len]
        return q @ pages
