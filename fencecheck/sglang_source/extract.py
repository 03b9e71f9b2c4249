"""The facts ``fencecheck sglang`` reads from a tree: backends with their declarations and read sites, workers'
``last_shared_read_runner``, the barrier and its event loops, runners' publish behaviour; and the findings.

Every fact carries file:line (files relative to the ``sglang`` package's parent, as ``sglang/srt/...``). Output is
sorted, so the same tree gives the same document.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from ..vocab import COVERED_SITES, ReadSite, SharedReadEnds
from .declare import Child, DeclEval, End, MaxOf, Modes, Unresolved, max_end
from .limits import cut_finding, cut_rows, notes_json, unknown_child_finding
from .reads import Cut, Read, ReadWalker
from .tree import ClassInfo, NotSGLang, Tree

#: Backend methods by the site their reads happen at (the runner calls them there).
SITE_ENTRIES = (
    (ReadSite.PRE_REPLAY, "init_forward_metadata_out_graph"),
    (ReadSite.IN_GRAPH_BEFORE_MARKER, "init_forward_metadata_in_graph"),
    (ReadSite.IN_GRAPH_AFTER_MARKER, "forward"),
)
#: Read only by the worker after a verify replay (per mode).
POST_REPLAY_ENTRIES = {"TARGET_VERIFY": ("update_mamba_state_after_mtp_verify",)}
#: Start-up methods: reads there happen once, before any step.
STARTUP_ENTRIES = ("__init__", "init_cuda_graph_state")


@dataclass
class Extraction:
    root: str
    version: str | None
    modes: list[str]
    modes_at: tuple[str, int]
    backends: list[dict] = field(default_factory=list)
    workers: list[dict] = field(default_factory=list)
    barrier: dict = field(default_factory=dict)
    runners: list[dict] = field(default_factory=list)
    algorithms: list[dict] = field(default_factory=list)  # algorithms.read_algorithms
    algorithm_scenarios: dict = field(default_factory=dict)  # name -> Scenario of each worker read to decide
    findings: list[dict] = field(default_factory=list)
    not_findings: list[dict] = field(default_factory=list)
    call_graph: object = None
    stats: dict = field(default_factory=dict)
    via_keys: dict = field(default_factory=dict)  # "file:line" of a backend -> qualified names on its read chains
    fingerprints: object = None  # drift.Fingerprints of the functions these facts come from
    uncovered: dict = field(default_factory=dict)  # id(finding) -> [(ReadSite, Read)] its evidence lists
    notes: list[dict] = field(default_factory=list)  # limits.notes_json: what the reader skipped
    protocol: object = None  # protocol.Protocol: the fence, runners and platforms as the code has them
    facts: dict = field(default_factory=dict)  # facts.read_facts: the protocol facts' top-level keys

    def to_dict(self) -> dict:
        return {
            "sglang_version": self.version,
            "root": self.root,
            "forward_modes": {"modes": self.modes, "file": self.modes_at[0], "line": self.modes_at[1]},
            "backends": self.backends,
            "workers": self.workers,
            "barrier": self.barrier,
            "runners": self.runners,
            "algorithms": self.algorithms,
            "findings": self.findings,
            "not_findings": self.not_findings,
            "notes": self.notes,
            **self.facts,
        }


def _root_backend(tree: Tree) -> ClassInfo:
    mods = tree.modules_containing("class AttentionBackend")
    cands = [c for c in tree.classes_named("AttentionBackend", mods) if "shared_read_ends" in c.methods]
    if not cands:
        raise NotSGLang(str(tree.root), "", "not an SGLang tree with the shared-read fence: no AttentionBackend class "
                                            "defining shared_read_ends" + tree.skipped_text())
    return sorted(cands, key=lambda c: c.file)[0]


class Reader:
    def __init__(self, tree: Tree):
        self.tree = tree
        self.modes = Modes(tree)
        self.root = _root_backend(tree)
        self.backends = tree.subclasses([self.root])
        self._backend_ids = {id(c) for c in self.backends}
        self._attr_memo: dict[int, dict] = {}
        from .children import PassedChildren

        self.passed = PassedChildren(tree, self.root, self.backends)
        self.decl = DeclEval(tree, self.modes, self.attr_types)
        self.walker = ReadWalker(tree, self.modes, self.attr_types)
        graph = self.modes.members
        self.graph_modes = {m for m in graph if self.modes.predicate("is_cuda_graph", m)} | \
            {m for m in graph if m.startswith("DRAFT_EXTEND")}

    def attr_types(self, ci: ClassInfo) -> dict[str, ClassInfo]:
        """``self.x`` -> the backend class every ``self.x = Cls(...)`` on ``ci``'s MRO assigns (when just one)."""
        if id(ci) in self._attr_memo:
            return self._attr_memo[id(ci)]
        self._attr_memo[id(ci)] = {}
        seen: dict[str, set] = {}
        for c in self.tree.mro(ci):
            for attr, r in self._own_assigns(c):
                seen.setdefault(attr, set()).add(r)
        out = {}
        for a, cs in seen.items():
            if len(cs) == 1:
                (c,) = cs
                if c is not None and id(c) in self._backend_ids:
                    out[a] = c
        for a, c in self.passed.single(ci).items():  # a child every constructing call passes, of one class
            out.setdefault(a, c)
        self._attr_memo[id(ci)] = out
        return out

    def _own_assigns(self, c: ClassInfo) -> list:
        """(attr, ClassInfo or None) of every ``self.attr = Callee(...)`` in ``c``'s own methods."""
        memo = self.__dict__.setdefault("_assign_memo", {})
        if id(c) not in memo:
            out = []
            for fn in c.methods.values():
                for node in self.tree.walk(fn):
                    if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                        for t in node.targets:
                            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                                r = self.tree.resolve_expr(c.module, node.value.func)
                                out.append((t.attr, r if isinstance(r, ClassInfo) else None))
            memo[id(c)] = out
        return memo[id(c)]

    # --- declarations ---------------------------------------------------------------------------------------------
    def rows(self, ci: ClassInfo, mode: str, method: str = "shared_read_ends"):
        try:
            return self.decl.method(ci, method, mode), None
        except Unresolved as u:
            return None, u
        except RecursionError:
            self.tree.note(ci.file, ci.line, f"{ci.name}.{method}: nested too deeply to evaluate (Python's recursion "
                                             "limit)")
            return None, Unresolved("nested too deeply to evaluate (Python's recursion limit)")

    def expand(self, value, mode: str, depth: int = 0, subject: ClassInfo | None = None):
        """[(conds, end name or None, chosen)]: a child of unknown class is None; a child ``subject``'s constructing
        calls pass (``children.PassedChildren``) is one row per option, its conditions naming the option, and
        ``chosen`` the classes so picked."""
        if isinstance(value, End):
            return [((), value.name, ())]
        if isinstance(value, Child):
            if value.cls is None and not value.many and subject is not None and depth <= 6 \
                    and value.src.startswith("self.") and value.src.count(".") == 1:
                opts = self.passed.of(subject).get(value.src[5:])
                if opts:
                    out = []
                    for o in opts:
                        if o.cls is None:
                            out.append(((), None, ()))
                            continue
                        name = (f"{value.src} is {o.cls.name} ({o.file}:{o.line})",)
                        out += [(o.conditions + name + c, e, (o.cls,) + ch)
                                for c, e, ch in self.expand(Child(value.src, cls=o.cls), mode, depth + 1)]
                    return out
            if value.cls is None or value.many or depth > 6:
                return [((), None, ())]
            rows, err = self.rows(value.cls, mode)
            if rows is None:
                return [((), None, ())]
            out = []
            for c, v in rows:
                out += [(c + c2, e, ch) for c2, e, ch in self.expand(v, mode, depth + 1, value.cls)]
            return out
        if isinstance(value, MaxOf):
            acc = [((), "PRE_REPLAY", ())]
            for item in value.items:
                nxt = []
                for c1, e1, h1 in acc:
                    for c2, e2, h2 in self.expand(item, mode, depth + 1, subject):
                        nxt.append((c1 + c2, None if e1 is None or e2 is None else max_end([e1, e2]), h1 + h2))
                acc = nxt
            return acc
        return [((), None, ())]

    # --- reads --------------------------------------------------------------------------------------------------
    def reads(self, ci: ClassInfo, mode: str) -> list[tuple[ReadSite, Read]]:
        return self._walk(ci, mode)[0]

    def cuts(self, ci: ClassInfo, mode: str) -> list[tuple[ReadSite, Cut]]:
        """The read paths of ``ci`` in ``mode`` a limit cut (``reads.Cut``), with their sites."""
        return self._walk(ci, mode)[1]

    def _walk(self, ci: ClassInfo, mode: str):
        memo = self.__dict__.setdefault("_walks", {})
        if (id(ci), mode) not in memo:
            memo[id(ci), mode] = self._walk_once(ci, mode)
        return memo[id(ci), mode]

    def _walk_once(self, ci: ClassInfo, mode: str):
        reads, cuts = [], []

        def entry(site, method):
            r, c = self.walker.method_walk(ci, method, mode)
            reads.extend((site, x) for x in r)
            cuts.extend((site, x) for x in c)

        for site, method in SITE_ENTRIES:
            entry(site, method)
        if mode not in self.graph_modes:
            hit = self.tree.lookup(ci, "init_forward_metadata")
            if hit is not None and hit[0] is not self.root:
                entry(ReadSite.PRE_REPLAY, "init_forward_metadata")
        for method in POST_REPLAY_ENTRIES.get(mode, ()):
            entry(ReadSite.POST_REPLAY, method)
        return reads, cuts


def _conds_text(conds) -> str | None:
    return " and ".join(conds) if conds else None


def _rows_json(rows):
    if len(rows) == 1 and not rows[0][0]:
        return rows[0][1].text()
    return [{"condition": _conds_text(c) or "otherwise", "end": v.text()} for c, v in rows]


def _read_json(mode, site, r: Read) -> dict:
    return {"mode": mode, "site": site.value, "location": r.location, "file": r.file, "line": r.line,
            "what": r.what, "via": [h.text() for h in r.via], "conditions": list(r.conditions)}


def _loc(obj) -> dict:
    return {"class": obj.name, "file": obj.file, "line": obj.line}


def read_tree(tree: Tree) -> Extraction:
    from .facts import read_facts
    from .protocol import DECLARATION, read_protocol

    proto = read_protocol(tree)
    if proto.kind != DECLARATION:
        return older_fence(tree, proto)
    rd = Reader(tree)
    ex = Extraction(str(tree.root), tree.version(), list(rd.modes.members), (rd.modes.file, rd.modes.line))
    for ci in rd.backends:
        ex.backends.append(_backend(rd, ci, ex))
    ex.findings.sort(key=lambda f: (f["subject"], f["subject_at"], f["mode"] or "", f["kind"], json_key(f)))
    ex.protocol = proto
    ex.workers = _workers(tree, proto.publisher_property or "last_shared_read_runner")
    ex.barrier = _barrier(tree)
    ex.runners = [r.row() for r in proto.runners]
    from .device import never_published

    never_published(tree, rd, ex)
    unique = {(f["subject"], f["mode"] or "", f["file"], f["line"], f["location"], f["why"]): f for f in
              sorted(ex.not_findings, key=lambda f: (len(f["via"]), f["via"]), reverse=True)}
    ex.not_findings = [unique[k] for k in sorted(unique)]
    from .algorithms import read_algorithms

    ex.algorithms = read_algorithms(tree, rd.modes, ex.workers, ex.runners, ex.algorithm_scenarios,
                                    proto.fallback_rule())
    ex.call_graph = rd.walker.graph
    from .drift import collect

    ex.fingerprints = collect(tree, rd, ex)
    ex.facts = read_facts(tree, rd, ex)
    ex.notes = notes_json(tree)
    ex.stats = {"files": len(tree.paths), "parsed": tree.parsed, "graph_nodes": rd.walker.graph.number_of_nodes(),
                "graph_edges": rd.walker.graph.number_of_edges()}
    return ex


def json_key(f) -> str:
    import json

    return json.dumps(f, sort_keys=True)


def _backend(rd: Reader, ci: ClassInfo, ex: Extraction) -> dict:
    tree = rd.tree
    hit = tree.lookup(ci, "shared_read_ends")
    owner = hit[0] if hit else None
    declares, kinds = {}, set()
    for mode in rd.modes.members:
        rows, err = rd.rows(ci, mode)
        if rows is None:
            declares[mode] = [{"condition": None, "end": "unresolved", "reason": err.reason,
                               "line": err.line}]
            kinds.add("unresolved")
            ex.findings.append({"kind": "unresolved_declaration", "subject": ci.name,
                                "subject_at": f"{ci.file}:{ci.line}", "mode": mode,
                                "status": "unresolved", "scenario": None,
                                "evidence": [{"file": owner.file if owner else ci.file,
                                              "line": err.line or (owner.line if owner else ci.line),
                                              "what": f"shared_read_ends({mode}) not evaluated: {err.reason}"}]})
            continue
        declares[mode] = _rows_json(_declared_rows(rd, ci, rows, mode))
        for c, v in rows:
            if c:
                kinds.add("conditional")
            if isinstance(v, MaxOf):
                kinds.add("composite")
            elif isinstance(v, Child):
                kinds.add("delegating")
        _findings_for(rd, ci, mode, rows, hit, ex)
    reads, keys = [], set()
    for mode in rd.modes.members:
        for site, r in rd.reads(ci, mode):
            keys.update(h.key for h in r.via)  # a guarded read's status depends on its chain's code too (drift)
            if r.host_sync is None:
                reads.append(_read_json(mode, site, r))
    reads += _passed_reads(rd, ci, keys)
    ex.via_keys[f"{ci.file}:{ci.line}"] = keys
    reads = _dedupe(reads)
    startup = []
    for method in STARTUP_ENTRIES:
        for r in rd.walker.method_reads(ci, method, None):
            startup.append(r)
    for r in startup:
        ex.not_findings.append({"subject": ci.name, "mode": None, "location": r.location, "file": r.file,
                                "line": r.line, "why": f"start-up only ({r.via[0].func})",
                                "via": [h.text() for h in r.via]})
    snap = tree.lookup(ci, "_snapshot_prefill_shared_reads")
    snapshot = None
    if snap is not None and snap[0] is not rd.root:
        rows, err = rd.rows(ci, "EXTEND", "_snapshot_prefill_shared_reads")
        snapshot = {"class": snap[0].name, "file": snap[0].file, "line": snap[1].lineno,
                    "declares": _rows_json(rows) if rows is not None else
                    [{"condition": None, "end": "unresolved", "reason": err.reason, "line": err.line}]}
        if rows is not None:
            _findings_for(rd, ci, "EXTEND", rows, snap, ex, snapshot=True)
    kind = "base" if ci is rd.root else ("inherited" if owner is not ci else "override")
    return {
        "class": ci.name, "file": ci.file, "line": ci.line, "module": ci.module.name,
        "bases": [c.name for c in tree.bases(ci)],
        "mro": [c.name for c in tree.mro(ci)],
        "declared_in": _loc(owner) | {"line": hit[1].lineno} if hit else None,
        "kind": kind, "traits": sorted(kinds),
        "declares": declares,
        "prefill_snapshot": snapshot,
        "children": {a: c.name for a, c in sorted(rd.attr_types(ci).items())},
        "passed_children": {a: [o.to_json() for o in opts] for a, opts in sorted(rd.passed.of(ci).items())},
        "unfollowed": sorted(rd.walker.unfollowed.get(ci.key, ())),
        "reads": reads,
        "cut_paths": cut_rows(rd, ci),
    }


def _dedupe(reads):
    best = {}
    for r in reads:
        k = (r["mode"], r["site"], r["location"], r["file"], r["line"])
        if k not in best or (len(r["via"]), r["via"]) < (len(best[k]["via"]), best[k]["via"]):
            best[k] = r
    return [best[k] for k in sorted(best)]


def _uncaptured_why(at: tuple) -> str:
    if len(at) == 3:
        return (f"behind a capture-mode test at {at[0]}:{at[1]} (the path needs get_is_capture_mode() false, and it "
                "is true while a CUDA graph is captured or a breakable graph runs: a path a CUDA graph cannot "
                "capture)")
    return f"behind a host sync at {at[0]}:{at[1]} (a path a CUDA graph cannot capture)"


def _findings_for(rd: Reader, ci: ClassInfo, mode: str, rows, decl, ex: Extraction, snapshot: bool = False) -> None:
    """Findings of ``ci`` in ``mode`` for the declaration ``rows`` of ``decl`` (owner, def). A prefill snapshot's
    rows (``snapshot``) are published after the whole eager metadata prep, in-graph part included, so that part is
    covered too."""
    owner, node = decl
    all_reads = rd.reads(ci, mode)
    for r_site, r in all_reads:
        if snapshot:
            break  # listed once, with the declaration's rows
        if r.host_sync is not None:
            ex.not_findings.append({"subject": ci.name, "mode": mode, "location": r.location, "file": r.file,
                                    "line": r.line, "via": [h.text() for h in r.via],
                                    "why": _uncaptured_why(r.host_sync)})
    live = [(s, r) for s, r in all_reads if r.host_sync is None]
    live_cuts = [(s, c) for s, c in rd.cuts(ci, mode) if c.host_sync is None]
    for conds, value in rows:
        expanded = rd.expand(value, mode, subject=ci)
        if any(end is None for _, end, _ in expanded):  # a child of unknown class: its reads are not known either
            f = unknown_child_finding(rd, ci, mode, conds, value, decl, live, live_cuts, snapshot)
            if f is not None:
                ex.findings.append(f)
        for c2, end, chosen in expanded:
            if end is None:
                continue
            covered = COVERED_SITES[SharedReadEnds[end]]
            if snapshot:
                covered = covered | {ReadSite.IN_GRAPH_BEFORE_MARKER}
            # a child picked among those the constructing calls pass: its reads are the composite's in that row
            extra = [(s, r) for k in chosen for s, r in rd.reads(k, mode) if r.host_sync is None]
            bad = [(s, r) for s, r in live + extra if s not in covered]
            cond = conds + c2
            cut = [(s, c) for s, c in live_cuts + [x for k in chosen for x in rd.cuts(k, mode)]
                   if s not in covered and c.host_sync is None]
            if cut:
                ex.findings.append(cut_finding(ci, mode, end, _conds_text(cond), decl, cut))
            if not bad:
                continue
            seen, evidence = set(), [{"file": owner.file, "line": node.lineno,
                                      "what": f"{owner.name}.{node.name} declares {end} for {mode}"
                                              + (f" when {_conds_text(cond)}" if cond else "")}]
            plausible = bool(cond)
            for s, r in sorted(bad, key=lambda x: (x[1].file, x[1].line, x[0].value)):
                k = (r.file, r.line, s)
                if k in seen:
                    continue
                seen.add(k)
                plausible |= bool(r.conditions)
                evidence.append({"file": r.file, "line": r.line,
                                 "what": f"reads {r.location} at {s.value} via "
                                         + " -> ".join(h.func for h in r.via)
                                         + (f" (when {_conds_text(r.conditions)})" if r.conditions else "")})
            evidence += _passed_evidence(rd, ci, [r for _, r in bad], chosen)
            ex.findings.append({"kind": "read_outside_declaration", "subject": ci.name,
                                "subject_at": f"{ci.file}:{ci.line}", "mode": mode,
                                "declared": end, "declared_by": node.name, "condition": _conds_text(cond),
                                "status": "plausible" if plausible else "confirmed",
                                "evidence": evidence, "scenario": None})
            ex.uncovered[id(ex.findings[-1])] = bad


def _passed_evidence(rd: Reader, ci: ClassInfo, reads, chosen=()) -> list[dict]:
    """The calls constructing ``ci`` that pass a child a read's call chain enters (or the row ``chosen``)."""
    entered = {h.func.split(".")[0] for r in reads for h in r.via}
    single = rd.passed.single(ci)
    out = []
    for attr, opts in sorted(rd.passed.of(ci).items()):
        for o in opts:
            if o.cls is not None and (any(o.cls is k for k in chosen) or
                                      (single.get(attr) is o.cls and o.cls.name in entered)):
                out.append({"file": o.file, "line": o.line,
                            "what": f"constructs {ci.name} with self.{attr} = {o.cls.name}"
                                    + (f" when {_conds_text(o.conditions)}" if o.conditions else "")})
    return out


def _passed_reads(rd: Reader, ci: ClassInfo, keys: set) -> list[dict]:
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
            pick = list(o.conditions) + [f"self.{attr} is {o.cls.name} ({o.file}:{o.line})"]
            for mode in rd.modes.members:
                for site, r in rd.reads(o.cls, mode):
                    if r.host_sync is None:
                        j = _read_json(mode, site, r)
                        j["conditions"] = pick + j["conditions"]
                        out.append(j)
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


# --- workers, barrier, runners ---------------------------------------------------------------------------------------
def _return_rows(stmts, conds=()):
    out = []
    for i, s in enumerate(stmts):
        if isinstance(s, ast.Return) and s.value is not None:
            out.append((conds, ast.unparse(s.value), s.lineno))
            return out
        if isinstance(s, ast.If):
            t = ast.unparse(s.test)
            out += _return_rows(list(s.body) + list(stmts[i + 1:]), conds + (t,))
            neg = f"not ({t})" if " " in t else f"not {t}"
            out += _return_rows(list(s.orelse) + list(stmts[i + 1:]), conds + (neg,))
            return out
    return out


def _workers(tree: Tree, prop: str = "last_shared_read_runner") -> list[dict]:
    """One row per return of the worker property ``prop`` the barrier takes its runner from, per class defining it
    and subclass."""
    mods = tree.modules_containing(f"def {prop}")
    roots = []
    for m in mods:
        mod = tree.module(m)
        roots += [c for c in (mod.classes.values() if mod else ()) if prop in c.methods]
    out = []
    for ci in tree.subclasses(roots):
        owner, fn = tree.lookup(ci, prop)
        for conds, text, line in _return_rows(fn.body):
            out.append({"class": ci.name, "file": ci.file, "line": ci.line, "publisher": text,
                        "condition": _conds_text(conds), "defined_in": {"class": owner.name, "file": owner.file,
                                                                         "line": fn.lineno},
                        "returns_at": {"file": owner.file, "line": line}})
    return sorted(out, key=lambda w: (w["class"], w["file"], w["line"], w["condition"] or ""))


def _enclosing(tree_node):
    out = {}
    for cls in [n for n in tree_node.body if isinstance(n, ast.ClassDef)] + [None]:
        fns = cls.body if cls else tree_node.body
        for fn in fns:
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield (cls.name if cls else None), fn


def _barrier(tree: Tree) -> dict:
    defined, calls, loops = [], [], []
    for m in tree.modules_containing("_apply_war_barrier", "def event_loop"):
        mod = tree.module(m)
        for cname, fn in (_enclosing(mod.tree) if mod else ()):
            if fn.name == "_apply_war_barrier":
                defined.append({"class": cname, "file": mod.rel, "line": fn.lineno})
            lines = sorted({n.lineno for n in ast.walk(fn) if isinstance(n, ast.Call)
                            and isinstance(n.func, ast.Attribute) and n.func.attr == "_apply_war_barrier"})
            for ln in lines:
                calls.append({"event_loop": fn.name, "class": cname, "file": mod.rel, "line": ln})
            if fn.name.startswith("event_loop") and (cname or "").startswith("Scheduler") and "/srt/" in mod.rel:
                loops.append({"event_loop": fn.name, "class": cname, "file": mod.rel, "line": fn.lineno,
                              "barrier_lines": lines})
    key = lambda d: (d["file"], d["line"])  # noqa: E731
    return {"defined": sorted(defined, key=key), "calls": sorted(calls, key=key), "event_loops": sorted(loops, key=key)}


def older_fence(tree: Tree, proto):
    """The extraction of a tree without the declaration fence: its protocol facts only (no backend, nothing
    decided)."""
    from .facts import protocol_keys

    modes, at = [], (None, None)
    try:
        from .declare import Modes
        from .tree import NotSGLang

        m = Modes(tree)
        modes, at = list(m.members), (m.file, m.line)
    except NotSGLang:  # a tree without ForwardMode has no modes to list (the fence says what it has)
        pass
    ex = Extraction(str(tree.root), tree.version(), modes, at)
    ex.protocol = proto
    if proto.barriers:
        ex.barrier = _barrier(tree)
        ex.workers = _workers(tree, proto.publisher_property) if proto.publisher_property else []
    else:
        ex.barrier = {"defined": [], "calls": [], "event_loops": []}
    ex.runners = [r.row() for r in proto.runners]
    ex.facts = protocol_keys(proto)
    from .drift import collect_protocol

    ex.fingerprints = collect_protocol(proto)
    ex.notes = notes_json(tree)
    ex.stats = {"files": len(tree.paths), "parsed": tree.parsed}
    return ex
