"""Locating the shared research data (never copied into the repository) for tests.

Looks in ``$LVSEARCH_SHARED_DATA`` first, then ``<repo>/../shared/data``; tests that need the
data call :func:`shared_data_dir` (or use the fixtures in ``conftest.py``) and
``pytest.skip`` when it returns None.
"""

from __future__ import annotations

import csv
import os
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def shared_data_dir() -> Path | None:
    """The shared ``data`` folder, or None when it is absent."""
    env = os.environ.get("LVSEARCH_SHARED_DATA")
    candidates = [Path(env)] if env else []
    candidates.append((REPO / ".." / "shared" / "data").resolve())
    for c in candidates:
        if c.is_dir():
            return c
    return None


def load_scaling_curve(domain: str, task: str, model: str):
    """One benchmark curve as sorted, de-duplicated ``(x_train, y_train, x_test, y_test)`` lists,
    or None when the data is absent."""
    base = shared_data_dir()
    if base is None:
        return None
    name = "benchmark.vision.csv" if domain == "IC" else "benchmark.lang.csv"
    path = base / "scaling" / name
    if not path.is_file():
        return None
    pts = {1: defaultdict(list), 0: defaultdict(list)}
    seen = set()
    with open(path, newline="", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            if (r["Domain"], r["Task"], r["Model"]) != (domain, task, model):
                continue
            key = (r["Seen Examples"], r["Loss"], r["Training"])
            if key in seen:  # the LM rows appear 4 times
                continue
            seen.add(key)
            pts[int(float(r["Training"]))][float(r["Seen Examples"])].append(float(r["Loss"]))
    out = []
    for flag in (1, 0):
        xs = sorted(pts[flag])
        out += [xs, [sum(pts[flag][x]) / len(pts[flag][x]) for x in xs]]
    return tuple(out)


def run_cli(capsys, *argv: str) -> tuple[int, str]:
    """Run ``lvsearch <argv>`` in-process; returns the exit code and stdout + stderr together
    (``capsys`` is pytest's fixture, drained by the call)."""
    from lvsearch.cli import main

    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def benchmark_script(monkeypatch, tmp_path: Path, name: str):
    """The module of ``benchmarks/<name>.py``, imported with ``benchmarks/`` on the path and
    ``_common.RESULTS`` pointed at ``tmp_path / "results"`` (created): results go there."""
    import importlib

    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    common = importlib.import_module("_common")
    monkeypatch.setattr(common, "RESULTS", tmp_path / "results")
    (tmp_path / "results").mkdir(exist_ok=True)
    return importlib.import_module(name)
