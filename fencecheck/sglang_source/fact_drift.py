"""Drift as facts: the protocol facts of a document as a table keyed without line numbers (so a move is no change),
and the comparison of two such tables. A key names a fact (``declaration/FlashInferAttnBackend``, its declaration per mode,
``runner/DecodeCudaGraphRunner/fallback``, ``algorithm/EAGLE|EAGLEWorkerV2/phases``; a class two modules define is
named with its file); its value is
what the code says (no line numbers either), ``at`` where it says it (file:line, shown, never compared).

A function fingerprint (``drift``) supports facts named by its labels (``declaration of X``, ``reads of X``,
``runner X``, ``worker X``, ``barrier`` ...); ``KEYS_OF_LABEL`` maps each label to the fact keys it supports, so a
changed function whose facts all stayed is "review", not drift.
"""

from __future__ import annotations

import json


def _at(d: dict | None) -> str | None:
    if not d or d.get("file") is None:
        return None
    return f"{d['file']}:{d['line']}"


def _put(out: dict, key: str, value, at: str | None) -> None:
    out[key] = {"value": value, "at": at}


def fact_table(doc: dict) -> dict[str, dict]:
    """key -> {value, at} of every protocol fact of ``doc`` (a ``fencecheck sglang --json`` document)."""
    out: dict[str, dict] = {}
    fence = doc.get("fence") or {}
    _put(out, "fence/kind", fence.get("kind"), None)
    _put(out, "fence/mailbox", fence.get("mailbox"), None)
    _put(out, "fence/publisher_property", fence.get("publisher_property"), None)
    for b in fence.get("barrier", ()):
        _put(out, "fence/barrier", {"clears": b["clear_line"] is not None, "fine_when": (b["fine_wait"] or {}).get(
            "condition"), "coarse": b["coarse_line"] is not None}, _at(b))
    g = fence.get("gate") or {}
    if g:
        _put(out, "fence/gate", g.get("expr"), _at(g))
        for p in g.get("platforms", ()):
            _put(out, f"barrier/{p['platform']}", {"default": p["default"],
                                                   "on_when": [f"{w['setting']}={w['value']}" for w in p["on_when"]],
                                                   "off_when": [f"{w['setting']}={w['value']}" for w in p["off_when"]]},
                 _at(g))
        for s in g.get("settings", ()) + g.get("coarse_settings", ()):
            _put(out, f"setting/{s['name']}", s["default"], _at(s))
    for c in (doc.get("barrier") or {}).get("event_loops", ()):
        _put(out, f"event_loop/{c['class']}.{c['event_loop']}", len(c["barrier_lines"]), _at(c))
    plat = doc.get("platforms") or {}
    mk = plat.get("marker")
    if mk:
        _put(out, "marker", {"runner": mk["runner"], "attribute": mk["attribute"],
                             "none_when": [w.get("test") or f"raises {w.get('raises')}" for s in mk["sites"]
                                           for w in ((s.get("factory") or {}).get("none_when") or ())],
                             "guards": [g2["test"] for s in mk["sites"] for g2 in s["guards"]]}, _at(mk))
    for p in plat.get("platforms", ()):
        r = p["decode_graph_runner"]
        _put(out, f"platform/{p['platform']}", {"decode_graph_runner": r["class"] if r else None,
                                                "policy": p["runner_policy"], "marker": p["marker"]},
             r.get("via") if r else None)
    rnames = _names(doc.get("graph_runners", ()))
    for r in doc.get("graph_runners", ()):
        k = f"runner/{rnames[id(r)]}"
        _put(out, f"{k}/policy", r["policy"], _at(r["entry"]))
        fb = r.get("fallback")
        if fb:
            _put(out, f"{k}/fallback", {"rule": fb["rule"], "end": fb["end"]}, _at(fb))
        _put(out, f"{k}/publishes", sorted({(p["at"] or "?", p["event"], ",".join(p["ends"] or ["any"]))
                                            for p in r["publishes"]}), _at(r["publishes"][0]) if r["publishes"] else None)
        _put(out, f"{k}/clears", sorted({(c["at"] or "?", c["before_resolve"]) for c in r["clears"]}),
             _at(r["clears"][0]) if r["clears"] else None)
        if r.get("binds"):
            _put(out, f"{k}/binds", r["binds"]["side"], _at(r["binds"]))
    names = _names(doc.get("backends", ()))
    for b in doc.get("backends", ()):
        name = names[id(b)]
        decl = {mode: ([{"condition": x.get("condition"), "end": x["end"]} for x in v] if isinstance(v, list) else v)
                for mode, v in b["declares"].items()}
        if b.get("prefill_snapshot"):
            decl["prefill_snapshot"] = b["prefill_snapshot"]["declares"]
        _put(out, f"declaration/{name}", decl, _at(b["declared_in"]))
        reads: dict[str, set] = {}
        for r in b["reads"]:
            reads.setdefault(r["mode"], set()).add(f"{r['location']}@{r['site']}")
        _put(out, f"reads/{name}", {mode: sorted(v) for mode, v in sorted(reads.items())}, _at(b))
    for w in doc.get("workers", ()):
        key = f"worker/{w['class']}"
        prev = out.get(key, {"value": []})["value"]
        _put(out, key, sorted(prev + [[w["publisher"], w["condition"]]], key=lambda x: (x[0], x[1] or "")),
             _at(w["returns_at"]))
    for a in doc.get("algorithms", ()):
        k = f"algorithm/{a['name']}|{a['worker']['class'] if a['worker'] else ''}"
        _put(out, f"{k}/condition", a["condition"], _at(a["dispatch"]))
        _put(out, f"{k}/phases", [[p["runner"], p["mode"], p["side"], (p["publish"] or {}).get("policy"),
                                   (p["publish"] or {}).get("execution")] for p in a["phases"]],
             _at(a["phases"][0]) if a["phases"] else None)
        pre = a.get("prefill_phases") or []
        _put(out, f"{k}/prefill_phases", [[p["runner"], p["mode"], p["side"], (p["publish"] or {}).get("policy"),
                                           (p["publish"] or {}).get("execution")] for p in pre],
             _at(pre[0]) if pre else None)
        _put(out, f"{k}/publisher", sorted([[x["side"], x["condition"]] for x in a["publisher"]],
                                           key=lambda x: (x[0], x[1] or "")), None)
    for a in (doc.get("steps") or {}).get("algorithms", ()):
        k = f"algorithm/{a['name']}|{a['worker'] or ''}"
        _put(out, f"{k}/clears", sorted({(c.get("runner"), c.get("mode")) for c in a["clears"]},
                                        key=lambda x: tuple(y or "" for y in x)), None)
    pg = (doc.get("steps") or {}).get("prefill_gates")
    if pg:
        _put(out, "prefill/no_speculation", pg["no_speculation"], None)
        _put(out, "prefill/modes", pg["modes"], None)
        _put(out, "prefill/declaration", "must be PRE_REPLAY" if pg["declaration"] else "not tested", None)
        _put(out, "prefill/unless", pg["unless"], None)
        _put(out, "prefill/path_unless", pg.get("path_unless", []), None)
        for a in pg["algorithms"]:
            _put(out, f"prefill/algorithm/{a['name']}", a["publish"], None)
        for g in pg["gates"]:
            _put(out, f"prefill/gate/{g['function']}", sorted(x["test"] for x in g["exits"]), _at(g))
        for x in pg["stagers"]:
            _put(out, f"prefill/stager/{x['attribute']}", sorted(s["value"] for s in x["stores"]),
                 _at(x["stores"][0]) if x["stores"] else None)
        for x in pg["settings"]:
            _put(out, f"setting/{x['name']}", x["default"], _at(x))
            _put(out, f"prefill/setting/{x['name']}", "no effect" if x["publish_off_when"] is None else
                 f"publish off when {x['publish_off_when']}", _at(x))
    for x in (doc.get("shared_locations") or {}).get("locations", ()):
        _put(out, f"location/{x['name']}", "written after the barrier, read by a backend", _at(x["writes"][0]))
    return {k: {"value": _jsonable(v["value"]), "at": v["at"]} for k, v in sorted(out.items())}


def _names(rows) -> dict[int, str]:
    """Each row's name in the keys: its class, and where two rows share a class name (two modules define it) the
    class at its file."""
    count: dict[str, int] = {}
    for r in rows:
        count[r["class"]] = count.get(r["class"], 0) + 1
    return {id(r): r["class"] if count[r["class"]] == 1 else f"{r['class']}@{r['file']}" for r in rows}


def _jsonable(v):
    return json.loads(json.dumps(v, default=list))


def compare_facts(old: dict, new: dict) -> list[dict]:
    """The facts that changed, appeared or went away between two fact tables, sorted by key."""
    out = []
    for key in sorted(set(old) | set(new)):
        o, n = old.get(key), new.get(key)
        if o is not None and n is not None and o["value"] == n["value"]:
            continue
        status = "changed" if o is not None and n is not None else ("removed" if o is not None else "added")
        out.append({"fact": key, "status": status, "old": o["value"] if o else None, "new": n["value"] if n else None,
                    "at": (n or o)["at"], "was_at": o["at"] if o else None})
    return out


def keys_of_label(label: str) -> tuple[str, ...]:
    """The fact-key prefixes a fingerprint label supports."""
    for head, prefixes in (("declaration of ", ("declaration/{}",)), ("reads of ", ("reads/{}",)),
                           ("children passed to ", ("declaration/{}", "reads/{}")), ("worker ", ("worker/{}",)),
                           ("runner ", ("runner/{}/",)), ("algorithm ", ("algorithm/{}",))):
        if label.startswith(head):
            name = label[len(head):]
            return tuple(p.format(name) for p in prefixes)
    return {"barrier": ("fence/", "barrier/", "setting/", "event_loop/"),
            "decode graph runner per device": ("platform/",),
            "marker": ("marker", "platform/"), "locations": ("location/",)}.get(label, ("",))


def _under(key: str, prefix: str) -> bool:
    """Whether fact ``key`` is one ``prefix`` names (the fact itself, one below it, or the class at a file)."""
    if not prefix or prefix.endswith("/"):
        return key.startswith(prefix)
    return key == prefix or key.startswith((prefix + "/", prefix + "@"))


def function_drift(functions: list[dict], fact_changes: list[dict]) -> list[dict]:
    """Each changed, removed or added function with ``drift``: whether a fact it supports changed (else it is
    ``review``: code changed, the facts read from it did not)."""
    changed = [c["fact"] for c in fact_changes]
    out = []
    for f in functions:
        prefixes = [p for label in f["facts"] for p in keys_of_label(label)]
        hit = any(_under(k, p) for k in changed for p in prefixes)
        out.append({**f, "drift": hit, "review": not hit})
    return out
