from sglang.srt.layers.attention.passed_backend import (
    LateChildBackend,
    OpenBackend,
    PassedCompositeBackend,
    SwitchBackend,
)
from sglang.srt.layers.attention.triton_like_backend import HonestBackend


def build_composite(model_runner):
    sparse = LateChildBackend(model_runner)
    return PassedCompositeBackend(sparse, dense=make_dense(model_runner))


def make_dense(model_runner):
    return HonestBackend(model_runner)


def build_switch(model_runner):
    if model_runner.server_args.late_decode:
        inner = LateChildBackend(model_runner)
    else:
        inner = HonestBackend(model_runner)
    return SwitchBackend(model_runner, inner)


def build_open(model_runner, backend):
    return OpenBackend(backend)
