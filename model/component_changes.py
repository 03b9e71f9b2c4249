"""Changes outside the backend (docs/verify.md): for a context that fails a named assumption, the change to the
component the assumption is about (the scheduler, the algorithm, the runner, the worker) that restores it, made on
the context and verified there by the model; the component named where no such change is known."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable

from fencecheck.verdict import RaceId
from fencecheck.scenario import Scenario
from fencecheck.vocab import SharedReadEnds

from .decision import Decision
from .swap import ours
from .symbolic_contexts import RULE

#: The component that must change when a context fails an assumption and no change to the backend removes its race.
COMPONENT = {
    "named_runner_is_last_reader": "the worker/algorithm (last_shared_read_runner must name the last reading runner)",
    "sound_fallback": "the runner (IN_REPLAY without a marker must resolve to POST_REPLAY)",
    "honest_declarations": "another backend of the context (its reads lie outside its declaration)",
    "plan_stream_joined_before_replay": "the runner (join the plan stream into F before the launch)",
    "barrier_on": "the scheduler (the WAR barrier must be on)",
    "barrier_after_run_batch": "the scheduler (apply the barrier right after run_batch)",
    "last_reader_resolves": "the runner of the last reading phase (publish by resolving the declaration) or the "
                            "worker (clear the mailbox after it)",
    "last_reader_publishes": "the runner or the worker/algorithm (the last reading phase publishes nothing: its mode "
                             "resolves UNKNOWN or it runs eagerly; the worker must clear the mailbox after it, or the "
                             "step must name a runner that publishes)",
    "worker_reads_cleared": "the worker (clear the mailbox after the phase its reads follow)",
}


@dataclass
class ComponentChange:
    """A change to a component of the context other than the backend, restoring the named assumptions it fails, and
    what the model finds with it. ``verified``: in a context that races with any backend, it no longer does (some
    stand-in backend is race-free there); else no read of this backend races there. ``races``: the races left at
    this backend's reads with the change made."""

    scenario: str
    assumptions: tuple[str, ...]
    component: str  # the scheduler, the algorithm, the runner, the worker
    change: str  # the change, in SGLang's terms
    verified: bool
    races: tuple[RaceId, ...]  # the races at the backend's reads with the change made
    anyway: bool = False  # judged as a context that races with any backend

    def text(self) -> str:
        head = f"{self.component} must change: {self.change}"
        left = "; ".join(sorted({r.place().text() for r in self.races}))
        if self.verified and not self.races:
            return f"{head}; verified: with it no read of this backend races in {self.scenario}"
        if self.verified:
            return (f"{head}; verified: with it a backend that reads the same locations can be race-free in "
                    f"{self.scenario} (this one's reads still race there at {left}: see the advice)")
        if self.anyway:
            return f"{head}; not enough: with it every backend that reads the same locations still races in " \
                   f"{self.scenario}"
        return f"{head}; not enough: with it this backend's reads still race in {self.scenario} at {left}"

    def to_dict(self) -> dict:
        return {"scenario": self.scenario, "assumptions": list(self.assumptions), "component": self.component,
                "change": self.change, "verified": self.verified, "races": [r.to_dict() for r in self.races]}


def _reads_shared(s: Scenario, p) -> bool:
    from .concrete import read_sites
    return any(read_sites(s, p.backend, p.mode).values()) or bool(p.worker_reads_after)


def _last_readers(s: Scenario):
    """(step kind, index, phase) of each step kind's last phase that reads shared state."""
    out = []
    for kind in dict.fromkeys(s.step_kinds):
        phases = s.algorithm.steps[kind]
        last = [i for i, p in enumerate(phases) if _reads_shared(s, p)]
        if last:
            out.append((kind, last[-1], phases[last[-1]]))
    return out


def _set_phase(s: Scenario, kind, i: int, **changes) -> Scenario:
    steps = dict(s.algorithm.steps)
    phases = list(steps[kind])
    phases[i] = dataclasses.replace(phases[i], **changes)
    steps[kind] = tuple(phases)
    return s.replace(algorithm=dataclasses.replace(s.algorithm, steps=steps))


def _fix(s: Scenario, name: str, decision: Decision):
    """(component, change, scenario with the change made) restoring assumption ``name`` in ``s``; None where no
    change of the context's own is known (another backend's declaration is the backend author's, not SGLang's). A
    change that leaves ``s`` as it is is not offered (``component_change``)."""
    from fencecheck.vocab import BarrierPlacement, Execution, PlanJoin, PrepStream, PublishPolicy

    if name == "barrier_on":
        return "the scheduler", "turn the WAR barrier on", s.replace(
            scheduler=dataclasses.replace(s.scheduler, barrier=True))
    if name == "barrier_after_run_batch":
        return "the scheduler", "apply the WAR barrier right after run_batch returns", s.replace(
            scheduler=dataclasses.replace(s.scheduler, placement=BarrierPlacement.AFTER_RUN_BATCH))
    if name == "sound_fallback":
        return ("the runner", "resolve IN_REPLAY on a runner without its marker to POST_REPLAY (resolution "
                f"{RULE.value})", s.replace(resolution=RULE))
    if name == "named_runner_is_last_reader":
        publisher = dict(s.algorithm.publisher)
        said = []
        for kind, _, p in _last_readers(s):
            if publisher[kind] != p.runner:
                publisher[kind] = p.runner
                said.append(f"{p.runner} in {kind.value} steps (the runner of {p.name}, the step's last reading "
                            "phase)")
        return ("the algorithm", "set last_shared_read_runner to " + ", ".join(said),
                s.replace(algorithm=dataclasses.replace(s.algorithm, publisher=publisher)))
    if name == "plan_stream_joined_before_replay":
        said, out = [], s
        for kind, phases in s.algorithm.steps.items():
            for i, p in enumerate(phases):
                if p.prep_stream is PrepStream.PLAN and p.plan_join is not PlanJoin.BEFORE_REPLAY:
                    out = _set_phase(out, kind, i, plan_join=PlanJoin.BEFORE_REPLAY)
                    said.append(f"{p.name} ({kind.value} steps)")
        return ("the runner", "join the plan stream into F before the launch (F.wait_stream(P)) in "
                + ", ".join(said), out)
    if name == "last_reader_resolves":
        runners, said = dict(s.runners), []
        for kind, _, p in _last_readers(s):
            r = runners[p.runner]
            if r.publish is not PublishPolicy.RESOLVE and not p.clear_mailbox_after:
                runners[p.runner] = dataclasses.replace(r, publish=PublishPolicy.RESOLVE)
                said.append(f"runner {p.runner} (of {p.name}, {kind.value} steps)")
        return ("the runner", "publish by resolving the backend's declaration (publish = resolve): "
                + ", ".join(dict.fromkeys(said)), s.replace(runners=runners))
    if name in ("last_reader_publishes", "worker_reads_cleared"):
        said, out = [], s
        for kind, i, p in _last_readers(s):
            if p.clear_mailbox_after:
                continue
            steps = [n for n in range(1, s.steps + 1) if s.step_kind(n) is kind]
            silent = p.execution is Execution.EAGER or any(
                decision.resolved.get((n, i), 0) == int(SharedReadEnds.UNKNOWN) for n in steps)
            if (silent if name == "last_reader_publishes" else bool(p.worker_reads_after)):
                out = _set_phase(out, kind, i, clear_mailbox_after=True)
                said.append(f"{p.name} ({kind.value} steps, runner {p.runner})")
        return ("the worker", "clear the runner's mailbox after the step's last reading phase "
                "(clear_mailbox_after): " + ", ".join(said), out)
    return None


def component_change(s: Scenario, failed: list[str], decide: Callable[[Scenario], Decision], name: str,
                     anyway: Callable[[Scenario], bool] | None = None) -> ComponentChange | None:
    """The smallest change outside the backend that the model verifies in ``s`` (the backend swapped in): each
    failed assumption's change alone, in the order of model/assumptions.py, then all of them together; else the
    change of all of them with what it leaves. ``anyway``: ``s`` races with any backend, and this tells whether a
    scenario still does (a change is verified when it no longer does); None: verified when no read of this backend
    races. None if ``s`` fails no assumption that names such a change."""
    decision = decide(s)
    fixes = [(n, f) for n in failed if (f := _fix(s, n, decision)) is not None and repr(f[2]) != repr(s)]
    if not fixes:
        return None

    def judge(names, component, change, fixed) -> ComponentChange:
        races = ours(fixed, decide(fixed).report.races)
        ok = not anyway(fixed) if anyway is not None else not races
        return ComponentChange(name, names, component, change, ok, races, anyway is not None)

    tried = []
    for n, (component, change, fixed) in fixes:
        cc = judge((n,), component, change, fixed)
        if cc.verified:
            return cc
        tried.append(cc)
    if len(fixes) == 1:
        return tried[0]
    both = s
    for n, _ in fixes:
        both = _fix(both, n, decide(both))[2]
    return judge(tuple(n for n, _ in fixes), " and ".join(dict.fromkeys(c for _, (c, _, _) in fixes)),
                 "; ".join(ch for _, (_, ch, _) in fixes), both)
