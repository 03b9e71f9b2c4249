class NPUGraphRunner:
    """Replays an NPU graph: no shared-read-done event."""

    def execute(self, forward_batch):
        self.backend.init_forward_metadata_out_graph(forward_batch)
        return self.backend.replay(forward_batch)
