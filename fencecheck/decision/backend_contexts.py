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

from fencecheck.vocab import ForwardMode, base_shared_read_ends


@dataclass(frozen=True)
class TreeRace:
    """A generated configuration where the backend's phases race: the races, the model's verdict and whether an
    honest backend races there too (``own``)."""

    configuration: str
    races: tuple[str, ...]
    model_verdict: str | None  # None: a configuration's own race, the model not asked (``tree_races``)
    own: bool

    def to_json(self) -> dict:
        return {"configuration": self.configuration, "races": list(self.races), "model_verdict": self.model_verdict,
                "own": self.own}


def honest_table(table: dict, modes) -> dict:
    """The base-rule honest backend in the place of the backend file ``table`` (``model.swap.honest_stand_in``, the
    one the catalog contexts compare with), over ``modes``: the base rule reading the file's locations at every site
    it covers."""
    from fencecheck.files.scenario_io import backend_from_dict
    from fencecheck.model.backend_facts import mode_facts
    from fencecheck.model.swap import honest_reads

    facts = [f for f in mode_facts(backend_from_dict({"name": "backend", **table}, table.get("name", "backend")))
             if f.mode.value in modes]
    return {"declares": {m: base_shared_read_ends(ForwardMode[m]).name for m in modes},
            "reads": {m: {s.value: list(locs) for s, locs in sites.items()}
                      for m, sites in honest_reads(facts).items()}}


def _with(ctx: dict, name: str, backends: dict, modes: set[str]) -> dict:
    steps = {k: [dict(ph, backend=name) if ph["mode"] in modes else ph for ph in v]
             for k, v in ctx["algorithm"]["steps"].items()}
    return {**ctx, "algorithm": {**ctx["algorithm"], "steps": steps}, "backends": {**ctx["backends"], **backends}}


#: A generated configuration's keys that only name and cite it: two configurations equal but for these are one
#: scenario, decided once (``tree_races``'s memo).
_NAMING = ("name", "description", "cites")


def _decided(memo: dict, data: dict, name: str, decide):
    """``decide(scenario)`` of the scenario ``data`` (named ``name``), once per content: ``memo`` keyed by the table
    without its naming keys (the simulator's and the model's answers depend on nothing else)."""
    import json

    key = json.dumps({k: v for k, v in data.items() if k not in _NAMING}, sort_keys=True, default=str)
    if key not in memo:
        from fencecheck.files.scenario_io import scenario_from_dict

        memo[key] = decide(scenario_from_dict(data, name, validate=False))
    return memo[key]


def tree_races(source, table: dict, memo: dict | None = None, own_models: bool = True) -> tuple[int, list[TreeRace]]:
    """(how many of the tree's configurations run a mode the backend file ``table`` covers, the races there).
    ``memo``: answers shared by the calls of one report (its backend files differ in a few rows, and many
    configurations differ only in their names and citations). The model is asked of every race the backend
    brings; of a configuration's own race (an honest backend races there too) only with ``own_models`` (the text
    report shows no verdict of those). The model's answer is its host program run on the configuration's values
    (``model.decision``, as ``verify`` decides the catalog's contexts): the answer the solver gives for the pinned
    scenario (``model_check``; tests/test_verify_sglang.py holds the two equal on a tree's configurations,
    tests/test_proofs.py on every catalog scenario) at about 1/100 of its cost."""
    from fencecheck.model.decision import Decision
    from fencecheck.reference.run import run_scenario
    from fencecheck.reference.sim.races import check_trace
    from fencecheck.sglang_source.contexts import scenario
    from fencecheck.verdict import Verdict

    def simulated(s):
        report = check_trace(run_scenario(s))
        return None if report.verdict is Verdict.PROVED else tuple(sorted({r.key().text() for r in report.races}))

    def honest_races(s):  # the places an honest backend races at (a race's text names no step)
        return simulated(s) or ()

    def modelled(s):  # the model's program run on the scenario's values: the solver's answer, without a query
        return Decision(s).report.verdict.value

    memo = _memo() if memo is None else memo
    conf = source.configurations or {}
    name = table["name"]
    root = {k: v for k, v in table.items() if k not in ("name", "backends", "note")}
    backends = {name: root, **table.get("backends", {})}
    modes = (set(root.get("declares", {})) | set(root.get("reads", {}))) & set(ForwardMode.__members__)
    honest_backend = honest_table(table, modes)
    decided, races = 0, []
    for cfg in sorted(conf.get("configurations", ()), key=lambda c: c["name"]):
        if not cfg["barrier"] or not ({p["mode"] for p in cfg["phases"]} & modes):
            continue
        ctx = scenario(cfg, conf.get("rule"))
        decided += 1
        data = _with(ctx, name, backends, modes)
        got = _decided(memo["sim"], data, cfg["name"], simulated)
        if got is None:
            continue
        honest = _decided(memo["honest"], _with(ctx, "honest", {"honest": honest_backend}, modes), cfg["name"],
                          honest_races)
        own = set(got) <= set(honest)  # nothing beyond the honest backend's races: the configuration's own
        verdict = _decided(memo["model"], data, cfg["name"], modelled) if own_models or not own else None
        races.append(TreeRace(cfg["name"], got, verdict, own))
    return decided, races


def _memo() -> dict:
    return {"sim": {}, "honest": {}, "model": {}}


def _all(source, tables: dict, own_models: bool) -> dict:
    memo = _memo()
    return {k: tree_races(source, t, memo, own_models) for k, t in tables.items()}


@contextmanager
def decided_beside(source, tables: dict, own_models: bool = True):
    """Yields ``get(k)``: ``tree_races(source, tables[k], own_models=own_models)``. The tables are decided in a forked process while the
    caller verifies them against the catalog, when this machine has a second core (``beside``; else here, when
    asked for); the answers are the same either way (each a function of the table and the tree's configurations)."""
    from fencecheck.decision.beside import beside

    with beside(_all, source, tables, own_models) if tables else nullcontext() as result:
        memo = _memo()
        yield ((lambda k: tree_races(source, tables[k], memo, own_models)) if result is None
               else (lambda k: result()[k]))


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
