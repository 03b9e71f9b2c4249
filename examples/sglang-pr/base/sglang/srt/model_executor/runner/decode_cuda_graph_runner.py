from sglang.srt.layers.attention.base_attn_backend import SharedReadEnds
from sglang.srt.model_executor.runner.base_runner import BaseRunner
from sglang.srt.model_executor.runner_utils.shared_read_event import make_external_event


class DecodeCudaGraphRunner(BaseRunner):
    def __init__(self, model_runner):
        super().__init__(model_runner)
        self.in_graph_metadata_prep_done = None

    def _record_in_graph_metadata_prep_done(self):
        if not self.device_module.is_current_stream_capturing():
            return
        if self.in_graph_metadata_prep_done is None:
            self.in_graph_metadata_prep_done = make_external_event(self.device_module)
        if self.in_graph_metadata_prep_done is not None:
            self.in_graph_metadata_prep_done.record()

    def _resolve_shared_read_ends(self, attn_backend, forward_mode):
        declared = attn_backend.shared_read_ends(forward_mode)
        if declared is SharedReadEnds.IN_REPLAY and self.in_graph_metadata_prep_done is None:
            return SharedReadEnds.POST_REPLAY
        return declared

    def _publish_read_done(self, in_graph):
        if in_graph:
            self.model_runner.shared_read_done_event = self.in_graph_metadata_prep_done
        else:
            read_done = self.device_module.Event()
            read_done.record()
            self.model_runner.shared_read_done_event = read_done

    def execute(self, forward_batch):
        shared_read_ends = self._resolve_shared_read_ends(self.attn_backend, forward_batch.forward_mode)
        self.load_batch(forward_batch)
        if shared_read_ends is SharedReadEnds.PRE_REPLAY:
            self._publish_read_done(in_graph=False)
        output = self.backend.replay(self.key, forward_batch)
        if shared_read_ends is SharedReadEnds.IN_REPLAY:
            self._publish_read_done(in_graph=True)
        if shared_read_ends is SharedReadEnds.POST_REPLAY:
            self._publish_read_done(in_graph=False)
        return output
