"""An SGLang source tree read with Python's ``ast`` only (nothing of it is imported): where the ``sglang`` package
is, its modules parsed on demand, names resolved through each module's imports, classes with their bases and MRO.

Files are read as text once; a file is parsed only when a question needs it (a class hierarchy, a helper a call
resolves to), so reading a release of some 4,700 files parses a few hundred of them.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from array import array
from bisect import bisect_right
from dataclasses import dataclass, field
from pathlib import Path

from fencecheck.files.inputs import MAX_INPUT_BYTES

from ..errors import InputError
from .tree_files import (
    MAX_NESTING,
    Note,
    Skipped,
    nul_error,
    read_module,
    scan,
    too_deep,
)


class NotSGLang(InputError):
    """The path is not an SGLang tree (or a file of it cannot be read or parsed)."""


@dataclass(eq=False)
class ClassInfo:
    """One class statement: its module, file (relative to the package root's parent, ``sglang/...``), line, the
    ``ast`` node and its methods by name (the last definition wins, as in Python)."""

    name: str
    module: "Module"
    node: ast.ClassDef
    methods: dict[str, ast.FunctionDef] = field(default_factory=dict)
    #: class-level ``name = value`` assignments (``forward = OtherBackend.forward``): name -> value
    assigned: dict[str, ast.expr] = field(default_factory=dict)

    @property
    def file(self) -> str:
        return self.module.rel

    @property
    def line(self) -> int:
        return self.node.lineno

    @property
    def key(self) -> str:
        return f"{self.module.name}.{self.name}"

    def __repr__(self) -> str:
        return f"<class {self.key}>"


@dataclass(eq=False)
class FuncInfo:
    """A module-level function."""

    name: str
    module: "Module"
    node: ast.FunctionDef

    @property
    def key(self) -> str:
        return f"{self.module.name}.{self.name}"


@dataclass(eq=False)
class Module:
    name: str
    path: Path
    rel: str  # "sglang/srt/..."
    tree: ast.Module
    classes: dict[str, ClassInfo] = field(default_factory=dict)
    functions: dict[str, FuncInfo] = field(default_factory=dict)
    #: local name -> ("module", dotted) or ("symbol", dotted module, name)
    imports: dict[str, tuple] = field(default_factory=dict)
    #: the modules ``from X import *`` at its top level names, the last first (a later one binds over an earlier)
    stars: list[str] = field(default_factory=list)


#: A name is followed through at most this many ``from X import name`` re-exports.
MAX_REEXPORTS = 8
#: A class's method resolution order holds at most this many classes (SGLang's backends hold under 10).
MAX_MRO = 64

_CLASS_RE = re.compile(r"^[ \t]*class[ \t]+(\w+)[ \t]*(?:\(([^)]*)\))?[ \t]*:", re.M)
_IDENT_RE = re.compile(r"[A-Za-z_][\w.]*")


def find_package_root(path: str | Path) -> Path:
    """The ``sglang`` package folder for a checkout root, its ``python/`` folder or the package folder itself.
    Raises ``NotSGLang`` (one line) when none of these holds an ``sglang`` package with an ``srt/`` folder."""
    p = Path(path)
    if not p.exists():
        raise NotSGLang(str(path), "", "no such file or folder")
    if not p.is_dir():
        raise NotSGLang(str(path), "", "expected a folder (an SGLang checkout, its python/ folder or a sglang package)")
    for cand in (p, p / "sglang", p / "python" / "sglang"):
        if (cand / "__init__.py").is_file() and (cand / "srt").is_dir() and cand.name == "sglang":
            return cand.resolve()
    raise NotSGLang(str(path), "", "not an SGLang tree: expected a sglang package with an srt/ folder here, "
                                   "in sglang/ or in python/sglang/")


def find_installed() -> Path:
    """The installed ``sglang`` package folder, located with ``importlib.util.find_spec`` (which does not import it)."""
    try:
        spec = importlib.util.find_spec("sglang")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise NotSGLang("--installed", "", "no installed sglang package found "
                                           "(python3 -m pip install sglang --no-deps)")
    return find_package_root(list(spec.submodule_search_locations)[0])


class Tree:
    """The package's modules, parsed on demand. ``notes``: what the reader skipped (``files.Note``).
    ``max_module_bytes``: the size limit of one module (that of every input file)."""

    def __init__(self, root: Path, max_module_bytes: int = MAX_INPUT_BYTES):
        self.root = root
        self.base = root.parent
        self.max_module_bytes = max_module_bytes
        self.paths: dict[str, Path] = {}
        #: module -> its text as Python decodes it (``read_module``: a leading BOM dropped, so the parse, the searches
        #: and the digests see one text): a ``str`` when ASCII, else its UTF-8 bytes (``raw_text`` decodes them: a
        #: ``str`` of one non-ASCII character takes 2-4 bytes for each of its characters, and keeps a UTF-8 copy once
        #: parsed)
        self.texts: dict[str, str | bytes] = {}
        self._modules: dict[str, Module | None] = {}
        self._class_index: dict[str, list[tuple[str, str]]] = {}  # base name -> [(module, class name)]
        files, self.notes = scan(root, self.base)
        for f in files:
            rel = f.relative_to(self.base)
            parts = list(rel.with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            self.paths[".".join(parts)] = f
        self.parsed = 0
        #: what the read asked of the files (``tree_log.Log``), when recorded
        self.log = None
        #: digests of the modules' texts and class statements (``tree_log``), computed once
        self.digests: dict[tuple[str, str], str] = {}

    def sibling(self) -> "Tree":
        """A tree of the same files with memos and a log of its own: the texts, the parsed modules, the class
        index, the searches' answers and the digests, pure functions of the files, are shared (read once)."""
        t = Tree.__new__(Tree)
        t.__dict__.update(root=self.root, base=self.base, max_module_bytes=self.max_module_bytes, paths=self.paths,
                          texts=self.texts, _modules=self._modules, _class_index=self._class_index,
                          notes=self.notes, parsed=0, log=None, digests=self.digests,
                          _containing=self.__dict__.setdefault("_containing", {}),
                          _words=self.__dict__.setdefault("_words", {}))
        return t

    def forget(self) -> None:
        """Drops what was read and computed from the files (the texts, the syntax trees, every memo kept on the
        tree), emptied in place, so a sibling drops them too; a later question reads the files again. A read done
        with its tree calls it: its syntax trees are millions of objects the cyclic collector would walk again and
        again while the process goes on (``verify --sglang`` verifying)."""
        for name, value in list(self.__dict__.items()):
            if name in ("texts", "digests") or name.startswith("_"):
                if isinstance(value, (dict, set, list)):
                    value.clear()
                if name.startswith("_") and name not in ("_modules", "_class_index"):
                    del self.__dict__[name]

    def rel(self, mod: str) -> str:
        memo = self.__dict__.setdefault("_rels", {})
        if mod not in memo:
            memo[mod] = self.paths[mod].relative_to(self.base).as_posix()
        return memo[mod]

    def note(self, file: str, line: int | None, what: str, unresolved: bool = True) -> None:
        self.notes.append(Note(file, line, what, unresolved))

    def skipped_text(self) -> str:
        """`` (N modules not read; FILE: WHY)`` naming the first module the reader skipped, or ``""``."""
        skipped = sorted({n for n in self.notes if n.unresolved}, key=lambda n: n.file)
        if not skipped:
            return ""
        return f" ({len(skipped)} modules or folders not read; {skipped[0].file}: {skipped[0].what})"

    # --- text ---------------------------------------------------------------------------------------------------
    def text(self, mod: str) -> str:
        """The module's text; empty for a module skipped (too large, no longer a regular file), with its note."""
        if self.log is not None:
            self.log.modules.add(mod)
        return self.raw_text(mod)

    def raw_text(self, mod: str) -> str:
        """``text`` not recorded in the log (for the tree's own searches, which record their answers)."""
        t = self.texts.get(mod)
        if t is None:
            try:
                t = read_module(self.paths[mod], self.rel(mod), self.max_module_bytes)
            except Skipped as s:
                self.notes.append(s.note)
                self._modules[mod] = None
                t = ""
            except OSError as e:
                raise NotSGLang(str(self.paths[mod]), "", f"cannot read: {e.strerror or e}") from None
            self.texts[mod] = t if t.isascii() else t.encode("utf-8", "surrogatepass")
            return t
        return t if type(t) is str else t.decode("utf-8", "surrogatepass")

    def walk(self, node: ast.AST) -> list[ast.AST]:
        """``list(ast.walk(node))``, computed once per node (keyed by the node itself, which hashes by identity)."""
        memo = self.__dict__.setdefault("_walks", {})
        out = memo.get(node)
        if out is None:
            out = memo[node] = walk_nodes(node)
        return out

    def modules_containing(self, *needles: str, under: str = "") -> list[str]:
        """The modules whose text holds one of ``needles``, in the tree's order (each search once); with ``under``
        (a dotted prefix, ``sglang.srt``) only the modules below it. By default the whole package: a search may back
        a claim that nothing anywhere does something (no store of a field), which code outside ``sglang/srt`` that the
        runtime imports could break."""
        memo = self.__dict__.setdefault("_containing", {})
        key = (needles, under)
        if key not in memo:
            memo[key] = self.raw_search(*key)
        if self.log is not None:
            self.log.searches[key] = memo[key]
        return list(memo[key])

    def raw_search(self, needles: tuple[str, ...], under: str) -> list[str]:
        """``modules_containing`` computed again, neither kept nor recorded. Through the word index (``word_index``):
        a needle's longest word (``\\w+`` run) lies inside a word of every text that holds the needle, so only the
        modules of the index's words that contain it are searched; a needle of no word character searches them all."""
        index = self.word_index()
        mods, text = index["modules"], self.raw_text
        found: set[int] = set()
        for n in needles:
            words = _WORD.findall(n)
            if not words:
                found.update([i for i, m in enumerate(mods) if i not in found and in_folder(m, under) and n in text(m)])
                continue
            longest = max(words, key=len)  # the first of the longest
            cands = index_candidates(index, longest) - found
            if under:
                cands = {i for i in cands if in_folder(mods[i], under)}
            if longest != n:  # a needle of one word is in every text of a word holding it
                cands = {i for i in cands if n in text(mods[i])}
            found |= cands
        return [mods[i] for i in sorted(found)]

    def word_index(self) -> dict:
        """The words of every module's text, built once on the first search (shared with a sibling, dropped by
        ``forget``): ``modules`` (the tree's order), ``words`` (the distinct words of the texts, as
        ``build_word_index`` takes them, UTF-8, each followed by ``\\n``), ``starts`` (where each word begins in
        ``words``) and ``postings`` (per word, the ascending positions in ``modules`` of the texts holding it: an
        ``int`` for one, else an ``array``)."""
        index = self.__dict__.setdefault("_words", {})
        if not index:
            index.update(build_word_index(list(self.paths), self.raw_text))
        return index

    def class_index(self) -> dict[str, list[tuple[str, str]]]:
        """base name (last dotted part) -> [(module, class name)] of every class statement, from the text."""
        if self.log is not None:
            self.log.class_index = True
        return self.raw_class_index()

    def raw_class_index(self) -> dict[str, list[tuple[str, str]]]:
        """``class_index`` not recorded in the log."""
        if not self._class_index:
            for m in self.paths:
                for name, base in class_statements(self.raw_text(m)):
                    self._class_index.setdefault(base, []).append((m, name))
        return self._class_index

    # --- parsing ------------------------------------------------------------------------------------------------
    def module(self, name: str) -> Module | None:
        if self.log is not None:
            self.log.modules.add(name)
        if name in self._modules:
            return self._modules[name]
        path = self.paths.get(name)
        if path is None:
            self._modules[name] = None
            return None
        text = self.raw_text(name)
        if name in self._modules:  # skipped when read
            return None
        rel = self.rel(name)
        nul = nul_error(text)
        if nul is not None:
            raise NotSGLang(str(path), f"line {nul[0]}", f"not valid Python: {nul[1]}")
        try:
            tree = ast.parse(text, filename=str(path))
        except SyntaxError as e:
            raise NotSGLang(str(path), f"line {e.lineno}", f"not valid Python: {e.msg}") from None
        except (RecursionError, MemoryError) as e:
            what = "nested too deeply" if isinstance(e, RecursionError) else "too large"
            self.note(rel, None, f"{what} for Python's ast to parse: not read")
            self._modules[name] = None
            return None
        deep = too_deep(tree, text)
        if deep is not None:
            self.note(rel, deep, f"nested deeper than {MAX_NESTING} syntax-tree levels (tree_files.MAX_NESTING): not read")
            self._modules[name] = None
            return None
        self.parsed += 1
        share_positions(tree)
        m = Module(name, path, rel, tree)
        is_pkg = path.name == "__init__.py"
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                ci = ClassInfo(node.name, m, node)
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        ci.methods[item.name] = item
                        ci.assigned.pop(item.name, None)
                    elif isinstance(item, ast.Assign) and len(item.targets) == 1 \
                            and isinstance(item.targets[0], ast.Name):
                        ci.assigned[item.targets[0].id] = item.value
                        ci.methods.pop(item.targets[0].id, None)
                m.classes[node.name] = ci
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                m.functions[node.name] = FuncInfo(node.name, m, node)
        for node in _top_level(tree.body):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        m.imports[a.asname] = ("module", a.name)
                    else:
                        m.imports.setdefault(a.name.split(".")[0], ("module", a.name.split(".")[0]))
            elif isinstance(node, ast.ImportFrom):
                src = _absolute(name, is_pkg, node.module, node.level)
                for a in node.names:
                    if a.name != "*":
                        m.imports[a.asname or a.name] = ("symbol", src, a.name)
                    elif src:
                        m.stars.insert(0, src)
        self._modules[name] = m
        return m

    # --- names --------------------------------------------------------------------------------------------------
    def resolve(self, mod: Module, name: str, _depth: int = 0):
        """What ``name`` means at the top level of ``mod``: a ClassInfo, a FuncInfo, ("module", dotted) or None."""
        if _depth > MAX_REEXPORTS:
            self.note(mod.rel, None, f"`{name}` imported through more than {MAX_REEXPORTS} modules re-exporting it "
                                     "(tree.MAX_REEXPORTS), or a cycle of imports: not resolved")
            return None
        if name in mod.classes:
            return mod.classes[name]
        if name in mod.functions:
            return mod.functions[name]
        imp = mod.imports.get(name)
        if imp is None:
            return self._starred(mod, name, _depth)
        if imp[0] == "module":
            return ("module", imp[1])
        _, src, sym = imp
        if f"{src}.{sym}" in self.paths:
            return ("module", f"{src}.{sym}")
        target = self.module(src)
        if target is None:
            return None
        return self.resolve(target, sym, _depth + 1)

    def _starred(self, mod: Module, name: str, depth: int):
        """What ``name`` means through ``mod``'s ``from X import *`` (a public name: no leading underscore, and in
        ``X.__all__`` where ``X`` lists one literally), or None."""
        if name.startswith("_"):
            return None
        for src in mod.stars:
            target = self.module(src)
            if target is None:
                continue
            public = _literal_all(target)
            if public is not None and name not in public:
                continue
            r = self.resolve(target, name, depth + 1)
            if r is not None:
                return r
        return None

    def local_imports(self, mod: Module, stmts) -> dict[str, list]:
        """name -> what each ``from X import Y [as name]`` anywhere in ``stmts`` (imports inside functions) binds it
        to, as ``resolve`` gives it, in source order (several when branches import different things under one
        name). Computed once per module and statements; the caller must not change the result."""
        stmts = list(stmts)
        key = (mod.name, tuple(stmts))
        memo = self.__dict__.setdefault("_local_imports", {})
        if key in memo:
            return memo[key]
        out: dict[str, list] = {}
        memo[key] = out
        for s in stmts:
            for n in self.walk(s):
                if isinstance(n, ast.ImportFrom):
                    target = self.module(_absolute(mod.name, mod.path.name == "__init__.py", n.module, n.level))
                    for a in n.names:
                        r = self.resolve(target, a.name) if target is not None and a.name != "*" else None
                        if r is not None:
                            out.setdefault(a.asname or a.name, []).append(r)
        return out

    def resolve_expr(self, mod: Module, expr: ast.expr):
        """A ``Name`` or dotted ``Attribute`` (``mod.Class``) resolved as ``resolve`` does; None otherwise."""
        if isinstance(expr, ast.Subscript):  # Generic[T]
            return self.resolve_expr(mod, expr.value)
        if isinstance(expr, ast.Name):
            return self.resolve(mod, expr.id)
        if isinstance(expr, ast.Attribute):
            head = self.resolve_expr(mod, expr.value)
            if isinstance(head, tuple) and head[0] == "module":
                sub = f"{head[1]}.{expr.attr}"
                if sub in self.paths:
                    return ("module", sub)
                target = self.module(head[1])
                return self.resolve(target, expr.attr) if target else None
        return None

    def bases(self, ci: ClassInfo) -> list[ClassInfo]:
        out = []
        for b in ci.node.bases:
            r = self.resolve_expr(ci.module, b)
            if isinstance(r, ClassInfo):
                out.append(r)
        return out

    def mro(self, ci: ClassInfo) -> list[ClassInfo]:
        """C3 linearisation over the bases that resolve inside the tree (others, such as ``ABC``, are left out), at
        most ``MAX_MRO`` classes (a longer one is cut there, with a note). Computed bases first, without recursion, so
        a hierarchy of any depth is fine; a cycle of bases (broken code) ends at the class met again."""
        memo: dict[int, list[ClassInfo]] = self.__dict__.setdefault("_mro", {})
        if id(ci) in memo:
            return memo[id(ci)]
        todo, open_ = [(ci, False)], set()
        while todo:
            c, ready = todo.pop()
            if id(c) in memo:
                continue
            if ready:
                memo[id(c)] = self._linearize(c, memo)
                continue
            if id(c) in open_:
                continue
            open_.add(id(c))
            todo.append((c, True))
            todo.extend((b, False) for b in reversed(self.bases(c)) if id(b) not in memo and id(b) not in open_)
        return memo[id(ci)]

    def _linearize(self, ci: ClassInfo, memo) -> list[ClassInfo]:
        bases = self.bases(ci)
        seqs = [list(memo.get(id(b), [b])) for b in bases] + [bases]
        out = [ci]
        while True:
            seqs = [s for s in seqs if s]
            if not seqs:
                break
            for s in seqs:
                head = s[0]
                if not any(head in t[1:] for t in seqs):
                    break
            else:  # inconsistent hierarchy: depth-first order
                for s in seqs:
                    for c in s:
                        if c not in out:
                            out.append(c)
                break
            out.append(head)
            for t in seqs:
                if t and t[0] is head:
                    t.pop(0)
        if len(out) > MAX_MRO:
            self.note(ci.file, ci.line, f"{ci.name}: a hierarchy of more than {MAX_MRO} classes (tree.MAX_MRO): its "
                                        f"method resolution order is cut after {MAX_MRO}")
            out = out[:MAX_MRO]
        return out

    def lookup(self, ci: ClassInfo, method: str, after: ClassInfo | None = None, _depth: int = 0):
        """(defining class, def) of ``method`` on ``ci``'s MRO, starting after ``after`` (``super()``); or None."""
        seq = self.mro(ci)
        if after is not None:
            seq = seq[seq.index(after) + 1:] if after in seq else []
        for c in seq:
            if method in c.methods:
                return c, c.methods[method]
            if method in c.assigned:  # ``forward = Other.forward``: Other's def, else nothing known
                value = c.assigned[method]
                if isinstance(value, ast.Attribute) and not _depth:
                    other = self.resolve_expr(c.module, value.value)
                    if isinstance(other, ClassInfo):
                        return self.lookup(other, value.attr, _depth=1)
                return None
        return None

    def subclasses(self, roots: list[ClassInfo]) -> list[ClassInfo]:
        """Every class in the tree whose MRO contains one of ``roots`` (the roots included), found by a fixpoint over
        the text index of class statements and confirmed by resolving bases."""
        index = self.class_index()
        found: dict[int, ClassInfo] = {id(r): r for r in roots}
        names = {r.name for r in roots}
        seen_names: set[str] = set()
        while names - seen_names:
            todo = names - seen_names
            seen_names |= todo
            for n in sorted(todo):
                for mod, cls in index.get(n, ()):
                    m = self.module(mod)
                    ci = m.classes.get(cls) if m else None
                    if ci is None or id(ci) in found:
                        continue
                    if any(id(b) in found for b in self.mro(ci)[1:]):
                        found[id(ci)] = ci
                        names.add(ci.name)
                        # a class found later may make an earlier candidate a subclass: re-test by name
                        seen_names.discard(ci.name)
        return sorted(found.values(), key=lambda c: (c.file, c.line, c.name))

    def classes_named(self, name: str, within: list[str] | None = None) -> list[ClassInfo]:
        out = []
        for mod in (within if within is not None else self.modules_containing(f"class {name}")):
            m = self.module(mod)
            if m and name in m.classes:
                out.append(m.classes[name])
        return out

    def version(self) -> str | None:
        for mod in ("sglang._version", "sglang.version"):
            if mod in self.paths:
                mm = re.search(r"""__version__\s*=\s*(?:version\s*=\s*)?['"]([^'"]+)['"]""", self.text(mod))
                if mm:
                    return mm.group(1)
        return None


def copy_node(node, replace: dict | None = None):
    """A copy of the syntax tree ``node`` (its fields and positions, nothing else): what ``copy.deepcopy`` gives
    without the reader's own attributes on the nodes (the parent ``reads`` sets would take the copy up to the whole
    module); with ``replace`` (``id`` of a node of ``node`` -> a node), each such node is that node instead."""
    if replace and id(node) in replace:
        return replace[id(node)]
    if isinstance(node, ast.AST):
        new = node.__class__()
        for f in node._fields:
            if hasattr(node, f):
                setattr(new, f, copy_node(getattr(node, f), replace))
        for a in node._attributes:
            if hasattr(node, a):
                setattr(new, a, getattr(node, a))
        return new
    if isinstance(node, list):
        return [copy_node(x, replace) for x in node]
    return node


_BODIES: dict[int, tuple] = {}


def body_nodes(fn: ast.FunctionDef) -> list:
    """The nodes of ``fn``'s body, nested function and class bodies left out (once per function: the trees are never
    changed)."""
    hit = _BODIES.get(id(fn))
    if hit is not None and hit[0] is fn:
        return hit[1]
    out, stack = [], list(fn.body)
    while stack:
        n = stack.pop()
        out.append(n)
        stack.extend(k for k in ast.iter_child_nodes(n)
                     if not isinstance(k, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)))
    _BODIES[id(fn)] = (fn, out)
    return out


def walk_once(node: ast.AST) -> list[ast.AST]:
    """``walk_nodes(node)``, kept on the node (for a function or a module of a tree, which is never changed; not for a
    node that may be copied: ``copy.deepcopy`` would copy the list too)."""
    d = node.__dict__
    out = d.get("_fc_walk")
    if out is None:
        out = d["_fc_walk"] = walk_nodes(node)
    return out


def walk_nodes(node: ast.AST) -> list[ast.AST]:
    """``list(ast.walk(node))``, in the same order (breadth first, each node's children in field order), without
    ``ast.walk``'s generator per node (the reader walks about 300,000 nodes of a release)."""
    out = [node]
    AST = ast.AST
    i = 0
    while i < len(out):
        n = out[i]
        i += 1
        for f in n._fields:
            v = getattr(n, f, None)
            if isinstance(v, AST):
                out.append(v)
            elif isinstance(v, list):
                out += [x for x in v if isinstance(x, AST)]
    return out


#: line and column numbers past the small ints Python keeps once, each kept once for every syntax tree
_POSITIONS: dict[int, int] = {}


def share_positions(tree: ast.Module) -> None:
    """Makes the nodes of ``tree`` that hold equal line or column numbers share one ``int`` (``ast.parse`` makes one
    per node and field past 256: some 2 million, 64 MB, in the modules a release's read parses). Values unchanged."""
    share = _POSITIONS.setdefault
    for n in walk_nodes(tree):
        d = n.__dict__
        for k in ("lineno", "end_lineno", "col_offset", "end_col_offset"):
            v = d.get(k)
            if v is not None and v > 256:
                d[k] = share(v, v)


_WORD = re.compile(r"\w+")
#: UTF-8 bytes -> themselves for an ASCII word character (letters, digits, ``_``) or a byte of a non-ASCII character,
#: else a space: a text's words are then its maximal runs of word and non-ASCII characters, each ``\w+`` run inside one
_WORD_BYTES = bytes(c if c >= 128 or chr(c).isalnum() or c == 95 else 32 for c in range(256))


def build_word_index(mods: list[str], text) -> dict:
    """``Tree.word_index`` of the modules ``mods`` whose texts ``text(module)`` gives (read in order). A word found
    holding a needle's bytes (UTF-8: a needle is in a text exactly where its bytes are) is in the text, so the needle
    is; every ``\\w+`` run of a text is inside one of its words, so no text holding a needle is missed."""
    code = "H" if len(mods) <= 1 << 16 else "I"
    postings: dict[bytes, int | array] = {}
    get = postings.get
    for i, m in enumerate(mods):
        for w in set(text(m).encode("utf-8", "surrogatepass").translate(_WORD_BYTES).split()):
            p = get(w)
            if p is None:
                postings[w] = i
            elif type(p) is int:
                postings[w] = array(code, (p, i))
            else:
                p.append(i)
    starts, at = array("I"), 0
    for w in postings:
        starts.append(at)
        at += len(w) + 1
    joined = b"\n".join(postings) + b"\n" if postings else b""
    return {"modules": mods, "words": joined, "starts": starts, "postings": list(postings.values())}


def index_candidates(index: dict, word: str) -> set[int]:
    """The positions of the modules whose text has a word that contains ``word`` (a ``\\w+`` run: no ``\\n``)."""
    joined, starts, postings = index["words"], index["starts"], index["postings"]
    needle = word.encode("utf-8", "surrogatepass")
    out: set[int] = set()
    at = joined.find(needle)
    while at >= 0:
        k = bisect_right(starts, at) - 1
        p = postings[k]
        if type(p) is int:
            out.add(p)
        else:
            out.update(p)
        if k + 1 >= len(starts):
            break
        at = joined.find(needle, starts[k + 1])
    return out


def in_folder(mod: str, under: str) -> bool:
    """Whether module ``mod`` is ``under`` (a dotted prefix) or below it; every module is below ``""``."""
    return not under or mod == under or mod.startswith(under + ".")


def class_statements(text: str) -> list[tuple[str, str]]:
    """(class name, base name: the last dotted part) of each class statement of a module's text, as the class index
    takes them."""
    if "class " not in text:
        return []
    return [(cm.group(1), b.rsplit(".", 1)[-1]) for cm in _CLASS_RE.finditer(text)
            for b in _IDENT_RE.findall(cm.group(2) or "")]


def _top_level(body):
    """Statements at a module's top level, including those nested in ``if``/``try`` (TYPE_CHECKING, fallbacks)."""
    for node in body:
        yield node
        if isinstance(node, ast.If):
            yield from _top_level(node.body)
            yield from _top_level(node.orelse)
        elif isinstance(node, ast.Try):
            yield from _top_level(node.body)
            for h in node.handlers:
                yield from _top_level(h.body)
            yield from _top_level(node.orelse)
            yield from _top_level(node.finalbody)


def _absolute(mod: str, is_pkg: bool, target: str | None, level: int) -> str:
    if level == 0:
        return target or ""
    parts = mod.split(".")
    if not is_pkg:
        parts = parts[:-1]
    if level > 1:
        parts = parts[: len(parts) - (level - 1)]
    return ".".join(parts + ([target] if target else []))


def _literal_all(mod: Module) -> frozenset | None:
    """The names a module's top-level ``__all__ = [...]`` (or tuple) of string literals lists, None when it has none
    the reader can read."""
    for node in mod.tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets) \
                and isinstance(node.value, (ast.List, ast.Tuple)) \
                and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.value.elts):
            return frozenset(e.value for e in node.value.elts)
    return None
