"""Pull-request mode's report as text."""

from __future__ import annotations


def render(pr: dict, states, changes, head_ex) -> str:
    """The pull-request report as text (each added finding's verdict from ``head_ex``, the decided extraction)."""
    from fencecheck.decision.status import is_question
    from fencecheck.render.output import decision_lines

    h, b, c = pr["head"], pr["baseline"], pr["counts"]
    where = f"revision {b['revision'][:12]} ({b['given']})" if b["revision"] else b["root"]
    lines = [f"sglang {h['sglang_version'] or '(version unknown)'} at {h['root']} against the baseline "
             f"{b['sglang_version'] or '(version unknown)'} at {where}",
             f"findings: {c['added']} added, {c['fixed']} fixed, {c['unchanged']} unchanged, "
             f"{c['suppressed']} suppressed"]
    shown = set()
    for rc in states["added"]:
        d = head_ex.findings[rc.finding].decision
        if rc.because:  # the read is the baseline's, covered there: not added code
            lines.append(f"  RACES NOW {rc.status.upper()} {rc.kind}: {rc.text()}; races now because {rc.because}")
        else:
            lines.append(f"  ADDED {rc.status.upper()} {rc.kind}: {rc.text()}")
        if rc.finding in shown:
            continue  # its finding's verdict is shown with its first root cause
        shown.add(rc.finding)
        if d is not None:
            lines += decision_lines(d, model=False, fix=not is_question(rc))
    for rc in states["fixed"]:
        lines.append(f"  FIXED {rc.kind}: {rc.text()}")
    for rc, row in zip(states["unchanged"], pr["findings"]["unchanged"]):
        was = row.get("was")
        if was:  # one finding whose code moved or was respelled: what changed, and where it was
            lines.append(f"  MOVED {rc.kind}: {rc.text()}; {', '.join(was['changed']) or 'respelled'} changed "
                         f"(was {was['function']} at {was['file']}:{was['line']}"
                         + (f", {was['declared']} ({was['declared_by']})" if 'declaration' in was['changed'] else "")
                         + ")")
    for rc, row in zip(states["suppressed"], pr["findings"]["suppressed"]):
        sup = row["suppression"]
        lines.append(f"  SUPPRESSED {rc.kind}: {rc.text()}; {sup['reason']} ({sup['file']}:{sup['line']})")
    lost = pr.get("fence", {}).get("lost", [])
    if lost:
        lines.append(f"the fence is weakened: {len(lost)} lost (what the baseline had and HEAD has not)")
        lines += [f"  LOST {x['text']}" for x in lost]
    total = sum(pr["facts"]["unchanged"].values())
    lines.append(f"protocol facts: {len(changes)} changed, {total} unchanged ("
                 + ", ".join(f"{k} {v}" for k, v in pr["facts"]["unchanged"].items()) + ")")
    for x in changes:
        lines.append(f"  {x.category}: {x.text()}")
    notes = pr.get("notes", {}).get("added", [])
    if notes:
        lines.append(f"unresolved notes the change adds: {len(notes)} (what the reader could not read or follow)")
        lines += [f"  {n['file']}" + (f":{n['line']}" if n["line"] else "") + f": {n['what']}" for n in notes]
    for s in pr["suppressions"]["unused"]:
        lines.append(f"unused suppression: {s['file']}:{s['line']}: ignore[{','.join(s['kinds'])}] {s['reason']}")
    return "\n".join(lines) + "\n"
