"""The model-generated trace corpus: every catalog scenario and every distinct behaviour of small configurations.

Families (2 steps each, one shared location):
- ``one-phase``: declaration x every set of read sites x marker x execution (graph, breakable, eager) x publisher
  (the phase's runner or another) x resolution rule: enumerated exhaustively.
- ``two-phase``: per phase declaration x read site (none, in-graph before or after the marker) x execution (graph,
  eager); runners (one, or one per phase) with the publisher either of them; marker x resolution rule: enumerated
  exhaustively.
- ``three-phase``: a seeded sample over the same knobs as ``two-phase`` (every value of every knob appears).

Configurations are deduplicated by behaviour: two configurations whose traces (streams, events, graphs, operations)
are equal are one record, with the number of configurations it stands for. The order of records, and so the file,
depends only on the inputs.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass
from typing import Iterator

from fencecheck.scenario import AlgorithmSpec, BackendSpec, PhaseSpec, RunnerSpec, Scenario
from fencecheck.vocab import REPRESENTATIVE, Execution, ModeFamily, ReadSite, ResolutionRule, SharedReadEnds, StepKind

from .traces import ModelTrace, generate

MODES = tuple(REPRESENTATIVE[f] for f in (ModeFamily.DECODE, ModeFamily.VERIFY, ModeFamily.OTHER))
LOC = "req_to_token"
SEED = 7
THREE_PHASE_SAMPLE = 300

# A phase: (declaration, sites read, execution).
Phase = tuple[SharedReadEnds, tuple[ReadSite, ...], Execution]


def _scenario(name: str, phases: list[Phase], runners: list[int], publisher: int, marker: bool,
              rule: ResolutionRule) -> Scenario:
    backends, specs = {}, []
    for i, (decl, sites, execution) in enumerate(phases):
        mode = MODES[i]
        backends[f"b{i}"] = BackendSpec(f"b{i}", declares={mode: decl}, reads={mode.value: {s: (LOC,) for s in sites}})
        specs.append(PhaseSpec(f"p{i}", f"r{runners[i]}", mode, f"b{i}", execution=execution))
    n_runners = max(runners + [publisher]) + 1
    return Scenario(
        name=name,
        backends=backends,
        runners={f"r{j}": RunnerSpec(f"r{j}", marker=marker) for j in range(n_runners)},
        algorithm=AlgorithmSpec("corpus", {StepKind.NORMAL: tuple(specs)}, {StepKind.NORMAL: f"r{publisher}"},
                                frozenset({MODES[len(phases) - 1]})),
        resolution=rule,
        steps=2,
    )


def _site_sets() -> list[tuple[ReadSite, ...]]:
    sites = list(ReadSite)
    return [c for k in range(len(sites) + 1) for c in itertools.combinations(sites, k)]


SMALL_SITES = ((), (ReadSite.IN_GRAPH_BEFORE_MARKER,), (ReadSite.IN_GRAPH_AFTER_MARKER,))
SMALL_EXECUTION = (Execution.GRAPH, Execution.EAGER)
RUNNER_CHOICES = {2: [([0, 0], 0), ([0, 1], 0), ([0, 1], 1)], 3: [([0, 0, 0], 0), ([0, 1, 0], 0), ([0, 1, 0], 1),
                                                                  ([0, 0, 1], 1), ([0, 1, 2], 2)]}


def one_phase() -> Iterator[Scenario]:
    """1 phase, runner r0 (publisher r0 or r1): every declaration x set of read sites x execution x marker x rule."""
    n = 0
    for decl, sites, execution, marker, publisher, rule in itertools.product(
        SharedReadEnds, _site_sets(), list(Execution), (True, False), (0, 1), list(ResolutionRule)
    ):
        yield _scenario(f"one-phase-{n:05d}", [(decl, sites, execution)], [0], publisher, marker, rule)
        n += 1


def _small_phases() -> list[Phase]:
    return list(itertools.product(SharedReadEnds, SMALL_SITES, SMALL_EXECUTION))


def two_phase() -> Iterator[Scenario]:
    """2 phases (DECODE, TARGET_VERIFY): declaration x site (none, in-graph before/after marker) x execution (graph,
    eager) per phase; one or two runners, either as publisher; marker x rule."""
    n = 0
    for p0, p1, (runners, publisher), marker, rule in itertools.product(
        _small_phases(), _small_phases(), RUNNER_CHOICES[2], (True, False), list(ResolutionRule)
    ):
        yield _scenario(f"two-phase-{n:05d}", [p0, p1], runners, publisher, marker, rule)
        n += 1


def three_phase(seed: int = SEED, count: int = THREE_PHASE_SAMPLE) -> Iterator[Scenario]:
    """3 phases: a seeded sample over the two-phase knobs; the first samples walk every value of every knob."""
    rng = random.Random(seed)
    knobs = [list(SharedReadEnds), list(SMALL_SITES), list(SMALL_EXECUTION)] * 3 + [
        RUNNER_CHOICES[3], [True, False], list(ResolutionRule)]
    for n in range(count):
        picks = [values[n % len(values)] if n < max(map(len, knobs)) else rng.choice(values) for values in knobs]
        phases = [tuple(picks[i * 3:i * 3 + 3]) for i in range(3)]
        (runners, publisher), marker, rule = picks[9:]
        yield _scenario(f"three-phase-{n:05d}", phases, runners, publisher, marker, rule)


FAMILIES = {"one-phase": one_phase, "two-phase": two_phase, "three-phase": three_phase}


@dataclass
class Record:
    id: str
    family: str
    model: ModelTrace
    configurations: int = 1


def behaviour_key(mt: ModelTrace) -> str:
    """What makes two traces one behaviour: everything but the scenario's name and the trace's metadata."""
    import json

    d = mt.trace.to_dict()
    d.pop("scenario")
    d.pop("meta")
    return json.dumps(d, sort_keys=True, separators=(",", ":"))


def build_corpus(catalog: list[Scenario], progress=None) -> tuple[list[Record], dict[str, dict[str, int]]]:
    """Records (catalog first, then each family's behaviours in enumeration order) and per-family statistics."""
    records: list[Record] = []
    stats: dict[str, dict[str, int]] = {}
    for s in catalog:
        records.append(Record(f"catalog/{s.name}", "catalog", generate(s)))
        if progress:
            progress(1)
    stats["catalog"] = {"configurations": len(catalog), "behaviours": len(catalog)}
    for family, make in FAMILIES.items():
        seen: dict[str, Record] = {}
        configurations = 0
        for s in make():
            configurations += 1
            mt = generate(s)
            key = behaviour_key(mt)
            if key in seen:
                seen[key].configurations += 1
            else:
                seen[key] = Record(f"{family}/{len(seen):05d}", family, mt)
            if progress:
                progress(1)
        records.extend(seen.values())
        stats[family] = {"configurations": configurations, "behaviours": len(seen)}
    return records, stats


def total_configurations(catalog_size: int) -> int:
    return catalog_size + sum(1 for make in FAMILIES.values() for _ in make())
