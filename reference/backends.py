"""Attention backends as SGLang shapes them: a declaration per forward mode and the reads they really do.

``AttentionBackend.shared_read_ends`` follows docs/sglang-mechanism.md#the-sharedreadends-declaration: an explicit override first, then a hybrid
wrapper's delegate for the mode, then a composite's ``max_of`` over its children, then the base rule.
"""

from __future__ import annotations

from fencecheck.scenario import ANY_MODE, BackendSpec
from fencecheck.vocab import ForwardMode, ReadSite, SharedReadEnds, base_shared_read_ends


class AttentionBackend:
    """One backend of a scenario. ``asked`` counts ``shared_read_ends`` calls (SGLang tests it is asked once)."""

    def __init__(self, spec: BackendSpec, registry: dict[str, "AttentionBackend"]):
        self.spec = spec
        self._registry = registry
        self.asked = 0

    @property
    def name(self) -> str:
        return self.spec.name

    def _declared(self, mode: ForwardMode) -> SharedReadEnds:
        spec = self.spec
        if mode in spec.declares:
            return spec.declares[mode]
        if mode in spec.delegate:
            return self._registry[spec.delegate[mode]]._declared(mode)
        if spec.children:
            return SharedReadEnds.max_of(*(self._registry[c]._declared(mode) for c in spec.children))
        return base_shared_read_ends(mode)

    def shared_read_ends(self, mode: ForwardMode) -> SharedReadEnds:
        self.asked += 1
        return self._declared(mode)

    def read_sites(self, mode: ForwardMode) -> dict[ReadSite, tuple[str, ...]]:
        """Locations read at each site in ``mode``: a delegate's reads, else own plus every child's."""
        spec = self.spec
        if mode in spec.delegate:
            return self._registry[spec.delegate[mode]].read_sites(mode)
        own = spec.reads.get(mode.value, spec.reads.get(ANY_MODE, {}))
        merged: dict[ReadSite, list[str]] = {site: list(locs) for site, locs in own.items()}
        for child in spec.children:
            for site, locs in self._registry[child].read_sites(mode).items():
                bucket = merged.setdefault(site, [])
                bucket.extend(loc for loc in locs if loc not in bucket)
        # Canonical order: locations sorted within a site (reads of one site are adjacent kernels on one stream, so
        # the order does not change happens-before; a fixed order makes traces comparable op by op).
        return {site: tuple(sorted(merged[site])) for site in ReadSite if merged.get(site)}


def build_backends(specs: dict[str, BackendSpec]) -> dict[str, AttentionBackend]:
    registry: dict[str, AttentionBackend] = {}
    for name, spec in specs.items():
        registry[name] = AttentionBackend(spec, registry)
    return registry
