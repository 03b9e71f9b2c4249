from sglang.srt.layers.attention.base_attn_backend import AttentionBackend


class CudaLateBackend(AttentionBackend):
    """The same late read as NpuLateBackend, bound to no device: a finding."""

    def __init__(self, model_runner):
        self.req_to_token = model_runner.req_to_token_pool.req_to_token

    def forward_decode(self, q, k, v, layer, forward_batch):
        pages = self.req_to_token[forward_batch.req_pool_indices]
        return q @ pages
