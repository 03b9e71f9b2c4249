"""``fencecheck verify``: a backend file in its symbolic and catalog contexts, its findings and verified advice."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from fencecheck.files.catalog import PR_ERA, load_catalog
from fencecheck.commands.main import main
from fencecheck.model.backend_facts import child_findings, mode_facts
from fencecheck.model.symconfig import Bounds
from fencecheck.model.verify import verify
from fencecheck.reference.check import check_scenario
from fencecheck.verdict import Verdict
from fencecheck.scenario import BackendSpec
from fencecheck.files.scenario_io import load, load_backend
from fencecheck.vocab import ForwardMode, ReadSite, SharedReadEnds

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SMALL = Bounds(steps=1, phases=2, runners=2)


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    return main(list(argv), out, err), out.getvalue(), err.getvalue()


def catalog(*names):
    return [s for s in load_catalog(PR_ERA) if s.name in names]


# -- the format ---------------------------------------------------------------------------------------------------


def test_composite_declares_max_of_its_children_and_names_the_child_at_fault():
    bf = load_backend(EXAMPLES / "composite-backend.toml")
    [f] = mode_facts(bf)
    assert f.mode is ForwardMode.DECODE and f.declared is SharedReadEnds.IN_REPLAY
    assert f.readers[(ReadSite.IN_GRAPH_AFTER_MARKER, "req_to_token")] == ("gather",)
    assert not f.honest
    assert child_findings(bf, [f]) == [
        "child gather: DECODE: reads req_to_token at in_graph_after_marker, outside what its own IN_REPLAY covers "
        "(outside what DECODE IN_REPLAY covers too)"]


def test_hybrid_takes_each_mode_from_its_delegate():
    bf = load_backend(EXAMPLES / "hybrid-backend.toml")
    facts = {f.mode: f for f in mode_facts(bf)}
    assert facts[ForwardMode.DECODE].declared_by == "full" and facts[ForwardMode.DECODE].honest
    assert facts[ForwardMode.TARGET_VERIFY].declared_by == "linear"
    assert facts[ForwardMode.TARGET_VERIFY].readers[(ReadSite.IN_GRAPH_AFTER_MARKER, "req_to_token")] == ("linear",)


@pytest.mark.parametrize("text, key", [
    ('name = "x"\nchildren = ["y"]\n', "children[0]"),
    ('name = "x"\ndelegate = { DECODE = "y" }\n', "delegate.DECODE"),
    ('name = "x"\nchildren = ["a"]\n[backends.a]\ndelegate = { DECODE = "x" }\n', "backends.a.delegate.DECODE"),
    ('name = "x"\nchildren = ["a"]\n[backends.a]\nchildren = ["b"]\n[backends.b]\nchildren = ["a"]\n', "backends."),
    ('name = "x"\nchildren = ["a"]\n[backends.a]\n[backends.b]\n', "backends.b"),
    ('name = "x"\n[backends.a]\nreads.DECODE = { nowhere = ["t"] }\n', "backends.a.reads.DECODE.nowhere"),
])
def test_bad_backend_files_get_one_line_naming_the_key(tmp_path, text, key):
    bad = tmp_path / "b.toml"
    bad.write_text(text)
    code, out, err = run("verify", str(bad))
    assert code == 2 and err.count("\n") == 1 and f"{bad}: {key}" in err, err


def test_schema_kinds():
    code, out, _ = run("schema", "--kind", "backend")
    schema = json.loads(out)
    assert code == 0 and schema["title"] == "fencecheck backend"
    assert {"children", "delegate", "backends"} <= set(schema["properties"])
    assert json.loads(run("schema")[1])["title"] == "fencecheck scenario"


def test_every_example_is_a_valid_backend_file():
    for path in EXAMPLES.glob("*.toml"):
        assert load_backend(path).name


# -- verdicts on small bounds -------------------------------------------------------------------------------------


def test_composite_race_in_a_catalog_context_is_the_gather_childs():
    bf = load_backend(EXAMPLES / "composite-backend.toml")
    r = verify(bf, catalog("plain-decode"), bounds=SMALL, advice=False)
    assert r.verdict is Verdict.COUNTEREXAMPLE
    [c] = r.contexts
    assert {x.place().text() for x in c.brought} == {"req_to_token@decode/in_graph_after_marker"}
    assert any(line.startswith("DECODE: gather reads req_to_token at in_graph_after_marker") for line in r.findings)


def test_a_context_that_races_on_its_own_is_listed_not_skipped():
    bf = load_backend(EXAMPLES / "honest-backend.toml")
    r = verify(bf, catalog("barrier-disabled"), bounds=SMALL, advice=False)
    [c] = r.contexts
    assert c.own_verdict is Verdict.COUNTEREXAMPLE and c.report.verdict is Verdict.COUNTEREXAMPLE
    assert c.safe and not c.brought and c.failed == ["barrier_on"] and c.races_anyway


def test_a_race_the_backend_brings_where_every_read_races_is_not_the_backends():
    bf = load_backend(EXAMPLES / "dishonest-backend.toml")
    r = verify(bf, catalog("barrier-disabled", "plain-decode"), bounds=SMALL, advice=False)
    by = {c.scenario: c for c in r.contexts}
    # every honest declaration of its reads races there too: the context's own, nothing the backend brings
    assert not by["barrier-disabled"].brought and by["barrier-disabled"].safe
    assert {r.place() for r in by["barrier-disabled"].report.races} <= by["barrier-disabled"].honest
    assert not by["plain-decode"].safe and not by["plain-decode"].failed


def test_dspark_fails_the_last_reader_publishes_assumption():
    bf = load_backend(EXAMPLES / "over-declared-backend.toml")
    r = verify(bf, catalog("dspark"), bounds=SMALL, advice=False)
    [c] = r.contexts
    assert c.failed == ["last_reader_publishes"]
    assert {x.place().text() for x in c.brought} == {"req_to_token@idle/pre_replay",
                                                     "req_to_token@idle/in_graph_before_marker"}
    idle = c.phase_of(c.brought[0])
    assert idle.mode is ForwardMode.IDLE and idle.resolved is SharedReadEnds.UNKNOWN and idle.publisher == "target"


def test_advice_is_verified_over_the_same_contexts():
    bf = load_backend(EXAMPLES / "over-declared-backend.toml")
    r = verify(bf, catalog("dspark", "plain-decode"), bounds=SMALL)
    [a] = r.advice
    assert a.change == "declare IN_REPLAY for TARGET_VERIFY" and a.check.safe
    assert a.check.text() == "safe in all 2 contexts (the symbolic family and 1 catalog scenarios)"
    assert "PRE_REPLAY instead: races in 1 of 1 catalog scenarios: dspark (req_to_token@idle/in_graph_before_marker; " \
           "req_to_token@idle/pre_replay) (the symbolic family not checked: a race in the catalog already refutes " \
           "the change)" in a.why


def test_a_change_refuted_by_the_catalog_is_not_checked_over_the_symbolic_family(monkeypatch):
    """The symbolic family is asked only for a change that is safe in every catalog context: the search's cost."""
    import fencecheck.model.symbolic_contexts as sc

    asked = []
    real = sc.symbolic_verdict
    monkeypatch.setattr(sc, "symbolic_verdict", lambda facts, *a: asked.append(facts) or real(facts, *a))
    bf = load_backend(EXAMPLES / "over-declared-backend.toml")
    r = verify(bf, catalog("dspark", "plain-decode"), bounds=SMALL)
    [a] = r.advice
    # PRE_REPLAY races in dspark: refuted there, never asked of the symbolic family; IN_REPLAY asked and proved
    assert len(asked) == 1 and {f.declared for f in asked[0]} >= {SharedReadEnds.IN_REPLAY}
    assert a.check.symbolic is Verdict.PROVED


def test_an_unknown_declaration_gets_a_verified_one():
    from fencecheck.scenario import BackendSpec

    b = BackendSpec("idle-reader", reads={"IDLE": {ReadSite.PRE_REPLAY: ("req_to_token",)}})
    r = verify(b, catalog("dspark"), bounds=SMALL)
    assert [a.change for a in r.advice] == ["declare PRE_REPLAY for IDLE"]
    assert r.advice[0].check.safe and r.advice[0].why.startswith("UNKNOWN (unaudited) publishes no event")


# -- the command --------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_honest_backend_is_proved_in_every_context():
    code, out, _ = run("verify", str(EXAMPLES / "honest-backend.toml"), "--catalog", PR_ERA)
    assert code == 0
    assert "proved race-free under resolution declaration_only_post_fallback and the assumptions " \
           "named_runner_is_last_reader, sound_fallback" in out and "COUNTEREXAMPLE under" not in out
    assert "  barrier-disabled: races with any backend  [outside the symbolic proof: fails barrier_on]\n" \
           "    every backend that reads req_to_token races here (each read site, each declaration tried); the " \
           "scheduler must change: turn the WAR barrier on; verified: with it no read of this backend races in " \
           "barrier-disabled\n" in out
    assert "  dspark-target-fixed: adds no race  [outside the symbolic proof: fails named_runner_is_last_reader, " \
           "last_reader_publishes]\n" in out
    assert "  plan-stream-unjoined: adds no race  " \
           "[outside the symbolic proof: fails plan_stream_joined_before_replay]\n" \
           "    races on its own (catalog verdict counterexample): req_to_token@verify/pre_replay; " \
           "with this backend it " \
           "still races at: req_to_token@verify/pre_replay" in out


@pytest.mark.slow
def test_dishonest_backend_gets_a_replayable_counterexample_numbered_as_reported(tmp_path):
    target = tmp_path / "ce.toml"
    code, out, err = run("verify", str(EXAMPLES / "dishonest-backend.toml"), "-o", str(target), "--progress", "--catalog", PR_ERA)
    assert code == 1
    assert "verify gathers-in-kernels" in err  # the progress bar, asked for on a stderr that is not a terminal
    assert "the read of req_to_token by phase0 at in_graph_after_marker in step 1 races" in out
    assert "  the read of req_to_token by step 1 phase 'phase0' at in_graph_after_marker" in out
    assert "  plain-decode: COUNTEREXAMPLE\n    race: req_to_token@decode/in_graph_after_marker in step 1" in out
    assert "advice: move the read of req_to_token at in_graph_after_marker in DECODE out of the graph (pre_replay) " \
           "in gathers-in-kernels: safe in all" in out
    s = load(target)
    assert [(r.site, r.step) for r in s.expect.races] == [("in_graph_after_marker", 1)]
    report = check_scenario(s)
    assert {r.site for r in report.races} == {"in_graph_after_marker"}


@pytest.mark.slow
def test_over_declared_backend_gets_verified_advice_and_the_dspark_explanation():
    code, out, _ = run("verify", str(EXAMPLES / "over-declared-backend.toml"), "--catalog", PR_ERA)
    assert code == 1
    assert "dspark: COUNTEREXAMPLE  [outside the symbolic proof: fails last_reader_publishes]" in out
    assert "race: req_to_token@idle/pre_replay in step 2: idle (IDLE on runner target" in out
    assert "it resolves UNKNOWN and publishes nothing; so the barrier waits on the event left in runner target's " \
           "mailbox by step 1's verify (TARGET_VERIFY, backend page-table-prebuilt, resolved POST_REPLAY), " \
           "which step 1's barrier did not reset because that step named runner draft" in out
    assert "missing edge: F kernel #4 (pre_replay) -> S op 27: S never waited on F work of step 2" in out
    assert "advice: declare IN_REPLAY for TARGET_VERIFY: safe in all 18 contexts" in out
    assert "PRE_REPLAY instead: races in 1 of 17 catalog scenarios: dspark (req_to_token@idle/in_graph_before_marker; " \
           "req_to_token@idle/pre_replay) (the symbolic family not checked" in out


@pytest.mark.slow
def test_json_shape():
    code, out, err = run("verify", str(EXAMPLES / "composite-backend.toml"), "--json", "--catalog", PR_ERA)
    data = json.loads(out)
    assert code == 1 and err == ""
    assert set(data) == {"backend", "modes", "symbolic", "contexts", "findings", "advice", "safe"}
    assert data["symbolic"]["rule"] == "declaration_only_post_fallback"
    assert "honest_declarations" not in data["symbolic"]["assumptions"]
    plain = next(c for c in data["contexts"] if c["scenario"] == "plain-decode")
    assert set(plain["brought"][0]) == {"location", "phase", "site", "step", "phase_facts", "readers", "explanation"}
    assert plain["brought"][0]["readers"] == ["gather"]
    assert "backend paged-composite, the backend under test; the read is gather's" in plain["brought"][0]["phase_facts"]
    assert plain["brought"][0]["site"] == "in_graph_after_marker" and plain["brought"][0]["step"] == 1
    assert data["symbolic"]["verdict"] == "counterexample"
    assert data["symbolic"]["explanation"]["read"].startswith("read of req_to_token by step 1 phase 'phase0'")
    assert any(a["verification"] and a["verification"]["safe"] for a in data["advice"])
    assert data["findings"][0].startswith("child gather: DECODE")
    assert plain["brought"][0]["explanation"]["missing_edge"].startswith("F kernel")


def test_the_backend_schema_document_is_generated_from_the_declarations():
    from fencecheck.schema import BACKEND_SCHEMA

    doc = Path(__file__).resolve().parents[1] / "docs" / "backend.schema.json"
    assert json.loads(doc.read_text(encoding="utf-8")) == BACKEND_SCHEMA


def test_a_composite_backend_file_given_to_check_says_where_it_belongs():
    code, out, err = run("check", str(EXAMPLES / "composite-backend.toml"))
    assert code == 2 and "this is a backend file, not a scenario: give it to `fencecheck verify`" in err


@pytest.mark.slow
def test_hybrid_names_the_delegate_at_fault_and_advises_only_the_mode_in_the_race():
    code, out, _ = run("verify", str(EXAMPLES / "hybrid-backend.toml"), "--catalog", PR_ERA)
    assert code == 1
    assert "  TARGET_VERIFY: declares IN_REPLAY (from linear); reads pre_replay: req_to_token, in_graph_after_marker: " \
           "req_to_token; OUTSIDE what IN_REPLAY covers" in out
    assert "backend hybrid-linear, the backend under test; the read is linear's" in out
    assert "advice: move the read of req_to_token at in_graph_after_marker in TARGET_VERIFY out of the graph " \
           "(pre_replay) in linear: safe in all 27 contexts" in out
    assert "for DECODE" not in out


# -- contexts that race whatever the backend does, and changes outside the backend ---------------------------------

DECODE_ONLY = BackendSpec("decode-only", reads={"DECODE": {ReadSite.PRE_REPLAY: ("req_to_token",),
                                                          ReadSite.IN_GRAPH_BEFORE_MARKER: ("req_to_token",)}})


def prefetch_reads_nothing():
    """dspark-target-fixed with a draft prefetch whose backend reads nothing: race-free on its own (the target, named
    on every step, runs the last reading phase), until a DECODE backend that reads runs the prefetch."""
    import dataclasses

    base = catalog("dspark-target-fixed")[0]
    steps = {k: tuple(dataclasses.replace(p, backend="prefetch") if p.name == "draft_prefetch" else p for p in ph)
             for k, ph in base.algorithm.steps.items()}
    return base.replace(name="dspark-prefetch-reads-nothing",
                        backends={**base.backends, "prefetch": BackendSpec("prefetch")}, algorithm=dataclasses.replace(base.algorithm, steps=steps), expect=None)


def test_a_context_that_races_with_any_backend_is_found_by_checking_every_stand_in():
    from fencecheck.model.decision import Decisions
    from fencecheck.model.swap import races_whatever_the_backend, stand_ins, swap_into

    facts = mode_facts(DECODE_ONLY)
    assert [d for d, _ in stand_ins(DECODE_ONLY, facts)] == [(d,) for d in SharedReadEnds]  # UNKNOWN included
    assert all(set(x.reads["DECODE"]) == set(ReadSite) for _, x in stand_ins(DECODE_ONLY, facts))
    decide = Decisions()
    [off] = catalog("barrier-disabled")
    assert races_whatever_the_backend(off, DECODE_ONLY, facts, decide)
    # dspark-target-fixed names the target, so whatever the draft prefetch's backend does, its reads race.
    assert races_whatever_the_backend(catalog("dspark-target-fixed")[0], DECODE_ONLY, facts, decide)
    # plan-stream-unjoined races on its own at its verify's pre_replay read, but a backend that reads only inside
    # the graph is race-free there: not a context that races whatever the backend does.
    bf = load_backend(EXAMPLES / "honest-backend.toml")
    [unjoined] = catalog("plan-stream-unjoined")
    assert not races_whatever_the_backend(unjoined, bf, mode_facts(bf), decide)
    r = verify(bf, [unjoined], bounds=SMALL, advice=False)
    [c] = r.contexts
    assert c.report.verdict is Verdict.COUNTEREXAMPLE and not c.races_anyway and c.component is None and c.safe
    # and a backend that does not read where plain-decode's reads race is told apart from one that does:
    in_graph = BackendSpec("in-graph", reads={"TARGET_VERIFY": {ReadSite.IN_GRAPH_BEFORE_MARKER: ("req_to_token",)}})
    sw = swap_into(unjoined, in_graph, {ForwardMode.TARGET_VERIFY})
    assert decide(sw).report.verdict is Verdict.PROVED


def test_a_context_racing_on_its_own_with_any_backend_names_the_verified_component_change():
    r = verify(DECODE_ONLY, catalog("barrier-disabled"), bounds=SMALL, advice=False)
    [c] = r.contexts
    assert c.races_anyway and c.safe  # it races on its own: not the backend's race
    assert c.component.text() == ("the scheduler must change: turn the WAR barrier on; verified: with it no read of "
                                  "this backend races in barrier-disabled")
    assert c.component.to_dict() == {"scenario": "barrier-disabled", "assumptions": ["barrier_on"],
                                     "component": "the scheduler", "change": "turn the WAR barrier on",
                                     "verified": True, "races": []}


def test_a_context_racing_with_an_honest_backend_too_is_the_context_s_and_names_its_verified_change():
    """A context race-free on its own whose publisher is wrong for every backend reading the location (the honest
    one included) is the context's own: it does not fail the backend, and the change outside the backend that fixes
    it is still named and verified."""
    ctx = prefetch_reads_nothing()
    r = verify(DECODE_ONLY, [ctx, *catalog("plain-decode")], bounds=SMALL)
    c = r.contexts[0]
    assert c.own_verdict is Verdict.PROVED and c.races_anyway and c.safe and r.safe and not c.brought
    assert {x.place().text() for x in c.report.races} == {"req_to_token@draft_prefetch/pre_replay",
                                                          "req_to_token@draft_prefetch/in_graph_before_marker"}
    assert {x.place() for x in c.report.races} <= c.honest
    assert r.advice == []
    from fencecheck.commands.verify import explain_contexts, verify_json

    data = verify_json(r, explain_contexts(r))
    assert data["safe"] is True and data["contexts"][0]["races_with_any_backend"] is True
    assert data["contexts"][0]["honest_races"] == sorted(p.text() for p in c.honest)
    assert data["contexts"][0]["component_change"] == {
        "scenario": "dspark-prefetch-reads-nothing", "assumptions": ["named_runner_is_last_reader"],
        "component": "the algorithm",
        "change": "set last_shared_read_runner to draft in normal steps (the runner of draft_prefetch, the step's "
                  "last reading phase)",
        "verified": True, "races": []}
    # The change is real: the context with that publisher, the backend swapped in, is race-free.
    import dataclasses

    from fencecheck.model.swap import swap_into
    from fencecheck.vocab import StepKind

    fixed = ctx.replace(algorithm=dataclasses.replace(ctx.algorithm,
                                                      publisher={**ctx.algorithm.publisher, StepKind.NORMAL: "draft"}))
    assert check_scenario(swap_into(fixed, DECODE_ONLY, {ForwardMode.DECODE})).verdict is Verdict.PROVED
    assert check_scenario(swap_into(ctx, DECODE_ONLY, {ForwardMode.DECODE})).verdict is Verdict.COUNTEREXAMPLE


def test_a_component_change_that_is_not_enough_says_what_still_races():
    from fencecheck.model.component_changes import component_change
    from fencecheck.model.decision import Decisions
    from fencecheck.model.swap import swap_into

    bf = load_backend(EXAMPLES / "dishonest-backend.toml")
    [off] = catalog("barrier-disabled")
    cc = component_change(swap_into(off, bf, {ForwardMode.DECODE}), ["barrier_on"], Decisions(), off.name)
    assert not cc.verified
    assert cc.text() == ("the scheduler must change: turn the WAR barrier on; not enough: with it this backend's reads "
                         "still race in barrier-disabled at req_to_token@decode/in_graph_after_marker")


def test_a_backend_that_speaks_for_no_mode_is_bad_input(tmp_path):
    bad = tmp_path / "empty.toml"
    bad.write_text('name = "x"\n')
    code, out, err = run("verify", str(bad))
    assert code == 2 and out == ""
    assert err == f"fencecheck: error: {bad}: the backend declares and reads nothing in any mode: nothing to verify " \
                  "(expected declares, reads, children or delegate)\n"


def test_verify_help_gives_its_own_exit_codes():
    code, out, _ = run("verify", "--help")
    assert code == 0
    assert "  1  race / counterexample the backend brings (in the symbolic family or a catalog context)\n" in out
    assert "racing with any backend, with the component that must change" in out
    assert "--out FILE.toml, -o FILE.toml" in out


@pytest.mark.slow
def test_the_advice_is_the_same_with_worker_processes():
    bf = load_backend(EXAMPLES / "over-declared-backend.toml")
    cat = catalog("dspark", "plain-decode")
    one, two = verify(bf, cat, bounds=SMALL, jobs=1), verify(bf, cat, bounds=SMALL, jobs=2)
    assert [a.text() for a in two.advice] == [a.text() for a in one.advice]
    assert two.advice[0].change == "declare IN_REPLAY for TARGET_VERIFY" and two.advice[0].check.safe


def test_in_a_context_racing_with_any_backend_the_change_is_judged_by_every_backend_not_this_ones_own_race():
    bf = load_backend(EXAMPLES / "dishonest-backend.toml")
    r = verify(bf, catalog("barrier-disabled"), bounds=SMALL, advice=False)
    [c] = r.contexts
    assert c.races_anyway and c.safe
    assert c.component.verified and [x.text() for x in c.component.races] == [
        "req_to_token@decode/in_graph_after_marker in step 1", "req_to_token@decode/in_graph_after_marker in step 2",
        "req_to_token@decode/in_graph_after_marker in step 3"]
    assert c.component.text() == (
        "the scheduler must change: turn the WAR barrier on; verified: with it a backend that reads the same "
        "locations can be race-free in barrier-disabled (this one's reads still race there at "
        "req_to_token@decode/in_graph_after_marker: see the advice)")


@pytest.mark.slow
def test_each_change_outside_the_backend_restores_the_assumption_it_is_for():
    from fencecheck.files.catalog import PR_ERA
    from fencecheck.model.component_changes import _fix
    from fencecheck.model.decision import Decisions

    decide = Decisions()
    seen = set()
    for s in load_catalog(PR_ERA):  # verify's contexts
        for n in decide(s).failed:
            component, change, fixed = _fix(s, n, decide(s))
            assert n not in decide(fixed).failed, (s.name, n, change)
            seen.add(n)
    assert seen == {"named_runner_is_last_reader", "plan_stream_joined_before_replay", "barrier_on",
                    "barrier_after_run_batch", "last_reader_resolves", "last_reader_publishes",
                    "worker_reads_cleared"}


@pytest.mark.slow
def test_the_default_contexts_are_the_release_and_the_last_line_is_the_verdict():
    """Without --catalog the contexts are the release catalog's, and the text says so; the last line is the verdict
    over every context."""
    from fencecheck.files.catalog import DEFAULT_VERSION, RELEASE

    assert DEFAULT_VERSION == RELEASE
    code, out, _ = run("verify", str(EXAMPLES / "honest-backend.toml"))
    lines = out.splitlines()
    assert code == 0 and f"catalog contexts ({RELEASE}):" in out
    assert lines[-1].startswith("verify flashinfer-like: SAFE in every context (the symbolic family and ")
    assert lines[-1].endswith(f"scenarios of the {RELEASE} catalog)")
    code, out, _ = run("verify", str(EXAMPLES / "dishonest-backend.toml"))
    last = out.splitlines()[-1]
    assert code == 1 and last.startswith("verify gathers-in-kernels: RACES in ") and "decode-flashinfer" in last


def test_an_unknown_location_in_a_backend_file_is_a_warning(tmp_path):
    bad = tmp_path / "b.toml"
    bad.write_text((EXAMPLES / "honest-backend.toml").read_text().replace('"req_to_token"', '"req_to_tokens"', 1))
    out, err = io.StringIO(), io.StringIO()
    code = main(["verify", str(bad), "--catalog", PR_ERA], out, err)
    assert code in (0, 1)  # a verdict, not bad input: a warning changes no exit code
    assert "unknown shared location 'req_to_tokens' (did you mean 'req_to_token'?)" in err.getvalue()


def test_the_document_lists_the_assumptions_the_output_names():
    """docs/verify.md's list of the symbolic contexts' assumptions is the code's (model.symbolic_contexts.ASSUMED)."""
    import re

    from fencecheck.model.symbolic_contexts import ASSUMED

    doc = (EXAMPLES.parent / "docs" / "verify.md").read_text(encoding="utf-8")
    para = doc.split("**Symbolic contexts.**", 1)[1].split("\n\n", 1)[0]
    listed = re.findall(r"`(\w+)`", para.split("other than", 1)[1].split("(a test", 1)[0])
    assert listed[0] == "honest_declarations" and tuple(listed[1:]) == ASSUMED


def test_the_documented_backend_file_keys_are_the_schema_s():
    """docs/verify.md's table of backend file keys names exactly the keys the backend schema allows."""
    import re

    from fencecheck.schema import BACKEND_SCHEMA

    doc = (EXAMPLES.parent / "docs" / "verify.md").read_text(encoding="utf-8")
    table = doc.split("## The backend file", 1)[1].split("\n\n", 3)[2]
    keys = [re.match(r"\| `\[?(\w+)", row).group(1) for row in table.splitlines()[2:]]
    assert sorted(keys) == sorted(BACKEND_SCHEMA["properties"])


def test_a_decision_is_shared_by_scenarios_that_pin_the_model_alike_and_only_by_them(monkeypatch):
    """Swapped-in backends that differ only in a mode the context never runs are one decision there (the model sees a
    backend only through each phase's declaration and read sites for its mode); a difference in a mode it runs, or
    in the scenario's name, is another decision, and its answer is its own."""
    import fencecheck.model.decision as decision
    from fencecheck.model.swap import swap_into
    from fencecheck.scenario import BackendSpec

    made = []
    real = decision.Decision.__init__
    monkeypatch.setattr(decision.Decision, "__init__", lambda self, s: made.append(s.name) or real(self, s))
    [plain] = catalog("plain-decode")
    assert {p.mode for ph in plain.algorithm.steps.values() for p in ph} == {ForwardMode.DECODE}
    reads = {"DECODE": {ReadSite.IN_GRAPH_AFTER_MARKER: ("req_to_token",)}}
    late = BackendSpec("b", declares={ForwardMode.DECODE: SharedReadEnds.IN_REPLAY}, reads=reads)
    also_extend = BackendSpec("b", declares={ForwardMode.DECODE: SharedReadEnds.IN_REPLAY,
                                             ForwardMode.EXTEND: SharedReadEnds.PRE_REPLAY}, reads=reads)
    covered = BackendSpec("b", declares={ForwardMode.DECODE: SharedReadEnds.POST_REPLAY}, reads=reads)
    decide = decision.Decisions()
    first = decide(swap_into(plain, late, {ForwardMode.DECODE}))
    assert decide(swap_into(plain, also_extend, {ForwardMode.DECODE})) is first and len(made) == 1
    assert first.report.verdict is Verdict.COUNTEREXAMPLE
    other = decide(swap_into(plain, covered, {ForwardMode.DECODE}))
    assert other is not first and other.report.verdict is Verdict.PROVED and len(made) == 2
    renamed = decide(swap_into(plain, late, {ForwardMode.DECODE}).replace(name="another"))
    assert renamed is not first and renamed.report.scenario == "another" and len(made) == 3


def test_backend_files_verified_with_shared_answers_are_verified_as_alone():
    """``verify --sglang``'s files of one class share their answers (``Shared``: each context decided once, each
    symbolic check asked once); each report is the one the file gets alone, and the second file asks less."""
    from fencecheck.commands.verify import explain_contexts, verify_json
    from fencecheck.model.decision import Decisions
    from fencecheck.model.verify import Shared

    files = [load_backend(EXAMPLES / f"{n}-backend.toml") for n in ("dishonest", "over-declared", "dishonest")]
    contexts = catalog("plain-decode", "barrier-disabled", "plan-stream-unjoined", "eagle-v2")
    assert len(contexts) == 4
    alone = [verify_json(r, explain_contexts(r)) for r in (verify(b, contexts, bounds=SMALL) for b in files)]
    shared = Shared(bounds=SMALL)
    try:
        together, sizes = [], []
        for b in files:
            r = verify(b, contexts, shared=shared)
            together.append(verify_json(r, explain_contexts(r)))
            sizes.append((len(shared.decide._seen), len(shared.family)))
    finally:
        shared.close()
    assert together == alone
    assert sizes[2] == sizes[1]  # the third file is the first: nothing new asked
    assert isinstance(shared.decide, Decisions) and sizes[0][1] == 1 and sizes[1][1] == 2
