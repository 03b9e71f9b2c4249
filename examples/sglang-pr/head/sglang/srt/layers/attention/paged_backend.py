from sglang.srt.layers.attention.base_attn_backend import AttentionBackend


class PagedBackend(AttentionBackend):
    """Builds its page table from req_to_token before the replay, and (the change under review) gathers the pages
    again inside forward_decode, after the marker: the base IN_REPLAY does not cover that read."""

    def __init__(self, model_runner):
        self.req_to_token = model_runner.req_to_token_pool.req_to_token
        self.page_table = None

    def init_forward_metadata_out_graph(self, forward_batch, in_capture=False):
        self.page_table = self.req_to_token[forward_batch.req_pool_indices]

    def forward_decode(self, q, k, v, layer, forward_batch):
        pages = self.req_to_token[forward_batch.req_pool_indices, : forward_batch.seq_lens]
        return q @ pages
