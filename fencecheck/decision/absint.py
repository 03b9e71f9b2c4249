"""An abstract interpreter of a tree's Python functions: one state per path, values tracked through object fields,
path conditions in z3.

A **value** is None, a constant, a reference to an abstract object (an instance of a class of the tree, or an object
whose class is not known), or an unknown (``Sym``: one fixed value the interpreter knows nothing of; reading the same
field twice with no store between gives the same symbol, so two tests of it are linked). Objects live on a heap:
each has its class (or none) and the fields stored or read so far; a field never read nor stored is initialised on
first read (a symbol), except on an object the interpretation made itself, whose missing field is looked up on its
class (a dataclass default, a class attribute; no attribute anywhere on the class's MRO and no ``__getattr__``: the
read raises). Each path carries its conditions: z3 terms over the symbols' predicates (truthy, is None, equal to a
constant, an instance of a class), a fresh atom for a test the domain cannot express.

A statement updates every path; an ``if`` whose test the state decides takes one branch, else both, each with the
test (or its negation) added to its conditions; a path ends at a ``raise``, a failed ``assert``, an attribute of
None, an attribute its object's class lacks, or a ``return`` (its returned value goes to the caller). A call of a
method of a known class (the MRO, ``super()``), of a module function of the tree or of a class of the tree
(constructing an object: a dataclass's fields, else its ``__init__``) is followed, within ``MAX_DEPTH`` calls and
``MAX_STEPS`` statements; any other call, or one past a bound, is **opaque**: every object a reference to which it
is given (receiver and arguments, and what they reach) has its fields forgotten, and its result is unknown. Loops
forget what their bodies store, then run the body once; ``try`` runs its body and then each handler from the state
before it with what the body stores forgotten; ``with`` runs its body. More than ``MAX_PATHS`` paths at one point are
joined into one (fields that differ are forgotten, conditions dropped): a join only loses precision.

A dict the interpretation makes (a literal, ``dict()``) keeps its entries under literal keys as fields and the values
stored under other keys as alternatives: a read under such a key is one path per value (and an unknown where the
dict may hold entries not seen). Where joined paths hold different objects in one field, the field holds the
alternatives, split again into one path each where it is read.

What the interpretation assumes, and the analysis built on it must say: an opaque call changes only the objects it
is handed references to; two distinct access paths that the interpretation resolves to distinct objects are distinct
objects (no aliasing it did not see); a store through an object the interpretation cannot resolve may be to any
object, so it forgets that field on every object; code it does not run changes an object the interpretation made
only where it is handed it (``forget_outside`` forgets the fields of the roots and of objects it did not make). Every
bound reached only makes more paths possible.
"""

from __future__ import annotations

import ast
import itertools
import re
from dataclasses import dataclass, field, replace

import z3

from fencecheck.sglang_source.reads import decided_test
from fencecheck.sglang_source.tree import ClassInfo, Tree

#: Calls followed below the interpreted function.
MAX_DEPTH = 6
#: Statements interpreted in one run (every path's statements counted), past which calls become opaque.
MAX_STEPS = 20_000
#: Paths kept at one program point; more are joined into one.
MAX_PATHS = 24
#: Heap objects that count as one statement of work (``Budget.total``).
WORK_OBJECTS = 100
#: The z3 resource limit of one reachability query (deterministic, never wall-clock).
RLIMIT = 2_000_000


#: ``.attr = ...`` (also ``+=`` and the like) in a module's text; the receiver is read before the match.
_STORE = re.compile(r"\.(\w+)[ \t]*(?:[-+*/|&%@^]|//|>>|<<|\*\*)?=(?!=)")
#: ``.attr[key] = ...`` in a module's text: an entry stored into the container a field holds.
_SUBSTORE = re.compile(r"\.(\w+)\[[^\]\n]*\][ \t]*(?:[-+*/|&%@^]|//|>>|<<|\*\*)?=(?!=)")
#: ``setattr(x, "attr", ...)`` with a literal name.
_SETATTR = re.compile(r"\bsetattr\([^,()]*,\s*[\"']([A-Za-z_]\w*)[\"']")


def _non_self_stores(text: str) -> set[str]:
    """The names ``text`` stores through a receiver other than a bare ``self``."""
    out = set()
    for pattern, prefix in ((_STORE, ""), (_SUBSTORE, "[]")):
        for m in pattern.finditer(text):
            s = m.start()
            bare_self = text.endswith("self", 0, s) and (s < 5 or not (text[s - 5].isalnum() or text[s - 5] in "_."))
            if not bare_self:
                out.add(prefix + m.group(1))
    return out


def test_module(name: str) -> bool:
    """Whether the dotted module ``name`` is test code no server runs: one under a ``test`` or ``tests`` package
    (``sglang.test``'s kits, ``sglang.multimodal_gen.test.unit``), or a ``test_*.py`` / ``*_test.py`` file."""
    parts = name.split(".")
    return any(x in ("test", "tests") for x in parts[:-1]) or parts[-1].startswith("test_") \
        or parts[-1].endswith("_test")


def store_modules(tree: Tree) -> dict[str, frozenset]:
    """attribute name -> the modules whose text stores it through a receiver other than a bare ``self``
    (``runner.backend.X = ``, ``self.backend.X = ``, ``batch.X = ``) or names it to ``setattr``: every module's text
    read once, test code (``test_module``) left out."""
    memo = tree.__dict__.get("_absint_store_modules")
    if memo is None:
        found: dict[str, set] = {}
        for m in tree.paths:
            if test_module(m):
                continue
            text = tree.raw_text(m)
            if "=" not in text and "setattr" not in text:
                continue
            for a in _non_self_stores(text) | (set(_SETATTR.findall(text)) if "setattr" in text else set()):
                found.setdefault(a, set()).add(m)
        memo = tree.__dict__["_absint_store_modules"] = {a: frozenset(ms) for a, ms in found.items()}
    return memo


@dataclass(frozen=True)
class Sym:
    """An unknown value, fixed: the same symbol is the same value."""

    n: int


@dataclass(frozen=True)
class Ref:
    """A reference to the abstract object ``oid`` of the heap."""

    oid: str


NONE = ("none",)


def alternatives(vals) -> tuple | None:
    """One value standing for several references (or None): ``("alts", members)``, where a join meets paths whose
    value is one object on one and another on the other; None when some are not references."""
    members = []
    for v in vals:
        inner = v[1] if isinstance(v, tuple) and v[0] == "alts" else (v,)
        for x in inner:
            if not (isinstance(x, Ref) or x == NONE):
                return None
            if x not in members:
                members.append(x)
    return ("alts", tuple(sorted(members, key=str)))


def const(v):
    return ("const", v)


#: In an object's ``maybe``: the fields code the interpretation does not run may store on the runner's capture batch.
ON_BATCH = "@batch"


@dataclass(frozen=True)
class Obj:
    """An abstract object: its class (None: not known), its fields, and whether a missing field is looked up on its
    class (an object the interpretation constructed) or is an unknown met for the first time."""

    cls: ClassInfo | None
    fields: tuple = ()
    made: bool = False
    at: str = ""
    #: names code the interpretation did not run may have stored on it (never absent); ``*`` any, ``ON_BATCH`` those
    #: ``Interpreter.stored_on_batch`` names
    maybe: frozenset = frozenset()
    #: a dict the interpretation made: entries under literal keys are fields named ``[key]``; ``alts`` the values
    #: stored under other keys (any of them may be read under such a key); ``opened``: it may hold entries not seen
    box: bool = False
    alts: tuple = ()
    opened: bool = False

    def get(self, attr: str):
        return self.field_map().get(attr)

    def field_map(self) -> dict:
        """``dict(fields)``, made once per object (kept beside its fields, not one of them: equality and hashing
        are the fields'; never changed by a caller)."""
        d = self.__dict__.get("_map")
        if d is None:
            d = dict(self.fields)
            object.__setattr__(self, "_map", d)
        return d

    def set(self, attr: str, value) -> "Obj":
        d = dict(self.field_map())
        d[attr] = value
        return self.with_(fields=tuple(sorted(d.items(), key=lambda kv: kv[0])))

    def with_(self, **changes) -> "Obj":
        """``dataclasses.replace(self, **changes)`` without its per-call introspection (the interpretation makes
        millions of objects)."""
        d = {"cls": self.cls, "fields": self.fields, "made": self.made, "at": self.at, "maybe": self.maybe,
             "box": self.box, "alts": self.alts, "opened": self.opened}
        d.update(changes)
        return Obj(**d)


@dataclass(frozen=True)
class Effects:
    """A function's summary (``Interpreter.effects``): the attribute names it may store, those whose objects it may
    hand to code the interpretation does not run, and whether it may hand a parameter itself to such code."""

    stores: frozenset
    handed: frozenset
    #: the parameters it may hand themselves to such code
    escapes: frozenset


@dataclass(frozen=True)
class Died:
    """Why a path ended before its goal: ``kind`` (``raise``, ``assert``, ``none``, ``return``, ``false``), where,
    and what."""

    kind: str
    file: str
    line: int
    what: str


@dataclass
class Path:
    """One path: the heap, the current frame's locals, its conditions (z3 terms) and, once it returned, its value."""

    heap: dict
    local: dict
    cond: tuple = ()
    ret: object = None

    def copy(self) -> "Path":
        return Path(dict(self.heap), dict(self.local), self.cond, self.ret)


@dataclass
class Fn:
    """A function to interpret: its node, module and owning class (None for a module function)."""

    node: ast.FunctionDef
    module: object
    owner: ClassInfo | None

    @property
    def file(self) -> str:
        return self.module.rel


class Budget:
    def __init__(self):
        self.steps = 0
        #: work of every run, never reset (``captured.MAX_TOTAL``): a statement, and one more for each
        #: ``WORK_OBJECTS`` objects of its path's heap (what a path's copies and joins cost grows with its heap)
        self.total = 0
        self.syms = itertools.count()
        self.objs = itertools.count()

    def mark(self) -> tuple[int, int, int]:
        """Where the budget stands (work spent, the next symbol's and object's numbers), for ``resume``."""
        syms, objs = next(self.syms), next(self.objs)
        self.syms, self.objs = itertools.count(syms), itertools.count(objs)
        return self.total, syms, objs

    def resume(self, mark: tuple[int, int, int]) -> None:
        """The budget back where ``mark`` left it: what runs next is numbered and bounded alike whatever ran between."""
        self.total, syms, objs = mark
        self.syms, self.objs = itertools.count(syms), itertools.count(objs)


@dataclass
class Outcome:
    """What running a block gives: the paths that go on, those that returned, and why the others ended."""

    live: list = field(default_factory=list)
    returned: list = field(default_factory=list)
    died: list = field(default_factory=list)


class Interpreter:
    """Interprets functions of ``tree`` with the forward mode ``mode`` (``modes``: the tree's ``ForwardMode``
    predicates, which decide mode tests) and ``in_capture`` for a parameter of that name."""

    def __init__(self, tree: Tree, modes, mode: str | None, in_capture: bool | None = None, own=(),
                 platform: str | None = None):
        self.tree, self.modes, self.mode, self.in_capture = tree, modes, mode, in_capture
        #: the platform the run is on (``vocab.Platform``'s value), or None: each of the tree's platform predicates
        #: (``is_cuda()``, ``is_npu()``, ... : ``sglang_source.platform.predicates``) is then a constant
        self.platform = platform
        self._predicates: dict | None = None
        self.budget = Budget()
        self.z3 = {}
        #: the classes whose methods run only where the interpretation runs them (its subject's MRO)
        self.own = list(own)
        self._outside: dict[str, bool] = {}
        self.depth = 0  # calls followed below the function run first
        self._effects_cut = False  # a summary being made met a cycle or the depth bound below it (``effects``)
        self.last_died: list = []  # why the paths of the last method a caller ran ended

    def stored_outside(self, attr: str) -> bool:
        """Whether code the interpretation does not run may store ``attr`` on its objects: a store of that name
        through a receiver other than ``self`` (or a ``setattr`` naming it) anywhere in the tree but in a method of
        one of ``own``'s classes."""
        if attr not in self._outside:
            mods = store_modules(self.tree).get(attr, frozenset())
            own_mods = {c.module.name for c in self.own}
            hit = any(m not in own_mods for m in mods)
            if not hit:
                for c in self.own:
                    if c.module.name not in mods:
                        continue
                    inside = {id(n) for f in c.methods.values() for n in ast.walk(f)}
                    for n in ast.walk(c.module.tree):
                        if id(n) not in inside and _stores_name(n, attr):
                            hit = True
                            break
            self._outside[attr] = hit
        return self._outside[attr]

    def stored_on_batch(self, attr: str) -> bool:
        """Whether code the interpretation does not run may store ``attr`` on the runner's capture batch: a store of
        that name (or a ``setattr`` naming it) anywhere in the tree but through a bare ``self`` (an object's own
        method), in a method of one of ``own``'s classes (run where the interpretation runs it), in a method of
        another attention backend (it does not run in this backend's graph), in test code (``test_module``), or
        through a local that holds only a new object in its function (a construction, ``cls(...)``, a copy,
        ``dataclasses.replace``, an alternative constructor whose every ``return`` is ``cls(...)``): the runner's
        own new batch is modelled from its constructions (``captured``)."""
        memo = self.tree.__dict__.setdefault("_absint_on_batch", {})
        key = (attr, tuple(sorted(c.key for c in self.own)))
        if key not in memo:
            memo[key] = _stored_on_batch(self, attr)
        return memo[key]

    def forget_outside(self, p: Path, roots=()) -> None:
        """What code the interpretation does not run may have stored on ``p``'s objects, forgotten (before each step
        of a sequence the caller runs: the runner's own code runs between them): on ``roots`` and on every object the
        interpretation did not make. An object it made is changed only by code that is handed it: the code it runs,
        or a call it cannot follow, which forgets it (the premise the capture rule took too)."""
        for oid, o in list(p.heap.items()):
            if o.made and oid not in roots:
                continue
            gone = [k for k, _ in o.fields if self.stored_outside(k)]
            if gone:
                fields = {k: (self.fresh() if k in gone else v) for k, v in o.fields}
                p.heap[oid] = replace(o, fields=tuple(sorted(fields.items(), key=lambda kv: kv[0])))
            for k, v in o.fields:  # a container whose entries code the interpretation does not run may store
                box = self._box_of(p, v)
                if box is not None and not box.opened and self.stored_outside(f"[]{k}"):
                    p.heap[v.oid] = replace(box, opened=True)

    # -- values -----------------------------------------------------------------------------------------------------

    def fresh(self) -> Sym:
        return Sym(next(self.budget.syms))

    def new_obj(self, p: Path, cls: ClassInfo | None, made: bool, at: str = "") -> Ref:
        oid = f"o{next(self.budget.objs)}"
        p.heap[oid] = Obj(cls, (), made, at)
        return Ref(oid)

    def materialise(self, p: Path, v: Sym) -> Ref:
        """The object the unknown ``v`` is where an attribute of it is read or stored: on this path it is not None
        (where it is None, the attribute raises and the path ends)."""
        oid = f"s{v.n}"
        if oid not in p.heap:
            p.heap[oid] = Obj(None, (), False)
        p.cond += (z3.Not(self.atom(f"none#{v.n}")),)
        return Ref(oid)

    @staticmethod
    def _sym_of(v) -> int | None:
        """The symbol an object materialised from an unknown stands for."""
        return int(v.oid[1:]) if isinstance(v, Ref) and v.oid.startswith("s") else None

    def truth(self, p: Path, v):
        """True, False, or a z3 term over ``v``'s symbol (None: not expressible)."""
        if v == NONE:
            return False
        if isinstance(v, tuple) and v[0] == "const":
            return bool(v[1])
        if isinstance(v, Ref):
            o = p.heap.get(v.oid)
            if o is not None and o.cls is not None and not self._defines(o.cls, ("__bool__", "__len__")):
                return True
            n = self._sym_of(v)
            return None if n is None else self.atom(f"truthy#{n}")
        if isinstance(v, Sym):
            return z3.And(self.atom(f"truthy#{v.n}"), z3.Not(self.atom(f"none#{v.n}")))
        return None

    def is_none(self, p: Path, v):
        if v == NONE:
            return True
        if isinstance(v, (Ref,)) or (isinstance(v, tuple) and v[0] == "const"):
            return False
        if isinstance(v, Sym):
            return self.atom(f"none#{v.n}")
        return None

    def atom(self, key: str):
        if key not in self.z3:
            self.z3[key] = z3.Bool(key)
        return self.z3[key]

    def _defines(self, ci: ClassInfo, names) -> bool:
        return any(n in c.methods or n in c.assigned for c in self.tree.mro(ci) for n in names)

    # -- expressions ------------------------------------------------------------------------------------------------

    def expr(self, fn: Fn, p: Path, e, out: list) -> list[tuple[Path, object]]:
        """Every (path, value) ``e`` evaluates to on ``p``; paths that end in it go to ``out`` (``Died``). A value
        that stands for several references is one path each."""
        got = self._expr(fn, p, e, out)
        if not any(isinstance(v, tuple) and v[0] == "alts" for _, v in got):
            return self._cap(got)
        split = []
        for q, v in got:
            if isinstance(v, tuple) and v[0] == "alts":
                split += [(q if i == 0 else q.copy(), m) for i, m in enumerate(v[1])]
            else:
                split.append((q, v))
        return self._cap(split)

    def _expr(self, fn: Fn, p: Path, e, out: list) -> list[tuple[Path, object]]:
        if isinstance(e, ast.Constant):
            return [(p, NONE if e.value is None else const(e.value))]
        if isinstance(e, ast.Name):
            if e.id in p.local:
                return [(p, p.local[e.id])]
            if e.id in ("True", "False"):
                return [(p, const(e.id == "True"))]
            r = self.resolve_name(fn, e.id)
            if isinstance(r, ClassInfo):
                return [(p, ("class", r))]
            if r is not None:
                return [(p, ("func", r))]
            return [(p, self.fresh())]
        if isinstance(e, ast.Attribute):
            got = []
            for q, base in self.expr(fn, p, e.value, out):
                got += self.attr(fn, q, base, e.attr, e, out)
            return got
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == "getattr" \
                and e.func.id not in p.local and len(e.args) in (2, 3) and isinstance(e.args[1], ast.Constant) \
                and isinstance(e.args[1].value, str):
            return self._getattr(fn, p, e, out)
        if isinstance(e, ast.Call):
            return self.call(fn, p, e, out)
        if isinstance(e, ast.NamedExpr):
            got = []
            for q, v in self.expr(fn, p, e.value, out):
                q.local[e.target.id] = v
                got.append((q, v))
            return got
        if isinstance(e, ast.Dict):
            return self._dict_literal(fn, p, e, out)
        if isinstance(e, ast.Subscript) and isinstance(e.ctx, ast.Load):
            return self._subscript(fn, p, e, out)
        if isinstance(e, ast.BoolOp):  # ``a or b`` is a's value where a is true, else b's
            return self._boolop_value(fn, p, e, out)
        if (isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not)) or (isinstance(e, ast.Compare)
                                                                            and len(e.ops) == 1):
            return [(q, self._bool_value(t)) for q, t in self.test(fn, p, e, out)]
        if isinstance(e, ast.IfExp):
            got = []
            for q, t in self.test(fn, p, e.test, out):
                for r, tv in self._split(q, t):
                    got += self.expr(fn, r, e.body if tv else e.orelse, out)
            return got
        got = [p]
        for child in ast.iter_child_nodes(e):
            if isinstance(child, ast.expr) and not isinstance(child, ast.Lambda):
                nxt = []
                for q in got:
                    nxt += [r for r, _ in self.expr(fn, q, child, out)]
                got = self._capped(nxt)
            elif isinstance(child, ast.comprehension):
                for q in got:
                    self._forget_stores(fn, q, [ast.Expr(value=x) for x in [child.iter, *child.ifs]])
        return [(q, self.fresh()) for q in got]

    def new_box(self, p: Path, at: str) -> Ref:
        oid = f"o{next(self.budget.objs)}"
        p.heap[oid] = Obj(None, (), True, at, frozenset(), True)
        return Ref(oid)

    def _dict_literal(self, fn: Fn, p: Path, e: ast.Dict, out: list):
        got = [(p, [], [], False)]
        for k, v in zip(e.keys, e.values):
            nxt = []
            for q, fields, alts, opened in got:
                if k is None:  # ``**other``: entries not seen
                    nxt += [(r, fields, alts, True) for r, _ in self.expr(fn, q, v, out)]
                    continue
                for r, val in self.expr(fn, q, v, out):
                    if isinstance(k, ast.Constant):
                        nxt.append((r, fields + [(f"[{k.value!r}]", val)], alts, opened))
                    else:
                        nxt += [(s, fields, alts + [val], opened) for s, _ in self.expr(fn, r, k, out)]
            got = [(q, *x) for q, x in self._cap([(q, tuple(x)) for q, *x in nxt], self._merge_entries)]
        done = []
        for q, fields, alts, opened in got:
            ref = self.new_box(q, f"{fn.file}:{e.lineno}")
            q.heap[ref.oid] = replace(q.heap[ref.oid], fields=tuple(sorted(dict(fields).items())), alts=tuple(alts),
                                      opened=opened)
            done.append((q, ref))
        return done

    def _box_of(self, p: Path, v) -> Obj | None:
        return p.heap[v.oid] if isinstance(v, Ref) and v.oid in p.heap and p.heap[v.oid].box else None

    def _subscript(self, fn: Fn, p: Path, e: ast.Subscript, out: list):
        """``X[k]``: of a dict the interpretation made, the entry under a literal key, or any value stored under
        another key (each its own path); else unknown."""
        got = []
        for q, base in self.expr(fn, p, e.value, out):
            box = self._box_of(q, base)
            if box is None:
                got += [(r, self.fresh()) for r, _ in self.expr(fn, q, e.slice, out)]
                continue
            if isinstance(e.slice, ast.Constant):
                hit = box.get(f"[{e.slice.value!r}]")
                options = [hit] if hit is not None else list(box.alts) + ([self.fresh()] if box.opened else [])
                got += [(q if i == 0 else q.copy(), v) for i, v in enumerate(options or [self.fresh()])]
                continue
            for r, _ in self.expr(fn, q, e.slice, out):
                box = self._box_of(r, base)
                options = list(dict.fromkeys(box.alts)) + [v for k, v in box.fields] + \
                    ([self.fresh()] if box.opened else [])
                got += [(r if i == 0 else r.copy(), v) for i, v in enumerate(options or [self.fresh()])]
        return got

    def _boolop_value(self, fn: Fn, p: Path, e: ast.BoolOp, out: list) -> list[tuple[Path, object]]:
        and_ = isinstance(e.op, ast.And)
        done, todo = [], [p]
        for i, part in enumerate(e.values):
            nxt = []
            for q in todo:
                for r, v in self.expr(fn, q, part, out):
                    if i == len(e.values) - 1:
                        done.append((r, v))
                        continue
                    t = self.truth(r, v) if not (isinstance(v, tuple) and v[0] == "bool") else v[1]
                    t = self._fresh_atom() if t is None else t
                    for s, tv in self._split(r, t):
                        if tv == and_:
                            nxt.append(s)  # goes on to the next operand
                        else:
                            done.append((s, v))
            todo = self._capped(nxt)
        return self._cap(done)

    @staticmethod
    def _bool_value(t):
        return const(t) if isinstance(t, bool) else ("bool", t)

    def attr(self, fn: Fn, p: Path, base, attr: str, node, out: list) -> list[tuple[Path, object]]:
        if base == NONE:
            out.append((p, Died("none", fn.file, node.lineno, f"`{ast.unparse(node)}`: an attribute of None")))
            return []
        if isinstance(base, Sym):
            base = self.materialise(p, base)
        if not isinstance(base, Ref) or base.oid not in p.heap:
            return [(p, self.fresh())]
        o = p.heap[base.oid]
        v = o.get(attr)
        if v is not None:
            return [(p, v)]
        if o.cls is not None and o.made and not self.maybe_stored(o, attr):
            known = self.class_value(o.cls, attr)
            v = self.fresh() if known == "absent" else known  # an attribute error is not taken to end a path
        else:
            v = self.fresh()
        p.heap[base.oid] = o.set(attr, v)
        return [(p, v)]

    def _getattr(self, fn: Fn, p: Path, e: ast.Call, out: list):
        attr = e.args[1].value
        got = []
        for q, base in self.expr(fn, p, e.args[0], out):
            if isinstance(base, Ref) and base.oid in q.heap and self.absent(q.heap[base.oid], attr) \
                    and len(e.args) == 3:
                got += self.expr(fn, q, e.args[2], out)
                continue
            if base == NONE and len(e.args) == 3:
                got += self.expr(fn, q, e.args[2], out)
                continue
            got += self.attr(fn, q, base, attr, e, out) if base != NONE else [(q, self.fresh())]
        return got

    def maybe_stored(self, o: Obj, attr: str) -> bool:
        """Whether code the interpretation does not run may have stored ``attr`` on ``o``: named in its ``maybe``
        (``*``: anything; ``ON_BATCH``: what ``stored_on_batch`` says, asked for the fields read, but those named
        ``!field``)."""
        return attr in o.maybe or "*" in o.maybe or (ON_BATCH in o.maybe and f"!{attr}" not in o.maybe
                                                    and self.stored_on_batch(attr))

    def absent(self, o: Obj, attr: str) -> bool:
        """Whether the object ``o`` has no attribute ``attr``: not stored on it, its class (known) and the classes on
        its MRO have none, and nothing in the tree stores that name through another receiver."""
        if o.get(attr) is not None or o.cls is None or self.maybe_stored(o, attr):
            return False
        return self.class_value(o.cls, attr) == "absent" and (o.made or not self.stored_outside(attr))

    def class_value(self, ci: ClassInfo, attr: str):
        """A field's value on a freshly made instance of ``ci`` where nothing stored it: the class attribute or
        dataclass default; ``"absent"`` when no class on the MRO has it nor defines ``__getattr__``; else unknown."""
        memo = self.tree.__dict__.setdefault("_absint_class_values", {})
        key = (ci.key, attr)
        if key not in memo:
            memo[key] = self._class_entry(ci, attr)
        got = memo[key]
        return "absent" if got == "absent" else self.fresh() if got is None else self._literal(got)

    def _class_entry(self, ci: ClassInfo, attr: str):
        """``class_value``'s answer, read once per class and name: the expression of the class attribute or default,
        None for unknown, or ``"absent"``."""
        mro = self.tree.mro(ci)
        if any("__getattr__" in c.methods or "__getattribute__" in c.methods for c in mro):
            return None
        for c in mro:
            for s in c.node.body:
                if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name) and s.target.id == attr:
                    return s.value
                if isinstance(s, ast.Assign) and any(isinstance(t, ast.Name) and t.id == attr for t in s.targets):
                    return s.value
            if attr in c.methods:
                return None
            for m in c.methods.values():
                for n in self.tree.walk(m):
                    if isinstance(n, ast.Attribute) and n.attr == attr and isinstance(n.ctx, ast.Store):
                        return None
        if not self._bases_all_known(ci):
            return None
        return "absent"

    def _bases_all_known(self, ci: ClassInfo) -> bool:
        """Whether every base of every class on ``ci``'s MRO is a class of the tree (``object`` and ``Generic``
        aside): a base outside the tree may have any attribute."""
        for c in self.tree.mro(ci):
            known = {b.name for b in self.tree.bases(c)}
            for b in c.node.bases:
                name = ast.unparse(b).split("[")[0].rsplit(".", 1)[-1]
                if name not in known and name not in ("object", "Generic", "ABC", "Protocol"):
                    return False
        return True

    def _literal(self, e):
        if isinstance(e, ast.Constant):
            return NONE if e.value is None else const(e.value)
        return self.fresh()

    def test(self, fn: Fn, p: Path, e, out: list) -> list[tuple[Path, object]]:
        """Every (path, truth) of the test ``e``: True, False or a z3 term."""
        decided, _ = decided_test(self.modes, self.mode, e, bool(self.in_capture)) if self.mode else (None, False)
        if decided is not None:
            return [(p, decided)]
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
            return [(q, self._not(t)) for q, t in self.test(fn, p, e.operand, out)]
        if isinstance(e, ast.BoolOp):
            and_ = isinstance(e.op, ast.And)
            got = [(p, True if and_ else False)]
            for v in e.values:
                nxt = []
                for q, acc in got:
                    if acc is (not and_):  # short-circuited: False for and, True for or
                        nxt.append((q, acc))
                        continue
                    for r, t in self.test(fn, q, v, out):
                        nxt.append((r, self._combine(acc, t, and_)))
                got = self._cap(nxt, self._merge_truths)
            return got
        if isinstance(e, ast.Compare) and len(e.ops) == 1:
            op, right = e.ops[0], e.comparators[0]
            if isinstance(op, (ast.Is, ast.IsNot)) and isinstance(right, ast.Constant) and right.value is None:
                got = []
                for q, v in self.expr(fn, p, e.left, out):
                    t = self.is_none(q, v)
                    t = self._fresh_atom() if t is None else t
                    got.append((q, t if isinstance(op, ast.Is) else self._not(t)))
                return got
            got = []
            for q, a in self.expr(fn, p, e.left, out):
                for r, b in self.expr(fn, q, right, out):
                    got.append((r, self._compare(op, a, b)))
            return self._cap(got, self._merge_truths)
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == "isinstance" and len(e.args) == 2:
            got = []
            for q, v in self.expr(fn, p, e.args[0], out):
                got.append((q, self._isinstance(fn, q, v, e.args[1])))
            return got
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == "hasattr" and len(e.args) == 2:
            return [(q, self._fresh_atom()) for q, _ in self.expr(fn, p, e.args[0], out)]
        if isinstance(e, ast.Compare):  # a chained comparison: its operands run, its truth unknown
            got = [p]
            for part in [e.left, *e.comparators]:
                got = self._capped([r for q in got for r, _ in self.expr(fn, q, part, out)])
            return [(q, self._fresh_atom()) for q in got]
        got = []
        for q, v in self.expr(fn, p, e, out):
            if isinstance(v, tuple) and v[0] == "bool":
                got.append((q, v[1]))
                continue
            t = self.truth(q, v)
            got.append((q, self._fresh_atom() if t is None else t))
        return got

    def _fresh_atom(self):
        return self.atom(f"t#{next(self.budget.syms)}")

    @staticmethod
    def _not(t):
        return (not t) if isinstance(t, bool) else z3.Not(t)

    @staticmethod
    def _combine(acc, t, and_: bool):
        if isinstance(acc, bool) and isinstance(t, bool):
            return (acc and t) if and_ else (acc or t)
        if isinstance(t, bool):
            return (acc if t else False) if and_ else (True if t else acc)
        if isinstance(acc, bool):
            return (t if acc else False) if and_ else (True if acc else t)
        return z3.And(acc, t) if and_ else z3.Or(acc, t)

    def _compare(self, op, a, b):
        if isinstance(a, tuple) and isinstance(b, tuple) and a[0] == b[0] == "const":
            try:
                return bool({ast.Eq: lambda x, y: x == y, ast.NotEq: lambda x, y: x != y,
                             ast.Lt: lambda x, y: x < y, ast.LtE: lambda x, y: x <= y, ast.Gt: lambda x, y: x > y,
                             ast.GtE: lambda x, y: x >= y}[type(op)](a[1], b[1]))
            except (KeyError, TypeError):
                return self._fresh_atom()
        if isinstance(op, (ast.Eq, ast.NotEq, ast.Is, ast.IsNot)):
            eq = None
            if a == b and isinstance(a, (Sym, Ref)):
                eq = True
            elif isinstance(a, Sym) and isinstance(b, tuple) and b[0] == "const":
                eq = self.atom(f"eq#{a.n}#{b[1]!r}")
            elif isinstance(b, Sym) and isinstance(a, tuple) and a[0] == "const":
                eq = self.atom(f"eq#{b.n}#{a[1]!r}")
            if eq is not None:
                return eq if isinstance(op, (ast.Eq, ast.Is)) else self._not(eq)
        return self._fresh_atom()

    def _isinstance(self, fn: Fn, p: Path, v, kinds):
        names = kinds.elts if isinstance(kinds, ast.Tuple) else [kinds]
        classes = [self.resolve_name(fn, k.id) if isinstance(k, ast.Name) else self.tree.resolve_expr(fn.module, k)
                   for k in names]
        if v == NONE or (isinstance(v, tuple) and v[0] == "const"):
            return False if all(isinstance(c, ClassInfo) for c in classes) else self._fresh_atom()
        if isinstance(v, Ref):
            o = p.heap.get(v.oid)
            if o is not None and o.cls is not None and all(isinstance(c, ClassInfo) for c in classes):
                return any(c in self.tree.mro(o.cls) for c in classes)
        n = v.n if isinstance(v, Sym) else self._sym_of(v)
        if n is not None and all(isinstance(c, ClassInfo) for c in classes):
            return z3.Or([self.atom(f"isa#{n}#{c.key}") for c in classes])
        return self._fresh_atom()

    def _split(self, p: Path, t) -> list[tuple[Path, bool]]:
        """``p`` on the true side of ``t`` and a copy on the false side (``p`` is not used after by the caller)."""
        if isinstance(t, bool):
            return [(p, t)]
        a, b = p, p.copy()
        a.cond += (t,)
        b.cond += (z3.Not(t),)
        return [(a, True), (b, False)]

    # -- calls ------------------------------------------------------------------------------------------------------

    def call(self, fn: Fn, p: Path, c: ast.Call, out: list) -> list[tuple[Path, object]]:
        if isinstance(c.func, ast.Name) and c.func.id == "dict" and "dict" not in p.local and not c.args \
                and not c.keywords and self.tree.resolve(fn.module, "dict") is None:
            return [(p, self.new_box(p, f"{fn.file}:{c.lineno}"))]
        if isinstance(c.func, ast.Name) and isinstance(p.local.get(c.func.id), tuple) \
                and p.local[c.func.id][0] == "closure" and self.depth < MAX_DEPTH and self.budget.steps < MAX_STEPS:
            return self._closure(fn, p, p.local[c.func.id][1], c, out)
        self._closures_escape(fn, p, c)
        held = self._platform_call(fn, p, c)
        if held is not None:
            return [(q, const(held)) for q, _ in self._args(fn, p, c, out)]  # its arguments still evaluated
        target = self.callee(fn, p, c)
        if target is None or self.depth >= MAX_DEPTH or self.budget.steps >= MAX_STEPS:
            return self._opaque(fn, p, c, out, target)
        kind, callee, receiver = target
        got: list[tuple[Path, object]] = []
        for q, args in self._args(fn, p, c, out):
            if kind == "construct":
                got += self.construct(fn, q, callee, c, args, out)
            else:
                got += self.invoke(callee, q, receiver, args, out)
        return got

    def _opaque(self, fn: Fn, p: Path, c: ast.Call, out: list, target=None) -> list[tuple[Path, object]]:
        """A call the interpretation does not follow (``target``: what it binds to, past a bound): its receiver and
        arguments evaluated as Python does before the call (a method of None, or an attribute of None among them,
        ends the path), then what it may change forgotten (``_call_effects``); its result unknown."""
        got = []
        bases = self.expr(fn, p, c.func.value, out) if isinstance(c.func, ast.Attribute) else [(p, None)]
        for q, base in bases:
            if base == NONE:
                out.append((q, Died("none", fn.file, c.lineno, f"`{ast.unparse(c.func)}`: a method of None")))
                continue
            found = target or self._summarisable(fn, q, c, base)
            for r, _ in self._args(fn, q, c, out):
                self._call_effects(fn, r, c, found)
                got.append((r, self.fresh()))
        return self._cap_values(got)

    def _call_effects(self, fn: Fn, p: Path, c: ast.Call, target=False) -> None:
        """What the call ``c``, not run, may change, forgotten on ``p``: where it binds to a function of the tree
        (``callee``, or one whose decorators only bind or cache it: ``_summarisable``), what its summary says
        (``effects``: the names it may store, the objects it hands on, what it is handed for the parameters it hands
        to code not followed); else every object it is handed. ``target``: what the call binds to, where the caller
        found it already (None: nothing)."""
        if target is False:
            target = self.callee(fn, p, c) or self._summarisable(fn, p, c)
        eff = self.effects(target[1], self._class_of(p, target[2])) if target is not None \
            and target[0] != "construct" else None
        if eff is None:
            self._forget_passed(fn, p, _handed(c))
            return
        if eff.escapes:
            self._forget_passed(fn, p, _passed_for(c, target[1], eff.escapes, target[0] == "method"))
        self._forget_attrs(p, eff.stores)
        for a in eff.handed:
            self._forget_values(p, [v for o in list(p.heap.values()) for k, v in o.fields if k == a])

    def _summarisable(self, fn: Fn, p: Path, c: ast.Call, base=None):
        """("method", Fn, receiver) or ("function", Fn, None) for a call of a function or method of the tree whose
        decorators only make it a class or static method or cache its result (``_BINDING``), called by name or on
        a class or an object of a known class (``base``: the receiver's value, where evaluated already); None
        otherwise."""
        f, hit, receiver = c.func, None, None
        if isinstance(f, ast.Name) and f.id not in p.local:
            r = self.resolve_name(fn, f.id)
            if r is not None and not isinstance(r, (ClassInfo, tuple)) and hasattr(r, "node"):
                hit = (None, r.node, r.module)
        elif isinstance(f, ast.Attribute) and isinstance(f.value, (ast.Name, ast.Attribute)):
            owner = None
            if isinstance(f.value, ast.Name) and f.value.id not in p.local:
                k = self.resolve_name(fn, f.value.id)
                owner = k if isinstance(k, ClassInfo) else None
            if owner is None and isinstance(base, Ref):
                owner, receiver = self._class_of(p, base), base
            found = self.tree.lookup(owner, f.attr) if owner is not None else None
            if found is not None:
                hit = (found[0], found[1], found[0].module)
        if hit is None or not all(_decorator_name(d) in _BINDING for d in hit[1].decorator_list):
            return None
        owner, node, module = hit
        if owner is None:
            return "function", Fn(node, module, None), None
        static = any(_decorator_name(d) == "staticmethod" for d in node.decorator_list)
        return ("function" if static else "method"), Fn(node, module, owner), receiver

    def _platform_call(self, fn: Fn, p: Path, c: ast.Call) -> bool | None:
        """Whether the call ``c`` of one of the tree's platform predicates holds on the interpreter's platform
        (``is_P()`` holds on P alone: each tests its own PyTorch build, ``sglang_source.platform``; a cached one,
        ``@lru_cache``, too), None for any other call or where no platform is set."""
        if self.platform is None:
            return None
        f = c.func
        if isinstance(f, ast.Name) and f.id not in p.local:
            r = self.resolve_name(fn, f.id)
        elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id not in p.local:
            r = self.tree.resolve_expr(fn.module, f)
        else:
            return None
        if r is None or isinstance(r, (ClassInfo, tuple)) or not hasattr(r, "node"):
            return None
        if self._predicates is None:
            from fencecheck.sglang_source.platform import predicates

            self._predicates = {(pr.file, pr.line): plat for plat, pr in predicates(self.tree).items()}
        plat = self._predicates.get((r.module.rel, r.node.lineno))
        return None if plat is None else plat == self.platform

    def resolve_name(self, fn: Fn, name: str):
        """What the free name ``name`` means in ``fn``: the one thing a ``from X import name`` inside ``fn`` binds it
        to (a function-local import), else what it means at the top of ``fn``'s module (``Tree.resolve``)."""
        imports = self.__dict__.setdefault("_imports", {})
        if fn.node not in imports:
            imports[fn.node] = self.tree.local_imports(fn.module, fn.node.body)
        got = imports[fn.node].get(name)
        if got and all(g is got[0] for g in got):
            return got[0]
        if got:
            return None  # branches import different things under the name
        return self.tree.resolve(fn.module, name)

    def callee(self, fn: Fn, p: Path, c: ast.Call):
        """("method", Fn, receiver) of a call of a method of a known class, ("function", Fn, None) of a module
        function of the tree, ("construct", ClassInfo, None) of a class of the tree; None when not known."""
        f = c.func
        if isinstance(f, ast.Attribute):
            if isinstance(f.value, ast.Call) and isinstance(f.value.func, ast.Name) and f.value.func.id == "super" \
                    and fn.owner is not None and "self" in p.local:
                me = p.local["self"]
                o = p.heap.get(me.oid) if isinstance(me, Ref) else None
                if o is not None and o.cls is not None:
                    hit = self.tree.lookup(o.cls, f.attr, after=fn.owner)
                    if hit is not None:
                        return "method", Fn(hit[1], hit[0].module, hit[0]), me
                return None
            if isinstance(f.value, (ast.Name, ast.Attribute)):
                vals = self.expr(fn, p.copy(), f.value, [])
                if len(vals) == 1:
                    v = vals[0][1]
                    if isinstance(v, Ref):
                        o = vals[0][0].heap.get(v.oid)
                        if o is not None and o.cls is not None:
                            hit = self.tree.lookup(o.cls, f.attr)
                            if hit is not None and not _decorated(hit[1]):
                                return "method", Fn(hit[1], hit[0].module, hit[0]), v
            r = self.tree.resolve_expr(fn.module, f) if isinstance(f.value, ast.Name) and \
                f.value.id not in p.local else None
            if isinstance(r, ClassInfo):
                return "construct", r, None
            if r is not None and hasattr(r, "node") and not _decorated(r.node):
                return "function", Fn(r.node, r.module, None), None
            return None
        if isinstance(f, ast.Name) and f.id not in p.local:
            r = self.resolve_name(fn, f.id)
            if isinstance(r, ClassInfo):
                return "construct", r, None
            if r is not None and hasattr(r, "node") and not _decorated(r.node):
                return "function", Fn(r.node, r.module, None), None
        return None

    def _closure(self, fn: Fn, p: Path, node, c: ast.Call, out: list) -> list[tuple[Path, object]]:
        """A nested function called where it was defined: run with the enclosing frame's locals (its stores to
        them are its own)."""
        got = []
        for q, args in self._args(fn, p, c, out):
            local = self.bind(Fn(node, fn.module, fn.owner), q, None, args)
            if local is None:
                self._forget_stores(fn, q, node.body)
                got.append((q, self.fresh()))
                continue
            inner = Path(q.heap, {**q.local, **local}, q.cond)
            self.depth += 1
            try:
                res = self.block(Fn(node, fn.module, fn.owner), node.body, [inner])
            finally:
                self.depth -= 1
            out += res.died
            for r in res.live + res.returned:
                got.append((Path(r.heap, dict(q.local), r.cond), r.ret if r in res.returned else NONE))
        return self._cap_values(got)

    def _closures_escape(self, fn: Fn, p: Path, c: ast.Call) -> None:
        """A nested function or lambda handed to a call: it may run there, so what its body stores is forgotten."""
        for a in [*c.args, *(k.value for k in c.keywords)]:
            if isinstance(a, ast.Name) and isinstance(p.local.get(a.id), tuple) and p.local[a.id][0] == "closure":
                self._forget_stores(fn, p, p.local[a.id][1].body)
            elif isinstance(a, ast.Lambda):
                self._forget_stores(fn, p, [ast.Expr(value=a.body)])

    def _args(self, fn: Fn, p: Path, c: ast.Call, out: list):
        """Every (path, (positional values, keyword values)) of the call's arguments, evaluated in order. A ``*x``
        argument ends the positional values known (the parameters after them are unknown); a ``**x`` argument binds
        no name (the parameters it may fill are unknown where no other argument names them)."""
        got = [(p, ([], {}))]
        spread = False
        for a in c.args:
            nxt = []
            for q, (pos, kw) in got:
                if isinstance(a, ast.Starred) or spread:
                    for r, _ in self.expr(fn, q, a.value if isinstance(a, ast.Starred) else a, out):
                        nxt.append((r, (pos, {**kw, "*": True})))
                    continue
                for r, v in self.expr(fn, q, a, out):
                    nxt.append((r, (pos + [v], kw)))
            spread = spread or isinstance(a, ast.Starred)
            got = self._cap(nxt, self._merge_args)
        for k in c.keywords:
            nxt = []
            for q, (pos, kw) in got:
                for r, v in self.expr(fn, q, k.value, out):
                    nxt.append((r, (pos, {**kw, "**": True} if k.arg is None else {**kw, k.arg: v})))
            got = self._cap(nxt, self._merge_args)
        return got

    def bind(self, callee: Fn, p: Path, receiver, args, defaults_apply: bool = True) -> dict | None:
        """The callee's locals bound to ``args`` (positional, keywords), its defaults (unless ``defaults_apply`` is
        false: a caller the interpretation does not see may pass anything) and unknowns; None when the arguments do
        not bind."""
        a = callee.node.args
        params = [x.arg for x in a.posonlyargs + a.args]
        local: dict = {}
        if args is None:
            return None
        pos, kw = args
        if "*" in kw or "**" in kw:  # a spread argument may fill any parameter not named: no default applies
            defaults_apply = False
            kw = {k: v for k, v in kw.items() if k not in ("*", "**")}
        if receiver is not None and params:
            local[params[0]] = receiver
            params = params[1:]
        defaults = dict(zip(params[len(params) - len(a.defaults):], a.defaults))
        for name, v in zip(params, pos):
            local[name] = v
        for x, d in zip(a.kwonlyargs, a.kw_defaults):
            if d is not None:
                defaults[x.arg] = d
        for name in params[len(pos):] + [x.arg for x in a.kwonlyargs]:
            if name in kw:
                local[name] = kw[name]
            elif defaults_apply and name in defaults and isinstance(defaults[name], ast.Constant):
                local[name] = self._literal(defaults[name])
            else:
                local[name] = self.fresh()
        if a.vararg:
            local[a.vararg.arg] = self.fresh()
        if a.kwarg:
            local[a.kwarg.arg] = self.fresh()
        return local

    def invoke(self, callee: Fn, p: Path, receiver, args, out: list) -> list[tuple[Path, object]]:
        """``callee`` run on ``p`` with ``args``: every (path, returned value) back in the caller's frame."""
        local = self.bind(callee, p, receiver, args)
        if local is None:
            self._forget_values(p, [receiver])
            return [(p, self.fresh())]
        caller = p.local
        q = Path(p.heap, local, p.cond)
        self.depth += 1
        try:
            res = self.block(callee, callee.node.body, [q])
        finally:
            self.depth -= 1
        got = []
        for r in res.live + res.returned:
            v = r.ret if r in res.returned else NONE
            got.append((Path(r.heap, dict(caller), r.cond), v))
        out += res.died
        return self._cap_values(got)

    def construct(self, fn: Fn, p: Path, ci: ClassInfo, c: ast.Call, args, out: list):
        ref = self.new_obj(p, ci, True, f"{fn.file}:{c.lineno}")
        if args is None:
            return [(p, ref)]
        if _is_dataclass(ci):
            o = p.heap[ref.oid]
            names = _dataclass_fields(self.tree, ci)
            pos, kw = args
            for name, v in zip(names, pos):
                o = o.set(name, v)
            for name, v in kw.items():
                o = o.set(name, v)
            p.heap[ref.oid] = o
            return [(p, ref)]
        hit = self.tree.lookup(ci, "__init__")
        if hit is None:
            return [(p, ref)]
        got = self.invoke(Fn(hit[1], hit[0].module, hit[0]), p, ref, args, out)
        return [(q, ref) for q, _ in got]

    def _cap_values(self, got):
        if len(got) <= MAX_PATHS:
            return got
        merged = self.join([q for q, _ in got])
        return [(merged, self.fresh())]

    def _cap(self, pairs: list, merge=None) -> list:
        """``pairs`` of (path, what was computed on it); more than ``MAX_PATHS`` of them are one joined path with what
        was computed merged (``merge``, by default ``_merge_value``). Every point where one path becomes several
        inside an expression (its operands, a call's arguments, a dict's entries) is capped so."""
        if len(pairs) <= MAX_PATHS:
            return pairs
        return [(self.join([q for q, _ in pairs]), (merge or self._merge_value)([x for _, x in pairs]))]

    def _merge_value(self, vals):
        """One value for ``vals`` computed on joined paths: the value where all agree, else unknown."""
        return vals[0] if all(v == vals[0] for v in vals) else self.fresh()

    def _merge_truths(self, truths):
        return truths[0] if all(t is truths[0] or (not isinstance(t, bool) and not isinstance(truths[0], bool)
                                                   and t.eq(truths[0])) for t in truths) else self._fresh_atom()

    def _merge_args(self, args):
        """(positional, keyword) values of one call's arguments on joined paths, each merged as ``_merge_value``;
        positions or names not on every path unknown."""
        n = min(len(pos) for pos, _ in args)
        pos = [self._merge_value([p[i] for p, _ in args]) for i in range(n)]
        kw = {}
        for name in dict.fromkeys(k for _, w in args for k in w):
            vals = [w.get(name) for _, w in args]
            kw[name] = True if name in ("*", "**") else \
                self._merge_value(vals) if None not in vals else self.fresh()
        if any(len(p) != n for p, _ in args):
            kw["*"] = True  # a position past the shortest may be filled on some path: the rest are not known
        return pos, kw

    def _merge_entries(self, entries):
        """(literal-key entries, other values, opened) of one dict literal on joined paths."""
        keys = list(dict.fromkeys(k for fields, _, _ in entries for k, _ in fields))
        fields = []
        for k in keys:
            vals = [dict(f).get(k) for f, _, _ in entries]
            fields.append((k, self._merge_value(vals) if None not in vals else self.fresh()))
        alts = list(dict.fromkeys(v for _, a, _ in entries for v in a))
        return fields, alts, any(o for _, _, o in entries)

    def _reachable_objs(self, p: Path, values) -> set[str]:
        seen, todo = set(), [v.oid for v in values if isinstance(v, Ref)]
        while todo:
            oid = todo.pop()
            if oid in seen or oid not in p.heap:
                continue
            seen.add(oid)
            o = p.heap[oid]
            values = [v for _, v in o.fields] + list(o.alts)
            values += [m for v in values if isinstance(v, tuple) and v[0] == "alts" for m in v[1]]
            todo += [v.oid for v in values if isinstance(v, Ref)]
        return seen

    def _forget_values(self, p: Path, values) -> None:
        for oid in self._reachable_objs(p, values):
            o = p.heap[oid]
            p.heap[oid] = o.with_(fields=(), made=False, maybe=frozenset({"*"}), opened=True)

    def _forget_passed(self, fn: Fn, p: Path, exprs) -> None:
        """What an opaque call handed: every object a reference to which the expressions give (an argument itself,
        or an element of a list or tuple argument), and what it reaches, forgets its fields."""
        values, todo = [], list(exprs)
        while todo:
            e = todo.pop()
            if isinstance(e, (ast.List, ast.Tuple, ast.Set)):
                todo += e.elts
            elif isinstance(e, ast.Starred):
                todo.append(e.value)
            elif isinstance(e, (ast.Name, ast.Attribute)):
                q = p.copy()
                values += [v for _, v in self.expr(fn, q, e, []) if isinstance(v, Ref) and v.oid in p.heap]
        self._forget_values(p, values)

    # -- statements -------------------------------------------------------------------------------------------------

    def block(self, fn: Fn, stmts, paths: list[Path]) -> Outcome:
        res = Outcome(live=list(paths))
        for s in stmts:
            if not res.live:
                break
            step = Outcome()
            for p in res.live:
                one = self.stmt(fn, s, p)
                step.live += one.live
                step.returned += one.returned
                step.died += one.died
            res = Outcome(self._capped(step.live), res.returned + step.returned, res.died + step.died)
        return res

    def _capped(self, paths: list[Path]) -> list[Path]:
        return paths if len(paths) <= MAX_PATHS else [self.join(paths)]

    def join(self, paths: list[Path]) -> Path:
        """One path standing for ``paths``: fields and locals that differ forgotten, conditions dropped."""
        first = paths[0]
        h0 = first.heap
        differ: set = set()  # objects not the same on every path (copied heaps share the objects not changed)
        for q in paths[1:]:
            if q.heap is not h0:
                differ.update([k for k, v in q.heap.items() if h0.get(k) is not v])
                differ.update(h0.keys() - q.heap.keys())
        heap = {}
        for oid in sorted(set().union(*(q.heap for q in paths))):  # sorted: symbols numbered alike on every run
            if oid not in differ:
                heap[oid] = h0[oid]
                continue
            objs = [o for o in (q.heap.get(oid) for q in paths) if o is not None]
            if all(o is objs[0] for o in objs):  # the same object on every path that has it: nothing to join
                heap[oid] = objs[0]
                continue
            if len({o.cls.key if o.cls else None for o in objs}) > 1:
                heap[oid] = Obj(None, (), False)
                continue
            keys = sorted(set().union(*(o.field_map() for o in objs)))
            fields = {}
            for k in keys:
                vals = [o.get(k) for o in objs]
                if None in vals and objs[0].cls is not None and all(o.made for o in objs) \
                        and not any(self.maybe_stored(o, k) for o in objs):
                    default = self.class_value(objs[0].cls, k)  # a made object's missing field: what a read gives
                    if default != "absent" and not isinstance(default, Sym):
                        vals = [default if v is None else v for v in vals]
                if None in vals:
                    fields[k] = self.fresh()
                elif all(v == vals[0] for v in vals):
                    fields[k] = vals[0]
                else:
                    fields[k] = alternatives(vals) or self.fresh()
            heap[oid] = Obj(objs[0].cls, tuple(sorted(fields.items(), key=lambda kv: kv[0])),
                            all(o.made for o in objs), objs[0].at, frozenset().union(*(o.maybe for o in objs)),
                            all(o.box for o in objs), tuple(dict.fromkeys(v for o in objs for v in o.alts)),
                            any(o.opened for o in objs))
        local = {}
        for k in sorted(set().union(*(q.local for q in paths))):
            vals = [q.local.get(k) for q in paths]
            local[k] = vals[0] if all(v == vals[0] for v in vals) and vals[0] is not None else \
                (None not in vals and alternatives(vals)) or self.fresh()
        return Path(heap, local, (), first.ret)

    def stmt(self, fn: Fn, s, p: Path) -> Outcome:
        self.budget.steps += 1
        self.budget.total += 1 + len(p.heap) // WORK_OBJECTS
        out: list = []
        res = Outcome()
        if isinstance(s, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            value = s.value
            targets = s.targets if isinstance(s, ast.Assign) else [s.target]
            if value is None:
                return Outcome(live=[p])
            for q, v in self.expr(fn, p, value, out):
                if isinstance(s, ast.AugAssign):
                    v = self.fresh()
                if all(self.store(fn, q, t, v, out) for t in targets):
                    res.live.append(q)
        elif isinstance(s, ast.Expr):
            for q, _ in self.expr(fn, p, s.value, out):
                res.live.append(q)
        elif isinstance(s, ast.Return):
            for q, v in (self.expr(fn, p, s.value, out) if s.value is not None else [(p, NONE)]):
                q.ret = v
                res.returned.append(q)
        elif isinstance(s, ast.Raise):
            out.append((p, Died("raise", fn.file, s.lineno, f"`{ast.unparse(s)}`")))
        elif isinstance(s, ast.Assert):
            for q, t in self.test(fn, p, s.test, out):
                for r, tv in self._split(q, t):
                    if tv:
                        res.live.append(r)
                    else:
                        out.append((r, Died("assert", fn.file, s.lineno, f"`assert {ast.unparse(s.test)}` fails")))
        elif isinstance(s, ast.If):
            for q, t in self.test(fn, p, s.test, out):
                for r, tv in self._split(q, t):
                    sub = self.block(fn, s.body if tv else s.orelse, [r])
                    res.live += sub.live
                    res.returned += sub.returned
                    res.died += sub.died
        elif isinstance(s, (ast.For, ast.AsyncFor, ast.While)):
            self._forget_stores(fn, p, s.body + s.orelse)
            if isinstance(s, (ast.For, ast.AsyncFor)):
                self.store(fn, p, s.target, self.fresh())
            sub = self.block(fn, s.body + s.orelse, [p.copy()])
            self._forget_stores(fn, p, s.body + s.orelse)
            res.live += [p] + sub.live  # zero or more iterations; a return in the body returns
            res.returned += sub.returned
            res.died += [d for d in sub.died if d[1].kind != "false"]
        elif isinstance(s, (ast.With, ast.AsyncWith)):
            entered = [p]
            for item in s.items:
                nxt = []
                for q in entered:
                    for r, v in self.expr(fn, q, item.context_expr, out):
                        self._forget_values(r, [v])  # its __enter__/__exit__ may change it
                        if item.optional_vars is None or self.store(fn, r, item.optional_vars, self.fresh(), out):
                            nxt.append(r)
                entered = nxt
            sub = self.block(fn, s.body, entered)
            res.live += sub.live
            res.returned += sub.returned
            res.died += sub.died
            if any(_swallows(self, fn, i.context_expr) for i in s.items):
                res.live += [d[0] for d in sub.died]  # a context manager that may swallow the raise
        elif isinstance(s, (ast.Try, getattr(ast, "TryStar", ast.Try))):
            before = p.copy()
            sub = self.block(fn, s.body, [p])
            after_else = self.block(fn, s.orelse, sub.live) if s.orelse else sub
            res.live += after_else.live
            res.returned += sub.returned + (after_else.returned if s.orelse else [])
            for h in s.handlers:
                q = before.copy()
                self._forget_stores(fn, q, s.body)
                if h.name:
                    q.local[h.name] = self.fresh()
                hs = self.block(fn, h.body, [q])
                res.live += hs.live
                res.returned += hs.returned
                res.died += hs.died
            if not s.handlers:
                res.died += sub.died
            if s.finalbody:
                fin = self.block(fn, s.finalbody, res.live)
                res.live = fin.live
                res.returned += fin.returned
                res.died += fin.died
        elif isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
            p.local[s.name] = ("closure", s)
            res.live.append(p)
        elif isinstance(s, ast.ClassDef):
            p.local[s.name] = self.fresh()
            res.live.append(p)
        elif isinstance(s, (ast.Delete,)):
            for t in s.targets:
                self.store(fn, p, t, self.fresh())
            res.live.append(p)
        elif isinstance(s, (ast.Pass, ast.Import, ast.ImportFrom, ast.Global, ast.Nonlocal, ast.Break,
                            ast.Continue)):
            res.live.append(p)
        elif isinstance(s, ast.Match):
            self._forget_stores(fn, p, [s])
            for case in s.cases:
                sub = self.block(fn, case.body, [p.copy()])
                res.live += sub.live
                res.returned += sub.returned
                res.died += sub.died
        else:
            self._forget_stores(fn, p, [s])
            res.live.append(p)
        res.died += out
        return res

    def store(self, fn: Fn, p: Path, t, v, out: list | None = None) -> bool:
        """``v`` stored at ``t`` on ``p``; False where the store raises (an attribute of None: the path ends)."""
        if isinstance(t, ast.Name):
            p.local[t.id] = v
        elif isinstance(t, (ast.Tuple, ast.List)):
            return all(self.store(fn, p, x.value if isinstance(x, ast.Starred) else x, self.fresh(), out)
                       for x in t.elts)
        elif isinstance(t, ast.Attribute) and isinstance(t.value, (ast.Name, ast.Attribute)):
            died: list = []
            bases = self.expr(fn, p, t.value, died)
            if not bases:
                if out is not None:
                    out += died
                return False
            base = bases[0][1]
            if isinstance(base, Sym):
                base = self.materialise(p, base)
            if base == NONE:
                if out is not None:
                    out.append((p, Died("none", fn.file, t.lineno, f"`{ast.unparse(t)}`: a store into None")))
                return False
            if isinstance(base, Ref) and base.oid in p.heap:
                p.heap[base.oid] = p.heap[base.oid].set(t.attr, v)
            else:
                self._forget_attr(p, t.attr)
        elif isinstance(t, ast.Attribute):  # a store the interpretation cannot place: any object's field may change
            self._forget_attr(p, t.attr)
        elif isinstance(t, ast.Subscript):
            died: list = []
            bases = self.expr(fn, p, t.value, died) if isinstance(t.value, (ast.Name, ast.Attribute)) else []
            box = self._box_of(p, bases[0][1]) if len(bases) == 1 else None
            if box is None:
                self._forget_passed(fn, p, [t.value])
                return True
            oid = bases[0][1].oid
            if isinstance(t.slice, ast.Constant):
                p.heap[oid] = box.set(f"[{t.slice.value!r}]", v)
            else:
                self.expr(fn, p, t.slice, died)
                p.heap[oid] = replace(box, alts=tuple(dict.fromkeys(box.alts + (v,))))
        return True

    def _forget_attr(self, p: Path, attr: str) -> None:
        """``attr`` may have been stored on any object: unknown where an object holds it, and on an object the
        interpretation made that does not, no longer its class's default (named in its ``maybe``)."""
        self._forget_attrs(p, (attr,))

    def _forget_attrs(self, p: Path, attrs) -> None:
        """``_forget_attr`` of each of ``attrs``, in one pass over the heap (each object's new symbols numbered in
        the names' sorted order)."""
        names = frozenset(attrs)
        if not names:
            return
        for oid, o in list(p.heap.items()):
            m = o.field_map()
            held = sorted(a for a in names if m.get(a) is not None)
            new = names.difference(o.maybe, held) if o.made else None
            if not held and not new:
                continue
            if held:
                d = dict(m)
                for a in held:
                    d[a] = self.fresh()
                o = o.with_(fields=tuple(sorted(d.items(), key=lambda kv: kv[0])))
            if new:
                o = o.with_(maybe=o.maybe | new)
            p.heap[oid] = o

    def _forget_stores(self, fn: Fn, p: Path, stmts) -> None:
        """Forget what ``stmts`` may store: locals, fields (on every object, by name), and what calls in them may
        change: a call of a function or method the interpretation can bind, what its summary says it may store
        (``effects``); any other call, the objects it is handed."""
        for s in stmts:
            for n in ast.walk(s):
                if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
                    p.local[n.id] = self.fresh()
                elif isinstance(n, ast.Attribute) and isinstance(n.ctx, (ast.Store, ast.Del)):
                    self._forget_attr(p, n.attr)
                elif isinstance(n, ast.Call):
                    self._call_effects(fn, p, n)

    def _class_of(self, p: Path, v) -> ClassInfo | None:
        o = p.heap.get(v.oid) if isinstance(v, Ref) else None
        return o.cls if o is not None else None

    def effects(self, callee: Fn, cls: ClassInfo | None = None, _open: frozenset = frozenset()) -> "Effects | None":
        """What running ``callee`` may change, read from its body once (a summary): the attribute names it stores
        (through any receiver) and those whose objects it hands to code it does not bind (a call it cannot
        resolve given ``param.attr``, or the receiver ``param.attr`` of one), the same of the functions and
        methods it calls that bind by name (``self.m(...)`` on ``cls``, the receiver's class, or else the callee's
        own; a function of the tree), and the parameters it hands themselves (or through a local holding one) to such
        code (``escapes``: the caller forgets the objects it passes for them). None past ``MAX_DEPTH`` nested
        summaries or for a function already being summarised (a cycle). A summary is kept for reuse only where no
        summary below it was cut so: what is kept does not depend on which function was summarised first."""
        memo = self.__dict__.setdefault("_effects", {})
        cls = cls if cls is not None and callee.owner is not None else callee.owner
        key = (callee.node, cls.key if cls is not None else None)
        if key in memo:
            return memo[key]
        if key in _open or len(_open) >= MAX_DEPTH:
            self._effects_cut = True
            return None
        outer_cut, self._effects_cut = self._effects_cut, False
        node = callee.node
        params = {a.arg for a in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]}
        params |= {a.arg for a in (node.args.vararg, node.args.kwarg) if a is not None}
        aliases = {t.id: n.value for n in ast.walk(node) if isinstance(n, ast.Assign)
                   for t in n.targets if isinstance(t, ast.Name)}
        stores, handed, escapes = set(), set(), set()

        def root(e, seen=()):
            """(the parameter an expression's attribute chain starts from, the first attribute) or None."""
            first = None
            while isinstance(e, ast.Attribute):
                first, e = e.attr, e.value
            if isinstance(e, ast.Name):
                if e.id in params:
                    return e.id, first
                if e.id in aliases and e.id not in seen and first is None:
                    return root(aliases[e.id], (*seen, e.id))
            return None

        for n in ast.walk(node):
            if isinstance(n, ast.Attribute) and isinstance(n.ctx, (ast.Store, ast.Del)):
                stores.add(n.attr)
            elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "setattr":
                if len(n.args) >= 2 and isinstance(n.args[1], ast.Constant) and isinstance(n.args[1].value, str):
                    stores.add(n.args[1].value)
                else:
                    escapes |= params
            elif isinstance(n, ast.Call):
                inner = self._bound_by_name(callee, cls, n)
                eff = self.effects(inner, cls, _open | {key}) if inner is not None else None
                exprs = _handed(n)
                if eff is not None:
                    stores |= eff.stores
                    handed |= eff.handed
                    exprs = _passed_for(n, inner, eff.escapes, inner.owner is not None)
                for e in exprs:
                    r = root(e.value if isinstance(e, ast.Starred) else e)
                    if r is not None:
                        if r[1] is None:
                            escapes.add(r[0])
                        else:
                            handed.add(r[1])
        out = Effects(frozenset(stores), frozenset(handed), frozenset(escapes))
        if not self._effects_cut:
            memo[key] = out
        self._effects_cut = outer_cut or self._effects_cut
        return out

    def _bound_by_name(self, fn: Fn, cls: ClassInfo | None, c: ast.Call) -> "Fn | None":
        """The function a call in ``fn`` binds to by name alone: ``self.m(...)`` in a method (``m`` on ``cls``'s
        MRO, the receiver's class), ``f(...)`` a function of the tree; None otherwise (or a decorated one)."""
        f = c.func
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "self" \
                and fn.owner is not None and cls is not None:
            hit = self.tree.lookup(cls, f.attr)
            if hit is not None and not _decorated(hit[1]):
                return Fn(hit[1], hit[0].module, hit[0])
            return None
        if isinstance(f, ast.Name):
            r = self.resolve_name(fn, f.id)
            if r is not None and not isinstance(r, (ClassInfo, tuple)) and hasattr(r, "node") \
                    and not _decorated(r.node):
                return Fn(r.node, r.module, None)
        return None

    # -- reachability -----------------------------------------------------------------------------------------------

    def feasible(self, p: Path) -> bool | None:
        """Whether ``p``'s conditions can hold (None: the solver did not say within ``RLIMIT``)."""
        if not p.cond:
            return True
        s = z3.SimpleSolver()
        s.set("random_seed", 0)
        s.set("rlimit", RLIMIT)
        s.add(*p.cond, *self._axioms(p.cond))
        got = s.check()
        return True if got == z3.sat else False if got == z3.unsat else None

    def _axioms(self, cond) -> list:
        """What the predicates of one symbol imply of each other: None is falsy and an instance of no class; a
        constant other than None is not None."""
        names = set()
        for c in cond:
            names |= {str(d) for d in _atoms(c)}
        out = []
        for key in sorted(names):
            kind, _, rest = key.partition("#")
            n = rest.split("#", 1)[0]
            none = f"none#{n}"
            if kind == "truthy" and none in names:
                out.append(z3.Implies(self.atom(none), z3.Not(self.atom(key))))
            elif kind in ("isa", "eq") and none in names and not key.endswith("#None"):
                out.append(z3.Implies(self.atom(key), z3.Not(self.atom(none))))
        return out


def _passed_for(c: ast.Call, callee: Fn, params, method: bool) -> list:
    """The expressions the call ``c`` of ``callee`` passes for the parameters ``params`` (its receiver for the first
    parameter of a method); every expression it hands where a ``*``/``**`` argument or a variadic parameter hides
    the binding."""
    a = callee.node.args
    if any(isinstance(x, ast.Starred) for x in c.args) or any(k.arg is None for k in c.keywords) \
            or (a.vararg is not None and a.vararg.arg in params) or (a.kwarg is not None and a.kwarg.arg in params):
        return _handed(c)
    names = [x.arg for x in [*a.posonlyargs, *a.args]]
    given = list(c.args)
    if method:
        given.insert(0, c.func.value if isinstance(c.func, ast.Attribute) else None)
    out = [e for name, e in zip(names, given) if name in params and e is not None]
    out += [k.value for k in c.keywords if k.arg in params]
    return out


def _handed(c: ast.Call) -> list:
    """What a call hands its callee: its arguments and its receiver."""
    return [*c.args, *(k.value for k in c.keywords)] + ([c.func.value] if isinstance(c.func, ast.Attribute) else [])


def _stores_name(n, attr: str) -> bool:
    """Whether the node ``n`` stores ``attr`` through an attribute or names it to ``setattr``; for ``[]attr``, an
    entry into the container the field ``attr`` holds."""
    if attr.startswith("[]"):
        return isinstance(n, ast.Subscript) and isinstance(n.ctx, (ast.Store, ast.Del)) \
            and isinstance(n.value, ast.Attribute) and n.value.attr == attr[2:]
    if isinstance(n, ast.Attribute):
        return n.attr == attr and isinstance(n.ctx, (ast.Store, ast.Del))
    return isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "setattr" and len(n.args) >= 2 \
        and isinstance(n.args[1], ast.Constant) and n.args[1].value == attr


def _atoms(t) -> set:
    out, todo = set(), [t]
    while todo:
        x = todo.pop()
        if z3.is_const(x) and x.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            out.add(x)
        else:
            todo += list(x.children())
    return out


#: Decorators that only make a function a class or static method, or cache its result: a call of it runs its body
#: (or returns a result the body computed before).
_BINDING = frozenset({"classmethod", "staticmethod", "lru_cache", "cache"})


def _decorator_name(d) -> str:
    """A decorator's last name: ``lru_cache`` for ``@functools.lru_cache(maxsize=1)``."""
    d = d.func if isinstance(d, ast.Call) else d
    return d.attr if isinstance(d, ast.Attribute) else d.id if isinstance(d, ast.Name) else ""


def _decorated(node) -> bool:
    """Whether a definition is decorated with anything but ``staticmethod``/``classmethod``-free plain names the
    interpretation can follow (a decorator may replace the function)."""
    return any(not (isinstance(d, ast.Name) and d.id in ("staticmethod",)) for d in node.decorator_list)


def _is_dataclass(ci: ClassInfo) -> bool:
    return any("dataclass" in ast.unparse(d) for d in ci.node.decorator_list)


def _dataclass_fields(tree: Tree, ci: ClassInfo) -> list[str]:
    names: list[str] = []
    for c in reversed(tree.mro(ci)):
        for s in c.node.body:
            if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name) and s.target.id not in names \
                    and "ClassVar" not in ast.unparse(s.annotation):
                names.append(s.target.id)
    return names


def _swallows(interp: Interpreter, fn: Fn, e) -> bool:
    """Whether a context manager may swallow an exception: ``suppress``, or one made by a class of the tree whose
    ``__exit__`` may return something true. A context manager from outside the tree (``torch``'s) is taken not to:
    an assumption the analyses built on this state."""
    if "suppress" in ast.unparse(e):
        return True
    target = interp.tree.resolve_expr(fn.module, e.func) if isinstance(e, ast.Call) else None
    if isinstance(target, ClassInfo):
        hit = interp.tree.lookup(target, "__exit__")
        if hit is None:
            return False
        return any(isinstance(n, ast.Return) and n.value is not None and not (
            isinstance(n.value, ast.Constant) and not n.value.value) for n in ast.walk(hit[1]))
    return False


#: Calls that make a new object of what they are given.
_COPIES = {"copy.copy", "copy.deepcopy", "copy", "deepcopy", "dataclasses.replace", "replace"}


def _backend_classes(tree: Tree) -> set:
    """The keys of the tree's attention backend classes (``AttentionBackend`` on their MRO)."""
    memo = tree.__dict__.get("_absint_backends")
    if memo is None:
        roots = [c for c in tree.classes_named("AttentionBackend")]
        memo = {c.key for c in tree.subclasses(roots)} if roots else set()
        tree.__dict__["_absint_backends"] = memo
    return memo


def _fresh_constructor(tree: Tree, mod, call: ast.Call, fn: ast.FunctionDef) -> bool:
    """Whether ``call`` makes a new object: a class of the tree, ``cls(...)`` in a method, a copy, or a classmethod
    of a class of the tree whose every ``return`` is ``cls(...)``."""
    f = call.func
    text = ast.unparse(f)
    if text in _COPIES:
        return True
    if isinstance(f, ast.Name) and f.id == "cls" and fn.args.args and fn.args.args[0].arg == "cls":
        return True
    r = tree.resolve_expr(mod, f) if isinstance(f, (ast.Name, ast.Attribute)) else None
    if isinstance(r, ClassInfo):
        return True
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
        owner = tree.resolve(mod, f.value.id)
        m = owner.methods.get(f.attr) if isinstance(owner, ClassInfo) else None
        if m is not None and any(ast.unparse(d) == "classmethod" for d in m.decorator_list):
            rets = [n for n in ast.walk(m) if isinstance(n, ast.Return)]
            return bool(rets) and all(isinstance(n.value, ast.Call) and isinstance(n.value.func, ast.Name)
                                      and n.value.func.id == "cls" for n in rets)
    return False


def _fresh_locals(tree: Tree, mod, fn: ast.FunctionDef) -> set[str]:
    """The locals of ``fn`` every assignment of which is a new object (``_fresh_constructor``)."""
    fresh, other = set(), set()
    for n in ast.walk(fn):
        if isinstance(n, ast.Assign):
            for t in n.targets:
                if isinstance(t, ast.Name):
                    ok = isinstance(n.value, ast.Call) and _fresh_constructor(tree, mod, n.value, fn)
                    (fresh if ok else other).add(t.id)
        elif isinstance(n, (ast.AnnAssign, ast.AugAssign, ast.NamedExpr)) and isinstance(n.target, ast.Name):
            other.add(n.target.id)
        elif isinstance(n, (ast.For, ast.AsyncFor, ast.comprehension)):
            other |= {x.id for x in ast.walk(n.target) if isinstance(x, ast.Name)}
        elif isinstance(n, (ast.With, ast.AsyncWith)):
            other |= {x.id for i in n.items if i.optional_vars is not None for x in ast.walk(i.optional_vars)
                      if isinstance(x, ast.Name)}
    other |= {a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs}
    return fresh - other


def _fresh_before(tree: Tree, mod, fn: ast.FunctionDef, stmt: ast.stmt, name: str) -> bool:
    """Whether the local ``name`` holds a new object at ``stmt``: the last statement before it in its block that
    assigns ``name`` (a statement of the block itself, none in between binding it in a nested one) assigns a new
    object (``_fresh_constructor``)."""
    for node in ast.walk(fn):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if not isinstance(block, list) or stmt not in block:
                continue
            for prev in reversed(block[:block.index(stmt)]):
                binds = {x.id for x in ast.walk(prev) if isinstance(x, ast.Name) and isinstance(x.ctx, ast.Store)}
                if name not in binds:
                    continue
                return isinstance(prev, ast.Assign) and len(prev.targets) == 1 \
                    and isinstance(prev.targets[0], ast.Name) and prev.targets[0].id == name \
                    and isinstance(prev.value, ast.Call) and _fresh_constructor(tree, mod, prev.value, fn)
            return False
    return False


def attribute_stores(node):
    """(the statement or ``setattr`` call, the attribute's name or None where ``setattr`` computes it, the receiver)
    of each store of an attribute in ``node``'s subtree (an assignment's target, ``+=`` and the like, ``setattr``)."""
    for n in ast.walk(node):
        if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            for t in n.targets if isinstance(n, ast.Assign) else [n.target]:
                if isinstance(t, ast.Attribute):
                    yield n, t.attr, t.value
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "setattr" and n.args:
            name = n.args[1].value if len(n.args) >= 2 and isinstance(n.args[1], ast.Constant) else None
            yield n, name, n.args[0]


def _stored_on_batch(it: "Interpreter", attr: str) -> bool:
    tree = it.tree
    mods = store_modules(tree).get(attr, frozenset())
    own = {c.key for c in it.own}
    backends = _backend_classes(tree)
    for m in sorted(mods):
        mod = tree.module(m)
        if mod is None:
            return True  # a module the reader cannot parse: anything
        owners = {}  # id(function node) -> its class
        for c in mod.classes.values():
            for f in c.methods.values():
                owners[id(f)] = c
        inside = set()
        funcs = [n for n in ast.walk(mod.tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        for fn in funcs:
            inside |= {id(n) for n in ast.walk(fn)}
        # a store outside every function (module or class level): anything
        for n in ast.walk(mod.tree):
            if id(n) not in inside and _stores_name(n, attr):
                return True
        for fn in funcs:
            c = owners.get(id(fn))
            if c is not None and (c.key in own or c.key in backends):
                continue
            fresh = None
            for n, name, r in attribute_stores(fn):
                if name != attr or isinstance(r, ast.Name) and r.id == "self":
                    continue
                if isinstance(r, ast.Name):
                    if fresh is None:
                        fresh = _fresh_locals(tree, mod, fn)
                    if r.id in fresh or _fresh_before(tree, mod, fn, n, r.id):
                        continue
                return True
    return False
