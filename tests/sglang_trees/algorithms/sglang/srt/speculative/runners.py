"""Synthetic draft graph runners: one that publishes a fresh event before every replay without asking its backend, and
one that never publishes (the decode graph runner and the eager runner are the common tree's)."""


class AlwaysPublishingRunner:
    def execute(self, forward_batch):
        read_done = self.device_module.Event()
        read_done.record()
        self.model_runner.shared_read_done_event = read_done
        return self.backend.replay(self.key, forward_batch)


class SilentDraftRunner:
    def execute(self, forward_batch):
        return self.backend.replay(self.key, forward_batch)
