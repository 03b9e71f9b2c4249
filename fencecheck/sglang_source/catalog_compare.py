"""The hand-written release catalog against the configurations generated from the same release's facts
(``contexts``): which catalog entries the generated configurations cover and which they do not, and which generated
configurations no entry covers.

A configuration is compared by its skeleton, not its backends (the catalog's are the release's backends with their
reads, the generated ones take the base rule): per kind of step, the phases as (mode, side, publish policy,
execution, the policy as what it does: an eager phase publishes only by the prefill rule and only in ``EXTEND``),
the publisher's side, the event loop, whether the barrier is on, whether the runners have the marker and
the force-coarse setting. A catalog runner's side is its mailbox (or its name) naming the draft or the target model
runner; a breakable graph counts as a graph; consecutive phases of one runner and mode are one (a loop's count is
known only at run time). A catalog entry is covered when the skeleton of each of its kinds of step is a generated
configuration's."""

from __future__ import annotations

from .contexts import effective


def _side(name: str) -> str:
    return "draft" if "draft" in name else "target"


def _dedupe(phases: list) -> tuple:
    return tuple(p for k, p in enumerate(phases) if k == 0 or p != phases[k - 1])


def catalog_skeletons(scenario) -> list[tuple]:
    """The skeleton of each kind of step of a catalog scenario."""
    out = []
    for kind, phases in scenario.algorithm.steps.items():
        rows, markers = [], set()
        for p in phases:
            r = scenario.runners[p.runner]
            markers.add(r.marker)
            execution = "eager" if p.execution.value == "eager" else "graph"
            rows.append((p.mode.value, _side(r.mailbox or p.runner), effective(p.mode.value, r.publish.value, execution),
                         execution))
        pub = scenario.algorithm.publisher
        side = _side(pub[kind] if isinstance(pub, dict) and kind in pub else
                     (next(iter(pub.values())) if isinstance(pub, dict) else pub))
        out.append((_dedupe(rows), side, scenario.scheduler.loop.value, scenario.scheduler.barrier,
                    all(markers), scenario.scheduler.force_coarse))
    return out


def generated_skeleton(cfg: dict) -> tuple:
    rows = [(p["mode"], p["side"], effective(p["mode"], p["policy"], p["execution"]), p["execution"])
            for p in cfg["phases"]]
    return (_dedupe(rows), cfg["publisher"], cfg["loop"], cfg["barrier"], cfg["marker"], cfg["force_coarse"])


def compare(configurations: list[dict], version: str) -> dict:
    """``{"catalog", "covered": [{entry, configurations}], "not_generated": [{entry, skeletons}],
    "not_in_catalog": [{configuration, skeleton}]}``."""
    from fencecheck.files.catalog import load_catalog

    by_skeleton: dict[tuple, list[str]] = {}
    for c in configurations:
        by_skeleton.setdefault(generated_skeleton(c), []).append(c["name"])
    covered, missing, used = [], [], set()
    for s in load_catalog(version):
        sks = catalog_skeletons(s)
        hits = [by_skeleton.get(k) for k in sks]
        if all(hits):
            names = sorted({n for h in hits for n in h})
            covered.append({"entry": s.name, "configurations": names})
            used.update(sks)
        else:
            missing.append({"entry": s.name, "skeletons": [_text(k) for k, h in zip(sks, hits) if not h]})
    extra = [{"skeleton": _text(k), "configurations": v} for k, v in sorted(by_skeleton.items(), key=lambda x: x[1][0])
             if k not in used]
    return {"catalog": version, "covered": covered, "not_generated": missing, "not_in_catalog": extra}


def _text(k: tuple) -> str:
    phases, side, loop, barrier, marker, coarse = k
    return (" -> ".join(f"{m} {s} {p} {e}" for m, s, p, e in phases) + f"; publisher {side}; loop {loop}; barrier "
            f"{'on' if barrier else 'off'}; marker {'yes' if marker else 'no'}" + ("; force coarse" if coarse else ""))
