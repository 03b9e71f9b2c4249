"""The proof obligations as data: what each states, within which bounds, under which assumptions, the verdict we
expect and the rlimit each of its checks gets. ``proofs.runner`` evaluates them and diffs actual against expected;
known-unsafe variants live beside the safe ones with expected verdict ``counterexample``.

Calibration: an obligation's ``rlimit`` is about 4x the most z3 rlimit one of its checks consumes, rounded up to two
significant digits; the comment beside each gives the measured need (``python3 benchmarks/bench_model.py
obligations`` prints need and headroom for every obligation). The need is a function of the query and z3's version,
so it is the same on every machine; after a change to the model, re-measure and re-calibrate.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from fencecheck.verdict import Verdict
from fencecheck.model.assumptions import ASSUMPTIONS
from fencecheck.model.symconfig import Bounds

ALL = tuple(a.name for a in ASSUMPTIONS)


def without(*names: str) -> tuple[str, ...]:
    return tuple(n for n in ALL if n not in names)


@dataclass(frozen=True)
class Obligation:
    """``kind`` says how it is evaluated: ``safety`` (no race within ``bounds`` under ``assumptions`` and
    ``extra``), ``induction`` (the unbounded argument), ``compare`` (pre-#35059 rule against #35059), ``scenario``
    (one catalog configuration, decided by the model's program on its concrete values; no solver query, so
    ``rlimit`` is 0). ``extra`` names restrictions defined in ``proofs.runner``."""

    name: str
    statement: str
    kind: str
    expected: Verdict
    bounds: Bounds = Bounds()
    assumptions: tuple[str, ...] = ALL
    extra: tuple[str, ...] = ()
    rlimit: int = 50_000_000  # z3's deterministic resource limit of each check (see Calibration above)
    scenario: str = ""
    catalog: str = ""  # a scenario obligation's catalog version (fencecheck.catalog.VERSIONS)
    tags: tuple[str, ...] = field(default_factory=tuple)


MAIN_BOUNDS = Bounds(steps=2, phases=4, runners=3)

#: rlimit of needs/<assumption>; the comment gives the measured need.
NEEDS_RLIMIT = {
    "named_runner_is_last_reader": 110_000,  # 26,108
    "sound_fallback": 51_000,  # 12,548
    "honest_declarations": 27_000,  # 6,705
    "plan_stream_joined_before_replay": 51_000,  # 12,642
    "barrier_on": 23_000,  # 5,512
    "barrier_after_run_batch": 32_000,  # 7,903
    "deferred_barrier_results_untouched": 25_000,  # 6,147
    "last_reader_resolves": 63_000,  # 15,563
    "last_reader_publishes": 110_000,  # 25,886
    "worker_reads_cleared": 31_000,  # 7,521
}

OBLIGATIONS: list[Obligation] = [
    Obligation(
        "main_theorem",
        "Declaration-only resolution with the sound (POST_REPLAY) fallback is free of write-after-read races for "
        "every configuration within the bounds (every declaration, every set of read sites it covers, markers "
        "present or absent, graph, breakable and eager execution, any runner of each phase and any publish policy "
        "of each runner, prefill with its switches and gates, plan stream or not, mailbox sharing, per-step phases "
        "and publisher, every event loop and barrier placement) when the named runner is the runner of each step's last "
        "reading phase, under the stated assumptions. One shared location stands for any number: reads and writes "
        "of different locations never order each other, and the scheduler writes every location at the same point.",
        "safety", Verdict.PROVED, MAIN_BOUNDS, rlimit=8_600_000,  # needs 2,130,156
    ),
    Obligation(
        "unbounded_steps",
        "The main theorem for any number of steps: an invariant over what carries between steps (clocks, every "
        "mailbox, every marker's latest record) holds initially, is preserved by any step, and implies that the "
        "step is race-free under the assumptions.",
        "induction", Verdict.PROVED, Bounds(steps=1, phases=4, runners=3), rlimit=9_900_000,  # needs 2,456,500
    ),
    *[
        Obligation(
            f"needs/{a.name}",
            f"The main theorem fails without the assumption '{a.name}' ({a.statement}).",
            "safety", Verdict.COUNTEREXAMPLE, MAIN_BOUNDS, without(a.name), rlimit=NEEDS_RLIMIT[a.name],
            tags=("necessity",),
        )
        for a in ASSUMPTIONS
    ],
    Obligation(
        "rule_as_merged",
        "The rule as merged in #35059 (IN_REPLAY on a runner without its marker falls back to PRE_REPLAY) races "
        "when the backend reads inside the graph.",
        "safety", Verdict.COUNTEREXAMPLE, MAIN_BOUNDS, without("sound_fallback"), ("rule_as_merged",),
        rlimit=54_000,  # needs 13,346
    ),
    Obligation(
        "ngram_without_clear",
        "NGRAM (target verify, then the worker's accept reads shared state) without its mailbox clear races.",
        "safety", Verdict.COUNTEREXAMPLE, Bounds(steps=2, phases=1, runners=1),
        without("worker_reads_cleared"), ("ngram", "no_clear"), rlimit=17_000,  # needs 4,069
    ),
    Obligation(
        "ngram_with_clear",
        "NGRAM with the worker clearing the target runner's mailbox after verify is race-free.",
        "safety", Verdict.PROVED, Bounds(steps=2, phases=1, runners=1),
        without("worker_reads_cleared"), ("ngram", "clear"), rlimit=25_000,  # needs 6,093
    ),
    Obligation(
        "publisher_not_last_reader",
        "Naming a runner other than the runner of the step's last reading phase races.",
        "safety", Verdict.COUNTEREXAMPLE, MAIN_BOUNDS, without("named_runner_is_last_reader"), ("wrong_publisher",),
        rlimit=69_000,  # needs 17,191
    ),
    Obligation(
        "gates_redundant_except_ngram",
        "PR #35059's claim: the removed gates (forward-mode gate, is_last_shared_read_phase) were redundant except "
        "for NGRAM. Decided by searching, over one family (truthful is_last_shared_read_phase, no worker reads after "
        "any phase, the other assumptions of the main theorem except the fallback, which both rules share as "
        "PRE_REPLAY), for a configuration that is race-free under the gated rule and races under the new one.",
        "compare", Verdict.COUNTEREXAMPLE, MAIN_BOUNDS,
        without("sound_fallback", "last_reader_publishes", "worker_reads_cleared"), rlimit=95_000,  # needs 23,649
    ),
    Obligation(
        "gates_redundant_with_markers",
        "The same comparison where every runner has its marker (so the PRE_REPLAY fallback never applies): does "
        "the new rule still race where the gated one did not?",
        "compare", Verdict.COUNTEREXAMPLE, MAIN_BOUNDS,
        without("sound_fallback", "last_reader_publishes", "worker_reads_cleared"), ("all_markers",),
        rlimit=260_000,  # needs 62,736
    ),
]


@functools.lru_cache(maxsize=None)
def catalog_scenarios(version: str) -> dict:
    """The scenarios of a catalog version by name, in file order, read once per process (scenarios are immutable;
    worker processes forked after ``catalog_obligations`` find them read)."""
    from fencecheck.files.catalog import load_catalog

    return {s.name: s for s in load_catalog(version)}


def catalog_obligations() -> list[Obligation]:
    """One obligation per catalog configuration: the PR-era catalog's as ``catalog/<name>``, each release catalog's
    as ``sglang-<version>/<name>`` (each version's scenarios in file order; the catalog folders say which)."""
    from fencecheck.files.catalog import PR_ERA, RELEASES

    out = []
    for version, prefix, what in ((PR_ERA, "catalog", "catalog scenario"),
                                  *((r, r, "release configuration") for r in RELEASES)):
        for s in catalog_scenarios(version).values():
            expected = Verdict.PROVED if s.expect is None else s.expect.verdict
            out.append(Obligation(
                f"{prefix}/{s.name}", f"The model's verdict on {what} {s.name} for {s.steps} steps (the simulator "
                "must agree, race for race).", "scenario", expected, scenario=s.name, catalog=version, rlimit=0,
            ))
    return out


# -- any number of phases and runners (evaluated by proofs.cutoff; the argument is in docs/proofs.md) ------------------

#: Each query of these obligations executes one piece of a step (run_batch's start, one phase, the barrier and the
#: write) from an arbitrary state, with the runners one conjunct of the claim can mention (model.cutoff.RUNNER_CUTOFF).
PIECE_BOUNDS = Bounds(steps=1, phases=1, runners=6)

OBLIGATIONS += [
    Obligation(
        "unbounded_phases",
        "The main theorem for steps of any number of phases: a step's phases split at its last reading phase. An "
        "invariant (the step invariant, and every read of the step so far lies in F's past) holds when run_batch "
        "begins and is kept by any phase; the last reading phase leaves the publisher's mailbox empty or covering "
        "every read of the step; a phase that reads nothing keeps that; from either, the event loop (the barrier, "
        "at once or deferred, or S ordered after F) orders every read before the first write and the next step "
        "starts from the step invariant. What the step's reads contribute to a race is their largest position per "
        "stream, and a breakable graph's later segments are one stretched read (the pieces are build's own run "
        "between run_batch's and each phase's boundaries).",
        "phases", Verdict.PROVED, PIECE_BOUNDS, rlimit=2_900_000,  # needs 702,161 (last)
        tags=("unbounded",),
    ),
    Obligation(
        "unbounded_phases/broken_invariant",
        "The same argument with an invariant that forgets that reads on the plan stream lie in F's past fails: a "
        "deliberately weakened invariant is caught.",
        "phases", Verdict.COUNTEREXAMPLE, PIECE_BOUNDS, extra=("broken_invariant",),
        rlimit=1_400_000,  # needs 329,611
        tags=("unbounded",),
    ),
    Obligation(
        "unbounded_phases/reads_after_publish",
        "The same argument where phases after the last reading phase may read fails: the split at the last "
        "reading phase carries the argument.",
        "phases", Verdict.COUNTEREXAMPLE, PIECE_BOUNDS, extra=("reads_after_publish",),
        rlimit=2_900_000,  # needs 702,161
        tags=("unbounded",),
    ),
    Obligation(
        "unbounded_phases/segment_reads_unstretched",
        "A stretch of a breakable graph's second-segment read that advances F but leaves the read where it was does "
        "not stand for the later segments' reads: the check that one more segment is a stretch fails.",
        "phases", Verdict.COUNTEREXAMPLE, PIECE_BOUNDS, extra=("stretch_broken",),
        rlimit=15_000,  # needs 3,617
        tags=("unbounded",),
    ),
    Obligation(
        "unbounded_phases/summary_forgets_plan_stream",
        "A summary that folds only the reads on F is not the largest position of a phase's reads: the check of the "
        "summary fails.",
        "phases", Verdict.COUNTEREXAMPLE, PIECE_BOUNDS, extra=("fold_forgets_plan",),
        rlimit=220_000,  # needs 53,678
        tags=("unbounded",),
    ),
    Obligation(
        "unbounded_runners",
        "The main theorem for any number of runners: runners are indices compared only for equality. One phase "
        "changes only its runner's marker and its runner's owner's mailbox; with 7 runners the pieces commute with "
        "every renaming of the runners and the assumptions and invariants are symmetric, and a runner that plays no "
        "role a piece reads changes neither the premises nor the claim of any piece query, so a counterexample with 7 "
        "runners is one with 6, with which the piece queries are checked.",
        "phases", Verdict.PROVED, PIECE_BOUNDS, rlimit=14_000_000,  # needs 3,382,700 (symmetry (invariants))
        tags=("unbounded",),
    ),
    Obligation(
        "unbounded_runners/mailbox_by_runner",
        "The frame that forgets mailbox sharing (only the mailbox indexed by the phase's own runner changes) fails.",
        "phases", Verdict.COUNTEREXAMPLE, PIECE_BOUNDS, extra=("mailbox_by_runner",),
        rlimit=43_000,  # needs 10,505
        tags=("unbounded",),
    ),
    Obligation(
        "unbounded_runners/marker_unrenamed",
        "A renaming that moves mailboxes and markers but leaves the runner a mailbox's marker names unrenamed is no "
        "symmetry of the program: the check of symmetry fails.",
        "phases", Verdict.COUNTEREXAMPLE, PIECE_BOUNDS, extra=("marker_unrenamed",),
        rlimit=890_000,  # needs 220,440
        tags=("unbounded",),
    ),
    Obligation(
        "unbounded_runners/marker_role_dropped",
        "A projection that drops a runner whose marker the publisher's owner's mailbox holds changes what the "
        "pieces read: the projection check fails.",
        "phases", Verdict.COUNTEREXAMPLE, PIECE_BOUNDS, extra=("marker_role_dropped",),
        rlimit=1_600_000,  # needs 387,360
        tags=("unbounded",),
    ),
]
