from dataclasses import dataclass

from sglang.srt.layers.attention.base_attn_backend import AttentionBackend


@dataclass
class BindMetadata:
    page_table: object = None
    swa_page_table: object = None


class BindBackend(AttentionBackend):
    """Binds its captured metadata's ``swa_page_table`` to a slice of a preallocated table when it uses the
    sliding-window pool, keeps the object per batch size and makes it the forward's metadata, as the XPU backend does
    (0.5.23 xpu_backend.py:1727-1757,1843); the forward re-derives the table from req_to_token only when the field is
    None (1531-1538 there), which the captured graph never records."""

    def __init__(self, model_runner):
        self.req_to_token = model_runner.req_to_token_pool.req_to_token
        self.use_swa = model_runner.use_swa
        self.graph_metadata = {"page_table": model_runner.page_table, "swa_page_table": model_runner.swa_table}
        self.forward_metadata = None

    def init_forward_metadata_out_graph(self, forward_batch, in_capture=False):
        bs = forward_batch.batch_size
        if in_capture:
            metadata = BindMetadata()
            metadata.page_table = self.graph_metadata["page_table"][:bs, :]
            if self.use_swa:
                metadata.swa_page_table = self.graph_metadata["swa_page_table"][:bs, :]
            self.graph_metadata[bs] = metadata
        metadata = self.graph_metadata[bs]
        self.forward_metadata = metadata

    def forward_decode(self, q, k, v, layer, forward_batch):
        metadata = self.forward_metadata
        page_table = metadata.page_table
        if self.use_swa:
            if metadata.swa_page_table is not None:
                page_table = metadata.swa_page_table
            else:
                page_table = self.req_to_token[forward_batch.req_pool_indices]
        return q, page_table
