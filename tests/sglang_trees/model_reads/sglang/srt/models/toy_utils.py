from sglang.srt.utils.common import is_npu

_is_npu = is_npu()


def build_slots(forward_batch):
    if _is_npu:
        return forward_batch.req_to_token_pool.req_to_token[forward_batch.seq_lens]
    return forward_batch.req_to_token_pool.req_to_token[forward_batch.positions]


def swa_slots(forward_batch, pool, swa):
    mapping = pool.full_to_swa_index_mapping if swa else None
    other = pool.full_to_swa_index_mapping if swa else forward_batch.out_cache_loc
    if mapping is not None:
        mapping.long()
    return other.long()
