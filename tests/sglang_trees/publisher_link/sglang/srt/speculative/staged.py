"""Synthetic workers whose publisher depends on a flag the draft worker sets at the end of its extend after the
verify (as SGLang's multi-layer EAGLE does): STAGED computes its boundary rows from req_to_token only when the extend
is not staged, and then sets the flag false, so its publisher is then the draft runner; UNLINKED sets the flag from
something else, so its read can run under the target publisher."""

from sglang.srt.model_executor.forward_batch_info import ForwardMode


class StagedDraftWorker:
    def __init__(self, draft_runner, req_to_token_pool):
        self.draft_runner = draft_runner
        self.req_to_token_pool = req_to_token_pool
        self.last_staged = False
        self.front = 0

    def alloc(self, steps):
        self.front = steps - 1

    def plan(self, batch):
        return batch.can_stage

    def extend_after_verify(self, batch, out, *, staged: bool = False):
        if staged and self.front:
            locs = None
        else:
            locs = self._boundary(batch)
        out.locs = locs
        self.last_staged = bool(staged and out.can_run_graph)

    def _boundary(self, batch):
        if self.front == 0 or batch.forward_mode.is_idle():
            return None
        return self.req_to_token_pool.req_to_token[batch.req_pool_indices]


class UnlinkedDraftWorker(StagedDraftWorker):
    def extend_after_verify(self, batch, out, *, staged: bool = False):
        if staged and self.front:
            locs = None
        else:
            locs = self._boundary(batch)
        out.locs = locs
        self.unlinked_staged = bool(out.can_run_graph)


class StagedWorker:
    def __init__(self, target_worker, draft_runner):
        self.target_worker = target_worker
        self._draft_worker = StagedDraftWorker(draft_runner, target_worker.req_to_token_pool)

    @property
    def draft_worker(self):
        return self._draft_worker

    @property
    def last_shared_read_runner(self):
        if self.draft_worker.last_staged:
            return self.target_worker.model_runner
        return self._draft_worker.draft_runner

    def forward_batch_generation(self, batch, on_publish=None):
        self.draft_worker.last_staged = False
        staged = self.draft_worker.plan(batch)
        batch.forward_mode = ForwardMode.TARGET_VERIFY
        out = self.target_worker.forward_batch_generation(batch)
        if on_publish is not None:
            on_publish(out)
        self.draft_worker.extend_after_verify(batch, out, staged=staged)
        return out


class UnlinkedWorker(StagedWorker):
    def __init__(self, target_worker, draft_runner):
        self.target_worker = target_worker
        self._draft_worker = UnlinkedDraftWorker(draft_runner, target_worker.req_to_token_pool)

    @property
    def last_shared_read_runner(self):
        if self.draft_worker.unlinked_staged:
            return self.target_worker.model_runner
        return self._draft_worker.draft_runner
