from sglang.srt.layers.attention.family import grand


class ParentBackend(grand.GrandBackend):
    """Adds nothing to the declaration."""
