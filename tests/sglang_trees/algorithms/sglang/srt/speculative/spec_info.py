from enum import Enum, auto


class SpeculativeAlgorithm(Enum):
    ALPHA = auto()
    BETA = auto()
    GAMMA = auto()
    DELTA = auto()
    ZETA = auto()
    NONE = auto()

    def is_none(self):
        return self == SpeculativeAlgorithm.NONE

    def is_alpha(self):
        return self == SpeculativeAlgorithm.ALPHA

    def is_beta(self):
        return self == SpeculativeAlgorithm.BETA

    def create_worker(self, server_args):
        if self.is_alpha():
            from sglang.srt.speculative.workers import AlphaWorker

            return AlphaWorker
        if self.is_beta():
            from sglang.srt.speculative.workers import BetaWorker

            return BetaWorker
        if self == SpeculativeAlgorithm.DELTA:
            from sglang.srt.speculative.frozen import DeltaWorker

            return DeltaWorker
        if self == SpeculativeAlgorithm.ZETA:
            from sglang.srt.speculative.components import ZetaWorker

            return ZetaWorker
        return load_plugin_worker(self.name)
