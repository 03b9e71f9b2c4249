"""The human summary of the protocol facts ``fencecheck sglang`` reads (the document's ``fence``, ``platforms``,
``graph_runners``, ``shared_locations`` and ``configurations``), each with file:line; and the whole summary of a tree
with an older fence or none."""

from __future__ import annotations


def _at(d: dict) -> str:
    return f"{d['file']}:{d['line']}"


def _ends(p: dict) -> str:
    return f" for {'/'.join(p['ends'])}" if p.get("ends") else (f" when {p['condition']}" if p.get("condition") else "")


def runner_lines(r: dict) -> list[str]:
    """A runner's part in the fence, one line per fact."""
    e = r["entry"]
    out = [f"  {r['class']} ({e['class']}.{e['name']} {e['file']}:{e['line']}): {r['policy']}"
           + (f"; its model runner: {r['binds']['expr']} ({r['binds']['side'] or 'unresolved'}, {_at(r['binds'])})"
              if r.get("binds") else "")]
    for x in r["resolves"]:
        out.append(f"    resolves: {x['call']} ({_at(x)})")
    fb = r.get("fallback")
    if fb:
        out.append(f"    without a marker: {fb['rule']}" + (f" ({fb['end']}, {fb['function']} {_at(fb)})" if fb["end"]
                                                           else f" ({fb.get('reason')}, {_at(fb)})"))
    for p in r["publishes"]:
        out.append(f"    publishes {p['event']} {p['at'] or 'at a place the paths disagree on'}{_ends(p)} ({_at(p)})")
    for c in r["clears"]:
        out.append(f"    clears {c['at'] or ''}{' before resolving' if c['before_resolve'] else ''} ({_at(c)})")
    return out


def _barrier_lines(fence: dict) -> list[str]:
    out = []
    for b in fence["barrier"]:
        out.append(f"barrier: {b['class']}._apply_war_barrier ({b['file']}:{b['line']}) waits on `{b['mailbox']}` "
                   f"of the runner `{b['publisher_property']}` names (line {b['publisher_line']}), clears it (line "
                   f"{b['clear_line']}); fine when {b['fine_wait']['condition'] if b['fine_wait'] else '-'} "
                   f"(line {b['fine_wait']['line'] if b['fine_wait'] else '-'}), else coarse (line {b['coarse_line']})")
    g = fence.get("gate")
    if g and g.get("expr"):
        out.append(f"  on when `{g['expr']}` ({g['file']}:{g['line']})"
                   + "".join(f"; {s['name']} defaults to {s['default']} ({s['file']}:{s['line']})"
                             for s in g["settings"] if s["file"]))
        for p in g["platforms"]:
            on = {True: "on", False: "off", None: "unresolved"}[p["default"]]
            forced = ", ".join(f"{w['setting']}={w['value']}" for w in p["on_when"])
            out.append(f"    {p['platform']}: {on}" + (f", on with {forced}" if forced else ""))
    return out


def facts_text(doc: dict) -> list[str]:
    """The protocol facts of a tree with the declaration fence."""
    fence = doc.get("fence")
    if not fence:
        return []
    lines = [f"fence: {fence['kind']}: {fence['why']}"] + _barrier_lines(fence)
    plat = doc.get("platforms") or {}
    mk = plat.get("marker")
    if mk:
        lines.append(f"in-graph marker: {mk['runner']}.{mk['attribute']} ({mk['file']}:{mk['line']})")
    for p in plat.get("platforms", ()):
        r = p["decode_graph_runner"]
        lines.append(f"  {p['platform']}: decode graph runner {r['class'] if r else 'not read'}"
                     + (f" ({r['via']})" if r and r.get("via") else "") + f", {p['runner_policy'] or '-'}; marker "
                     f"{p['marker']} ({p['marker_why']})"
                     + (f"; without it {p['fallback']['rule']}" if p.get("fallback") and p["marker"] != "present" else ""))
    lines.append("graph runners (resolve, fallback, publish, clear):")
    for r in doc.get("graph_runners", ()):
        if r["policy"] != "never" or r.get("fallback"):
            lines += runner_lines(r)
    lines += prefill_lines((doc.get("steps") or {}).get("prefill_gates"))
    loc = doc.get("shared_locations")
    if loc:
        lines.append("scheduler-shared locations (written after the barrier, read by a backend): "
                     + ", ".join(f"{x['name']} ({_at(x['writes'][0])})" for x in loc["locations"]))
        if loc["only_in_code"] or loc["only_in_vocabulary"]:
            lines.append(f"  differ from fencecheck's list: in the code only {', '.join(loc['only_in_code']) or '-'}; "
                         f"in the list only {', '.join(loc['only_in_vocabulary']) or '-'}")
    conf = doc.get("configurations")
    if conf:
        n = len(conf["configurations"])
        classes = ", ".join(f"{c['name']} ({'/'.join(c['platforms'])}"
                            + (f", {' '.join(c['settings'])}" if c["settings"] else "") + ")"
                            for c in conf["platform_classes"])
        lines.append(f"configurations generated from the facts: {n} (rule {conf['rule'] or 'unresolved'}; platform "
                     f"classes {classes}; loops " + ", ".join(sorted({x['kind'] for x in conf['loops'] if x['kind']}))
                     + ")")
        for note in conf["notes"]:
            lines.append(f"  {note}")
    cmp = doc.get("catalog_comparison")
    if cmp:
        lines.append(f"the release catalog ({cmp['catalog']}) against them: {len(cmp['covered'])} entries covered, "
                     f"{len(cmp['not_generated'])} not generated"
                     + (f" ({', '.join(x['entry'] for x in cmp['not_generated'])})" if cmp["not_generated"] else "")
                     + f", {len(cmp['not_in_catalog'])} generated skeletons in no entry (docs/sglang-reader.md, "
                       "\"The catalog and the generated configurations\")")
    return lines


def prefill_lines(g: dict | None) -> list[str]:
    """The prefill publish's gates: what they decide, then each exit with where it is."""
    if not g:
        return []
    words = {"allowed": "on by default", "with settings": "off by default", "never": "never", "may": "not decided"}
    also = [f"{a['name']} ({words[a['publish']]})" for a in g["algorithms"] if a["publish"] != "never"]
    settings = [f"{s['name']}={s['publish_off_when']} turns it off (default {s['default']})"
                for s in g["settings"] if s["publish_off_when"] is not None]
    parts = [f"no speculation {words[g['no_speculation']]}",
             f"also {', '.join(also)}" if also else "no speculative algorithm",
             f"modes {', '.join(g['modes']) or 'none'}"] + settings
    if g["unless"]:
        parts.append(f"off when {' or '.join(g['unless'])}")
    lines = ["prefill publish (the gates, steps.prefill_gates): " + "; ".join(parts)]
    for gate in g["gates"]:
        for x in gate["exits"]:
            lines.append(f"  {gate['function']} ({gate['role']}) keeps it off when {x['test']} ({x['file']}:{x['line']})")
    for st in g["stagers"]:
        lines.append(f"  stager {st['attribute']}: "
                     + ("set at " + ", ".join(f"{x['file']}:{x['line']}" for x in st["stores"] if x["value"] != "None")
                        if st["set"] else "never set to anything but None"
                        + (f" ({', '.join(_at(x) for x in st['stores'])})" if st["stores"] else "")))
    return lines


def fence_text(doc: dict) -> str:
    """The summary of a tree without the declaration fence: what it has, with file:line."""
    fence = doc["fence"]
    version = doc.get("sglang_version") or "(version unknown)"
    kind = {"read_done_event": "a fence older than the SharedReadEnds declarations",
            "none": "no shared-read fence"}[fence["kind"]]
    lines = [f"sglang {version} at {doc['root']}: {kind}", f"  {fence['why']}"]
    if fence["kind"] == "read_done_event":
        lines += _barrier_lines(fence)
        for c in doc.get("barrier", {}).get("calls", ()):
            lines.append(f"  applied in {c['event_loop']} ({_at(c)})")
        for p in fence["publishers"]:
            lines.append(f"publisher: {p['class']}.{fence['publisher_property']} returns {p['returns']} ({_at(p)})")
        lines.append(f"read-done event `{fence['mailbox']}` written at:")
        for w in fence["mailbox_writes"]:
            lines.append(f"  {w['kind']} {w['target']} = {w['value']} in {w['function']} ({_at(w)})")
        lines.append("runners that publish it:")
        for r in doc.get("graph_runners", ()):
            if r["policy"] != "never":
                lines += runner_lines(r)
        lines.append("nothing is decided: fencecheck's scenarios model the SharedReadEnds declaration fence")
    return "\n".join(lines) + "\n"
