"""The pooled search pairs (benchmarks/search_pairs.py): fitness lead against standalone
difference over search_arms and landscape results (nothing trained)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
RESULTS = BENCHMARKS / "results"


@pytest.fixture
def pairs_mod(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import search_pairs

    return search_pairs


def arms_file(path: Path, leads: dict, diffs: dict) -> Path:
    seeds = sorted(diffs, key=int)
    d = {"what": "EA vs random search vs references over seeds (benchmarks/search_arms.py)",
         "search_fitness": {"per_seed": leads},
         "pairs": {"ea - random-search": {"seeds": [int(s) for s in seeds],
                                          "mlm_accuracy": {"per_seed": [diffs[s] for s in seeds]}}},
         "arms": {"ea": {"per_seed": {s: {"arch": f"ea{s}"} for s in seeds}},
                  "random-search": {"per_seed": {s: {"arch": f"rs{s}"} for s in seeds}}}}
    path.write_text(json.dumps(d))
    return path


def landscape_file(path: Path, root: Path, leads: list[float], diffs: list[float]) -> Path:
    pairs, archs = [], []
    for s, (lead, diff) in enumerate(zip(leads, diffs)):
        folder = root / f"search-{s}"
        (folder / "random").mkdir(parents=True)
        (folder / "compare_random.json").write_text(json.dumps({"diff": lead, "paired_se": 0.003}))
        ea, rs = str(folder / "best.json"), str(folder / "random" / "best.json")
        pairs.append({"ea": ea, "random_search": rs, "difference": diff})
        archs += [{"name": ea, "ops": f"ea{s}"}, {"name": rs, "ops": f"rs{s}"}]
    path.write_text(json.dumps({"what": "the landscape of lvbert-elc@24 at the quickstart width",
                                "summary": {"pick_pairs": {"pairs": pairs}}, "archs": archs}))
    return path


def test_pairs_pool_over_sources_with_t_interval_and_correlation(pairs_mod, tmp_path):
    """Arms seeds pair by seed (a seed with only one of the two parts is left out); landscape
    pairs read their fitness lead from compare_random.json; the pooled mean, its Student-t
    interval, the counts and the correlation are scipy's on the pooled rows."""
    import numpy as np
    from scipy import stats

    a = pairs_mod.arms_pairs(arms_file(tmp_path / "arms.json", {"0": 0.005, "1": 0.002, "2": 0.004},
                                 {"0": 0.008, "1": -0.006, "3": 0.01}))
    assert [(r["seed"], r["fitness_lead"], r["standalone_difference"], r["strategy_pick"]) for r in a] == \
        [(0, 0.005, 0.008, "ea0"), (1, 0.002, -0.006, "ea1")]
    land = pairs_mod.landscape_pairs(landscape_file(tmp_path / "land.json", tmp_path / "w", [0.008, -0.001, 0.002],
                                                    [0.0, -0.018, 0.0084]))
    assert [(r["seed"], r["fitness_lead"], r["fitness_lead_se"], r["random_search_pick"]) for r in land] == \
        [(0, 0.008, 0.003, "rs0"), (1, -0.001, 0.003, "rs1"), (2, 0.002, 0.003, "rs2")]
    rows = a + land
    s = pairs_mod.summarise(rows)
    d = np.array([r["standalone_difference"] for r in rows])
    f = np.array([r["fitness_lead"] for r in rows])
    half = stats.t.ppf(0.975, len(d) - 1) * d.std(ddof=1) / np.sqrt(len(d))
    assert s["n"] == 5 and s["standalone_difference"]["mean"] == pytest.approx(d.mean())
    assert s["standalone_difference"]["t95"] == pytest.approx([d.mean() - half, d.mean() + half])
    assert (s["standalone_difference"]["ahead"], s["standalone_difference"]["behind"],
            s["standalone_difference"]["tied"]) == (2, 2, 1)
    assert s["fitness_lead"]["ahead"] == 4
    c = s["lead_predicts_difference"]
    assert c["pearson_r"] == pytest.approx(stats.pearsonr(f, d)[0])
    assert c["slope_pp_per_nat"] == pytest.approx(stats.linregress(f, d).slope * 100)
    assert 0 < s["standalone_difference"]["detectable_at_10_seeds"] < 2 * d.std(ddof=1)


def test_the_committed_result_traces_to_its_sources(pairs_mod):
    """Every committed pair is what its source file says now: the arms rows are recomputed from
    the committed search_arms result, the landscape rows' standalone differences are the
    landscape's pick pairs, and the pooled numbers are recomputed from the rows."""
    path = RESULTS / "search_pairs.json"
    if not path.exists():
        pytest.skip("benchmarks/results/search_pairs.json is not committed")
    d = json.loads(path.read_text())
    for a in d["inputs"]["arms"]:
        src = RESULTS / Path(a).name
        mine = [r for r in d["pairs"] if r["source"] == src.stem]
        assert mine == pairs_mod.arms_pairs(src)
    for a in d["inputs"]["landscape"]:
        src = RESULTS / Path(a).name
        mine = [r["standalone_difference"] for r in d["pairs"] if r["source"] == src.stem]
        assert mine == [p["difference"] for p in json.loads(src.read_text())["summary"]["pick_pairs"]["pairs"]]
    again = json.loads(json.dumps(pairs_mod.summarise(d["pairs"])))
    # scipy's correlations differ in the last bits between CPU kinds (AVX-512 against AVX2)
    assert d["pooled"].keys() == again.keys()
    for k, v in d["pooled"].items():
        assert (v == pytest.approx(again[k], rel=1e-12)) if isinstance(v, dict) and all(
            isinstance(x, float) for x in v.values()) else v == again[k], k


CASES = [  # (id, argv with {W}, text of the one message)
    ("arms-missing", "--arms {W}/none.json", "--arms {W}/none.json: cannot be read"),
    ("arms-not-json", "--arms {W}/bad.json", "not JSON"),
    ("arms-other-kind", "--arms {W}/land.json", "not a benchmarks/search_arms.py result"),
    ("landscape-other-kind", "--landscape {W}/arms.json", "not a benchmarks/landscape.py result"),
    ("landscape-no-search-folder", "--landscape {W}/orphan.json", "compare_random.json is missing"),
    ("too-few-pairs", "--arms {W}/one.json", "1 paired search(es) found"),
    ("nothing-given", "", "0 paired search(es) found"),
    ("name-of-another-result", "--arms {W}/arms.json --name landscape_24", "is not this benchmark's output"),
    ("name-with-folder", "--arms {W}/arms.json --name ../x", "is not a result name"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_message_exit_2_nothing_written(tmp_path, case):
    from benchmark_cli import assert_benchmark_refuses

    w = tmp_path
    arms_file(w / "arms.json", {"0": 0.005, "1": 0.002}, {"0": 0.008, "1": -0.006})
    arms_file(w / "one.json", {"0": 0.005}, {"0": 0.008})
    (w / "bad.json").write_text("{not json")
    landscape_file(w / "land.json", w / "searches", [0.001, 0.002], [0.0, 0.01])
    orphan = json.loads((w / "land.json").read_text())
    orphan["summary"]["pick_pairs"]["pairs"][0]["ea"] = str(w / "gone" / "search-0" / "best.json")
    (w / "orphan.json").write_text(json.dumps(orphan))
    argv = [a.format(W=w) for a in case[1].split()]
    if "--name" not in argv:
        argv += ["--name", "search_pairs_test_never_written"]
    assert_benchmark_refuses("search_pairs.py", argv, case[2].format(W=w), {"W": w, "RESULTS": RESULTS})
