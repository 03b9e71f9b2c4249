"""A fuzzer over synthetic SGLang trees: no crash, no hang, and every planted read found or unresolved.

A fuzzer over synthetic SGLang trees: a backend in a random class hierarchy whose ``forward_decode`` reaches a read
of ``req_to_token`` through a random chain of helpers (methods on random classes of its MRO, then module functions
in another module), a declaration built from a random expression (ends, odd values, tests on the mode and on
settings, ``max_of``) on a random class of the hierarchy, and sometimes a detour that reaches the chain's last
helper first through a long chain from the pre-replay prep. For every tree: no exception escapes the reader or its
summary (no exit 70), the document meets its schema, each example ends within its deadline, and the planted read is
a finding, or an unresolved finding, unless every row the declaration can give covers it (an independent evaluator
of the generated expression says which). The fast part runs a few dozen trees; ``slow`` runs hundreds."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sglang_reader_trees import ATTN, build, validate

from fencecheck.sglang_source import read_path, reads
from fencecheck.commands.sglang import exit_code
from fencecheck.render.tree_text import render

ENDS = ("PRE_REPLAY", "IN_REPLAY", "POST_REPLAY", "UNKNOWN")
COVERS_AFTER_MARKER = {"POST_REPLAY", "UNKNOWN"}  # vocab.COVERED_SITES: the ends that cover in_graph_after_marker
ODD = ("42", "None", "fm", "self.end", "'late'", "SharedReadEnds.LATER")
ODD_ROW = "odd"  # a row the reader cannot know: an odd value, or a child of unknown class

# --- declarations: an expression and what it gives for DECODE -------------------------------------------------------
TESTS = {  # source -> value for DECODE (None: not decided by the mode, a condition)
    "fm.is_decode()": True, "fm.is_extend()": False, "fm.is_target_verify()": False, "self.flag": None,
    "self.model_runner.server_args.eager": None,
}


@st.composite
def conditions(draw, depth=0):
    kind = draw(st.sampled_from(["leaf", "leaf", "not", "and", "or"] if depth < 2 else ["leaf"]))
    if kind == "leaf":
        src = draw(st.sampled_from(sorted(TESTS)))
        return src, TESTS[src]
    if kind == "not":
        src, v = draw(conditions(depth + 1))
        return f"not ({src})", None if v is None else not v
    (a, va), (b, vb) = draw(conditions(depth + 1)), draw(conditions(depth + 1))
    if kind == "and":
        v = False if False in (va, vb) else (True if va is vb is True else None)
    else:
        v = True if True in (va, vb) else (False if va is vb is False else None)
    return f"({a} {kind} {b})", v


@st.composite
def values(draw, depth=0):
    """(source, rows): rows a list of the ends the expression gives for DECODE, ``ODD_ROW`` for a value that is no
    end, or None when it cannot be an item of ``max_of`` (a row depends on a condition)."""
    kinds = ["end", "end", "odd"] + (["ifexp", "max_of"] if depth < 3 else [])
    kind = draw(st.sampled_from(kinds))
    if kind == "end":
        e = draw(st.sampled_from(ENDS))
        return f"SharedReadEnds.{e}", [e]
    if kind == "odd":
        return draw(st.sampled_from(ODD)), [ODD_ROW]
    if kind == "ifexp":
        (t, tv), (a, ra), (b, rb) = draw(conditions()), draw(values(depth + 1)), draw(values(depth + 1))
        rows = ra if tv is True else rb if tv is False else ra + rb
        return f"({a} if {t} else {b})", rows
    items = draw(st.lists(values(depth + 1), min_size=1, max_size=3))
    if any(len(r) != 1 or r == [ODD_ROW] for _, r in items):
        rows = [ODD_ROW]  # a conditional or odd item: unresolved
    else:
        rows = [max((r[0] for _, r in items), key=ENDS.index)]
    return "SharedReadEnds.max_of([" + ", ".join(s for s, _ in items) + "])", rows


@st.composite
def declarations(draw):
    """(body, rows for DECODE) of ``shared_read_ends(self, fm)``, or (None, base rule)."""
    kind = draw(st.sampled_from(["base", "return", "if", "local", "super", "child"]))
    if kind == "base":
        return None, ["IN_REPLAY"]
    if kind == "child":  # a child whose class is not known: its declaration neither
        return draw(st.sampled_from(["return self.inner.shared_read_ends(fm)",
                                     "return SharedReadEnds.max_of(b.shared_read_ends(fm) for b in (self.inner,))"])), \
            [ODD_ROW]
    if kind == "super":
        return "return super().shared_read_ends(fm)", ["IN_REPLAY"]
    src, rows = draw(values())
    if kind == "return":
        return f"return {src}", rows
    (t, tv), (other, orows) = draw(conditions()), draw(values())
    if kind == "if":
        body = f"if {t}:\n    return {other}\nreturn {src}"
    else:  # a local assigned in both branches
        body = f"if {t}:\n    end = {other}\nelse:\n    end = {src}\nreturn end"
    return body, (orows if tv is True else rows if tv is False else orows + rows)


# --- trees ------------------------------------------------------------------------------------------------------
@st.composite
def trees(draw, max_chain=11):
    levels = draw(st.integers(0, 3))  # classes between AttentionBackend and the planted backend
    split = draw(st.booleans())  # each class in a module of its own
    n_methods = draw(st.integers(0, max_chain))
    n_funcs = draw(st.integers(0, max_chain - n_methods))
    homes = [draw(st.integers(0, levels)) for _ in range(n_methods)]
    decl, rows = draw(declarations())
    decl_home = draw(st.integers(0, levels))
    detour = draw(st.one_of(st.none(), st.integers(1, 9)))
    return {"levels": levels, "split": split, "methods": n_methods, "funcs": n_funcs, "homes": homes, "decl": decl,
            "rows": rows, "decl_home": decl_home, "detour": detour}


def _sources(spec) -> tuple[dict[str, str], str, int]:
    """The tree's files, the planted read's file (relative to the package's parent) and line."""
    levels, n_m, n_f = spec["levels"], spec["methods"], spec["funcs"]
    body = {i: [] for i in range(levels + 1)}  # class index -> methods
    entry = "m1" if n_m else ("f1" if n_f else None)
    call = {None: "return self.req_to_token[forward_batch.req_pool_indices]",
            "m1": "return self.m1(forward_batch)", "f1": "return f1(self, forward_batch)"}[entry]
    body[levels].append(f"    def forward_decode(self, q, k, v, layer, forward_batch):\n        {call}\n")
    for i in range(1, n_m + 1):
        nxt = f"self.m{i + 1}(fb)" if i < n_m else (
            "f1(self, fb)" if n_f else "self.req_to_token[fb.req_pool_indices]")
        body[spec["homes"][i - 1]].append(f"    def m{i}(self, fb):\n        return {nxt}\n")
    if spec["decl"] is not None:
        text = "\n".join("        " + ln for ln in spec["decl"].splitlines())
        body[spec["decl_home"]].append(f"    def shared_read_ends(self, fm):\n{text}\n")
    if spec["detour"] is not None:
        last = f"self.m{n_m}(fb)" if n_m else (f"f{n_f}(self, fb)" if n_f else "fb")
        d = spec["detour"]
        body[levels].append("    def init_forward_metadata_out_graph(self, forward_batch, in_capture=False):\n"
                            "        return self.p1(forward_batch)\n")
        for i in range(1, d + 1):
            body[levels].append(f"    def p{i}(self, fb):\n        return {f'self.p{i + 1}(fb)' if i < d else last}\n")
    helpers = "".join(f"def f{i}(owner, fb):\n    return {f'f{i + 1}(owner, fb)' if i < n_f else 'owner.req_to_token[fb.req_pool_indices]'}\n\n\n"
                      for i in range(1, n_f + 1))
    imports = ("from sglang.srt.layers.attention.base_attn_backend import AttentionBackend, SharedReadEnds\n"
               + (f"from sglang.srt.layers.attention.fuzz_helpers import {', '.join(f'f{i}' for i in range(1, n_f + 1))}\n"
                  if n_f else "") + "\n\n")
    files, read_at = {f"{ATTN}/fuzz_helpers.py": helpers}, None
    module = f"{ATTN}/fuzz_c0.py"
    for i in range(levels + 1):
        name, base = ("Planted" if i == levels else f"C{i}"), ("AttentionBackend" if i == 0 else f"C{i - 1}")
        cls = f"class {name}({base}):\n    flag = False\n\n" + "\n".join(body[i]) + "\n\n"
        if spec["split"]:
            module = f"{ATTN}/fuzz_c{i}.py"
            head = imports + (f"from sglang.srt.layers.attention.fuzz_c{i - 1} import {base}\n\n\n" if i else "")
            files[module] = head + cls
        else:
            files[module] = files.get(module, imports) + cls
    for rel, text in files.items():
        for n, ln in enumerate(text.splitlines(), 1):
            if "req_to_token[" in ln:
                read_at = (f"sglang/{rel}", n)
    return files, read_at[0], read_at[1]


def _check(spec):
    files, read_file, read_line = _sources(spec)
    with tempfile.TemporaryDirectory() as tmp:
        ex = read_path(build(Path(tmp), files))
    doc = ex.to_json()
    validate(doc)
    render(ex)
    code = exit_code(ex)
    mine = [f for f in doc["findings"] if f["subject"] == "Planted" and f["mode"] == "DECODE"]
    rows = spec["rows"]
    if ODD_ROW in rows:
        assert any(f["kind"] == "unresolved_declaration" for f in mine), (spec, mine)
        assert code in (1, 3)
        return
    if all(e in COVERS_AFTER_MARKER for e in rows):
        return  # every row covers the read: nothing to report (and nothing claimed)
    depth = 1 + spec["methods"] + spec["funcs"]  # forward_decode is one call below forward
    if depth <= reads.MAX_DEPTH:
        hits = [f for f in mine if f["kind"] == "read_outside_declaration"
                and any((e["file"], e["line"]) == (read_file, read_line) for e in f["evidence"])]
        assert hits, (spec, mine)
        assert code == 1
    else:
        assert any(f["kind"] == "unresolved_read_path" and "call depth limit" in f["evidence"][1]["what"]
                   for f in mine), (spec, mine)
        assert code in (1, 3)


FAST = settings(max_examples=30, deadline=5000, suppress_health_check=[HealthCheck.too_slow])
SLOW = settings(max_examples=400, deadline=5000, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(trees())
def test_every_planted_read_is_a_finding_or_unresolved_and_nothing_escapes(spec):
    _check(spec)


@pytest.mark.slow
@SLOW
@given(trees(max_chain=14))
def test_every_planted_read_is_a_finding_or_unresolved_and_nothing_escapes_many_trees(spec):
    _check(spec)
