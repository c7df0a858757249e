"""lvsearch's statistics, on scipy: the paired bootstraps, t intervals, the exact power of the
paired t test, and the one verdict rule (an interval that excludes 0).

Every comparison in lvsearch is paired (the same dev targets, BLiMP pairs or search seeds for
both sides) and judged by one rule, :func:`interval_verdict`: ahead when the whole interval is
above 0, behind when it is below, else within noise.

A search is judged by a paired comparison over search seeds (docs/results.md, "The 10-seed
test"): per seed, the standalone accuracy of the EA's pick minus random search's, and a
Student-t interval of the mean difference. How many seeds that needs follows from the test's
power, which is exact with the noncentral t distribution (``scipy.stats.nct``); the normal
approximation ``(t_{1−α/2} + t_{1−β}) σ_d / √n`` understates the detectable difference (by
about 5% at 3 seeds).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from lvsearch.errors import LvsearchError

#: Bootstrap resamples of the paired intervals (reports, floors).
RESAMPLES = 2000


def paired_t_power(delta: float, sd: float, n: int, alpha: float = 0.05) -> float:
    """Power of the two-sided paired t test at level ``alpha`` over ``n`` pairs when the true
    mean difference is ``delta`` and one pair's difference has standard deviation ``sd``.

    Exact: the statistic is noncentral t with ``n − 1`` degrees of freedom and noncentrality
    ``delta √n / sd``; power = P(T > t_crit) + P(T < −t_crit), ``t_crit`` = t_{1−α/2, n−1}
    (e.g. Cohen 1988, ch. 2; ``scipy.stats.nct``).

    Raises:
        ValueError: ``n`` < 2, ``sd`` ≤ 0 or ``alpha`` outside (0, 1).
    """
    from scipy import stats

    if n < 2 or not sd > 0 or not 0 < alpha < 1:
        raise ValueError(f"paired t power needs n ≥ 2, sd > 0 and alpha in (0, 1); got n={n}, sd={sd}, alpha={alpha}")
    df, nc = n - 1, abs(delta) * math.sqrt(n) / sd
    crit = stats.t.ppf(1 - alpha / 2, df)
    return float(stats.nct.sf(crit, df, nc) + stats.nct.cdf(-crit, df, nc))


def detectable_difference(sd: float, n: int, alpha: float = 0.05, power: float = 0.8) -> float:
    """Smallest true mean difference the two-sided paired t test over ``n`` pairs detects with
    probability ``power`` at level ``alpha`` (same units as ``sd``, the SD of one pair's
    difference): the root of :func:`paired_t_power` ``= power`` (``scipy.optimize.brentq``).

    Raises:
        ValueError: as :func:`paired_t_power`, or ``power`` not above ``alpha`` and below 1.
    """
    from scipy.optimize import brentq

    if not alpha < power < 1:
        raise ValueError(f"power must be in (alpha, 1), got {power}")
    paired_t_power(0.0, sd, n, alpha)  # checks the arguments
    hi = sd
    while paired_t_power(hi, sd, n, alpha) < power:
        hi *= 2
    return float(brentq(lambda d: paired_t_power(d, sd, n, alpha) - power, 0.0, hi, xtol=1e-12 * sd))


def t_interval(diffs: Sequence[float], level: float = 0.95) -> tuple[float, float] | None:
    """Student-t interval of the mean of ``diffs`` (paired differences, one per seed): scipy's
    ``t.interval`` with the standard error of the mean; a constant sample gives ``(mean, mean)``,
    fewer than 2 values None."""
    import numpy as np
    from scipy import stats

    d = np.asarray(list(diffs), dtype=float)
    if d.size < 2:
        return None
    if d.std() == 0:
        return float(d.mean()), float(d.mean())
    lo, hi = stats.t.interval(level, d.size - 1, loc=d.mean(), scale=stats.sem(d))
    return float(lo), float(hi)


def interval_verdict(low: float, high: float) -> str:
    """The one verdict rule: ``"ahead"`` when the interval of a difference lies above 0,
    ``"behind"`` when it lies below, else ``"within noise"``."""
    return "ahead" if low > 0 else "behind" if high < 0 else "within noise"


def bootstrap_mean_interval(d, *, n_resamples: int = RESAMPLES, level: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``d`` (``(n,)`` paired differences),
    resampling items with replacement (numpy ``default_rng(seed)``, vectorised)."""
    d = np.asarray(d, dtype=np.float64)
    rng = np.random.default_rng(seed)
    boots = d[rng.integers(0, d.size, size=(n_resamples, d.size))].mean(axis=1)
    alpha = (1 - level) / 2
    lo, hi = np.quantile(boots, [alpha, 1 - alpha])
    return float(lo), float(hi)


def paired_bootstrap(model_correct, floor_correct, groups=None, *, n_resamples: int = RESAMPLES,
                     level: float = 0.95, seed: int = 0) -> dict:
    """Paired bootstrap (Efron & Tibshirani 1993, ch. 13 percentile interval) of
    ``mean(model) − mean(floor)`` over the same items.

    Args:
        model_correct, floor_correct: equal-length 0/1 sequences (or ``"1"``/``"0"`` strings),
            one per item, in the same order.
        groups: optional per-item group labels (e.g. BLiMP paradigms): the statistic is then
            the mean over groups of the per-group mean difference, and items are resampled
            within their group (stratified), as BLiMP's mean over paradigms is.
        n_resamples, level, seed: resamples, interval level, RNG seed (numpy ``default_rng``).

    Returns:
        ``{"difference", "ci": [lo, hi], "level", "resamples", "excludes_zero", "beats"}``;
        ``beats`` is True when the whole interval lies above 0.

    Raises:
        LvsearchError: lengths differ or there are no items.
    """
    def arr(v):
        if isinstance(v, str):
            return np.frombuffer(v.encode("ascii"), dtype=np.uint8) - ord("0")
        return np.asarray(v, dtype=np.float64)

    a, b = arr(model_correct).astype(np.float64), arr(floor_correct).astype(np.float64)
    if a.shape != b.shape or a.size == 0:
        raise LvsearchError(f"paired bootstrap needs two equal, non-empty sets of items (got {a.size} and {b.size})")
    d = a - b
    rng = np.random.default_rng(seed)
    g = np.zeros(len(d), dtype=np.int64) if groups is None else np.unique(np.asarray(groups), return_inverse=True)[1]
    means, stats = [], np.zeros(n_resamples)
    for k in range(int(g.max()) + 1):
        dk = d[g == k]
        means.append(dk.mean())
        stats += dk[rng.integers(0, len(dk), size=(n_resamples, len(dk)))].mean(axis=1)
    stats /= len(means)
    alpha = (1 - level) / 2
    lo, hi = (float(x) for x in np.quantile(stats, [alpha, 1 - alpha]))
    return {"difference": float(np.mean(means)), "ci": [lo, hi], "level": level, "resamples": n_resamples,
            "excludes_zero": bool(lo > 0 or hi < 0), "beats": bool(lo > 0)}


def mean_difference_interval(a: np.ndarray, b: np.ndarray, *, confidence: float = 0.95) -> dict:
    """Mean of ``a − b`` over paired 0/1 outcomes with a paired-bootstrap interval.

    Args:
        a, b: equal-length arrays of per-item outcomes (1 = correct) of two models on the same items.

    Returns:
        ``{"diff", "low", "high", "n", "verdict"}`` with verdict ``ahead``/``behind`` when the
        interval excludes 0, else ``within noise``.

    Raises:
        ValueError: different lengths or no items.

    Source: the nonparametric bootstrap (Efron & Tibshirani 1993) of the mean paired
    difference, resampling items with replacement; ``scipy.stats.bootstrap`` percentile method.
    """
    from scipy import stats

    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    if a.shape != b.shape or a.size == 0:
        raise ValueError(f"paired outcomes must have the same non-zero length, got {a.shape} and {b.shape}")
    diff = float(a.mean() - b.mean())
    d = a - b
    if np.all(d == d[0]):
        low = high = float(d[0])
    else:
        res = stats.bootstrap((d,), np.mean, confidence_level=confidence, n_resamples=RESAMPLES,
                              method="percentile", random_state=np.random.default_rng(0), vectorized=True)
        low, high = float(res.confidence_interval.low), float(res.confidence_interval.high)
    verdict = interval_verdict(low, high)
    return {"diff": diff, "low": low, "high": high, "n": int(a.size), "verdict": verdict}


def bootstrap_se(values: np.ndarray, *, n_resamples: int = 1000, seed: int = 0) -> float:
    """Bootstrap standard error of the mean of ``values`` (``(T,)``) over its targets
    (``scipy.stats.bootstrap``, resampling targets with replacement)."""
    from scipy.stats import bootstrap

    v = np.asarray(values, dtype=np.float64)
    if v.size < 2 or np.all(v == v[0]):
        return 0.0
    res = bootstrap((v,), np.mean, n_resamples=n_resamples, method="percentile", vectorized=True,
                    random_state=np.random.default_rng(seed))
    return float(res.standard_error)


#: Fewer pairs than this get no bootstrap interval (it would be degenerate, not informative).
MIN_BOOTSTRAP_PAIRS = 8


def bootstrap_interval(xs, ys, statistic: str = "kendall", *, n_resamples: int = 2000, level: float = 0.95,
                       seed: int = 0) -> tuple[float | None, float | None]:
    """Percentile bootstrap interval of Kendall τ (``statistic="kendall"``) or Spearman ρ
    (``"spearman"``) between paired samples ``xs``, ``ys`` (``scipy.stats.bootstrap`` with
    ``paired=True``: architectures are resampled with their pair). Resamples in which a side is
    constant (τ undefined) are dropped. Returns ``(low, high)``, or ``(None, None)`` with fewer
    than :data:`MIN_BOOTSTRAP_PAIRS` pairs (over 4 monotone points every resample gives τ = 1:
    a "[1, 1]" interval that says nothing) or no defined resample. Percentile rather than BCa: BCa's jackknife fails on
    the ties short standalone runs produce."""
    import warnings

    import numpy as np
    from scipy.stats import kendalltau, spearmanr

    x, y = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    if len(x) < MIN_BOOTSTRAP_PAIRS:
        return None, None
    fn = kendalltau if statistic == "kendall" else spearmanr

    def stat(a, b, axis=-1):
        a, b = np.atleast_2d(a), np.atleast_2d(b)
        out = np.empty(a.shape[0])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for i in range(a.shape[0]):
                out[i] = fn(a[i], b[i]).statistic
        return out

    return percentile_interval((x, y), stat, n_resamples=n_resamples, level=level, seed=seed)


def percentile_interval(data: tuple, stat, *, n_resamples: int, level: float,
                         seed: int) -> tuple[float | None, float | None]:
    """The paired percentile-bootstrap interval of ``stat`` over the samples in ``data``
    (``scipy.stats.bootstrap``, ``paired=True``, seeded); resamples where ``stat`` is not
    finite (an undefined τ) are dropped; ``(None, None)`` when none is left."""
    import math
    import warnings

    import numpy as np
    from scipy.stats import bootstrap

    rng = np.random.default_rng(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scipy's own interval over NaN resamples / a degenerate one: not used
        res = bootstrap(data, stat, paired=True, vectorized=True, n_resamples=n_resamples, method="percentile",
                        confidence_level=level, random_state=rng)
    dist = res.bootstrap_distribution[np.isfinite(res.bootstrap_distribution)]
    if dist.size == 0:
        return None, None
    lo, hi = np.quantile(dist, [(1 - level) / 2, 1 - (1 - level) / 2])
    return (float(lo), float(hi)) if math.isfinite(lo) and math.isfinite(hi) else (None, None)
