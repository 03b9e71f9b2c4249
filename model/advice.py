"""Verified advice for one backend (docs/verify.md): for every race the backend brings, and for every declaration
later than its reads need, the smallest change to the backend (an earlier or later declaration, a read moved out of
the graph), each verified over the same symbolic and catalog contexts before it is offered; when no change to the
backend alone removes a race, the verified change to the component whose assumption the context fails."""

from __future__ import annotations

import dataclasses
from typing import Callable, Mapping

from fencecheck.verdict import Verdict
from fencecheck.scenario import ANY_MODE, BackendSpec, Scenario
from fencecheck.vocab import COVERED_SITES, PUBLISHING_ENDS, ForwardMode, ReadSite, SharedReadEnds

from .backend_facts import backends_of, mode_facts, root_name
from .catalog_contexts import catalog_contexts
from .component_changes import COMPONENT, component_change
from .decision import Decision, Decisions
from .solver import Budget
from .swap import PREFIX
from .symbolic_contexts import BOUNDS, SymbolicVerdicts, symbolic_verdict
from .symconfig import Bounds
from .verify_report import Advice, Check, VerifyReport


def _declare(b, mode: ForwardMode, d: SharedReadEnds):
    """The backend file with the root declaring ``d`` for ``mode`` (an override wins over delegate and max_of)."""
    bs = backends_of(b)
    root = bs[root_name(b)]
    new = dataclasses.replace(root, declares={**root.declares, mode: d})
    return _with(b, {root.name: new})


def _move_out(b, mode: ForwardMode, site: ReadSite, loc: str, who: tuple[str, ...]):
    """The backend file with ``loc``'s read at ``site`` in ``mode`` moved to pre_replay in each of ``who``."""
    bs = backends_of(b)
    changes = {}
    for name in who:
        x = bs[name]
        own = dict(x.reads.get(mode.value, x.reads.get(ANY_MODE, {})))
        own[site] = tuple(v for v in own.get(site, ()) if v != loc)
        if not own[site]:
            del own[site]
        own[ReadSite.PRE_REPLAY] = tuple(sorted({*own.get(ReadSite.PRE_REPLAY, ()), loc}))
        changes[name] = dataclasses.replace(x, reads={**x.reads, mode.value: own})
    return _with(b, changes)


def _with(b, changes: dict[str, BackendSpec]):
    if isinstance(b, BackendSpec):
        return changes.get(b.name, b)
    root = changes.get(b.root.name, b.root)
    return dataclasses.replace(b, root=root, backends={**b.backends, **changes})


def _check(b, catalog, bounds, budget, decide: Callable[[Scenario], Decision] | None = None,
           anyway: Mapping[str, bool] | None = None, verdicts: SymbolicVerdicts | None = None,
           plan: list | None = None, alone: ForwardMode | None = None, honest: bool = True) -> Check:
    """The change ``b`` over the catalog's contexts, then over the symbolic family. A change that races in a catalog
    context is not safe whatever the symbolic family gives: its symbolic verdict is not asked for (``None``), which
    is most of the search's cost saved (a symbolic check builds the whole bounded family). ``plan``: collect the
    facts of a change whose symbolic verdict would be asked for, and take it as unsafe. ``alone``: the backend in
    that mode only (its other modes left to the contexts' own backends), as pull-request mode proves a finding's
    fix (one finding: one mode's reads and declaration). ``honest``: a race an honest backend has too is the
    context's (as in the report); without, a change that only gives overlap back must bring no race at all."""
    facts = [f for f in mode_facts(b) if alone is None or f.mode is alone]
    contexts = catalog_contexts(b, facts, catalog, budget, examine=False, decide=decide, anyway=anyway,
                                honest=honest)
    if not all(c.safe for c in contexts):
        return Check(None, contexts)
    if plan is not None:
        plan.append(facts)
        return Check(Verdict.UNKNOWN, contexts)
    verdict = verdicts(facts) if verdicts is not None else symbolic_verdict(facts, bounds, budget)
    return Check(verdict, contexts)


def _locations(report: VerifyReport) -> list[str]:
    return sorted({loc for f in report.modes for locs in f.sites.values() for loc in locs})


def _implicated(report: VerifyReport) -> set[ForwardMode]:
    """The modes whose declaration or reads take part in a race the backend brings: a mode read outside its
    declaration, the mode of a racing phase that runs the backend, and, for a race at a phase of another backend,
    every mode the backend runs in that context."""
    modes = {f.mode for f in report.modes if not f.honest}
    ce = report.counterexample
    if ce is not None:
        modes.add(ce.scenario.algorithm.steps[ce.scenario.step_kind(ce.race.step)][ce.race.phase].mode)
    for c in report.contexts:
        if c.safe:
            continue
        ours = {p.mode for p in c.phases if p.backend.startswith(PREFIX)}
        for r in c.brought:
            ph = c.phase_of(r)
            modes |= {ph.mode} if ph is not None and ph.backend.startswith(PREFIX) else ours
    return modes


def advise(b, report: VerifyReport, catalog: list[Scenario], bounds: Bounds = BOUNDS, budget: Budget = Budget(),
           tick: Callable[[str], None] | None = None,
           decide: Callable[[Scenario], Decision] | None = None, verdicts: SymbolicVerdicts | None = None,
           plan: list | None = None) -> list[Advice]:
    """The smallest verified change for every race the backend brings, and for every declaration later than its
    reads need; else the component that must change. ``plan``: collect the facts of every change that could be
    checked over the symbolic family (each taken as unsafe, so none stops the search) instead of checking them."""
    out: list[Advice] = []
    racing = report.verdict is not Verdict.PROVED or any(not c.safe for c in report.contexts)
    tried: dict[str, Check] = {}
    decide = decide or Decisions()
    anyway = {c.scenario: c.races_anyway for c in report.contexts}

    def verified(label: str, cand, alone: ForwardMode | None = None, honest: bool = True) -> Check:
        if plan is not None:
            return _check(cand, catalog, bounds, budget, decide, anyway, plan=plan, alone=alone, honest=honest)
        key = (label, alone, honest)
        if key not in tried:
            tried[key] = _check(cand, catalog, bounds, budget, decide, anyway, verdicts, alone=alone, honest=honest)
            if tick is not None:
                tick(label)
        return tried[key]

    implicated = _implicated(report)
    for f in report.modes:
        if f.declared is SharedReadEnds.UNKNOWN and not f.sites:
            continue
        if racing and f.mode not in implicated and not (f.honest and f.earliest() < f.declared):
            continue  # its declaration plays no part in any race, and gives no overlap away
        # Every honest declaration, earliest first: the earliest safe one is the smallest fix and keeps most overlap.
        options = [d for d in PUBLISHING_ENDS
                   if set(f.sites) <= COVERED_SITES[d]]
        over = f.honest and options and options[0] < f.declared

        def declare_label(d: SharedReadEnds, f=f) -> str:
            return f"declare {d.name} for {f.mode.value}" + (
                f" on {report.backend}" if f.declared_by != report.backend else "")
        if not racing and not over:
            continue
        mode_racing = racing and f.mode in implicated
        failed_here = []
        for d in options:
            if d == f.declared:
                if not mode_racing:
                    break
                continue
            label = declare_label(d)
            # fixing a race, the context's own races are not the change's; giving overlap back, the change must
            # bring no race anywhere (an earlier publish where the context is already broken is no improvement)
            chk = verified(label, _declare(b, f.mode, d), honest=mode_racing)
            if chk.safe:
                if f.declared is SharedReadEnds.UNKNOWN:
                    why = ("UNKNOWN (unaudited) publishes no event of its own: the barrier takes the coarse fence "
                           f"only while the mailbox is empty; {d.name} publishes one")
                elif d < f.declared:
                    why = (f"publishes earlier than {f.declared.name}, giving back the overlap from there to the "
                           f"{f.declared.name} publish point")
                else:
                    why = f"covers every site {f.mode.value} reads"
                if failed_here:
                    why += "; " + "; ".join(failed_here)
                out.append(Advice(label, why, chk))
                break
            failed_here.append(f"{d.name} instead: {chk.text()}")
        else:
            found = None
            others = [g.mode.value for g in report.modes if g.mode is not f.mode and g.mode in implicated]
            if failed_here and mode_racing and not over and others:
                # The mode's own fix, as pull-request mode proves a finding's: the change with the backend in this
                # mode alone, over the same contexts; the races the other modes bring are theirs, each advised.
                for d in options:
                    if d == f.declared:
                        continue
                    chk = verified(declare_label(d), _declare(b, f.mode, d), alone=f.mode)
                    if not chk.safe:
                        failed_here.append(f"{d.name} with the backend in {f.mode.value} alone: {chk.text()}")
                        continue
                    found = Advice(declare_label(d), f"covers every site {f.mode.value} reads: verified with the "
                                                     f"backend in {f.mode.value} alone, the races of "
                                                     f"{', '.join(others)} being theirs (each advised on its own); "
                                                     "with the backend whole: " + "; ".join(failed_here), chk)
                    break
            if found is not None:
                out.append(found)
            elif failed_here and mode_racing and not over:
                out.append(Advice(f"no declaration for {f.mode.value} alone fixes it",
                                  "; ".join(failed_here), None))
            if failed_here and over:
                out.append(Advice(f"keep {f.declared.name} for {f.mode.value}",
                                  "no earlier declaration is safe: " + "; ".join(failed_here), None))
        # A read in the graph moved out of it (the declaration kept).
        if mode_racing and not f.honest:
            for site, loc in f.outside():
                who = f.readers.get((site, loc), ())
                label = (f"move the read of {loc} at {site.value} in {f.mode.value} out of the graph (pre_replay)"
                         f" in {'/'.join(who)}")
                chk = verified(label, _move_out(b, f.mode, site, loc, who))
                if chk.safe:
                    out.append(Advice(label, f"keeps {f.declared.name}", chk))
    # Contexts the backend brings races to that no verified backend change removes.
    fixed = [a for a in out if a.check is not None and a.check.safe]
    if racing and not fixed:
        for c in report.contexts:
            if c.safe or c.swapped is None:
                continue
            cc = (c.component if c.races_anyway
                  else component_change(c.swapped, c.failed, decide, c.scenario) if c.failed else None)
            if cc is not None:
                said = ("no change to this backend fixes it: every backend that reads " + "/".join(_locations(report))
                        + " races there (each read site, each declaration tried)" if c.races_anyway
                        else "no change to this backend alone is verified to fix it")
                out.append(Advice(f"{c.scenario}: {said}", "the context fails " + ", ".join(c.failed), None, cc))
            elif c.failed:
                parts = "; ".join(f"{n}: {COMPONENT[n]}" for n in c.failed if n in COMPONENT)
                out.append(Advice(f"{c.scenario}: no change to this backend alone is verified to fix it; change "
                                  f"{parts}", "the context fails " + ", ".join(c.failed), None))
    return out
