"""The pre-registered latency test (benchmarks/faster_test.py) at tiny sizes: its search part on a
tiny supernet and table, and its co-primary outcomes from a result's seeds alone."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from test_latency import run, table_path  # noqa: F401  (module fixtures: a tiny supernet and its table)

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture
def ft(monkeypatch, tmp_path):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import _common
    import faster_test

    monkeypatch.setattr(_common, "RESULTS", tmp_path / "results")
    (tmp_path / "results").mkdir()
    return faster_test


def seeds_result(red: list[float], acc: list[float], same: int | None = None) -> dict:
    """A result with measured latencies and retrained accuracies giving per-seed reductions
    ``red`` and accuracy differences ``acc`` (pp); seed ``same`` picks one architecture twice."""
    seeds, lat = {}, {}
    for s, (r, d) in enumerate(zip(red, acc)):
        keys = ["k", "k"] if s == same else [f"n{s}", f"r{s}"]
        seeds[str(s)] = {"search": {a: {"pick": {"meta": {"pick": {"pick": {"key": k}}}}} for a, k in zip(("nsga2", "random"), keys)},
                         "runs": {"nsga2": {"mlm_accuracy": 0.30 + d / 100}, "random": {"mlm_accuracy": 0.30}}}
        lat[f"nsga2-s{s}"], lat[f"random-s{s}"] = 40.0 * (1 - r), 40.0
    return {"seeds": seeds, "latency": {"measured_ms": lat}}


def test_outcomes_are_paired_t_intervals_and_claim_only_with_ten_seeds_and_both_passing(ft):
    """Per seed 1 − t(NSGA-II)/t(random) and the accuracy difference in pp; scipy's paired t
    interval of each mean; the same pick counts 0 and 0 whatever was timed or trained; the claim
    needs 10 seeds and both lower ends past their bounds."""
    from scipy import stats

    red = [0.10, 0.12, 0.08, 0.11, 0.09, 0.10, 0.13, 0.07, 0.10, 0.5]
    acc = [0.2, -0.3, 0.1, 0.0, -0.2, 0.4, -0.1, 0.3, 0.0, 9.0]
    out = ft.outcomes(seeds_result(red, acc, same=9), margin_pp=1.0)
    red[9], acc[9] = 0.0, 0.0
    for got, xs in ((out["latency_reduction"], red), (out["accuracy_pp"], acc)):
        lo, hi = stats.t.interval(0.95, len(xs) - 1, loc=sum(xs) / len(xs), scale=stats.sem(xs))
        assert got["n"] == 10 and got["t95"] == pytest.approx([lo, hi]) and got["mean"] == pytest.approx(sum(xs) / 10)
    assert out["per_seed"][9] == {"seed": 9, "same_pick": True, "latency_reduction": 0.0, "accuracy_pp": 0.0}
    assert out["faster"] and out["non_inferior"] and out["claim"] is True and out["complete"]

    worse = ft.outcomes(seeds_result(red, [a - 1.5 for a in acc]), margin_pp=1.0)
    assert worse["faster"] and not worse["non_inferior"] and worse["claim"] is False
    nine = ft.outcomes(seeds_result(red[:9], acc[:9]), margin_pp=1.0)
    assert nine["faster"] and nine["claim"] is None and not nine["complete"]
    timed_only = seeds_result(red, acc)
    for entry in timed_only["seeds"].values():
        entry.pop("runs")
    half = ft.outcomes(timed_only, margin_pp=1.0)
    assert half["accuracy_pp"] is None and half["latency_reduction"]["n"] == 10 and half["claim"] is None


def test_search_part_commits_each_arms_pick_and_front_and_skips_it_when_run_again(ft, run, table_path, tmp_path,  # noqa: F811
                                                                                 monkeypatch, capsys):
    """One seed at tiny sizes: NSGA-II and its random-search control, both pick.json files in
    the result (the same reference), portable paths, the supernet's and table's sha256; a second
    call runs nothing; other settings are refused before anything runs."""
    from lvsearch.errors import LvsearchError
    from lvsearch.io import sha256_file

    work = tmp_path / "w"
    argv = ["faster_test.py", "--supernet", str(run), "--table", str(table_path), "--data", str(tmp_path), "--work",
            str(work), "--part", "search", "--seed-list", "0", "--no-seeding-seeds", "--population", "4", "--iterations",
            "2", "--search-dev-sequences", "8", "--name", "ft"]
    monkeypatch.setattr(sys, "argv", argv)
    ft.main()
    res = json.loads((tmp_path / "results" / "ft.json").read_text())
    entry = res["seeds"]["0"]["search"]
    assert entry["seconds"] > 0 and res["table_sha256"] == sha256_file(table_path)
    refs = set()
    for arm, folder in (("nsga2", work / "search-s0"), ("random", work / "search-s0" / "random")):
        on_disk = json.loads((folder / "pick.json").read_text())
        pick = entry[arm]["pick"]
        assert pick["ops"] == on_disk["ops"] and pick["inputs"] == on_disk["inputs"]
        refs.add(pick["meta"]["pick"]["reference"]["fitness"])
        lo, hi = entry[arm]["front_latency_ms"]
        assert entry[arm]["all_latency_ms"][0] == lo <= hi <= entry[arm]["all_latency_ms"][1]
        assert lo <= pick["meta"]["latency_ms"]
    import _common

    assert len(refs) == 1 and not _common.ABSOLUTE_PATH.search(json.dumps(res))

    stamp = (work / "search-s0" / "history.jsonl").stat().st_mtime_ns
    ft.main()
    assert json.loads((tmp_path / "results" / "ft.json").read_text())["seeds"] == res["seeds"]
    assert (work / "search-s0" / "history.jsonl").stat().st_mtime_ns == stamp
    monkeypatch.setattr(sys, "argv", argv + ["--population", "6"])
    with pytest.raises(LvsearchError, match="other settings \\(population\\)"):
        ft.main()


def test_a_finished_retrain_is_read_from_its_files(ft, tmp_path, monkeypatch):
    """A run folder that holds its summary and both evaluations is not run again; its row has
    the architecture key, the MLM and floor figures and the BLiMP mean over paradigms."""
    from types import SimpleNamespace

    from lvsearch.arch import Arch

    def never(*a, **k):
        raise AssertionError("a finished retrain was run again")

    monkeypatch.setattr(ft, "run_lvsearch", never)
    run = tmp_path / "work" / "runs" / "nsga2-s3"
    (run / "model").mkdir(parents=True)
    arch = Arch.sequential("sfc")
    (run / "model" / "config.json").write_text(json.dumps({"arch": arch.to_dict()}))
    (run / "summary.json").write_text("{}")
    mlm = {"accuracy": 0.28, "loss": 4.2, "per_target_correct": "0110",
           "floors": {"neighbour-count": {"accuracy": 0.27}, "beats_floor": True}}
    (run / "mlm.json").write_text(json.dumps({"mlm": mlm}))
    (run / "all.json").write_text(json.dumps({"mlm": {"accuracy": 0.29, "loss": 4.1, "sequences": 1825},
                                              "blimp": {"mean_over_paradigms": 0.55, "pairs": 6700}}))
    args = SimpleNamespace(work=tmp_path / "work", data=tmp_path, dev_sequences=512, blimp=None, blimp_limit=100,
                           steps=2000, num_slots=3)
    row = ft.retrain(args, 3, "nsga2", "unused.json")
    assert row["arch"] == arch.key and row["mlm_accuracy"] == 0.28 and row["floor"] == 0.27 and row["beats_floor"]
    assert row["all_dev_accuracy"] == 0.29 and row["all_dev_sequences"] == 1825 and row["blimp"] == 0.55
