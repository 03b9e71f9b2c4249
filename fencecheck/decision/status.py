"""A decided finding's status, from what was decided about it: ``confirmed`` (it races in the default configuration
of a supported platform: CUDA, the overlap scheduler, no speculative algorithm, no setting, the capture as the
reader reads it), ``reachable`` (it races, in a configuration that needs the named flags, environment variables,
platform or loop), ``unresolved`` (a named fact could not be settled: its path's conditions, no configuration of
the tree where it races, no scenario). ``status_why`` names that configuration's needs or that fact.

The reader's extraction says less (``confirmed``: no condition on the path; ``plausible``: some); the commands
settle the status once the findings are decided (``settle``). A read outside the declaration not decided yet (a
pull request's unchanged finding) keeps what its extraction says when its path has no condition."""

from __future__ import annotations

from dataclasses import replace


def _unsettled(conditions, others: int = 0) -> str:
    from fencecheck.sglang_source.feasible import simplified

    more = f" (or those of {others} other read path{'s' if others > 1 else ''})" if others else ""
    return f"not settled: {simplified(conditions)}{more}"


def _platform(reach) -> str:
    """The platform of a generated configuration by what it needs (CUDA unless it names another)."""
    for n in reach.needs if reach is not None else ():
        if n.startswith("platform "):
            return n.split()[1].split("/")[0]
    return "cuda"


def _read_conditions(f, platform: str) -> tuple[tuple[str, ...] | None, int, tuple]:
    """The declaration row's conditions and those of the uncovered read whose path needs fewest (one read with no
    condition of its own races whenever the row holds), each less what ``platform`` settles (``f.settled``), and how
    many other read paths need conditions too; None when no path can run on ``platform``, or when the only paths
    that can are ruled out in a whole graph: then the capture facts of those (``f.whole_graph``), else ()."""
    row, reads = tuple(f.conditions), [tuple(r.conditions) for _, r in f.uncovered]
    for p, prow, preads in f.settled:
        if p == platform:
            row, reads = prow, list(preads)
            if row is None:
                return None, 0, ()
    fixed = f.whole_graph or (None,) * len(reads)
    if reads and all(x is None or fact is not None for x, fact in zip(reads, fixed)):
        return None, 0, tuple(fact for x, fact in zip(reads, fixed) if x is not None and fact is not None)
    reads = [x for x, fact in zip(reads, fixed) if x is not None and fact is None]
    paths = sorted(set(reads), key=lambda c: (len(c), c)) or [()]
    best = paths[0]
    return row + tuple(c for c in best if c not in row), (len(paths) - 1 if best else 0), ()


def _breakable_only(facts) -> str:
    """The status_why of a finding whose every read path the capture of a whole graph rules out."""
    from fencecheck.sglang_source.capture_state import BREAK_MARKER

    why = "; ".join(dict.fromkeys(x.why for x in facts))
    eager = " and ".join(dict.fromkeys(x.eager for x in facts))
    return (f"not in a captured graph: {why}; only a replay that runs the forward eagerly {eager} "
            f"(the breakable backend's debug replay, one {BREAK_MARKER} break around the whole "
            "forward, where the tree's no-marker fallback decides when its marker is made only under a capture): "
            "not settled there")


def _reached(reach) -> tuple[str, str]:
    if not reach.needs:
        return "confirmed", f"races in the default configuration ({reach.configuration})"
    return "reachable", f"races in {reach.configuration}, which needs " + "; ".join(reach.needs)


def status_of(f) -> tuple[str, str | None]:
    """(status, status_why) of one finding, decided or not."""
    kind = f.kind
    if kind == "read_outside_declaration":
        if f.status == "unresolved":
            return f.status, f.why
        d = f.decision
        platform = _platform(d.reach if d is not None else None)
        conds, others, fixed = _read_conditions(f, platform)
        if conds is None:
            if fixed:
                return "unresolved", _breakable_only(fixed)
            return "unresolved", f"a platform test on every path is false on {platform}, where it would race"
        if conds:
            return "unresolved", _unsettled(conds, others)
        if d is None:
            return (f.status, None) if f.why is None else ("unresolved", f.why)
        if d.verdict != "counterexample":
            return "unresolved", f"its scenario does not race ({d.verdict}): the read is outside the declaration " \
                                 "but nothing the fence covers is lost in it"
        if d.reach is None:
            return "unresolved", ("races in its own scenario, in none of the tree's generated configurations"
                                  if d.contexts is not None else "races in its own scenario; the tree's "
                                                                 "configurations were not decided")
        return _reached(d.reach)
    if kind == "worker_read_after_publish":
        if f.status == "unresolved":
            return f.status, f.why
        left = dict(f.settled).get("cuda", f.conditions) if f.settled else f.conditions
        if left is None:
            return "unresolved", ("a platform test on its path is false on cuda, where it would race: "
                                  + _unsettled(f.conditions).removeprefix("not settled: "))
        if left:
            return "unresolved", _unsettled(left)
        return "reachable", "needs " + " or ".join(f"--speculative-algorithm {a}" for a in f.algorithms)
    if kind == "no_marker_fallback":
        return "reachable", f"needs {f.condition}"
    return f.status, None


def settle(ex):
    """``ex`` with every finding's status settled (``status_of``)."""
    out = []
    for f in ex.findings:
        if not hasattr(f, "status_why"):
            out.append(f)
            continue
        status, why = status_of(f)
        out.append(replace(f, status=status, status_why=why))
    return replace(ex, findings=tuple(out))


#: The statuses in the order the summaries count them (``plausible`` only in an extraction not decided).
STATUSES = ("confirmed", "reachable", "plausible", "unresolved")


#: What the SARIF results carry as ``properties.precision`` per status (CodeQL's scale): a confirmed finding races in the
#: default configuration, a reachable one in a configuration that needs what it names, a question hangs on a value.
PRECISION = {"confirmed": "very-high", "reachable": "high", "plausible": "high", "unresolved": "medium"}


def is_question(f) -> bool:
    """Whether the decided finding ``f`` is a question rather than a finding: ``unresolved`` (its status hangs on a fact
    fencecheck could not settle, which ``status_why`` names). Questions are listed after the findings, never show a
    fix and never make the exit status 1."""
    return f.status == "unresolved"


def shown(findings) -> list:
    """The findings that are not questions."""
    return [f for f in findings if not is_question(f)]


def questions(findings) -> list:
    return [f for f in findings if is_question(f)]


def counted(findings, asked: bool = True) -> str:
    """``3 confirmed, 4 reachable, 40 unresolved``: how many findings have each status (``plausible`` only when one
    has it; the others always; ``unresolved`` only when ``asked``)."""
    kinds = [f.status for f in findings]
    return ", ".join(f"{kinds.count(s)} {s}" for s in STATUSES
                     if (s != "plausible" or s in kinds) and (s != "unresolved" or asked))
