"""The arms benchmark (benchmarks/search_arms.py): its search-side statistics (nothing trained),
and bad input on a tiny supernet."""

from __future__ import annotations

import json
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


# ------------------------------------------------------------------ continuing a committed result


def _continuing(monkeypatch, tmp_path, committed: dict | None, **over):
    """``search_arms`` with RESULTS in ``tmp_path`` holding ``committed`` as ``test_arms.json``,
    and args of a 2-seed EA / random-search run (``over`` replaces some)."""
    from types import SimpleNamespace

    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import search_arms

    monkeypatch.setattr(search_arms, "RESULTS", tmp_path)
    if committed is not None:
        (tmp_path / "test_arms.json").write_text(json.dumps(committed))
    args = SimpleNamespace(name="test_arms", supernet=tmp_path / "sn", supernet_sha256="aa" * 32,
                           data_manifest_sha256="bb" * 32, steps=2000, seeds=2, seed_list=None, strategy=None,
                           num_slots=24, population=50, iterations=40, search_dev_sequences="default",
                           dev_sequences=512, blimp_limit=100, mlm_only=True, task=tmp_path, threads=1, jobs=2,
                           arms=["ea", "random-search"], work=tmp_path / "work", landscape=None,
                           landscape_result=None, param_counter=None)
    for k, v in over.items():
        setattr(args, k, v)
    return search_arms, args


def _committed(search_arms, args, per_seed: dict) -> dict:
    return {"what": search_arms.WHAT, "settings": search_arms.run_settings(args),
            "arms": {arm: {"per_seed": rows} for arm, rows in per_seed.items()},
            "searches": {"0": {"evolution": {"best_ops": "cs", "fitness": -5.0}, "random": {"best_ops": "sc",
                                                                                          "fitness": -5.1}}}}


def test_a_committed_seed_is_not_run_again_and_is_merged_into_the_report(monkeypatch, tmp_path):
    """A test over many sessions: seed 0 of both arms is in the committed result, so its search
    and retrains are skipped, and the report's rows hold it (marked ``committed``) beside the
    seeds this machine ran, whose rows win where both exist."""
    search_arms, args = _continuing(monkeypatch, tmp_path, None)
    row = {"mlm_accuracy": 0.29, "mlm_loss": 4.1, "key": "k0", "source": "this run"}
    (tmp_path / "test_arms.json").write_text(json.dumps(
        _committed(search_arms, args, {"ea": {"0": row}, "random-search": {"0": {**row, "mlm_accuracy": 0.28}}})))
    args.committed = search_arms.committed_result(args)
    search_arms.check_continuation(args, args.committed)
    assert search_arms.run_arm(args, "ea", 0) == "ea-s0: in the committed test_arms.json"
    assert search_arms.search(args, 0, 1, 2) == args.work / "search-0"  # no evolve started (it would fail here)
    assert not args.work.exists()
    ours = {"ea": {1: {"mlm_accuracy": 0.30, "_mlm_correct": "01"}}}
    rows = search_arms.merged_rows(args, ours)
    assert rows["ea"][0]["source"] == "committed" and rows["ea"][0]["_mlm_correct"] is None
    assert rows["ea"][1] == ours["ea"][1] and list(rows["ea"]) == [0, 1]
    assert rows["random-search"][0]["mlm_accuracy"] == 0.28
    assert search_arms.committed_search(args, 0)["random"]["best_ops"] == "sc"
    # a committed row keeps no per-target bits: the target-level bootstrap is left out, the rest is computed
    d = search_arms._intervals([0.30, 0.29], [0.28, 0.28], [None, "01"], ["10", "11"])
    assert d["mean_difference"] == pytest.approx(0.015) and "target_bootstrap_95" not in d and "t_95" in d


def test_a_committed_search_is_not_run_again_and_its_picks_are_retrained(monkeypatch, tmp_path):
    """A seed whose two searches finished on an earlier machine (the committed result keeps each
    pick's architecture) but whose picks were not retrained there: no search is started again,
    the retrain's ``--arch`` is the committed pick written to ``WORK/picks/``, and a search this
    machine ran itself wins over the committed one."""
    from lvsearch.arch import Arch

    search_arms, args = _continuing(monkeypatch, tmp_path, None)
    ea, rs = Arch.from_key("s(h2)c(k9)|0;0,1"), Arch.from_key("f(i2)s(h4)|0;1")
    committed = _committed(search_arms, args, {})
    committed["searches"]["0"]["evolution"]["arch"] = ea.to_dict(space="lvbert-elastic")
    committed["searches"]["0"]["random"]["arch"] = rs.to_dict(space="lvbert-elastic")
    (tmp_path / "test_arms.json").write_text(json.dumps(committed))
    args.committed = search_arms.committed_result(args)
    assert search_arms.search(args, 0, 1, 2) == args.work / "search-0"  # no evolve started (it would fail here)
    for arm, want in (("ea", ea), ("random-search", rs)):
        flag, path, *resize = search_arms.arch_arg(args, arm, 0)
        assert flag == "--arch" and Path(path) == args.work / "picks" / f"{arm}-s0.json"
        assert Arch.from_dict(json.loads(Path(path).read_text())) == want and resize == ["--set", "num_slots=24"]
    mine = args.work / "search-0" / "best.json"
    ea.to_json(mine, meta={"fitness": -5.0})
    assert search_arms.arch_arg(args, "ea", 0)[1] == str(mine)
    with pytest.raises(Exception):  # seed 1 has no committed pick: its search runs (and fails without a supernet)
        search_arms.search(args, 1, 1, 2)


def test_the_report_commits_finished_searches_before_any_retrain(monkeypatch, tmp_path):
    """A result can be written as soon as a seed's searches are done, so a later machine needs
    only the retrains: the report keeps each finished search's pick (its architecture) and
    leaves out a search that is still running."""
    from lvsearch.arch import Arch

    search_arms, args = _continuing(monkeypatch, tmp_path, None, seeds=1)
    args.committed = {}
    written = {}
    monkeypatch.setattr(search_arms, "write_result", lambda name, result: written.setdefault(name, result))
    monkeypatch.setattr(search_arms, "machine", lambda: {})
    ea, rs = Arch.from_key("s(h2)c(k9)|0;0,1"), Arch.from_key("c(k3)s(h4)|0;1")
    folder = args.work / "search-0"
    ea.to_json(folder / "best.json", meta={"fitness": -5.0, "fitness_metric": "loss"})
    rs.to_json(folder / "random" / "best.json", meta={"fitness": -5.1, "fitness_metric": "loss"})
    step = {"sequences": 225, "fitness": -5.0, "partial": False}
    (folder / "state.json").write_text(json.dumps({"done": True, "passes": 900, "history": [step] * 4}))
    (folder / "random" / "state.json").write_text(json.dumps({"done": False, "passes": 100, "history": [step]}))
    search_arms.report(args)
    got = written["test_arms"]["searches"]["0"]
    assert set(got) == {"evolution"} and Arch.from_dict(got["evolution"]["arch"]) == ea
    assert got["evolution"]["passes"] == 900 and got["evolution"]["dc_in_slot_1"] is False
    assert written["test_arms"]["arms"] == {}
    (folder / "random" / "state.json").write_text(json.dumps({"done": True, "passes": 900, "history": [step] * 4}))
    written.clear()
    search_arms.report(args)
    got = written["test_arms"]["searches"]["0"]
    assert Arch.from_dict(got["random"]["arch"]) == rs and got["random"]["dc_in_slot_1"] is True
    assert got["random"]["climb"]["pass_marks"] == [90 * i for i in range(1, 11)]  # tenths of the strategy's passes
    assert got["random"]["climb"]["best_at_passes"][:3] == [None, None, -5.0]
    import shutil

    shutil.rmtree(args.work)
    args.work.mkdir()
    from lvsearch.errors import LvsearchError

    with pytest.raises(LvsearchError, match="no finished search"):
        search_arms.report(args)


def test_the_climb_pairs_a_seeds_two_searches_at_the_strategys_passes(monkeypatch):
    """The secondary outcome: each search's best complete fitness within each tenth of its seed's
    strategy-search passes (raced-out partial scores never count), the strategy minus random
    search paired by seed with a Student-t interval; a committed search keeps its committed
    climb, and a seed without both climbs is left out."""
    import numpy as np
    from scipy import stats

    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import search_arms

    def h(*entries):  # (sequences, fitness, partial)
        return [{"sequences": n, "fitness": f, "partial": p} for n, f, p in entries]

    searches = {"0": {"evolution": {"passes": 1000}, "random": {"passes": 1000}},
                "1": {"evolution": {"passes": 500}, "random": {"passes": 500}},
                "2": {"evolution": {"passes": 1000, "climb": {"pass_marks": [100 * i for i in range(1, 11)],
                                                              "best_at_passes": [-5.0] * 10}},
                      "random": {"passes": 1000}},
                "3": {"evolution": {"passes": 1000}}}
    histories = {("0", "evolution"): h((64, -5.9, True), (436, -5.2, False), (500, -5.1, False)),
                 ("0", "random"): h((500, -5.3, False), (500, -5.25, False)),
                 ("1", "evolution"): h((250, -5.4, False), (250, -5.0, False)),
                 ("1", "random"): h((250, -5.1, False), (250, -5.2, False)),
                 ("2", "random"): h((1000, -5.05, False)),
                 ("3", "evolution"): h((1000, -5.0, False))}
    search_arms.add_climbs(searches, histories)
    assert searches["0"]["evolution"]["climb"]["best_at_passes"] == [None] * 4 + [-5.2] * 5 + [-5.1]
    assert searches["0"]["random"]["climb"]["best_at_passes"] == [None] * 4 + [-5.3] * 5 + [-5.25]
    assert searches["1"]["random"]["climb"]["pass_marks"] == [50 * i for i in range(1, 11)]
    assert searches["2"]["evolution"]["climb"]["best_at_passes"] == [-5.0] * 10  # committed: kept
    rows = search_arms.climb_lead(searches)
    assert [r["fraction_of_passes"] for r in rows] == pytest.approx([i / 10 for i in range(1, 11)])
    assert rows[0]["seeds"] == 0 and rows[0]["mean_difference"] is None  # nobody complete yet
    last = [-5.1 - -5.25, -5.0 - -5.1, -5.0 - -5.05]  # seeds 0, 1, 2 at their whole passes; seed 3 has no control
    assert rows[-1]["seeds"] == 3 and rows[-1]["ahead"] == 3
    assert rows[-1]["mean_difference"] == pytest.approx(np.mean(last))
    want = stats.t.interval(0.95, 2, loc=np.mean(last), scale=stats.sem(last))
    assert rows[-1]["t_95"] == pytest.approx(list(want))
    assert search_arms.climb_lead({"0": searches["0"]}) is None


def test_each_pick_is_placed_on_a_landscape_by_its_additive_fit_and_random_draws(monkeypatch):
    """The other secondary outcomes: the landscape's additive fit predicts each pick (its own
    prediction when the pick is a trained landscape architecture), a pick is in the top decile
    when above the 90th percentile of the fit over band draws, and a retrained pick's accuracy
    is a percentile of the landscape's random draws (scipy, ties half); a pick not yet retrained
    has none, and the landscape module's parameter counter is left as it was."""
    import random

    from scipy.stats import percentileofscore

    from lvsearch.arch import Arch
    from lvsearch.space import SearchSpace

    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import landscape
    import search_arms

    rng = random.Random(0)
    space = SearchSpace.load("lvbert-elc").with_num_slots(4)
    good = {"DC": 0.01, "SA": 0.0, "FF": -0.01}
    archs = []
    for i in range(31):
        a = space.sample(rng)
        acc = 0.28 + sum(good[o] * (2 if j == 0 else 1) for j, o in enumerate(a.ops)) + rng.gauss(0, 1e-4)
        archs.append({"id": f"{i:02d}", "source": "random", "name": f"random:{1000 + i}", "key": a.key,
                      "ops": a.compact, "accuracy_mean": acc, "params": 500})
    archs[30].update(source="reference", name="random:1", params=5000)  # an unconditioned draw outside the band
    best, worst = max(archs[:30], key=lambda r: r["accuracy_mean"]), min(archs[:30], key=lambda r: r["accuracy_mean"])
    searches = {"0": {"evolution": {"arch": Arch.from_key(best["key"]).to_dict(space="lvbert-elc")},
                      "random": {"arch": Arch.from_key(worst["key"]).to_dict(space="lvbert-elc")}},
                "1": {"evolution": {"arch": Arch.from_key(archs[3]["key"]).to_dict(space="lvbert-elc")}}}
    rows = {"ea": {0: {"mlm_accuracy": archs[5]["accuracy_mean"]}}}
    counter = {"count": lambda a: 100, "band": (0, 1000), "space": space}
    landscape.PARAM_COUNTER["marker"] = 1
    got = search_arms.landscape_placement({"archs": archs, "settings": {"band": [0, 1000]}}, searches, rows, counter)
    assert landscape.PARAM_COUNTER == {"marker": 1}
    landscape.PARAM_COUNTER.clear()
    fit = landscape.additive_fit(archs, predict={"b": landscape.slot_choices(best["ops"])})
    ea0, rs0 = got["per_seed"]["0"]["ea"], got["per_seed"]["0"]["random-search"]
    assert ea0["predicted"] == pytest.approx(fit["predicted"]["b"]) and ea0["top_decile"] is True
    assert rs0["top_decile"] is False and rs0["predicted"] < got["random_median_predicted"] < got["random_p90_predicted"]
    draws = [r["accuracy_mean"] for r in archs[:30]]  # random:1 is outside the band: not one of its draws
    assert ea0["percentile_among_random_draws"] == pytest.approx(percentileofscore(draws, archs[5]["accuracy_mean"], kind="mean"))
    assert rs0["mlm_accuracy"] is None and rs0["percentile_among_random_draws"] is None
    assert got["per_arm"]["ea"]["picks"] == 2 and got["per_arm"]["ea"]["retrained"] == 1
    assert got["per_arm"]["random-search"] == {"picks": 1, "top_decile": 0, "retrained": 0,
                                               "mean_percentile_among_random_draws": None}
    assert got["random_draws"] == 30 and got["fit_n"] == 31 and got["fit_loo_r2"] > 0.9
    assert search_arms.landscape_placement({"archs": archs[:5], "settings": {"band": [0, 1000]}}, searches, rows, counter) is None  # too few to fit


@pytest.mark.parametrize("key,value", [("supernet_sha256", "cc" * 32), ("data_manifest_sha256", "dd" * 32),
                                       ("steps", 1000), ("population", 20), ("strategy", "aging"),
                                       ("search_dev_sequences", "128")])
def test_a_committed_result_of_other_settings_is_refused(monkeypatch, tmp_path, key, value):
    """Continuing with another supernet (a retrain that is not byte-identical), corpus or a
    setting that changes a seed's result is one message naming both values; a result that
    recorded no supernet sha256 (older versions) is not continued but replaced, as before."""
    from lvsearch.errors import LvsearchError

    search_arms, args = _continuing(monkeypatch, tmp_path, None)
    committed = _committed(search_arms, args, {"ea": {"0": {"mlm_accuracy": 0.29}}})
    (tmp_path / "test_arms.json").write_text(json.dumps(committed))
    setattr(args, key, value)
    with pytest.raises(LvsearchError, match=f"was measured with other settings \\({key}: ") as e:
        search_arms.check_continuation(args, search_arms.committed_result(args))
    assert repr(value) in str(e.value) and "another --name" in e.value.fix
    del committed["settings"]["supernet_sha256"]
    (tmp_path / "test_arms.json").write_text(json.dumps(committed))
    assert search_arms.committed_result(args) == {}
    search_arms.check_continuation(args, {})  # nothing to continue: no refusal


def test_another_supernet_continues_only_when_every_search_is_committed(monkeypatch, tmp_path):
    """A supernet retrained on another machine is not byte-identical (bf16 kernels differ between
    CPUs). It may continue a result whose every search is committed with its pick (only
    retrains are left): the settings keep the searches' sha256, the report records the other
    one, and the picks are not rescored on it (the committed rank check is kept, the picks it
    lacks listed). With a search left to run it is refused, as before."""
    from lvsearch.arch import Arch
    from lvsearch.errors import LvsearchError

    search_arms, args = _continuing(monkeypatch, tmp_path, None)
    committed = _committed(search_arms, args, {"ea": {"0": {"mlm_accuracy": 0.29}}})
    pick = Arch(("DC", "SA")).to_dict()
    committed["rank_check_on_arms"] = {"what": "w", "128": {"n": 2, "kendall_tau": 1.0, "rows": [
        {"arch": Arch(("DC", "SA")).compact, "supernet_fitness": 0.2}]}}
    args.supernet_sha256 = "cc" * 32
    (tmp_path / "test_arms.json").write_text(json.dumps(committed))
    with pytest.raises(LvsearchError, match="supernet_sha256"):  # seed 1 has no committed search
        search_arms.check_continuation(args, search_arms.committed_result(args))
    committed["searches"] = {str(s): {"evolution": {"arch": pick, "fitness": -5.0},
                                      "random": {"arch": pick, "fitness": -5.1}} for s in (0, 1)}
    (tmp_path / "test_arms.json").write_text(json.dumps(committed))
    args.committed = search_arms.committed_result(args)
    search_arms.check_continuation(args, args.committed)
    assert args.rescore_supernet is False and args.supernet_sha256 == "aa" * 32
    assert args.report_supernet_sha256 == "cc" * 32
    rows = {"ea": {0: {"key": Arch(("DC", "SA")).key}, 1: {"key": Arch(("SA", "DC")).key}}}
    asked = []
    monkeypatch.setattr(search_arms, "supernet_fitness",
                        lambda a, archs: asked.append(sorted(archs)) or {128: {k: 0.25 for k in archs}, 512: {}})
    kept = search_arms.rank_check_on_arms(args, rows)
    assert kept["128"] == committed["rank_check_on_arms"]["128"] and kept["not_scored"] == ["ea-s1"]
    assert "cc" * 32 in kept["kept"] and asked == [[Arch(("DC", "SA")).key]]  # only the committed pick is scored
    assert kept["this_supernet_vs_committed"] == {"128": {"picks": 1, "max_abs_difference": pytest.approx(0.05),
                                                          "mean_difference": pytest.approx(0.05)}}
    args.strategy = "aging"  # another setting besides the supernet: still refused
    with pytest.raises(LvsearchError, match="other settings"):
        search_arms.check_continuation(args, args.committed)


def test_search_fitness_rank_pairs_each_pick_with_its_own_search():
    """τ between each retrained pick's own search fitness and its standalone accuracy, over
    the distinct picks (a pick found by both searches of a seed counts once, accuracy
    averaged); None with fewer than 3 picks or mixed metrics."""
    import sys

    sys.path.insert(0, str(BENCHMARKS))
    import search_arms

    searches = {str(s): {"evolution": {"fitness": -5.0 + s / 10, "fitness_metric": "loss"},
                         "random": {"fitness": -5.05 + s / 10, "fitness_metric": "loss"}} for s in range(3)}
    rows = {"ea": {s: {"key": f"e{s}", "mlm_accuracy": 0.29 + s / 100} for s in range(3)},
            "random-search": {s: {"key": f"r{s}", "mlm_accuracy": 0.285 + s / 100} for s in range(3)}}
    got = search_arms.search_fitness_rank(searches, rows)
    assert got["n"] == 6 and got["kendall_tau"] == pytest.approx(1.0) and got["metric"] == "loss"
    rows["random-search"][0]["key"] = "e0"  # both searches of seed 0 picked the same architecture
    rows["random-search"][0]["mlm_accuracy"] = 0.31
    assert search_arms.search_fitness_rank(searches, rows)["n"] == 5
    searches["1"]["random"]["fitness_metric"] = "accuracy"
    assert search_arms.search_fitness_rank(searches, rows) is None
    assert search_arms.search_fitness_rank(searches, {"ea": {s: rows["ea"][s] for s in (0, 1)}}) is None  # 2 picks


# ------------------------------------------------------------------ bad input on a tiny supernet


def test_its_own_results_are_the_committed_search_arms_files(monkeypatch):
    """``--name`` may replace a file only when ``own_result`` recognises it: every committed
    search_arms*.json, and no other benchmark's result."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import search_arms

    results = BENCHMARKS / "results"
    mine = sorted(results.glob("search_arms*.json"))
    assert mine and all(search_arms.own_result(json.loads(p.read_text())) for p in mine)
    others = [results / "landscape.json", results / "slot_flip_12.json"]
    assert not any(search_arms.own_result(json.loads(p.read_text())) for p in others if p.exists())
    assert not search_arms.own_result([1, 2]) and not search_arms.own_result({"arms": {}})


@pytest.fixture(scope="module")
def arms_ws(prepared_corpus: Path, tmp_path_factory) -> dict[str, Path]:
    """A tiny 2-slot supernet, an empty work folder and a file where a folder is expected."""
    from test_reliability import SN_SETS, _sets

    from lvsearch.cli import main

    w = tmp_path_factory.mktemp("arms")
    assert main(["train-supernet", "--config", "quickstart", "--data", str(prepared_corpus), "--out", str(w / "sn2"),
                 *_sets([*SN_SETS, "num_slots=2"])]) == 0
    (w / "empty").mkdir()
    (w / "afile").write_text("not a folder\n")
    return {"W": w, "CORPUS": prepared_corpus, "SN": w / "sn2"}


ARMS_CASES = [  # (id, argv after --supernet {SN} --data {CORPUS} --work {W}/work, text of the one message)
    ("supernet-missing", "--supernet {W}/nosn", "{W}/nosn holds no run"),
    ("work-is-a-file", "--work {W}/afile", "--work {W}/afile is a file"),
    ("data-missing", "--data {W}/nodata", "--data {W}/nodata is not a folder"),
    ("seeds-zero", "--seeds 0", "argument --seeds: '0' must be ≥ 1"),
    ("seed-list-twice", "--seed-list 0 1 0", "--seed-list 0 1 0: seed(s) 0 given more than once"),
    ("seed-list-negative", "--seed-list 0 -1", "argument --seed-list"),
    ("steps-not-a-number", "--steps many", "argument --steps: not a number: 'many'"),
    ("search-dev-sequences-zero", "--search-dev-sequences 0", "argument --search-dev-sequences: '0' must be ≥ 1"),
    ("arm-unknown", "--arms ea nope", "argument --arms: invalid choice: 'nope'"),
    ("report-on-an-empty-work", "--report --work {W}/empty", "--report: --work {W}/empty holds no finished run"),
    ("report-on-no-work", "--report --work {W}/nowork", "--report: --work {W}/nowork does not exist"),
    ("name-of-another-result", "--name landscape", "landscape.json exists and is not this benchmark's output"),
    ("name-with-a-folder", "--name ../x", "'../x' is not a result name"),
    ("data-not-prepared", "--data {W}/empty", "{W}/empty is not a prepared dataset (no manifest.json)"),
    ("landscape-not-json", "--report --work {W}/empty --landscape {W}/afile", "--landscape {W}/afile is not JSON"),
    ("landscape-missing", "--report --work {W}/empty --landscape {W}/nofile", "--landscape {W}/nofile: cannot be read"),
    ("landscape-of-another-benchmark", "--report --work {W}/empty --landscape {RESULTS}/slot_flip_12.json",
     "slot_flip_12.json is not a benchmarks/landscape.py result"),
    ("landscape-of-another-space", "--report --work {W}/empty --landscape {RESULTS}/landscape_elastic.json",
     "landscape_elastic.json is of lvbert-elastic@24 in the band"),
]


@pytest.mark.parametrize("case", ARMS_CASES, ids=[c[0] for c in ARMS_CASES])
def test_bad_input_is_one_message_exit_2_nothing_written(arms_ws, case):
    from benchmark_cli import assert_benchmark_refuses

    _, argv, expect = case
    paths = {**arms_ws, "RESULTS": BENCHMARKS / "results"}
    given = [a.format(**paths) for a in argv.split()]
    base = {"--supernet": str(arms_ws["SN"]), "--data": str(arms_ws["CORPUS"]), "--work": f"{arms_ws['W']}/work"}
    base = [x for k, v in base.items() if k not in given for x in (k, v)]  # a case's own value replaces the base one
    assert_benchmark_refuses("search_arms.py", [*base, *given], expect.format(**paths),
                             {"W": arms_ws["W"], "RESULTS": BENCHMARKS / "results"})


def test_a_committed_strategy_search_runs_only_its_random_control_the_same_as_compare_random(
        arms_ws, monkeypatch, tmp_path):
    """A seed whose strategy search finished on an earlier machine and whose random-search
    control did not: the control runs alone (``evolve --strategy random`` with the control's
    settings) and gives the history and pick that ``evolve --compare-random`` gave it, racing
    included; a finished control of other settings is refused, naming what differs."""
    from lvsearch.cli import main
    from lvsearch.errors import LvsearchError

    search_arms, args = _continuing(monkeypatch, tmp_path, None, supernet=arms_ws["SN"], seed_list=[5],
                                    population=4, iterations=3, search_dev_sequences="320",
                                    work=tmp_path / "first")
    args.committed = {}
    written = {}
    monkeypatch.setattr(search_arms, "write_result", lambda name, result: written.setdefault(name, result))
    monkeypatch.setattr(search_arms, "machine", lambda: {})
    lo, hi = 1, 10**9
    first = args.work / "search-5"
    assert main(["evolve", "--supernet", str(arms_ws["SN"]), "--out", str(first), "--compare-random", "--seed", "5",
                 "--population", "4", "--iterations", "3", "--dev-sequences", "320", "--min-params", str(lo),
                 "--max-params", str(hi)]) == 0
    search_arms.report(args)
    committed = written.pop("test_arms")
    assert json.loads((first / "state.json").read_text())["config"]["budget"] is None
    del committed["searches"]["5"]["random"]  # the session ended while the control ran
    args.committed, args.work = committed, tmp_path / "second"
    assert search_arms.search(args, 5, lo, hi) == args.work / "search-5"
    control, again = first / "random", args.work / "search-5" / "random"
    history = (control / "history.jsonl").read_text()
    assert history and (again / "history.jsonl").read_text() == history
    assert any(json.loads(r).get("partial") for r in history.splitlines())  # racing stopped some candidates
    assert json.loads((again / "best.json").read_text()) == json.loads((control / "best.json").read_text())
    assert not (args.work / "search-5" / "state.json").exists()  # the strategy did not run again
    ea_pick = Path(search_arms.arch_arg(args, "ea", 5)[1])
    assert json.loads(ea_pick.read_text()) == {k: v for k, v in json.loads((first / "best.json").read_text()).items()
                                               if k != "meta"}
    committed["searches"]["5"]["evolution"]["passes"] += 1  # a control of another budget is in --work
    with pytest.raises(LvsearchError, match="ran with other settings than the committed strategy's control \\(budget\\)"):
        search_arms.search(args, 5, lo, hi)
