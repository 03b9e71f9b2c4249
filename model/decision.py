"""The model's decision of one concrete scenario: its host program run on the scenario's values (the program the
symbolic proofs run), the verdict and races, the publish point each phase resolves, and the named assumptions the
scenario fails; each scenario decided once (``Decisions``)."""

from __future__ import annotations

import z3

from fencecheck.verdict import Verdict
from fencecheck.scenario import Scenario

from . import assumptions as A
from .check import ModelReport
from .concrete import assignment, concretize, config, layout
from .program import build


class Decision:
    """The model's decision of one concrete context: the program run in the concrete domain (model/traces.py), the
    same host program the symbolic proofs run, so its verdict and races are the solver's for the pinned scenario."""

    def __init__(self, s: Scenario):
        self._s = s
        cfg, prog = self._run()
        races = tuple(r.race_id(s) for r in prog.reads if prog.race_of(r))
        verdict = Verdict.COUNTEREXAMPLE if races else Verdict.PROVED
        self.report = ModelReport(s.name, layout(s).steps, verdict, races)
        #: (step, phase index) -> the publish point the phase resolves (0: none)
        self.resolved: dict = dict(prog.resolved)
        self._failed: tuple[str, ...] | None = None

    def _run(self):
        cfg = concretize(self._s, layout(self._s))
        return cfg, build(cfg)

    @property
    def failed(self) -> tuple[str, ...]:
        """The named assumptions it fails, except sound_fallback and honest_declarations (found when first asked)."""
        if self._failed is None:
            cfg, prog = self._run()
            self._failed = tuple(n for n in A.BY_NAME if n not in ("sound_fallback", "honest_declarations")
                                 and not _truth(A.BY_NAME[n].build(cfg, prog)))
        return self._failed


def _truth(x) -> bool:
    return x if isinstance(x, bool) else z3.is_true(z3.simplify(x))


class Decisions:
    """Each concrete context decided once: a scenario asked again, or one that pins the model's variables to the same
    values under the same names, gets the first answer (``key``)."""

    def __init__(self):
        self._seen: dict[tuple, Decision] = {}

    def __call__(self, s: Scenario) -> Decision:
        k = key(s)
        if k not in self._seen:
            self._seen[k] = Decision(s)
        return self._seen[k]


def key(s: Scenario) -> tuple:
    """What a ``Decision`` of ``s`` is a function of: the program runs on the values ``concretize`` pins (a backend
    reaches them only as each phase's declaration and read sites for its mode, ``concrete.declared`` and
    ``read_sites``), and the report names the scenario, its steps and its phases. Two proposed changes that differ
    only in a mode a context does not run are one decision there (about 1,400 contexts of a release backend's
    advice are 190 decisions)."""
    lay = layout(s)
    bounds = lay.bounds(s)
    values = tuple(value for _, value in assignment(config(bounds), s, lay))
    kinds = tuple(s.step_kind(n) for n in range(1, lay.steps + 1))
    names = tuple((kind, tuple(p.name for p in s.algorithm.steps[kind])) for kind in dict.fromkeys(kinds))
    return s.name, lay, bounds, kinds, names, values
