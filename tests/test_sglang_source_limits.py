"""The static reader at and past its limits: nothing cut is dropped, nothing odd crashes it.

The static reader at and past its limits (docs/sglang-reader.md, "Limits"): a read path a limit cuts is an
``unresolved_read_path`` finding naming the limit, never dropped; memoized walks do not depend on how a function was
first reached; odd declarations are unresolved quoting what they return; trees built to crash or hang the reader
(deep nesting, huge modules, FIFOs, devices, NUL bytes, an unreadable ForwardMode) give a note or a one-line error.
Each tree is built in tmp_path; none takes more than a fraction of a second."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sglang_reader_trees import ATTN, HEAD, READ, backend, build, chain, decode_calls, method, validate

from fencecheck.commands.main import main
from fencecheck.sglang_source import read_path, reads
from fencecheck.commands.sglang import exit_code
from fencecheck.sglang_source.extract import read_tree
from fencecheck.sglang_source.tree import Tree

MODULE = f"sglang/{ATTN}/x.py"


def _doc(root):
    return _read(root).to_json()


def _read(root):
    """The extraction of the tree at ``root``, its document checked against the schema."""
    ex = read_path(root)
    validate(ex.to_json())
    return ex


def _run(root, *argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(["sglang", str(root), *argv], out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def _found(doc, subject="X", mode="DECODE"):
    return {f["kind"]: f for f in doc["findings"] if f["subject"] == subject and f["mode"] == mode}


def _chain_tree(tmp_path, n, extra=()):
    return build(tmp_path, {f"{ATTN}/x.py": HEAD + backend("X", [decode_calls("h1"), *chain(n), *extra])})


# --- 1. no silent bound ------------------------------------------------------------------------------------------
def test_a_read_at_the_call_depth_limit_is_found_and_one_past_it_is_unresolved_naming_the_limit(tmp_path):
    """forward -> forward_decode -> h1 -> ... -> h7 reads: 8 calls below the entry, reads.MAX_DEPTH, a confirmed
    finding. One helper more: the call of h8 is cut, an unresolved finding citing it and the limit (the JSON, the
    summary, exit 3). Lowering the bound (to 5, say) makes the first case unresolved: this test fails."""
    assert reads.MAX_DEPTH == 8
    found = _found(_doc(_chain_tree(tmp_path / "a", 7)))
    assert set(found) == {"read_outside_declaration"} and found["read_outside_declaration"]["status"] == "confirmed"
    assert len(found["read_outside_declaration"]["evidence"][1]["what"].split(" -> ")) == 9  # forward .. h7

    root = _chain_tree(tmp_path / "b", 8)
    lines = (root / ATTN / "x.py").read_text("utf-8").splitlines()
    call = lines.index("        return self.h8(fb)") + 1  # h7's call of h8
    doc = _doc(root)
    (f,) = _found(doc).values()
    assert (f["kind"], f["status"], f["declared"]) == ("unresolved_read_path", "unresolved", "IN_REPLAY")
    cut = f["evidence"][1]
    assert (cut["file"], cut["line"]) == (MODULE, call)
    assert "self.h8" in cut["what"] and "the call depth limit (8 calls below the entry method" in cut["what"]
    (row,) = [r for r in next(b for b in doc["backends"] if b["class"] == "X")["cut_paths"] if r["mode"] == "DECODE"]
    assert (row["limit"], row["site"], row["what"], row["behind"]) == ("call depth", "in_graph_after_marker",
                                                                       "self.h8", None)
    entered = lines.index("        return self.h7(fb)") + 1  # a via entry: the function and the call entering it
    assert row["via"][-1] == f"X.h7 ({MODULE}:{entered})"
    code, out, err = _run(root, "--details")
    assert (code, err) == (3, "")
    assert "UNRESOLVED X DECODE: unresolved read path" in out and "read paths cut by a limit of the reader" in out


def test_a_cut_below_which_nothing_reads_is_no_finding(tmp_path):
    """Past the depth limit, helpers that name no shared map: nothing is lost, nothing is reported."""
    root = _chain_tree(tmp_path, 12, extra=())
    text = (root / ATTN / "x.py").read_text("utf-8").replace(READ, "fb.seq_lens")
    (root / ATTN / "x.py").write_text(text, "utf-8")
    doc = _doc(root)
    assert _found(doc) == {} and all(b["cut_paths"] == [] for b in doc["backends"])


def test_a_helper_first_reached_through_a_long_chain_is_walked_again_when_reached_directly(tmp_path):
    """The pre-replay prep reaches ``shared`` 8 calls deep, where its call of ``read`` is cut (an unresolved path,
    covered there anyway); forward_decode reaches the read in 3 calls. The memoized cut walk of ``shared`` is not
    reused: the short path's read is a confirmed finding."""
    prep = method("init_forward_metadata_out_graph", "return self.p1(forward_batch)",
                  "self, forward_batch, in_capture=False")
    src = HEAD + backend("X", [prep, *chain(7, "p", "return self.shared(fb)"), decode_calls("shared"),
                               method("shared", "return self.read(fb)"), method("read", f"return {READ}")])
    doc = _doc(build(tmp_path, {f"{ATTN}/x.py": src}))
    f = _found(doc)["read_outside_declaration"]
    assert f["status"] == "confirmed"
    assert f["evidence"][1]["what"].endswith("via AttentionBackend.forward -> X.forward_decode -> X.shared -> X.read")
    cut = next(b for b in doc["backends"] if b["class"] == "X")["cut_paths"]
    assert {(r["site"], r["what"]) for r in cut} == {("pre_replay", "self.read")}


def test_a_helper_first_walked_inside_a_recursion_is_walked_again_outside_it(tmp_path):
    """The prep calls a(), a calls b(), b calls a() again (not followed: a's reads are a's); forward_decode calls b()
    directly. b's walk inside the recursion is not reused: b -> a's read is a finding at in_graph_after_marker."""
    prep = method("init_forward_metadata_out_graph", "return self.a(forward_batch)",
                  "self, forward_batch, in_capture=False")
    src = HEAD + backend("X", [prep, method("a", f"self.b(fb)\nreturn {READ}"), method("b", "return self.a(fb)"),
                               decode_calls("b")])
    f = _found(_doc(build(tmp_path, {f"{ATTN}/x.py": src})))["read_outside_declaration"]
    assert f["status"] == "confirmed"
    assert f["evidence"][1]["what"].endswith("via AttentionBackend.forward -> X.forward_decode -> X.b -> X.a")


def test_read_paths_past_the_path_limit_are_replaced_by_one_cut(tmp_path):
    """A diamond of helpers, each calling the next twice, 7 levels: 128 paths to one read. With the path limit
    lowered to 10 the paths past it become one cut (an unresolved finding beside the confirmed one); with the limit
    as shipped the 128 paths are kept, in well under a second."""
    levels = [method(f"d{i}", f"self.d{i + 1}(fb)\nreturn self.d{i + 1}(fb)") for i in range(1, 7)]
    src = HEAD + backend("X", [decode_calls("d1"), *levels, method("d7", f"return {READ}")])
    root = build(tmp_path, {f"{ATTN}/x.py": src})
    walker = read_tree(Tree(root))
    assert _found(walker.to_json()).keys() == {"read_outside_declaration"}
    old = reads.MAX_PATHS
    reads.MAX_PATHS = 10
    try:
        doc = read_tree(Tree(root)).to_json()
    finally:
        reads.MAX_PATHS = old
    found = _found(doc)
    assert found.keys() == {"read_outside_declaration", "unresolved_read_path"}
    assert "the read path limit (10 paths per function" in found["unresolved_read_path"]["evidence"][1]["what"]


def test_the_walk_budget_cuts_calls_once_spent(tmp_path, monkeypatch):
    monkeypatch.setattr(reads, "MAX_WALKS", 3)
    doc = read_tree(Tree(_chain_tree(tmp_path, 4))).to_json()
    cut = [r for b in doc["backends"] for r in b["cut_paths"]]
    assert cut and {r["limit"] for r in cut} == {"function walks"}
    assert any(f["kind"] == "unresolved_read_path" and f["subject"] == "X" for f in doc["findings"])


# --- 2. declarations, recursion, files ------------------------------------------------------------------------------
ODD = [
    ("return 42", "returns `42`, not a SharedReadEnds member"),
    ("return None", "returns `None`, not a SharedReadEnds member"),
    ("return fm", "returns `fm` (the forward mode), not a SharedReadEnds member"),
    ("return SharedReadEnds.LATER", "returns `SharedReadEnds.LATER`, not a SharedReadEnds member"),
    ("return self.end", "returns `self.end`, not a SharedReadEnds member"),
    ("return 'x'", "returns `'x'`, not a SharedReadEnds member"),
    ("return SharedReadEnds.max_of([SharedReadEnds.PRE_REPLAY, 3])", "max_of over `3`, not a SharedReadEnds member"),
    ("return SharedReadEnds.max_of(b.shared_read_ends(fm) for b in (self, self))",
     "X.shared_read_ends calls itself: it never returns a value"),
    ("return self.shared_read_ends(fm)", "X.shared_read_ends calls itself: it never returns a value"),
]


@pytest.mark.parametrize("body,reason", ODD, ids=[b for b, _ in ODD])
def test_an_odd_declaration_is_unresolved_quoting_it(tmp_path, body, reason):
    src = HEAD + backend("X", [method("shared_read_ends", body, "self, fm"), decode_calls("h1"), *chain(1)])
    root = build(tmp_path, {f"{ATTN}/x.py": src})
    ex = _read(root)
    doc = ex.to_json()
    x = next(b for b in doc["backends"] if b["class"] == "X")
    (row,) = x["declares"]["DECODE"]
    assert (row["end"], row["reason"]) == ("unresolved", reason)
    assert _found(doc)["unresolved_declaration"]["status"] == "unresolved"
    assert exit_code(ex) == 3


def test_a_local_assigned_in_both_branches_of_an_if_gives_one_row_per_branch(tmp_path):
    body = """
        if self.eager:
            end = SharedReadEnds.POST_REPLAY
        else:
            end = SharedReadEnds.IN_REPLAY
        return end
    """
    src = HEAD + backend("X", [method("shared_read_ends", body, "self, fm"), decode_calls("h1"), *chain(1)])
    doc = _doc(build(tmp_path, {f"{ATTN}/x.py": src}))
    x = next(b for b in doc["backends"] if b["class"] == "X")
    assert x["declares"]["DECODE"] == [{"condition": "self.eager", "end": "POST_REPLAY"},
                                       {"condition": "not self.eager", "end": "IN_REPLAY"}]
    f = _found(doc)["read_outside_declaration"]
    assert (f["status"], f["condition"], f["declared"]) == ("plausible", "not self.eager", "IN_REPLAY")


NOTS = "not " * 500
DEEP = {
    "500 nested not in a declaration": (f"{ATTN}/x.py", HEAD + backend("X", [method(
        "shared_read_ends", f"if {NOTS}fm.is_decode():\n    return SharedReadEnds.UNKNOWN\nreturn SharedReadEnds.IN_REPLAY",
        "self, fm"), decode_calls("h1"), *chain(1)])),
    "a 2000-deep conditional expression in a forward": (f"{ATTN}/x.py", HEAD + backend("X", [method(
        "forward_decode", "x = " + "a if b else " * 2000 + f"c\nreturn {READ.replace('fb', 'forward_batch')}",
        "self, q, k, v, layer, forward_batch")])),
    "a 100,000-term sum in a module": (f"{ATTN}/x.py", HEAD + backend("X", [decode_calls("h1"), *chain(1)])
                                       + "\n\nY = " + " + ".join(["a"] * 100_000) + "\n"),
}


@pytest.mark.parametrize("case", list(DEEP))
def test_a_module_nested_too_deeply_is_a_note_naming_it_never_a_crash(tmp_path, case):
    rel, text = DEEP[case]
    root = build(tmp_path, {rel: text})
    code, out, err = _run(root, "--json")
    assert (code, err) == (3, "")
    doc = json.loads(out)
    (note,) = doc["notes"]
    assert note["file"] == f"sglang/{rel}" and note["unresolved"] and "not read" in note["what"]


def test_a_module_larger_than_the_input_limit_is_not_read_and_the_limit_is_atomics(tmp_path):
    from fencecheck.files.inputs import MAX_INPUT_BYTES

    padding = "".join(f"# {i:4} padding to make the module larger than the other modules\n" for i in range(60))
    root = build(tmp_path, {f"{ATTN}/x.py": HEAD + backend("X", [decode_calls("h1"), *chain(1)]) + padding})
    assert Tree(root).max_module_bytes == MAX_INPUT_BYTES
    ex = read_tree(Tree(root, max_module_bytes=2000))  # the common tree's modules are smaller
    doc = ex.to_json()
    assert "X" not in {b["class"] for b in doc["backends"]}
    assert doc["notes"] == [{"file": MODULE, "line": None, "unresolved": True,
                             "what": "larger than 2000 bytes (the limit of an input file, atomic.MAX_INPUT_BYTES): "
                                     "not read"}]
    assert exit_code(ex) == 3
    big = root / ATTN / "big.py"
    with open(big, "wb") as f:
        f.truncate(MAX_INPUT_BYTES + 1)  # sparse: nothing is written, nothing is read
    (note,) = [n for n in _doc(root)["notes"] if n["file"].endswith("big.py")]
    assert note["what"].startswith("larger than 16 MiB") and note["unresolved"]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_fifos_devices_and_links_to_no_file_are_skipped_with_a_note_and_nothing_blocks(tmp_path):
    root = build(tmp_path, {f"{ATTN}/late.py": HEAD + backend("X", [decode_calls("h1"), *chain(1)])})
    os.mkfifo(root / ATTN / "flashinfer_backend.py")  # a path the release catalog cites: --fingerprints reads it
    os.symlink("/dev/zero", root / "srt" / "zero.py")
    os.symlink(tmp_path / "missing", root / "srt" / "gone.py")
    os.symlink(tmp_path, root / "srt" / "elsewhere")
    proc = subprocess.run([sys.executable, "-m", "fencecheck", "sglang", str(root), "--json", "--fingerprints",
                           str(tmp_path / "prints.json")], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[1])
    assert proc.returncode == 1 and proc.stderr == ""  # X's finding; the link to a folder is unresolved
    notes = {n["file"]: (n["what"], n["unresolved"]) for n in json.loads(proc.stdout)["notes"]}
    assert notes == {
        f"sglang/{ATTN}/flashinfer_backend.py": ("a FIFO, not a regular file: skipped", False),
        "sglang/srt/zero.py": ("a character device (through a link), not a regular file: skipped", False),
        "sglang/srt/gone.py": ("a link to nothing readable (No such file or directory): skipped", False),
        "sglang/srt/elsewhere": ("a link to a folder: not followed, its modules are not read", True),
    }


def test_a_nul_byte_is_bad_input_naming_its_line_and_offset(tmp_path):
    text = HEAD + "class X(AttentionBackend):\n    x = 1\0\n"
    root = build(tmp_path, {f"{ATTN}/x.py": text})
    code, out, err = _run(root)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert f"x.py: line 5: not valid Python: a NUL byte at offset {text.index(chr(0))} (column 10)" in err


def test_a_class_hierarchy_deeper_than_the_mro_limit_is_cut_with_a_note(tmp_path):
    classes = [backend("C0", [decode_calls("h1"), *chain(1)])] + [
        f"class C{i}(C{i - 1}):\n    pass\n" for i in range(1, 300)]
    doc = _doc(build(tmp_path, {f"{ATTN}/x.py": HEAD + "\n".join(classes)}))
    assert _found(doc, "C50")["read_outside_declaration"]["status"] == "confirmed"
    cut = [n for n in doc["notes"] if "tree.MAX_MRO" in n["what"]]
    assert cut and all(n["unresolved"] for n in cut)
    assert _found(doc, "C299")["unresolved_declaration"]["evidence"][0]["what"].endswith(
        "shared_read_ends not found on C299's MRO")
    out, err = io.StringIO(), io.StringIO()
    again = build(tmp_path / "again", {f"{ATTN}/x.py": HEAD + "\n".join(classes)})
    code = main(["sglang", str(again), "--details"], out, err)
    assert code == 1 and err.getvalue() == ""  # the summary names a backend whose declaration is not found too
    assert "C299 (" in out.getvalue() and "where it is declared is not known" in out.getvalue()


# --- 3. forward modes ---------------------------------------------------------------------------------------------
FM = "srt/model_executor/forward_batch_info.py"


def _forward_modes(replace: tuple[str, str]) -> str:
    from sglang_reader_trees import TREES

    return (TREES / "common" / "sglang" / FM).read_text("utf-8").replace(*replace)


def test_a_forward_mode_enum_without_readable_members_is_an_unresolved_note(tmp_path):
    text = _forward_modes(("    EXTEND = auto()\n    DECODE = auto()\n    MIXED = auto()\n    IDLE = auto()\n"
                           "    TARGET_VERIFY = auto()\n    DRAFT_EXTEND_V2 = auto()\n", "    pass\n"))
    root = build(tmp_path, {FM: text, f"{ATTN}/x.py": HEAD + backend("X", [decode_calls("h1"), *chain(1)])})
    doc = _doc(root)
    assert doc["forward_modes"]["modes"] == [] and doc["findings"] == []
    (note,) = doc["notes"]
    assert note["unresolved"] and note["file"] == f"sglang/{FM}" and "no forward mode is checked" in note["what"]
    assert _run(root)[0] == 3


def test_a_forward_mode_the_vocabulary_does_not_know_is_noted_and_its_finding_says_why_no_scenario(tmp_path):
    text = _forward_modes(("    DRAFT_EXTEND_V2 = auto()\n", "    DRAFT_EXTEND_V2 = auto()\n    TURBO = auto()\n"))
    root = build(tmp_path, {FM: text, f"{ATTN}/x.py": HEAD + backend("X", [
        method("shared_read_ends", "return SharedReadEnds.IN_REPLAY", "self, fm"), decode_calls("h1"),
        method("forward_extend", "return self.h1(forward_batch)", "self, q, k, v, layer, forward_batch"),
        *chain(1)])})
    code, out, _ = _run(root, "--json")
    doc = json.loads(out)
    (note,) = doc["notes"]
    assert "forward mode TURBO is not one fencecheck's vocabulary knows" in note["what"] and not note["unresolved"]
    f = _found(doc, mode="TURBO")["read_outside_declaration"]
    assert f["scenario"] is None and f["why"].startswith("no scenario: forward mode TURBO")
    assert code == 1


# --- 5. faults the fast loop catches as the release tests do -----------------------------------------------------------------
def test_forward_mode_predicates_evaluate_or_as_or(tmp_path):
    """``is_extend`` is an ``or`` of comparisons (the common tree's, as SGLang's): evaluating it as an ``and`` makes
    every mode not extend, and this test fails."""
    from fencecheck.sglang_source.declare import Modes

    modes = Modes(Tree(build(tmp_path, {})))
    extend = {m for m in modes.members if modes.predicate("is_extend", m)}
    assert extend == {"EXTEND", "MIXED", "TARGET_VERIFY"}
    assert {m for m in modes.members if modes.predicate("is_extend", m, {"include_draft_extend_v2": True})} == \
        extend | {"DRAFT_EXTEND_V2"}


TWICE = '''\
from sglang.srt.speculative.runners import AlwaysPublishingRunner


class TwiceWorker:
    def __init__(self, target_worker, draft_model_runner):
        self.draft_model_runner = draft_model_runner
        self.draft_runner_first = AlwaysPublishingRunner()
        self.draft_runner_second = AlwaysPublishingRunner()
        self.req_to_token_pool = target_worker.req_to_token_pool

    @property
    def last_shared_read_runner(self):
        return self.draft_model_runner

    def forward_batch_generation(self, batch, on_publish=None):
        self.draft_runner_first.execute(batch)
        between = self.req_to_token_pool.req_to_token[batch.req_pool_indices]
        self.draft_runner_second.execute(batch)
        batch.after = self.req_to_token_pool.req_to_token[batch.req_pool_indices]
        return between
'''


def test_worker_reads_are_ordered_against_the_last_publishing_phase_not_the_first(tmp_path):
    """Two draft phases publish; a read lies between them, another after both. Only the second is after the
    publisher's runner (the last phase on its side that publishes): taking the first phase lists both."""
    from sglang_reader_trees import TREES

    spec = (TREES / "algorithms" / "sglang" / "srt" / "speculative" / "spec_info.py").read_text("utf-8").replace(
        "        return load_plugin_worker(self.name)",
        "        if self == SpeculativeAlgorithm.GAMMA:\n            from sglang.srt.speculative.twice import "
        "TwiceWorker\n\n            return TwiceWorker\n        return load_plugin_worker(self.name)")
    root = build(tmp_path, {"srt/speculative/spec_info.py": spec, "srt/speculative/twice.py": TWICE},
                 case="algorithms")
    (gamma,) = [a.to_json() for a in read_path(root).algorithms if a.name == "GAMMA"]
    assert [(p["runner"], p["line"]) for p in gamma["phases"]] == [
        ("TwiceWorker.draft_runner_first", 16), ("TwiceWorker.draft_runner_second", 18)]
    assert [(r["line"], r["after"]["line"]) for r in gamma["reads_after_publisher"]] == [(19, 18)]


def test_a_forward_mode_predicate_calling_itself_is_not_known_whichever_is_asked_first(tmp_path):
    """is_a() or-s is_b(), is_b() calls is_a(): at run time neither returns. Asked first about is_b (in whose
    evaluation is_a's guard answered None), is_b must not keep a value computed under that guard."""
    from fencecheck.sglang_source.declare import Modes

    text = _forward_modes(("    def is_decode(self):", "    def is_a(self):\n        return self.is_b() or "
                           "self == ForwardMode.DECODE\n\n    def is_b(self):\n        return self.is_a()\n\n"
                           "    def is_decode(self):"))
    modes = Modes(Tree(build(tmp_path, {FM: text})))
    assert modes.predicate("is_b", "DECODE") is None and modes.predicate("is_a", "DECODE") is None
    assert modes.predicate("is_decode", "DECODE") is True


def test_a_helper_re_exported_past_the_bound_is_an_unresolved_note(tmp_path):
    """The read sits in a helper imported through 10 modules that re-export it: past tree.MAX_REEXPORTS the call is
    not resolved, which the notes say (exit 3 instead of a silent 0)."""
    files = {f"{ATTN}/r0.py": f"def helper(owner, fb):\n    return owner.{READ.replace('self.', '')}\n"}
    for i in range(1, 11):
        files[f"{ATTN}/r{i}.py"] = f"from sglang.srt.layers.attention.r{i - 1} import helper\n"
    files[f"{ATTN}/x.py"] = (HEAD + "from sglang.srt.layers.attention.r10 import helper\n\n\n"
                             + backend("X", [decode_calls("h1"), *chain(1, last="return helper(self, fb)")]))
    ex = _read(build(tmp_path, files))
    doc = ex.to_json()
    assert "read_outside_declaration" not in _found(doc)
    (note,) = [n for n in doc["notes"] if "tree.MAX_REEXPORTS" in n["what"]]
    assert note["unresolved"] and exit_code(ex) == 3


def test_a_composite_whose_other_child_is_of_unknown_class_is_unresolved_where_its_known_child_reads_late(tmp_path):
    """max_of(self.late, self.other): late is a backend reading after the marker, other is handed in (unknown). The
    row ends at IN_REPLAY at the least (late's end): the late read is an unresolved declaration of the composite,
    not silence; with other's class known, it is a confirmed finding."""
    late = backend("Late", [decode_calls("h1"), *chain(1)])
    comp = backend("Comp", [
        method("__init__", "self.late = Late(fb)\nself.other = other", "self, fb, other"),
        method("shared_read_ends", "return SharedReadEnds.max_of(b.shared_read_ends(fm) for b in "
                                   "(self.late, self.other))", "self, fm"),
        method("forward_decode", "return self.late.forward_decode(q, k, v, layer, forward_batch)",
               "self, q, k, v, layer, forward_batch")])
    doc = _doc(build(tmp_path / "a", {f"{ATTN}/x.py": HEAD + late + "\n\n" + comp}))
    f = _found(doc, "Comp")
    assert set(f) == {"unresolved_declaration"}
    decl, read = f["unresolved_declaration"]["evidence"]
    assert "a child of unknown class" in decl["what"] and "ends at IN_REPLAY at the least" in decl["what"]
    assert read["what"].startswith("reads req_to_token at in_graph_after_marker via")
    known = comp.replace("self.other = other", "self.other = Late(fb)")
    f = _found(_doc(build(tmp_path / "b", {f"{ATTN}/x.py": HEAD + late + "\n\n" + known})), "Comp")
    assert set(f) == {"read_outside_declaration"} and f["read_outside_declaration"]["status"] == "confirmed"


@pytest.mark.parametrize("newline", ["\r\n", "\r"])
def test_modules_with_other_line_breaks_are_read_and_measured_by_pythons_lines(tmp_path, newline):
    """Python counts \\r\\n and a lone \\r as line breaks: the nesting check measures with the same lines, so such a
    module is read (its finding at the read's line) and a deep one is told at its line."""
    text = (HEAD + backend("X", [decode_calls("h1"), *chain(1)])).replace("\n", newline)
    deep = "Y = " + " + ".join(["b"] * 200) + newline
    doc = _doc(build(tmp_path / "a", {f"{ATTN}/x.py": text}))
    read = text.split(newline).index("        return self.req_to_token[fb.req_pool_indices]") + 1
    assert _found(doc)["read_outside_declaration"]["evidence"][1]["line"] == read
    doc = _doc(build(tmp_path / "b", {f"{ATTN}/x.py": text + deep}))
    (note,) = doc["notes"]
    assert note["line"] == text.count(newline) + 1 and "files.MAX_NESTING" in note["what"]


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_a_module_starting_with_a_utf8_bom_is_read_as_python_reads_it(tmp_path, newline):
    """Python's source decoding drops a leading UTF-8 BOM: such a module gives the same document and output as
    without it (the same lines and columns, searches, suppressions), a non-ASCII text after it too."""
    body = HEAD + backend("X", [decode_calls("h1"), *chain(1)]) + "# r\u00e9sum\u00e9\n"
    body = body.replace("\n", newline)
    docs, outs = [], []
    for name, text in (("plain", body), ("bom", "\ufeff" + body)):
        root = build(tmp_path / name, {f"{ATTN}/x.py": text})
        docs.append(json.dumps(_doc(root)).replace(str(root.resolve()), "ROOT").replace(str(root), "ROOT"))
        code, out, err = _run(root, "--json")
        assert err == "" and code in (0, 1, 3), err
        outs.append((code, out.replace(str(root.resolve()), "ROOT").replace(str(root), "ROOT")))
    assert docs[0] == docs[1] and outs[0] == outs[1]
    assert "read_outside_declaration" in _found(json.loads(docs[1]))


def test_a_worker_read_path_past_the_depth_limit_is_listed_as_unresolved(tmp_path):
    """The worker's read after the publisher's runner lies 9 calls below forward_batch_generation: it is not
    followed, and the algorithm's unresolved list names the cut call and the limit."""
    from sglang_reader_trees import TREES

    deep = TWICE.replace("        batch.after = self.req_to_token_pool.req_to_token[batch.req_pool_indices]\n",
                         "        batch.after = self.c1(batch)\n")
    deep += "".join(f"\n    def c{i}(self, batch):\n        return self.c{i + 1}(batch)\n" for i in range(1, 9))
    deep += "\n    def c9(self, batch):\n        return self.req_to_token_pool.req_to_token[batch.req_pool_indices]\n"
    spec = (TREES / "algorithms" / "sglang" / "srt" / "speculative" / "spec_info.py").read_text("utf-8").replace(
        "        return load_plugin_worker(self.name)",
        "        if self == SpeculativeAlgorithm.GAMMA:\n            from sglang.srt.speculative.twice import "
        "TwiceWorker\n\n            return TwiceWorker\n        return load_plugin_worker(self.name)")
    root = build(tmp_path, {"srt/speculative/spec_info.py": spec, "srt/speculative/twice.py": deep},
                 case="algorithms")
    (gamma,) = [a.to_json() for a in read_path(root).algorithms if a.name == "GAMMA"]
    assert [r["line"] for r in gamma["reads_after_publisher"]] == []
    (cut,) = [u for u in gamma["unresolved"] if u.startswith("a read path of TwiceWorker cut")]
    assert "self.c9 (sglang/srt/speculative/twice.py:" in cut and "the call depth limit" in cut


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=40).map(lambda b: bytes(b"ab\r\n\x0b\x0c\x1c\x85 "[x % 9] for x in b)))
def test_the_line_table_breaks_where_python_s_line_numbers_do(data):
    """``line_starts`` (what ``too_deep`` measures spans with) begins a line after each ``\\r\\n``, ``\\r`` and
    ``\\n`` and nowhere else (form feeds, vertical tabs and the other characters ``str.splitlines`` breaks at are
    no line break to Python's tokenizer)."""
    import re

    from fencecheck.sglang_source.tree_files import line_starts

    assert line_starts(data) == [0, 0, *(m.end() for m in re.finditer(rb"\r\n|\r|\n", data))]


def test_the_reader_s_walk_is_ast_walk_in_its_order():
    """``walk_nodes`` gives the nodes ``ast.walk`` gives, the same objects in the same order (breadth first), on a
    module of every kind of statement and expression this file has."""
    import ast

    from fencecheck.sglang_source.tree import walk_nodes

    for text in (Path(__file__).read_text(), Path(ast.__file__).read_text(), "x = 1", ""):
        tree = ast.parse(text)
        assert [id(n) for n in walk_nodes(tree)] == [id(n) for n in ast.walk(tree)]


def _texts():
    import ast

    return (Path(__file__).read_text(), Path(ast.__file__).read_text(), "x = 1", "")


def test_the_reader_s_parent_map_is_the_child_walk_s():
    """``constructed.parent_map`` maps each child to the parent ``ast.iter_child_nodes`` gives it over ``ast.walk``
    (the last one, for the context objects Python shares), for every node."""
    import ast

    from fencecheck.sglang_source.constructed import parent_map
    from fencecheck.sglang_source.tree import walk_nodes

    for text in _texts():
        tree = ast.parse(text)
        assert parent_map(walk_nodes(tree)) == {id(k): n for n in ast.walk(tree) for k in ast.iter_child_nodes(n)}


def test_a_node_s_kept_walk_is_its_walk_and_is_kept_once():
    import ast

    from fencecheck.sglang_source.tree import walk_once

    tree = ast.parse(Path(__file__).read_text())
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef))
    first = walk_once(fn)
    assert [id(n) for n in first] == [id(n) for n in ast.walk(fn)] and walk_once(fn) is first


def test_a_copied_node_is_the_node_without_the_reader_s_marks():
    """``tree.copy_node`` copies every field and position (``ast.dump`` with them is the same), shares no node with
    the original, and leaves out what the reader hangs on nodes (``_fc_parent``, whose ``copy.deepcopy`` would take
    the copy up to the module)."""
    import ast
    import copy

    from fencecheck.sglang_source.reads import _walk_no_defs
    from fencecheck.sglang_source.tree import copy_node

    for text in _texts():
        tree = ast.parse(text)
        for fn in [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)][:40]:
            _walk_no_defs(fn)  # sets _fc_parent on the nodes below fn
        for node in [tree, *[n for n in ast.walk(tree) if isinstance(n, ast.expr)][:300]]:
            got = copy_node(node)
            assert ast.dump(got, include_attributes=True) == ast.dump(copy.deepcopy(node), include_attributes=True)
            assert not {id(n) for n in ast.walk(got)} & {id(n) for n in ast.walk(node) if not isinstance(
                n, (ast.expr_context, ast.operator, ast.boolop, ast.unaryop, ast.cmpop))}
            assert not any("_fc_parent" in vars(n) for n in ast.walk(got))


def test_the_self_stores_index_is_the_per_attribute_walk(tmp_path):
    """``attributes.self_assignments`` (from one index per class) gives, for each attribute, the statements a walk of
    the class's methods for that attribute gives, in its order, with the same "unconditional in __init__" flag."""
    import ast

    from fencecheck.sglang_source.attributes import _targets, self_assignments

    text = (
        "class A:\n"
        "    def __init__(self, x):\n"
        "        self.a = 1\n"
        "        self.b: int = 2\n"
        "        self.a, self.c = x\n"
        "        with x:\n"
        "            self.d = 3\n"
        "        if x:\n"
        "            self.e = 4\n"
        "        self.f += 1\n"
        "        self.g = self.g2 = 5\n"
        "        other.h = 6\n"
        "    def m(self):\n"
        "        self.a = 7\n"
        "        def inner():\n"
        "            self.e = 8\n"
        "        [self.i] = [9]\n"
    )
    (tmp_path / "sglang").mkdir()
    (tmp_path / "sglang" / "__init__.py").write_text("")
    (tmp_path / "sglang" / "m.py").write_text(text)
    tree = Tree(tmp_path / "sglang")
    ci = tree.module("sglang.m").classes["A"]

    def slow(attr):
        out = []
        for name, fn in ci.methods.items():
            top = set()
            if name == "__init__":
                for s in fn.body:
                    top.add(id(s))
                    if isinstance(s, (ast.With, ast.AsyncWith)):
                        top |= {id(x) for x in s.body}
            for n in ast.walk(fn):
                if any(isinstance(t, ast.Attribute) and t.attr == attr and isinstance(t.value, ast.Name)
                       and t.value.id == "self" for t in _targets(n)):
                    out.append((name, n, id(n) in top and isinstance(n, (ast.Assign, ast.AnnAssign))))
        return out

    for attr in ("a", "b", "c", "d", "e", "f", "g", "g2", "h", "i", "z"):
        assert self_assignments(tree, ci, attr) == slow(attr), attr
    assert [(m, u) for m, _, u in self_assignments(tree, ci, "a")] == [("__init__", True), ("m", False)]
    assert [u for _, _, u in self_assignments(tree, ci, "b") + self_assignments(tree, ci, "d")] == [True, True]
    assert [u for _, _, u in self_assignments(tree, ci, "e") + self_assignments(tree, ci, "f")] == [False, False, False]
