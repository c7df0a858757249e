"""docs/architecture.md's file map is generated from the modules' docstrings; it must not drift."""

from pathlib import Path

import pytest

from lvsearch import docs_map

DOC = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"


def test_architecture_file_map_matches_the_package():
    text = DOC.read_text(encoding="utf-8")
    assert text == docs_map.render(text), (
        "docs/architecture.md's file map is out of date (a module was added, removed, resized or its "
        "docstring changed): regenerate it with python -m lvsearch.docs_map")


def test_every_module_is_in_the_map():
    block = docs_map.file_map_markdown()
    for path in sorted(Path(docs_map.PACKAGE).rglob("*.py")):
        rel = path.relative_to(docs_map.PACKAGE.parent).as_posix()
        assert f"| `{rel}` | {len(path.read_text(encoding='utf-8').splitlines())} | " in block, rel


@pytest.mark.parametrize("doc, first", [
    ("Supernet (LV-BERT section 3.2, eq. 6-7; Guo et al. 2020) with mixing. More text.",
     "Supernet (LV-BERT section 3.2, eq. 6-7; Guo et al. 2020) with mixing."),
    ("The ``x`` job (:func:`run`; see it. Really) done.\n\nSecond paragraph.", "The `x` job (`run`; see it. Really) done."),
    ("No full stop\nacross lines", "No full stop across lines"),
    ("Counts, e.g. tokens. Then `code`.", "Counts, e.g. tokens."),
])
def test_first_sentence(doc, first):
    assert docs_map.first_sentence(doc) == first


def test_module_without_docstring_and_missing_markers_are_refused(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text('"""A package."""\n')
    (pkg / "bare.py").write_text("x = 1\n")
    with pytest.raises(ValueError, match="bare.py has no module docstring"):
        docs_map.modules(pkg)
    (pkg / "bare.py").write_text('"""Bare: one line. Two."""\nx = 1\n')
    assert docs_map.modules(pkg) == [("pkg/__init__.py", 1, "A package."), ("pkg/bare.py", 2, "Bare: one line.")]
    with pytest.raises(ValueError, match="filemap:begin"):
        docs_map.render("# no markers\n", pkg)
    doc = f"before\n{docs_map.BEGIN}\nstale\n{docs_map.END}\nafter\n"
    assert docs_map.render(doc, pkg) == f"before\n{docs_map.file_map_markdown(pkg)}\nafter\n"
