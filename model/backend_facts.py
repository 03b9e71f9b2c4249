"""A backend file's facts as the model reads them (docs/verify.md): per mode the file's backend speaks for, what it
declares and reads, and which backend of the file each fact comes from (its override, a hybrid's delegate, a
composite's ``max_of``, the base rule); per child backend, the reads outside what its own declaration covers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from fencecheck.scenario import ANY_MODE, BackendSpec
from fencecheck.vocab import COVERED_SITES, PUBLISHING_ENDS, ForwardMode, ReadSite, SharedReadEnds, base_shared_read_ends


@dataclass
class ModeFacts:
    """What the backend declares and reads in one mode, and which backend of its file each fact comes from."""

    mode: ForwardMode
    declared: SharedReadEnds
    sites: dict[ReadSite, tuple[str, ...]]
    declared_by: str = ""
    readers: dict[tuple[ReadSite, str], tuple[str, ...]] = field(default_factory=dict)

    @property
    def honest(self) -> bool:
        return set(self.sites) <= COVERED_SITES[self.declared]

    def outside(self) -> list[tuple[ReadSite, str]]:
        """The (site, location) reads outside what the declaration covers."""
        return [(s, loc) for s, locs in self.sites.items() if s not in COVERED_SITES[self.declared] for loc in locs]

    def earliest(self) -> SharedReadEnds:
        """The earliest declaration whose covered sites hold every site read."""
        for d in PUBLISHING_ENDS:
            if set(self.sites) <= COVERED_SITES[d]:
                return d
        return SharedReadEnds.UNKNOWN


def backends_of(b) -> dict[str, BackendSpec]:
    """A backend file (``scenario_io.BackendFile``) or a lone ``BackendSpec`` as (root name, backends by name)."""
    if isinstance(b, BackendSpec):
        return {b.name: b}
    return {b.root.name: b.root, **b.backends}


def root_name(b) -> str:
    return b.name


def _effective(bs: Mapping[str, BackendSpec], name: str, mode: ForwardMode):
    """(declaration, the backend it comes from, {(site, location): readers}) of backend ``name`` in ``mode``: its
    override, a hybrid's delegate, a composite's ``max_of``, the base rule (model.concrete.declared/read_sites)."""
    b = bs[name]
    if mode in b.delegate:
        decl, by, readers = _effective(bs, b.delegate[mode], mode)
        if mode in b.declares:
            decl, by = b.declares[mode], name
        return decl, by, readers
    readers: dict[tuple[ReadSite, str], tuple[str, ...]] = {}
    own = b.reads.get(mode.value, b.reads.get(ANY_MODE, {}))
    for site, locs in own.items():
        for loc in locs:
            readers[(site, loc)] = (name,)
    child_decls = []
    for child in b.children:
        d, by, r = _effective(bs, child, mode)
        child_decls.append((d, by))
        for key, who in r.items():
            readers[key] = tuple(dict.fromkeys((*readers.get(key, ()), *who)))
    if mode in b.declares:
        return b.declares[mode], name, readers
    if child_decls:
        d = SharedReadEnds.max_of(*(d for d, _ in child_decls))
        return d, next(by for dd, by in child_decls if dd is d), readers
    return base_shared_read_ends(mode), name, readers


def _speaks_for(bs: Mapping[str, BackendSpec]) -> set[ForwardMode]:
    modes: set[ForwardMode] = set()
    for b in bs.values():
        modes |= set(b.declares) | set(b.delegate)
        for key in b.reads:
            modes |= set(ForwardMode) if key == ANY_MODE else {ForwardMode(key)}
    return modes


def mode_facts(b) -> list[ModeFacts]:
    """The modes the backend speaks for (declared, delegated or read anywhere in its file; all modes for '*')."""
    bs = backends_of(b)
    out = []
    for mode in sorted(_speaks_for(bs), key=lambda m: list(ForwardMode).index(m)):
        decl, by, readers = _effective(bs, root_name(b), mode)
        sites: dict[ReadSite, tuple[str, ...]] = {}
        for site in ReadSite:
            locs = tuple(sorted(loc for (s, loc) in readers if s is site))
            if locs:
                sites[site] = locs
        out.append(ModeFacts(mode, decl, sites, by, readers))
    return out


def child_findings(b, facts: list[ModeFacts]) -> list[str]:
    """Per child backend of a composite or hybrid: reads outside what the child's own declaration covers."""
    bs = backends_of(b)
    out = []
    if len(bs) == 1:
        return out
    for f in facts:
        for name in bs:
            if name == root_name(b):
                continue
            d, _, readers = _effective(bs, name, f.mode)
            mine = [(s, loc) for (s, loc), who in readers.items() if name in who and (s, loc) in f.readers
                    and name in f.readers[(s, loc)]]
            bad = [(s, loc) for s, loc in mine if s not in COVERED_SITES[d]]
            if bad:
                where = ", ".join(f"{loc} at {s.value}" for s, loc in bad)
                cover = ("covered by the composite's " + f.declared.name if f.honest and f.declared_by != name
                         else f"outside what {f.mode.value} {f.declared.name} covers too")
                out.append(f"child {name}: {f.mode.value}: reads {where}, outside what its own {d.name} covers "
                           f"({cover})")
    return out
