from sglang.srt.layers.attention.base_attn_backend import AttentionBackend, SharedReadEnds


class SnapshotBackend(AttentionBackend):
    """Its prefill snapshot claims PRE_REPLAY, but its extend forward still gathers through req_to_token."""

    def __init__(self, model_runner):
        self.req_to_token = model_runner.req_to_token_pool.req_to_token
        self.lazy = False

    def _snapshot_prefill_shared_reads(self, forward_batch, *, num_qo_tokens):
        if self.lazy:
            return SharedReadEnds.UNKNOWN
        return SharedReadEnds.PRE_REPLAY

    def init_forward_metadata_in_graph(self, forward_batch):
        self.page_table.copy_(self.req_to_token[forward_batch.req_pool_indices])

    def forward_decode(self, q, k, v, layer, forward_batch):
        return q @ self.page_table

    def forward_extend(self, q, k, v, layer, forward_batch):
        return q @ self.req_to_token[forward_batch.req_pool_indices]
