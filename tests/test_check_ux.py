"""``fencecheck check`` beyond races, and the conventions every command keeps.

Dishonest declarations, ``[expect]``, witnesses in JSON, unknown shared locations; help on every option, --json,
progress on stderr."""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path

import pytest

from fencecheck.files.catalog import PR_ERA, catalog_paths
from fencecheck.commands.main import build_parser, main
from fencecheck.reference.honesty import honesty_findings, readers
from fencecheck.files.scenario_io import load
from fencecheck.vocab import SHARED_LOCATIONS, closest_locations

PATHS = {p.stem: str(p) for p in catalog_paths(PR_ERA)}

HEAD = """
[runners.target]

[algorithm]
name = "none"
publisher = "target"

[[algorithm.steps.normal]]
name = "decode"
runner = "target"
mode = "DECODE"
backend = "{backend}"
"""

HYBRID_DISHONEST = """name = "hybrid-dishonest"

[backends.hybrid]
delegate = { DECODE = "decode_child" }

[backends.decode_child]
reads.DECODE = { pre_replay = ["req_to_token"], in_graph_after_marker = ["req_to_token"] }
""" + HEAD.format(backend="hybrid")

COMPOSITE_DISHONEST = """name = "composite-dishonest"

[backends.composite]
children = ["honest", "liar"]

[backends.honest]
reads.DECODE = { pre_replay = ["req_to_token"] }

[backends.liar]
declares = { DECODE = "PRE_REPLAY" }
reads.DECODE = { in_graph_before_marker = ["full_to_swa_index_mapping"] }
""" + HEAD.format(backend="composite")

COMPOSITE_OVERRIDE = """name = "composite-override"

[backends.composite]
children = ["child"]
declares = { DECODE = "PRE_REPLAY" }

[backends.child]
reads.DECODE = { in_graph_before_marker = ["req_to_token"] }
""" + HEAD.format(backend="composite")


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def write(tmp_path: Path, text: str, expect: str = "", name: str = "s.toml") -> str:
    path = tmp_path / name
    path.write_text(text + expect)
    return str(path)


# -- honesty ---------------------------------------------------------------------------------------------------


def test_a_hybrid_childs_dishonest_read_names_the_child_not_the_wrapper(tmp_path):
    code, out, _ = run("check", write(tmp_path, HYBRID_DISHONEST))
    assert code == 1
    assert ("  DISHONEST backend 'decode_child' (in 'hybrid' of phase 'decode', DECODE) declares IN_REPLAY but reads "
            "req_to_token at in_graph_after_marker, outside what IN_REPLAY covers\n") in out
    assert "DISHONEST backend 'hybrid'" not in out
    # the race the lie causes names the child that did the read (the graph id names only the wrapper)
    assert "graph target/decode/DECODE/hybrid#0" in out
    assert "    read by backend hybrid/decode_child (the child of the phase's backend that reads)\n" in out


def test_a_composites_dishonest_child_is_named_through_the_composite(tmp_path):
    s = load(write(tmp_path, COMPOSITE_DISHONEST))
    (f,) = honesty_findings(s)
    assert (f.backend, f.via, f.declared, f.site, f.location) == (
        "liar", ("composite",), "PRE_REPLAY", "in_graph_before_marker", "full_to_swa_index_mapping")
    assert readers(s, 1, "decode", "in_graph_before_marker", "full_to_swa_index_mapping") == ("composite/liar",)
    assert readers(s, 2, "decode", "pre_replay", "req_to_token") == ("composite/honest",)


def test_a_wrapper_overriding_below_its_honest_childs_reads_is_the_one_at_fault(tmp_path):
    s = load(write(tmp_path, COMPOSITE_OVERRIDE))
    (f,) = honesty_findings(s)
    assert (f.backend, f.via, f.declared, f.site) == ("composite", (), "PRE_REPLAY", "in_graph_before_marker")


def test_a_dishonest_but_race_free_scenario_exits_1_with_the_finding():
    code, out, _ = run("check", PATHS["force-coarse"])
    assert code == 1
    assert out.startswith("force-coarse: proved  (3 steps, 34 ops); 1 dishonest declaration\n")
    assert ("  DISHONEST backend 'flashinfer' (phase 'decode', DECODE) declares IN_REPLAY but reads req_to_token at "
            "in_graph_after_marker, outside what IN_REPLAY covers\n") in out


def test_findings_in_json(tmp_path):
    code, out, _ = run("check", write(tmp_path, HYBRID_DISHONEST), "--json")
    (report,) = json.loads(out)
    assert code == 1
    (f,) = report["findings"]
    assert {k: f[k] for k in ("phase", "mode", "backend", "via", "declared", "site", "location")} == {
        "phase": "decode", "mode": "DECODE", "backend": "decode_child", "via": ["hybrid"], "declared": "IN_REPLAY",
        "site": "in_graph_after_marker", "location": "req_to_token"}
    assert report["distinct_races"] == [{"location": "req_to_token", "phase": "decode",
                                         "site": "in_graph_after_marker", "step": 0,
                                         "read_by": ["hybrid/decode_child"]}]


# -- [expect] ----------------------------------------------------------------------------------------------------


def test_a_met_expectation_says_so(tmp_path):
    code, out, _ = run("check", PATHS["eagle-v2"])
    assert code == 0
    assert out.endswith("  expect: as expected: proved\ncheck: 1 run: race-free, honest and as expected\n")


def test_the_last_line_is_the_verdict_over_every_run():
    code, out, _ = run("check", PATHS["eagle-v2"], PATHS["plain-decode"])
    assert code == 0 and out.splitlines()[-1] == "check: 2 runs: all race-free, honest and as expected"
    racy = str(Path(PATHS["plain-decode"]).parents[1] / "sglang-0.5.23" / "race-minimax-sparse-decode.toml")
    code, out, _ = run("check", PATHS["plain-decode"], racy)
    assert code == 1
    assert out.splitlines()[-1] == ("check: 2 runs: 1 with a race (race-minimax-sparse-decode); 1 with a dishonest "
                                    "declaration (race-minimax-sparse-decode)")


def test_a_differing_expectation_is_exit_1_with_one_line(tmp_path):
    text = (Path(PATHS["plain-decode"]).read_text().split("[expect]")[0]
            + '[expect]\nverdict = "counterexample"\n')
    code, out, _ = run("check", write(tmp_path, text))
    assert code == 1
    assert out.startswith("plain-decode: proved")
    assert "  expect: DIFFERS from [expect]: verdict proved, expected counterexample\n" in out


def test_expectation_in_json(tmp_path):
    code, out, _ = run("check", PATHS["ngram-no-clear"], "--json")
    (report,) = json.loads(out)
    assert code == 1
    assert report["expect"]["agrees"] is True
    assert report["expect"]["verdict"] == "counterexample"
    assert report["expect"]["line"].startswith("expect: as expected: counterexample")


# -- witness -----------------------------------------------------------------------------------------------------


def test_witness_in_json_per_distinct_race():
    code, out, _ = run("check", PATHS["ngram-no-clear"], "--witness", "--json")
    (report,) = json.loads(out)
    assert code == 1
    (w,) = report["witness"]
    assert set(w) == {"race", "write_op", "schedule", "stale_read", "reproduced"}
    assert w["race"] == {"location": "req_to_token", "phase": "verify", "site": "worker_after", "step": 0}
    assert w["reproduced"] is True
    assert w["stale_read"]["step"] == 1 and w["stale_read"]["seen"] == 2  # 1-based steps, as in RaceId
    assert w["stale_read"]["site"] == "worker_after"
    assert sorted(w["schedule"]) == list(range(len(w["schedule"])))  # every kernel once
    assert w["stale_read"]["kernel_index"] in w["schedule"]


def test_no_witness_key_without_the_flag():
    _, out, _ = run("check", PATHS["ngram-no-clear"], "--json")
    assert "witness" not in json.loads(out)[0]


# -- shared locations --------------------------------------------------------------------------------------------


def test_the_vocabulary_knows_the_scheduler_shared_locations():
    assert {"req_to_token", "full_to_swa_index_mapping", "req_index_to_mamba_index_mapping"} <= SHARED_LOCATIONS
    assert closest_locations("req_to_tokens") == ["req_to_token"]


def test_an_unknown_location_is_a_warning_naming_file_key_and_closest(tmp_path):
    path = write(tmp_path, HYBRID_DISHONEST.replace('in_graph_after_marker = ["req_to_token"]',
                                                    'in_graph_before_marker = ["req_to_tokens"]'))
    code, out, err = run("check", path)
    assert code == 0, out  # a warning does not change the exit code
    assert err == (f"fencecheck: warning: {path}: backends.decode_child.reads.DECODE.in_graph_before_marker: unknown "
                   f"shared location 'req_to_tokens' (did you mean 'req_to_token'?)\n")


def test_known_locations_give_no_warning():
    code, _, err = run("check", *PATHS.values())
    assert err == ""


def test_trace_warns_too(tmp_path):
    path = write(tmp_path, HYBRID_DISHONEST.replace('in_graph_after_marker = ["req_to_token"]',
                                                    'in_graph_before_marker = ["zzz"]'))
    code, _, err = run("trace", path, "--steps", "1")
    assert code == 0
    assert "unknown shared location 'zzz' (known: full_to_swa_index_mapping, req_index_to_mamba_index_mapping, req_to_token)" in err


# -- conventions -------------------------------------------------------------------------------------------------


def _subcommands():
    parser = build_parser(io.StringIO())
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return sub.choices


@pytest.mark.parametrize("command", sorted(_subcommands()))
def test_every_option_of_every_command_has_help(command):
    missing = [a.dest for a in _subcommands()[command]._actions
               if not isinstance(a, argparse._HelpAction) and not a.help]
    assert missing == [], f"{command}: options without help: {missing}"


@pytest.mark.parametrize("command", ["prove", "traces", "replay", "audit", "check"])
def test_long_commands_have_json_and_progress(command):
    options = {o for a in _subcommands()[command]._actions for o in a.option_strings}
    assert {"--json", "--progress"} <= options


def test_check_progress_goes_to_stderr_only_when_asked():
    code, out, err = run("check", PATHS["eagle-v2"], "--progress", "--json")
    assert code == 0 and "checking" in err
    json.loads(out)  # stdout stays clean JSON
    assert run("check", PATHS["eagle-v2"])[2] == ""  # stderr is not a terminal: no bar


def test_traces_json(tmp_path, monkeypatch):
    from fencecheck.commands import traces as CC

    def fake(directory, progress=None):
        progress(3)
        return Path(directory) / "corpus.jsonl", {"catalog": {"configurations": 3, "behaviours": 2}}, 2

    monkeypatch.setattr(CC, "build_and_write", fake)
    monkeypatch.setattr(CC, "corpus_size", lambda: 3)
    code, out, err = run("traces", "--out", str(tmp_path), "--json")
    assert code == 0 and err == ""
    assert json.loads(out) == {"file": str(tmp_path / "corpus.jsonl"), "traces": 2,
                               "families": [{"family": "catalog", "configurations": 3, "behaviours": 2}]}


def test_audit_json(tmp_path, monkeypatch):
    from fencecheck.commands import audit as A

    monkeypatch.setattr(A, "run_audit", lambda *a, **k: [A.Part("prove", True, "3 of 3", 1.25),
                                                         A.Part("replay", False, "1 disagreement", 2.0)])
    code, out, _ = run("audit", "--docs", str(tmp_path / "d"), "--corpus", str(tmp_path / "c"),
                       "--timings", str(tmp_path / "t.json"), "--json")
    data = json.loads(out)
    assert code == 1 and data["passed"] is False and data["exit_code"] == 1
    assert data["parts"] == [{"name": "prove", "status": "ok", "summary": "3 of 3", "seconds": 1.25},
                             {"name": "replay", "status": "failed", "summary": "1 disagreement", "seconds": 2.0}]


def test_a_witness_that_shows_nothing_is_said_loudly(monkeypatch):
    from fencecheck.reference.sim import interleave

    monkeypatch.setattr(interleave, "stale_reads", lambda hb, schedule: [])
    code, out, _ = run("check", PATHS["ngram-no-clear"], "--witness")
    assert code == 1
    assert "  witness: NOT REPRODUCED for req_to_token@verify/worker_after (simulator inconsistency)\n" in out
    (w,) = json.loads(run("check", PATHS["ngram-no-clear"], "--witness", "--json")[1])[0]["witness"]
    assert w["reproduced"] is False and w["stale_read"] is None
