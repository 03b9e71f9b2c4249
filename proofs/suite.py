"""Every proof obligation, proved by one function, and the documents that show the results.

``prove_all`` is what ``fencecheck prove`` and ``fencecheck audit`` both call; ``document_files`` gives the full text of
each generated document and the caller writes the set. Each obligation runs in a z3 context of its own under its
calibrated rlimit, so a result (and each document byte) is the same whichever obligations run and in which order.
"""

from __future__ import annotations

import fnmatch
import json
import os
import platform
import sys
from typing import Callable, Sequence

from fencecheck.errors import InputError, worker_ignores_interrupts
from fencecheck.model.solver import version

from . import obligations as O
from .obligations import Obligation
from fencecheck.proofs.documents import counterexample_files, markdown
from .runner import Result, detach, evaluate


def all_obligations() -> list[Obligation]:
    """The symbolic obligations, then one per configuration of each catalog (PR era, then release)."""
    return O.OBLIGATIONS + O.catalog_obligations()


def select(only: Sequence[str] | None = None) -> list[Obligation]:
    """The obligations whose name matches one of the ``only`` globs (fnmatch), in their usual order; all if None."""
    obligations = all_obligations()
    if only is None:
        return obligations
    chosen = [o for o in obligations if any(fnmatch.fnmatchcase(o.name, pat) for pat in only)]
    if not chosen:
        raise InputError("<flags>", "--only", f"no obligation matches {' '.join(only)!r}")
    return chosen


def prove_all(only: Sequence[str] | None = None, progress: Callable[[Result], None] | None = None,
              jobs: int = 1) -> list[Result]:
    """Evaluate the obligations ``select(only)`` chooses; the results in their usual order, ``progress`` sees each
    as it is made. With ``jobs`` > 1 they are evaluated in that many worker processes, costliest first (by the
    rlimit they are given), and come back without their z3 objects (``runner.detach``): each obligation runs in a
    z3 context of its own either way, so the verdicts, rlimits and documents are those of a run in one process."""
    obligations = select(only)
    if jobs <= 1 or len(obligations) < 2:
        results = []
        for ob in obligations:
            r = evaluate(ob)
            if progress is not None:
                progress(r)
            results.append(r)
        return results
    import multiprocessing

    # fork where it is safe (Linux): the workers start at once with what this process has loaded
    mp = multiprocessing.get_context("fork" if sys.platform == "linux" else "spawn")
    order = sorted(range(len(obligations)), key=lambda i: -obligations[i].rlimit)  # stable: ties in usual order
    done: list[Result | None] = [None] * len(obligations)
    with mp.Pool(min(jobs, len(obligations)), initializer=worker_ignores_interrupts) as pool:
        for i, r in pool.imap_unordered(_evaluate_at, [(i, obligations[i]) for i in order]):
            done[i] = r
            if progress is not None:
                progress(r)
    return [r for r in done if r is not None]


def _evaluate_at(job: tuple[int, Obligation]) -> tuple[int, Result]:
    i, ob = job
    return i, detach(evaluate(ob))


def document_files(results: list[Result]) -> dict[str, str]:
    """Relative path under the docs directory -> full text: ``proofs.md`` and, per counterexample,
    ``counterexamples/<stem>.toml``, ``.trace.json`` and ``.witness.json``."""
    files = {"proofs.md": markdown(results)}
    for r in results:
        if r.counterexample is not None:
            files.update(counterexample_files(r))
    return files


def timings_text(results: list[Result], wall: float | None = None, jobs: int = 1) -> str:
    """The run's times and the rlimit each obligation consumed, as JSON: machine facts live here, not in documents.
    ``wall``: the run's wall-clock seconds, with ``jobs`` worker processes (each obligation's seconds are its own)."""
    data = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "z3": version(),
        "jobs": jobs,
        **({} if wall is None else {"wall_seconds": round(wall, 3)}),
        "seconds": round(sum(r.seconds for r in results), 3),
        "cpu_seconds": round(sum(r.cpu for r in results), 3),
        "obligations": [
            {
                "name": r.obligation.name,
                "verdict": r.verdict.value,
                "seconds": round(r.seconds, 3),
                "cpu_seconds": round(r.cpu, 3),
                "rlimit": r.obligation.rlimit,
                "rlimit_used": r.rlimit_used,
                "queries": [{"label": q.label, "verdict": q.verdict.value, "checks": q.checks, "rlimit_used": q.rlimit,
                             "seconds": round(q.seconds, 3)} for q in r.queries],
            }
            for r in results
        ],
    }
    return json.dumps(data, indent=1) + "\n"


__all__ = ["all_obligations", "document_files", "prove_all", "select", "timings_text"]
