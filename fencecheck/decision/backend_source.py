"""``fencecheck verify --sglang TREE CLASS``: the backend file ``verify`` checks, built from the reader's record
(``records.Backend``) of one attention backend class of an SGLang tree (the backend as the reader reads it).

The tree is read for that class alone (its declaration per forward mode, its reads per mode and site, the children
its declaration names), not whole. Per mode: a ``SharedReadEnds`` member is ``declares``; ``delegate(self.x)`` with
``self.x`` of known class is ``delegate`` to that child; ``max_of`` over children all of known class makes the
backend a composite of them. The reads are every read the reader lists for the mode (under any condition). A child
is built the same way, as a ``[backends.NAME]`` table. Conditional rows (the reader names their conditions, which
no scenario setting decides) give one backend file per combination of rows, each verified; a prefill snapshot hook
(``_snapshot_prefill_shared_reads``) adds its rows to ``EXTEND``'s, with the in-graph prep's reads covered as the
reader covers them (read before the snapshot's publish). A declaration the reader leaves unresolved (a child of
unknown class, ``max_of`` over a list, an unevaluated body) cannot be verified: one line, exit 3.
"""

from __future__ import annotations

import itertools
import re
from contextlib import ExitStack, contextmanager, nullcontext
from dataclasses import asdict, dataclass, replace

from fencecheck.errors import EXIT_UNKNOWN, FencecheckError, InputError
from fencecheck.vocab import ForwardMode, SharedReadEnds, base_shared_read_ends

#: More combinations of conditional rows than this are not verified one by one.
MAX_VARIANTS = 16
SNAPSHOT = "_snapshot_prefill_shared_reads"


class Unverifiable(FencecheckError):
    """The reader could not resolve what the backend declares: nothing sound to verify (exit 3)."""

    exit_code = EXIT_UNKNOWN


@dataclass(frozen=True)
class Row:
    """One declaration row of one backend of the file in one mode."""

    backend: str
    mode: str
    end: str
    condition: str | None
    declared_by: str
    reason: str | None = None  # an unresolved row's: why the reader could not evaluate it

    def text(self) -> str:
        who = "" if self.condition is None else f" when {self.condition}"
        return f"{self.backend} {self.mode} {self.end} ({self.declared_by}){who}"


@dataclass(frozen=True)
class Variant:
    """A backend file for one combination of conditional rows (``rows``: the chosen rows that had alternatives)."""

    rows: tuple[Row, ...]
    data: dict  # the backend file's table (its TOML form)
    backend: object  # scenario_io.BackendFile


@dataclass(frozen=True)
class Source:
    """Where the backend was read: the package folder, the release version, the class statement."""

    root: str
    version: str | None
    cls: str
    file: str
    line: int
    configurations: dict | None = None  # the configurations the tree's facts generate (``contexts.configurations``)


def read_entries(tree, tree_path: str, name: str) -> tuple[Source, dict]:
    """The reader's records (``records.Backend``) of backend ``name`` (a class name, or ``MODULE:Class`` with the
    module dotted or as its file, for a name two modules define) and of every child its declaration can name, by
    class (the tree's configurations not yet read: ``configurations``)."""
    from fencecheck.sglang_source.backend_reader import Reader
    from fencecheck.sglang_source.extract import _backend

    rd = Reader(tree)
    by_name: dict[str, list] = {}
    for ci in rd.backends:
        by_name.setdefault(ci.name, []).append(ci)
    where, _, cls = name.rpartition(":")  # ``MODULE:Class``: the class of that module (dotted, or its file)
    found = by_name.get(cls, [])
    if where:
        found = [c for c in found if where in (c.module.name, c.file, c.file.removesuffix(".py").replace("/", "."))]
    if not found:
        import difflib

        near = difflib.get_close_matches(cls, sorted(by_name), n=3)
        raise InputError(tree_path, "CLASS", f"expected an attention backend class of the tree (a subclass of "
                                             f"AttentionBackend, or MODULE:Class), got {name!r}"
                         + (f"; did you mean {', '.join(near)}?" if near and not where else ""))
    if len(found) > 1:
        raise InputError(tree_path, "CLASS", f"{cls} names {len(found)} classes "
                                             f"({', '.join(sorted(c.file for c in found))}): expected one; name it "
                                             f"as MODULE:Class ({sorted(found, key=lambda c: c.file)[0].module.name}:"
                                             f"{cls})")
    entries: dict = {}
    todo = [found[0]]
    while todo:
        ci = todo.pop()
        if ci.name in entries:
            continue
        entry = _backend(rd, ci)[0]
        # its passed children's options hold the tree's classes, which would keep their syntax trees alive through
        # the verification: not needed here
        entries[ci.name] = replace(entry, passed_children=())
        for _, child in entry.children:
            todo += [c for c in by_name.get(child, ()) if c.name not in entries][:1]
    ci = found[0]
    return Source(str(tree.root), tree.version(), ci.name, ci.file, ci.line), entries


def configurations(tree) -> dict | None:
    """The configurations the tree's protocol facts generate (as ``fencecheck sglang`` decides its findings in), or
    None for a tree without the declaration fence."""
    from fencecheck.sglang_source.algorithms import read_algorithms
    from fencecheck.sglang_source.contexts import configurations
    from fencecheck.sglang_source.declare import Modes
    from fencecheck.sglang_source.fence_sites import barrier, workers
    from fencecheck.sglang_source.protocol import DECLARATION, read_protocol
    from fencecheck.sglang_source.steps import step_facts

    proto = read_protocol(tree)
    if proto.kind != DECLARATION:
        return None
    runner_rows = tuple(r.row() for r in proto.runners)
    worker_rows = workers(tree, proto.publisher_property or "last_shared_read_runner")
    modes = Modes(tree)
    algos = [a.to_json() for a in read_algorithms(tree, modes, worker_rows, runner_rows, worker_reads=False)]
    steps = step_facts(tree, proto, algos, modes)
    return configurations(tree, proto, steps, algos, [e.to_json() for e in barrier(tree).event_loops])


def _rows(entry, mode: str) -> list[Row]:
    def rows_of(d, by):
        if d.plain:
            return [Row(entry.cls, mode, d.rows[0].end, None, by, d.rows[0].reason)]
        return [Row(entry.cls, mode, r.end, None if r.condition == "otherwise" else r.condition, by, r.reason)
                for r in d.rows]

    out = rows_of(dict(entry.declares)[mode], "shared_read_ends")
    snap = entry.prefill_snapshot
    if mode == "EXTEND" and snap:
        out += rows_of(snap.declares, SNAPSHOT)
    return out


_CHILD = re.compile(r"^self\.(\w+)$")


def _children_of(end: str, entry) -> list[str] | None:
    """The child classes ``delegate(...)`` or ``max_of(...)`` names, all of known class; None otherwise."""
    m = re.fullmatch(r"(?:delegate|max_of)\((.*)\)", end)
    if m is None:
        return None
    known, out = dict(entry.children), []
    for item in (x.strip() for x in m[1].split(",")):
        c = _CHILD.match(item)
        if c is None or c[1] not in known:
            return None
        out.append(known[c[1]])
    return out


def _unresolved_why(row: Row, entry) -> str:
    """The reader's reason for a row it left unresolved, else which child the row names is of no known class."""
    if row.reason:
        return f"the reader: {row.reason}"
    m = re.fullmatch(r"(?:delegate|max_of)\((.*)\)", row.end)
    known = dict(entry.children)
    unknown = [x.strip() for x in m[1].split(",") if (c := _CHILD.match(x.strip())) is None or c[1] not in known] \
        if m else []
    children = f"children of known class: {known or 'none'}"
    if unknown:
        return f"{', '.join(unknown)}: a child of unknown class, its declaration not known; {children}"
    return children


def _table(entry, chosen: dict[tuple[str, str], Row], modes: list[str]) -> tuple[dict, list[str]]:
    """The backend table of ``entry`` under the ``chosen`` rows, and the children it names."""
    declares, delegate, reads, children = {}, {}, {}, None
    for mode in modes:
        row = chosen[(entry.cls, mode)]
        if row.end in SharedReadEnds.__members__:
            if row.end != base_shared_read_ends(ForwardMode(mode)).name:
                declares[mode] = row.end  # the base rule's own value needs no row (as in a backend file)
            continue
        names = _children_of(row.end, entry)
        if names is None or (row.end.startswith("delegate") and len(names) != 1):
            raise Unverifiable(f"{entry.cls} ({entry.file}:{entry.line}): {mode} declares {row.end}"
                               f"{' when ' + row.condition if row.condition else ''}, which the reader does not "
                               f"resolve to backends of known class ({_unresolved_why(row, entry)}): nothing sound "
                               "to verify")
        if row.end.startswith("delegate"):
            delegate[mode] = names[0]
        elif children is None or children == names:
            children = names
        else:
            raise Unverifiable(f"{entry.cls}: max_of over {children} in one mode and {names} in another: "
                               f"a backend file has one list of children")
    for r in entry.reads:
        if r.mode not in modes:
            continue
        site = r.site
        if site == "in_graph_before_marker" and chosen[(entry.cls, r.mode)].declared_by == SNAPSHOT:
            site = "pre_replay"  # published after the whole eager metadata prep, its in-graph part included
        reads.setdefault(r.mode, {}).setdefault(site, set()).add(r.location)
    table: dict = {}
    if declares:
        table["declares"] = declares
    if delegate:
        table["delegate"] = delegate
    if children:
        table["children"] = children
    if reads:
        table["reads"] = {m: {s: sorted(v) for s, v in sorted(sites.items())} for m, sites in sorted(reads.items())}
    return table, sorted(set(children or ()) | set(delegate.values()))


def variants(source: Source, entries: dict) -> list[Variant]:
    """One backend file per distinct combination of conditional rows (in the reader's order)."""
    from fencecheck.files.scenario_io import backend_from_dict

    modes = [m for m, _ in entries[source.cls].declares if m in ForwardMode.__members__]
    points = {(e.cls, m): _rows(e, m) for e in entries.values() for m in modes}
    choice_keys = [k for k, rows in points.items() if len(rows) > 1]
    combos = 1
    for k in choice_keys:
        combos *= len(points[k])
    if combos > MAX_VARIANTS:
        raise Unverifiable(f"{source.cls}: {combos} combinations of conditional declaration rows (more than "
                           f"{MAX_VARIANTS}): verify them as backend files")
    out, seen = [], set()
    for picks in itertools.product(*(points[k] for k in choice_keys)):
        chosen = {k: rows[0] for k, rows in points.items()} | dict(zip(choice_keys, picks))
        tables, todo, done = {}, [source.cls], set()
        while todo:
            name = todo.pop(0)
            if name in done:
                continue
            done.add(name)
            tables[name], kids = _table(entries[name], chosen, modes)
            todo += kids
        data = {"name": source.cls, **tables.pop(source.cls)}
        if tables:
            data["backends"] = tables
        key = repr(sorted(data.items(), key=lambda kv: kv[0]))
        if key in seen:
            continue
        seen.add(key)
        used = [chosen[k] for k in choice_keys if k[0] in done]
        out.append(Variant(tuple(used), data, backend_from_dict(data, f"{source.root}: {source.cls}")))
    return out


def load(tree_path: str, name: str) -> tuple[Source, list[Variant]]:
    """The backend ``name`` of the tree at ``tree_path`` as backend files, one per combination of its rows, and the
    tree's configurations; each of the two kept between runs (``sglang_cache.facts_load``) and used again while
    what its read asked of the files gets the same answers."""
    with loading(tree_path, name) as (_, found, later):
        return later.source(), found


@contextmanager
def loading(tree_path: str, name: str):
    """Yields ``(source, variants, later)`` as soon as the backend is read: ``source`` without the tree's
    configurations, which ``later`` gives (``Later``), read meanwhile in a forked process when not kept."""
    from fencecheck.decision.beside import beside
    from fencecheck.decision.cache import facts_load, folder
    from fencecheck.sglang_source import reading
    from fencecheck.sglang_source.tree import Tree, find_package_root
    from fencecheck.sglang_source.tree_log import Log

    root = find_package_root(tree_path)
    keep = folder() is not None
    tree = Tree(root)
    tree.log = Log() if keep else None
    # the configurations are read on a tree of their own log (the same files, read once): what they ask is theirs
    # alone; when not kept, in a forked process while the class is read and verified here (``beside``, a
    # second core, which then decides the backend's files in them too: ``Later``)
    ctree = tree.sibling()
    ctree.log = Log() if keep else None
    conf = facts_load("configurations", "", ctree) if keep else None
    with nullcontext() if conf is not None else beside(_kept_configurations, ctree, then=_decided_later) as pending:
        with reading(root):  # the read's syntax trees are gone (young garbage) before the cyclic collector is back on
            source, found = _read_backend(tree, tree_path, name, keep)
            tree.forget()  # and the sibling's, here (a forked process has its own)
        later = Later(source, ctree, conf, pending)
        try:
            yield source, found, later
        finally:
            later.close()


class Later:
    """The tree's configurations and the backend's files decided in them (``verify_tree.tree_races``), from where
    they are computed: in the forked process that reads the configurations (which decides the files next), or, when
    the configurations are kept, in a forked process of their own (``decided_beside``), or here on one core."""

    def __init__(self, source: Source, ctree, conf: dict | None, pending):
        self._source, self._ctree, self._conf, self._pending = source, ctree, conf, pending
        self._tables: dict | None = None
        self._own = True
        self._decided = None  # the forked process's {k: answer}, or decided_beside's get(k)
        self._stack = ExitStack()

    def start(self, tables: dict, own_models: bool) -> None:
        """The backend's files to decide (``tree_races``' ``tables`` and ``own_models``), decided from now on where a
        second core is free."""
        from fencecheck.decision.backend_contexts import decided_beside

        self._tables, self._own = tables, own_models
        if self._pending is not None:
            self._pending.send((self._source, tables, own_models))
        elif self._conf is not None and self._conf["configurations"] is not None and tables:
            self._decided = self._stack.enter_context(decided_beside(self.source(), tables, own_models))

    def source(self) -> Source:
        """The source with its configurations (waits for them)."""
        if self._conf is None:
            if self._pending is None:
                self._conf = _kept_configurations(self._ctree)
            else:
                if self._tables is None:
                    self.start({}, False)
                self._conf, self._decided = self._pending()
        return replace(self._source, configurations=self._conf["configurations"])

    def tree_of(self, k):
        """(decided, races) of file ``k`` in the tree's configurations, or None for a tree without them."""
        from fencecheck.decision.backend_contexts import decided_beside

        source = self.source()
        if source.configurations is None or k not in (self._tables or {}):
            return None
        if self._decided is None:  # one core: decided here, as asked
            self._decided = self._stack.enter_context(decided_beside(source, self._tables, self._own))
        return self._decided(k) if callable(self._decided) else self._decided[k]

    def close(self) -> None:
        self._stack.close()


def _decided_later(conf: dict, job) -> dict:
    """In the forked process that read the configurations: ``{k: tree_races(...)}`` of the files ``job`` names."""
    from fencecheck.decision.backend_contexts import _all

    source, tables, own_models = job
    if conf["configurations"] is None or not tables:
        return {}
    return _all(replace(source, configurations=conf["configurations"]), tables, own_models)


def _read_backend(tree, tree_path: str, name: str, keep: bool) -> tuple[Source, list[Variant]]:
    """The backend's source and files: kept, or read here (and kept)."""
    from fencecheck.decision.cache import facts_load, facts_store
    from fencecheck.files.scenario_io import backend_from_dict

    kept = facts_load("backend", name, tree) if keep else None
    if kept is None:
        source, entries = read_entries(tree, tree_path, name)
        found = variants(source, entries)
        facts_store("backend", name, tree, tree.log, {
            "cls": source.cls, "file": source.file, "line": source.line,
            "variants": [{"rows": [asdict(r) for r in v.rows], "data": v.data} for v in found]})
        return source, found
    source = Source(str(tree.root), tree.version(), kept["cls"], kept["file"], kept["line"])
    return source, [Variant(tuple(Row(**r) for r in v["rows"]), v["data"],
                            backend_from_dict(v["data"], f"{source.root}: {source.cls}")) for v in kept["variants"]]


def _kept_configurations(ctree) -> dict:
    """``{"configurations": ...}`` of the tree, kept with the log of ``ctree`` (when it has one); read as the reader
    reads (``sglang_source.reading``), wherever it runs."""
    from fencecheck.decision.cache import facts_store
    from fencecheck.sglang_source import reading

    with reading(ctree.root):
        conf = {"configurations": configurations(ctree)}
        facts_store("configurations", "", ctree, ctree.log, conf)
        ctree.forget()  # what follows (the files decided in them) is no read
    return conf

