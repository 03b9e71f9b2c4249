class CPUGraphRunner:
    """Runs the model compiled with torch.compile on the CPU: no shared-read-done event."""

    def execute(self, forward_batch):
        return self.model_runner.model.forward(forward_batch)
