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


def test_fitness_lead_counts_a_shared_pick_as_a_tie_and_checks_the_interval_against_scipy(monkeypatch):
    """A seed where both searches pick the same architecture (equal fitness) is a tie, neither
    ahead nor behind; a seed with a missing search is left out; the interval is Student t over
    the paired seeds; metrics are carried with their unit, and seeds of different metrics give
    no mean."""
    import numpy as np
    from scipy import stats

    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import search_arms

    def pair(ea, rs, metric="loss"):
        return {"evolution": {"fitness": ea, "fitness_metric": metric},
                "random": {"fitness": rs, "fitness_metric": metric}}

    searches = {"0": pair(-5.0, -5.004), "1": pair(-5.001, -5.001), "2": pair(-5.0, -4.998), "3": pair(-5.0, -5.006),
                "4": {"random": {"fitness": -5.0, "fitness_metric": "loss"}},  # the strategy's search missing
                "5": pair(-5.0, None)}  # random search without a fitness
    lead = search_arms.fitness_lead(searches)
    d = [0.004, 0.0, -0.002, 0.006]
    assert list(lead["per_seed"]) == ["0", "1", "2", "3"] and lead["per_seed"]["1"] == 0.0
    assert (lead["n"], lead["ahead"], lead["behind"], lead["tied"]) == (4, 2, 1, 1)
    assert lead["mean"] == pytest.approx(np.mean(d))
    want = stats.t.interval(0.95, 3, loc=np.mean(d), scale=np.std(d, ddof=1) / 2)
    assert lead["t95"] == pytest.approx(list(want))
    assert lead["metric"] == "loss" and lead["unit"].startswith("nats")
    mixed = search_arms.fitness_lead({"0": pair(-5.0, -5.1), "1": pair(0.31, 0.30, "accuracy"),
                                      "2": {"evolution": {"fitness": -5.0, "fitness_metric": "loss"},
                                            "random": {"fitness": 0.3, "fitness_metric": "accuracy"}}})
    assert mixed["n"] == 2 and "2" not in mixed["per_seed"]  # a seed's two searches on different metrics: out
    assert mixed["metric"] == "mixed: accuracy, loss" and mixed["mean"] is None and mixed["t95"] is None
    legacy = search_arms.fitness_lead({"0": {"evolution": {"fitness": -5.0}, "random": {"fitness": -5.1}},
                                       "1": {"evolution": {"fitness": -5.0}, "random": {"fitness": -5.2}}})
    assert legacy["metric"] is None and legacy["mean"] == pytest.approx(0.15)  # files before the metric was kept
