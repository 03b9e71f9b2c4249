"""``fencecheck catalog``: the built-in catalog of one SGLang version against its expected verdicts."""

from __future__ import annotations

import json
from typing import TextIO

from fencecheck.commands.check import run_steps
from fencecheck.commands.common import steps
from fencecheck.errors import EXIT_OK, EXIT_RACE
from fencecheck.verdict import agreement


def cmd_catalog(args, out: TextIO) -> int:
    from fencecheck.files.catalog import load_catalog
    from fencecheck.reference.sim.races import check_trace

    rows, ok = [], True
    for s in load_catalog(args.catalog_version):
        report = check_trace(run_steps(s, args.steps))
        got = report.verdict.value
        want = s.expect.verdict.value if s.expect else "-"
        agree = s.expect is None or agreement(s.expect, report.verdict, [r.id for r in report.races])[0]
        ok &= agree
        races = "; ".join(k.text() for k in sorted({r.key() for r in report.races})) or "-"
        rows.append((s.name, got, want, "yes" if agree else "NO", races))
    if args.json:
        keys = ("scenario", "verdict", "expected", "agrees", "races")
        json.dump([dict(zip(keys, r)) for r in rows], out, indent=2)
        out.write("\n")
    else:
        widths = [max(len(str(r[i])) for r in rows + [("scenario", "verdict", "expected", "agrees", "")]) for i in range(4)]
        header = ("scenario", "verdict", "expected", "agrees", "races (location@phase/site)")
        for r in [header] + rows:
            out.write("  ".join(str(c).ljust(w) for c, w in zip(r[:4], widths)) + "  " + r[4] + "\n")
        out.write(f"{len(rows)} scenarios, {sum(r[3] == 'yes' for r in rows)} as expected\n")
    return EXIT_OK if ok else EXIT_RACE


def add_parser(sub) -> None:
    """The ``catalog`` subcommand's arguments."""
    from fencecheck.files.catalog import DEFAULT_VERSION as CATALOG_DEFAULT
    from fencecheck.files.catalog import VERSIONS as CATALOG_VERSIONS

    p = sub.add_parser("catalog", help="check the built-in catalog against its expected verdicts")
    p.add_argument("catalog_version", nargs="?", default=CATALOG_DEFAULT, choices=CATALOG_VERSIONS, metavar="VERSION",
                   help=f"the catalog's version ({', '.join(CATALOG_VERSIONS)}; default {CATALOG_DEFAULT})")
    p.add_argument("--steps", type=steps, default=None, help="steps to run (default: each scenario's own)")
    p.add_argument("--json", action="store_true", help="machine-readable rows (scenario, verdict, expected, agrees)")
    p.set_defaults(func=cmd_catalog)
