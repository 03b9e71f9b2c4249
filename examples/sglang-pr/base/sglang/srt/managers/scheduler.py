from sglang.srt.environ import envs
from sglang.srt.utils import is_cuda


class Scheduler:
    def run_event_loop(self):
        self._war_barrier_enabled = is_cuda() or envs.SGLANG_ENABLE_WAR_BARRIER.get()
        self.event_loop_overlap()

    def _apply_war_barrier(self):
        if not self._war_barrier_enabled:
            return
        runner = self.model_worker.last_shared_read_runner
        ev = runner.shared_read_done_event
        runner.shared_read_done_event = None
        if ev is not None and not envs.SGLANG_FORCE_COARSE_WAR_BARRIER.get():
            self.schedule_stream.wait_event(ev)
        else:
            self.schedule_stream.wait_stream(self.forward_stream)

    def event_loop_overlap(self):
        while True:
            batch = self.get_next_batch_to_run()
            self.run_batch(batch)
            self._apply_war_barrier()

    def event_loop_normal(self):
        while True:
            batch = self.get_next_batch_to_run()
            self.run_batch(batch)

    def get_next_batch_to_run(self):
        self.req_to_token_pool.write((0, 0), 1)
