"""``fencecheck sglang HEAD --baseline BASE``: pull-request mode's command (the decisions in
``decision/pull_request.py``, the text in ``render/pull_request.py``)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import TextIO

from fencecheck.decision.identity import root_causes
from fencecheck.decision.pull_request import added_notes, compare, decide_added, document, exit_code, read_both
from fencecheck.render.pull_request import render


def run(args, out: TextIO) -> int:
    """``fencecheck sglang HEAD --baseline BASE``: read, compare, decide what is added, report."""
    from pathlib import Path

    from fencecheck.decision.baseline import resolve, scratch
    from fencecheck.decision.fact_changes import diff, facts, losses
    from fencecheck.decision.suppress import apply, scan, warn_unused
    from fencecheck.errors import InputError

    if args.against or args.fingerprints:
        raise InputError("<flags>", "--baseline", "expected no --against or --fingerprints with it (drift is "
                                                  "against a recorded release; --baseline compares two trees)")
    base = resolve(args.baseline, None if args.installed else args.path)
    with scratch(base) as into:
        # the syntax trees live until the command ends: the comparing and deciding part's collections need not
        # scan them
        head_ex, worker_scen, base_doc, base_supp = read_both(args.path, args.installed, base, args.cross_check,
                                                              into, freeze=True)
    read_doc = head_ex.to_json()
    head_supp = apply(scan(Path(head_ex.root)), root_causes(read_doc))
    states = compare(read_doc, base_doc, head_supp, base_supp)
    head_ex, built = decide_added(head_ex, read_doc, states["added"], args.witness, args.cross_check)
    head_doc = head_ex.to_json()  # the root causes' finding indexes are the same: deciding keeps the order
    # the added root causes carry the status their finding settled on once decided (what a one-tree run says): the
    # exit status, the text and the document count that, not the status read before deciding
    states["added"] = [replace(rc, status=head_doc["findings"][rc.finding].get("status") or rc.status)
                       for rc in states["added"]]
    added_workers = {head_doc["findings"][rc.finding].get("scenario") for rc in states["added"]}
    built += [s for s in worker_scen if s.name in added_workers]
    if args.scenarios:
        from fencecheck.files.outputs import write_owned
        from fencecheck.files.scenario_io import dumps, is_scenario_file

        write_owned(args.scenarios, {f"{sc.name}.toml": dumps(sc) for sc in built}, ".toml",
                    is_scenario_file)  # this run's, whole
    changes, unchanged = diff(facts(base_doc), facts(head_doc))
    notes = added_notes(head_ex.notes, base_doc)
    lost = losses(base_doc, head_doc, changes)
    pr = document(head_doc, base_doc, base, states, changes, unchanged, head_supp, notes, lost)
    warn_unused(head_supp, getattr(args, "err", None))
    fmt = args.format
    if fmt == "sarif":
        from fencecheck.render.sarif import (
            item,
            repo_root_of,
            sarif,
            uri_prefix,
        )

        prefix = uri_prefix(Path(head_doc["root"]), repo_root_of(None if args.installed else args.path))
        # HEAD's results from its decided document (the added findings' settled statuses: the levels of a one-tree run)
        items = [item(head_doc, rc, state) for state, key in (("new", "added"), ("unchanged", "unchanged"))
                 for rc in states[key]]
        items += [item(base_doc, rc, "absent") for rc in states["fixed"]]
        base_ids = {rc.id for rc in root_causes(base_doc)}
        items += [item(head_doc, rc, "unchanged" if rc.id in base_ids else "new", head_supp.by_id[rc.id])
                  for rc in states["suppressed"]]
        log = sarif(items, prefix)
        if lost:  # what HEAD lost of the fence has no source line of HEAD's: the run's property bag names it
            log["runs"][0].setdefault("properties", {})["fenceLost"] = [x.to_json() for x in lost]
        json.dump(log, out, indent=1)
        out.write("\n")
    elif fmt == "json":
        json.dump(pr, out, indent=1)
        out.write("\n")
    else:
        out.write(render(pr, states, changes, head_ex))
    return exit_code(states, head_doc, notes, lost)
