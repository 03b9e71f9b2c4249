"""``fencecheck sglang PATH``: read an SGLang tree statically and report its fence facts and findings.

``--scenarios DIR`` (here and in pull-request mode): after a run DIR's scenario files are exactly that run's (each
``*.toml`` there that loads as a scenario removed), written first into a temporary folder and swapped in whole at
the end (``files.outputs.write_owned``), so an interrupted or failed run leaves the previous set, never part of a
new one; any other file is never touched."""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path
from typing import TextIO

from fencecheck.commands.common import PROGRESS_HELP, outputs
from fencecheck.render.output import PATHS
from fencecheck.render.tree_text import render, to_json
from fencecheck.errors import EXIT_NO_FENCE, EXIT_OK, EXIT_OLDER_FENCE, EXIT_RACE, EXIT_UNKNOWN

HELP = """Read an SGLang source tree statically (Python's ast; SGLang is never imported) and report the shared-read
fence's facts, each with file:line, all read from the tree given: which fence it has; the barrier, its gate per
platform and where each event loop applies it; each runner's resolve, no-marker fallback (the resolution rule), its
publishes (before the replay, the in-graph marker, after it; by any means) and clears; the marker per platform; the
scheduler-shared locations; every AttentionBackend subclass and its shared_read_ends declaration per ForwardMode
(composites, delegation and conditional rows named by their condition), the reads of scheduler-shared state per
backend, mode and site; each worker's last_shared_read_runner and each speculative algorithm's phases.

A read at a site the declaration does not cover is a finding; once decided it is confirmed (it races in the default
configuration of a supported platform), reachable (it races in a configuration that needs the flags, environment
variables or platform named) or unresolved (a fact could not be settled: the condition of the declaration row or
of the read's path that fencecheck cannot decide, named). A read behind a host sync (a path a CUDA graph cannot capture) or only at start-up is listed
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
  1  a confirmed or reachable finding (a read outside what its declaration covers, a
     worker read after the publisher, a no-marker fallback that races), or drift: with
     --against, a protocol fact that changed (a function or catalog entry that changed
     without one is listed for review and does not set the exit status)
  2  bad input (not an SGLang tree, an unreadable or unparsable file, a suppression
     without a reason or of an unknown kind, a baseline that is no folder nor revision):
     one line naming it
  3  questions (unresolved findings: whether they race hangs on a fact fencecheck
     could not settle, named) or unresolved facts (a declaration or read path not
     evaluated, a module not read), and nothing wrong
  4  I/O failure
  5  a fence older than the SharedReadEnds declarations (a barrier waiting on a
     read-done event its runners publish without asking a backend): its facts are
     reported (barrier, gate, read-done event, where it is published), nothing is
     decided
  6  no shared-read fence (no barrier, no declarations): said so
  70 a bug in fencecheck (one line, please report it)
  A finding all of whose root causes a `# fencecheck: ignore[KIND] reason` comment
  silences counts for nothing. With --baseline, only what the change adds counts:
  1 when it adds a confirmed or reachable finding or weakens the fence (HEAD has the older
  fence or none where the baseline has the declarations, or lost a declaration, a barrier
  call site, a runner's publish point or a clear the baseline had), 3 when it adds only
  questions, 0 when it only fixes findings, changes other facts or changes nothing."""


def add_parser(sub) -> None:
    p = sub.add_parser("sglang", help="read an SGLang source tree statically: declarations, reads, findings",
                       description=HELP, epilog=EXIT_HELP)
    p.add_argument("path", nargs="?", metavar="PATH",
                   help="an SGLang checkout root, its python/ folder, or a sglang package folder (an unpacked wheel)")
    p.add_argument("--installed", action="store_true",
                   help="read the installed sglang package instead of PATH (located without importing it)")
    p.add_argument("--json", action="store_true", help="the machine-readable document (docs/sglang-reader.md); "
                                                        "the same as --format json")
    p.add_argument("--format", default=None, choices=("text", "json", "sarif"),
                   help="text (the default), json (the document; with --baseline the pull-request document, "
                        "docs/sglang-pr.schema.json) or sarif (SARIF 2.1.0 for code scanning, docs/sglang-reader.md)")
    p.add_argument("--baseline", default=None, metavar="BASE",
                   help="pull-request mode: compare with BASE, another tree (a folder) or a git revision of PATH's "
                        "repository (read from git's objects, the working tree untouched); report the findings the "
                        "change adds, fixes and leaves, and the protocol facts it changes; exit 1 only for what it adds")
    p.add_argument("--scenarios", default=None, metavar="DIR",
                   help="write the scenario built for each finding to DIR/NAME.toml (each cites its source lines); "
                        "DIR's scenario files are then exactly this run's: each *.toml there that loads as a scenario "
                        "is removed, and the set is swapped in whole at the end, so an interrupted run leaves the "
                        "previous set (any other file is never touched)")
    p.add_argument("--witness", action="store_true",
                   help="replay each race under its witness interleaving (the schedule and the stale read it shows)")
    p.add_argument("--against", default=None, metavar="RELEASE|FILE|TREE",
                   help="compare with a recorded release (sglang-VERSION, in fencecheck/sglang_source/releases/), a "
                        "record or fingerprint file (.json) or another SGLang tree: the protocol facts that changed "
                        "first (exit 1), then the functions whose code changed (drift when a fact they support "
                        "changed, else review) and the catalog entries whose cited sources changed (review)")
    p.add_argument("--paths", default="package", choices=PATHS,
                   help="how the text report names files: relative to the package's parent folder (sglang/..., the "
                        "default) or to the root of the git repository holding PATH (python/sglang/... in an SGLang "
                        "checkout: what git and an editor show; the pre-commit hook's choice). SARIF is always "
                        "relative to the repository root; the JSON document keeps sglang/... with its root")
    p.add_argument("--progress", action="store_true", help=PROGRESS_HELP)
    p.add_argument("--details", action="store_true",
                   help="the text summary in full: every finding with its evidence and decision, every fact table "
                        "(by default one line per root cause; --witness implies it)")
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
                                              inputs=(("path", "tree"), ("against", "file"), ("baseline", "tree"))))


def has_drift(drift: dict | None) -> bool:
    """Whether ``--against`` found drift (``drift``: the document's ``drift``): a protocol fact that changed (or,
    against a record without facts, a function that changed). A function whose facts did not change and a catalog
    entry are review, not drift."""
    return bool(drift and (drift["facts"] or any(f["drift"] for f in drift["functions"])))


def exit_code(ex, drift: dict | None = None) -> int:
    """The exit status of the decided extraction ``ex`` (and its ``drift``)."""
    fence = (ex.facts.get("fence") or {}).get("kind")
    if fence == "read_done_event":
        return EXIT_OLDER_FENCE
    if fence == "none":
        return EXIT_NO_FENCE
    from fencecheck.decision.status import shown

    kinds = [f.status for f in ex.findings]
    settled = shown(ex.findings)  # a question (unresolved) races only where a value it hangs on is met: exit 3
    if any(s in ("confirmed", "reachable", "plausible") for s in kinds) or \
            any(f.decision and f.decision.verdict == "counterexample" for f in settled) or has_drift(drift):
        return EXIT_RACE
    if "unresolved" in kinds or any(n.unresolved for n in ex.notes):
        return EXIT_UNKNOWN
    return EXIT_OK


def cmd_sglang(args, out: TextIO) -> int:
    from fencecheck.errors import InputError

    if bool(args.path) == bool(args.installed):
        raise InputError("<flags>", "PATH", "expected exactly one of PATH or --installed")
    from fencecheck.render.output import resolve_format

    args.format = resolve_format(args)
    if args.baseline is not None and not args.baseline.strip():
        raise InputError("<flags>", "--baseline", "expected a folder or a git revision, got an empty value")
    if args.paths == "repository" and args.format == "text":
        from fencecheck.render.output import RepositoryPaths, repository_prefix
        from fencecheck.sglang_source.tree import find_installed, find_package_root

        package = find_installed() if args.installed else find_package_root(args.path)
        prefix = repository_prefix(package, None if args.installed else args.path)
        out = RepositoryPaths(out, prefix)
        if getattr(args, "err", None) is not None:
            args.err = RepositoryPaths(args.err, prefix)
    if args.baseline is not None:
        from fencecheck.commands.sglang_pr import run

        return run(args, out)
    from fencecheck.sglang_source.drift import load_release

    if args.against and not Path(args.against).is_dir():
        load_release(args.against)  # a bad --against is bad input before the work
    with ExitStack() as stack:  # the captured path's answers, asked beside the reading on (pipeline.EarlyAnswers)
        return _read_and_decide(args, out, stack)


def _read_and_decide(args, out: TextIO, stack: ExitStack) -> int:
    from fencecheck.commands.progress import progress_bar
    from fencecheck.decision.drift import drift as drift_of
    from fencecheck.decision.drift import record_document, record_text, write_record
    from fencecheck.decision.pipeline import EarlyAnswers
    from fencecheck.render.output import finish
    from fencecheck.sglang_source import read_path
    from fencecheck.sglang_source.tree import find_installed, find_package_root

    bar = progress_bar(3, "sglang", args.progress, args.err, unit="stage")
    bar.set_postfix_str("reading")
    early = EarlyAnswers(stack)
    try:
        # the syntax trees live until the command ends: the deciding part's collections need not scan them
        ex = read_path(args.path, installed=args.installed, freeze=True, early=early)
    except BaseException:
        bar.close()
        raise
    bar.update(1)
    package = find_installed() if args.installed else find_package_root(args.path)
    current = record_document(ex, package) if (args.fingerprints or args.against or args.record) else None
    drift = drift_of(args.against, current, package) if args.against else None
    if args.fingerprints:
        from fencecheck.files.outputs import write_text_atomic

        write_text_atomic(Path(args.fingerprints), record_text(current))
    if args.record:
        write_record(args.record, current)
    if ex.protocol is not None and ex.protocol.kind != "declaration":
        bar.close()
        from functools import partial

        return finish(args, ex, to_json(ex, drift), out, partial(render, drift=drift), partial(exit_code, drift=drift))
    from fencecheck.decision.pipeline import Plan, decide_tree

    def stage(name: str) -> None:
        if name == "findings":
            bar.set_postfix_str("deciding the findings")
        elif name == "workers":
            bar.update(1)
            bar.set_postfix_str("deciding the worker reads")
        else:
            bar.update(1)

    try:
        decided = decide_tree(ex, Plan.one_tree(args.cross_check, args.witness), stage, early)
    finally:
        bar.close()
    ex, scenarios = decided.extraction, decided.scenarios
    if args.scenarios:
        from fencecheck.files.outputs import write_owned
        from fencecheck.files.scenario_io import dumps, is_scenario_file

        write_owned(args.scenarios, {f"{sc.name}.toml": dumps(sc) for sc in scenarios}, ".toml",
                    is_scenario_file)  # this run's, whole
    from functools import partial

    return finish(args, ex, to_json(ex, drift), out,
                  partial(render, drift=drift, details=args.details or args.witness), partial(exit_code, drift=drift))


__all__ = ["add_parser", "cmd_sglang", "exit_code"]
