from sglang.srt.utils.common import is_npu

_is_npu = is_npu()


def build_slots(forward_batch):
    if _is_npu:
        return forward_batch.req_to_token_pool.req_to_token[forward_batch.seq_lens]
    return forward_batch.req_to_token_pool.req_to_token[forward_batch.positions]
