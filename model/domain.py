"""The two domains the host program runs in: z3 terms (symbolic, for proofs) and Python values (concrete, for
generating traces fast). The program is written once against this interface."""

from __future__ import annotations

import z3


class Symbolic:
    symbolic = True
    If = staticmethod(z3.If)
    Not = staticmethod(z3.Not)
    Implies = staticmethod(z3.Implies)
    BoolVal = staticmethod(z3.BoolVal)
    IntVal = staticmethod(z3.IntVal)

    @staticmethod
    def And(*xs):
        return z3.And(*xs) if xs else z3.BoolVal(True)

    @staticmethod
    def Or(*xs):
        return z3.Or(*xs) if xs else z3.BoolVal(False)


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
    """The domain a value belongs to: Python bools and ints are concrete."""
    return CONCRETE if isinstance(x, (bool, int)) else SYMBOLIC
