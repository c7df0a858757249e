"""Rank-check statistics: bootstrap intervals, top-k chance level, strata."""

from __future__ import annotations

import numpy as np
import pytest

from lvsearch.arch import Arch
from lvsearch.search.rank_stats import density, strata, stratified_tau, topk_chance
from lvsearch.stats import bootstrap_interval


def test_bootstrap_interval_of_a_monotone_pair_covers_one():
    x = np.arange(20.0)
    lo, hi = bootstrap_interval(x, np.exp(x / 5), "kendall")
    assert lo <= 1.0 + 1e-12 and hi >= 1.0 - 1e-12 and lo > 0.99
    lo, hi = bootstrap_interval(x, -x, "spearman")
    assert hi <= -0.99


def test_bootstrap_interval_widens_with_noise_and_contains_the_estimate():
    from scipy.stats import kendalltau

    rng = np.random.default_rng(0)
    a = rng.normal(size=30)
    b = a + rng.normal(scale=1.0, size=30)
    lo, hi = bootstrap_interval(a, b, "kendall", seed=1)
    tau = kendalltau(a, b).statistic
    assert lo < tau < hi and hi - lo > 0.1
    assert bootstrap_interval(a[:2], b[:2]) == (None, None)
    assert bootstrap_interval(a[:4], a[:4]) == (None, None)  # 4 points: degenerate, no interval
    # the same seed gives the same interval
    assert bootstrap_interval(a, b, "kendall", seed=1) == (lo, hi)


def test_topk_chance_is_the_hypergeometric_mean_and_tail():
    ch = topk_chance(20, 5, 0)
    assert ch["expected"] == pytest.approx(25 / 20) and ch["p"] == pytest.approx(1.0)
    from math import comb

    # P(overlap = 5) for two 5-subsets of 20
    assert topk_chance(20, 5, 5)["p"] == pytest.approx(1 / comb(20, 5))


def _arch(ops: str, inputs) -> Arch:
    return Arch.from_dict({"format": "lvsearch.arch/v1", "ops": ops, "inputs": inputs})


def test_strata_follow_the_documented_rules():
    seq = [[0], [1], [2], [3]]
    dense = [[0], [0, 1], [0, 1, 2], [0, 1, 2, 3]]
    archs = [_arch("ssff", seq), _arch("scff", seq), _arch("sccf", dense), _arch("cccf", dense),
             _arch("cccc", seq), _arch("sfsf", dense)]
    assert [density(a) for a in archs] == [1.0, 1.0, 2.5, 2.5, 1.0, 2.5]
    lab = strata(archs)
    # DC counts 0,1,2,3,4,0 -> terciles at 0.67 and 2 (floored to 0 and 2)
    assert lab["dc_count"] == ["DC ≤ 0", "0 < DC ≤ 2", "0 < DC ≤ 2", "DC > 2", "DC > 2", "DC ≤ 0"]
    assert lab["density"] == ["sparse", "sparse", "dense", "dense", "sparse", "dense"]
    assert strata([_arch("ssff", seq)] * 3)["density"] == ["all"] * 3


def test_stratified_tau_weights_strata_by_pairs():
    xs = [1, 2, 3, 4, 5, 6, 7]
    ys = [1, 2, 3, 3.5, 3.4, 3.3, 3.2]  # rising in stratum A, falling in B
    labels = ["A", "A", "A", "B", "B", "B", "B"]
    res = stratified_tau(xs, ys, labels)
    assert res["strata"]["A"] == {"n": 3, "tau": pytest.approx(1.0)}
    assert res["strata"]["B"]["tau"] == pytest.approx(-1.0)
    assert res["weighted_tau"] == pytest.approx((3 * 1.0 + 6 * -1.0) / 9)
    assert stratified_tau([1, 2], [1, 2], ["A", "A"])["weighted_tau"] is None


def test_paired_tau_difference_sees_a_perfect_ranker_beat_a_shuffled_one():
    from scipy.stats import kendalltau

    from lvsearch.search.rank_stats import paired_tau_difference

    truth = np.linspace(0.20, 0.30, 20)
    shuffled = truth[np.random.default_rng(3).permutation(20)]
    res = paired_tau_difference(truth, shuffled, truth, seed=0)
    assert res["n"] == 20
    assert res["difference"] == pytest.approx(1.0 - kendalltau(shuffled, truth).statistic)
    lo, hi = res["ci95"]
    assert 0 < lo <= res["difference"] <= hi and res["verdict"] == "a better"
    swapped = paired_tau_difference(shuffled, truth, truth, seed=0)
    assert swapped["difference"] == pytest.approx(-res["difference"]) and swapped["verdict"] == "b better"
    assert paired_tau_difference(truth, shuffled, truth, seed=0) == res  # seeded


def test_paired_tau_difference_of_one_ranker_with_itself_is_exactly_zero():
    from lvsearch.search.rank_stats import paired_tau_difference

    rng = np.random.default_rng(0)
    truth = rng.normal(size=15)
    scores = truth + rng.normal(size=15)
    res = paired_tau_difference(scores, list(scores), truth)
    assert res == {"difference": 0.0, "ci95": [0.0, 0.0], "n": 15, "verdict": "within noise"}


def test_paired_tau_difference_refuses_bad_input_and_gives_no_interval_below_eight():
    from lvsearch.search.rank_stats import paired_tau_difference

    with pytest.raises(ValueError, match="one length"):
        paired_tau_difference([1, 2, 3, 4, 5], [1, 2, 3, 4], [1, 2, 3, 4, 5])
    with pytest.raises(ValueError, match="at least 4"):
        paired_tau_difference([1, 2, 3], [3, 2, 1], [1, 2, 3])
    with pytest.raises(ValueError, match="finite"):
        paired_tau_difference([1, 2, 3, float("nan")], [1, 2, 3, 4], [1, 2, 3, 4])
    res = paired_tau_difference([1, 2, 3, 4, 5], [5, 4, 3, 2, 1], [1, 2, 3, 4, 5])
    assert res["difference"] == pytest.approx(2.0)
    assert (res["ci95"], res["n"], res["verdict"]) == ([None, None], 5, "undetermined")


def test_top5_precision_averages_over_tie_orders_so_list_order_does_not_matter():
    """Three architectures tied at one standalone accuracy (0.286406 in the landscape) used to
    be broken by list position: reversing the list changed top-5 precision."""
    from lvsearch.search.rank_stats import top_precision

    truth = [0.30, 0.29, 0.288, 0.286406, 0.286406, 0.286406, 0.28, 0.27]
    scores = [8.0, 7.0, 6.0, 5.0, 1.0, 0.5, 4.0, 3.0]
    forward = top_precision(scores, truth, 5)
    backward = top_precision(scores[::-1], truth[::-1], 5)
    assert forward == pytest.approx(backward)
    # exact: top-5 by score = items 0,1,2,3,6; by truth = 0,1,2 and two of the tied 3,4,5 (2/3 each)
    assert forward == pytest.approx((3 + 2 / 3) / 5)
    assert top_precision(list(range(10)), list(range(10)), 5) == 1.0
    assert top_precision([1.0] * 4, [1.0] * 4, 5) is None


def test_top_region_tau_looks_only_at_the_best_by_truth():
    from lvsearch.search.rank_stats import rank_quality, top_region

    rng = np.random.default_rng(1)
    truth = np.sort(rng.normal(size=40))[::-1]
    scores = np.empty(40)
    scores[:20] = rng.permutation(20)  # the top 20 shuffled among themselves, above the rest
    scores[20:] = -np.arange(20)  # the bottom 20 perfectly ordered
    q = rank_quality(list(scores), list(truth))
    assert q["kendall_tau"] > 0.5  # the band looks well ranked
    assert q["top_region"]["n"] == 20 and abs(q["top_region"]["kendall_tau"]) < 0.4  # its top is not
    s, t = top_region([1.0, 2.0, 3.0], [0.1, 0.2, 0.3], top=20)
    assert s == [1.0, 2.0, 3.0] and t == [0.1, 0.2, 0.3]  # fewer than the region: all of them
    s, t = top_region([1.0, 2.0, 3.0, 4.0], [0.1, 0.3, 0.3, 0.2], top=2)
    assert t == [0.3, 0.3]  # ties at the cut are kept


def test_exact_power_needs_more_than_the_normal_approximation_at_few_seeds():
    import math

    from scipy import stats as st

    from lvsearch.stats import detectable_difference, paired_t_power, t_interval

    for n in (3, 6, 10):
        approx = (st.t.ppf(0.975, n - 1) + st.t.ppf(0.8, n - 1)) / math.sqrt(n)
        exact = detectable_difference(1.0, n)
        assert paired_t_power(exact, 1.0, n) == pytest.approx(0.8, abs=1e-9)
        assert exact > approx
    assert detectable_difference(1.0, 3) / ((st.t.ppf(0.975, 2) + st.t.ppf(0.8, 2)) / math.sqrt(3)) > 1.05
    assert paired_t_power(0.0, 1.0, 10) == pytest.approx(0.05)
    # Monte Carlo check of the power at the detectable difference (10 seeds)
    rng = np.random.default_rng(0)
    d = detectable_difference(1.0, 10)
    x = rng.normal(d, 1.0, size=(20000, 10))
    p = st.ttest_1samp(x, 0.0, axis=1).pvalue
    assert abs((p < 0.05).mean() - 0.8) < 0.015
    assert t_interval([1.0]) is None and t_interval([2.0, 2.0]) == (2.0, 2.0)
    with pytest.raises(ValueError):
        detectable_difference(0.0, 5)


def test_one_statistics_module_and_one_verdict_rule():
    """The paired bootstraps, the bootstrap SE and the verdict rule live in
    lvsearch/stats.py; no other package module calls scipy's bootstrap or draws its own
    resamples for an interval of a mean difference."""
    from pathlib import Path

    from lvsearch.stats import bootstrap_mean_interval, interval_verdict, mean_difference_interval, paired_bootstrap

    assert interval_verdict(0.1, 0.2) == "ahead" and interval_verdict(-0.2, -0.1) == "behind"
    assert interval_verdict(-0.1, 0.1) == "within noise"
    a, b = np.array([1, 1, 0, 1] * 50), np.array([0, 1, 0, 0] * 50)
    lo, hi = bootstrap_mean_interval(a - b, seed=0)
    assert lo < (a - b).mean() < hi
    assert paired_bootstrap(a, b)["beats"] and mean_difference_interval(a, b)["verdict"] == "ahead"
    root = Path(__file__).resolve().parents[1] / "lvsearch"
    offenders = [str(p.relative_to(root)) for p in root.rglob("*.py") if p.name != "stats.py"
                 and ("stats.bootstrap(" in p.read_text() or "from scipy.stats import bootstrap" in p.read_text())]
    assert offenders == []
