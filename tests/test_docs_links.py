"""Every Markdown link to a section of the docs (``#anchor``, ``results.md#anchor``) names a heading
that exists, with GitHub's anchors: results.md's summary and history.md's table link by anchor."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ["README.md", "docs/results.md", "docs/history.md", "docs/architecture.md", "docs/recipes.md"]


def anchors(path: Path) -> set[str]:
    """GitHub's heading anchors of a Markdown file: lower case, punctuation dropped, spaces as
    hyphens, ``-1``, ``-2`` … for repeats; headings inside fenced code are not headings."""
    seen: dict[str, int] = {}
    out = set()
    fenced = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        m = None if fenced else re.match(r"^#{1,6} (.*)$", line)
        if m:
            slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def test_github_anchors():
    assert anchors(ROOT / "docs" / "results.md") >= {
        "rank-quality-n--20", "--minutes-60-the-searched-arms-beat-the-blimp-floor-too",
        "tests-fixed-before-the-6-seed-runs-results-committed-before-it-finished", "the-24-slot-gate-no-room-for-a-10-seed-test", "the-elastic-gate-room-by-the-rule-carried-by-the-reference-orders"}


@pytest.mark.parametrize("doc", DOCS)
def test_section_links_resolve(doc):
    path = ROOT / doc
    bad = []
    for target, anchor in re.findall(r"\]\(([\w./-]*\.md)?#([^)\s]+)\)", path.read_text(encoding="utf-8")):
        file = (path.parent / target).resolve() if target else path
        if not file.is_file() or anchor not in anchors(file):
            bad.append(f"{target}#{anchor}")
    assert not bad, f"{doc}: links to sections that do not exist: {bad}"
