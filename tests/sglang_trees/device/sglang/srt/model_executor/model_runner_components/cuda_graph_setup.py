from collections import defaultdict

from sglang.srt.hardware_backend.npu.graph_runner.npu_graph_runner import NPUGraphRunner
from sglang.srt.model_executor.cpu_graph_runner import CPUGraphRunner


def capture_decode_graph(*, model_runner):
    graph_runners = defaultdict(
        model_runner._decode_cuda_graph_runner_cls,
        {
            "cpu": CPUGraphRunner,
            "npu": NPUGraphRunner,
        },
    )
    return graph_runners[model_runner.device](model_runner)
