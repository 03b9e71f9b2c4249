from sglang.srt.layers.attention.base_attn_backend import AttentionBackend


class GatherBackend(AttentionBackend):
    """Reads req_to_token in its own extend forward only (its decode never runs here)."""

    def forward_extend(self, q, k, v, layer, forward_batch):
        return q @ self.req_to_token_pool.req_to_token[forward_batch.req_pool_indices]


class AliasedBackend(AttentionBackend):
    """Takes GatherBackend's extend forward as its decode forward by a class-level assignment."""

    forward_decode = GatherBackend.forward_extend
