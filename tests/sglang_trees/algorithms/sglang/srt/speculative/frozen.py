"""A synthetic frozen draft (DELTA): its graph runner never publishes and its model runner is set up without decode
graphs (so it runs the draft eagerly), and the draft runner is the publisher: nothing publishes into the mailbox the
barrier waits on, so the barrier is coarse and the read after the draft is covered."""

from sglang.srt.model_executor.forward_batch_info import ForwardMode
from sglang.srt.speculative.runners import SilentDraftRunner


class FrozenDraftWorker:
    def __init__(self, model_runner):
        self.model_runner = model_runner
        self.cuda_graph_runner = SilentDraftRunner()

    def init_cuda_graphs(self):
        self.tp_worker.init_cuda_graphs(capture_decode_cuda_graph=False)

    def draft(self, batch, can_run_graph):
        if can_run_graph:
            return self.cuda_graph_runner.execute(batch)
        return self.model_runner.forward(batch)


class DeltaWorker:
    def __init__(self, target_worker, model_runner):
        self.target_worker = target_worker
        self.draft_worker = FrozenDraftWorker(model_runner)
        self.req_to_token_pool = target_worker.req_to_token_pool

    @property
    def last_shared_read_runner(self):
        return self.draft_worker.model_runner

    def forward_batch_generation(self, batch, on_publish=None):
        batch.forward_mode = ForwardMode.TARGET_VERIFY
        out = self.target_worker.forward_batch_generation(batch)
        if on_publish is not None:
            on_publish(out)
        batch.forward_mode = ForwardMode.DECODE
        self.draft_worker.draft(batch, out.can_run_graph)
        out.locs = self.req_to_token_pool.req_to_token[batch.req_pool_indices]
        return out
