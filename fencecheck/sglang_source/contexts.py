"""The configurations of a tree, generated from its facts: the step (no speculation: a decode or a prefill step on
the model runner's runners; or one path through a speculative algorithm's decode or prefill step) x the publisher x
the platform class x the event loop, as the tree has them. Each is a scenario table (``scenario``) the simulator and
the model run; a finding is decided in every configuration that runs a phase of its mode (``reader_findings``).

- **Steps.** A speculative algorithm's runner phases (``algorithms``) carry the tests on their path; each
  assignment of those tests (each test an atom, true or false) selects the phases whose tests all hold, in step
  order: one path through the step. Paths with the same phases are one configuration. A phase inside a loop runs once
  in the configuration (its count is known only at run time). The step without speculation runs ``DECODE`` on the
  platform's decode graph runner, or eagerly on the eager runner; a prefill step runs ``EXTEND`` on the eager runner
  or the prefill graph runner (``steps.model_runner_runners``). A speculative algorithm's prefill step is the
  worker's step entry walked with the batch in ``EXTEND`` (``algorithms.prefill_step``): its model runner phases run
  on the eager runner or the prefill graph runner alike (none: eagerly only), and its read-done is published as the
  prefill gates say for that algorithm (``_prefill_speculative``); a loop that runs prefill steps runs it.
- **Publisher.** Each row of the worker's ``last_shared_read_runner`` (its side's mailbox is the one the barrier
  reads); no speculation: the target.
- **Platform classes.** The platforms whose decode graph runner publishes (``protocol.platforms``), grouped by
  whether that runner's graphs have the marker and whether the barrier is on: by default, or only with a setting
  (``SGLANG_ENABLE_WAR_BARRIER``), each a class of its own; a platform whose decode graph runner never publishes
  has no configuration (its findings are not findings, ``device``).
- **Force coarse.** A setting the barrier's fine wait tests (``SGLANG_FORCE_COARSE_WAR_BARRIER``), off by default,
  makes the steps without speculation on the first platform class configurations of their own.
- **Event loops.** The loops that apply the barrier: ``overlap`` (right after ``run_batch``) or, for a loop of the
  disaggregated prefill server (its name says ``prefill``), ``disagg_prefill``; a loop whose name says ``prefill``
  runs prefill steps, ``decode`` decode steps, any other both. A loop without the barrier runs the forward on the
  schedule stream (``normal``) or on the pipeline's own stream with a host synchronisation (``pp``, its name says
  ``pp``): one configuration each, of the step without speculation; any other loop without the barrier is listed as
  not modelled.

Every configuration resolves declarations under the tree's own rule (the decode graph runner's fallback,
``runners.Fallback``), its phases' runners publish as their classes do, and every phase's attention backend takes
the base rule and reads nothing: a finding's backend takes the phases of its mode.
"""

from __future__ import annotations

import ast
import functools

from .records import slug

MAX_PATHS = 256  # distinct paths through one step generated at most

_POLICY = {"resolve": "resolve", "clear_then_resolve": "clear_then_resolve", "publish_unconditionally":
           "always_pre_replay", "prefill_publish": "prefill", "never": "never"}


@functools.cache
def _parsed(text: str):
    try:
        return ast.parse(text, mode="eval").body
    except SyntaxError:
        return None


def _literal_value(text: str, values: dict, scope: str = "") -> bool | None:
    e = _parsed(text)
    return None if e is None else _eval(e, values, scope)


def _atoms(text: str, scope: str = "") -> list[str]:
    e = _parsed(text)
    if e is None:
        return [text]
    out = []

    def visit(x):
        if isinstance(x, ast.BoolOp):
            for v in x.values:
                visit(v)
        elif isinstance(x, ast.UnaryOp) and isinstance(x.op, ast.Not):
            visit(x.operand)
        else:
            out.append(_key(x, scope))

    visit(e)
    return out


_ATOM_TEXT: dict[int, tuple[str, bool]] = {}


def _key(e, scope: str) -> str:
    """An atom's key: its text, qualified by ``scope`` (the phase's function) when it names a local of a function
    (a name other than ``self``): two functions' locals of one name are two tests."""
    hit = _ATOM_TEXT.get(id(e))
    if hit is None:
        local = any(isinstance(n, ast.Name) and n.id != "self" and isinstance(n.ctx, ast.Load)
                    and n.id not in _GLOBAL_NAMES for n in ast.walk(e))
        hit = _ATOM_TEXT[id(e)] = (ast.unparse(e), local)  # the parsed conditions are kept (``_parsed``)
    return f"{scope}|{hit[0]}" if hit[1] and scope else hit[0]


#: Names a test may use that are no local of the function (builtins, SGLang's module-level helpers by convention).
_GLOBAL_NAMES = frozenset({"isinstance", "hasattr", "getattr", "len", "any", "all", "envs", "get_parallel", "torch",
                           "True", "False", "None", "callable"})


def _eval(e, values, scope: str = ""):
    if isinstance(e, ast.BoolOp):
        vals = [_eval(v, values, scope) for v in e.values]
        if isinstance(e.op, ast.And):
            return False if False in vals else (True if all(v is True for v in vals) else None)
        return True if True in vals else (False if all(v is False for v in vals) else None)
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
        v = _eval(e.operand, values, scope)
        return None if v is None else not v
    return values.get(_key(e, scope))


def _scope(tree, p: dict) -> str:
    """The function holding phase ``p``'s call (``file:def line``): the scope of the locals its tests name."""
    memo = tree.__dict__.setdefault("_phase_scopes", {})
    k = (p["file"], p["line"])
    if k not in memo:
        memo[k] = p["file"]
        name = p["file"][:-3].replace("/", ".").removesuffix(".__init__")
        mod = tree.module(name) if tree is not None and name in tree.paths else None
        best = None
        for node in (tree.walk(mod.tree) if mod else ()):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.lineno <= p["line"] <= \
                    (node.end_lineno or node.lineno) and (best is None or node.lineno > best.lineno):
                best = node
        if best is not None:
            memo[k] = f"{p['file']}:{best.lineno}"
    return memo[k]


def _model_runner_phase(p: dict) -> bool:
    """A phase through a model runner's forward: it replays the decode graph runner or runs eagerly, per batch."""
    return p["publish"]["execution"] == "graph" and (p["publish"]["why"] or "").startswith("the model runner replays")


def _paths(phases: list[dict], tree=None) -> tuple[list[tuple[tuple, dict]], list[str]]:
    """Each distinct path through ``phases``: the (phase index, execution) selected, in order, and the tests' values
    that select it. Found depth first: a phase whose tests are decided by the values so far is in or out, else the
    first undecided test is taken true, then false; a phase through a model runner's forward runs as a graph or
    eagerly, the same for every phase of one call (a call repeated in a loop or reached twice runs alike)."""
    runs = [i for i, p in enumerate(phases) if p["kind"] == "runner" and p.get("publish")]
    scopes = {i: _scope(tree, phases[i]) if tree is not None else "" for i in runs}
    out, seen, notes = [], set(), []
    budget = [MAX_PATHS]

    def value(i, values):
        vals = [_literal_value(c, values, scopes[i]) for c in phases[i].get("conditions", ())]
        return False if False in vals else (True if all(v is True for v in vals) else None)

    def undecided(i, values):
        for c in phases[i].get("conditions", ()):
            for a in _atoms(c, scopes[i]):
                if a not in values:
                    return a
        return None

    def walk(k, values, sel):
        if budget[0] <= 0:
            return
        if k == len(runs):
            sig = tuple((phases[i]["file"], phases[i]["line"], phases[i]["mode"], e) for i, e in sel)
            sig = tuple(x for n, x in enumerate(sig) if n == 0 or x != sig[n - 1])  # a loop's phase once
            if sel and sig not in seen:
                seen.add(sig)
                out.append((tuple(sel), dict(values)))
                budget[0] -= 1
            return
        i = runs[k]
        v = value(i, values)
        if v is None:
            a = undecided(i, values)
            if a is None:  # a test the atoms cannot settle: the phase may run or not
                walk(k + 1, values, sel)
                walk(k + 1, values, sel + [(i, None)])
                return
            for bit in (True, False):
                walk(k, {**values, a: bit}, sel)
            return
        if not v:
            walk(k + 1, values, sel)
            return
        if _model_runner_phase(phases[i]):  # one choice per call: a loop's or a helper's repeated call runs alike
            choice = f"graph@{phases[i]['file']}:{phases[i]['line']}"
            if choice not in values:
                for bit in (True, False):
                    walk(k, {**values, choice: bit}, sel)
                return
            walk(k + 1, values, sel + [(i, "graph" if values[choice] else "eager")])
        else:
            walk(k + 1, values, sel + [(i, None)])

    walk(0, {}, [])
    if budget[0] <= 0:
        notes.append(f"more than {MAX_PATHS} paths through the step (contexts.MAX_PATHS): the rest not generated")
    return out, notes


def platform_classes(platforms: list[dict]) -> list[dict]:
    """The platform classes: platforms whose decode graph runner publishes, by (marker, barrier on) and the
    settings that class needs."""
    groups: dict[tuple, dict] = {}
    for p in platforms:
        if p.get("runner_policy") in (None, "never") or p.get("barrier") is None:
            continue
        markers = {"present": (True,), "absent": (False,)}.get(p["marker"], (True, False))
        b = p["barrier"]
        variants = []
        if b["default"] is True:
            variants.append((True, ()))
        elif b["default"] is False:
            variants.append((False, ()))
            for w in b["on_when"]:
                variants.append((True, (f"{w['setting']}={w['value']}",)))
        else:
            variants += [(True, ()), (False, ())]
        absent = tuple(f"no marker: {w}" for w in p.get("marker_absent_when", ()))
        if p["marker"] == "present" and absent:  # present but for a condition (an unsupported external event)
            markers = (True, False)
        for m in markers:
            for on, settings in variants:
                if m is False and p["marker"] == "present":
                    settings = settings + absent
                key = (m, on, settings)
                g = groups.setdefault(key, {"marker": m, "barrier": on, "settings": list(settings), "platforms": []})
                g["platforms"].append(p["platform"])
    out = []
    for g in sorted(groups.values(), key=lambda g: (not g["barrier"], not g["marker"], g["settings"])):
        forced = any(not x.startswith("no marker:") for x in g["settings"])
        g["name"] = (g["platforms"][0] + ("" if g["marker"] else "-no-marker")
                     + ("" if g["barrier"] else "-barrier-off") + ("-forced" if forced else ""))
        out.append(g)
    return out


def loop_kinds(event_loops: list[dict]) -> list[dict]:
    """Each event loop with the kind it is modelled as (None: not modelled) and the steps it runs."""
    out = []
    for loop in event_loops:
        name = loop["event_loop"]
        runs = "prefill" if "prefill" in name else "decode" if "decode" in name else "both"
        if loop["barrier_lines"]:
            kind = "disagg_prefill" if "prefill" in name else "overlap"
        elif "_pp" in name:
            kind = "pp"
        elif "normal" in name:
            kind = "normal"
        else:
            kind = None
        out.append({"event_loop": name, "class": loop["class"], "file": loop["file"], "line": loop["line"],
                    "kind": kind, "runs": runs})
    return out


def effective(mode: str, policy: str, execution: str) -> str:
    """What a phase does with its mailbox: an eager phase publishes only by the prefill rule in ``EXTEND`` (and clears
    nothing), a prefill-rule runner publishes only for ``EXTEND``; ``none`` otherwise. Configurations whose phases do
    the same are one."""
    if policy == "prefill" and mode != "EXTEND":
        return "none"
    if execution == "eager" and policy != "prefill":
        return "none"
    return policy


def _phase_row(p: dict, execution: str | None = None, eager: dict | None = None, graph: dict | None = None) -> dict:
    """A configuration's phase; ``execution`` ``eager`` for a model runner's forward run eagerly (on the eager
    runner, ``eager``: its policy), ``graph`` for one replayed (on the runner whose policy ``graph`` gives: the
    prefill graph runner for an ``EXTEND`` phase; None: the runner the phase's publish row names)."""
    policy = _POLICY.get(p["publish"]["policy"], p["publish"]["policy"]) if p["publish"]["policy"] else "resolve"
    if execution == "eager":
        policy = eager["policy"] if eager else "never"
    elif execution == "graph" and graph is not None:
        policy = graph["policy"]
    return {"mode": p["mode"], "side": p["side"], "policy": policy,
            "execution": execution or p["publish"]["execution"], "call": p["call"], "file": p["file"],
            "line": p["line"]}


def _plain(proto, steps, platform_name) -> dict[str, list[list[dict]]]:
    """The steps without speculation: decode (graph, eager) and prefill (eager, graph), as phase rows."""
    rows = next((p for p in proto.platforms if p["platform"] == platform_name), None)
    dec = rows["decode_graph_runner"] if rows else None
    out: dict[str, list] = {"decode": [], "prefill": []}
    facts = {r.ci.name: r for r in proto.runners}
    mr = steps.get("model_runner", [])
    if dec and dec["class"] in facts:
        r = facts[dec["class"]]
        out["decode"].append([{"mode": "DECODE", "side": "target", "policy": _POLICY[r.policy], "execution": "graph",
                               "call": f"{r.ci.name}.{r.entry.name}", "file": r.owner.file, "line": r.entry.lineno}])
    for x in mr:
        r = facts[x["class"]]
        row = {"side": "target", "policy": _POLICY[r.policy], "call": f"{r.ci.name}.{r.entry.name}",
               "file": r.owner.file, "line": r.entry.lineno}
        if x["role"] == "eager":
            out["decode"].append([{**row, "mode": "DECODE", "execution": "eager"}])
            out["prefill"].append([{**row, "mode": "EXTEND", "execution": "eager"}])
        elif x["role"] == "prefill_graph":
            out["prefill"].append([{**row, "mode": "EXTEND", "execution": "graph"}])
    return out


def _prefill_default(steps: dict) -> tuple[bool, list[str]]:
    """Whether prefill may publish with every setting at its default, and the settings that turn it on otherwise:
    the tree's prefill gates (``steps["prefill_gates"]``, ``prefill_gates.prefill_gates``) for no speculation; a
    publish its gates cannot decide counts as on."""
    g = steps.get("prefill_gates")
    if g is None:
        return True, []
    on = g["no_speculation"] in ("allowed", "may")
    return on, sorted(f"{x['name']}={not x['publish_off_when']}" for x in g["settings"]
                      if x["publish_off_when"] is not None and x["default"] == x["publish_off_when"])


def _prefill_speculative(steps: dict, name: str) -> tuple[bool, list[str]]:
    """Whether a prefill step under the speculative algorithm ``name`` may publish its read-done with every setting
    at its default, and the settings that turn it on otherwise: its row of the prefill gates (``allowed`` and
    ``may`` on, ``with settings`` on with no speculation's settings, or with its gate's where no speculation has
    none, ``never`` off); a tree without the gates, or without a row for it, as no speculation. The gates decide
    which settings turn the publish off for no speculation only: a setting the algorithm's own test adds is not
    named."""
    g = steps.get("prefill_gates")
    row = next((x for x in (g or {}).get("algorithms", ()) if x["name"] == name), None)
    on, settings = _prefill_default(steps)
    if row is None:
        return on, settings
    if row["publish"] in ("allowed", "may"):
        return True, []
    if row["publish"] == "with settings":  # the gates name the settings for no speculation only
        return False, settings or [f"{name}'s prefill read-done turned on (steps.prefill_gates: with settings)"]
    return False, []


def configurations(tree, proto, steps: dict, algorithms: list[dict], event_loops: list[dict]) -> dict:
    """``{"rule", "platform_classes", "loops", "configurations": [...], "notes"}`` of the tree's ``algorithms`` rows
    and the barrier's ``event_loops`` rows (as the document has them)."""
    rule = proto.fallback_rule()
    classes = platform_classes(proto.platforms)
    loops = loop_kinds(event_loops)
    notes = [f"event loop {x['event_loop']} ({x['file']}:{x['line']}) applies no barrier and is neither a normal nor "
             "a pipeline loop: not modelled" for x in loops if x["kind"] is None]
    by_kind: dict[str, list] = {}
    for x in loops:
        if x["kind"] is not None:
            by_kind.setdefault(x["kind"], []).append(x)
    prefill_on, prefill_settings = _prefill_default(steps)
    configs: list[dict] = []
    seen: dict = {}  # key -> the configuration: a path another algorithm shares is one configuration

    def add(source, condition, phases, publisher, cls, kind, loops_, prefill=None, coarse=None, read_done=None):
        eff = [(p["mode"], p["side"], effective(p["mode"], p["policy"], p["execution"]), p["execution"])
               for p in phases]
        eff = tuple(x for k, x in enumerate(eff) if k == 0 or x != eff[k - 1])
        done = (prefill_on if not prefill else True) if read_done is None else read_done
        key = (kind, cls["name"], publisher, eff, tuple(prefill or ()), coarse, done)
        if key in seen:
            if source not in seen[key]["sources"]:
                seen[key]["sources"].append(source)
            return
        configs.append({"source": source, "sources": [source], "condition": condition, "phases": phases, "publisher": publisher,
                        "platform_class": cls["name"], "platforms": cls["platforms"], "marker": cls["marker"],
                        "barrier": cls["barrier"], "force_coarse": coarse is not None,
                        "settings": cls["settings"] + (prefill or []) + ([f"{coarse}=True"] if coarse else []),
                        "loop": kind, "event_loops": [x["event_loop"] for x in loops_],
                        "prefill_read_done": done})
        seen[key] = configs[-1]

    eager_row, prefill_graph = ({x["role"]: {"policy": _POLICY[x["policy"]]} for x in steps.get("model_runner", ())}
                                .get(role) for role in ("eager", "prefill_graph"))
    paths_of: dict[int, tuple] = {}
    for a in algorithms:
        for key in ("phases", "prefill_phases"):
            if id(a.get(key, ())) not in paths_of:
                paths_of[id(a.get(key, ()))] = _paths(a.get(key, []), tree)
                notes.extend(f"{a['name']}: {w}" for w in paths_of[id(a.get(key, ()))][1])

    def speculative(a, key, cls, kind, ls, what=None, read_done=None, prefill=None):
        """The configurations of the paths through ``a``'s step (``key``: its phases)."""
        for sel, values in paths_of[id(a.get(key, ()))][0]:
            extend = {i for i, _ in sel if key == "prefill_phases" and a[key][i]["mode"] == "EXTEND"}
            if prefill_graph is None and any(e == "graph" for i, e in sel if i in extend):
                continue  # the model runner replays an EXTEND batch only on its prefill graph runner: none here
            phases = [_phase_row(a[key][i], e, eager_row, prefill_graph if i in extend else None) for i, e in sel]
            phases = [p for k, p in enumerate(phases) if k == 0 or p != phases[k - 1]]
            path = [c for i, _ in sel for c in a[key][i].get("conditions", ())]
            for pub in a["publisher"] or [{"side": "target", "condition": None}]:
                if pub["condition"] and _literal_value(pub["condition"], values) is False:
                    continue
                absent = _absent_worker(tree, a, pub)
                if absent and any(a[key][i]["runner"].startswith(absent + ".") for i, _ in sel):
                    continue  # the publisher is chosen when that sub-worker is None: its phases do not run
                cond = " and ".join(dict.fromkeys(([a["condition"]] if a["condition"] else []) + path
                                                  + ([pub["condition"]] if pub["condition"] else []))) or None
                add(f"{a['name']}: {what}" if what else a["name"], cond, phases, pub["side"], cls, kind, ls,
                    prefill, read_done=read_done)
    for cls in classes:
        plain = _plain(proto, steps, cls["platforms"][0])
        for kind in ("overlap", "disagg_prefill", "normal", "pp"):
            ls = by_kind.get(kind, [])
            if not ls:
                continue
            runs = {x["runs"] for x in ls}
            barrier_loop = kind in ("overlap", "disagg_prefill")
            if not barrier_loop and cls is not classes[0]:
                continue  # no barrier: the platform class does not matter
            if runs & {"decode", "both"}:
                for ph in plain["decode"]:
                    add("no speculation: decode", None, ph, "target", cls, kind, ls)
            if runs & {"prefill", "both"}:
                for ph in plain["prefill"]:
                    add("no speculation: prefill", None, ph, "target", cls, kind, ls)
                    if not prefill_on and barrier_loop and prefill_settings:
                        add("no speculation: prefill", None, ph, "target", cls, kind, ls, prefill_settings)
            if not barrier_loop or not runs & {"decode", "both"}:
                continue
            for a in algorithms:
                speculative(a, "phases", cls, kind, ls)
    coarse = [x["name"] for x in (proto.gate or {}).get("coarse_settings", ()) if x["default"] is False]
    if classes and coarse and by_kind.get("overlap"):  # the setting that makes the barrier wait for the whole forward
        cls = classes[0]
        plain = _plain(proto, steps, cls["platforms"][0])
        for name in coarse:
            for ph in plain["decode"] + plain["prefill"]:
                add(f"no speculation: {'decode' if ph[0]['mode'] == 'DECODE' else 'prefill'}", None, ph, "target",
                    cls, "overlap", by_kind["overlap"], coarse=name)
    for cls in classes:  # the speculative prefill steps, after the others (their names keep their numbers)
        for kind in ("overlap", "disagg_prefill"):
            ls = by_kind.get(kind, [])
            if not ls or not {x["runs"] for x in ls} & {"prefill", "both"}:
                continue
            for a in algorithms:
                on, needs = _prefill_speculative(steps, a["name"])
                speculative(a, "prefill_phases", cls, kind, ls, "prefill", on)
                if not on and needs:
                    speculative(a, "prefill_phases", cls, kind, ls, "prefill", True, needs)
    for i, c in enumerate(configs):
        base = slug(c["source"].split(":")[0]) if c["source"].startswith("no speculation") else slug(c["source"])
        what = c["source"].split(": ")[1] if c["source"].startswith("no speculation") else None
        c["name"] = "-".join(x for x in (base, what, c["platform_class"], "coarse" if c["force_coarse"] else None,
                                         c["loop"].replace("_", "-"), str(i)) if x)
    return {"rule": rule, "platform_classes": classes, "loops": loops, "configurations": configs, "notes": notes}


def _absent_worker(tree, a: dict, pub: dict) -> str | None:
    """The class of the sub-worker a publisher row's condition says is None (``self._draft_worker is None``): a
    path running its phases is not one that row is chosen on."""
    import re

    m = re.fullmatch(r"self\.(\w+) is None", pub.get("condition") or "")
    if m is None or tree is None or not a.get("worker"):
        return None
    from .worker_types import AttrTypes

    types = tree.__dict__.get("_worker_attr_types")
    if types is None:
        types = tree.__dict__["_worker_attr_types"] = AttrTypes(tree)
    name = a["worker"]["file"][:-3].replace("/", ".").removesuffix(".__init__")
    mod = tree.module(name) if name in tree.paths else None
    ci = mod.classes.get(a["worker"]["class"]) if mod else None
    k = types.raw(ci).get(m.group(1)) if ci is not None else None
    return k.name if k is not None else None


def scenario(cfg: dict, rule: str | None) -> dict:
    """The scenario table of a configuration: the two model runners own the mailboxes (``target``, ``draft``); each
    phase runs on a runner of its side and publish policy, marker as the platform class has it; every phase's backend
    ``attn`` takes the base rule and reads nothing."""
    runners = {"target": {"publish": "never", "fresh_events": True, "marker": cfg["marker"]},
               "draft": {"publish": "never", "fresh_events": True, "marker": cfg["marker"]}}
    phases = []
    for i, p in enumerate(cfg["phases"]):
        rn = f"{p['side']}-{p['policy'].replace('_', '-')}"
        runners.setdefault(rn, {"publish": p["policy"], "mailbox": p["side"], "fresh_events": True,
                                "marker": cfg["marker"]})
        ph = {"name": f"p{i}-{p['mode'].lower().replace('_', '-')}", "runner": rn, "mode": p["mode"],
              "backend": "attn"}
        if p["execution"] == "eager":
            ph["execution"] = "eager"
        phases.append(ph)
    cites = [f"{p['file']}:{p['line']}: {p['side']} {p['mode']} by `{p['call']}` ({p['policy']}, {p['execution']})"
             for p in cfg["phases"]]
    return {"name": cfg["name"],
            "description": f"{cfg['source']}" + (f" when {cfg['condition']}" if cfg["condition"] else "")
                           + f"; platforms {', '.join(cfg['platforms'])}" + (
                               f" with {', '.join(cfg['settings'])}" if cfg["settings"] else "")
                           + f"; {cfg['loop']} loop ({', '.join(cfg['event_loops'])}); generated from the facts.",
            "cites": cites, "resolution": rule or "declaration_only_post_fallback", "steps": 2,
            "backends": {"attn": {}}, "runners": runners,
            "scheduler": {"barrier": cfg["barrier"], "loop": cfg["loop"], "force_coarse": cfg["force_coarse"],
                          "prefill_read_done": cfg["prefill_read_done"]},
            "algorithm": {"name": "none" if cfg["source"].startswith("no speculation") else slug(cfg["source"]),
                          "publisher": cfg["publisher"], "steps": {"normal": phases}}}
