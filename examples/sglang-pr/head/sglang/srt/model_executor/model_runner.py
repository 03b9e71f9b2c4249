class ModelRunner:
    def __init__(self):
        self.shared_read_done_event = None
