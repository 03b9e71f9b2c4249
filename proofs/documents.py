"""What ``fencecheck prove`` prints, and the text of docs/proofs.md and the counterexample files beside it.

The generated documents are a function of the obligations and their results alone: no times, no machine, no Python
version (the solver's version is an input: it is pinned). Times go to the separate timings file
(``proofs.suite.timings_text``) and to the table printed on the terminal.
"""

from __future__ import annotations

import json

from fencecheck.files.catalog import catalog_file
from fencecheck.model.assumptions import BY_NAME
from fencecheck.model.solver import LOGIC, SAFETY_TIMEOUT_MS, SEED, version
from fencecheck.verdict import Verdict
from fencecheck.files.scenario_io import dumps

from fencecheck.proofs.obligations import catalog_scenarios
from fencecheck.proofs.runner import UNFENCED, Result

GLYPH = {True: "ok", False: "DIFFERS"}
CE_DIR = "counterexamples"
#: Where the documents live in the repository: commands they print name files from the repository root.
DOCS = "docs"


def _columns(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]


def _tally(results: list[Result]) -> str:
    unknown = sum(r.verdict is Verdict.UNKNOWN for r in results)
    bad = sum(not r.ok for r in results)
    return (f"{len(results)} obligations: {len(results) - bad} as expected, {bad} not"
            + (f" ({unknown} unknown)" if unknown else ""))


def table(results: list[Result], wall: float | None = None) -> str:
    """The terminal's table: verdicts, rlimit consumed against the obligation's rlimit, and wall-clock time (each
    obligation's; at the foot the run's, ``wall``, where given: with worker processes it is less than the sum)."""
    rows = [("obligation", "verdict", "expected", "as expected", "rlimit used", "time s")]
    for r in results:
        rows.append((r.obligation.name, r.verdict.value, r.obligation.expected.value, GLYPH[r.ok],
                     f"{r.rlimit_used:,} of {r.obligation.rlimit:,}" if r.obligation.rlimit else "-",
                     f"{r.seconds:.2f}"))
    total = sum(r.seconds for r in results)
    foot = f"{total:.2f} s" if wall is None else f"{wall:.2f} s wall-clock ({total:.2f} s in obligations)"
    return "\n".join(_columns(rows) + [f"{_tally(results)}; {foot}"]) + "\n"


def _rlimit(r: Result) -> str:
    return f"{r.obligation.rlimit:,}" if r.obligation.rlimit else "-"


def _catalogs(results: list[Result]) -> dict[str, list[Result]]:
    """The catalog obligations by catalog version, in the order they first appear."""
    out: dict[str, list[Result]] = {}
    for r in results:
        if r.obligation.kind == "scenario":
            out.setdefault(r.obligation.catalog, []).append(r)
    return out


def doc_table(results: list[Result]) -> str:
    """docs/proofs.md's table: what is the same on every run. A catalog's configurations take one line (each has a
    row of the catalog's own table below)."""
    rows = [("obligation", "verdict", "expected", "as expected", "queries", "size", "rlimit")]
    for r in results:
        if r.obligation.kind != "scenario":
            rows.append((r.obligation.name, r.verdict.value, r.obligation.expected.value, GLYPH[r.ok],
                         str(len(r.queries)), str(r.size) if r.size else "-", _rlimit(r)))
    lines = _columns(rows)
    for version, rs in _catalogs(results).items():
        prefix = rs[0].obligation.name.split("/")[0]
        lines.append(f"{prefix}/* ({len(rs)} configurations of {catalog_file(version, '*')}): "
                     f"{sum(r.ok for r in rs)} as expected, {sum(not r.ok for r in rs)} not; "
                     f"{sum(r.verdict is Verdict.COUNTEREXAMPLE for r in rs)} race")
    return "\n".join(lines + [_tally(results)]) + "\n"


def catalog_tables(results: list[Result]) -> list[str]:
    """docs/proofs.md's section on the catalog obligations: per catalog version, one row per configuration."""
    groups = _catalogs(results)
    if not groups:
        return []
    out = [
        "## Catalog configurations",
        "",
        "One obligation per configuration of each catalog: the model's verdict on the configuration for its own "
        "number of steps, which must be the one the configuration expects, with the simulator agreeing race for race "
        "(racing reads counted once per step). The model decides a configuration by running its program (the host "
        "program the symbolic obligations hand to the solver) on the configuration's concrete values: no solver "
        "query; on every catalog configuration, and on every configuration a non-vacuity check below decides, that "
        "gives the verdict and the races the solver gives for the configuration pinned (tests/test_proofs.py). "
        "Non-vacuity of a race-free configuration: with its barrier switched off it races (\"fence taken away\"); where its event loop orders "
        "the scheduler's writes after the forward without the barrier (`normal`, `pp`), it races with the barrier "
        "off under the overlap loop (\"(overlap loop)\").",
        "",
    ]
    for version, rs in groups.items():
        prefix = rs[0].obligation.name.split("/")[0]
        out += [f"### {prefix}/*: `{catalog_file(version, '*')}`", "",
                "| configuration | steps | verdict | expected | as expected | racing reads | simulator agrees | "
                "fence taken away | races at |",
                "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for r in rs:
            ob = r.obligation
            s = catalog_scenarios(ob.catalog)[ob.scenario]
            unfenced = "; ".join(("races" if ok else "NO race") + ("" if label == UNFENCED else " (overlap loop)")
                                 for label, ok in r.nonvacuity) or "-"
            places = "; ".join(f"`{p.text()}`" for p in sorted({x.place() for x in r.races})) or "-"
            out.append(f"| [{ob.name}](../{catalog_file(ob.catalog, ob.scenario)}) | {s.steps} | {r.verdict.value} | "
                       f"{ob.expected.value} | {GLYPH[r.ok]} | {len(r.races)} | {'yes' if r.agrees else 'NO'} | "
                       f"{unfenced} | {places} |")
        out.append("")
    return out


def ce_stem(r: Result) -> str:
    return r.obligation.name.replace("/", "__")


def ce_paths(r: Result) -> dict[str, str]:
    """Paths of ``r``'s counterexample files, relative to the docs directory."""
    stem = ce_stem(r)
    return {"scenario": f"{CE_DIR}/{stem}.toml", "trace": f"{CE_DIR}/{stem}.trace.json",
            "witness": f"{CE_DIR}/{stem}.witness.json"}


def counterexample_files(r: Result) -> dict[str, str]:
    """Scenario, the model's trace and the witness interleaving of ``r``'s counterexample: relative path -> text."""
    ce = r.counterexample
    paths = ce_paths(r)
    return {
        paths["scenario"]: dumps(ce.scenario),
        paths["trace"]: ce.trace.to_json(indent=1) + "\n",
        paths["witness"]: json.dumps(ce.witness(), indent=1) + "\n",
    }


def markdown(results: list[Result]) -> str:
    """docs/proofs.md; counterexample links are relative to the docs directory."""
    out = [
        "# Proof obligations",
        "",
        "Generated by `fencecheck prove --docs docs`; do not edit by hand. Each obligation states a property of the "
        "model of SGLang's shared-read fence (`model/`), within bounds, under assumptions; the verdict is the "
        "solver's: `proved` (no configuration in the family races), `counterexample` (a minimal configuration that does, "
        "replayable), or `unknown` (the solver ran out of budget: never read as proved). A catalog configuration is "
        "one configuration: the model's program decides it on its values (\"Catalog configurations\", below).",
        "",
        f"Solver: z3 {version()} (pinned exactly in pyproject.toml: another release may search differently and find "
        f"another counterexample), logic {LOGIC}, random seed {SEED}. Every check is bounded by z3's deterministic "
        "resource limit, the obligation's `rlimit` (about 4x what its costliest check consumes; `fencecheck prove "
        "--docs docs` prints the figures), so a verdict and a counterexample are the same on every machine and "
        "under any load; "
        f"a wall-clock limit of {SAFETY_TIMEOUT_MS // 60_000} minutes per check is only a safety net, and if it "
        "fired the verdict would be unknown. Each obligation is evaluated in a solver context of its own, so its "
        "result does not depend on which obligations ran before it.",
        "",
        "```",
        doc_table(results).rstrip(),
        "```",
        "",
        "## Assumptions of the main theorem",
        "",
        "| name | statement | source |",
        "| --- | --- | --- |",
    ]
    for a in BY_NAME.values():
        out.append(f"| `{a.name}` | {a.statement} | {a.source} |")
    out += ["", "Each is shown necessary by the obligation `needs/<name>`, which drops it alone and finds a "
            "counterexample.", ""]
    from fencecheck.proofs.cutoff import ARGUMENT

    out += [ARGUMENT]
    for r in results:
        ob = r.obligation
        if ob.kind == "scenario":  # the catalogs' tables, below
            continue
        out += [f"## {ob.name}", "", ob.statement, ""]
        out.append(f"- Bounds: {ob.bounds.text()}.")
        out.append("- Assumptions: " + (", ".join(f"`{n}`" for n in ob.assumptions) or "none") + ".")
        if ob.extra:
            out.append("- Restricted to: " + ", ".join(f"`{e}`" for e in ob.extra) + ".")
        out.append(f"- Verdict: **{r.verdict.value}** (expected {ob.expected.value}){' - ' + r.reason if r.reason else ''}; "
                   f"{len(r.queries)} solver queries; largest encoding {r.size} assertions; rlimit {ob.rlimit:,} "
                   "per check.")
        for label, ok in r.nonvacuity:
            out.append(f"- Non-vacuity: {label}: {'yes' if ok else 'NO'}.")
        for q in r.queries if ob.kind in ("induction", "phases") else []:
            out.append(f"- {q.label}: {q.verdict.value}.")
        for note in r.notes:
            out.append(f"- {note}.")
        if r.counterexample is not None:
            ce = r.counterexample
            loc, phase, site = ce.race_key()
            paths = ce_paths(r)
            out.append(f"- Counterexample (minimal: {ce.bounds.phases} phase(s), {ce.bounds.steps} step(s), "
                       f"{ce.reads} read(s)): the read of `{loc}` by `{phase}` at `{site}` in step {ce.race.step} races "
                       f"the next write. Scenario [{paths['scenario']}]({paths['scenario']}), trace "
                       f"[{paths['trace']}]({paths['trace']}), witness interleaving [{paths['witness']}]({paths['witness']}). "
                       f"Replay from the repository root: `fencecheck check {DOCS}/{paths['scenario']} --witness` "
                       "(exit status 1: the race).")
        out.append("")
    out += catalog_tables(results)
    return "\n".join(out)
