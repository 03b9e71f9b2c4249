"""Backends no decode graph can replay (``graph_replay.never_replayed``, read from the tree): each of their findings in
a graph-replayed mode is decided again with its phase run eagerly by the tree's eager runner (its publish policy read
from the tree, ``steps.model_runner``), on the simulator. Proved there, the finding's reads become not findings, their
``why`` citing the hook the decode graph runner calls, the base that raises, the eager runner and the scenario; a race
there leaves the finding as it is (decided as usual afterwards).

Runs before the findings are decided (and, in pull-request mode, before the root causes are compared), so every
later step sees the same findings."""

from __future__ import annotations

from dataclasses import replace

from fencecheck.files.scenario_io import scenario_from_dict
from fencecheck.sglang_source.extract import Extraction
from fencecheck.sglang_source.findings import NotFinding
from fencecheck.sglang_source.records import Backend

#: The scenario vocabulary's publish policy of a runner's publish behaviour (``sglang_source.contexts``).
_POLICY = {"resolve": "resolve", "clear_then_resolve": "clear_then_resolve",
           "publish_unconditionally": "always_pre_replay", "prefill_publish": "prefill", "never": "never"}


def _eager(ex: Extraction) -> dict | None:
    rows = [r for r in ((ex.facts.get("steps") or {}).get("model_runner") or ()) if r["role"] == "eager"]
    return rows[0] if len(rows) == 1 and rows[0]["policy"] in _POLICY else None


def demote_never_replayed(ex: Extraction) -> tuple[Extraction, list]:
    """``ex`` with the graph-mode findings of the backends no decode graph replays moved to its not findings where
    their eager scenario is proved, and those scenarios."""
    from fencecheck.decision.findings import scenario_dict, tree_rule

    facts = ex.facts.get("graph_replay") or {}
    never = {f"{r['file']}:{r['line']}": r for r in facts.get("never_replayed", ())}
    eager = _eager(ex)
    if not never or eager is None:
        return ex, []
    hooks = {h["hook"]: h for h in facts.get("hooks", ()) if h["base"] and h["base"]["raises"]}
    backends: dict[str, Backend] = {b.at: b for b in ex.backends}
    rule = tree_rule(ex)
    keep, moved, built = [], [], []
    for f in ex.findings:
        row = never.get(f.subject_at)
        if f.kind != "read_outside_declaration" or row is None or f.mode not in row["modes"]:
            keep.append(f)
            continue
        data = scenario_dict(f, backends[f.subject_at], 0, rule, eager=_POLICY[eager["policy"]])
        if data is None:
            keep.append(f)
            continue
        data["name"] += "-eager"
        s = scenario_from_dict(data, data["name"])
        if not proved(s):
            keep.append(f)  # both oracles must prove it before a finding is dropped
            continue
        h = hooks[row["hook"]]
        why = (f"never replayed in a decode graph: {f.subject} inherits {row['hook']} from {h['base']['class']}, "
               f"which only raises NotImplementedError ({h['base']['file']}:{h['base']['line']}), and "
               f"{facts['runner']['class']} calls it unconditionally while it is built ({h['function']}, "
               f"{h['file']}:{h['line']}): its {f.mode} runs eagerly, on the eager runner {eager['class']} "
               f"({eager['file']}:{eager['line']}, {eager['policy']}); scenario {s.name}: proved")
        moved += not_findings_of(f, why)
        built.append(s)
    return with_not_findings(ex, keep, moved), built


def proved(s) -> bool:
    """Whether the simulator and the model both prove the scenario ``s``."""
    from fencecheck.model.check import model_check
    from fencecheck.reference.run import run_scenario
    from fencecheck.reference.sim.races import check_trace
    from fencecheck.verdict import Verdict

    return check_trace(run_scenario(s)).verdict is Verdict.PROVED and model_check(s).verdict is Verdict.PROVED


def not_findings_of(f, why: str) -> list[NotFinding]:
    """The not findings the reads of the finding ``f`` outside its declaration become, each with ``why``."""
    return [NotFinding(f.subject, f.mode, r.location, r.file, r.line, tuple(v.text() for v in r.via), why)
            for _, r in f.uncovered]


def with_not_findings(ex: Extraction, keep: list, moved: list) -> Extraction:
    """``ex`` with ``keep`` as its findings and ``moved`` among its not findings (each once, sorted)."""
    if not moved:
        return ex
    unique = {(n.subject, n.mode or "", n.file, n.line, n.location, n.why): n for n in ex.not_findings + tuple(moved)}
    return replace(ex, findings=tuple(keep), not_findings=tuple(unique[k] for k in sorted(unique)))
