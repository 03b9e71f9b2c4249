"""The two domains the host program runs in: z3 terms (symbolic, for proofs) and Python values (concrete, for
generating traces fast). The program is written once against this interface."""

from __future__ import annotations

import z3


class Symbolic:
    """z3 terms of one ``z3.Context`` (``None``: z3's main context). Constants and the empty ``And``/``Or`` are made
    in that context, so a program built over a configuration's variables stays in the configuration's context."""

    symbolic = True
    If = staticmethod(z3.If)
    Not = staticmethod(z3.Not)
    Implies = staticmethod(z3.Implies)

    def __init__(self, ctx: z3.Context | None = None):
        self.ctx = ctx

    def context(self) -> z3.Context:
        return self.ctx if self.ctx is not None else z3.main_ctx()

    def BoolVal(self, v):
        return z3.BoolVal(v, self.context())

    def IntVal(self, v):
        return z3.IntVal(v, self.context())

    def And(self, *xs):
        return z3.And(*xs, self.context())

    def Or(self, *xs):
        return z3.Or(*xs, self.context())


class Concrete:
    symbolic = False

    @staticmethod
    def If(c, a, b):
        return a if c else b

    @staticmethod
    def And(*xs):
        return all(xs)

    @staticmethod
    def Or(*xs):
        return any(xs)

    @staticmethod
    def Not(x):
        return not x

    @staticmethod
    def Implies(a, b):
        return (not a) or b

    @staticmethod
    def BoolVal(v):
        return bool(v)

    @staticmethod
    def IntVal(v):
        return int(v)


SYMBOLIC, CONCRETE = Symbolic(), Concrete()


def domain_of(x):
    """The domain a value belongs to: Python bools and ints are concrete; a z3 term is symbolic in its context."""
    return CONCRETE if isinstance(x, (bool, int)) else Symbolic(x.ctx)
