"""``fencecheck audit``: prove, check the catalog, decide the released SGLang, generate and replay the corpus, and
write docs/audit/.

Each part is run whatever the others did, and its outcome is reported in the summary table: a failing part fails the
audit (exit 1; 3 when the only shortfall is an unknown verdict), it is never left out. A part that did not run (the
reader's part without the release's sources installed) is reported as ``skipped``, never as ``ok``; it fails
nothing.
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path
from typing import Callable, TextIO

from fencecheck.commands.audit_parts import CheckText, Part, race_section
from fencecheck.commands.audit_release import (
    READER_PART,
    RELEASE_DOC,
    RELEASE_PART,
    RELEASE_VERSION,
    reader_part,
    release_document,
    release_part,
)
from fencecheck.commands.check import check_witness_text
from fencecheck.commands.common import PROGRESS_HELP, outputs
from fencecheck.errors import one_line
from fencecheck.files.outputs import write_text_atomic, write_tree
from fencecheck.verdict import Race, Verdict, agreement, oracles_agree

#: What ``fencecheck audit`` writes under the docs folder, replaced as a whole on every run.
DOCUMENT_SET = ("audit", "counterexamples", "proofs.md")


def versions() -> list[tuple[str, str]]:
    """What the documents' bytes depend on: fencecheck and the solver (pinned exactly)."""
    from fencecheck import __version__
    from fencecheck.model.solver import version

    return [("fencecheck", __version__), ("z3", version())]


def environment() -> dict[str, str]:
    """The machine a run happened on and the other packages it had (the timings file, never a document)."""
    from importlib import metadata

    out = {"python": platform.python_version(), "platform": platform.platform()}
    for dist in ("z3-solver", "cvc5", "torch", "hypothesis", "networkx", "jsonschema", "tomli_w", "tqdm"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "not installed"
    return out


def timings_text(parts: list[Part], state: dict) -> str:
    """The run's times, rates and environment as JSON (written beside the build, not committed)."""
    import json

    from fencecheck.proofs.suite import timings_text as proof_timings

    data = {
        "environment": environment(),
        "seconds": round(sum(p.seconds for p in parts), 3),
        "parts": {p.name: round(p.seconds, 3) for p in parts},
        "replay_traces_per_s": round(state.get("replay_rate", 0.0), 1),
        "proofs": json.loads(proof_timings(state["results"])) if state.get("results") else None,
    }
    return json.dumps(data, indent=1) + "\n"


def run_audit(docs: Path, corpus_dir: Path, err: TextIO, progress: bool, timings: Path | None = None,
              check_text: "CheckText | None" = None) -> list[Part]:
    """Run the four parts, then write the whole document set under ``docs`` (``proofs.md``, ``counterexamples/``,
    ``audit/``) in one swap: an interrupted audit leaves the old documents, never a mix. The corpus is written to
    ``corpus_dir``; times, rates and the machine go to ``timings`` (JSON), never into a document, so the documents
    are the same bytes on every machine. ``check_text`` renders ``fencecheck check FILE --witness`` for the release
    document (the command line passes its own; without it the release part fails, saying so)."""
    from fencecheck.commands.traces import build_and_write, corpus_size
    from fencecheck.files.catalog import PR_ERA, load_catalog
    from fencecheck.files.corpus_io import read
    from fencecheck.proofs.documents import doc_table
    from fencecheck.proofs.suite import document_files, prove_all
    from fencecheck.reference.check import check_scenario
    from fencecheck.reference.replay import replay

    parts: list[Part] = []
    stages = 6

    def stage(n: int, name: str, fn: Callable[[], Part]) -> None:
        err.write(f"[{n}/{stages}] {name} ...\n")
        t = time.perf_counter()
        try:
            part = fn()
        except Exception as exc:  # a part that breaks is reported as failed, with what broke it
            part = Part(name, False, f"failed: {exc.__class__.__name__}: {one_line(exc)}", 0.0)
        part.seconds = time.perf_counter() - t
        err.write(f"[{n}/{stages}] {name}: {part.status()} - {part.summary} ({part.seconds:.1f} s)\n")
        parts.append(part)

    state: dict = {}

    def prove() -> Part:
        results = prove_all(jobs=min(2, os.cpu_count() or 1))  # the documents are the same bytes for any jobs
        state["results"], state["proof_files"] = results, document_files(results)
        bad = [r for r in results if not r.ok]
        unknown = [r for r in bad if r.verdict is Verdict.UNKNOWN]
        return Part("proof obligations", not bad, f"{len(results) - len(bad)} of {len(results)} as expected"
                    + (f", {len(unknown)} unknown" if unknown else ""), 0.0, unknown=bool(unknown) and
                    len(unknown) == len(bad), lines=doc_table(results).splitlines())

    def catalog() -> Part:
        from fencecheck.model.decision import Decision

        rows, bad = [], 0
        for s in load_catalog(PR_ERA):
            sim, mod = check_scenario(s), Decision(s).report
            want = s.expect.verdict.value if s.expect else "-"
            got = sim.verdict.value
            agree = (oracles_agree((sim.verdict, [r.id for r in sim.races]), (mod.verdict, mod.races))[0]
                     and (s.expect is None or agreement(s.expect, sim.verdict, [r.id for r in sim.races])[0]))
            bad += not agree
            keys = "; ".join(f"`{k.text()}`" for k in sorted({r.key() for r in sim.races})) or "-"
            rows.append(f"| {s.name} | {got} | {mod.verdict.value} | {want} | {'yes' if agree else 'NO'} | {keys} |")
            state.setdefault("catalog_races", []).extend((s.name, r) for r in sim.distinct())
        return Part("catalog", bad == 0, f"{len(rows) - bad} of {len(rows)} scenarios: simulator, model and "
                    "expectation agree", 0.0, lines=rows)

    def corpus() -> Part:
        from fencecheck.commands.progress import progress_bar

        bar = progress_bar(corpus_size(), "generating", progress, err)
        try:
            build_and_write(corpus_dir, bar.update)
        finally:
            bar.close()
        header, records = read(corpus_dir)
        state["records"], state["header"] = records, header
        stats = header["statistics"]
        lines = [f"| {fam} | {st['configurations']} | {st['behaviours']} |" for fam, st in stats.items()]
        total = sum(st["configurations"] for st in stats.values())
        return Part("corpus", True, f"{total} configurations -> {len(records)} distinct traces", 0.0, lines=lines)

    def replay_part() -> Part:
        from fencecheck.commands.replay import replay_summary

        records = state.get("records")
        if records is None:
            return Part("replay", False, "no corpus to replay", 0.0)
        t = time.perf_counter()
        results = [replay(r) for r in records]
        rate = len(results) / max(time.perf_counter() - t, 1e-9)
        rows, problems = replay_summary(results)
        state["replay_rate"] = rate
        lines = [f"| {' | '.join(map(str, r))} |" for r in rows] + [f"- DISAGREEMENT {p}" for p in problems]
        return Part("replay", not problems, f"{len(results)} traces, {len(problems)} disagreements", 0.0,
                    lines=lines)

    stage(1, "proof obligations", prove)
    stage(2, "catalog", catalog)
    stage(3, RELEASE_PART, lambda: release_part(state, check_text))
    stage(4, "corpus", corpus)
    stage(5, "replay", replay_part)
    stage(6, READER_PART, lambda: reader_part(state))
    proofs = state.get("proof_files") or {"proofs.md": "# Proof obligations\n\nNot generated: the proof part of "
                                                        "`fencecheck audit` failed (see audit/README.md).\n"}
    write_tree(docs, {**proofs, **audit_documents(parts, state)}, names=DOCUMENT_SET)
    if timings is not None:
        write_text_atomic(timings, timings_text(parts, state))
    return parts


def audit_documents(parts: list[Part], state: dict) -> dict[str, str]:
    """The documents of ``audit/`` (paths relative to the docs folder)."""
    files: dict[str, str] = {}
    index = [
        "# fencecheck audit",
        "",
        "Generated by `fencecheck audit --docs docs`; do not edit by hand. Every part runs on the CPU simulator (the "
        "embedded default device) and the SMT model; a part that disagrees fails the audit.",
        "",
        "| part | result | summary |",
        "| --- | --- | --- |",
    ]
    index += [f"| {p.name} | {p.status()} | {p.summary} |" for p in parts]
    index += ["", "Times and the machine of a run are in its timings file (`fencecheck audit --docs docs --timings "
              "build/timings.json`), not here: these documents are the same bytes on every machine.", "",
              "- [Proof obligations and their assumptions](obligations.md) (full statements: [../proofs.md](../proofs.md))",
              "- [Counterexamples, with happens-before diagrams](counterexamples.md)",
              "- [Catalog verdicts](catalog.md) (SGLang at PR #35059)",
              f"- [SGLang {RELEASE_VERSION} as released: verdicts, races, witnesses, fixes]({RELEASE_DOC})",
              "- [Trace corpus and replay](corpus.md)",
              "- [Versions](versions.md)", ""]
    files["audit/README.md"] = "\n".join(index) + "\n"

    by = {p.name: p for p in parts}
    ob = ["# Proof obligations", ""]
    if "proof obligations" in by:
        ob += ["```", *by["proof obligations"].lines, "```", ""]
    from fencecheck.model.assumptions import ASSUMPTIONS

    ob += ["## Assumptions of the main theorem", "", "| name | statement | source |", "| --- | --- | --- |"]
    ob += [f"| `{a.name}` | {a.statement} | {a.source} |" for a in ASSUMPTIONS]
    ob += ["", "Each is shown necessary by `needs/<name>`: dropping it alone gives a counterexample.", ""]
    for r in state.get("results", []):
        if r.obligation.kind == "scenario":
            continue
        ob += [f"### {r.obligation.name}", "", r.obligation.statement, "",
               f"Verdict **{r.verdict.value}** (expected {r.obligation.expected.value}); assumptions: "
               + (", ".join(f"`{n}`" for n in r.obligation.assumptions) or "none") + ".", ""]
    files["audit/obligations.md"] = "\n".join(ob) + "\n"

    from fencecheck.files.catalog import PR_ERA, catalog_file
    from fencecheck.proofs.documents import DOCS, ce_paths
    from fencecheck.reference.sim.races import check_trace

    ce = ["# Counterexamples", "",
          "Each diagram shows the racing read, the scheduler write it is not ordered before, the last kernel of the "
          "read's stream the writer's stream was ordered after (and the wait that ordered it), and the missing edge; "
          "the text of each node is listed above its diagram. Commands run from the repository root.", ""]
    for r in state.get("results", []):
        if r.counterexample is None:
            continue
        report = check_trace(r.counterexample.trace)
        scenario = ce_paths(r)["scenario"]
        ce += [f"## {r.obligation.name}", "", r.obligation.statement, "",
               f"Scenario [{scenario}](../{scenario}); replay with `fencecheck check {DOCS}/{scenario} --witness` "
               "(exit status 1: the race).", ""]
        for race in report.distinct()[:2]:
            ce += race_section(race)
    catalog_races: dict[str, list[Race]] = {}
    for name, race in state.get("catalog_races", []):
        catalog_races.setdefault(name, []).append(race)
    if catalog_races:
        ce += ["## Catalog scenarios that race", ""]
    for name, races in catalog_races.items():
        ce += [f"### catalog/{name}", "",
               f"Check with `fencecheck check {catalog_file(PR_ERA, name)}` (exit status 1: the race).", ""]
        for race in races:
            ce += race_section(race)
    files["audit/counterexamples.md"] = "\n".join(ce) + "\n"

    cat = ["# Catalog", "", "Simulator verdict, model verdict and the scenario's expectation.", "",
           "| scenario | simulator | model | expected | agree | races (location@phase/site) |",
           "| --- | --- | --- | --- | --- | --- |"]
    if "catalog" in by:
        cat += by["catalog"].lines
    files["audit/catalog.md"] = "\n".join(cat) + "\n"

    corpus = ["# Trace corpus", ""]
    if "header" in state:
        h = state["header"]
        corpus += [f"Generated by the model (`fencecheck traces --out build/corpus`), seed {h['seed']}, {h['solver']}; "
                   f"content sha256 `{h['content_sha256']}`.", "",
                   "| family | configurations | distinct traces (behaviours) |",
                   "| --- | --- | --- |"]
        corpus += by["corpus"].lines
        corpus += ["", "Families:", ""] + [f"- `{k}`: {v}" for k, v in h["model"]["families"].items()]
    if "replay" in by:
        corpus += ["", "## Replay on the simulator", "",
                   "Conformance (the reference emits the model's trace op for op), verdicts, races shown by the "
                   "witness interleaving, adversarial interleavings of race-free traces (random and extreme "
                   "schedules) with the stale reads they showed, and PyTorch's stream sanitizer on traces without "
                   "graph replays.", "",
                   "| family | traces | conformant | verdicts agree | races shown | safe: schedules/stale | sanitizer agree |",
                   "| --- | --- | --- | --- | --- | --- | --- |"]
        corpus += by["replay"].lines
    files["audit/corpus.md"] = "\n".join(corpus) + "\n"

    if RELEASE_PART in by:
        files[f"audit/{RELEASE_DOC}"] = release_document(by[RELEASE_PART], state)

    ver = ["# Versions", "", "| component | version |", "| --- | --- |"]
    ver += [f"| {k} | {v} |" for k, v in versions()]
    files["audit/versions.md"] = "\n".join(ver) + "\n"
    return files


def exit_code(parts: list[Part]) -> int:
    if all(p.ok for p in parts):
        return 0
    if all(p.ok or p.unknown for p in parts):
        return 3
    return 1


def cmd_audit(args, out: TextIO) -> int:
    parts = run_audit(Path(args.docs), Path(args.corpus), args.err, args.progress, Path(args.timings),
                      check_text=check_witness_text)
    if args.json:
        json.dump({"passed": exit_code(parts) == 0, "exit_code": exit_code(parts),
                   "documents": str(Path(args.docs) / "audit"),
                   "parts": [{"name": p.name, "status": p.status().lower(),
                              "summary": p.summary, "seconds": round(p.seconds, 3)} for p in parts]}, out, indent=2)
        out.write("\n")
        return exit_code(parts)
    width = max(len(p.name) for p in parts)
    for p in parts:
        status = p.status()
        out.write(f"{p.name.ljust(width)}  {status:7}  {p.summary}  ({p.seconds:.1f} s)\n")
    out.write(f"audit {'passed' if exit_code(parts) == 0 else 'FAILED'} in {sum(p.seconds for p in parts):.1f} s; "
              f"documents in {Path(args.docs) / 'audit'}\n")
    return exit_code(parts)


def add_parser(sub) -> None:
    """The ``audit`` subcommand's arguments."""
    p = sub.add_parser("audit", help="prove, check the catalog, generate and replay the corpus, write docs/audit/")
    p.add_argument("--docs", default="docs", metavar="DIR", help="where the documents go (default: docs)")
    p.add_argument("--corpus", default="build/corpus", metavar="DIR", help="where the corpus is written")
    p.add_argument("--timings", default="build/timings.json", metavar="FILE",
                   help="where the run's times, rates and machine facts go (JSON; not a document)")
    p.add_argument("--json", action="store_true", help="machine-readable parts (name, status, summary, seconds)")
    p.add_argument("--progress", action="store_true", help=PROGRESS_HELP)
    p.set_defaults(func=cmd_audit, **outputs(("docs", True), ("corpus", True), ("timings", False)))
