"""Layering: no module imports another package's ``_private`` names (docs/architecture.md:
"a concept's contract lives in the module that owns it")."""
from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _package(module: str) -> str:
    """``lvsearch.train.retrain`` → ``lvsearch.train``; top-level modules are their own package."""
    parts = module.split(".")
    return ".".join(parts[:2])


def _module_name(path: Path, root: Path) -> str:
    rel = path.relative_to(root).with_suffix("")
    return ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def cross_package_private_imports(files: list[Path], root: Path = REPO) -> list[str]:
    """``path:line imports lvsearch.X._y`` for each ``from lvsearch.X import _y`` (or
    ``import lvsearch.X._y``) whose package differs from the importing file's."""
    found = []
    for path in files:
        here = _module_name(path, root)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and node.module.startswith("lvsearch"):
                targets = [(node.module, a.name) for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [(a.name.rpartition(".")[0], a.name.rpartition(".")[2]) for a in node.names
                           if a.name.startswith("lvsearch.")]
            else:
                continue
            for module, name in targets:
                private_path = any(_private(p) for p in module.split("."))
                if (private_path or _private(name)) and _package(module) != _package(here):
                    found.append(f"{path.relative_to(root)}:{node.lineno} imports {module}.{name}")
    return found


def test_no_cross_package_private_imports():
    files = sorted((REPO / "lvsearch").rglob("*.py")) + sorted((REPO / "benchmarks").rglob("*.py"))
    assert len(files) > 50
    assert cross_package_private_imports(files) == []


def test_the_check_catches_a_private_import(tmp_path):
    """The scan above can fail: a file of another package importing a private name is reported."""
    fake = tmp_path / "lvsearch" / "scaling" / "x.py"
    fake.parent.mkdir(parents=True)
    fake.write_text("from lvsearch.train.retrain import _helper\nfrom lvsearch.scaling.halving import _ok\n"
                    "import lvsearch.kernels._extension\n")
    assert cross_package_private_imports([fake], root=tmp_path) == [
        "lvsearch/scaling/x.py:1 imports lvsearch.train.retrain._helper",
        "lvsearch/scaling/x.py:3 imports lvsearch.kernels._extension",
    ]
