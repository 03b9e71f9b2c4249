from sglang.srt.layers.attention.base_attn_backend import AttentionBackend, SharedReadEnds


class LoopDeclBackend(AttentionBackend):
    """A declaration computed in a loop: not evaluated statically."""

    def shared_read_ends(self, fm):
        end = SharedReadEnds.PRE_REPLAY
        for child in self.children:
            end = SharedReadEnds.max_of([end, child.shared_read_ends(fm)])
        return end
