from sglang.srt.layers.attention.base_attn_backend import AttentionBackend, SharedReadEnds


class LateChildBackend(AttentionBackend):
    """Keeps the base IN_REPLAY but reads req_to_token in every decode layer."""

    def __init__(self, model_runner):
        self.req_to_token = model_runner.req_to_token_pool.req_to_token

    def forward_decode(self, q, k, v, layer, forward_batch):
        return q @ self.req_to_token[forward_batch.req_pool_indices]


class PassedCompositeBackend(AttentionBackend):
    """max_of over two children its caller passes in; decode runs the sparse one."""

    def __init__(self, sparse, dense):
        self.sparse = sparse
        self.dense = dense

    def shared_read_ends(self, fm):
        return SharedReadEnds.max_of(b.shared_read_ends(fm) for b in (self.sparse, self.dense))

    def forward_decode(self, q, k, v, layer, forward_batch):
        return self.sparse.forward_decode(q, k, v, layer, forward_batch)


class SwitchBackend(AttentionBackend):
    """Delegates to the one child its caller picks by a setting."""

    def __init__(self, model_runner, inner):
        self.inner = inner

    def shared_read_ends(self, fm):
        return self.inner.shared_read_ends(fm)

    def forward_decode(self, q, k, v, layer, forward_batch):
        return self.inner.forward_decode(q, k, v, layer, forward_batch)


class OpenBackend(AttentionBackend):
    """Delegates to whatever its caller was given."""

    def __init__(self, inner):
        self.inner = inner

    def shared_read_ends(self, fm):
        return self.inner.shared_read_ends(fm)
