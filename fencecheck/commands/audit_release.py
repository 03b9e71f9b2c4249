"""The audit's release parts: the release catalog decided by the simulator and the model, each configuration with
its chain of cited SGLang facts and its ``fencecheck check --witness`` output, the reader's part on the installed
release's sources, and the release document (docs/audit/sglang-VERSION.md)."""

from __future__ import annotations

from dataclasses import dataclass

from fencecheck.commands.audit_parts import CheckText, Part, race_section
from fencecheck.files.catalog import RELEASE, release_version
from fencecheck.verdict import Verdict, agreement, oracles_agree

#: The audit part that decides the release catalog (the newest ``sglang-<version>`` folder of the catalog), the
#: version it is of, and the document it writes under audit/.
RELEASE_PART = RELEASE
RELEASE_VERSION = release_version(RELEASE)
RELEASE_DOC = f"{RELEASE}.md"
READER_PART = f"{RELEASE} sources"
READER_COMMAND = "fencecheck sglang --installed"


#: The parts of a release race scenario's description, in order: what races, then these (tests/test_catalog.py).
RACE_PARTS = ("Runtime condition: ", "Default configuration: ", "Fix: ")


#: The roles of a release cite (``path:function:lines: role: fact``), in the order a chain is read.
CHAIN_ROLES = ("declaration", "read", "publish", "publisher", "barrier", "step", "condition")


def release_catalog():
    """The scenarios of the released SGLang's catalog."""
    from fencecheck.files.catalog import load_catalog

    return load_catalog(RELEASE)


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
    from fencecheck.files.catalog import catalog_paths
    from fencecheck.model.decision import Decision
    from fencecheck.reference.check import check_scenario

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
    """The static reader on the installed release's sources (``pip install --no-deps sglang==RELEASE_VERSION``: sources only,
    never imported), every finding decided with witnesses; its section goes into the release document. Without the
    sources the part says so and the document says it was not run."""
    import importlib.metadata

    from fencecheck.render.release_markdown import markdown
    from fencecheck.decision.pipeline import Plan, read_decided

    try:
        installed = importlib.metadata.version("sglang")
    except importlib.metadata.PackageNotFoundError:
        installed = None
    if installed != RELEASE_VERSION:
        have = f"sglang {installed} is installed" if installed else "sglang is not installed"
        return Part(READER_PART, True, f"not run: {have} (pip install --no-deps sglang=={RELEASE_VERSION})", 0.0,
                    skipped=True)
    ex = read_decided(None, True, Plan.audit()).extraction
    state["reader"] = markdown(ex, READER_COMMAND)
    f = ex.findings
    decisions = [x.decision for x in f if x.decision is not None]
    differ = [d for d in decisions if (d.model and d.model.agree is False)
              or any(c.oracles_agree is False for c in d.contexts or ())]
    pairs = sum(len(d.contexts or ()) for d in decisions)
    from fencecheck.decision.status import questions

    asked = len(questions(f))
    return Part(READER_PART, not differ, f"{len(f) - asked} findings and {asked} questions, in {pairs} generated "
                f"configurations; {len(f) - len(differ)} of {len(f)} decided alike by simulator and model", 0.0)


def release_document(part: Part, state: dict) -> str:
    """audit/RELEASE_DOC: per configuration its verdict; per race its chain of source locations, runtime
    condition, witness, reproduction and fix."""
    from fencecheck.files.catalog import catalog_file

    decided: list[Decided] = state.get("release", [])
    races = [d for d in decided if d.scenario.expect.verdict is Verdict.COUNTEREXAMPLE]
    disagree = [d for d in decided if not d.agree]
    n_race = sum(d.scenario.expect.verdict is Verdict.COUNTEREXAMPLE for d in decided)
    doc = [
        f"# SGLang {RELEASE_VERSION} as released: the audit",
        "",
        f"Generated by `fencecheck audit --docs docs` from the release catalog (`fencecheck/catalog/{RELEASE}/`, "
        "one scenario file per configuration of the release that touches the shared-read fence); do not edit by hand. "
        "Each configuration is decided by the CPU simulator and the SMT model and compared with its expectation, "
        "derived by hand from the release's code. Every fact a scenario encodes cites the release as "
        "`path:function:lines` (paths relative to the wheel's `sglang/` package); our reading of the release is "
        f"[../{RELEASE_DOC}](../{RELEASE_DOC}). Commands run from the repository root.",
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
