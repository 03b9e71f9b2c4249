class BaseTpWorker:
    @property
    def last_shared_read_runner(self):
        return self.model_runner
