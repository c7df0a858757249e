"""How well one score ranks items by another: the statistics of ``lvsearch rank-check`` and of
the benchmarks that compare fitness variants on the same architectures.

Kendall τ and Spearman ρ with paired percentile-bootstrap intervals and the top-region τ
(:func:`rank_quality`), tie-averaged top-k precision (:func:`top_precision`), top-k overlap
against its hypergeometric chance level (:func:`topk_chance`), τ within strata of DC count and
connectivity density (:func:`strata`, :func:`stratified_tau`), and the paired difference of two
rankers' τ (:func:`paired_tau_difference`). Bootstraps come from :mod:`lvsearch.stats`.
"""

from __future__ import annotations

from lvsearch.arch import Arch
from lvsearch.stats import MIN_BOOTSTRAP_PAIRS, bootstrap_interval, percentile_interval


def topk_chance(n: int, k: int, observed: int) -> dict:
    """Top-k overlap against chance: two independent random k-subsets of ``n`` items share
    ``k²/n`` items on average (hypergeometric mean); ``p`` = P(overlap ≥ ``observed``) under
    that null (``scipy.stats.hypergeom``)."""
    from scipy.stats import hypergeom

    return {"expected": k * k / n, "p": float(hypergeom.sf(observed - 1, n, k, k))}


def _top_membership(values, k: int) -> list[float]:
    """Probability that each item is among the ``k`` best of ``values`` (higher is better) when
    ties are broken uniformly at random: 1 above the k-th value, 0 below it, and for the ``m``
    items tied at it, the remaining places over ``m``."""
    kth = sorted(values, reverse=True)[k - 1]
    above = sum(v > kth for v in values)
    tied = sum(v == kth for v in values)
    share = (k - above) / tied
    return [1.0 if v > kth else share if v == kth else 0.0 for v in values]


def top_precision(scores, truth, k: int = 5) -> float | None:
    """Fraction of the ``k`` best by ``scores`` that are among the ``k`` best by ``truth``
    (higher is better on both), averaged over every order of ties (on both sides
    independently): Σ_i P(i in top-k by scores) · P(i in top-k by truth) / k. So the value does
    not depend on the order the items are listed in (three architectures tied at one
    standalone accuracy used to be broken by list position). None with fewer than ``k`` items."""
    if len(scores) < k:
        return None
    ps, pt = _top_membership(list(scores), k), _top_membership(list(truth), k)
    return sum(a * b for a, b in zip(ps, pt)) / k


#: Architectures in the top region of a rank check (the best by the truth): where a search's
#: picks live, so where the fitness must rank.
TOP_REGION = 20


def top_region(scores, truth, top: int = TOP_REGION) -> tuple[list[float], list[float]]:
    """``scores`` and ``truth`` of the items among the ``top`` best by ``truth`` (every item tied
    with the ``top``-th is kept; all items when there are no more than ``top``)."""
    if len(truth) <= top:
        return list(scores), list(truth)
    cut = sorted(truth, reverse=True)[top - 1]
    keep = [i for i, t in enumerate(truth) if t >= cut]
    return [scores[i] for i in keep], [truth[i] for i in keep]


def rank_quality(scores, truth, *, seed: int = 0, top: int = TOP_REGION) -> dict:
    """How well ``scores`` rank items by ``truth`` (higher is better on both; equal-length
    sequences of floats, e.g. supernet fitness and standalone MLM accuracy of the same
    architectures): ``{"kendall_tau", "kendall_p", "kendall_tau_ci95", "spearman_rho",
    "top5_precision", "top_region"}`` — scipy's Kendall τ and Spearman ρ (None where undefined,
    e.g. constant input), the paired percentile-bootstrap 95% interval of τ
    (:func:`bootstrap_interval`), :func:`top_precision` at k = 5 (tie-averaged) and the
    top-region τ: Kendall τ with its interval among the ``top`` best by ``truth``
    (:func:`top_region`; a fitness can rank a whole band well and its top not at all, and a
    search's picks are at the top). Raises nothing; too few items give None entries."""
    import math
    import warnings

    from scipy.stats import kendalltau, spearmanr

    def num(x) -> float | None:
        return None if x is None or math.isnan(float(x)) else float(x)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # constant input: reported as undefined (None)
        t = kendalltau(scores, truth)
        rh = spearmanr(scores, truth)
        ts, tt = top_region(list(scores), list(truth), top)
        t_top = kendalltau(ts, tt) if len(ts) >= 2 else None
    region = {"n": len(ts), "of": len(truth), "kendall_tau": num(t_top.statistic) if t_top is not None else None,
              "kendall_tau_ci95": list(bootstrap_interval(ts, tt, "kendall", seed=seed))}
    return {"kendall_tau": num(t.statistic), "kendall_p": num(t.pvalue),
            "kendall_tau_ci95": list(bootstrap_interval(scores, truth, "kendall", seed=seed)),
            "spearman_rho": num(rh.statistic), "top5_precision": top_precision(scores, truth, 5),
            "top_region": region}


#: Fewer items than this and a paired τ difference is refused (τ over 3 points takes 4 values).
MIN_PAIRED_ITEMS = 4


def paired_tau_difference(scores_a, scores_b, truth, *, n_resamples: int = 2000, level: float = 0.95,
                          seed: int = 0) -> dict:
    """Is ranker ``a`` better than ranker ``b`` at ranking the same items by ``truth``?

    ``scores_a``, ``scores_b``, ``truth``: equal-length 1-D sequences of N finite floats, item
    i in position i of all three (e.g. two supernet fitness variants and the standalone MLM
    accuracy of the same N architectures; higher is better on all three). The difference
    d = τ(a, truth) − τ(b, truth) of Kendall's τ-b (Kendall 1938, ``scipy.stats.kendalltau``)
    gets a paired percentile-bootstrap interval (Efron & Tibshirani 1993, ch. 13): the item
    indices are resampled once per resample and both τ are computed on that same resample
    (``scipy.stats.bootstrap`` with ``paired=True``), so what the two rankers share (the same
    items, the same truth) cancels instead of widening two separate intervals that then
    overlap. Resamples where a τ is undefined (a constant side) are dropped, as in
    :func:`bootstrap_interval`.

    Returns ``{"difference": d, "ci95": [low, high], "n": N, "verdict": ...}`` (``ci95``: the
    ``level`` interval, 95% by default) with verdict
    ``"a better"`` (low > 0), ``"b better"`` (high < 0), ``"within noise"`` (the interval
    holds 0), or ``"undetermined"`` with ``ci95`` ``[None, None]`` when there is no interval:
    fewer than :data:`MIN_BOOTSTRAP_PAIRS` items (as :func:`bootstrap_interval`) or no
    defined resample; ``difference`` is None when a τ is undefined on the whole sample.
    Identical ``scores_a`` and ``scores_b`` give exactly 0 and ``[0, 0]``.

    Raises:
        ValueError: the three are not 1-D of one length, hold a non-finite value, or have
            fewer than :data:`MIN_PAIRED_ITEMS` items.
    """
    import math
    import warnings

    import numpy as np
    from scipy.stats import kendalltau

    arrays = [np.asarray(v, dtype=float) for v in (scores_a, scores_b, truth)]
    if any(v.ndim != 1 for v in arrays) or len({len(v) for v in arrays}) != 1:
        raise ValueError("paired_tau_difference: scores_a, scores_b and truth must be 1-D of one length, got "
                         + ", ".join(str(v.shape) for v in arrays))
    a, b, t = arrays
    n = len(t)
    if n < MIN_PAIRED_ITEMS:
        raise ValueError(f"paired_tau_difference: {n} items, at least {MIN_PAIRED_ITEMS} needed")
    if not all(np.isfinite(v).all() for v in arrays):
        raise ValueError("paired_tau_difference: scores and truth must be finite (no NaN or inf)")

    def diff(x, y, z) -> float:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # constant input: τ undefined (NaN), dropped
            return float(kendalltau(x, z).statistic - kendalltau(y, z).statistic)

    def stat(x, y, z, axis=-1):
        x, y, z = np.atleast_2d(x), np.atleast_2d(y), np.atleast_2d(z)
        return np.array([diff(x[i], y[i], z[i]) for i in range(x.shape[0])])

    d = diff(a, b, t)
    if n < MIN_BOOTSTRAP_PAIRS:
        lo, hi = None, None
    else:
        lo, hi = percentile_interval((a, b, t), stat, n_resamples=n_resamples, level=level, seed=seed)
    if lo is None:
        verdict = "undetermined"
    else:
        verdict = "a better" if lo > 0 else "b better" if hi < 0 else "within noise"
    return {"difference": d if math.isfinite(d) else None, "ci95": [lo, hi], "n": n, "verdict": verdict}


def density(arch: Arch) -> float:
    """Connectivity density of an architecture: mean number of inputs per slot (1.0 =
    sequential; an ELC slot reading all earlier outputs raises it)."""
    return sum(len(i) for i in arch.inputs) / arch.num_slots


def strata(archs: list[Arch]) -> dict[str, list[str]]:
    """Strata of a rank check (values: lists of labels, one per architecture, same order):

    * ``dc_count``: the number of DC slots, in three bands split at the terciles of the
      observed counts (``"DC ≤ a"``, ``"a < DC ≤ b"``, ``"DC > b"``; fewer bands when counts tie);
    * ``density``: :func:`density` below / at-or-above its median (``"sparse"``, ``"dense"``).

    A τ that is high overall but near 0 within strata separates only the stratum variable
    (e.g. "has DC" from "has none"), not architectures within it."""
    import numpy as np

    dc = np.array([a.ops.count("DC") for a in archs], dtype=float)
    a_, b_ = np.quantile(dc, [1 / 3, 2 / 3])
    a_, b_ = int(np.floor(a_)), int(np.floor(b_))

    def band(c: float) -> str:
        if c <= a_:
            return f"DC ≤ {a_}"
        if c <= b_:
            return f"{a_} < DC ≤ {b_}"
        return f"DC > {b_}"

    d = np.array([density(a) for a in archs])
    med = float(np.median(d))
    dens = ["dense" if v >= med and v > d.min() else "sparse" for v in d] if d.max() > d.min() else ["all"] * len(d)
    return {"dc_count": [band(c) for c in dc], "density": dens}


def stratified_tau(xs, ys, labels: list[str]) -> dict:
    """Kendall τ within each stratum (``labels[i]`` names the stratum of pair i) and their
    pair-weighted mean (weights n(n−1)/2, strata with < 3 members or an undefined τ left out).
    Returns ``{"strata": {label: {"n", "tau"}}, "weighted_tau": float | None}``."""
    import math
    import warnings

    from scipy.stats import kendalltau

    groups: dict[str, list[int]] = {}
    for i, lab in enumerate(labels):
        groups.setdefault(lab, []).append(i)
    out, num, den = {}, 0.0, 0.0
    for lab, idx in sorted(groups.items()):
        tau = None
        if len(idx) >= 3:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                t = kendalltau([xs[i] for i in idx], [ys[i] for i in idx]).statistic
            tau = None if math.isnan(t) else float(t)
        out[lab] = {"n": len(idx), "tau": tau}
        if tau is not None:
            w = len(idx) * (len(idx) - 1) / 2
            num, den = num + w * tau, den + w
    return {"strata": out, "weighted_tau": num / den if den else None}
