"""``fencecheck sglang PATH``: read an SGLang tree statically and report its fence facts and findings."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TextIO

from fencecheck.commands.common import outputs
from fencecheck.commands.reader_audit import contexts_text
from fencecheck.errors import EXIT_BAD_INPUT, EXIT_NO_FENCE, EXIT_OK, EXIT_OLDER_FENCE, EXIT_RACE, EXIT_UNKNOWN
from fencecheck.sglang_source.limits import limits_text

HELP = """Read an SGLang source tree statically (Python's ast; SGLang is never imported) and report the shared-read
fence's facts, each with file:line, all read from the tree given: which fence it has; the barrier, its gate per
platform and where each event loop applies it; each runner's resolve, no-marker fallback (the resolution rule), its
publishes (before the replay, the in-graph marker, after it; by any means) and clears; the marker per platform; the
scheduler-shared locations; every AttentionBackend subclass and its shared_read_ends declaration per ForwardMode
(composites, delegation and conditional rows named by their condition), the reads of scheduler-shared state per
backend, mode and site; each worker's last_shared_read_runner and each speculative algorithm's phases.

A read at a site the declaration does not cover is a finding: confirmed when nothing on its path is conditional,
plausible when the declaration row or the read's path depends on a condition fencecheck cannot decide (the
condition is named). A read behind a host sync (a path a CUDA graph cannot capture) or only at start-up is listed
as not a finding, with why. What cannot be evaluated is reported as unresolved with its reason, never guessed.
Each finding becomes a scenario (the backend as read, replayed by a decode runner under the barrier, the tree's
rule) decided by the simulator and the SMT model, and is decided again in each configuration generated from the
tree's facts that runs a phase of its mode; a fallback to PRE_REPLAY where a platform has no marker is decided too
(no_marker_fallback); --scenarios writes the scenarios, --witness replays each race. --against compares with a
recorded release, a record or another tree: the protocol facts that changed first (exit 1), then the functions and
catalog entries to review; --record writes the tree's record. Per speculative algorithm it lists the worker's
decode-step phases and its reads of scheduler-shared state after the publisher's runner; each is decided by the
simulator on a scenario of the phases before it (the model too with --cross-check): a race there is a finding
(worker_read_after_publish). See docs/sglang-reader.md for the JSON contract (docs/sglang-reader.schema.json)."""

EXIT_HELP = """exit codes:
  0  no finding
  1  a finding (a read outside what its declaration covers, a worker read after the
     publisher that races, a no-marker fallback that races), a race, or drift: with
     --against, a protocol fact that changed (a function or catalog entry that changed
     without one is listed for review and does not set the exit status)
  2  bad input (not an SGLang tree, an unreadable or unparsable file): one line
  3  unresolved facts (a declaration or read path not evaluated, a module
     not read) and nothing wrong
  4  I/O failure
  5  a fence older than the SharedReadEnds declarations (a barrier waiting on a
     read-done event its runners publish without asking a backend): its facts are
     reported (barrier, gate, read-done event, where it is published), nothing is
     decided
  6  no shared-read fence (no barrier, no declarations): said so
  70 a bug in fencecheck (one line, please report it)"""


def add_parser(sub) -> None:
    p = sub.add_parser("sglang", help="read an SGLang source tree statically: declarations, reads, findings",
                       description=HELP, epilog=EXIT_HELP)
    p.add_argument("path", nargs="?", metavar="PATH",
                   help="an SGLang checkout root, its python/ folder, or a sglang package folder (an unpacked wheel)")
    p.add_argument("--installed", action="store_true",
                   help="read the installed sglang package instead of PATH (located without importing it)")
    p.add_argument("--json", action="store_true", help="the machine-readable document (docs/sglang-reader.md)")
    p.add_argument("--scenarios", default=None, metavar="DIR",
                   help="write the scenario built for each finding to DIR/NAME.toml (each cites its source lines)")
    p.add_argument("--witness", action="store_true",
                   help="replay each race under its witness interleaving (the schedule and the stale read it shows)")
    p.add_argument("--against", default=None, metavar="RELEASE|FILE|TREE",
                   help="compare with a recorded release (sglang-VERSION, in fencecheck/sglang_source/releases/), a "
                        "record or fingerprint file (.json) or another SGLang tree: the protocol facts that changed "
                        "first (exit 1), then the functions whose code changed (drift when a fact they support "
                        "changed, else review) and the catalog entries whose cited sources changed (review)")
    p.add_argument("--cross-check", action="store_true",
                   help="also ask the SMT model about every generated configuration where the simulator finds a race (the "
                        "backend findings' own scenarios are always decided by both; fencecheck audit always "
                        "cross-checks) and about the scenario of each worker read after the publisher")
    p.add_argument("--fingerprints", default=None, metavar="FILE",
                   help="write the tree's record (its protocol facts and the fingerprints of the functions they come "
                        "from; JSON, for --against)")
    p.add_argument("--record", default=None, metavar="DIR",
                   help="write the tree's record to DIR/sglang-VERSION.json (facts, fingerprints, the configurations "
                        "generated from the facts, the catalog entries' fingerprints where the catalog has the "
                        "release): adding a release is this command and a reviewed diff")
    p.set_defaults(func=cmd_sglang, **outputs(("scenarios", True), ("fingerprints", False), ("record", True),
                                              inputs=(("path", "tree"), ("against", "file"))))


def has_drift(doc: dict) -> bool:
    """Whether ``--against`` found drift: a protocol fact that changed (or, against a record without facts, a
    function that changed). A function whose facts did not change and a catalog entry are review, not drift."""
    d = doc.get("drift")
    return bool(d and (d["facts"] or any(f["drift"] for f in d["functions"])))


def exit_code(doc: dict) -> int:
    fence = (doc.get("fence") or {}).get("kind")
    if fence == "read_done_event":
        return EXIT_OLDER_FENCE
    if fence == "none":
        return EXIT_NO_FENCE
    kinds = [f["status"] for f in doc["findings"]]
    if any(s in ("confirmed", "plausible") for s in kinds) or \
            any(f.get("verdict") == "counterexample" for f in doc["findings"]) or has_drift(doc):
        return EXIT_RACE
    if "unresolved" in kinds or any(n["unresolved"] for n in doc.get("notes", ())):
        return EXIT_UNKNOWN
    return EXIT_OK


def cmd_sglang(args, out: TextIO) -> int:
    from fencecheck.errors import InputError
    from fencecheck.sglang_source import read_path

    if bool(args.path) == bool(args.installed):
        raise InputError("<flags>", "PATH", "expected exactly one of PATH or --installed")
    from fencecheck.commands.reader_drift import drift, record_document, write_record
    from fencecheck.commands.reader_findings import decide
    from fencecheck.sglang_source.drift import load_release
    from fencecheck.sglang_source.tree import find_installed, find_package_root

    if args.against and not Path(args.against).is_dir():
        load_release(args.against)  # a bad --against is bad input before the work
    ex = read_path(args.path, installed=args.installed)
    import gc

    gc.freeze()  # the syntax trees live until the command ends: the deciding part's collections need not scan them
    doc = ex.to_dict()
    package = find_installed() if args.installed else find_package_root(args.path)
    current = record_document(ex, doc, package) if (args.fingerprints or args.against or args.record) else None
    if args.against:
        doc["drift"] = drift(args.against, current, package)
    if args.fingerprints:
        from fencecheck.files.outputs import write_text_atomic

        from fencecheck.commands.reader_drift import record_text

        write_text_atomic(Path(args.fingerprints), record_text(current))
    if args.record:
        write_record(args.record, current)
    scenarios = decide(doc, witness=args.witness, context_model="flagged" if args.cross_check else "none")
    from fencecheck.commands.reader_fallback import decide_fallback

    scenarios += decide_fallback(doc)
    from fencecheck.commands.reader_workers import decide_worker_reads

    scenarios += decide_worker_reads(doc, ex.algorithm_scenarios, model=args.cross_check)
    if args.scenarios:
        from fencecheck.files.outputs import write_tree
        from fencecheck.files.scenario_io import dumps

        write_tree(args.scenarios, {f"{sc.name}.toml": dumps(sc) for sc in scenarios})  # whole or not at all
    if args.json:
        json.dump(doc, out, indent=1, sort_keys=False)
        out.write("\n")
    else:
        out.write(render(doc))
    return exit_code(doc)


def _decl_text(v) -> str:
    if isinstance(v, str):
        return v
    return "; ".join(f"{r['end']} if {r['condition']}" if r.get("condition") else r["end"] for r in v)




def _algorithms_text(algorithms: list) -> list[str]:
    if not algorithms:
        return []
    lines = ["speculative algorithms (worker; phases of one decode step; worker reads after the publisher's runner):"]
    for a in algorithms:
        cond = f" when {a['condition']}" if a["condition"] else ""
        w = a["worker"]
        lines.append(f"  {a['name']}{cond}: " + (f"{w['class']} ({w['file']}:{w['line']})" if w else "no worker class"))
        for p in a["phases"]:
            lines.append(f"    {p['runner']} {p['mode'] or 'publish'} ({p['file']}:{p['line']})"
                         + (f" if {p['condition']}" if p["condition"] else "") + (" [loop]" if p["repeat"] else ""))
        for r in a["reads_after_publisher"]:
            lines.append(f"    {r['finding']['status'].upper() if r['finding'] else 'not a finding'}: reads "
                         f"{r['location']} after the publisher's runner ({r['file']}:{r['line']})"
                         + (f"; scenario {r['finding']['scenario']}: {r['finding']['verdict']}"
                            if r["finding"] and r["finding"].get("scenario") else ""))
        if a["unresolved"]:
            lines.append(f"    unresolved: {len(a['unresolved'])} (--json lists them)")
    return lines


def render(doc: dict) -> str:
    from fencecheck.commands.reader_facts import facts_text, fence_text

    if (doc.get("fence") or {}).get("kind", "declaration") != "declaration":
        return fence_text(doc)
    lines = []
    b, w, f = doc["backends"], doc["workers"], doc["findings"]
    loops = sorted({c["event_loop"] for c in doc["barrier"]["calls"]})
    version = doc["sglang_version"] or "(version unknown)"
    lines.append(f"sglang {version} at {doc['root']}: {len(b)} attention backends, "
                 f"{len({x['class'] for x in w})} workers, barrier applied in {len(loops)} event loops "
                 f"({len(doc['barrier']['calls'])} call sites), {len(doc['runners'])} runners")
    by = {s: sum(1 for x in f if x["status"] == s) for s in ("confirmed", "plausible", "unresolved")}
    lines.append(f"findings: {len(f)} ({by['confirmed']} confirmed, {by['plausible']} plausible, "
                 f"{by['unresolved']} unresolved)")
    for x in f:
        head = f"  {x['status'].upper()} {x['subject']} {x['mode']}: "
        if x["kind"] == "read_outside_declaration":
            head += f"declares {x['declared']}" + (f" when {x['condition']}" if x.get("condition") else "") + \
                f" but reads outside it"
        else:
            head += x["kind"].replace("_", " ")
        lines.append(head)
        for e in x["evidence"]:
            lines.append(f"    {e['file']}:{e['line']}: {e['what']}")
        if x.get("scenario"):
            races = ", ".join(x["races"]) or "no race"
            model = {True: "the model agrees", None: f"the model: {x.get('model_verdict') or 'not asked (--cross-check asks it)'}"}.get(
                x.get("oracles_agree"), f"the model DIFFERS: {x.get('oracles_differ', '')}")
            lines.append(f"    scenario {x['scenario']}: {x['verdict']} ({races}); {model}")
        elif x.get("why") and x["kind"] != "worker_read_after_publish":
            lines.append(f"    {x['why']}")
        if "contexts" in x:
            lines.append(f"    {contexts_text(x['contexts'])}")
        for wit in x.get("witness", ()):
            o = wit["stale_read"]
            lines.append(f"    witness: {wit['race']}: " + (
                f"the step {o['step']} read of {o['location']} at {o['site']} saw step {o['seen']}'s data (stale)"
                if o else "NOT REPRODUCED (simulator inconsistency)"))
    if "drift" in doc:
        from fencecheck.commands.reader_drift import drift_text

        lines += drift_text(doc["drift"])
    nf = doc["not_findings"]
    sync = sum(1 for x in nf if x["why"].startswith(("behind a host sync", "behind a capture-mode test")))
    device = sum(1 for x in nf if x["why"].startswith("never resolved on "))
    lines.append(f"not findings: {sync} reads behind a host sync or a capture-mode test, {len(nf) - sync - device} "
                 f"start-up reads, {device} reads on a device whose runners never publish (--json lists them, with why)")
    lines.append("declarations (backends that do not take the base rule unchanged):")
    roots = {x["class"] for x in b if x["kind"] == "base"}
    for x in b:
        if x["kind"] == "base" or (x["declared_in"] and x["declared_in"]["class"] in roots):
            continue
        d = x["declares"]
        modes = ", ".join(f"{m} {_decl_text(v)}" for m, v in d.items())
        src = x["declared_in"]
        lines.append(f"  {x['class']} ({x['file']}:{x['line']}; declared in {src['class']} "
                     f"{src['file']}:{src['line']}): {modes}")
    lines.append("workers (last_shared_read_runner):")
    for x in w:
        cond = f" if {x['condition']}" if x["condition"] else ""
        lines.append(f"  {x['class']}: {x['publisher']}{cond} ({x['returns_at']['file']}:{x['returns_at']['line']})")
    lines.append("barrier call sites:")
    for c in doc["barrier"]["calls"]:
        lines.append(f"  {c['event_loop']} ({c['file']}:{c['line']})")
    lines.append("runners that publish:")
    for r in doc["runners"]:
        if r["publish"] != "never":
            lines.append(f"  {r['class']}: {r['publish']} ({r['method']['file']}:{r['method']['line']})")
    lines += _algorithms_text(doc.get("algorithms", []))
    lines += facts_text(doc)
    lines += limits_text(doc)
    return "\n".join(lines) + "\n"


__all__ = ["add_parser", "cmd_sglang", "contexts_text", "exit_code", "render", "EXIT_BAD_INPUT"]
