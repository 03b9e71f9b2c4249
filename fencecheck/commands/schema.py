"""``fencecheck schema``: the JSON Schema of scenario files or backend files."""

from __future__ import annotations

import json
from typing import TextIO

from fencecheck.errors import EXIT_OK


def cmd_schema(args, out: TextIO) -> int:
    from fencecheck.schema import SCHEMAS

    json.dump(SCHEMAS[getattr(args, "kind", "scenario")], out, indent=2)
    out.write("\n")
    return EXIT_OK


def add_parser(sub) -> None:
    """The ``schema`` subcommand's arguments."""
    p = sub.add_parser("schema", help="print the JSON Schema of scenario files or backend files")
    p.add_argument("--kind", choices=["scenario", "backend"], default="scenario",
                   help="which file kind (default: scenario)")
    p.set_defaults(func=cmd_schema)
