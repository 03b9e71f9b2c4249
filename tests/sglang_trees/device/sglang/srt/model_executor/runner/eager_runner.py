def maybe_publish_prefill_shared_read_done(model_runner, shared_read_ends, device_module):
    pass


class EagerRunner:
    """Runs the forward eagerly; publishes only a prefill's PRE_REPLAY."""

    def execute(self, forward_batch):
        ends = self.model_runner.attn_backend.resolve_prefill_shared_read_ends(forward_batch)
        maybe_publish_prefill_shared_read_done(self.model_runner, ends, None)
        return self.model_runner.model.forward(forward_batch)
