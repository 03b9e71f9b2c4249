"""The human text of a one-tree ``fencecheck sglang`` run: the one-screen summary (one line per root cause) and, with
``--details``, every finding with its evidence and decision and every fact table."""

from __future__ import annotations

from fencecheck.render.output import decision_lines
from fencecheck.sglang_source.limits import limits_text


def to_json(ex, drift: dict | None = None) -> dict:
    """The document of the decided extraction ``ex``, with ``drift`` when ``--against`` asked for it."""
    return ex.to_json() | ({"drift": drift} if drift is not None else {})


def _short(ex, drift, lines: list[str]) -> str:
    from fencecheck.decision.status import shown
    from fencecheck.render.summary import facts_line, root_causes, summary_lines

    lines[-1] += f" in {len(root_causes(shown(ex.findings)))} root causes (the findings sharing their reads folded; " \
                 "--details shows each with its evidence)"
    lines += summary_lines(ex)
    if drift is not None:
        lines += _drift_lines(drift)
    lines.append(_not_findings_line(ex))
    lines.append(facts_line(ex))
    from fencecheck.render.summary import WIDTH

    lines += limits_text(ex, WIDTH)
    return "\n".join(lines) + "\n"


def _not_findings_line(ex) -> str:
    nf = ex.not_findings
    sync = sum(1 for x in nf if x.why.startswith(("behind a capture-mode test", "no graph captures its path")))
    device = sum(1 for x in nf if x.why.startswith(("never resolved on ", "runs only on ")))
    start = sum(1 for x in nf if x.mode is None)
    other = len(nf) - sync - device - start
    worker = {(a.worker.cls, r.file, r.line, r.location): r for a in ex.algorithms if a.worker
              for r in a.reads_after_publisher if r.outcome.status is None}  # once per worker class, as findings are
    bound = sum(1 for r in worker.values() if r.outcome.why.startswith("runs only on "))
    return (f"not findings: {sync} reads no graph replay runs (a capture-mode test, a host sync or a branch the "
            f"capture rules out), {start} start-up reads, {device} "
            f"reads on a device whose runners never publish, {other} decided otherwise (never replayed, bound to a "
            "platform without the marker, a path that cannot run; --json lists them, with why)"
            + (f"; {len(worker)} worker reads after the publisher's runner ({bound} on a device whose runners never "
               "publish)" if worker else ""))


def _drift_lines(drift: dict) -> list[str]:
    from fencecheck.decision.drift import drift_text

    return drift_text(drift)


def _decl_text(d) -> str:
    if d.plain:
        return d.rows[0].end
    return "; ".join(f"{r.end} if {r.condition}" if r.condition else r.end for r in d.rows)


def _algorithms_text(algorithms) -> list[str]:
    if not algorithms:
        return []
    lines = ["speculative algorithms (worker; phases of one decode step; worker reads after the publisher's runner):"]
    for a in algorithms:
        cond = f" when {a.condition}" if a.conditions else ""
        w = a.worker
        lines.append(f"  {a.name}{cond}: " + (f"{w.cls} ({w.file}:{w.line})" if w else "no worker class"))
        for p in a.phases:
            lines.append(f"    {p.runner} {p.mode or 'publish'} ({p.file}:{p.line})"
                         + (f" if {p.condition}" if p.conditions else "") + (" [loop]" if p.repeat else ""))
        for r in a.reads_after_publisher:
            o = r.outcome
            finding = o.status is not None
            lines.append(f"    {o.status.upper() if finding else 'not a finding'}: reads "
                         f"{r.location} after the publisher's runner ({r.file}:{r.line})"
                         + (f"; scenario {o.decision.scenario}: {o.decision.verdict}"
                            if finding and o.decision else ""))
        if a.unresolved:
            lines.append(f"    unresolved: {len(a.unresolved)} (--json lists them)")
    return lines


def render(ex, drift: dict | None = None, details: bool = True) -> str:
    """The human summary of the decided extraction ``ex`` (and its ``drift``): with ``details`` every finding with
    its evidence and every fact table, else one line per root cause (``sglang_summary``)."""
    from fencecheck.render.facts import facts_text, fence_text
    from fencecheck.sglang_source.feasible import simplified

    if ex.protocol is not None and ex.protocol.kind != "declaration":
        return fence_text(to_json(ex, drift)) + ("\n".join(_drift_lines(drift)) + "\n" if drift else "")
    lines = []
    b, w, f = ex.backends, ex.workers, ex.findings
    loops = sorted({c.event_loop for c in ex.barrier.calls})
    version = ex.version or "(version unknown)"
    lines.append(f"sglang {version} at {ex.root}: {len(b)} attention backends, "
                 f"{len({x.cls for x in w})} workers, barrier applied in {len(loops)} event loops "
                 f"({len(ex.barrier.calls)} call sites), {len(ex.runners)} runners")
    from fencecheck.decision.status import counted, is_question, questions, shown
    from fencecheck.render.summary import ordered

    found, asked = shown(f), questions(f)
    lines.append(f"findings: {len(found)} ({counted(found, asked=False)})")
    if not details:
        return _short(ex, drift, lines)
    lines[-1] += f"; questions: {len(asked)} (unresolved, listed after the findings)"
    for x in ordered(f):
        head = f"  {x.status.upper()} {x.subject} {x.mode}: "
        if x.kind == "read_outside_declaration":
            head += f"declares {x.declared}" + (f" when {simplified(x.conditions)}" if x.conditions else "") + \
                " but reads outside it"
        else:
            head += x.kind.replace("_", " ")
        lines.append(head)
        if getattr(x, "status_why", None):
            lines.append(f"    {x.status}: {x.status_why}")
        for e in x.evidence:
            lines.append(f"    {e.file}:{e.line}: {e.what}")
        if x.decision is not None:
            lines += decision_lines(x.decision, fix=not is_question(x))
        elif x.kind == "read_outside_declaration" and x.why:
            lines.append(f"    {x.why}")
    if drift is not None:
        lines += _drift_lines(drift)
    lines.append(_not_findings_line(ex))
    lines.append("declarations (backends that do not take the base rule unchanged):")
    roots = {x.cls for x in b if x.kind == "base"}
    for x in b:
        if x.kind == "base" or (x.declared_in and x.declared_in.cls in roots):
            continue
        modes = ", ".join(f"{m} {_decl_text(v)}" for m, v in x.declares)
        src = x.declared_in
        where = f"declared in {src.cls} {src.file}:{src.line}" if src else "where it is declared is not known"
        lines.append(f"  {x.cls} ({x.file}:{x.line}; {where}): {modes}")
    lines.append("workers (last_shared_read_runner):")
    for x in w:
        cond = f" if {x.condition}" if x.conditions else ""
        lines.append(f"  {x.cls}: {x.publisher}{cond} ({x.returns_at.file}:{x.returns_at.line})")
    lines.append("barrier call sites:")
    for c in ex.barrier.calls:
        lines.append(f"  {c.event_loop} ({c.file}:{c.line})")
    lines.append("runners that publish:")
    for r in ex.runners:
        if r.publish != "never":
            lines.append(f"  {r.cls}: {r.publish} ({r.method.file}:{r.method.line})")
    lines += _algorithms_text(ex.algorithms)
    lines += facts_text(ex.facts)
    lines += limits_text(ex)
    return "\n".join(lines) + "\n"
