"""Pull-request mode on a change that weakens the fence: each loss is one line and exits 1.

HEAD with the older fence or none where the baseline has the declaration fence, or without a barrier call site,
publish point or clear the baseline had, or whose barrier gate no longer turns the barrier on by default. Each loss is one line (text, ``--json``'s ``fence.lost``, SARIF's run
properties). Both sides are ``pr_pair.py``'s base, HEAD changed by one edit."""

from __future__ import annotations

import io
import json
from pathlib import Path

import jsonschema
import pytest
from pr_pair import lay

from fencecheck.commands.main import main

PR_SCHEMA = json.loads((Path(__file__).resolve().parents[1] / "docs" / "sglang-pr.schema.json").read_text("utf-8"))
ATTN = "sglang/srt/layers/attention"
SCHED = "sglang/srt/managers/scheduler.py"
RUNNER = "sglang/srt/model_executor/runner/decode_cuda_graph_runner.py"


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["sglang", *argv], out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def _edit(root: Path, rel: str, old: str, new: str) -> None:
    f = root / rel
    text = f.read_text()
    assert old in text, (rel, old)
    f.write_text(text.replace(old, new))


def _older(head: Path) -> None:
    """No backend defines ``shared_read_ends``: the barrier stays, the older fence."""
    for f in (head / ATTN).glob("*.py"):
        f.write_text(f.read_text().replace("def shared_read_ends", "def declared_read_ends"))


def _none(head: Path) -> None:
    _older(head)
    f = head / SCHED
    f.write_text(f.read_text().replace("_apply_war_barrier", "_sync_streams"))


def _no_call_site(head: Path) -> None:
    _edit(head, SCHED, "            self.run_batch(batch)\n            self._apply_war_barrier()\n",
          "            self.run_batch(batch)\n")


def _no_clear(head: Path) -> None:
    _edit(head, SCHED, "        runner.shared_read_done_event = None\n", "")


def _no_publish(head: Path) -> None:
    _edit(head, RUNNER, "            self.model_runner.shared_read_done_event = read_done\n", "            pass\n")


def _gate_off(head: Path) -> None:
    _edit(head, SCHED, "self._war_barrier_enabled = is_cuda() or envs.SGLANG_ENABLE_WAR_BARRIER.get()",
          "self._war_barrier_enabled = envs.SGLANG_ENABLE_WAR_BARRIER.get()")


def _no_declaration(head: Path) -> None:
    (head / ATTN / "late_backend.py").unlink()


def _pair(tmp_path: Path, change) -> tuple[Path, Path]:
    base, head = lay(tmp_path / "base", "base"), lay(tmp_path / "head", "base")
    change(head)
    return base, head


@pytest.mark.parametrize("change, what, says", [
    (_older, "fence", "LOST the declaration fence is gone: HEAD has the older fence"),
    (_none, "fence", "LOST the declaration fence is gone: HEAD has no shared-read fence (no `SharedReadEnds` "
                     "declarations, no barrier)"),
    (_no_call_site, "barrier", "LOST a barrier call site is gone: Scheduler.event_loop_overlap has 0, the baseline 1"),
    (_no_clear, "clear", "LOST a clear of the read-done event is gone: Scheduler._apply_war_barrier has 0, "
                         "the baseline 1"),
    (_no_publish, "publish", "LOST a runner's publish point is gone: DecodeCudaGraphRunner has 1 publish point(s), "
                             "the baseline 2"),
    (_gate_off, "barrier", "LOST the barrier is no longer on by default on cuda: default True"),
])
def test_a_change_that_weakens_the_fence_exits_1_and_names_the_loss(tmp_path, change, what, says):
    base, head = _pair(tmp_path, change)
    code, out, err = run(str(head), "--baseline", str(base))
    assert code == 1, out + err
    lost = [line for line in out.splitlines() if line.startswith("  LOST ")]
    assert len(lost) == 1 and lost[0].strip().startswith(says), out
    assert "the fence is weakened: 1 lost" in out
    code, out, err = run(str(head), "--baseline", str(base), "--json")
    assert code == 1, err
    doc = json.loads(out)
    jsonschema.validate(doc, PR_SCHEMA)
    assert [x["what"] for x in doc["fence"]["lost"]] == [what]
    assert doc["fence"]["baseline"] == "declaration"


def test_a_deleted_backend_takes_its_reads_with_it_and_loses_nothing(tmp_path):
    base, head = _pair(tmp_path, _no_declaration)
    code, out, err = run(str(head), "--baseline", str(base), "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["fence"]["lost"] == [] and [x["key"] for x in doc["facts"]["changed"]["declarations"]] == \
        ["LateReadBackend"]


def test_the_lost_fence_is_in_the_sarif_run(tmp_path):
    base, head = _pair(tmp_path, _older)
    code, out, err = run(str(head), "--baseline", str(base), "--format", "sarif")
    assert code == 1, err
    (lost,) = json.loads(out)["runs"][0]["properties"]["fenceLost"]
    assert lost["what"] == "fence" and "HEAD has the older fence" in lost["text"]


def test_the_baseline_against_the_older_fence_loses_nothing(tmp_path):
    base, head = _pair(tmp_path, _older)
    code, out, err = run(str(head), "--baseline", str(head), "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["fence"] == {"baseline": "read_done_event", "head": "read_done_event", "lost": []}


@pytest.mark.parametrize("flag", [("--baseline", ""), ("--baseline=",), ("--baseline", " ")])
def test_an_empty_baseline_is_one_line_and_exit_2(tmp_path, flag):
    head = lay(tmp_path / "head", "base")
    code, out, err = run(str(head), *flag)
    assert code == 2 and out == "" and err.count("\n") == 1 and "--baseline" in err, (code, err)
