"""``fencecheck audit``: prove, check the catalog, decide the released SGLang, generate and replay the corpus, and
write docs/audit/.

Each part is run whatever the others did, and its outcome is reported in the summary table: a failing part fails the
audit (exit 1; 3 when the only shortfall is an unknown verdict), it is never left out.
"""

from __future__ import annotations

import os
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, TextIO

from .atomic import write_text_atomic, write_tree
from .errors import one_line
from .report import Race, Verdict, agreement, oracles_agree


#: What ``fencecheck audit`` writes under the docs folder, replaced as a whole on every run.
DOCUMENT_SET = ("audit", "counterexamples", "proofs.md")


@dataclass
class Part:
    name: str
    ok: bool
    summary: str
    seconds: float
    unknown: bool = False
    lines: list[str] = field(default_factory=list)


#: Characters written as Mermaid entity codes inside a quoted label: '#' (an entity starts with it), the quote that
#: ends the label, ';' (ends a statement), and '<' '>' '&' (HTML in a label).
_MERMAID_ENTITIES = {"#": "#35;", '"': "#quot;", ";": "#59;", "<": "#lt;", ">": "#gt;", "&": "#amp;"}


def mermaid_label(text: str) -> str:
    """``text`` as a quoted Mermaid label that renders as ``text`` itself: nothing shortened or replaced, the
    characters Mermaid would read otherwise written as its entity codes (``#35;`` for '#', ``#quot;``, ...)."""
    return '"' + "".join(_MERMAID_ENTITIES.get(c, c) for c in text) + '"'


def race_nodes(race: Race) -> list[tuple[str, str, str]]:
    """The diagram's nodes: (id, caption, text). The documents print each text beside the diagram under its caption,
    and the node's label is that text."""
    nodes = [("R", "the racing read", race.read_text()), ("W", "the write it is not ordered before", race.write_text())]
    if race.synced_up_to:
        nodes.append(("K", f"the last kernel of {race.read_stream} that {race.write_stream} was ordered after",
                      race.synced_up_to))
        if race.via:
            nodes.append(("V", "the wait that ordered it", race.via))
    if race.barrier:
        nodes.append(("B", "the barrier", f"barrier of step {race.step}: {race.barrier}"))
    return nodes


def mermaid(race: Race) -> str:
    """The racing read, the write, what the writer's stream was last ordered after, and the missing edge; each
    node's label is its text in ``race_nodes``."""
    lines = ["```mermaid", "flowchart LR"]
    ids = set()
    for node, _, text in race_nodes(race):
        lines.append(f"  {node}[{mermaid_label(text)}]")
        ids.add(node)
    if "K" in ids:
        lines.append(f"  K -->|{race.read_stream} order| R")
        if "V" in ids:
            lines.append("  K --> V")
            lines.append(f"  V -->|{race.write_stream} order| W")
        else:
            lines.append("  K --> W")
    if "B" in ids:
        lines.append(f"  B -->|{race.write_stream} order| W")
    lines.append("  R -.->|missing edge| W")
    lines.append("  style R fill:#fdd,stroke:#c00")
    lines.append("  style W fill:#fdd,stroke:#c00")
    lines.append("```")
    return "\n".join(lines)


def race_section(race: Race) -> list[str]:
    """A race in the documents: each node's caption and text, the diagram, and the missing edge."""
    out = [f"- {node}, {caption}: `{text}`" for node, caption, text in race_nodes(race)]
    return out + ["", mermaid(race), "", f"Missing edge: {race.missing_edge}", ""]


def versions() -> list[tuple[str, str]]:
    """What the documents' bytes depend on: fencecheck and the solver (pinned exactly)."""
    from . import __version__
    from .model.solver import version

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

    from .proofs.suite import timings_text as proof_timings

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
    from .catalog import PR_ERA, load_catalog
    from .corpus_commands import build_and_write, corpus_size
    from .corpus_io import read
    from .proofs.report import doc_table
    from .proofs.suite import document_files, prove_all
    from .reference.check import check_scenario
    from .reference.replay import replay

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
        err.write(f"[{n}/{stages}] {name}: {'ok' if part.ok else 'FAILED'} - {part.summary} ({part.seconds:.1f} s)\n")
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
        from .model.decision import Decision

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
        from .corpus_commands import progress_bar

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
        from .corpus_commands import replay_summary

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
    index += [f"| {p.name} | {'ok' if p.ok else ('unknown' if p.unknown else 'FAILED')} | {p.summary} |" for p in parts]
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
    from .model.assumptions import ASSUMPTIONS

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

    from .catalog import PR_ERA, catalog_file
    from .proofs.report import DOCS, ce_paths
    from .reference.sim.races import check_trace

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


# -- the released SGLang -------------------------------------------------------------------------------------------

#: The audit part that decides the release catalog, and the document it writes under audit/.
RELEASE_PART = "sglang-0.5.23"
READER_PART = "sglang-0.5.23 sources"
READER_COMMAND = "fencecheck sglang --installed"
RELEASE_VERSION = "0.5.23"
RELEASE_DOC = "sglang-0.5.23.md"
#: The parts of a release race scenario's description, in order: what races, then these (tests/test_catalog.py).
RACE_PARTS = ("Runtime condition: ", "Default configuration: ", "Fix: ")
#: The roles of a release cite (``path:function:lines: role: fact``), in the order a chain is read.
CHAIN_ROLES = ("declaration", "read", "publish", "publisher", "barrier", "step", "condition")


def release_catalog():
    """The scenarios of the released SGLang's catalog."""
    from .catalog import RELEASE, load_catalog

    return load_catalog(RELEASE)


#: ``check_text(path) -> (text, exit status)``: what ``fencecheck check PATH --witness`` prints, and its exit status.
CheckText = Callable[[Path], tuple[str, int]]


@dataclass
class Decided:
    """A release configuration decided by both oracles: the simulator's report and trace, the model's verdict and
    races, whether all three (simulator, model, expectation) agree, and the text of ``fencecheck check --witness``."""

    scenario: object
    report: object
    model_verdict: Verdict
    agree: bool
    witness: str
    exit: int  # the exit status of ``fencecheck check`` on the scenario's file


def release_part(state: dict, check_text: CheckText | None) -> Part:
    """Decide every release configuration with the simulator and the model, against its expectation; each
    scenario's ``check --witness`` text comes from ``check_text`` (the library does not import the command line)."""
    from .catalog import RELEASE, catalog_paths
    from .model.decision import Decision
    from .reference.check import check_scenario

    if check_text is None:
        raise ValueError("no renderer of `fencecheck check --witness` was given")
    paths = {p.stem: p for p in catalog_paths(RELEASE)}
    decided, rows, bad = [], [], 0
    for s in release_catalog():
        sim, mod = check_scenario(s), Decision(s).report
        agree = (oracles_agree((sim.verdict, [r.id for r in sim.races]), (mod.verdict, mod.races))[0]
                 and agreement(s.expect, sim.verdict, [r.id for r in sim.races])[0])
        bad += not agree
        text, code = check_text(paths[s.name])
        decided.append(Decided(s, sim, mod.verdict, agree, text, code))
        keys = "; ".join(f"`{k.text()}`" for k in sorted({r.key() for r in sim.races})) or "-"
        rows.append(f"| [{s.name}](#{s.name}) | {s.expect.verdict.value} | {sim.verdict.value} | {mod.verdict.value} | "
                    f"{'yes' if agree else 'NO'} | {keys} |")
    state["release"] = decided
    return Part(RELEASE_PART, bad == 0, f"{len(rows) - bad} of {len(rows)} configurations: simulator, model and "
                "expectation agree", 0.0, lines=rows)


def _split(description: str) -> tuple[str, dict[str, str]]:
    """A race scenario's description as its lead and its named parts (``Runtime condition``, ...)."""
    marks = [(description.find(p), p) for p in RACE_PARTS if p in description]
    marks.sort()
    lead = description[:marks[0][0]].strip() if marks else description
    parts = {}
    for i, (at, p) in enumerate(marks):
        end = marks[i + 1][0] if i + 1 < len(marks) else len(description)
        text = description[at + len(p):end].strip()
        parts[p.rstrip(": ")] = text[:1].upper() + text[1:]
    return lead, parts


def _chain(cites) -> list[str]:
    """The cites of a scenario, grouped by role in ``CHAIN_ROLES`` order (a cite's order kept within its role)."""
    import re

    pattern = re.compile(r"^(\S+?:[\w.]+:[\d,-]+): (\w+): (.*)$")
    by: dict[str, list[str]] = {}
    for c in cites:
        m = pattern.match(c)
        if m:
            by.setdefault(m.group(2), []).append(f"`{m.group(1)}`: {m.group(3)}")
    return [f"- **{role}**: {item}" for role in CHAIN_ROLES for item in by.get(role, [])]


def reader_part(state: dict) -> Part:
    """The static reader on the installed release's sources (``pip install --no-deps sglang==0.5.23``: sources only,
    never imported), every finding decided with witnesses; its section goes into the release document. Without the
    sources the part says so and the document says it was not run."""
    import importlib.metadata

    from .sglang_source import read_path
    from .sglang_source.decide import decide
    from .sglang_source.decide_workers import decide_worker_reads
    from .sglang_source.report import markdown

    try:
        installed = importlib.metadata.version("sglang")
    except importlib.metadata.PackageNotFoundError:
        installed = None
    if installed != RELEASE_VERSION:
        have = f"sglang {installed} is installed" if installed else "sglang is not installed"
        return Part(READER_PART, True, f"not run: {have} (pip install --no-deps sglang=={RELEASE_VERSION})", 0.0)
    ex = read_path(None, installed=True)
    doc = ex.to_dict()
    decide(doc, witness=True)
    decide_worker_reads(doc, ex.algorithm_scenarios, model=True)
    state["reader"] = markdown(doc, READER_COMMAND)
    f = doc["findings"]
    differ = [x for x in f if (x.get("scenario") and x.get("oracles_agree") is False)
              or any(c.get("oracles_agree") is False for c in x.get("contexts", ()))]
    pairs = sum(len(x.get("contexts", ())) for x in f)
    return Part(READER_PART, not differ, f"{len(f)} findings in {pairs} release contexts, {len(f) - len(differ)} "
                "decided alike by simulator and model", 0.0)


def release_document(part: Part, state: dict) -> str:
    """audit/sglang-0.5.23.md: per configuration its verdict; per race its chain of source locations, runtime
    condition, witness, reproduction and fix."""
    from .catalog import RELEASE, catalog_file

    decided: list[Decided] = state.get("release", [])
    races = [d for d in decided if d.scenario.expect.verdict is Verdict.COUNTEREXAMPLE]
    disagree = [d for d in decided if not d.agree]
    n_race = sum(d.scenario.expect.verdict is Verdict.COUNTEREXAMPLE for d in decided)
    doc = [
        f"# SGLang {RELEASE_VERSION} as released: the audit",
        "",
        "Generated by `fencecheck audit --docs docs` from the release catalog (`fencecheck/catalog/sglang-0.5.23/`, "
        "one scenario file per configuration of the release that touches the shared-read fence); do not edit by hand. "
        "Each configuration is decided by the CPU simulator and the SMT model and compared with its expectation, "
        "derived by hand from the release's code. Every fact a scenario encodes cites the release as "
        "`path:function:lines` (paths relative to the wheel's `sglang/` package); our reading of the release is "
        "[../sglang-0.5.23.md](../sglang-0.5.23.md). Commands run from the repository root.",
        "",
        f"{len(decided)} configurations: {len(decided) - n_race} expected safe, {n_race} expected to race. "
        + ("Simulator, model and expectation agree on all of them." if not disagree else
           f"**{len(disagree)} disagree** (simulator or model against the expectation): "
           + ", ".join(f"[{d.scenario.name}](#{d.scenario.name})" for d in disagree)
           + "; the audit fails until they agree."),
        "",
        "## Verdict per configuration",
        "",
        "| configuration | expected | simulator | model | agree | races (location@phase/site) |",
        "| --- | --- | --- | --- | --- | --- |",
        *part.lines,
        "",
    ]
    doc += ["## Races", "",
            "The configurations expected to race. Each race below is a read of a scheduler-shared map by step N that is not ordered before a scheduler "
            "write after step N's barrier: under overlap scheduling a request that finished at step N-1 is still in "
            "step N's forward, and after step N's barrier the scheduler frees its row and slots and may hand them to "
            "a new request. The chain lists the release's source locations by role; the witness is the tool's "
            "interleaving under which the read sees step N+1's data.", ""]
    for d in races:
        s = d.scenario
        lead, parts = _split(s.description)
        doc += [f"### Race: {s.name}", "", lead, ""]
        for name in ("Runtime condition", "Default configuration"):
            if name in parts:
                doc += [f"**{name}.** {parts[name]}", ""]
        doc += ["**Chain of source locations.**", "", *_chain(s.cites), ""]
        if d.agree:
            doc += ["**Witness**, as `fencecheck check " + catalog_file(RELEASE, s.name) + " --witness` (exit status 1) "
                    "prints it:",
                    "", "```", d.witness.rstrip("\n"), "```", ""]
            for race in d.report.distinct():
                doc += race_section(race)
        else:
            doc += [f"**Not decided as expected:** the simulator gives {d.report.verdict.value} and the model "
                    f"{d.model_verdict.value}, the expectation is {s.expect.verdict.value}.", ""]
            if not d.report.safe:
                doc += ["```", d.witness.rstrip("\n"), "```", ""]
        if "Fix" in parts:
            doc += [f"**Fix.** {parts['Fix']}", ""]
    doc += ["## Configurations", ""]
    for d in decided:
        s = d.scenario
        lead = _split(s.description)[0]
        doc += [f"### {s.name}", "", lead, ""]
        if d.agree:
            dishonest = [line.strip() for line in d.witness.splitlines() if line.strip().startswith("DISHONEST ")]
            why = s.expect.verdict.value + (", and a dishonest declaration" if dishonest and d.report.safe else "")
            doc += [f"`fencecheck check {catalog_file(RELEASE, s.name)}` (exit status {d.exit}: {why})"
                    + (f"; [its race](#race-{s.name})." if any(r.scenario is s for r in races) else "."), ""]
            if dishonest and d.report.safe:
                doc += [f"Finding, not a race (the fence holds here): {dishonest[0]}.", ""]
        else:
            doc += [f"Expected {s.expect.verdict.value}; the simulator gives {d.report.verdict.value}, the model "
                    f"{d.model_verdict.value}: they disagree with the expectation (file "
                    f"{catalog_file(RELEASE, s.name)})" + ("; [the expected race](#race-" + s.name + ")."
                                                           if any(r.scenario is s for r in races) else "."), ""]
            if not d.report.safe and not any(r.scenario is s for r in races):
                doc += ["What the simulator reports:", "", "```", d.witness.rstrip("\n"), "```", ""]
    doc += state.get("reader") or [
        "## What the static reader finds in the release's sources", "",
        f"Not run: the release's sources were not installed (`python3 -m pip install --no-deps "
        f"sglang=={RELEASE_VERSION}`, then `fencecheck audit --docs docs` again).", ""]
    return "\n".join(doc).rstrip("\n") + "\n"


def exit_code(parts: list[Part]) -> int:
    if all(p.ok for p in parts):
        return 0
    if all(p.ok or p.unknown for p in parts):
        return 3
    return 1


__all__ = ["Part", "audit_documents", "exit_code", "mermaid", "proof_documents", "prove_all", "run_audit"]
