class BaseRunner:
    def __init__(self, model_runner):
        self.model_runner = model_runner
