"""``fencecheck regress``: a regression pytest module that replays selected corpus traces against an adapter."""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

from fencecheck.commands.common import outputs
from fencecheck.errors import EXIT_OK


def cmd_regress(args, out: TextIO) -> int:
    from fencecheck.commands.regress_suite import read_selected, render
    from fencecheck.files.corpus_io import FILENAME
    from fencecheck.files.outputs import write_text_atomic

    only = args.only or ["*"]
    header, records = read_selected(args.dir, only)  # checked now; the module reads the corpus at test time
    module = render(Path(args.dir), Path(args.out), only, len(records), header["content_sha256"])
    write_text_atomic(Path(args.out), module)
    out.write(f"{len(records)} test cases written to {args.out} (they read {Path(args.dir) / FILENAME} at test time)\n")
    return EXIT_OK


def add_parser(sub) -> None:
    """The ``regress`` subcommand's arguments."""
    p = sub.add_parser("regress", help="write a short pytest module that replays the corpus traces through an adapter")
    p.add_argument("dir", metavar="DIR", help="the corpus folder (DIR/corpus.jsonl, as written by traces)")
    p.add_argument("--out", required=True, metavar="FILE.py", help="the pytest module to write")
    p.add_argument("--only", nargs="+", metavar="GLOB",
                   help="only traces whose id matches (e.g. 'catalog/*'); recorded in the module")
    p.set_defaults(func=cmd_regress, **outputs(("out", False), inputs=(("dir", "corpus"),)))
