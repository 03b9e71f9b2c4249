"""A synthetic model whose layers read scheduler-shared maps in their forward (model_reads): through a helper of
another module (and that helper's NPU-only branch), through a local bound to the map or None by a conditional
expression (and not through one bound to the map or another tensor), in a ``forward_*`` method of a layer, behind a
host sync, and at load time only."""

from sglang.srt.models.toy_utils import build_slots, swa_slots


class ToyAttention:
    def forward(self, positions, hidden_states, forward_batch):
        slots = build_slots(forward_batch)
        swa = swa_slots(forward_batch, forward_batch.token_to_kv_pool, True)
        return hidden_states, slots, swa


class ToyLayer:
    def forward_prepare(self, forward_batch):
        if forward_batch.forward_mode.is_decode():
            return forward_batch.req_to_token_pool.req_to_token[forward_batch.req_pool_indices]
        return None

    def forward_synced(self, forward_batch):
        rows = forward_batch.req_pool_indices.tolist()
        return forward_batch.req_to_token_pool.req_to_token[rows]

    def load_weights(self, weights, forward_batch):
        return forward_batch.req_to_token_pool.req_to_token[0]


class ToyMLP:
    def forward(self, x, forward_batch):
        return x
