"""A reader document projected onto the protocol tables audited by hand.

The tables are those of tests/sglang_0_5_18_expected.json and tests/sglang_0_5_22_expected.json, every row with
file:line; the release tests compare the projection of the reader's output with the file."""

from __future__ import annotations


def _at(d: dict, key: str = "file", line: str = "line") -> str | None:
    return f"{d[key]}:{d[line]}" if d and d.get(key) is not None else None


def tables(doc: dict) -> dict:
    """The audited tables of ``doc``: declarations, workers, the barrier and its gate, the runners that resolve,
    publish or clear, the marker, the algorithms' phases and publishers, the shared locations."""
    fence = doc["fence"]
    (b,) = fence["barrier"]
    gate = fence["gate"]
    plat = doc["platforms"]
    mk = plat["marker"]
    return {
        "forward_modes": {"modes": doc["forward_modes"]["modes"], "at": _at(doc["forward_modes"])},
        "backends": [{"class": x["class"], "at": _at(x), "declared_in": _at(x["declared_in"]),
                      "declares": x["declares"]} for x in doc["backends"]],
        "workers": [{"class": w["class"], "publisher": w["publisher"], "condition": w["condition"],
                     "at": _at(w["returns_at"])} for w in doc["workers"]],
        "barrier": {
            "defined": _at(b), "publisher_property": b["publisher_property"], "mailbox": b["mailbox"],
            "clear": f"{b['file']}:{b['clear_line']}", "fine_wait": f"{b['file']}:{b['fine_wait']['line']}",
            "coarse_wait": f"{b['file']}:{b['coarse_line']}",
            "gate": {"expr": gate["expr"], "at": _at(gate)},
            "on_by_default": sorted(p["platform"] for p in gate["platforms"] if p["default"] is True),
            "forced_on_by": sorted({f"{w['setting']}={w['value']}" for p in gate["platforms"] for w in p["on_when"]}),
            "calls": [{"event_loop": c["event_loop"], "at": _at(c)} for c in doc["barrier"]["calls"]],
            "event_loops_without_barrier": sorted(x["event_loop"] for x in doc["barrier"]["event_loops"]
                                                  if not x["barrier_lines"]),
        },
        "graph_runners": [{
            "class": r["class"], "entry": _at(r["entry"]), "policy": r["policy"],
            "binds": None if not r["binds"] else {"expr": r["binds"]["expr"], "side": r["binds"]["side"],
                                                  "at": _at(r["binds"])},
            "fallback": None if not r["fallback"] else {"rule": r["fallback"]["rule"], "end": r["fallback"]["end"],
                                                        "at": _at(r["fallback"])},
            "publishes": [{"when": p["at"], "event": p["event"], "ends": p["ends"], "at": _at(p)}
                          for p in r["publishes"]],
            "clears": [{"when": c["at"], "before_resolve": c["before_resolve"], "at": _at(c)} for c in r["clears"]],
        } for r in doc["graph_runners"] if r["policy"] != "never" or r["fallback"]],
        "marker": {"attribute": mk["attribute"], "runner": mk["runner"],
                   "created": [_at(s) for s in mk["sites"]],
                   "none_when": [{"test": w.get("test"), "raises": w.get("raises"),
                                  "at": f"{s['factory']['file']}:{w['line']}"}
                                 for s in mk["sites"] for w in s["factory"]["none_when"]],
                   "platforms": {p["platform"]: p["marker"] for p in plat["platforms"]}},
        "decode_graph_runners": {p["platform"]: p["decode_graph_runner"]["class"] for p in plat["platforms"]
                                 if p["decode_graph_runner"]},
        "algorithms": [{"name": a["name"], "condition": a["condition"],
                        "worker": a["worker"]["class"] if a["worker"] else None,
                        "phases": [[p["runner"], p["mode"], p["side"], (p["publish"] or {}).get("policy"),
                                    (p["publish"] or {}).get("execution"), f"{p['file']}:{p['line']}"]
                                   for p in a["phases"]],
                        "publisher": [[x["side"], x["condition"], f"{x['file']}:{x['line']}"] for x in a["publisher"]]}
                       for a in doc["algorithms"]],
        "shared_locations": {x["name"]: _at(x["writes"][0]) for x in doc["shared_locations"]["locations"]},
    }
