from sglang.srt.layers.attention.base_attn_backend import AttentionBackend, SharedReadEnds
from sglang.srt.layers.attention.triton_like_backend import HonestBackend


class SneakyChildBackend(AttentionBackend):
    """Keeps the base IN_REPLAY but reads req_to_token in every decode layer."""

    def __init__(self, model_runner):
        self.req_to_token_pool = model_runner.req_to_token_pool

    def forward_decode(self, q, k, v, layer, forward_batch):
        return sparse_decode(q, self.req_to_token_pool.req_to_token, forward_batch.req_pool_indices)


def sparse_decode(q, table, rows):
    return q


class CompositeBackend(AttentionBackend):
    """max_of over its two children; decode runs the sneaky child."""

    def __init__(self, model_runner):
        self.sparse = SneakyChildBackend(model_runner)
        self.dense = HonestBackend(model_runner)

    def init_forward_metadata_out_graph(self, forward_batch, in_capture=False):
        self.sparse.init_forward_metadata_out_graph(forward_batch, in_capture)
        self.dense.init_forward_metadata_out_graph(forward_batch, in_capture)

    def shared_read_ends(self, fm):
        return SharedReadEnds.max_of(b.shared_read_ends(fm) for b in (self.sparse, self.dense))

    def forward_decode(self, q, k, v, layer, forward_batch):
        return self.sparse.forward_decode(q, k, v, layer, forward_batch)

    def forward_extend(self, q, k, v, layer, forward_batch):
        return self.dense.forward_extend(q, k, v, layer, forward_batch)
