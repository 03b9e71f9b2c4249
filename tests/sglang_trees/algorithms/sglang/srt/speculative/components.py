"""A synthetic worker built of components (ZETA): the verify executor is handed the KV injector through its
constructor (``injector=self._injector``), and the commit after the verify reads req_to_token through it."""

from sglang.srt.model_executor.forward_batch_info import ForwardMode


class KvInjector:
    def __init__(self, req_to_token_pool):
        self.req_to_token_pool = req_to_token_pool

    def inject(self, batch):
        return self.req_to_token_pool.req_to_token[batch.req_pool_indices]


class VerifyExecutor:
    def __init__(self, target_worker, injector):
        self.target_worker = target_worker
        self.injector = injector

    def verify(self, batch):
        batch.forward_mode = ForwardMode.TARGET_VERIFY
        return self.target_worker.forward_batch_generation(batch)

    def commit(self, batch):
        self.injector.inject(batch)


class ZetaWorker:
    def __init__(self, target_worker):
        self.target_worker = target_worker
        self._injector = KvInjector(target_worker.req_to_token_pool)
        self._executor = VerifyExecutor(target_worker, injector=self._injector)

    @property
    def last_shared_read_runner(self):
        return self.target_worker.model_runner

    def forward_batch_generation(self, batch, on_publish=None):
        out = self._executor.verify(batch)
        if on_publish is not None:
            on_publish(out)
        self._executor.commit(batch)
        return out
