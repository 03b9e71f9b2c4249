from sglang.srt.layers.attention.base_attn_backend import AttentionBackend, SharedReadEnds


class GrandBackend(AttentionBackend):
    """Declares that every mode's shared reads end before the replay."""

    def shared_read_ends(self, fm):
        return SharedReadEnds.PRE_REPLAY
