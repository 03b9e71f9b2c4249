"""One piece of work in a forked process while the caller goes on (``beside``), where a second core exists; computed again
in the caller's own process where the forked one raised or died."""

from __future__ import annotations

from contextlib import contextmanager

from fencecheck.errors import signals_held


@contextmanager
def beside(fn, *args, then=None):
    """Yields ``result()``, ``fn(*args)`` computed in a forked process started now (it leaves Ctrl-C to this one,
    which ends it at once, also on a failure here), while the caller goes on; or None when this machine has no second
    core or cannot fork, for the caller to compute it itself. ``result()`` waits for it (once); where the process
    failed (``fn`` raised, its answer could not come back, or it died: killed for memory, say), ``fn(*args)`` is
    computed here instead, so the answer, or the error, is the one this process gives.

    With ``then``, a second stage on what the caller learns meanwhile: ``result.send(x)`` (once, before
    ``result()``) hands ``x`` to the process, which, once ``a = fn(*args)`` is done, computes ``then(a, x)``;
    ``result()`` is then ``(a, then(a, x))``, computed here in the same way where the process failed."""
    import multiprocessing
    import os

    if (os.cpu_count() or 1) < 2 or "fork" not in multiprocessing.get_all_start_methods():
        yield None
        return
    ctx = multiprocessing.get_context("fork")
    inbox, outbox = ctx.Pipe(duplex=False)
    later_in, later_out = ctx.Pipe(duplex=False) if then is not None else (None, None)
    proc = ctx.Process(target=_beside_child, args=(outbox, fn, args, then, later_in, (inbox, later_out),
                                                   os.getpid()), daemon=True)
    proc.start()
    outbox.close()  # the child holds the only sending end: its death is an end of file here
    if later_in is not None:
        later_in.close()
    try:
        got: list = []
        sent: list = []

        def here():
            value = fn(*args)
            return value if then is None else (value, then(value, sent[0]))

        def result():
            if not got:
                try:
                    ok, value = inbox.recv()
                except Exception:  # noqa: BLE001 - died (end of file), or an answer that cannot be read back
                    ok, value = False, None
                got.append(value if ok else here())
            return got[0]

        def send(x) -> None:
            sent.append(x)
            try:
                later_out.send(x)
            except (OSError, ValueError):  # the process is gone: result() computes it here
                pass

        result.send = send
        yield result
    finally:
        with signals_held():  # a second Ctrl-C or SIGTERM here must not leave the process running or unwaited
            inbox.close()
            if later_out is not None:
                later_out.close()
            if proc.is_alive():
                proc.terminate()
            proc.join()


def _beside_child(outbox, fn, args, then=None, later=None, parents=(), parent: int | None = None) -> None:
    """``beside``'s forked process: ``(True, fn(*args))`` sent back (with ``then``: ``(True, (a, then(a, x)))``,
    ``x`` received once ``a`` is computed), or ``(False, None)`` when it raised or its answer cannot be pickled.

    It never outlives the caller: it closes its copies of the caller's ends of the pipes (``parents``: held here, they
    would keep a send blocked, or a receive waiting, forever once the caller is gone, where the caller's end of file
    now ends them) and, on Linux, asks to be sent SIGKILL when the caller dies (``PR_SET_PDEATHSIG``), so that a
    caller killed outright leaves no process computing on for nobody (``parent``: the caller's id, taken before the
    fork, so a caller that died even before this process ran is noticed)."""
    import os
    import pickle

    from fencecheck.errors import worker_ignores_interrupts

    worker_ignores_interrupts()
    for end in parents:
        if end is not None:
            end.close()
    _die_with_parent()
    if parent is not None and os.getppid() != parent:  # the caller died before the request was made
        os._exit(0)
    try:
        value = fn(*args)
        if then is not None:
            value = (value, then(value, later.recv()))
        data = pickle.dumps((True, value))
    except BaseException:  # noqa: BLE001 - computed again by the parent, which reports what goes wrong
        data = pickle.dumps((False, None))
    try:
        outbox.send_bytes(data)
    except (OSError, ValueError):
        pass
    finally:
        outbox.close()


def _die_with_parent() -> None:
    """Linux's ``prctl(PR_SET_PDEATHSIG, SIGKILL)`` for this process, where the C library offers it."""
    import ctypes
    import ctypes.util
    import signal
    import sys

    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # no C library to ask: the closed pipe ends still end it at its next send
        pass
