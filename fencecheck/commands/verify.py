"""``fencecheck verify``: one backend file in every context, with the contexts that race explained and verified
advice."""

from __future__ import annotations

from typing import TextIO

from fencecheck.commands.common import PROGRESS_HELP, outputs, positive
from fencecheck.errors import EXIT_CODES_HELP, EXIT_OK, EXIT_RACE, EXIT_UNKNOWN
from fencecheck.verdict import RaceId, Verdict
from fencecheck.vocab import ReadSite, SharedReadEnds


def _readers(report, c, r) -> tuple[str, ...]:
    """The backends of the file under test that make the racing read (empty: a read of the context's own)."""
    from fencecheck.model.swap import PREFIX

    ph = c.phase_of(r)
    if ph is None or not ph.backend.startswith(PREFIX) or r.site not in {s.value for s in ReadSite}:
        return ()
    f = next((f for f in report.modes if f.mode is ph.mode), None)
    return () if f is None else f.readers.get((ReadSite(r.site), r.location), ())


def _phase_text(report, c, r) -> str:
    """The racing phase in SGLang's terms: mode, runner, backend, step kind, the named runner, what it publishes."""
    from fencecheck.model.swap import PREFIX

    ph = c.phase_of(r)
    if ph is None:
        return ""
    who = _readers(report, c, r)
    backend = (f"{ph.backend[len(PREFIX):]}, the backend under test" if ph.backend.startswith(PREFIX)
               else ph.backend)
    if who and who != (report.backend,):
        backend += f"; the read is {'/'.join(who)}'s"
    if ph.resolved is None:
        pub = "its runner does not resolve a declaration"
    elif ph.resolved is SharedReadEnds.UNKNOWN:
        pub = "it resolves UNKNOWN and publishes nothing"
    else:
        pub = f"it resolves {ph.resolved.name} and publishes there"
    if ph.resolved in (None, SharedReadEnds.UNKNOWN) and ph.publisher == ph.runner:
        left = [q for q in c.phases if q.step < ph.step and q.runner == ph.runner and q.publisher != q.runner
                and q.resolved not in (None, SharedReadEnds.UNKNOWN)]
        if left:
            q = left[-1]
            pub += (f"; so the barrier waits on the event left in runner {ph.runner}'s mailbox by step {q.step}'s "
                    f"{q.phase} ({q.mode.value}, backend {q.backend.removeprefix(PREFIX)}, "
                    f"resolved {q.resolved.name}), which step "
                    f"{q.step}'s barrier did not reset because that step named runner {q.publisher}")
    return (f"{ph.phase} ({ph.mode.value} on runner {ph.runner}, backend {backend}, {ph.kind} step whose "
            f"last_shared_read_runner is {ph.publisher}): {pub}")


def explain_contexts(report) -> dict:
    """The simulator's account of every race the backend brings: {(context, RaceId): reference Race}."""
    from fencecheck.reference.check import check_scenario

    out = {}
    for c in report.contexts:
        if c.brought and c.swapped is not None:
            for race in check_scenario(c.swapped).races:
                out.setdefault((c.scenario, race.id), race)
    return out


def _symbolic_race(ce):
    """The simulator's account of the symbolic counterexample's first race (None if it finds none)."""
    from fencecheck.reference.check import check_scenario

    loc, phase, site = ce.race_key()
    races = check_scenario(ce.scenario).races
    return next((r for r in races if (r.location, r.phase, r.site, r.step) == (loc, phase, site, ce.race.step)),
                races[0] if races else None)


def _explanation(race) -> dict:
    return {"read": race.read_text(), "write": race.write_text(), "barrier": race.barrier,
            "ordered_after": race.synced_up_to, "via": race.via, "missing_edge": race.missing_edge}


def verify_json(report, explained: dict) -> dict:
    """The documented ``verify --json`` shape (docs/verify.md)."""
    from fencecheck.model.swap import race_order
    from fencecheck.model.symbolic_contexts import ASSUMED, RULE

    ce = report.counterexample
    race = None if ce is None else _symbolic_race(ce)
    return {
        "backend": report.backend,
        "modes": [{"mode": f.mode.value, "declares": f.declared.name, "declared_by": f.declared_by,
                   "reads": {s.value: list(locs) for s, locs in f.sites.items()},
                   "readers": [{"site": s.value, "location": loc, "backends": list(who)}
                               for (s, loc), who in sorted(f.readers.items(), key=lambda kv: (kv[0][0].value,
                                                                                              kv[0][1]))],
                   "honest": f.honest} for f in report.modes],
        "symbolic": {"verdict": report.verdict.value, "rule": RULE.value, "assumptions": list(ASSUMED),
                     "bounds": {"steps": report.bounds.steps, "phases": report.bounds.phases,
                                "runners": report.bounds.runners},
                     "reason": report.reason,
                     "races": [] if ce is None else [RaceId(*r).to_dict() for r in ce.races],
                     "explanation": None if race is None else _explanation(race)},
        "contexts": [{"scenario": c.scenario, "verdict": c.report.verdict.value, "safe": c.safe,
                      "own_verdict": c.own_verdict.value, "failed_assumptions": c.failed,
                      "races_with_any_backend": c.races_anyway,
                      "component_change": None if c.component is None else c.component.to_dict(),
                      "races": [r.to_dict() for r in sorted(set(c.report.races), key=race_order)],
                      "brought": [{**r.to_dict(), "phase_facts": _phase_text(report, c, r),
                                   "readers": list(_readers(report, c, r)),
                                   "explanation": _explanation(explained[(c.scenario, r)])
                                   if (c.scenario, r) in explained else None} for r in c.brought],
                      "own_races": [r.to_dict() for r in c.own_races],
                      "honest_races": [p.text() for p in sorted(c.honest, key=lambda p: p.text())]}
                     for c in report.contexts],
        "findings": list(report.findings),
        "advice": [{"change": a.change, "why": a.why,
                    "verification": None if a.check is None else {
                        "safe": a.check.safe, "symbolic": None if a.check.symbolic is None else a.check.symbolic.value,
                        "contexts": len(a.check.contexts) + 1,
                        "racing": [c.scenario for c in a.check.contexts if not c.safe],
                        "text": a.check.text()},
                    "component": None if a.component is None else a.component.to_dict()} for a in report.advice],
        "safe": report.safe,
    }


def cmd_verify(args, out: TextIO) -> int:
    """Parse the backend file (or, with ``--sglang``, build it from the tree's sources: one per combination of
    conditional rows) -> ``model.verify.verify`` -> text or JSON -> exit code: 0 safe everywhere, 1 a race the
    backend brings, 3 only unknowns (or, with ``--sglang``, a declaration the reader leaves unresolved)."""
    from fencecheck.files.scenario_io import load_backend

    if getattr(args, "sglang", None):
        import io

        from fencecheck.decision.pipeline import backend_in_tree

        report = io.StringIO()  # written once whole: a read that fails late (the configurations) leaves no partial text
        with backend_in_tree(args.sglang, args.backend) as (source, found, later):
            todo = [(v, v.backend) for v in found]
            code = _verify_all(args, report, todo, source, later)
        out.write(report.getvalue())
        return code
    backend = load_backend(args.backend)
    from fencecheck.commands.check import warn_unknown_locations

    warn_unknown_locations(backend, args.backend, getattr(args, "err", None))
    from fencecheck.errors import ScenarioError
    from fencecheck.model.backend_facts import mode_facts

    if not mode_facts(backend):
        raise ScenarioError(args.backend, "", "the backend declares and reads nothing in any mode: nothing to verify "
                                              "(expected declares, reads, children or delegate)")
    return _verify_all(args, out, [(None, backend)], None, None)


def _verify_all(args, out: TextIO, todo: list, source, later) -> int:
    """Verifies each backend file of ``todo`` (with ``--sglang``: each in the tree's configurations too, which
    ``later`` gives, decided on a second core while the files are verified against the catalog here)."""
    import json

    from fencecheck.files.catalog import load_catalog
    from fencecheck.model.backend_facts import mode_facts

    catalog_version = args.catalog
    catalog = load_catalog(catalog_version)
    codes, docs = [], []
    if source is not None and not args.json:
        out.write(f"sglang {source.version or '(version unknown)'} at {source.root}: {source.cls} "
                  f"({source.file}:{source.line}) as the reader reads it: {len(todo)} backend file(s), one per "
                  f"combination of its conditional declaration rows\n")
    if later is not None:
        later.start({i: v.data for i, (v, b) in enumerate(todo) if mode_facts(b)}, own_models=bool(args.json))
    from fencecheck.model.verify import Shared

    shared = Shared(jobs=getattr(args, "jobs", None) or 1)  # the files differ in a few modes: the rest decided once
    try:
        for i in range(len(todo)):
            code, doc = _variant(args, i, todo, source, catalog, out,
                                 (lambda i=i: later.tree_of(i)) if later is not None else None, shared)
            codes.append(code)
            docs.append(doc)
    finally:
        shared.close()
    if args.json:
        if source is None:
            json.dump(docs[0], out, indent=2)
        else:
            json.dump({"sglang": {"root": source.root, "sglang_version": source.version, "class": source.cls,
                                  "file": source.file, "line": source.line, "catalog": catalog_version},
                       "variants": [d for d in docs if d is not None],
                       "safe": all(c == EXIT_OK for c in codes)}, out, indent=2)
        out.write("\n")
    return EXIT_RACE if EXIT_RACE in codes else EXIT_UNKNOWN if EXIT_UNKNOWN in codes else EXIT_OK


def _variant(args, i: int, todo, source, catalog, out: TextIO, tree, shared=None) -> tuple[int, dict | None]:
    """Verifies backend file ``i`` of ``todo``; ``tree``: None, or a function giving its (decided, races) in the
    tree's generated configurations; ``shared``: the answers of the report's other files (``model.verify.Shared``)."""
    from fencecheck.model.backend_facts import mode_facts

    variant, backend = todo[i]
    if variant is not None and not args.json and len(todo) > 1:
        out.write(f"variant {i + 1} of {len(todo)}: " + "; ".join(r.text() for r in variant.rows) + "\n")
    if not mode_facts(backend):
        if not args.json:
            out.write(f"verify {backend.name}: SAFE (it reads no scheduler-shared state in any mode and declares "
                      f"the base rule)\n")
        return EXIT_OK, None
    code, doc = _verify_one(args, backend, catalog, out, tree, shared)
    if doc is not None and variant is not None:
        doc = {"rows": [{"backend": r.backend, "mode": r.mode, "end": r.end, "condition": r.condition,
                         "declared_by": r.declared_by} for r in variant.rows], **doc}
    return code, doc


def _verify_one(args, backend, catalog, out: TextIO, tree=None, shared=None) -> tuple[int, dict | None]:
    """Verifies one backend file and writes its text report (with ``--json``: returns its document instead);
    ``tree``: with ``--sglang``, a function giving (decided, races) in the tree's generated configurations (None
    for a tree without them)
    (``verify_tree``), asked after the catalog's verification (its answer may be computed beside it)."""
    import sys

    from fencecheck.files.scenario_io import dump
    from fencecheck.model.symbolic_contexts import ASSUMED, RULE
    from fencecheck.model.verify import verify

    bar = None
    err = getattr(args, "err", sys.stderr)
    if getattr(args, "progress", False) or (hasattr(err, "isatty") and err.isatty()):
        from tqdm import tqdm

        bar = tqdm(desc=f"verify {backend.name}", unit="check", file=err, leave=False)
    tick = (lambda label: (bar.set_postfix_str(label[:40]), bar.update(1))) if bar is not None else None
    try:
        report = verify(backend, catalog, tick=tick, jobs=getattr(args, "jobs", None) or 1, shared=shared)
    finally:
        if bar is not None:
            bar.close()
    ce = report.counterexample
    if ce is not None and args.out:
        dump(ce.scenario, args.out)
    doc = None
    if args.json:
        doc = verify_json(report, explain_contexts(report))
    else:
        _verify_text(args, report, explain_contexts(report), out, RULE, ASSUMED)
    brought = report.verdict is Verdict.COUNTEREXAMPLE or any(c.brought and not c.safe for c in report.contexts)
    tree_brought = []
    if tree is not None:
        from fencecheck.decision.backend_contexts import tree_text

        got = tree()
        if got is not None:
            decided, races = got
            tree_brought = [r.configuration for r in races if not r.own]
            if args.json:
                doc = {**doc, "tree_configurations": {"decided": decided, "racing": [r.to_json() for r in races]}}
            else:
                out.write("\n".join(tree_text(decided, races)) + "\n")
    if not args.json:
        out.write(verdict_line(report, args.catalog, brought, tree_brought) + "\n")
    if report.safe and not tree_brought:
        return EXIT_OK, doc
    return (EXIT_RACE if brought or tree_brought else EXIT_UNKNOWN), doc


def verdict_line(report, catalog: str, brought: bool, tree: list[str] | tuple = ()) -> str:
    """The last line of ``verify``'s text: the verdict over every context, and where the contexts come from (with
    ``--sglang``, ``tree``: the tree's generated configurations the backend brings a race to)."""
    where = f"the symbolic family and {len(report.contexts)} scenarios of the {catalog} catalog"
    if report.safe and not tree:
        return f"verify {report.backend}: SAFE in every context ({where})"
    racing = [c.scenario for c in report.contexts if c.brought and not c.safe]
    symbolic = ["the symbolic family"] if report.verdict is Verdict.COUNTEREXAMPLE else []
    if brought or tree:
        shown = symbolic + racing + [f"{len(tree)} of the tree's generated configurations"] * bool(tree)
        return (f"verify {report.backend}: RACES in {len(symbolic) + len(racing) + len(tree)} context(s) "
                f"({', '.join(shown)}; of {where}" + (" and the tree's generated configurations" if tree else "")
                + ")")
    return f"verify {report.backend}: UNKNOWN (a solver ran out of its budget; never read as safe; of {where})"


def _verify_text(args, report, explained: dict, out: TextIO, rule, assumed) -> None:
    out.write(f"backend {report.backend}\n")
    for f in report.modes:
        sites = ", ".join(f"{s.value}: {'/'.join(locs)}" for s, locs in f.sites.items()) or "no reads"
        by = "" if f.declared_by == report.backend else f" (from {f.declared_by})"
        out.write(f"  {f.mode.value}: declares {f.declared.name}{by}; reads {sites}; "
                  f"{'within' if f.honest else 'OUTSIDE'} what {f.declared.name} covers\n")
    for line in report.findings:
        out.write(f"finding: {line}\n")
    under = f"under resolution {rule.value} and the assumptions {', '.join(assumed)}"
    out.write(f"symbolic contexts ({report.bounds.text()}): ")
    if report.verdict is Verdict.PROVED:
        out.write(f"proved race-free {under}\n")
        if args.out:
            out.write(f"  no counterexample: {args.out} not written\n")
    elif report.verdict is Verdict.UNKNOWN:
        out.write(f"UNKNOWN ({report.reason})\n")
    else:
        ce = report.counterexample
        loc, phase, site = ce.race_key()
        out.write(f"COUNTEREXAMPLE {under}: the read of {loc} by {phase} at {site} in step {ce.race.step} races "
                  f"({ce.bounds.phases} phase(s), {ce.bounds.steps} step(s))\n")
        race = _symbolic_race(ce)
        if race is not None:
            out.write(f"  the {race.read_text()}\n  vs the {race.write_text()}\n")
            out.write(f"  barrier: {race.barrier or 'none'}; missing edge: {race.missing_edge}\n")
        if args.out:
            out.write(f"  scenario written to {args.out}; replay: fencecheck check {args.out} --witness\n")
    out.write(f"catalog contexts ({args.catalog}): {len(report.contexts)} scenarios with a phase in a mode it covers\n")
    for c in report.contexts:
        beyond = sorted({p.text() for p in c.honest} - {r.place().text() for r in c.own_races})
        own = c.own_verdict is not Verdict.PROVED or bool(beyond)
        status = c.report.verdict.text if not own else ("adds no race" if c.safe else "COUNTEREXAMPLE")
        if c.races_anyway:
            status = "races with any backend" if c.safe else "COUNTEREXAMPLE: races with any backend"
        out.write(f"  {c.scenario}: {status}")
        if c.failed:
            out.write(f"  [outside the symbolic proof: fails {', '.join(c.failed)}]")
        out.write("\n")
        if c.races_anyway:
            locs = sorted({loc for f in report.modes for locs in f.sites.values() for loc in locs})
            out.write(f"    every backend that reads {'/'.join(locs)} races here (each read site, each declaration "
                      f"tried); " + (c.component.text() if c.component is not None
                                     else "no named assumption it fails names the component to change") + "\n")
        if beyond:  # what an honest backend races at here beyond the scenario's own races: the context's too
            adds = "; ".join(sorted({r.place().text() for r in c.brought})) or "nothing"
            out.write(f"    races with an honest backend too (the context's own: the base rule, reading at every "
                      f"site it covers): {'; '.join(beyond)}; this backend adds: {adds}\n")
        if c.own_verdict is not Verdict.PROVED:
            kept = ("; ".join(sorted({r.place().text() for r in c.kept}))
                    or "none (its racing reads were this backend's)")
            out.write(f"    races on its own (catalog verdict counterexample): "
                      f"{'; '.join(r.text() for r in c.own_races) or 'yes'}; with this backend it still races at: "
                      f"{kept}\n")
        first: dict = {}
        for r in c.brought:
            first.setdefault(r.place(), []).append(r)
        for place, rs in first.items():
            more = f" (also in step {', '.join(str(r.step) for r in rs[1:])})" if len(rs) > 1 else ""
            out.write(f"    race: {rs[0].text()}{more}: {_phase_text(report, c, rs[0])}\n")
            race = explained.get((c.scenario, rs[0]))
            if race is not None:
                out.write(f"      the {race.read_text()}\n")
                out.write(f"      vs the {race.write_text()}\n")
                out.write(f"      barrier: {race.barrier or 'none'}; {race.write_stream} was ordered only after "
                          f"{race.synced_up_to or 'no kernel of this step'}"
                          + (f" via {race.via}" if race.via else "") + "\n")
                out.write(f"      missing edge: {race.missing_edge}\n")
    for a in report.advice:
        out.write(f"advice: {a.text()}\n")


VERIFY_HELP = """Check one attention backend's SharedReadEnds declarations against its reads in every context: the
symbolic family (any configuration within the bounds, under the main theorem's assumptions) and every catalog
scenario with the backend swapped in. Every race is explained and every proposed change (a declaration, a read moved
out of the graph, or a change outside the backend where no backend change fixes it) is verified over the same
contexts before it is printed. A context where every backend that reads the same locations races is reported as
racing with any backend, with the component that must change."""


VERIFY_EXIT_CODES = EXIT_CODES_HELP.replace(
    "  0  safe / proved / all as expected",
    "  0  safe / proved in every context (a context's own races, where any backend races too, do not count)").replace(
    "  1  race / counterexample / a verdict differs from its expectation",
    "  1  race / counterexample the backend brings (in the symbolic family or a catalog context)").replace(
    "  2  bad input (one line naming the file, the key and what was expected)",
    "  2  bad input (one line naming the file, the key and what was expected; a backend that speaks for no mode)").replace(
    "  3  unknown (a solver ran out of budget; never reported as proved)",
    "  3  unknown (a solver ran out of budget; never reported as proved); with --sglang also a declaration the\n"
    "     reader leaves unresolved (one line: nothing sound to verify)\n"
    "  with --sglang, the status is the worst over the backend files of the class's conditional declaration rows")


def add_parser(sub) -> None:
    """The ``verify`` subcommand's arguments."""
    from fencecheck.files.catalog import DEFAULT_VERSION as CATALOG_DEFAULT, VERSIONS as CATALOG_VERSIONS

    p = sub.add_parser("verify", help="prove one backend (a backend file) safe in every context, or show the race",
                       description=VERIFY_HELP, epilog=VERIFY_EXIT_CODES)
    p.add_argument("backend", metavar="BACKEND.toml | CLASS",
                   help="the backend file: plain, composite or hybrid (docs/verify.md; fencecheck schema --kind "
                        "backend); with --sglang, the name of an attention backend class of the tree (MODULE:Class "
                        "for a name two modules define, the module dotted or as its file)")
    p.add_argument("--sglang", default=None, metavar="TREE",
                   help="verify the class CLASS of the SGLang tree TREE (a checkout, its python/ folder or a sglang "
                        "package) as fencecheck's reader reads it: its declaration per mode, its reads per site, the "
                        "children its declaration names (docs/verify.md)")
    p.add_argument("--out", "-o", default=None, metavar="FILE.toml",
                   help="write the symbolic counterexample as a scenario here, if there is one (replay it with "
                        "fencecheck check FILE.toml --witness)")
    p.add_argument("--json", action="store_true", help="machine-readable report (docs/verify.md)")
    p.add_argument("--jobs", "-j", type=positive, default=None, metavar="N",
                   help="worker processes for the symbolic checks of the proposed changes (default: 1; more help "
                        "only where cores are free); the report is the same for any N")
    p.add_argument("--catalog", default=CATALOG_DEFAULT, choices=CATALOG_VERSIONS, metavar="VERSION",
                   help=f"the catalog whose configurations are the contexts ({', '.join(CATALOG_VERSIONS)}; default "
                        f"{CATALOG_DEFAULT}, SGLang as released)")
    p.add_argument("--progress", action="store_true", help=PROGRESS_HELP)
    p.set_defaults(func=cmd_verify, **outputs(("out", False), inputs=(("backend", "file"), ("sglang", "tree"))))
