"""Generated regression suites run, pass against the reference, and fail against a broken implementation."""

from __future__ import annotations

import io
import os
import subprocess
import sys

from pathlib import Path

import pytest

import fencecheck
from fencecheck.cli import main

pytestmark = pytest.mark.slow  # generates the whole corpus, then runs the generated module in fresh processes

BROKEN = '''
import dataclasses
from fencecheck.reference.run import run_scenario
from fencecheck.trace import WaitEvent


class DropsTheWait:
    """An implementation whose barrier forgets to wait on the published event."""

    name = "drops-the-wait"

    def run(self, scenario, steps):
        trace = run_scenario(scenario, steps)
        return dataclasses.replace(trace, ops=tuple(op for op in trace.ops if not isinstance(op, WaitEvent)))
'''


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("regress")
    assert main(["traces", "--out", str(tmp / "corpus")], io.StringIO(), io.StringIO()) == 0
    module = tmp / "test_fence_regress.py"
    code = main(["regress", str(tmp / "corpus"), "--out", str(module), "--only", "catalog/*"], io.StringIO(),
                io.StringIO())
    assert code == 0
    (tmp / "broken_adapter.py").write_text(BROKEN)
    return tmp, module


def _pytest(tmp, module, adapter=None):
    """Run the generated module in a fresh process that imports the fencecheck these tests import."""
    env = dict(os.environ)
    home = Path(fencecheck.__file__).resolve().parent.parent
    env["PYTHONPATH"] = os.pathsep.join([str(home), str(tmp)] + [p for p in [env.get("PYTHONPATH")] if p])
    if adapter:
        env["FENCECHECK_ADAPTER"] = adapter
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(module)],
                          capture_output=True, text=True, cwd=tmp, env=env)


def test_module_is_readable_with_one_test_per_trace(suite):
    _, module = suite
    text = module.read_text()
    assert text.count("\ndef test_catalog_") == 26
    assert "def test_catalog_ngram_no_clear():" in text and "FENCECHECK_ADAPTER" in text


def test_reference_adapter_passes(suite):
    tmp, module = suite
    proc = _pytest(tmp, module)
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert "26 passed" in proc.stdout


def test_a_broken_implementation_fails_with_the_divergence(suite):
    tmp, module = suite
    proc = _pytest(tmp, module, "broken_adapter:DropsTheWait")
    assert proc.returncode == 1
    assert "drops-the-wait diverges from the model after" in proc.stdout
    assert "WaitEvent(stream='S'" in proc.stdout
