"""A backend swapped into a catalog scenario (docs/verify.md): the file's backends under the ``verify:`` prefix in
every phase whose mode the backend covers, the races at their reads, and the stand-in backends (the same locations
at one site, one declaration) that tell whether a scenario races whatever backend reads there."""

from __future__ import annotations

import dataclasses
import itertools
from typing import Callable

from fencecheck.verdict import RaceId
from fencecheck.scenario import BackendSpec, Scenario
from fencecheck.vocab import COVERED_SITES, PUBLISHING_ENDS, ForwardMode, ReadSite, SharedReadEnds, base_shared_read_ends

from .backend_facts import ModeFacts, backends_of, root_name
from .decision import Decision
from .symconfig import SITES

PREFIX = "verify:"


def swap_into(s: Scenario, b, modes: set[ForwardMode]) -> Scenario | None:
    """``s`` with the backend ``b`` (and the children of its file) in every phase whose mode it covers (None if no
    phase is in such a mode). The file's backends are named ``verify:NAME`` in the scenario."""
    bs = backends_of(b)
    ren = {n: f"{PREFIX}{n}" for n in bs}
    added = {
        ren[n]: dataclasses.replace(x, name=ren[n], children=tuple(ren[c] for c in x.children),
                                    delegate={m: ren[c] for m, c in x.delegate.items()})
        for n, x in bs.items()
    }
    root = ren[root_name(b)]
    hit = False
    steps = {}
    for kind, phases in s.algorithm.steps.items():
        new = []
        for p in phases:
            if p.mode in modes:
                hit = True
                p = dataclasses.replace(p, backend=root)
            new.append(p)
        steps[kind] = tuple(new)
    if not hit:
        return None
    return s.replace(name=f"{s.name}+{root_name(b)}", backends={**s.backends, **added},
                     algorithm=dataclasses.replace(s.algorithm, steps=steps), expect=None)


def race_order(r: RaceId):
    """The order races are listed in: step, phase, site, location."""
    return (r.step, r.phase, r.site, r.location)


def ours(s: Scenario, races) -> tuple[RaceId, ...]:
    """The races among ``races`` at a read of the backend under test (sorted, each once)."""
    out = set()
    sites = {site.value for site in ReadSite}
    for r in races:
        if r.site not in sites:
            continue  # a worker's read, not the backend's
        p = next((p for p in s.algorithm.steps[s.step_kind(r.step)] if p.name == r.phase), None)
        if p is not None and p.backend.startswith(PREFIX):
            out.add(r)
    return tuple(sorted(out, key=race_order))


#: The declarations a stand-in backend is tried with: every value, UNKNOWN (publish nothing) included.
STAND_IN_DECLARATIONS = tuple(SharedReadEnds)


def stand_ins(b, facts: list[ModeFacts]) -> list[tuple[tuple[SharedReadEnds, ...], BackendSpec]]:
    """The backends that could replace ``b`` and still read what it reads, one per declaration per mode of ``facts``
    (``STAND_IN_DECLARATIONS`` each): in each mode, every location ``b`` reads there, at every site. A read's race
    depends on the declarations and its own site alone (a read publishes nothing, and no publish point depends on
    where the backend reads), so one run tells, for every site, whether a backend reading only there races; and
    reading at fewer sites never adds a race, so these cover every backend that reads those locations."""
    out = []
    for decls in itertools.product(STAND_IN_DECLARATIONS, repeat=len(facts)):
        reads = {f.mode.value: {site: tuple(sorted({loc for locs in f.sites.values() for loc in locs}))
                                for site in SITES}
                 for f in facts if f.sites}
        out.append((decls, BackendSpec(root_name(b), declares={f.mode: d for f, d in zip(facts, decls)}, reads=reads)))
    return out


def races_whatever_the_backend(s: Scenario, b, facts: list[ModeFacts],
                               decide: Callable[[Scenario], Decision]) -> bool:
    """Catalog scenario ``s`` races at a read of the backend whatever backend runs there: for every declaration per
    mode (of the modes ``s`` runs), some mode's reads race at every site (``stand_ins``), so no backend reading
    those locations is race-free there."""
    modes = {f.mode for f in facts}
    present = {p.mode for kind in set(s.step_kinds) for p in s.algorithm.steps[kind] if p.mode in modes}
    here = [f for f in facts if f.mode in present]
    for _, alt in stand_ins(b, here):
        sc = swap_into(s, alt, present)
        racing = set()  # (mode, site) with a race
        for r in ours(sc, decide(sc).report.races):
            racing |= {(p.mode, r.site) for p in sc.algorithm.steps[sc.step_kind(r.step)] if p.name == r.phase}
        if all(any((f.mode, site.value) not in racing for site in SITES) for f in here):
            return False  # these declarations, each mode read at a site where it does not race: race-free
    return True


def honest_reads(facts: list[ModeFacts]) -> dict[str, dict[ReadSite, tuple[str, ...]]]:
    """What the base-rule honest backend of ``facts`` reads: in each mode, every location the backend reads there, at
    every site the base rule's declaration for the mode covers."""
    out = {}
    for f in facts:
        locs = tuple(sorted({loc for locs in f.sites.values() for loc in locs}))
        if locs:
            covered = COVERED_SITES[base_shared_read_ends(f.mode)]
            out[f.mode.value] = {site: locs for site in SITES if site in covered}
    return out


def honest_stand_in(b, facts: list[ModeFacts]) -> BackendSpec:
    """The base-rule honest backend in ``b``'s place: the base rule's declaration in each mode, reading ``b``'s
    locations at every site it covers (what SGLang's default asks of a backend)."""
    return BackendSpec(root_name(b), declares={f.mode: base_shared_read_ends(f.mode) for f in facts},
                       reads=honest_reads(facts))


def honest_races(s: Scenario, b, facts: list[ModeFacts], decide: Callable[[Scenario], Decision]) -> frozenset:
    """The places (``RaceId.place``) of catalog scenario ``s`` that are its own with ``b`` swapped in: where the
    base-rule honest backend (``honest_stand_in``) races, and where every honest declaration of ``b``'s reads races
    (each mode's declaration any end that publishes and covers the sites ``b`` reads there: UNKNOWN, which declares
    nothing, is no such end; ``stand_ins`` tells each site's race at once). None where the model cannot decide:
    nothing is excused then."""
    from fencecheck.verdict import Verdict

    modes = {f.mode for f in facts}
    present = {p.mode for kind in set(s.step_kinds) for p in s.algorithm.steps[kind] if p.mode in modes}
    here = [f for f in facts if f.mode in present]
    out: set = set()
    base = swap_into(s, honest_stand_in(b, facts), modes)
    if base is not None:
        report = decide(base).report
        if report.verdict is Verdict.UNKNOWN:
            return frozenset()
        out |= {r.place() for r in report.races}
    common = None
    for decls, alt in stand_ins(b, here):
        if not all(d in PUBLISHING_ENDS and set(f.sites) <= COVERED_SITES[d] for f, d in zip(here, decls)):
            continue  # not an honest declaration: one that does not cover what the backend reads, or UNKNOWN
        sc = swap_into(s, alt, present)
        if sc is None:
            continue
        report = decide(sc).report
        if report.verdict is Verdict.UNKNOWN:
            return frozenset(out)
        places = {r.place() for r in ours(sc, report.races)}
        common = places if common is None else common & places
        if not common:
            break
    return frozenset(out | (common or set()))
