"""A CPU stand-in for the slice of torch.cuda the GPU device uses, to test its plumbing without a GPU.

Every operation runs at once in host order (so no read is ever stale), except inside a capture, where tensor
operations are recorded into the graph and run at each replay. Spins do nothing. It checks that the device issues
the right operations in the right places, not CUDA's timing.
"""

from __future__ import annotations

import contextlib
import types

_capture: list | None = None


def _do(fn):
    if _capture is not None:
        _capture.append(fn)
    else:
        fn()


class Tensor:
    def __init__(self, data, base=None, start=0):
        self.data = data
        self.start = start
        self.n = len(data) if base is None else base

    def __getitem__(self, sl):
        start = self.start + (sl.start or 0)
        stop = self.start + (sl.stop if sl.stop is not None else self.n)
        return Tensor(self.data, base=stop - start, start=start)

    def copy_(self, other):
        def run():
            for i in range(self.n):
                self.data[self.start + i] = other.data[other.start + i]
        _do(run)
        return self

    def fill_(self, v):
        def run():
            for i in range(self.n):
                self.data[self.start + i] = v
        _do(run)
        return self

    def zero_(self):
        return self.fill_(0)

    def tolist(self):
        return list(self.data[self.start:self.start + self.n])


class Stream:
    def wait_event(self, event):
        pass

    def wait_stream(self, other):
        pass


class Event:
    def __init__(self, external=False, enable_timing=False):
        self.external = external

    def record(self, stream=None):
        pass


class CUDAGraph:
    def __init__(self):
        self.ops = []

    def replay(self):
        for op in self.ops:
            op()


@contextlib.contextmanager
def graph(g, stream=None):
    global _capture
    _capture = g.ops
    try:
        yield
    finally:
        _capture = None


cuda = types.SimpleNamespace(
    is_available=lambda: True,
    Stream=Stream,
    Event=Event,
    CUDAGraph=CUDAGraph,
    graph=graph,
    stream=lambda s: contextlib.nullcontext(),
    _sleep=lambda cycles: None,
    synchronize=lambda: None,
)
int64 = "int64"


def zeros(n, dtype=None, device=None):
    return Tensor([0] * n)
