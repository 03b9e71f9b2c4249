from sglang.srt.model_executor.runner.base_runner import BaseRunner
from sglang.srt.model_executor.runner_utils.shared_read_event import maybe_publish_prefill_shared_read_done


class EagerRunner(BaseRunner):
    def execute(self, forward_batch):
        if forward_batch.forward_mode.is_decode():
            return self._execute_decode(forward_batch)
        return self._execute_extend(forward_batch)

    def _execute_decode(self, forward_batch):
        self.model_runner.attn_backend.init_forward_metadata(forward_batch)
        return self.model_runner.model.forward(forward_batch)

    def _execute_extend(self, forward_batch):
        self.model_runner.attn_backend.init_forward_metadata(forward_batch)
        ends = self.model_runner.attn_backend.resolve_prefill_shared_read_ends(forward_batch)
        maybe_publish_prefill_shared_read_done(self.model_runner, ends, self.device_module)
        return self.model_runner.model.forward(forward_batch)
