"""Committed benchmark results (benchmarks/results/*.json) carry no machine's layout: every path
of a run or of the data is relative to the repo (benchmarks/_common.py's ``portable_paths``)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
RESULTS = sorted((BENCHMARKS / "results").glob("*.json"))
sys.path.insert(0, str(BENCHMARKS))
import _common  # noqa: E402


def strings(obj):
    """Every string of JSON data, dict keys included."""
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield k
            yield from strings(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from strings(v)


@pytest.mark.parametrize("path", RESULTS, ids=[p.name for p in RESULTS])
def test_a_committed_result_holds_no_absolute_path(path: Path):
    found = [m for s in strings(json.loads(path.read_text(encoding="utf-8"))) for m in _common.machine_paths(s)]
    assert not found, (f"{path.name} holds absolute paths {found[:3]}: write results with _common.write_result "
                       "(it applies portable_paths)")


def test_the_check_finds_what_it_must():
    """The detector itself: run and data paths are found, tool paths and ratios are not."""
    assert _common.machine_paths("--supernet /work/runs/SNE") == ["/work/runs/SNE"]
    assert _common.machine_paths('"/tmp/x/model"') == ["/tmp/x/model"]
    assert _common.machine_paths("data=/home/u/corpus, blimp:/data/blimp") == ["/home/u/corpus", "/data/blimp"]
    assert _common.machine_paths("/usr/local/cuda/bin/nvcc") == []
    assert _common.machine_paths("tokens/s 3/4 ../shared/data/blimp runs/sn") == []


def test_portable_paths_is_one_to_one_and_keeps_tool_paths():
    repo = _common.REPO
    data = {"a": f"{repo}/benchmarks/results/x.json", f"{repo.parent}/runs/SNE": ["/tmp/a", "/tmp/b"],
            "nvcc": "/usr/local/cuda/bin/nvcc", "n": 3}
    out = _common.portable_paths(data)
    assert out["a"] == "benchmarks/results/x.json"
    assert out["../runs/SNE"] == [os.path.relpath("/tmp/a", repo), os.path.relpath("/tmp/b", repo)]
    assert out["nvcc"] == "/usr/local/cuda/bin/nvcc" and out["n"] == 3
    assert not any(_common.machine_paths(s) for s in strings(out))
