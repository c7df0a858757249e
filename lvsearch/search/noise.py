"""How noisy a supernet fitness is, and whether it resolves the top of a search.

A search picks the best of many noisy scores; unless the true differences among the top
candidates exceed the noise of one score, it picks lucky draws. These functions measure that
noise from per-target outcomes (:meth:`lvsearch.search.evaluator.SupernetEvaluator.per_target`):

* the **standard error** of one candidate's fitness over its dev targets (a bootstrap over
  targets, ``scipy.stats.bootstrap``);
* the **paired standard error** of the difference between two candidates scored on the same
  targets (the bootstrap of the per-target differences): what decides whether two candidates
  are told apart, much smaller than either SE when their errors are correlated;
* **ties**: top-k members whose fitness equals another member's exactly (accuracy on ~1k
  targets moves in steps of 1/targets);
* whether the fitness **resolves the top**: the median paired SE of neighbouring top-k
  candidates against the spread of the top-k (``resolved`` when SE ≤ spread / 3).

Fitness per target is ``correct`` (0/1) for ``accuracy`` and ``−loss`` (nats) for ``loss``, so
the mean over targets is the evaluator's fitness.
"""

from __future__ import annotations

import numpy as np


def per_target_fitness(outcome: dict, metric: str) -> np.ndarray:
    """``(T,)`` float64 per-target fitness of one candidate: ``correct`` or ``−loss``."""
    if metric == "accuracy":
        return outcome["correct"].astype(np.float64)
    return -np.asarray(outcome["loss"], dtype=np.float64)


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


def count_ties(values) -> int:
    """Members of ``values`` equal to at least one other member (exact float equality)."""
    _, counts = np.unique(np.asarray(values, dtype=np.float64), return_counts=True)
    return int(counts[counts > 1].sum())


def noise_report(outcomes: dict[str, dict], ranked_keys: list[str], metric: str, *, seed: int = 0) -> dict:
    """Noise of the fitness among ``ranked_keys`` (best first, e.g. a search's top-k).

    Args:
        outcomes: ``per_target`` output for at least the keys.
        ranked_keys: candidates, best first.
        metric: ``accuracy`` or ``loss``.

    Returns:
        ``{"metric", "targets", "fitness": [...], "se": [...] (per candidate),
        "paired_se_neighbours": [...] (i vs i+1), "paired_se_median", "spread" (best − worst
        fitness among them), "ties", "resolved" (paired SE median ≤ spread / 3)}``.
    """
    vals = {k: per_target_fitness(outcomes[k], metric) for k in ranked_keys}
    fit = [float(vals[k].mean()) for k in ranked_keys]
    se = [bootstrap_se(vals[k], seed=seed) for k in ranked_keys]
    paired = [bootstrap_se(vals[a] - vals[b], seed=seed) for a, b in zip(ranked_keys, ranked_keys[1:])]
    spread = max(fit) - min(fit) if fit else 0.0
    med = float(np.median(paired)) if paired else None
    return {"metric": metric, "targets": int(next(iter(vals.values())).size) if vals else 0,
            "keys": list(ranked_keys), "fitness": fit, "se": se, "paired_se_neighbours": paired,
            "paired_se_median": med, "spread": spread, "ties": count_ties(fit),
            "resolved": bool(med is not None and med <= spread / 3)}


def verdict_lines(report: dict) -> list[str]:
    """One or two plain sentences a user reads after a search (from :func:`noise_report`)."""
    unit = "pp" if report["metric"] == "accuracy" else "nats"
    scale = 100.0 if report["metric"] == "accuracy" else 1.0
    n = len(report["keys"])
    se = float(np.median(report["se"])) * scale if report["se"] else float("nan")
    lines = [f"fitness noise ({report['metric']}, {report['targets']:,} dev targets): standard error of one score "
             f"{se:.3g} {unit}; paired standard error between neighbouring top-{n} candidates "
             f"{(report['paired_se_median'] or 0) * scale:.3g} {unit}; top-{n} spread {report['spread'] * scale:.3g} "
             f"{unit}; {report['ties']} of {n} tied exactly"]
    if report["resolved"]:
        lines.append("the fitness resolves the top-k: the paired standard error is at most a third of its spread")
    else:
        hint = ("score on more --dev-sequences (with --racing to bound the cost)" if report["metric"] == "loss"
                else "use --fitness loss (continuous, no ties) and more --dev-sequences")
        lines.append("the fitness does NOT resolve the top-k (paired standard error above a third of its spread): "
                     f"the order of the top candidates is mostly noise; {hint}")
    return lines


def search_noise(evaluator, keys: list[str], metric: str) -> dict:
    """:func:`noise_report` of a search's top-k ``keys`` (best first), re-scored per target on
    the evaluator's whole dev set (the targets their complete scores were made on)."""
    from lvsearch.arch import Arch

    archs = [Arch.from_key(k) for k in keys]
    return noise_report(evaluator.per_target(archs), keys, metric)


def landscape_lines(path) -> list[str]:
    """What a landscape file (``benchmarks/landscape.py`` → ``landscape.json``) says about
    whether search can pay off in its space: headroom over the seed noise and the expected
    best of k random architectures.

    Raises:
        LvsearchError: the file is missing, not JSON, or not a landscape result.
    """
    from lvsearch.errors import LvsearchError
    from lvsearch.io import read_json

    d = read_json(path, what="landscape file")
    s = d.get("summary") if isinstance(d, dict) else None
    dist = s.get("distribution_random") if isinstance(s, dict) else None
    if not isinstance(dist, dict):
        raise LvsearchError(f"{path} is not a landscape result (no summary.distribution_random)",
                            fix="pass the landscape.json written by benchmarks/landscape.py --report")
    sigma = (s.get("sigma_seed") or {}).get("pooled_std")
    lines = [f"landscape {path}: standalone MLM accuracy of {dist['n']} random architectures: median "
             f"{dist['median']:.4f}, top decile from {dist['top_decile_threshold']:.4f}, best {dist['best']:.4f}"]
    if sigma:
        head = (dist["best"] - dist["median"]) / sigma
        best = (s.get("distribution_all") or {}).get("best", dist["best"])
        head_all = (best - dist["median"]) / sigma
        known = (f", (best trained {best:.4f} − median) / σ_seed = {head_all:.2f}" if best > dist["best"] else "")
        lines.append(f"headroom (best random draw − median) / σ_seed = {head:.2f}{known} (σ over pretraining seeds "
                     f"{sigma:.4f}); " + ("below 2: one retrain's seed noise is as large as what search can gain here"
                                          if head_all < 2 else "search has room to pay off here"))
    power = _power_line(s, dist)
    if power:
        lines.append(power)
    curve = s.get("best_of_k_random") or []
    if curve:
        pick = [c for c in curve if c["k"] in (1, 5, len(curve))]
        lines.append("expected best of k random architectures: "
                     + ", ".join(f"k={c['k']}: {c['expected_best']:.4f}" for c in pick))
    return lines


def _power_line(summary: dict, dist: dict, seeds: int = 6) -> str | None:
    """Can EA vs random search be told apart over ``seeds`` search seeds in this space? The most
    any search can gain over a median random architecture is the best trained architecture's
    accuracy minus the random draws' median; random search's own pick already sits above the
    median, so its gap to EA is smaller still. Compared with the smallest paired difference a
    t test over ``seeds`` detects (``summary.power``, α 0.05, power 0.8, training noise only);
    None when the file has no power analysis."""
    mde = (((summary.get("power") or {}).get("minimum_detectable_difference") or {})
           .get("training_noise_only") or {}).get(str(seeds))
    best = (summary.get("distribution_all") or {}).get("best", dist["best"])
    if mde is None:
        return None
    room = best - dist["median"]
    head = (f"a search can gain at most {room * 100:.1f} pp over a median random architecture here (best trained "
            f"{best:.4f}); {seeds} search seeds detect an EA − random-search difference of ≥ {mde * 100:.1f} pp "
            f"(paired t test, power 0.8, pretraining-seed noise only)")
    if room < mde:
        return head + f": below it, so no search can be shown to beat random search with {seeds} seeds in this space"
    return head + (": random search's own pick already sits above the median, so what is left between the two "
                   f"searches is less than {room * 100:.1f} pp; measure it with the many-seed benchmark "
                   "(benchmarks/search_arms.py)")
