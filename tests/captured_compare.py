"""The captured-path interpretation (``decision/captured.py``) beside the capture rules on a whole tree.

``python3 tests/captured_compare.py [SGLANG]`` (the installed SGLang without an argument) reads the tree twice: once
as shipped, to take the in-graph reads the rules rule out ("no graph captures its path"), and once with the capture
and binding rules switched off, so every in-graph read of a graph-replayed mode is a finding with its ``Read``. It
asks the interpretation about each such read and prints one line per read (seconds, the read, the answer, RULE when
the rules rule it out), then the reads where the two differ or the interpretation stays open, and the counts of
(ruled out by the rules, the interpretation's answer). The figures in docs/performance.md come from it.
"""

from __future__ import annotations

import collections
import sys
import time


def main(argv: list[str]) -> int:
    from fencecheck.decision.captured import captured
    from fencecheck.sglang_source import capture_binding, capture_state
    from fencecheck.sglang_source.backend_reader import Reader
    from fencecheck.sglang_source.capture_state import graph_modes
    from fencecheck.sglang_source.extract import read_tree
    from fencecheck.sglang_source.tree import Tree, find_installed, find_package_root
    from fencecheck.vocab import ReadSite

    root = find_package_root(argv[0]) if argv else find_installed()
    shipped = read_tree(Tree(root))
    rules = {(n.subject, n.mode, n.file, n.line) for n in shipped.not_findings
             if n.why.startswith("no graph captures its path")}
    kept = (capture_state.capture_fact, capture_binding.binding_fact)
    capture_state.capture_fact = capture_binding.binding_fact = lambda *a, **k: None
    try:
        tree = Tree(root)
        ex = read_tree(tree)
    finally:
        capture_state.capture_fact, capture_binding.binding_fact = kept
    modes = Reader(tree).modes
    replayed = graph_modes(modes)
    answers: dict = {}
    start = time.perf_counter()
    for f in ex.findings:
        if f.kind != "read_outside_declaration" or f.mode not in replayed:
            continue
        ci = next((c for c in tree.classes_named(f.subject) if f"{c.file}:{c.line}" == f.subject_at), None)
        for site, r in f.uncovered:
            if ci is None or site not in (ReadSite.IN_GRAPH_BEFORE_MARKER, ReadSite.IN_GRAPH_AFTER_MARKER):
                continue
            k = (f.subject, f.mode, r.file, r.line)
            t = time.perf_counter()
            a = captured(tree, ci, modes, f.mode, r)
            answers.setdefault(k, []).append(a)
            print(f"{time.perf_counter() - t:6.1f} s {k} {a.captured} {a.why[:150]}"
                  + (" RULE" if k in rules else ""), flush=True)
    print(f"{time.perf_counter() - start:.1f} s for {len(answers)} reads")

    def verdict(v) -> str:
        if all(x.captured is False for x in v):
            return "not captured"
        return "captured" if any(x.captured is True for x in v) else "open"

    counts = collections.Counter()
    for k, v in sorted(answers.items()):
        vd, ruled = verdict(v), k in rules
        counts[(ruled, vd)] += 1
        if (ruled and vd != "not captured") or (not ruled and vd == "not captured") or vd == "open":
            print("RULE" if ruled else "NEW ", vd, k, v[0].why[:300])
    for (ruled, vd), n in sorted(counts.items()):
        print(f"{'ruled out' if ruled else 'kept'} by the rules, {vd}: {n}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1]))
    raise SystemExit(main(sys.argv[1:]))
