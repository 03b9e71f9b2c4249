from abc import ABC
from enum import Enum

from sglang.srt.model_executor.forward_batch_info import ForwardMode


class SharedReadEnds(Enum):
    PRE_REPLAY = 1
    IN_REPLAY = 2
    POST_REPLAY = 3
    UNKNOWN = 4

    @staticmethod
    def max_of(items):
        return max(items, key=lambda x: x.value)


class AttentionBackend(ABC):
    def init_forward_metadata(self, forward_batch):
        self.init_forward_metadata_out_graph(forward_batch)
        self.init_forward_metadata_in_graph(forward_batch)

    def init_forward_metadata_out_graph(self, forward_batch, in_capture=False):
        pass

    def init_forward_metadata_in_graph(self, forward_batch):
        pass

    def shared_read_ends(self, fm: ForwardMode) -> SharedReadEnds:
        if fm.is_decode() or fm.is_target_verify():
            return SharedReadEnds.IN_REPLAY
        return SharedReadEnds.UNKNOWN

    def forward(self, q, k, v, layer, forward_batch, save_kv_cache=True):
        if forward_batch.forward_mode.is_idle():
            return q
        elif forward_batch.forward_mode.is_decode():
            return self.forward_decode(q, k, v, layer, forward_batch)
        else:
            return self.forward_extend(q, k, v, layer, forward_batch)

    def forward_decode(self, q, k, v, layer, forward_batch):
        raise NotImplementedError()

    def forward_extend(self, q, k, v, layer, forward_batch):
        raise NotImplementedError()
