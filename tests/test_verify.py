from __future__ import annotations

import io
from pathlib import Path

import pytest

from fencecheck.cli import main
from fencecheck.reference.check import check_scenario
from fencecheck.scenario_io import load

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    return main(list(argv), out, err), out.getvalue(), err.getvalue()


@pytest.mark.slow
def test_honest_backend_is_proved_in_every_context():
    code, out, _ = run("verify", str(EXAMPLES / "honest-backend.toml"))
    assert code == 0
    assert "proved race-free" in out and "COUNTEREXAMPLE" not in out


@pytest.mark.slow
def test_dishonest_backend_gets_a_replayable_counterexample(tmp_path):
    target = tmp_path / "ce.toml"
    code, out, _ = run("verify", str(EXAMPLES / "dishonest-backend.toml"), "-o", str(target))
    assert code == 1
    assert "COUNTEREXAMPLE: the read of req_to_token by phase0 at in_graph_after_marker" in out
    assert "plain-decode+gathers-in-kernels: COUNTEREXAMPLE  req_to_token@decode/in_graph_after_marker" in out
    report = check_scenario(load(target))
    assert {r.site for r in report.races} == {"in_graph_after_marker"}


@pytest.mark.slow
def test_over_declared_backend_gets_advice_and_a_fragile_context():
    code, out, _ = run("verify", str(EXAMPLES / "over-declared-backend.toml"))
    assert "advice: TARGET_VERIFY: declares POST_REPLAY but its reads end at pre_replay; PRE_REPLAY" in out
    assert "symbolic contexts" in out and "proved race-free" in out
    # DSpark's idle step waits on the stale event a POST_REPLAY verify leaves in the target's mailbox.
    assert "dspark+page-table-prebuilt: COUNTEREXAMPLE" in out and code == 1


def test_bad_backend_file(tmp_path):
    bad = tmp_path / "b.toml"
    bad.write_text('name = "x"\nchildren = ["y"]\n')
    code, out, err = run("verify", str(bad))
    assert code == 2 and err.count("\n") == 1 and "children" in err
