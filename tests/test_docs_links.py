"""Citations of our docs pages resolve, and the product cites no document outside the repository.

Every ``<page>.md#<anchor>`` named in the product's code, docs and catalog is a heading of that page, and every
relative link between docs pages points at a page that exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PRODUCT = ("fencecheck", "model", "reference", "gpu", "proofs", "benchmarks", "docs")
CITE = re.compile(r"(?<![\w./-])(?:docs/)?([\w-]+\.md)#([\w-]+)")


def _anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.MULTILINE | re.DOTALL)
    heads = re.findall(r"^#+ (.+)$", text, flags=re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in heads}


def _files() -> list[Path]:
    out = []
    for top in PRODUCT:
        for path in (ROOT / top).rglob("*"):
            if path.suffix in (".py", ".md", ".toml", ".sh"):
                out.append(path)
    return sorted(out)


FILES = _files()


def test_the_mechanism_and_rule_pages_have_their_anchors():
    assert {"the-hazard", "resolution-and-publish", "the-war-barrier", "the-last-reading-runner",
            "the-safety-property"} <= _anchors(DOCS / "sglang-mechanism.md")
    assert {f"r{n}" for n in range(1, 8)} <= {a[:2] for a in _anchors(DOCS / "cuda-rules.md")}


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_cited_anchors_exist(path):
    bad = []
    for page, anchor in CITE.findall(path.read_text(encoding="utf-8")):
        target = DOCS / page
        if not target.is_file():
            continue  # a page of another project (SGLang's tests, say), not one of ours
        if anchor not in _anchors(target):
            bad.append(f"{page}#{anchor}")
    assert not bad, f"{path.relative_to(ROOT)}: no such heading: {', '.join(bad)}"


@pytest.mark.parametrize("page", sorted(DOCS.glob("*.md")), ids=lambda p: p.name)
def test_relative_links_between_docs_pages_resolve(page):
    links = re.findall(r"\]\(([\w./-]+\.md)(?:#[\w-]+)?\)", page.read_text(encoding="utf-8"))
    missing = [link for link in links if not (page.parent / link).is_file()]
    assert not missing, f"{page.name} links to missing pages: {missing}"


#: Citations of files outside the product: the background notes and their section and rule numbers.
OUTSIDE_CITE = re.compile(r"sglang-fence\.md|\.\./shared/|anchors\.md|\bsections? \d")

def test_the_product_cites_only_its_own_pages():
    scanned = [*FILES, *(ROOT / "tests").rglob("*.py"), ROOT / "README.md"]
    citing = {p.relative_to(ROOT).as_posix() for p in scanned if OUTSIDE_CITE.search(p.read_text(encoding="utf-8"))}
    assert not citing, f"{sorted(citing)}: cite docs/sglang-mechanism.md or docs/cuda-rules.md instead"
