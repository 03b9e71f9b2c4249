"""A CPU stand-in for the slice of torch.cuda that fencecheck.gpu uses, enforcing the CUDA semantics it relies on.

A device that issues work wrongly fails here as it would on a GPU.

``new(order=..., seed=...)`` gives a fresh stand-in (a namespace with ``cuda``, ``zeros``, ``int64``,
``__version__``); each has its own streams, queues and memory.

What it enforces (the rules are R1-R8 of docs/gpu.md):

- Work runs on the stream it is issued on: a tensor op or a spin goes to the current stream (``cuda.stream(s)``),
  in that stream's order. Nothing runs at issue time; queued work runs at ``cuda.synchronize()``,
  ``Stream.synchronize()`` or ``Tensor.tolist()`` (which waits for the current stream, as PyTorch's copy to the
  host does), in an order that respects only what CUDA orders: stream order, event waits and graph launches.
- R1: ``Event.record`` snapshots the work queued on the stream so far; a re-record overwrites the snapshot.
- R2: a wait binds to the snapshot the event holds when the wait is issued; an event never recorded makes the wait
  a no-op (PyTorch does not call CUDA for it). R3: later work on the waiting stream waits for that snapshot.
- R4: recorded while its stream is capturing, an ``Event(external=True)`` becomes an event-record node of the
  graph; a default-flag event becomes an internal edge and records nothing real, and CUDA then refuses a wait on
  it (``cudaErrorCapturedEvent``: "operation not permitted on an event last recorded in a capturing stream").
- R5: an event-record node records its event on every launch, once the nodes before it have run; a wait issued
  after the launch binds to that launch's node.
- R6: a launch runs after the work queued before it on its stream and after the previous launch of the graph.
- R7: ``wait_stream(other)`` records a fresh event on ``other`` and waits on it.
- R8: ``Event.synchronize()`` returns once the snapshot has run (the host waits; it runs queued work until then).
- ``torch.cuda.Stream()`` streams are non-blocking: nothing orders them after the legacy default stream, where
  ``zeros`` queues its fill. Until that fill runs the memory holds ``GARBAGE``.
- ``torch.cuda.graph`` synchronizes the device before the capture begins (as PyTorch's does); synchronizing, or
  reading a tensor back, while a capture is open is refused (capture error mode "global").

Order of execution, among the streams whose next item may run:
- ``"latest"`` (default): the item issued last runs first, so two unordered kernels run opposite to host order
  whenever CUDA allows it; a stream whose next item is a spin (``cuda._sleep``) waits until no other stream can run
  (an unbounded spin), spins ending in the order they were issued.
- ``"host"``: issue order (the device never lags the host; nothing unordered is reordered).
- ``"random"``: a seeded choice among the ready items.
"""

from __future__ import annotations

import contextlib
import itertools
import random
import types
from collections import deque
from dataclasses import dataclass

#: What memory holds before its first write: above every stamp, so a read of it shows as stale.
GARBAGE = 1 << 62

CAPTURED_EVENT = "CUDA error: operation not permitted on an event last recorded in a capturing stream"
CAPTURE_SYNC = "CUDA error: operation not permitted when stream is capturing"


@dataclass
class _Snapshot:
    """The point an event record marks in its stream: done once the record item has run."""

    done: bool = False


@dataclass
class _Item:
    kind: str  # "kernel" | "spin" | "record" | "wait"
    seq: int  # issue order
    payload: object = None  # kernel: a function; record, wait: a _Snapshot


@dataclass
class _Capture:
    stream: "Stream"
    graph: "CUDAGraph"


class _Runtime:
    def __init__(self, order: str, seed: int):
        if order not in ("latest", "host", "random"):
            raise ValueError(f"order must be latest, host or random, not {order!r}")
        self.order = order
        self.rng = random.Random(seed)
        self.seq = itertools.count()
        self.stream_ids = itertools.count()
        self.busy: set[Stream] = set()  # the streams with queued work (streams are many, busy ones few)
        self.default = Stream(rt=self, blocking=True)
        self.current = [self.default]
        self.capture: _Capture | None = None

    def stream(self) -> "Stream":
        return self.current[-1]

    def capturing(self, stream: "Stream") -> bool:
        return self.capture is not None and self.capture.stream is stream

    def issue(self, kind: str, payload=None, stream: "Stream | None" = None) -> None:
        s = stream or self.stream()
        if self.capturing(s):
            self.capture.graph.nodes.append((kind, payload))
        else:
            s.queue.append(_Item(kind, next(self.seq), payload))
            self.busy.add(s)

    # -- execution --------------------------------------------------------------------------------------------

    def _ready(self) -> list[tuple["Stream", _Item]]:
        out = []
        for s in sorted(self.busy, key=lambda s: s.index):  # in creation order: a seeded choice stays the same
            it = s.queue[0]
            if it.kind != "wait" or it.payload.done:
                out.append((s, it))
        return out

    def step(self) -> bool:
        """Run one item; False when every queue is empty."""
        ready = self._ready()
        if not ready:
            if self.busy:
                raise RuntimeError("stand-in: every queued item waits on something that never runs")
            return False
        if self.order == "host":
            s, it = min(ready, key=lambda r: r[1].seq)
        else:
            busy = [r for r in ready if r[1].kind != "spin"]
            if not busy:
                s, it = min(ready, key=lambda r: r[1].seq)
            elif self.order == "latest":
                s, it = max(busy, key=lambda r: r[1].seq)
            else:
                s, it = self.rng.choice(busy)
        s.queue.popleft()
        if not s.queue:
            self.busy.discard(s)
        if it.kind == "kernel":
            it.payload()
        elif it.kind == "record":
            it.payload.done = True
        return True

    def run(self, until=lambda: False) -> None:
        while not until() and self.step():
            pass

    def synchronize(self) -> None:
        if self.capture is not None:
            raise RuntimeError(CAPTURE_SYNC)
        self.run()


class Stream:
    """A stream: a queue of items run in order. User streams are non-blocking (as PyTorch creates them)."""

    def __init__(self, priority: int = 0, *, rt: _Runtime | None = None, blocking: bool = False):
        self.rt = rt
        self.blocking = blocking
        self.queue: deque[_Item] = deque()
        self.index = next(rt.stream_ids)

    def wait_event(self, event: "Event") -> None:
        rt = self.rt
        if rt.capturing(self):
            raise RuntimeError("stand-in: waits during capture are not modelled")
        if not event.created:
            return  # R2: never recorded; PyTorch does not call CUDA
        if event.captured:
            raise RuntimeError(CAPTURED_EVENT)  # R4
        if event.snap is None:
            return  # only recorded by a record node of a graph never launched: no real record, nothing to wait for
        rt.issue("wait", event.snap, self)  # R2: binds now; R3: later work on this stream waits

    def wait_stream(self, other: "Stream") -> None:
        e = self.rt.Event()  # R7: a fresh event recorded on `other` now, then waited on
        e.record(other)
        self.wait_event(e)

    def synchronize(self) -> None:
        if self.rt.capture is not None:
            raise RuntimeError(CAPTURE_SYNC)
        self.rt.run(lambda: not self.queue)


class Event:
    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False,
                 external: bool = False, *, rt: _Runtime | None = None):
        self.rt = rt
        self.external = external
        self.created = False  # PyTorch creates the CUDA event at its first record
        self.captured = False  # last recorded, with default flags, on a capturing stream (R4)
        self.snap: _Snapshot | None = None  # what a wait issued now binds to (None: never really recorded)

    def record(self, stream: Stream | None = None) -> None:
        rt = self.rt
        s = stream or rt.stream()
        self.created = True
        if rt.capturing(s):
            if self.external:
                rt.capture.graph.nodes.append(("event", self))  # R4: an event-record node
            else:
                self.captured = True  # R4: an internal edge; no real event is recorded
            return
        self.captured = False
        self.snap = _Snapshot()  # R1: snapshots what is queued on `s` now
        rt.issue("record", self.snap, s)

    def wait(self, stream: Stream | None = None) -> None:
        (stream or self.rt.stream()).wait_event(self)

    def query(self) -> bool:
        if self.captured:
            raise RuntimeError(CAPTURED_EVENT)
        return self.snap is None or self.snap.done

    def synchronize(self) -> None:
        if self.captured:
            raise RuntimeError(CAPTURED_EVENT)
        self.rt.run(lambda: self.snap is None or self.snap.done)

    def elapsed_time(self, other: "Event") -> float:
        return 0.0


class CUDAGraph:
    def __init__(self, *, rt: _Runtime | None = None):
        self.rt = rt
        self.nodes: list[tuple[str, object]] = []
        self.last: _Snapshot | None = None  # end of the previous launch (R6)

    def replay(self) -> None:
        rt = self.rt
        s = rt.stream()
        if rt.capture is not None:
            raise RuntimeError("stand-in: launching a graph during capture is not modelled")
        if self.last is not None:
            rt.issue("wait", self.last, s)  # R6: after the previous launch of this graph
        for kind, payload in self.nodes:
            if kind == "event":
                payload.snap = _Snapshot()  # R5: records on every launch; later waits bind to this launch's node
                rt.issue("record", payload.snap, s)
            else:
                rt.issue(kind, payload, s)
        self.last = _Snapshot()
        rt.issue("record", self.last, s)


class Tensor:
    """A view of ``n`` int64 cells of a shared list."""

    def __init__(self, rt: _Runtime, data: list, start: int = 0, n: int | None = None):
        self.rt = rt
        self.data = data
        self.start = start
        self.n = len(data) if n is None else n

    def __getitem__(self, sl: slice) -> "Tensor":
        start = self.start + (sl.start or 0)
        stop = self.start + (sl.stop if sl.stop is not None else self.n)
        return Tensor(self.rt, self.data, start, stop - start)

    def copy_(self, other: "Tensor") -> "Tensor":
        def run():
            self.data[self.start:self.start + self.n] = other.data[other.start:other.start + self.n]

        self.rt.issue("kernel", run)
        return self

    def fill_(self, v: int) -> "Tensor":
        def run():
            self.data[self.start:self.start + self.n] = [v] * self.n

        self.rt.issue("kernel", run)
        return self

    def zero_(self) -> "Tensor":
        return self.fill_(0)

    def add_(self, v: int) -> "Tensor":
        def run():
            self.data[self.start:self.start + self.n] = [x + v for x in self.data[self.start:self.start + self.n]]

        self.rt.issue("kernel", run)
        return self

    def tolist(self) -> list:
        if self.rt.capture is not None:
            raise RuntimeError(CAPTURE_SYNC)
        self.rt.stream().synchronize()
        return list(self.data[self.start:self.start + self.n])


def new(order: str = "latest", seed: int = 0) -> types.SimpleNamespace:
    """A fresh stand-in for ``torch`` (the slice fencecheck.gpu uses)."""
    rt = _Runtime(order, seed)

    @contextlib.contextmanager
    def stream(s: Stream):
        rt.current.append(s)
        try:
            yield
        finally:
            rt.current.pop()

    @contextlib.contextmanager
    def graph(g: CUDAGraph, pool=None, stream: Stream | None = None, capture_error_mode: str = "global"):
        if rt.capture is not None:
            raise RuntimeError("stand-in: nested capture")
        rt.synchronize()  # PyTorch's torch.cuda.graph synchronizes the device before the capture begins
        s = stream or Stream(rt=rt)
        rt.current.append(s)
        rt.capture = _Capture(s, g)
        try:
            yield
        finally:
            rt.capture = None
            rt.current.pop()

    def zeros(n: int, dtype=None, device=None) -> Tensor:
        t = Tensor(rt, [GARBAGE] * n)
        t.zero_()  # the fill is a kernel on the current stream
        return t

    def sleep(cycles: int) -> None:
        rt.issue("spin")

    def event(enable_timing: bool = False, blocking: bool = False, interprocess: bool = False,
              external: bool = False) -> Event:
        return Event(enable_timing, blocking, interprocess, external, rt=rt)

    rt.Event = event
    cuda = types.SimpleNamespace(
        is_available=lambda: True,
        get_device_name=lambda *a: "CPU stand-in",
        Stream=lambda priority=0: Stream(priority, rt=rt),
        Event=event,
        CUDAGraph=lambda: CUDAGraph(rt=rt),
        graph=graph,
        stream=stream,
        current_stream=rt.stream,
        _sleep=sleep,
        synchronize=rt.synchronize,
    )
    return types.SimpleNamespace(cuda=cuda, zeros=zeros, int64="int64", __version__="stand-in", runtime=rt)
