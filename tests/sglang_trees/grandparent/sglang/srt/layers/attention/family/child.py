from .parent import ParentBackend


class GrandchildBackend(ParentBackend):
    """Inherits PRE_REPLAY from its grandparent but reads req_to_token in its in-graph metadata prep."""

    def __init__(self, model_runner):
        self.req_to_token = model_runner.req_to_token_pool.req_to_token

    def init_forward_metadata_in_graph(self, forward_batch):
        self.page_table.copy_(self.req_to_token[forward_batch.req_pool_indices])
