"""``fencecheck replay``: a corpus replayed on a device (the simulator, or CUDA through the gpu package): conformance,
verdicts, witnesses and PyTorch's sanitizer, summarized."""

from __future__ import annotations

from typing import TextIO

from fencecheck.commands.common import PROGRESS_HELP
from fencecheck.commands.progress import progress_bar
from fencecheck.errors import EXIT_OK, EXIT_RACE


def replay_summary(results) -> tuple[list[tuple], list[str]]:
    """Rows per family (and a total) and a line per disagreement."""
    from collections import defaultdict

    groups = defaultdict(list)
    for r in results:
        groups[r.family].append(r)
    rows = []
    for family, rs in list(groups.items()) + [("total", results)]:
        races = [r for r in rs if r.expected.value == "counterexample"]
        csan = [r for r in rs if r.csan != "n/a"]
        rows.append((
            family, len(rs), sum(r.conformance.ok for r in rs), sum(r.verdict is r.expected and r.races_agree for r in rs),
            f"{sum(r.witness_shown is True for r in races)}/{len(races)}",
            f"{sum(r.schedules for r in rs)}/{sum(r.stale_seen for r in rs)}",
            f"{sum(r.csan == 'agree' for r in csan)}/{len(csan)}",
        ))
    problems = []
    for r in results:
        if r.ok:
            continue
        c = r.conformance
        if not c.ok:
            problems.append(f"{r.id}: conformance: matched {c.matched} of {c.total} ops; first divergence: expected "
                            f"{c.expected} got {c.actual} {c.detail}".rstrip())
        if r.verdict is not r.expected or not r.races_agree:
            problems.append(f"{r.id}: verdict {r.verdict.value}, expected {r.expected.value} (races agree: {r.races_agree})")
        if r.witness_shown is False:
            problems.append(f"{r.id}: the witness interleaving did not show the stale read {r.notes}")
        if r.stale_seen:
            problems.append(f"{r.id}: {r.stale_seen} of {r.schedules} adversarial interleavings showed a stale read")
        if r.csan.startswith("DISAGREE"):
            problems.append(f"{r.id}: {r.csan}")
    return rows, problems


def cmd_replay(args, out: TextIO) -> int:
    import json as _json

    from fencecheck.files.corpus_io import read

    _, records = read(args.dir)
    if args.device == "cuda":
        from fencecheck.gpu.replay import run_cuda_replay

        return run_cuda_replay(records, args.seed, out, args.json)
    from fencecheck.reference.replay import replay

    bar = progress_bar(len(records), "replaying", args.progress, args.err)
    results = []
    try:
        for rec in records:
            results.append(replay(rec, seed=args.seed))
            bar.update(1)
    finally:
        bar.close()
    rows, problems = replay_summary(results)
    if args.json:
        _json.dump({"rows": [dict(zip(("family", "traces", "conformant", "verdicts_agree", "races_shown",
                                       "schedules_stale", "csan_agree"), r)) for r in rows],
                    "problems": problems}, out, indent=2)
        out.write("\n")
    else:
        header = ("family", "traces", "conformant", "verdicts agree", "races shown", "safe: schedules/stale",
                  "sanitizer agree")
        widths = [max(len(str(x[i])) for x in rows + [header]) for i in range(len(header))]
        for row in [header] + rows:
            out.write("  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip() + "\n")
        for line in problems:
            out.write(f"DISAGREEMENT {line}\n")
        out.write(f"{len(results)} traces replayed on the simulator, {len(results) - len(set(p.split(':')[0] for p in problems))} "
                  f"in full agreement\n")
    return EXIT_OK if not problems else EXIT_RACE


def add_parser(sub) -> None:
    """The ``replay`` subcommand's arguments."""
    p = sub.add_parser("replay", help="replay a trace corpus: conformance, verdicts, witnesses, second oracle")
    p.add_argument("dir", metavar="DIR", help="the corpus folder (DIR/corpus.jsonl, as written by traces)")
    p.add_argument("--device", choices=["sim", "cuda"], default="sim",
                   help="replay on the CPU simulator (sim, default) or a CUDA device (cuda)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random interleavings")
    p.add_argument("--json", action="store_true", help="machine-readable rows per family and disagreements")
    p.add_argument("--progress", action="store_true", help=PROGRESS_HELP)
    p.set_defaults(func=cmd_replay)
