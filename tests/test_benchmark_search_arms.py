"""The arms benchmark's search-side statistics (benchmarks/search_arms.py), nothing trained."""

from __future__ import annotations

from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def test_fitness_lead_pairs_each_strategy_pick_with_its_random_search(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import search_arms

    def pair(ea, rs):
        return {"evolution": {"fitness": ea}, "random": {"fitness": rs}}

    searches = {"0": pair(-5.0, -5.004), "1": pair(-5.0, -5.002), "2": pair(-5.0, -5.003),
                "3": {"evolution": {"fitness": -4.0}}}  # no random search yet: left out
    lead = search_arms.fitness_lead(searches)
    assert lead["n"] == 3 and lead["ahead"] == 3 and lead["mean"] == pytest.approx(0.003)
    assert lead["t95"][0] > 0 and set(lead["per_seed"]) == {"0", "1", "2"}
    assert search_arms.fitness_lead({"0": pair(-5.0, -5.1)}) is None
