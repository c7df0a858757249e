"""The slot-flip benchmark's flips and statistics (benchmarks/slot_flip.py), nothing trained."""

from __future__ import annotations

from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture()
def slot_flip(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import slot_flip

    return slot_flip


def test_a_flip_changes_one_slot_and_keeps_the_inputs(slot_flip):
    from lvsearch.arch import Arch

    a = Arch("s(h4)cf", ((0,), (0, 1), (1, 2)))
    f = slot_flip.flips(a, 1, ["SA", "FF", "DC"])
    assert f["SA"] == a  # its own op: the architecture itself, variant kept
    assert f["DC"].compact == "cc" + "f" and f["FF"].compact == "fcf"
    assert all(v.inputs == a.inputs and v.ops[1:] == a.ops[1:] for v in f.values())


def test_paired_and_standalone_differences(slot_flip):
    rows = [{"fitness": {"SA": -5.0 + d, "DC": -5.0}} for d in (0.019, 0.02, 0.021)]
    p = slot_flip.paired(rows, "SA", "DC")
    assert p["mean"] == pytest.approx(0.02) and p["a_better"] == 3 and p["ci95"][0] > 0
    assert slot_flip.paired(rows[:1], "SA", "DC") is None
    land = {"archs": [{"name": "bert", "key": "cc|0;1", "accuracy_mean": 0.9},
                      {"name": "r1", "key": "cs|0;1", "accuracy_mean": 0.30},
                      {"name": "r2", "key": "cf|0;0,1", "accuracy_mean": 0.32},
                      {"name": "r3", "key": "sc|0;1", "accuracy_mean": 0.26},
                      {"name": "r4", "key": "sf|0;1", "accuracy_mean": 0.28}]}
    g = slot_flip.standalone_groups(land, 1, ["SA", "DC"])
    assert g["groups"]["DC"] == {"n": 2, "mean": pytest.approx(0.31)}  # bert (a fixed order) left out
    assert g["differences"]["SA-DC"]["mean"] == pytest.approx(-0.04)
