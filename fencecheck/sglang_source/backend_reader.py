"""The backends of an SGLang tree and what the extraction asks about each: the classes of its children, its
declaration rows per mode (``declare.DeclEval``), a declaration expanded through children of known class and the
children its constructing calls pass (``children.PassedChildren``), and its reads per mode and site
(``reads.ReadWalker`` from each site's entry method)."""

from __future__ import annotations

import ast

from ..vocab import ReadSite
from .children import PassedChildren
from .declare import Child, DeclEval, End, MaxOf, Modes, Unresolved, max_end
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


def _root_backend(tree: Tree) -> ClassInfo:
    mods = tree.modules_containing("class AttentionBackend")
    cands = [c for c in tree.classes_named("AttentionBackend", mods) if "shared_read_ends" in c.methods]
    if not cands:
        raise NotSGLang(str(tree.root), "", "not an SGLang tree with the shared-read fence: no AttentionBackend class "
                                            "defining shared_read_ends" + tree.skipped_text())
    return sorted(cands, key=lambda c: c.file)[0]


class Reader:
    """The tree's forward modes, its root ``AttentionBackend`` and every subclass (``backends``), with the
    evaluators the extraction asks."""

    def __init__(self, tree: Tree):
        self.tree = tree
        self.modes = Modes(tree)
        self.root = _root_backend(tree)
        self.backends = tree.subclasses([self.root])
        self._backend_set = set(self.backends)
        self._attr_memo: dict[ClassInfo, dict] = {}
        self._assign_memo: dict[ClassInfo, list] = {}
        self.passed = PassedChildren(tree, self.root, self.backends)
        self.decl = DeclEval(tree, self.modes, self.attr_types)
        self.walker = ReadWalker(tree, self.modes, self.attr_types)
        graph = self.modes.members
        self.graph_modes = {m for m in graph if self.modes.predicate("is_cuda_graph", m)} | \
            {m for m in graph if m.startswith("DRAFT_EXTEND")}
        #: the CUDA decode graph runner's no-marker fallback (``runners.Fallback``), set by ``extract.read_tree``
        #: from the protocol facts; None when not read
        self.no_marker = None
        #: (file, line, test) of the guard making that runner's marker only under stream capture
        #: (``capture_state.capture_only_marker``), set with it; None when not read or not so guarded
        self.marker_guard = None
        #: device -> why its runners never resolve a graph-replayed mode's declaration (``device.silent_devices``),
        #: set by ``extract.read_tree``; empty when not read
        self.silent: dict[str, str] = {}
        #: platform -> its row of the protocol facts (``protocol.Protocol.platforms``: marker, fallback, runner
        #: policy), set by ``extract.read_tree``; empty when not read
        self.platform_rows: dict[str, dict] = {}
        #: the graph-replayed modes whose eager runs publish nothing (``extract._eager_quiet``, set by
        #: ``extract.read_tree``), so only a replay of the mode's graph can race; every one where not read
        self.eager_quiet: frozenset[str] | None = None

    def replayed_only(self, mode: str) -> bool:
        """Whether only a graph replay of ``mode`` can race (``reads.hard_sync``'s ``graph``): a mode a decode graph
        runner replays, whose eager runs publish nothing (``eager_quiet``)."""
        return mode in self.graph_modes and (self.eager_quiet is None or mode in self.eager_quiet)

    def attr_types(self, ci: ClassInfo) -> dict[str, ClassInfo]:
        """``self.x`` -> the backend class every ``self.x = Cls(...)`` on ``ci``'s MRO assigns (when just one)."""
        if ci in self._attr_memo:
            return self._attr_memo[ci]
        self._attr_memo[ci] = {}
        seen: dict[str, set] = {}
        for c in self.tree.mro(ci):
            for attr, r in self._own_assigns(c):
                seen.setdefault(attr, set()).add(r)
        out = {}
        for a, cs in seen.items():
            if len(cs) == 1:
                (c,) = cs
                if c is not None and c in self._backend_set:
                    out[a] = c
        for a, c in self.passed.single(ci).items():  # a child every constructing call passes, of one class
            out.setdefault(a, c)
        self._attr_memo[ci] = out
        return out

    def _own_assigns(self, c: ClassInfo) -> list:
        """(attr, ClassInfo or None) of every ``self.attr = Callee(...)`` in ``c``'s own methods."""
        memo = self._assign_memo
        if c not in memo:
            out = []
            for fn in c.methods.values():
                for node in self.tree.walk(fn):
                    if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                        for t in node.targets:
                            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                                r = self.tree.resolve_expr(c.module, node.value.func)
                                out.append((t.attr, r if isinstance(r, ClassInfo) else None))
            memo[c] = out
        return memo[c]

    # --- declarations ---------------------------------------------------------------------------------------------
    def rows(self, ci: ClassInfo, mode: str, method: str = "shared_read_ends"):
        """(rows, None): ``method``'s (conditions, value) rows for ``mode``; (None, Unresolved) when not evaluated."""
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
        """(site, read) of ``ci`` in ``mode``, from each site's entry method."""
        return self._walk(ci, mode)[0]

    def cuts(self, ci: ClassInfo, mode: str) -> list[tuple[ReadSite, Cut]]:
        """The read paths of ``ci`` in ``mode`` a limit cut (``reads.Cut``), with their sites."""
        return self._walk(ci, mode)[1]

    def _walk(self, ci: ClassInfo, mode: str):
        memo = self.__dict__.setdefault("_walks", {})
        if (ci, mode) not in memo:
            memo[ci, mode] = self._walk_once(ci, mode)
        return memo[ci, mode]

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
