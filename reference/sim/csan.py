"""Second oracle: PyTorch's CUDA stream sanitizer (``torch.cuda._sanitizer.EventHandler``) fed a trace.

Its core is plain Python (per-stream vector clocks, R1-R3, R7 and R8 as PyTorch implements them) and runs on a CPU-only
torch with synthetic ids; as its own tests do, streams, events and tensors get ids from disjoint ranges (1000+,
2000+, 3000+) so a mixed-up id cannot pass. It does not see CUDA graph replays (kernels in a graph bypass the
dispatcher hooks), so only traces without a ``Replay`` are fed to it. ``wait_stream`` is fed as PyTorch performs
it: record a fresh event on the other stream, then wait on it (R7).
"""

from __future__ import annotations

from fencecheck.trace import HostSync, Read, Record, Replay, Trace, WaitEvent, WaitStream, Write

STREAM_BASE, EVENT_BASE, TENSOR_BASE = 1000, 2000, 3000


def available() -> bool:
    try:
        import torch.cuda._sanitizer  # noqa: F401
    except ImportError:
        return False
    return True


def applicable(trace: Trace) -> bool:
    return not any(isinstance(op, Replay) for op in trace.ops)


def races(trace: Trace) -> list[tuple[str, str, str, int]]:
    """(location, phase, site, step) of every read the sanitizer finds unsynchronized with a later write."""
    from torch.cuda._sanitizer import AccessType, EventHandler

    handler = EventHandler()
    streams = {s: STREAM_BASE + i for i, s in enumerate(trace.streams)}
    events = {e.id: EVENT_BASE + i for i, e in enumerate(trace.events)}
    locations = sorted({op.location for op in trace.ops if isinstance(op, (Read, Write))})
    tensors = {loc: TENSOR_BASE + i for i, loc in enumerate(locations)}
    for sid in streams.values():
        handler._handle_stream_creation(sid)
    for eid in events.values():
        handler._handle_event_creation(eid)
    for ptr in tensors.values():
        handler._handle_memory_allocation(ptr)
    next_event = EVENT_BASE + len(events)
    found = []
    reads: dict[str, Read] = {}  # the sanitizer's operator name of each read kernel -> the read
    for h, op in enumerate(trace.ops):
        if isinstance(op, Record):
            handler._handle_event_record(events[op.event], streams[op.stream])
        elif isinstance(op, WaitEvent):
            handler._handle_event_wait(events[op.event], streams[op.stream])
        elif isinstance(op, HostSync):
            handler._handle_event_synchronization(events[op.event])
        elif isinstance(op, WaitStream):
            handler._handle_event_creation(next_event)
            handler._handle_event_record(next_event, streams[op.other])
            handler._handle_event_wait(next_event, streams[op.stream])
            next_event += 1
        elif isinstance(op, (Read, Write)):
            ptr = tensors[op.location]
            name = f"{op.kind} op {h}"
            if isinstance(op, Read):
                reads[name] = op
            errors = handler._handle_kernel_launch(
                streams[op.stream],
                set() if isinstance(op, Write) else {ptr},
                {ptr} if isinstance(op, Write) else set(),
                set(),
                name,
                {ptr: [op.location]},
            )
            for err in errors:
                prev = err.previous_access
                if err.current_access.type is AccessType.WRITE and prev.type is AccessType.READ:
                    r = reads[prev.operator]
                    found.append((r.location, r.phase, r.site, r.step))
                else:  # any other conflict (read after an unordered write...) is reported for what it is
                    found.append((op.location, f"<{prev.operator} vs {err.current_access.operator}>", "", 0))
        elif isinstance(op, Replay):
            raise ValueError("the sanitizer cannot see graph replays")
    return sorted(set(found))


def compare(trace: Trace, expected: list[tuple[str, str, str, int]]) -> str:
    """'agree', 'DISAGREE: ...', or 'n/a' when the trace replays graphs or torch is not installed."""
    if not applicable(trace) or not available():
        return "n/a"
    got = races(trace)
    if got == sorted(set(expected)):
        return "agree"
    return f"DISAGREE: sanitizer {got} vs simulator {sorted(set(expected))}"
