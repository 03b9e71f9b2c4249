"""Whether a read's path can run at all: the conditions of its declaration row and of its path, as one formula for the
SMT solver (z3), with the literals that name the same value linked.

Each condition is parsed as Python and translated: ``and``/``or``/``not`` as themselves, a comparison and its negation
(``x is None`` / ``x is not None``, ``a < b`` / ``a >= b``, ``==`` / ``!=``, ``in`` / ``not in``) as one atom and its
negation, anything else (an attribute, a call) as an atom. Two occurrences of one atom's text are one variable only
when the text names the same value wherever it occurs (``linkable``): every name in it is ``self`` (the path stays on
the backend's own class: ``same_self``), a builtin, or a class (capitalized), and no attribute of ``self`` in it is
assigned outside ``__init__`` (``volatile``: it may change between two tests). Any other occurrence is a variable of
its own, so it can never make the formula unsatisfiable: only what surely contradicts prunes a path.

The solver's work is bounded by a resource limit (``RLIMIT``), never by time; an answer other than unsat keeps the
path. ``contradiction`` returns the conditions of an unsatisfiable core (z3's, in the order given), so the reason a
path is pruned names exactly the tests that cannot hold together.
"""

from __future__ import annotations

import ast
import builtins

import z3

#: z3's resource limit for one path's formula (a handful of literals needs a few thousand).
RLIMIT = 500_000

_NEG = {ast.Lt: ast.GtE, ast.GtE: ast.Lt, ast.Gt: ast.LtE, ast.LtE: ast.Gt, ast.Eq: ast.NotEq, ast.NotEq: ast.Eq,
        ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn, ast.NotIn: ast.In}
_POSITIVE = (ast.Lt, ast.Gt, ast.Eq, ast.Is, ast.In)
_BUILTINS = frozenset(dir(builtins))


def parsed_all(conditions) -> list[ast.expr] | None:
    """Each condition text's expression, or None when one of them is not Python."""
    try:
        return [ast.parse(text, mode="eval").body for text in conditions]
    except SyntaxError:
        return None


def linkable(text: str, volatile: frozenset[str] = frozenset(), same_self: bool = True) -> bool:
    """Whether every occurrence of the atom ``text`` names one value (see the module's docstring)."""
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError:
        return False
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            if n.id == "self":
                if not same_self:
                    return False
            elif n.id not in _BUILTINS and not n.id[:1].isupper():
                return False
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self" \
                and n.attr in volatile:
            return False
    return True


class _Atoms:
    """One z3 variable per linkable atom text, a fresh one per other occurrence; ``prefix`` keeps the variables of
    two instances apart."""

    def __init__(self, link, prefix: str = ""):
        self.link, self.named, self.fresh, self.prefix = link, {}, 0, prefix

    def __call__(self, text: str):
        if self.link(text):
            if text not in self.named:
                self.named[text] = z3.Bool(f"{self.prefix}a{len(self.named)}")
            return self.named[text]
        self.fresh += 1
        return z3.Bool(f"{self.prefix}f{self.fresh}")

    def formula(self, n):
        if isinstance(n, ast.BoolOp):
            parts = [self.formula(v) for v in n.values]
            return z3.And(*parts) if isinstance(n.op, ast.And) else z3.Or(*parts)
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not):
            return z3.Not(self.formula(n.operand))
        if isinstance(n, ast.Compare) and len(n.ops) == 1 and type(n.ops[0]) in _NEG:
            op = type(n.ops[0])
            if op in _POSITIVE:
                return self(ast.unparse(n))
            return z3.Not(self(ast.unparse(ast.Compare(n.left, [_NEG[op]()], n.comparators))))
        return self(ast.unparse(n))


def _atom_texts(node, out: list) -> None:
    """The texts of the atoms ``_Atoms.formula`` makes of ``node``, one per occurrence."""
    if isinstance(node, ast.BoolOp):
        for v in node.values:
            _atom_texts(v, out)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        _atom_texts(node.operand, out)
    elif isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _NEG:
        op = type(node.ops[0])
        out.append(ast.unparse(node if op in _POSITIVE else ast.Compare(node.left, [_NEG[op]()], node.comparators)))
    else:
        out.append(ast.unparse(node))


def may_contradict(conditions) -> bool:
    """Whether some atom text occurs twice in ``conditions``: a formula in which every variable occurs once is
    satisfiable, so without a repeat there is nothing for the solver to find."""
    texts: list[str] = []
    for text in conditions:
        try:
            _atom_texts(ast.parse(text, mode="eval").body, texts)
        except (SyntaxError, RecursionError):
            continue
    return len(set(texts)) < len(texts)


def contradiction(conditions, volatile: frozenset[str] = frozenset(), same_self: bool = True) -> tuple[str, ...] | None:
    """The conditions of an unsatisfiable core of ``conditions`` (texts), or None when they can hold together (or the
    solver does not say unsat within ``RLIMIT``)."""
    if not may_contradict(conditions):
        return None
    core = unsat_core(conditions, lambda t: linkable(t, volatile, same_self), need_named=True)
    return None if core is None else tuple(text for text, keep in zip(conditions, core) if keep)


def unsat_core(conditions, link, axioms=None, need_named: bool = False) -> list[bool] | None:
    """Which of ``conditions`` (texts) an unsatisfiable core holds, one flag each, or None when they can hold together
    (or the solver does not say unsat within ``RLIMIT``). ``link(text)``: whether the atom ``text`` is one variable
    wherever it occurs (``_Atoms``); ``axioms(named)``: constraints on the linked atoms' variables (text -> variable);
    ``need_named``: None when no atom is linked. A text that does not parse is left out (its flag False)."""
    atoms = _Atoms(link)
    solver = z3.Solver()
    solver.set("rlimit", RLIMIT)
    flags = []
    for i, text in enumerate(conditions):
        try:
            node = ast.parse(text, mode="eval").body
        except SyntaxError:
            flags.append(None)
            continue
        flag = z3.Bool(f"c{i}")
        solver.add(z3.Implies(flag, atoms.formula(node)))
        flags.append(flag)
    if need_named and not atoms.named:
        return None
    for c in (axioms(atoms.named) if axioms is not None else ()):
        solver.add(c)
    if solver.check([f for f in flags if f is not None]) != z3.unsat:
        return None
    core = {str(c) for c in solver.unsat_core()}
    return [f is not None and str(f) in core for f in flags]


def volatile_attributes(tree, ci) -> frozenset[str]:
    """The attributes of ``self`` assigned (``=``, ``+=``, annotated, ``setattr(self, "x", ...)``) in a method of
    ``ci``'s MRO other than ``__init__``."""
    out = set()
    for c in tree.mro(ci):
        for name, fn in c.methods.items():
            if name == "__init__":
                continue
            for n in tree.walk(fn):
                targets = n.targets if isinstance(n, ast.Assign) else \
                    [n.target] if isinstance(n, (ast.AugAssign, ast.AnnAssign)) else []
                for t in targets:
                    for x in ast.walk(t):
                        if isinstance(x, ast.Attribute) and isinstance(x.value, ast.Name) and x.value.id == "self":
                            out.add(x.attr)
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "setattr" and n.args \
                        and isinstance(n.args[0], ast.Name) and n.args[0].id == "self" and len(n.args) > 1 \
                        and isinstance(n.args[1], ast.Constant) and isinstance(n.args[1].value, str):
                    out.add(n.args[1].value)
    return frozenset(out)


def _nnf(node, negate: bool = False):
    """``node`` in negation normal form: ``not`` pushed onto the atoms (De Morgan), double negations dropped, a
    negated comparison turned into its opposite (``is`` / ``is not``, ``<`` / ``>=``, ...)."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return _nnf(node.operand, not negate)
    if isinstance(node, ast.BoolOp):
        op = node.op if not negate else (ast.Or() if isinstance(node.op, ast.And) else ast.And())
        parts = []
        for v in node.values:
            x = _nnf(v, negate)
            parts += x.values if isinstance(x, ast.BoolOp) and type(x.op) is type(op) else [x]
        return ast.BoolOp(op, parts)
    if negate:
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _NEG:
            return ast.Compare(node.left, [_NEG[type(node.ops[0])]()], node.comparators)
        return ast.UnaryOp(ast.Not(), node)
    return node


def conjuncts(node) -> list:
    """The top-level conjuncts of the test ``node`` in negation normal form (``_nnf``; nested ``and`` flattened)."""
    n = _nnf(node)
    return n.values if isinstance(n, ast.BoolOp) and isinstance(n.op, ast.And) else [n]


def simplified(conditions) -> str | None:
    """The conjunction of ``conditions`` (texts) as a person reads it best, with the same meaning: each in negation
    normal form, the top-level conjuncts flattened and each kept once (in their first order), a disjunction dropped
    when one of its disjuncts is itself a conjunct (absorption); None when there are none. A text that does not
    parse is kept as it is."""
    out: list[str] = []
    for text in conditions:
        try:
            parts = [ast.unparse(v) for v in conjuncts(ast.parse(text, mode="eval").body)]
        except (SyntaxError, RecursionError):
            parts = [text]
        for p in parts:
            if p not in out:
                out.append(p)
    kept = set(out)
    out = [p for p in out if not _absorbed(p, kept)]  # (a or b) and a is a
    return " and ".join(f"({p})" if " or " in p else p for p in out) if out else None


def _absorbed(text: str, conjuncts: set[str]) -> bool:
    """Whether the disjunction ``text`` has a disjunct that is itself one of the other ``conjuncts``."""
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError:
        return False
    return isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or) and \
        any(ast.unparse(v) in conjuncts - {text} for v in node.values)
