from dataclasses import dataclass

from sglang.srt.layers.attention.base_attn_backend import AttentionBackend


@dataclass
class ReplanMetadata:
    pages: object = None


class ReplanBackend(AttentionBackend):
    """Re-plans from req_to_token in the forward when the metadata it finds was built for fewer requests (TRTLLM-MLA's
    backstop, 0.5.23 trtllm_mla_backend.py:1340-1343): only the eager prep sets ``batch_size``, on a new object, so
    the object the capture makes has none and the captured forward never re-plans."""

    def __init__(self, model_runner):
        self.req_to_token = model_runner.req_to_token_pool.req_to_token
        self.graph_metadata = {}
        self.forward_metadata = None

    def init_forward_metadata(self, forward_batch):
        self.forward_metadata = ReplanMetadata()
        self.forward_metadata.batch_size = forward_batch.batch_size
        self.forward_metadata.pages = self.req_to_token[forward_batch.req_pool_indices]
        forward_batch.replan_metadata = self.forward_metadata

    def init_forward_metadata_out_graph(self, forward_batch, in_capture=False):
        if in_capture:
            metadata = ReplanMetadata()
            self.graph_metadata[forward_batch.batch_size] = metadata
            self.forward_metadata = metadata

    def forward_decode(self, q, k, v, layer, forward_batch):
        metadata = getattr(forward_batch, "replan_metadata", None) or self.forward_metadata
        size = getattr(metadata, "batch_size", None)
        if size is not None and size < forward_batch.batch_size:
            self.init_forward_metadata(forward_batch)
        return q
