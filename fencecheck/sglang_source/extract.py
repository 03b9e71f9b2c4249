"""The facts ``fencecheck sglang`` reads from a tree: backends with their declarations and read sites, workers'
``last_shared_read_runner``, the barrier and its event loops, runners' publish behaviour, the speculative
algorithms; and the findings.

Every fact carries file:line (files relative to the ``sglang`` package's parent, as ``sglang/srt/...``). Output is
sorted, so the same tree gives the same document.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass, field, replace

from ..vocab import COVERED_SITES, ReadSite, SharedReadEnds
from .algorithm_records import Algorithm
from .backend_reader import STARTUP_ENTRIES, Reader
from .declare import Child, End, MaxOf
from .findings import Finding, NotFinding, ReadOutsideDeclaration, UnresolvedDeclaration
from .limits import cut_finding, cut_rows, notes, unknown_child_finding
from .reads import Read, ReadWalker, hard_sync
from .records import (
    Backend,
    BackendRead,
    Barrier,
    ClassAt,
    Declaration,
    DeclRow,
    Evidence,
    Runner,
    Snapshot,
    WorkerPublisher,
    condition_text,
    unresolved_row,
)
from .feasible import simplified
from .tree import ClassInfo, Tree
from .tree_files import Note


@dataclass(frozen=True)
class Extraction:
    """What the reader read from one tree (``to_json``: the document, docs/sglang-reader.schema.json), with what
    the document does not show: the call graph of the reads, the fingerprints of the functions the facts come from
    (``drift.Fingerprints``) and the reading's counts. ``notes``: what the reader skipped or could not read
    (``limits.notes``)."""

    root: str
    version: str | None
    modes: tuple[str, ...]
    modes_at: tuple[str, int]
    backends: tuple[Backend, ...]
    workers: tuple[WorkerPublisher, ...]
    barrier: Barrier
    runners: tuple[Runner, ...]
    algorithms: tuple[Algorithm, ...]
    findings: tuple[Finding, ...]
    not_findings: tuple[NotFinding, ...]
    notes: tuple[Note, ...] = ()
    call_graph: object = field(default=None, compare=False, repr=False)
    fingerprints: object = field(default=None, compare=False, repr=False)
    stats: dict = field(default_factory=dict, compare=False)
    protocol: object = field(default=None, compare=False, repr=False)  # protocol.Protocol: fence, runners, platforms
    facts: dict = field(default_factory=dict, compare=False)  # facts.read_facts: the protocol facts' top-level keys
    #: the ``Tree`` it was read from (its modules parsed already), for a decision step that reads the tree again
    #: (``decision.graph_capture``); not in the document
    tree: object = field(default=None, compare=False, repr=False)

    def to_json(self) -> dict:
        return {
            "sglang_version": self.version,
            "root": self.root,
            "forward_modes": {"modes": list(self.modes), "file": self.modes_at[0], "line": self.modes_at[1]},
            "backends": [b.to_json() for b in self.backends],
            "workers": [w.to_json() for w in self.workers],
            "barrier": self.barrier.to_json(),
            "runners": [r.to_json() for r in self.runners],
            "algorithms": [a.to_json() for a in self.algorithms],
            "findings": [f.to_json() for f in self.findings],
            "not_findings": [f.to_json() for f in self.not_findings],
            "notes": [n.to_json() for n in self.notes],
            **self.facts,
        }


def read_tree(tree: Tree, early=None) -> Extraction:
    """The extraction of ``tree``: with the declaration fence, everything (backends, findings, protocol facts); with an
    older fence or none, its protocol facts only (``older_fence``). ``early``: called with the tree, its forward modes,
    the findings and the platform rows as soon as the findings are read, before the rest of the facts (a caller that
    starts work on them meanwhile)."""
    from .algorithms import read_algorithms
    from .device import never_published, silent_devices
    from .drift import collect
    from .facts import read_facts
    from .fence_sites import barrier, workers
    from .protocol import DECLARATION, read_protocol

    proto = read_protocol(tree)
    if proto.kind != DECLARATION:
        return older_fence(tree, proto)
    rd = Reader(tree)
    runner = proto.decode_runner()
    rd.no_marker = runner.fallback if runner is not None else None
    from .capture_state import capture_only_marker

    rd.marker_guard = capture_only_marker(proto.marker)
    rd.silent = silent_devices(tree, tuple(r.row() for r in proto.runners))
    rd.platform_rows = {p["platform"]: p for p in proto.platforms}
    rd.eager_quiet = _eager_quiet(rd, proto)
    backends, findings, not_findings = [], [], []
    for ci in rd.backends:
        b, f, nf = _backend(rd, ci)
        backends.append(b)
        findings += f
        not_findings += nf
    findings.sort(key=lambda f: (f.subject, f.subject_at, f.mode or "", f.kind, json_key(f)))
    worker_rows = workers(tree, proto.publisher_property or "last_shared_read_runner")
    runner_rows = tuple(r.row() for r in proto.runners)
    findings, moved = never_published(tree, rd, findings, runner_rows)
    if early is not None:
        early(tree, rd.modes, tuple(findings), proto.platforms)
    _model_notes(tree, rd, runner_rows)
    unique = {(f.subject, f.mode or "", f.file, f.line, f.location, f.why): f for f in
              sorted(not_findings + moved, key=lambda f: (len(f.via), f.via), reverse=True)}
    ex = Extraction(str(tree.root), tree.version(), tuple(rd.modes.members), (rd.modes.file, rd.modes.line),
                    tuple(backends), worker_rows, barrier(tree), runner_rows,
                    read_algorithms(tree, rd.modes, worker_rows, runner_rows), tuple(findings),
                    tuple(unique[k] for k in sorted(unique)), call_graph=rd.walker.graph, protocol=proto)
    prints = collect(tree, rd, ex)
    return replace(ex, fingerprints=prints, facts=read_facts(tree, rd, ex), notes=notes(tree), tree=tree, stats={
        "files": len(tree.paths), "parsed": tree.parsed, "graph_nodes": rd.walker.graph.number_of_nodes(),
        "graph_edges": rd.walker.graph.number_of_edges()})


def _eager_quiet(rd: Reader, proto) -> frozenset[str]:
    """The graph-replayed modes no eager run of which publishes (``Reader.replayed_only``): for each runner whose MRO
    holds a class named ``EagerRunner`` (there must be one), no publish event can happen in the mode, by its own
    path's tests (a mode test on it decided false: 0.5.23's ``not mode.is_decode()``, 0.5.22's ``forward_mode !=
    ForwardMode.EXTEND``) or, where it needs the resolved end to be one of its ``ends`` (``shared_read_ends is
    PRE_REPLAY``), because each resolve on its own call chain returns none of them in that mode for any backend of the
    tree (``Reader.rows`` of the resolving method, evaluated per mode: 0.5.23's ``resolve_prefill_shared_read_ends``
    is ``UNKNOWN`` unless the mode is ``EXTEND``). In any other mode a host sync or a capture-mode test keeps no read
    out."""
    eager = [r for r in proto.runners if any(c.name == "EagerRunner" for c in rd.tree.mro(r.ci))]
    if not eager:
        return frozenset()
    quiet = set(rd.graph_modes)
    for r in eager:
        resolves = [e for e in r.events if e.kind == "resolve"]
        for e in (e for e in r.events if e.kind == "publish"):
            keys = [k for k, _ in e.chain]
            on_path = [x for x in resolves if [k for k, _ in x.chain] == keys[:len(x.chain)]]
            for m in sorted(quiet):
                if _dead_in_mode(rd, e.conditions, m):
                    continue
                if not e.ends or not on_path or any(_may_resolve(rd, x, m, e.ends) for x in on_path):
                    quiet.discard(m)
    return frozenset(quiet)


def _may_resolve(rd: Reader, resolve, mode: str, ends) -> bool:
    """Whether the method the ``resolve`` event calls may return one of ``ends`` in ``mode`` for some backend (its
    rows not evaluated, or one of them an end among ``ends`` or not a plain end)."""
    from .declare import End

    method = resolve.what.rsplit(".", 1)[-1]
    for ci in rd.backends:
        rows = rd.rows(ci, mode, method)[0]
        if rows is None or any(not isinstance(v, End) or v.name in ends for _, v in rows):
            return True
    return False


def _dead_in_mode(rd: Reader, conditions, mode: str) -> bool:
    """Whether one of ``conditions`` (texts) is false in ``mode`` (``reads.decided_test``)."""
    from .reads import decided_test

    for text in conditions:
        try:
            e = ast.parse(text, mode="eval").body
        except (SyntaxError, RecursionError):
            continue
        if decided_test(rd.modes, mode, e)[0] is False:
            return True
    return False


def _model_notes(tree: Tree, rd: Reader, runner_rows: tuple) -> None:
    """The unresolved notes on reads in the model's own layers (``model_reads``), added to the tree's notes; their
    walker is their own, so the backends' call graph and fingerprints are the backends' alone."""
    from .device import PlatformPaths
    from .model_reads import model_reads

    walker = ReadWalker(tree, rd.modes, rd.attr_types)
    for file, line, what in model_reads(tree, walker, PlatformPaths(tree, runner_rows, rd.modes)):
        tree.note(file, line, what)


def older_fence(tree: Tree, proto) -> Extraction:
    """The extraction of a tree without the declaration fence: its protocol facts only (no backend, nothing
    decided)."""
    from .declare import Modes
    from .drift import collect_protocol
    from .facts import protocol_keys
    from .fence_sites import barrier, workers
    from .tree import NotSGLang

    modes, at = (), (None, None)
    try:
        m = Modes(tree)
        modes, at = tuple(m.members), (m.file, m.line)
    except NotSGLang:  # a tree without ForwardMode has no modes to list (the fence says what it has)
        pass
    if proto.barriers:
        bar = barrier(tree)
        worker_rows = workers(tree, proto.publisher_property) if proto.publisher_property else ()
    else:
        bar, worker_rows = Barrier((), (), ()), ()
    return Extraction(str(tree.root), tree.version(), modes, at, (), worker_rows, bar,
                      tuple(r.row() for r in proto.runners), (), (), (), notes(tree),
                      fingerprints=collect_protocol(proto), stats={"files": len(tree.paths), "parsed": tree.parsed},
                      protocol=proto, facts=protocol_keys(proto))


def json_key(f) -> str:
    """A record's document as one canonical text (ties in a sort broken by the whole record)."""
    return json.dumps(f.to_json(), sort_keys=True)


def _declaration(rows) -> Declaration:
    return Declaration(tuple(DeclRow(tuple(c), v.text()) for c, v in rows))


def _read(mode: str, site: ReadSite, r: Read, conditions: tuple[str, ...] = ()) -> BackendRead:
    return BackendRead(mode, site.value, r.location, r.file, r.line, r.what, r.via_text(),
                       conditions + tuple(r.conditions))


def _backend(rd: Reader, ci: ClassInfo) -> tuple[Backend, list, list]:
    """The backend ``ci``, its findings and its not findings."""
    tree = rd.tree
    hit = tree.lookup(ci, "shared_read_ends")
    owner = hit[0] if hit else None
    declares, kinds, findings, not_findings = [], set(), [], []
    for mode in rd.modes.members:
        rows, err = rd.rows(ci, mode)
        if rows is None:
            declares.append((mode, Declaration((unresolved_row(err.reason, err.line),))))
            kinds.add("unresolved")
            findings.append(UnresolvedDeclaration(ci.name, f"{ci.file}:{ci.line}", mode, (Evidence(
                owner.file if owner else ci.file, err.line or (owner.line if owner else ci.line),
                f"shared_read_ends({mode}) not evaluated: {err.reason}"),)))
            continue
        declares.append((mode, _declaration(_declared_rows(rd, ci, rows, mode))))
        for c, v in rows:
            if c:
                kinds.add("conditional")
            if isinstance(v, MaxOf):
                kinds.add("composite")
            elif isinstance(v, Child):
                kinds.add("delegating")
        f, nf = _findings_for(rd, ci, mode, rows, hit)
        findings += f
        not_findings += nf
    reads, keys = [], set()
    for mode in rd.modes.members:
        for site, r in rd.reads(ci, mode):
            keys.update(h.key for h in r.via)  # a guarded read's status depends on its chain's code too (drift)
            if not hard_sync(r.host_sync, rd.replayed_only(mode)):
                reads.append(_read(mode, site, r))
    reads += _passed_reads(rd, ci, keys)
    for method in STARTUP_ENTRIES:
        for r in rd.walker.method_reads(ci, method, None):
            not_findings.append(NotFinding(ci.name, None, r.location, r.file, r.line, r.via_text(),
                                           f"start-up only ({r.via[0].func})"))
    snap = tree.lookup(ci, "_snapshot_prefill_shared_reads")
    snapshot = None
    if snap is not None and snap[0] is not rd.root:
        rows, err = rd.rows(ci, "EXTEND", "_snapshot_prefill_shared_reads")
        snapshot = Snapshot(snap[0].name, snap[0].file, snap[1].lineno, _declaration(rows) if rows is not None else
                            Declaration((unresolved_row(err.reason, err.line),)))
        if rows is not None:
            findings += _findings_for(rd, ci, "EXTEND", rows, snap, snapshot=True)[0]
    kind = "base" if ci is rd.root else ("inherited" if owner is not ci else "override")
    backend = Backend(
        ci.name, ci.file, ci.line, ci.module.name, tuple(c.name for c in tree.bases(ci)),
        tuple(c.name for c in tree.mro(ci)), ClassAt(owner.name, owner.file, hit[1].lineno) if hit else None,
        kind, tuple(sorted(kinds)), tuple(declares), snapshot,
        tuple((a, c.name) for a, c in sorted(rd.attr_types(ci).items(), key=lambda x: x[0])),
        tuple((a, tuple(opts)) for a, opts in sorted(rd.passed.of(ci).items(), key=lambda x: x[0])),
        tuple(sorted(rd.walker.unfollowed.get(ci.key, ()))), _dedupe(reads), cut_rows(rd, ci), frozenset(keys))
    return backend, findings, not_findings


def _dedupe(reads: list[BackendRead]) -> tuple[BackendRead, ...]:
    best = {}
    for r in reads:
        k = (r.mode, r.site, r.location, r.file, r.line)
        if k not in best or (len(r.via), r.via) < (len(best[k].via), best[k].via):
            best[k] = r
    return tuple(best[k] for k in sorted(best))


def _uncaptured_why(at: tuple) -> str:
    return (f"behind a capture-mode test at {at[0]}:{at[1]} (the path needs get_is_capture_mode() false, and it is "
            "true while a CUDA graph is captured or a breakable graph runs: a path no graph replay of this mode runs)")


def _platform_paths(rd: Reader, ci: ClassInfo, mode: str, cond: tuple[str, ...], reads: list,
                    end: str | None = None) -> tuple[list, list]:
    """``reads`` ((site, read) pairs) split into those whose path can race on some platform and (read, why) for the
    others: a path whose tests are false on every platform (``attributes.on_platform``: each ``self.A`` defined by a
    platform's predicate replaced by it, one predicate true at a time), or, in a mode a decode graph replays, true
    only on platforms where the read cannot race: a device whose runners never publish (``rd.silent``,
    ``device.silent_devices``: the barrier waits on the whole forward stream there), or, for a row declaring
    ``IN_REPLAY`` (``end``), a platform whose decode graph runner has no in-graph marker and falls back to an end that
    covers the read's site (``rd.platform_rows``: 0.5.23's HIP resolves ``IN_REPLAY`` as ``POST_REPLAY``). Taken
    only where every hop of the read's chain is a method of ``ci``'s MRO, so ``self`` in its tests is ``ci``'s
    instance, and the tests can be judged in ``ci``'s module (``_platform_trusted``); ``cond`` holds the row's own
    tests, not a child's."""
    from ..vocab import Platform
    from .attributes import _platform_values, on_platform

    replayed = rd.modes.predicate("is_cuda_graph", mode) is True
    own = {c.key: c.module.name for c in rd.tree.mro(ci)}
    keep, pruned = [], []
    for s, r in reads:
        texts = tuple(cond) + tuple(r.conditions)
        owners = {h.key.rsplit(".", 1)[0] for h in r.via}
        if not texts or not owners <= own.keys() or not _platform_trusted(rd, ci, texts, {own[k] for k in owners}):
            keep.append((s, r))
            continue
        allowed = [p.value for p in Platform if on_platform(rd.tree, ci, texts, p.value) is not None]
        why = {p: _quiet(rd, p, mode, s, end) for p in allowed} if replayed else {}
        if len(allowed) == len(Platform) or any(why.get(p) is None for p in allowed):
            keep.append((s, r))
            continue
        deciding = [c for t in texts for c, values in _platform_values(rd.tree, ci, t) if False in values.values()]
        tests = " and ".join(f"`{c}`" for c in dict.fromkeys(deciding))
        defs = _platform_defs(rd, ci, deciding)
        if not allowed:
            pruned.append((r, f"its path runs on no platform: {tests} cannot all hold with one platform's predicate "
                              f"true{defs}"))
        else:
            pruned.append((r, f"runs only on {', '.join(allowed)}: {tests}{defs}; "
                              + "; ".join(why[p] for p in allowed)))
    return keep, pruned


def _platform_trusted(rd: Reader, ci: ClassInfo, texts, modules: set[str]) -> bool:
    """Whether ``texts`` (tests of a path through methods of the ``modules``) can be judged per platform as
    ``attributes.on_platform`` judges them, in ``ci``'s module: a call there that the platform evaluator would decide
    other than a platform's predicate by name (a helper such as ``_fused_ok()``) only where every method on the path
    is in that module (the name may mean another function where the test was written); and every ``self.A`` a
    predicate defines (``attributes._platform_definition``: nothing else in the tree assigns ``<x>.A``) assigned once on
    ``ci``'s MRO, in ``__init__`` of a class of that module when its definition holds such a call, and never assigned
    in another method, ``setattr(self, "A", ...)`` included (``feasible.volatile_attributes``). As there, a
    ``setattr`` through another receiver is not seen."""
    from ..vocab import Platform
    from .attributes import _platform_definition, self_assignments
    from .feasible import volatile_attributes
    from .platform import Evaluator

    ev = Evaluator(rd.tree)
    here = ci.module.name

    def calls_ok(e, where: set[str]) -> bool:
        for n in ast.walk(e):
            if not isinstance(n, ast.Call) or n.args or n.keywords or where <= {here}:
                continue
            if (n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", None)) in ev.names:
                continue
            if any(ev.value(ci.module, n, p.value, {}) is not None for p in Platform):
                return False
        return True

    memo = rd.__dict__.setdefault("_volatile", {})
    for t in texts:
        try:
            e = ast.parse(t, mode="eval").body
        except (SyntaxError, RecursionError):
            return False
        if not calls_ok(e, modules):
            return False
        for n in ast.walk(e):
            if not (isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self"):
                continue
            d = _platform_definition(rd.tree, ci, n.attr)
            if d is None:
                continue
            if ci not in memo:
                memo[ci] = volatile_attributes(rd.tree, ci)
            owners = [c for c in rd.tree.mro(ci) for _ in self_assignments(rd.tree, c, n.attr)]
            if n.attr in memo[ci] or len(owners) != 1 or not calls_ok(d, {owners[0].module.name}):
                return False
    return True


def _quiet(rd: Reader, platform: str, mode: str, site, end: str | None) -> str | None:
    """Why a read at ``site`` in a graph-replayed mode cannot race on ``platform`` (its runners never publish, or its
    decode graph runner has no marker and resolves the row's ``IN_REPLAY`` by a fallback that covers ``site``), or
    None."""
    if platform in rd.silent:
        return f"{rd.silent[platform]}: the barrier waits on the whole forward stream after a {mode} step there"
    row = rd.platform_rows.get(platform) or {}
    fb = row.get("fallback")
    if end != "IN_REPLAY" or row.get("marker") != "absent" or not fb or row.get("runner_policy") != "resolve" \
            or site not in COVERED_SITES[SharedReadEnds[fb["end"]]]:
        return None
    return (f"{platform} has no in-graph marker ({row.get('marker_why')}), so its decode graph runner resolves "
            f"IN_REPLAY by the fallback to {fb['end']} ({fb['rule']}, {fb['file']}:{fb['line']}), which covers "
            f"{site.value}")


def _platform_defs(rd: Reader, ci: ClassInfo, conjuncts) -> str:
    """`` (self.A = <definition> at file:line; ...)`` for each ``self.A`` in ``conjuncts`` a platform's predicate
    defines on an instance of ``ci``."""
    from .attributes import _Definitions, _platform_definition

    out = []
    for c in conjuncts:
        for n in ast.walk(ast.parse(c, mode="eval").body):
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self":
                e = _platform_definition(rd.tree, ci, n.attr)
                if e is None:
                    continue
                at = _Definitions(rd.tree, ci, {n.attr}).at.get(n.attr)
                text = f"self.{n.attr} = {ast.unparse(e)}" + (f" at {at}" if at else "")
                if text not in out:
                    out.append(text)
    return f" ({'; '.join(out)})" if out else ""


def _feasible(rd: Reader, ci: ClassInfo, cond: tuple[str, ...], reads: list) -> tuple[list, list]:
    """``reads`` ((site, read) pairs) split into those whose path can run under the declaration row's conditions
    ``cond`` and (read, why) for those whose path cannot (``feasible.contradiction``: an unsatisfiable core)."""
    from .feasible import contradiction, may_contradict, volatile_attributes

    memo = rd.__dict__.setdefault("_volatile", {})
    mro = {c.name for c in rd.tree.mro(ci)}
    keep, pruned = [], []
    for s, r in reads:
        if not may_contradict(cond + tuple(r.conditions)):
            keep.append((s, r))
            continue
        if ci not in memo:
            memo[ci] = volatile_attributes(rd.tree, ci)
        same_self = all(h.func.split(".")[0] in mro or h.func.split(".")[0][:1].islower() for h in r.via)
        core = contradiction(cond + tuple(r.conditions), memo[ci], same_self)
        if core is None:
            keep.append((s, r))
        else:
            pruned.append((r, "its path cannot run: " + " and ".join(f"`{c}`" for c in core) + " cannot all hold "
                              "(the SMT solver: unsatisfiable, each text naming one value on the backend's own "
                              "class)"))
    return keep, pruned


def _findings_for(rd: Reader, ci: ClassInfo, mode: str, rows, decl, snapshot: bool = False) -> tuple[list, list]:
    """Findings and not findings of ``ci`` in ``mode`` for the declaration ``rows`` of ``decl`` (owner, def). A
    prefill snapshot's rows (``snapshot``) are published after the whole eager metadata prep, in-graph part
    included, so that part is covered too; its not findings are listed once, with the declaration's rows."""
    owner, node = decl
    all_reads = rd.reads(ci, mode)
    graph = rd.replayed_only(mode)
    findings = []
    not_findings = [] if snapshot else [
        NotFinding(ci.name, mode, r.location, r.file, r.line, r.via_text(), _uncaptured_why(r.host_sync))
        for _, r in all_reads if hard_sync(r.host_sync, graph)]
    live = [(s, r) for s, r in all_reads if not hard_sync(r.host_sync, graph)]
    live_cuts = [(s, c) for s, c in rd.cuts(ci, mode) if not hard_sync(c.host_sync, graph)]
    for conds, value in rows:
        expanded = rd.expand(value, mode, subject=ci)
        if any(end is None for _, end, _ in expanded):  # a child of unknown class: its reads are not known either
            f = unknown_child_finding(rd, ci, mode, conds, value, decl,
                                      _platform_paths(rd, ci, mode, tuple(conds), live)[0], live_cuts, snapshot)
            if f is not None:
                findings.append(f)
        for c2, end, chosen in expanded:
            if end is None:
                continue
            covered = COVERED_SITES[SharedReadEnds[end]]
            if snapshot:
                covered = covered | {ReadSite.IN_GRAPH_BEFORE_MARKER}
            # a child picked among those the constructing calls pass: its reads are the composite's in that row
            extra = [(s, r) for k in chosen for s, r in rd.reads(k, mode) if not hard_sync(r.host_sync, graph)]
            cond = tuple(conds) + tuple(c2)
            bad, pruned = _feasible(rd, ci, cond, [(s, r) for s, r in live + extra if s not in covered])
            bad, elsewhere = _platform_paths(rd, ci, mode, tuple(conds), bad, end)  # a child's row: its own self
            pruned += elsewhere
            bad, whole_graph, uncaptured = _whole_graph(rd, ci, mode, bad, end)
            pruned += uncaptured
            not_findings += [NotFinding(ci.name, mode, r.location, r.file, r.line, r.via_text(), why)
                             for r, why in pruned if snapshot is False]
            cut = [(s, c) for s, c in live_cuts + [x for k in chosen for x in rd.cuts(k, mode)]
                   if s not in covered and not hard_sync(c.host_sync, graph)]
            if cut:
                findings.append(cut_finding(ci, mode, end, cond, decl, cut))
            if not bad:
                continue
            seen, evidence = set(), [Evidence(owner.file, node.lineno,
                                              f"{owner.name}.{node.name} declares {end} for {mode}"
                                              + (f" when {simplified(cond)}" if cond else ""))]
            plausible = bool(cond)
            for s, r in sorted(bad, key=lambda x: (x[1].file, x[1].line, x[0].value)):
                k = (r.file, r.line, s)
                if k in seen:
                    continue
                seen.add(k)
                plausible |= bool(r.conditions)
                evidence.append(Evidence(r.file, r.line, f"reads {r.location} at {s.value} via "
                                         + " -> ".join(h.func for h in r.via)
                                         + (f" ({r.source})" if r.source else "")
                                         + (f" (when {simplified(r.conditions)})" if r.conditions else "")))
            evidence += _passed_evidence(rd, ci, [r for _, r in bad], chosen)
            findings.append(ReadOutsideDeclaration(ci.name, f"{ci.file}:{ci.line}", mode, end, node.name, cond,
                                                   "plausible" if plausible else "confirmed", tuple(evidence),
                                                   tuple(bad), settled=_settled(rd, ci, cond, bad) if plausible
                                                   else (), whole_graph=tuple(whole_graph)))
    return findings, not_findings


def _whole_graph(rd: Reader, ci: ClassInfo, mode: str, bad, end: str) -> tuple[list, list, list]:
    """``bad`` (site, read) pairs, each in-graph read's ``capture_state.CaptureFact`` (None where the capture fixes
    no test on its path: no attribute its object lacks, ``capture_state``, nor a field it binds,
    ``capture_binding``), and (read, why) for the reads no replay runs: those whose path the capture of a graph rules
    out, in a tree without breakable graphs, or where the one replay that runs the forward eagerly (the breakable
    backend's debug replay, which records no marker: the tree makes it only under stream capture, ``rd.marker_guard``)
    falls back from the row's ``IN_REPLAY`` to ``POST_REPLAY``, which covers the forward (the CUDA decode graph
    runner's no-marker fallback, ``rd.no_marker``); the others stay, with their fact, for the status."""
    from .capture_binding import binding_fact
    from .capture_state import BREAK_MARKER, CaptureFact, break_marker, capture_fact

    keep, facts, gone = [], [], []
    breakable = break_marker(rd.tree)
    fb = rd.no_marker
    guard = rd.marker_guard
    covered = end == "IN_REPLAY" and fb is not None and fb.end == "POST_REPLAY" and guard is not None
    for s, r in bad:
        fact = None
        if s in (ReadSite.IN_GRAPH_BEFORE_MARKER, ReadSite.IN_GRAPH_AFTER_MARKER):
            fact = capture_fact(rd.tree, ci, rd.modes, mode, r) or binding_fact(rd.tree, ci, rd.modes, mode, r)
            at = r.host_sync if rd.replayed_only(mode) else None  # an eager run syncs and reads on
            if fact is None and at is not None and len(at) == 4:  # a call that host-syncs on every path
                fact = CaptureFact(f"the call {at[3]} host-syncs on every path ({at[0]}:{at[1]}), which a CUDA graph "
                                   "cannot capture", "runs the call, host sync and all")
            elif fact is None and at is not None and len(at) == 2:  # an explicit host sync
                fact = CaptureFact(f"it host-syncs first ({at[0]}:{at[1]}), which a CUDA graph cannot capture",
                                   "runs the host sync")
        if fact is not None and breakable is None:
            gone.append((r, f"no graph captures its path: {fact.why}; the tree has no breakable graphs"))
            continue
        if fact is not None and covered:
            gone.append((r, f"no graph captures its path: {fact.why}; the one replay that runs the forward eagerly, "
                            f"the breakable backend's debug replay (one break, {BREAK_MARKER} at {breakable[0]}:"
                            f"{breakable[1]}, around the whole forward), records no marker (it is made and recorded "
                            f"only while a stream captures: `if {guard[2]}: return` at {guard[0]}:{guard[1]}), and "
                            f"{fb.function} falls back from IN_REPLAY to POST_REPLAY then ({fb.file}:{fb.line}), "
                            "which covers the forward"))
            continue
        keep.append((s, r))
        facts.append(fact)
    return keep, facts, gone


def _settled(rd: Reader, ci: ClassInfo, cond, bad) -> tuple:
    """Per platform, what of the row's and each uncovered read's conditions is not settled there
    (``ReadOutsideDeclaration.settled``)."""
    from ..vocab import Platform
    from .attributes import on_platform

    return tuple((p.value, on_platform(rd.tree, ci, cond, p.value),
                  tuple(on_platform(rd.tree, ci, r.conditions, p.value) for _, r in bad)) for p in Platform)


def _passed_evidence(rd: Reader, ci: ClassInfo, reads, chosen=()) -> list[Evidence]:
    """The calls constructing ``ci`` that pass a child a read's call chain enters (or the row ``chosen``)."""
    entered = {h.func.split(".")[0] for r in reads for h in r.via}
    single = rd.passed.single(ci)
    out = []
    for attr, opts in sorted(rd.passed.of(ci).items()):
        for o in opts:
            if o.cls is not None and (any(o.cls is k for k in chosen) or
                                      (single.get(attr) is o.cls and o.cls.name in entered)):
                out.append(Evidence(o.file, o.line, f"constructs {ci.name} with self.{attr} = {o.cls.name}"
                                    + (f" when {condition_text(o.conditions)}" if o.conditions else "")))
    return out


def _passed_reads(rd: Reader, ci: ClassInfo, keys: set) -> list[BackendRead]:
    """The reads of each child, among several the constructing calls pass, that ``ci`` calls into (a call on
    ``self.attr`` left unfollowed), each under the conditions that pick that child."""
    calls = " ".join(rd.walker.unfollowed.get(ci.key, ()))
    single = rd.passed.single(ci)
    out = []
    for attr, opts in sorted(rd.passed.of(ci).items()):
        if attr in single or f"self.{attr}." not in calls:
            continue
        for o in opts:
            if o.cls is None:
                continue
            pick = tuple(o.conditions) + (f"self.{attr} is {o.cls.name} ({o.file}:{o.line})",)
            for mode in rd.modes.members:
                for site, r in rd.reads(o.cls, mode):
                    if not hard_sync(r.host_sync, rd.replayed_only(mode)):
                        out.append(_read(mode, site, r, pick))
                        keys.update(h.key for h in r.via)
    return out


def _declared_rows(rd: Reader, ci: ClassInfo, rows, mode: str):
    """``rows`` with each delegation to a child the constructing calls pass (all options resolved, more than one
    class or under a condition) replaced by one row per option: its conditions and that child's end."""
    out = []
    for conds, v in rows:
        opts = None
        if isinstance(v, Child) and v.cls is None and not v.many and v.src.startswith("self.") \
                and v.src.count(".") == 1:
            opts = rd.passed.of(ci).get(v.src[5:])
        if not opts or any(o.cls is None for o in opts):
            out.append((conds, v))
            continue
        for c2, e, _ in rd.expand(v, mode, subject=ci):
            out.append((conds + c2, End(e) if e is not None else v))
    return out
