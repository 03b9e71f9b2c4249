"""Generated regression modules pass against the reference and fail against a broken implementation.

They are short, read their cases from the corpus at test time from any working directory, and name the first
divergence when they fail."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

import fencecheck
from fencecheck.files.catalog import PR_ERA, load_catalog
from fencecheck.commands.main import main
from fencecheck.files.corpus_io import write
from fencecheck.model.traces import generate
from fencecheck.commands.regress_suite import CORPUS_ENV, load_cases
from fencecheck.files.scenario_io import scenario_to_dict

#: The checkout whose fencecheck these tests import; the generated module's processes import the same one.
HOME = Path(fencecheck.__file__).resolve().parent.parent

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


def catalog_corpus(directory: Path) -> int:
    """A corpus of the catalog records alone (the records ``fencecheck traces`` writes first), in its format."""
    records = []
    for s in load_catalog(PR_ERA):
        mt = generate(s)
        records.append({
            "id": f"catalog/{s.name}", "family": "catalog", "configurations": 1, "scenario": scenario_to_dict(s),
            "trace": mt.trace.to_dict(), "expected": mt.verdict.value, "races": [list(x) for x in mt.races],
            "witness": mt.witness,
        })
    write(directory, {"fencecheck": fencecheck.__version__}, records)
    return len(records)


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("regress")
    count = catalog_corpus(tmp / "build" / "corpus")
    module = tmp / "tests" / "test_fence_regress.py"
    err = io.StringIO()
    code = main(["regress", str(tmp / "build" / "corpus"), "--out", str(module), "--only", "catalog/*"],
                io.StringIO(), err)
    assert code == 0, err.getvalue()
    (tmp / "adapters").mkdir()
    (tmp / "adapters" / "broken_adapter.py").write_text(BROKEN)
    return tmp, module, count


def _pytest(tmp, module, cwd, adapter=None, corpus=None):
    """Run the generated module in a fresh process, from ``cwd``, importing this checkout's fencecheck."""
    env = {k: v for k, v in os.environ.items() if k not in ("FENCECHECK_ADAPTER", CORPUS_ENV)}
    env["PYTHONPATH"] = os.pathsep.join([str(HOME), str(tmp / "adapters")])
    if adapter:
        env["FENCECHECK_ADAPTER"] = adapter
    if corpus:
        env[CORPUS_ENV] = str(corpus)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(module)],
                          capture_output=True, text=True, cwd=cwd, env=env)


def test_module_is_short_and_records_the_corpus_and_the_selection(suite):
    tmp, module, count = suite
    text = module.read_text()
    assert count == 26 and len(text.splitlines()) < 60
    assert 'HERE / "../build/corpus"' in text
    assert 'ONLY = ["catalog/*"]' in text and "FENCECHECK_ADAPTER" in text and CORPUS_ENV in text
    assert str(tmp) not in text  # no absolute path: the module moves with its repository


def test_load_cases_selects_by_id_glob(suite):
    tmp, _, _ = suite
    cases = load_cases(tmp / "build" / "corpus", ["catalog/ngram*"])
    assert cases and all(c.id.startswith("catalog/ngram") for c in cases)
    assert "catalog/ngram-no-clear" in [c.id for c in cases]


def test_regress_rejects_a_selection_that_matches_nothing(suite, tmp_path):
    tmp, _, _ = suite
    err = io.StringIO()
    code = main(["regress", str(tmp / "build" / "corpus"), "--out", str(tmp_path / "t.py"), "--only", "nope/*"],
                io.StringIO(), err)
    assert code != 0 and "no trace matches 'nope/*'" in err.getvalue() and "Traceback" not in err.getvalue()
    assert not (tmp_path / "t.py").exists()


@pytest.mark.slow  # a fresh pytest process
def test_reference_adapter_passes_from_any_working_directory(suite, tmp_path):
    tmp, module, _ = suite
    proc = _pytest(tmp, module, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "26 passed" in proc.stdout


@pytest.mark.slow  # a fresh pytest process
def test_the_corpus_can_be_named_by_the_environment(suite, tmp_path):
    tmp, module, _ = suite
    moved = tmp_path / "elsewhere" / "test_moved.py"
    moved.parent.mkdir()
    moved.write_text(module.read_text())  # the recorded relative path no longer leads to the corpus
    proc = _pytest(tmp, moved, cwd=tmp_path)
    assert proc.returncode != 0 and "no such file" in proc.stdout
    proc = _pytest(tmp, moved, cwd=tmp_path, corpus=tmp / "build" / "corpus")
    assert proc.returncode == 0 and "26 passed" in proc.stdout, proc.stdout[-2000:]


@pytest.mark.slow  # a fresh pytest process
def test_a_broken_implementation_fails_with_the_divergence(suite):
    tmp, module, _ = suite
    proc = _pytest(tmp, module, cwd=tmp, adapter="broken_adapter:DropsTheWait")
    assert proc.returncode == 1
    assert "drops-the-wait diverges from the model after" in proc.stdout
    assert "WaitEvent(stream='S'" in proc.stdout
    assert "test_fence[catalog/ngram-no-clear]" in proc.stdout  # the case is named by its record id
