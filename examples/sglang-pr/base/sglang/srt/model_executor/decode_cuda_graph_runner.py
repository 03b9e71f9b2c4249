"""The decode graph runner of the pull-request pair: it resolves the backend's declaration and publishes the read-done
event there (the publish point a finding's SARIF result points to)."""


class DecodeCudaGraphRunner:
    def execute(self, forward_batch):
        ends = self._resolve_shared_read_ends(forward_batch)
        self._publish_read_done(ends)
        return self.graph.replay()
