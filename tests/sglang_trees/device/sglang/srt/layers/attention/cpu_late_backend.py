import torch

from sglang.srt.layers.attention.base_attn_backend import AttentionBackend


class CpuLateBackend(AttentionBackend):
    """Keeps the base IN_REPLAY but passes req_to_token to its decode kernel, an sgl-kernel CPU operator."""

    def __init__(self, model_runner):
        self.req_to_token = model_runner.req_to_token_pool.req_to_token
        self.decode_attention_fwd = torch.ops.sgl_kernel.decode_attention_cpu

    def forward_decode(self, q, k, v, layer, forward_batch):
        return self.decode_attention_fwd(q, self.req_to_token, forward_batch.req_pool_indices)
