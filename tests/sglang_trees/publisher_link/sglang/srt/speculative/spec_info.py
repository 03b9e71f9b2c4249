from enum import Enum, auto


class SpeculativeAlgorithm(Enum):
    STAGED = auto()
    UNLINKED = auto()
    NONE = auto()

    def is_none(self):
        return self == SpeculativeAlgorithm.NONE

    def create_worker(self, server_args):
        if self == SpeculativeAlgorithm.STAGED:
            from sglang.srt.speculative.staged import StagedWorker

            return StagedWorker
        if self == SpeculativeAlgorithm.UNLINKED:
            from sglang.srt.speculative.staged import UnlinkedWorker

            return UnlinkedWorker
        return None
