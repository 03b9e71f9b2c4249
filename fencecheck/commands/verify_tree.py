"""``verify --sglang``: the backend as read, in every configuration the tree's own facts generate (the configurations
``fencecheck sglang`` decides its findings in: ``sglang_source.contexts``), besides the symbolic family and the
catalog.

Each configuration that runs a phase of a mode the backend declares or reads in is run with those phases on the
backend (its children beside it), by the simulator; where it races, the model is asked too, and the same
configuration is run with an honest backend instead (the base rule, reading at every site its declaration covers):
a race there as well is the configuration's own, not one the backend brings."""

from __future__ import annotations

from contextlib import contextmanager, nullcontext
from dataclasses import dataclass

from fencecheck.vocab import COVERED_SITES, ForwardMode, base_shared_read_ends


@dataclass(frozen=True)
class TreeRace:
    """A generated configuration where the backend's phases race: the races, the model's verdict and whether an
    honest backend races there too (``own``)."""

    configuration: str
    races: tuple[str, ...]
    model_verdict: str
    own: bool

    def to_json(self) -> dict:
        return {"configuration": self.configuration, "races": list(self.races), "model_verdict": self.model_verdict,
                "own": self.own}


def _honest(modes) -> dict:
    ends = {m: base_shared_read_ends(ForwardMode[m]) for m in modes}
    return {"declares": {m: e.name for m, e in ends.items()},
            "reads": {m: {s.value: ["req_to_token"] for s in COVERED_SITES[e] if s.value != "worker_after"}
                      for m, e in ends.items()}}


def _with(ctx: dict, name: str, backends: dict, modes: set[str]) -> dict:
    steps = {k: [dict(ph, backend=name) if ph["mode"] in modes else ph for ph in v]
             for k, v in ctx["algorithm"]["steps"].items()}
    return {**ctx, "algorithm": {**ctx["algorithm"], "steps": steps}, "backends": {**ctx["backends"], **backends}}


def tree_races(source, table: dict) -> tuple[int, list[TreeRace]]:
    """(how many of the tree's configurations run a mode the backend file ``table`` covers, the races there)."""
    from fencecheck.files.scenario_io import scenario_from_dict
    from fencecheck.model.check import model_check
    from fencecheck.reference.run import run_scenario
    from fencecheck.reference.sim.races import check_trace
    from fencecheck.sglang_source.contexts import scenario
    from fencecheck.verdict import Verdict

    conf = source.configurations or {}
    name = table["name"]
    root = {k: v for k, v in table.items() if k not in ("name", "backends", "note")}
    backends = {name: root, **table.get("backends", {})}
    modes = (set(root.get("declares", {})) | set(root.get("reads", {}))) & set(ForwardMode.__members__)
    decided, races = 0, []
    for cfg in sorted(conf.get("configurations", ()), key=lambda c: c["name"]):
        if not cfg["barrier"] or not ({p["mode"] for p in cfg["phases"]} & modes):
            continue
        ctx = scenario(cfg, conf.get("rule"))
        decided += 1
        s = scenario_from_dict(_with(ctx, name, backends, modes), cfg["name"], validate=False)
        report = check_trace(run_scenario(s))
        if report.verdict is Verdict.PROVED:
            continue
        honest = scenario_from_dict(_with(ctx, "honest", {"honest": _honest(modes)}, modes), cfg["name"],
                                    validate=False)
        own = check_trace(run_scenario(honest)).verdict is not Verdict.PROVED
        races.append(TreeRace(cfg["name"], tuple(sorted({r.key().text() for r in report.races})),
                              model_check(s).verdict.value, own))
    return decided, races


def _all(source, tables: dict) -> dict:
    return {k: tree_races(source, t) for k, t in tables.items()}


@contextmanager
def decided_beside(source, tables: dict):
    """Yields ``get(k)``: ``tree_races(source, tables[k])``. The tables are decided in a forked process while the
    caller verifies them against the catalog, when this machine has a second core (``common.beside``; else here, when
    asked for); the answers are the same either way (each a function of the table and the tree's configurations)."""
    from fencecheck.commands.common import beside

    with beside(_all, source, tables) if tables else nullcontext() as result:
        yield (lambda k: tree_races(source, tables[k])) if result is None else (lambda k: result()[k])


def tree_text(decided: int, races: list[TreeRace]) -> list[str]:
    brought = [r for r in races if not r.own]
    lines = [f"the tree's generated configurations: {decided} run a phase of a mode it covers; "
             f"{len(brought)} race with it and not with an honest backend, {len(races) - len(brought)} race with "
             "an honest backend too (the configuration's own)"]
    for r in brought[:8]:
        lines.append(f"    {r.configuration}: {', '.join(r.races)} (model {r.model_verdict})")
    if len(brought) > 8:
        lines.append(f"    ... and {len(brought) - 8} more (--json lists them)")
    return lines
