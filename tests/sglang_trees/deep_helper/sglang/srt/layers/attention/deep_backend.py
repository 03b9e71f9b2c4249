from sglang.srt.layers.attention.base_attn_backend import AttentionBackend
from sglang.srt.mem_cache.page_utils import gather_pages


class DeepReadBackend(AttentionBackend):
    """Reads req_to_token two calls below its verify forward (a self call, then a helper in another module)."""

    def __init__(self, model_runner):
        self.pool = model_runner.req_to_token_pool

    def forward_extend(self, q, k, v, layer, forward_batch):
        pages = self._pages_for(forward_batch)
        return q @ pages

    def forward_decode(self, q, k, v, layer, forward_batch):
        return q

    def _pages_for(self, forward_batch):
        return gather_pages(self.pool, forward_batch.req_pool_indices, forward_batch.seq_lens)
