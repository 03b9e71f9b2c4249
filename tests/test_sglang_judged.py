"""The hand-judged set of the static reader's findings and not-findings on SGLang 0.5.18, 0.5.22 and 0.5.23.

tests/sglang_judged.json lists each judged read: where it is (release, kind, subject, mode, site, location, ``read``
as ``path:line`` relative to the ``sglang`` package), what the reader said when it was judged (``reader_status``:
``confirmed``, ``plausible``, ``unresolved``, ``not_finding``, or ``missed`` for a race the reader does not report),
the verdict of reading the cited chain in that release's sources (``real``, ``false``, ``undecidable_statically``),
the configuration it needs and the reason with file:line cites. The fast tests check the file's shape and that every
cite lies inside its file in the release's sources (a release not on this machine is fetched by a slow test). The slow
test runs the reader on each release, checks that every judged item is still found in its output (as a finding, a
not-finding, a read of its tables, or for a read in the model's own layers its unresolved note) unless it is marked
missed, prints the reader's current precision and recall against the set, and checks the table of them in
docs/sglang-reader.md (between its ``judged-table`` markers); it asserts no target.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from sglang_release import CACHE_ENV, CI, env_name, require_tree, tree_of

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
JUDGED = json.loads((HERE / "sglang_judged.json").read_text(encoding="utf-8"))
RELEASES = ("0.5.18", "0.5.22", "0.5.23")
FIELDS = ("release", "kind", "subject", "mode", "site", "location", "read", "reader_status", "verdict",
          "configuration", "reason")
#: The reader's finding kinds, ``barrier_deferred`` (a catalog race in the event loop, no read the reader checks) and
#: ``model_read_in_forward`` (a read in the model's own layers, which the reader reports as an unresolved note).
MODEL_READ = "model_read_in_forward"
KINDS = {"read_outside_declaration", "worker_read_after_publish", "unresolved_declaration", "barrier_deferred",
         MODEL_READ}
REPORTED = {"confirmed", "plausible", "unresolved"}
STATUSES = REPORTED | {"not_finding", "missed"}
VERDICTS = {"real", "false", "undecidable_statically"}
SITES = {"pre_replay", "in_graph_before_marker", "in_graph_after_marker", "post_replay", "worker_after"}
LOCATIONS = {"req_to_token", "full_to_swa_index_mapping", "req_index_to_mamba_index_mapping"}
MODES = {"EXTEND", "DECODE", "MIXED", "IDLE", "TARGET_VERIFY", "DRAFT_EXTEND_V2", "PREBUILT", "SPLIT_PREFILL",
         "DLLM_EXTEND"}
#: A file:line cite: a path under the package, then lines and ranges (``a.py:12``, ``a.py:3-9,14``).
CITE = re.compile(r"((?:srt|kernels)/[A-Za-z0-9_/.\-]+\.py):(\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*)")


def _key(item: dict) -> tuple:
    return item["release"], item["kind"], item["subject"], item["mode"], item["read"]


def test_every_item_has_the_fields_and_closed_values():
    problems = []
    for n, item in enumerate(JUDGED):
        where = f"item {n} ({item.get('release')} {item.get('subject')} {item.get('read')})"
        if tuple(item) != FIELDS:
            problems.append(f"{where}: fields {list(item)}, expected {list(FIELDS)}")
            continue
        if not all(isinstance(item[f], str) and item[f].strip() for f in FIELDS):
            problems.append(f"{where}: every field is a non-empty string")
        for field, allowed in (("release", RELEASES), ("kind", KINDS), ("reader_status", STATUSES),
                               ("verdict", VERDICTS), ("site", SITES), ("location", LOCATIONS), ("mode", MODES)):
            if item[field] not in allowed:
                problems.append(f"{where}: {field} {item[field]!r} is not one of {sorted(allowed)}")
        if not CITE.fullmatch(item["read"]) or "," in item["read"] or "-" in item["read"].rsplit(":", 1)[1]:
            problems.append(f"{where}: read must be one path:line")
        if not CITE.search(item["reason"]):
            problems.append(f"{where}: the reason cites no file:line")
        if item["reader_status"] == "missed" and item["verdict"] == "false":
            problems.append(f"{where}: a missed item is a race the reader does not report, not a false one")
        if item["reader_status"] == "not_finding" and item["verdict"] == "real":
            problems.append(f"{where}: a real read the reader does not report is `missed`")
        if item["kind"] == "barrier_deferred" and item["reader_status"] != "missed":
            problems.append(f"{where}: the reader has no barrier_deferred finding")
        if item["kind"] == MODEL_READ and item["reader_status"] not in ("unresolved", "missed"):
            problems.append(f"{where}: a model read is an unresolved note or missed")
    keys = [_key(i) for i in JUDGED if isinstance(i, dict)]
    problems += [f"duplicate item {k}" for k, c in Counter(keys).items() if c > 1]
    assert problems == [], problems


def test_the_set_covers_each_release_and_the_not_findings():
    per = Counter(i["release"] for i in JUDGED)
    assert set(per) == set(RELEASES) and len(JUDGED) >= 40, per
    assert sum(i["reader_status"] == "not_finding" for i in JUDGED) >= 10
    for release in RELEASES:
        confirmed = [i for i in JUDGED if i["release"] == release and i["reader_status"] == "confirmed"]
        assert confirmed, f"{release}: no confirmed finding judged"


def _cites(item: dict):
    for field in ("read", "reason", "configuration"):
        for path, lines in CITE.findall(item[field]):
            for part in lines.split(","):
                first, _, last = part.partition("-")
                yield path, int(first), int(last or first)


def _release_param(release: str):
    """A release already on this machine is checked in the fast loop; one that must be fetched is slow."""
    return pytest.param(release, marks=() if tree_of(release) else pytest.mark.slow, id=release)


@pytest.mark.parametrize("release", [_release_param(r) for r in RELEASES])
def test_every_cite_lies_inside_its_file_in_the_release(release):
    root = require_tree(release, fetching=True)
    lengths: dict[str, int | None] = {}
    problems = []
    for item in (i for i in JUDGED if i["release"] == release):
        for path, first, last in _cites(item):
            if path not in lengths:
                file = root / path
                lengths[path] = (len(file.read_text(encoding="utf-8", errors="replace").splitlines())
                                 if file.is_file() else None)
            n = lengths[path]
            if n is None:
                problems.append(f"{item['subject']} {item['read']}: {path} is not in sglang {release}")
            elif not 1 <= first <= last <= n:
                problems.append(f"{item['subject']} {item['read']}: {path}:{first}-{last} outside its {n} lines")
    assert problems == [], problems


# -- the reader's current output against the set -------------------------------------------------------------------

def _rel(path: str) -> str:
    return path[len("sglang/"):] if path.startswith("sglang/") else path


def _finding_reads(finding: dict) -> set[str]:
    """The reads a finding's evidence names, as ``path:line``."""
    return {f"{_rel(e['file'])}:{e['line']}" for e in finding.get("evidence", [])
            if re.match(r"reads \S+ (at \S+|on the device after it)", e.get("what", ""))}


def _matches(finding: dict, item: dict) -> bool:
    if finding["kind"] == "no_marker_fallback":  # it reports every listed backend's reads before the marker
        return (item["kind"] == "read_outside_declaration" and item["site"] == "in_graph_before_marker"
                and item["subject"] in finding.get("backends", ()) and finding["mode"] == item["mode"])
    return (finding["kind"] == item["kind"] and finding["subject"] == item["subject"]
            and finding["mode"] == item["mode"] and item["read"] in _finding_reads(finding))


def _noted(doc: dict, item: dict) -> bool:
    """A model read's note is in the reader's output (the note's file and line are the read's)."""
    return item["kind"] == MODEL_READ and any(
        f"{_rel(n['file'])}:{n['line']}" == item["read"] and "in the model's forward" in n["what"]
        for n in doc.get("notes", ()))


def _located(doc: dict, item: dict) -> bool:
    """The item's read is somewhere in the reader's output: a finding's evidence, a not-finding, a backend's read
    table (same mode), a worker's reads after its publisher or a model read's note."""
    path, line = item["read"].rsplit(":", 1)
    line = int(line)
    return (_noted(doc, item)
            or any(f["subject"] == item["subject"] and item["read"] in _finding_reads(f) for f in doc["findings"])
            or any(n["subject"] == item["subject"] and _rel(n["file"]) == path and n["line"] == line
                   for n in doc["not_findings"])
            or any(b["class"] == item["subject"] and r["mode"] == item["mode"] and _rel(r["file"]) == path
                   and r["line"] == line for b in doc["backends"] for r in b["reads"])
            or any(a["worker"]["class"] == item["subject"] and _rel(r["file"]) == path and r["line"] == line
                   for a in doc["algorithms"] for r in a["reads_after_publisher"]))


def score(doc: dict, items: list[dict]) -> dict:
    """Precision over the reader's findings (a finding is real when one of its judged reads is, false when all are;
    undecidable ones are left out) and recall over the judged real reads (reported = matched to a finding; a model
    read, which is never a finding, when its note is there); the model reads' notes counted apart
    (``notes_real``, ``notes_false``)."""
    judged = {"real": 0, "false": 0, "undecidable_statically": 0, "unjudged": 0}
    for finding in doc["findings"]:
        verdicts = {i["verdict"] for i in items if _matches(finding, i)}
        judged["real" if "real" in verdicts else "undecidable_statically" if "undecidable_statically" in verdicts
               else "false" if verdicts else "unjudged"] += 1
    real = [i for i in items if i["verdict"] == "real"]
    found = sum(any(_matches(f, i) for f in doc["findings"]) or _noted(doc, i) for i in real)
    decided = judged["real"] + judged["false"]
    noted = [i for i in items if _noted(doc, i)]
    shown = [f for f in doc["findings"] if f.get("status") in ("confirmed", "reachable")]
    shown_real = sum("real" in {i["verdict"] for i in items if _matches(f, i)} for f in shown)
    return dict(findings=len(doc["findings"]), **judged,
                shown=len(shown), shown_real=shown_real, shown_precision=shown_real / len(shown) if shown else None,
                questions=sum(f.get("status") == "unresolved" for f in doc["findings"]),
                notes_real=sum(i["verdict"] == "real" for i in noted),
                notes_false=sum(i["verdict"] == "false" for i in noted),
                precision=judged["real"] / decided if decided else None,
                real_reads=len(real), real_reported=found, recall=found / len(real) if real else None)


#: The table of docs/sglang-reader.md ("Judged findings: precision and recall"), between these markers.
DOC = ROOT / "docs" / "sglang-reader.md"
TABLE = re.compile(r"<!-- judged-table: begin -->\n(.*?)<!-- judged-table: end -->", re.S)
HEADER = ("| Release | Findings | Real | False | Undecidable | Unjudged | Precision | Real reads in the set | Reported "
          "| Recall | Shown as findings | Of them real | Precision of what is shown | Questions |")


def _pct(x) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def _table_row(release: str, s: dict) -> str:
    """The doc table's row of ``release`` for the score ``s``."""
    return (f"| {release} | {s['findings']} | {s['real']} | {s['false']} | {s['undecidable_statically']} | "
            f"{s['unjudged']} | {_pct(s['precision'])} | {s['real_reads']} | {s['real_reported']} | "
            f"{_pct(s['recall'])} | {s['shown']} | {s['shown_real']} | {_pct(s['shown_precision'])} | "
            f"{s['questions']} |")


def _doc_rows() -> dict[str, str]:
    """The rows of the doc's judged table by release; the header and the separator checked."""
    (block,) = TABLE.findall(DOC.read_text(encoding="utf-8"))
    lines = block.strip().splitlines()
    assert lines[0] == HEADER and set(lines[1]) <= set("|- "), lines[:2]
    return {line.split("|")[1].strip(): line for line in lines[2:]}


def test_the_doc_table_has_a_row_per_judged_release():
    assert sorted(_doc_rows()) == sorted(RELEASES)


def _read(root: Path) -> dict:
    done = subprocess.run([sys.executable, "-m", "fencecheck", "sglang", str(root), "--json"], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode in (0, 1, 3), (done.returncode, done.stderr[-2000:])
    return json.loads(done.stdout)


#: Findings the fencecheck settles as confirmed or reachable that are judged false, each with what it lacks (none
#: today: MiniMax sparse's verify, which raises at capture on the verify batch's None extend_seq_lens before its
#: read, is decided by the captured path interpreted). Anything settled wrong fails.
SETTLED_WRONG: dict[str, list[str]] = {}


@pytest.mark.slow
@pytest.mark.parametrize("release", RELEASES)
def test_precision_and_recall_of_the_current_reader(release):
    doc = _read(require_tree(release, fetching=True))
    items = [i for i in JUDGED if i["release"] == release]
    lost = [f"{i['subject']} {i['mode']} {i['read']}" for i in items
            if i["reader_status"] != "missed" and not _located(doc, i)]
    assert lost == [], f"judged reads the reader's output no longer names (re-judge them or mark them missed): {lost}"
    def reported(i):
        return any(_matches(f, i) for f in doc["findings"]) or _noted(doc, i)

    changed = [f"{i['subject']} {i['mode']} {i['read']}: {i['reader_status']} -> "
               f"{'reported' if reported(i) else 'not reported'}"
               for i in items if (i["reader_status"] in REPORTED) != reported(i)]
    s = score(doc, items)
    pct = _pct
    print(f"\nsglang {release}: {s['findings']} findings, {s['real']} real, {s['false']} false, "
          f"{s['undecidable_statically']} undecidable, {s['unjudged']} unjudged; precision {pct(s['precision'])}; "
          f"recall {s['real_reported']}/{s['real_reads']} = {pct(s['recall'])}; model-read notes: {s['notes_real']} "
          f"real, {s['notes_false']} false")
    for line in changed:
        print(f"  status changed since judged: {line}")
    print(f"  doc table row: {_table_row(release, s)}")
    assert _doc_rows()[release] == _table_row(release, s), \
        f"docs/sglang-reader.md's judged table: write the row printed above for {release}"
    settled = [f for f in doc["findings"] if f["status"] in ("confirmed", "reachable")]
    wrong = sorted(f"{f['subject']} {f['mode']}: {f['status']}" for f in settled
                   if "real" not in {i["verdict"] for i in items if _matches(f, i)})
    assert wrong == SETTLED_WRONG.get(release, []), \
        f"findings settled as racing that are not judged real (expected only the known ones): {wrong}"
    print(f"  confirmed or reachable: {len(settled)}, {len(settled) - len(wrong)} judged real; known wrong: {wrong}")


def test_score_counts_a_finding_by_its_judged_reads():
    """The scoring on a two-finding document: one real read makes a finding real, a missed real read counts against
    recall, an unjudged finding is counted apart."""
    def finding(subject, read):
        path, line = read.rsplit(":", 1)
        return {"kind": "read_outside_declaration", "subject": subject, "mode": "DECODE", "status": "plausible",
                "evidence": [{"file": "sglang/" + path, "line": int(line), "what": "reads req_to_token at x via y"}]}

    doc = {"findings": [finding("A", "srt/a.py:1"), finding("B", "srt/b.py:2"), finding("C", "srt/c.py:3")]}
    base = dict(kind="read_outside_declaration", mode="DECODE")
    items = [dict(base, subject="A", read="srt/a.py:1", verdict="real"),
             dict(base, subject="A", read="srt/a.py:9", verdict="false"),
             dict(base, subject="B", read="srt/b.py:2", verdict="false"),
             dict(base, subject="D", read="srt/d.py:4", verdict="real")]
    s = score(doc, items)
    assert (s["real"], s["false"], s["unjudged"], s["precision"]) == (1, 1, 1, 0.5)
    assert (s["real_reads"], s["real_reported"], s["recall"]) == (2, 1, 0.5)


def test_a_missing_release_fails_under_ci_and_is_skipped_elsewhere(monkeypatch, tmp_path):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    monkeypatch.delenv(env_name("0.5.18"), raising=False)
    assert tree_of("0.5.18") is None
    monkeypatch.setenv(CI, "1")
    with pytest.raises(pytest.fail.Exception, match="CI is set"):
        require_tree("0.5.18")
    monkeypatch.setenv(CI, "")
    with pytest.raises(pytest.skip.Exception, match="sglang 0.5.18 sources are not here"):
        require_tree("0.5.18")
    (tmp_path / "sglang-0.5.18" / "sglang" / "srt").mkdir(parents=True)
    assert require_tree("0.5.18") == tmp_path / "sglang-0.5.18" / "sglang"
