"""Synthetic graph runners: one that resolves its backend's declaration and publishes (the decode graph runner), one
that publishes before every replay without asking, one that never publishes, and the eager runner (prefill only)."""


class DecodeCudaGraphRunner:
    def execute(self, forward_batch):
        ends = self._resolve_shared_read_ends(forward_batch)
        self._publish_read_done(ends)


class AlwaysPublishingRunner:
    def execute(self, forward_batch):
        self._publish_read_done(None)


class SilentDraftRunner:
    def execute(self, forward_batch):
        return forward_batch


class EagerRunner:
    def execute(self, forward_batch):
        self.maybe_publish_prefill_shared_read_done(forward_batch)
