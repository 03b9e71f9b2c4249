"""Synthetic speculative workers: ALPHA drafts, verifies, publishes, draft-extends on a runner that publishes before
every replay (unless a setting skips it), commits (one device read of req_to_token after that publish, one copied to
the host at once) and drafts again on a runner that never publishes; BETA drafts in a loop and hands the rest to a
helper worker of a class not known statically."""

from sglang.srt.model_executor.forward_batch_info import ForwardMode
from sglang.srt.speculative.runners import AlwaysPublishingRunner, SilentDraftRunner


class DraftWorker:
    def __init__(self, draft_runner):
        self.draft_runner = draft_runner
        self.cuda_graph_runner = SilentDraftRunner()
        self.draft_extend_runner = AlwaysPublishingRunner()

    def draft(self, batch):
        return self.cuda_graph_runner.execute(batch)

    def draft_extend(self, batch, out):
        batch.forward_mode = ForwardMode.DRAFT_EXTEND_V2
        self.draft_extend_runner.execute(batch)


class AlphaWorker:
    def __init__(self, target_worker, draft_runner, skip_draft_extend):
        self.target_worker = target_worker
        self.draft_worker = DraftWorker(draft_runner)
        self.skip_draft_extend = skip_draft_extend
        self.req_to_token_pool = target_worker.req_to_token_pool

    @property
    def last_shared_read_runner(self):
        return self.draft_worker.draft_runner

    def forward_batch_generation(self, batch, on_publish=None):
        if batch.forward_mode.is_extend():
            return self.target_worker.forward_batch_generation(batch)
        batch.spec_info = self.draft_worker.draft(batch)
        batch.forward_mode = ForwardMode.TARGET_VERIFY
        out = self.target_worker.forward_batch_generation(batch)
        if on_publish is not None:
            on_publish(out)
        if not self.skip_draft_extend:
            self.draft_worker.draft_extend(batch, out)
        self.commit(batch, out)
        batch.forward_mode = ForwardMode.DECODE
        out.next_draft = self.draft_worker.draft(batch)
        return out

    def commit(self, batch, out):
        first = self.req_to_token_pool.req_to_token[batch.req_pool_indices, 0].tolist()
        out.kv_slots = self.req_to_token_pool.req_to_token[batch.req_pool_indices]
        return first


class BetaWorker:
    def __init__(self, target_worker, draft_runner, num_steps):
        self.target_worker = target_worker
        self.draft_worker = DraftWorker(draft_runner)
        self.helper_worker = make_helper(target_worker)
        self.num_steps = num_steps

    @property
    def last_shared_read_runner(self):
        return self.target_worker.model_runner

    def forward_batch_generation(self, batch, on_publish=None):
        for _ in range(self.num_steps):
            self.draft_worker.draft(batch)
        return self.helper_worker.verify(batch)


def make_helper(target_worker):
    return target_worker
