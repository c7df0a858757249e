"""Layering: no module imports another package's ``_private`` names (docs/architecture.md:
"a concept's contract lives in the module that owns it"), neither by import nor as an
attribute (``stream._permutation(...)`` on an object of another package's class)."""
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


def _defined_private_names(path: Path) -> set[str]:
    """Private functions, methods, classes and class or module attributes ``path`` defines."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and _private(node.name):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and _private(node.attr):
            names.add(node.attr)  # self._x = ...
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(t, ast.Name) and _private(t.id):
                    names.add(t.id)
    return names


def cross_package_private_attributes(files: list[Path], root: Path = REPO) -> list[str]:
    """``path:line uses .._x`` for each attribute access ``obj._x`` (``obj`` not ``self`` or
    ``cls``) where ``_x`` is a private name that lvsearch defines only in other packages: the
    contract of another package's object, reached around its public surface."""
    owners: dict[str, set[str]] = {}
    for path in files:
        for name in _defined_private_names(path):
            owners.setdefault(name, set()).add(_package(_module_name(path, root)))
    found = []
    for path in files:
        here = _package(_module_name(path, root))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if not (isinstance(node, ast.Attribute) and _private(node.attr)):
                continue
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                continue
            packages = owners.get(node.attr, set())
            if packages and here not in packages:
                found.append(f"{path.relative_to(root)}:{node.lineno} uses .{node.attr} of {', '.join(sorted(packages))}")
    return found


def test_no_cross_package_private_attributes():
    files = sorted((REPO / "lvsearch").rglob("*.py"))
    assert cross_package_private_attributes(files) == []


def test_the_check_catches_a_private_attribute(tmp_path):
    """An object of another package's class used through a private method is reported; the
    package's own private names and ``self._x`` are not."""
    (tmp_path / "lvsearch" / "data").mkdir(parents=True)
    (tmp_path / "lvsearch" / "eval").mkdir(parents=True)
    (tmp_path / "lvsearch" / "data" / "loader.py").write_text(
        "class Stream:\n    def _permutation(self, e):\n        return self._perm\n")
    (tmp_path / "lvsearch" / "eval" / "floors.py").write_text(
        "def count(stream):\n    return stream._permutation(0)\n\n\ndef _own():\n    return x._own\n")
    files = sorted((tmp_path / "lvsearch").rglob("*.py"))
    assert cross_package_private_attributes(files, root=tmp_path) == [
        "lvsearch/eval/floors.py:2 uses ._permutation of lvsearch.data",
    ]
