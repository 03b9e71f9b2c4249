"""The decision layer's entry: from a tree's facts (the reader's ``Extraction``) to decided findings.

Every command that decides what a tree shows comes through here: ``fencecheck sglang`` (``decide_tree``), pull-request
mode (``read_decided`` for both trees, then ``decide_added`` for what the change adds), ``audit``'s reader part
(``decide_tree`` with witnesses and the model everywhere) and ``verify --sglang`` (``backend_in_tree``). The steps run
in one order, each on the extraction the step before returned:

1. ``replay.demote_never_replayed``: graph-mode findings of backends no decode graph replays, decided eagerly;
2. ``platform.demote_platform_bound``: ``IN_REPLAY`` findings of backends bound to a platform without the marker;
3. ``findings.decide``: each read outside its declaration as a scenario, by the simulator and the model, and in the
   configurations generated from the tree's facts (skipped by ``Plan.findings=False``: pull-request mode decides
   only the findings a change adds, ``decide_added``);
4. ``workers.decide_worker_reads``: the speculative workers' reads after the publisher's runner;
5. ``fallback.decide_fallback``: the no-marker fallback on the platforms without the marker;
6. ``status.settle``: each finding's status from what was decided about it;
7. ``graph_capture.demote_not_captured``: the shown findings whose in-graph reads no captured graph runs (the
   captured path interpreted), moved to the not findings with their scenarios dropped (where step 3 ran; in
   pull-request mode, ``decide_added`` asks about the findings a change adds).

Step 7's questions do not depend on steps 1-6: where a second core exists, the findings it may be asked about (those
step 6 may show: ``graph_capture.may_be_asked``) are asked in a forked process while steps 1-6 run (``beside``), and
step 7 takes the answers it needs from there (asking itself any other; the answers are the same either way). The
one-tree command starts that process sooner, as soon as the reader has the findings (``EarlyAnswers``), so that it
also runs while the reader reads the rest of the tree's facts.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, replace
from typing import Callable


@dataclass(frozen=True)
class Plan:
    """What a run decides, and which questions go to the SMT model besides the simulator.

    ``findings``: decide the reads outside their declarations (step 3); ``witness``: replay each of their races under
    its witness interleaving; ``context_model``: ``"flagged"`` asks the model about every generated configuration
    where the simulator finds a race, ``"none"`` about none; ``worker_model`` and ``fallback_model``: the model's
    answer beside the simulator's on the worker reads' and the fallback's scenarios."""

    findings: bool = True
    witness: bool = False
    context_model: str = "none"
    worker_model: bool = False
    fallback_model: bool = True

    @classmethod
    def one_tree(cls, cross_check: bool = False, witness: bool = False) -> "Plan":
        """``fencecheck sglang PATH``."""
        return cls(True, witness, "flagged" if cross_check else "none", cross_check, True)

    @classmethod
    def pull_request(cls, cross_check: bool = False) -> "Plan":
        """Each tree of pull-request mode: everything but the findings, which ``decide_added`` decides for HEAD."""
        return cls(False, False, "flagged" if cross_check else "none", cross_check, cross_check)

    @classmethod
    def audit(cls) -> "Plan":
        """``audit``'s reader part: witnesses, and the model on every question."""
        return cls(True, True, "flagged", True, True)


@dataclass(frozen=True)
class Decided:
    """A decided extraction and the scenarios built for its findings (the findings' own, then the fallback's, then
    the worker reads'), as ``--scenarios`` writes them."""

    extraction: object
    scenarios: tuple


def decide_tree(ex, plan: Plan, stage: Callable[[str], None] | None = None, early: EarlyAnswers | None = None) -> Decided:
    """``ex`` (the reader's extraction of a tree with the declaration fence) decided by ``plan``. ``stage`` is told
    ``"findings"`` before step 3, ``"workers"`` before step 4 and ``"settled"`` at the end (a progress bar's stages).
    ``early``: step 7's answers asked while the tree was read (``EarlyAnswers``), where it started."""
    from fencecheck.decision.fallback import decide_fallback
    from fencecheck.decision.findings import decide
    from fencecheck.decision.platform import demote_platform_bound
    from fencecheck.decision.replay import demote_never_replayed
    from fencecheck.decision.status import settle
    from fencecheck.decision.workers import decide_worker_reads

    tell = stage or (lambda _: None)
    if not plan.findings:
        ex = replace(ex, tree=None)  # step 7 does not run: the reader's tree can go
    with collector_paused(), _answers_beside(ex, plan, early) as asked:
        ex, _ = demote_platform_bound(demote_never_replayed(ex)[0])
        scenarios: list = []
        if plan.findings:
            tell("findings")
            ex, scenarios = decide(ex, witness=plan.witness, context_model=plan.context_model)
        tell("workers")
        ex, workers = decide_worker_reads(ex, model=plan.worker_model)
        ex, fallback = decide_fallback(ex, model=plan.fallback_model)
        # the shown findings this run decided (pull-request mode asks about those a change adds: ``decide_added``)
        ex, dropped = _not_captured(settle(ex), answers=asked() if asked is not None else None) \
            if plan.findings else (settle(ex), set())
    tell("settled")
    ex = replace(ex, tree=None)
    return Decided(ex, tuple(s for s in tuple(scenarios) + tuple(fallback) + tuple(workers) if s.name not in dropped))


@contextmanager
def collector_paused():
    """The cyclic collector off while the decision runs, and as it was afterwards: what the process holds (a
    reading's tree, the cycles of what it made: millions of objects) would be walked each time the model's z3 terms
    start a full collection; the decision's own objects are freed by their counts, and any cycles once it ends."""
    on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if on:
            gc.enable()


def _answers_beside(ex, plan: Plan, early: "EarlyAnswers | None"):
    """A context yielding ``result()`` for step 7's answers computed in a forked process, or None (no second core, or
    step 7 does not run): the one ``early`` started while the tree was read, else one started now for the findings
    of ``ex`` (not decided yet) it may be asked about."""
    from fencecheck.decision.beside import beside
    from fencecheck.decision.graph_capture import answers_of, may_be_asked

    if not plan.findings:
        return nullcontext(None)
    if early is not None and early.started:
        return nullcontext(early.result)
    return beside(answers_of, ex, may_be_asked(ex.findings))


class EarlyAnswers:
    """Step 7's answers asked as soon as the reader has the findings, while it reads on (the rest of the tree's
    facts) and the decision runs: ``read_path(..., early=e)`` calls it with the reader's tree, forward modes, findings
    and platform rows; ``decide_tree(..., early=e)`` takes the answers from there. The forked process lives as long as
    ``stack`` (an ``ExitStack`` the caller holds over the read and the decision)."""

    def __init__(self, stack):
        self.stack = stack
        self.started = False
        self.result = None  # ``beside``'s result, None where there is no second core

    def __call__(self, tree, modes, findings, platforms) -> None:
        from fencecheck.decision.beside import beside
        from fencecheck.decision.graph_capture import answers_in, marker_platforms, may_be_asked

        self.result = self.stack.enter_context(beside(answers_in, tree, modes, may_be_asked(findings),
                                                      marker_platforms(platforms)))
        self.started = True


def _not_captured(ex, only=None, answers=None):
    """``graph_capture.demote_not_captured``, with the names of the scenarios no remaining finding uses."""
    from fencecheck.decision.graph_capture import demote_not_captured

    ex, dropped = demote_not_captured(ex, only, answers)
    used = {f.decision.scenario for f in ex.findings if getattr(f, "decision", None) is not None}
    return ex, dropped - used


def read_decided(path: str | None, installed: bool, plan: Plan, freeze: bool = False) -> Decided:
    """The tree at ``path`` (or the installed ``sglang``) read and decided by ``plan``."""
    from fencecheck.sglang_source import read_path

    return decide_tree(read_path(path, installed=installed, freeze=freeze), plan)


def decide_added(ex, doc: dict, wanted: set[int], plan: Plan) -> Decided:
    """``ex`` (whose document is ``doc``, decided by a plan without ``findings``) with the findings at the indexes
    ``wanted`` decided as ``decide_tree`` decides them (their scenarios, and the generated configurations), and their
    scenarios. The findings of the same backend and mode are decided with them, so that each scenario keeps the name
    it has in a run that decides every finding."""
    with collector_paused():
        return _decide_added(ex, doc, wanted, plan)


def _decide_added(ex, doc: dict, wanted: set[int], plan: Plan) -> Decided:
    from fencecheck.decision.findings import decide
    from fencecheck.decision.status import settle

    keys = {(doc["findings"][i]["subject"], doc["findings"][i]["mode"]) for i in wanted}
    subset = [i for i, f in enumerate(ex.findings)
              if f.kind == "read_outside_declaration" and (f.subject, f.mode) in keys]
    sub, built = decide(replace(ex, findings=tuple(ex.findings[i] for i in subset)), witness=plan.witness,
                        context_model=plan.context_model)
    decided = dict(zip(subset, sub.findings))
    names = {decided[i].decision.scenario for i in wanted if decided[i].decision is not None}
    ex, dropped = _not_captured(settle(replace(ex, findings=tuple(decided.get(i, f) for i, f in enumerate(ex.findings)))),
                                set(wanted))
    return Decided(ex, tuple(s for s in built if s.name in names - dropped))


def backend_in_tree(tree_path: str, name: str):
    """``verify --sglang TREE CLASS``: a context manager yielding ``(source, variants, later)`` as soon as the class is
    read (``backend_source.loading``): its backend files, one per combination of its conditional rows, and the tree's
    configurations with the files decided in them, computed meanwhile (``later``)."""
    from fencecheck.decision.backend_source import loading

    return loading(tree_path, name)
