"""The static reader's document of a release, as Markdown (a section of the release's document under docs/audit/): every finding
with its status, evidence chain, scenario and witness, and the extracted tables. Paths are relative to the ``sglang``
package's parent, so the text is the same wherever the sources were read."""

from __future__ import annotations


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _decl(d) -> str:
    if d.plain:
        return d.rows[0].end
    return "; ".join(f"{r.end} if `{r.condition}`" if r.condition else r.end for r in d.rows)


def _grouped(names: list[str]) -> str:
    """Configuration names grouped by their stem (the name without its number): ``eagle-cuda-overlap (3)``."""
    by: dict[str, int] = {}
    for n in names:
        stem = n.rsplit("-", 1)[0] if n.rsplit("-", 1)[-1].isdigit() else n
        by[stem] = by.get(stem, 0) + 1
    return ", ".join(f"{k} ({v})" if v > 1 else k for k, v in sorted(by.items()))


def contexts_text(rows) -> str:
    """One line on a finding's generated configurations (``ContextVerdict`` records): in how many of them it races,
    and which (by stem), beyond the configurations' own races (listed apart)."""
    racing = [r.context for r in rows if r.verdict == "counterexample" and not r.own]
    own = [r.context for r in rows if r.verdict == "counterexample" and r.own]
    unknown = [r.context for r in rows if r.verdict == "unknown"]
    differ = [r.context for r in rows if r.oracles_agree is False]
    text = f"in {len(racing)} of {len(rows)} configurations: " + (
        f"races in {_grouped(racing)}" if racing else "no race")
    if own:
        text += f"; the configuration's own race (the backend's honest twin races there too) in {_grouped(own)}"
    if unknown:
        text += f"; unknown in {_grouped(unknown)}"
    if differ:
        text += f"; the model DIFFERS in {', '.join(differ)}"
    return text


def markdown(ex, command: str) -> list[str]:
    """Lines of the section for the decided extraction ``ex`` (decided with witnesses), produced by ``command``."""
    f = ex.findings
    from fencecheck.decision.status import counted, questions, shown
    from fencecheck.render.summary import ordered

    found, asked = shown(f), questions(f)
    code = "1: it has findings" if found else "3: it has questions only" if asked else "0: it has none"
    out = [
        "## What the static reader finds in the release's sources",
        "",
        f"`{command}` (exit status {code}) reads the release's Python sources statically (never importing "
        "them) and decides each finding "
        "with the simulator and the model (docs/sglang-reader.md). `confirmed`: it races in the default configuration "
        "of a supported platform; `reachable`: it races in a configuration that needs the named flags, environment "
        "variables or platform; `unresolved`: a question, not a finding: a fact could not be settled (a condition on "
        "its path the reader cannot decide, named), listed after the findings. A finding is a read outside what the backend's declaration covers; its scenario "
        "places the backend alone under one decode runner, so a counterexample there says the read is unordered "
        "with the next write when that path runs in a graph replay, not that a given deployment takes the path. "
        "Each finding is also decided in every configuration generated from the release's facts that runs a phase "
        "of its mode (the configuration unchanged, that phase run by the backend as read); the model is asked where the simulator finds a "
        "race. A context listed as racing may race through its own phases: `--json` gives each context's races.",
        "",
        f"SGLang {ex.version}: {len(ex.backends)} attention backends, "
        f"{len({w.cls for w in ex.workers})} workers, {len(ex.barrier.calls)} barrier call sites, "
        f"{len(ex.runners)} runners; {len(found)} findings ({counted(found, asked=False)}) and {len(asked)} "
        "questions.",
        "",
        "### Findings",
        "",
    ]
    for x in ordered(found):
        out += _finding(x)
    out += ["### Questions", "", "Each hangs on the fact its `Unresolved:` line names; its scenario says what happens "
            "if the path runs in a graph replay.", ""]
    for x in ordered(asked):
        out += _finding(x)
    out += ["### Not findings", "",
            "Each read once per backend and mode (the call chains that reach it are in `--json`; a start-up read has "
            "no mode).", "",
            "| backend | mode | file:line | location | why not a finding |", "| --- | --- | --- | --- | --- |"]
    rows = dict.fromkeys(f"| {x.subject} | {x.mode or 'start-up'} | `{x.file}:{x.line}` | {_cell(x.location)} | "
                         f"{_cell(x.why)} |" for x in ex.not_findings)
    out += rows
    out += ["", "### Declarations that differ from the base rule", "",
            "| class | where | declared in | per mode |", "| --- | --- | --- | --- |"]
    roots = {x.cls for x in ex.backends if x.kind == "base"}
    for b in ex.backends:
        src = b.declared_in
        if b.kind == "base" or (src and src.cls in roots):
            continue
        modes = "; ".join(f"{m} {_decl(v)}" for m, v in b.declares)
        where = f"`{src.file}:{src.line}` ({src.cls})" if src else "-"
        out.append(f"| {b.cls} | `{b.file}:{b.line}` | {where} | {_cell(modes)} |")
    out += ["", "### `last_shared_read_runner` per worker", "",
            "| worker | publisher | condition | defined |", "| --- | --- | --- | --- |"]
    for w in ex.workers:
        d = w.defined_in
        out.append(f"| {w.cls} | `{_cell(w.publisher)}` | {_cell(w.condition or '-')} | `{d.file}:{d.line}` |")
    out += ["", "### The barrier and the event loops that apply it", "",
            "| event loop | call site |", "| --- | --- |"]
    for c in ex.barrier.calls:
        out.append(f"| {c.event_loop} | `{c.file}:{c.line}` |")
    out += ["", "### Runners and how they publish", "", "| runner | publish | entry |", "| --- | --- | --- |"]
    for r in ex.runners:
        m = r.method
        out.append(f"| {r.cls} | {r.publish} | `{m.file}:{m.line}` ({m.cls}.{m.name}) |")
    out.append("")
    return out + algorithms_markdown(ex.algorithms)


def _finding(x) -> list[str]:
    """A finding's subsection: what it is, its evidence, its scenario's verdicts, its generated configurations, its
    witnesses."""
    what = (f"declares {x.declared}" + (f" when `{x.condition}`" if x.conditions else "")
            + " but reads outside it") if x.kind == "read_outside_declaration" else x.kind.replace("_", " ")
    out = [f"#### {x.status.upper()}: {x.subject} {x.mode}"
           + (" (prefill snapshot)" if x.kind == "read_outside_declaration"
              and x.declared_by == "_snapshot_prefill_shared_reads" else "")
           + (f" at {x.subject_at}" if x.subject_at else "")
           + (f": {x.location} read at {x.evidence[-1].file}:{x.evidence[-1].line}"
              if x.kind == "worker_read_after_publish" and x.evidence else ""), "", what + ".", ""]
    if getattr(x, "status_why", None):
        out += [f"{x.status.capitalize()}: {x.status_why}.", ""]
    out += [f"- `{e.file}:{e.line}`: {e.what}" for e in x.evidence]
    out.append("")
    d = x.decision
    if d is None:
        return out
    races = ", ".join(f"`{r}`" for r in d.races) or "no race"
    model = "the model agrees" if d.model and d.model.agree else \
        f"the model: {d.model.verdict if d.model else 'not asked'}"
    out += [f"Scenario `{d.scenario}` (written by `--scenarios DIR`): simulator {d.verdict} ({races}); {model}.", ""]
    if d.contexts:
        out += [f"In the configurations generated from the facts (each phase of mode {x.mode} run by {x.subject} as read): "
                f"{contexts_text(d.contexts)}.", ""]
    for w in d.witness or ():
        o = w.stale_read
        out += [f"Witness for `{w.race}`: " + (
            f"the step {o.step} read of {o.location} at {o.site} sees step {o.seen}'s data."
            if o else "not reproduced."), ""]
    return out


def algorithms_markdown(algorithms) -> list[str]:
    """The speculative algorithms table: per algorithm (and the setting that picks its worker) the worker, the phases
    of one decode step in order (runner, mode), the worker reads after the publisher's runner, what is unresolved."""
    if not algorithms:
        return []
    out = ["### Speculative algorithms and the phases of one decode step", "",
           "| algorithm | worker | phases (runner: mode at file:line) | reads after the publisher | unresolved |",
           "| --- | --- | --- | --- | --- |"]
    for a in algorithms:
        name = a.name + (f" when `{a.condition}`" if a.conditions else "")
        w = a.worker
        worker = f"{w.cls} (`{w.file}:{w.line}`)" if w else "-"
        phases = "; ".join(f"{p.runner}: {p.mode or 'publish'} at `{p.file.rsplit('/', 1)[-1]}:{p.line}`"
                           + (" (conditional)" if p.conditions else "")
                           + (" (in a loop)" if p.repeat else "") for p in a.phases) or "-"
        reads = a.reads_after_publisher
        found = sum(1 for r in reads if r.outcome.status is not None)
        late = (f"{found} findings, {len(reads) - found} not findings: "
                + ", ".join(f"`{r.file.rsplit('/', 1)[-1]}:{r.line}` {r.location} "
                            f"({r.outcome.status or 'covered'})" for r in reads)) \
            if reads else "none"
        out.append(f"| {_cell(name)} | {worker} | {_cell(phases)} | {_cell(late)} | {len(a.unresolved)} |")
    out.append("")
    return out
