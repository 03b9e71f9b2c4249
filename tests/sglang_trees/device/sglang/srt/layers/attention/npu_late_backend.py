import torch_npu

from sglang.srt.layers.attention.base_attn_backend import AttentionBackend


class NpuLateBackend(AttentionBackend):
    """Keeps the base IN_REPLAY but gathers through req_to_token in its decode kernel; an Ascend kernel."""

    def __init__(self, model_runner):
        self.req_to_token = model_runner.req_to_token_pool.req_to_token

    def forward_decode(self, q, k, v, layer, forward_batch):
        pages = self.req_to_token[forward_batch.req_pool_indices]
        return torch_npu.npu_fused_infer_attention_score(q, pages)
