from collections import defaultdict

from sglang.srt.model_executor.runner.decode_cuda_graph_runner import DecodeCudaGraphRunner
from sglang.srt.model_executor.runner.eager_runner import EagerRunner


class CPUGraphRunner:
    pass


def capture_eager(model_runner):
    return EagerRunner(model_runner)


def capture_decode_graph(*, model_runner):
    graph_runners = defaultdict(DecodeCudaGraphRunner, {"cpu": CPUGraphRunner})
    return graph_runners[model_runner.device](model_runner)
