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

from typing import Annotated, Literal, Optional

import numpy as np
from pydantic import Field

from lvsearch.schema import Count, FileModel, Finite

from lvsearch.search.fitness import METRICS, Fitness
from lvsearch.stats import bootstrap_se, interval_verdict




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
        fitness among them), "ties", "resolved" (paired SE median ≤ spread / 3; None with fewer
        than :data:`MIN_RESOLVE` candidates)}``.
    """
    vals = {k: Fitness(metric).per_target(outcomes[k]) for k in ranked_keys}
    fit = [float(vals[k].mean()) for k in ranked_keys]
    se = [bootstrap_se(vals[k], seed=seed) for k in ranked_keys]
    paired = [bootstrap_se(vals[a] - vals[b], seed=seed) for a, b in zip(ranked_keys, ranked_keys[1:])]
    spread = max(fit) - min(fit) if fit else 0.0
    med = float(np.median(paired)) if paired else None
    return {"metric": metric, "targets": int(next(iter(vals.values())).size) if vals else 0,
            "keys": list(ranked_keys), "fitness": fit, "se": se, "paired_se_neighbours": paired,
            "paired_se_median": med, "spread": spread, "ties": count_ties(fit),
            "resolved": bool(med <= spread / 3) if med is not None and len(ranked_keys) >= MIN_RESOLVE else None}


#: Fewer top-k members than this and :func:`noise_report` gives no "resolves the top-k" verdict
#: (with 2, the spread is the very difference the paired SE measures: one pair, not an order).
MIN_RESOLVE = 3


def verdict_lines(report: dict) -> list[str]:
    """One or two plain sentences a user reads after a search (from :func:`noise_report`)."""
    unit, scale = Fitness(report["metric"]).difference_unit
    n = len(report["keys"])
    se = float(np.median(report["se"])) * scale if report["se"] else float("nan")
    lines = [f"fitness noise ({report['metric']}, {report['targets']:,} dev targets): standard error of one score "
             f"{se:.3g} {unit}; paired standard error between neighbouring top-{n} candidates "
             f"{(report['paired_se_median'] or 0) * scale:.3g} {unit}; top-{n} spread {report['spread'] * scale:.3g} "
             f"{unit}; {report['ties']} of {n} tied exactly"]
    if report["resolved"] is None:
        lines.append(f"too few top-k members ({n}) to say whether the fitness resolves their order (needs "
                     f"{MIN_RESOLVE}); raise --topk")
    elif report["resolved"]:
        lines.append("the fitness resolves the top-k: the paired standard error is at most a third of its spread")
    else:
        hint = ("score on more --dev-sequences (with --racing to bound the cost)" if Fitness(report["metric"]).continuous
                else "use --fitness loss (continuous, no ties) and more --dev-sequences")
        lines.append("the fitness does NOT resolve the top-k (paired standard error above a third of its spread): "
                     f"the order of the top candidates is mostly noise; {hint}")
    return lines


def pick_comparison(outcomes: dict[str, dict], ea_key: str, rs_key: str, metric: str, *, seed: int = 0) -> dict:
    """The EA's pick against random search's pick on the search's own fitness, paired over the
    same dev targets (``evolve --compare-random``).

    Args:
        outcomes: ``per_target`` output holding both keys (the same ``T`` targets).
        ea_key, rs_key: the two picks' architecture keys (equal when both searches found it).
        metric: ``accuracy`` or ``loss``.

    Returns:
        ``{"metric", "targets", "ea": {"key", "fitness"}, "random": {...}, "diff" (EA − random,
        fitness units), "paired_se", "z" (diff / paired_se, None when the SE is 0), "verdict"}``:
        verdict ``"same architecture"``, ``"EA ahead"``, ``"random search ahead"`` (|z| ≥ 2) or
        ``"within noise"``.

    Source: the nonparametric bootstrap standard error of the mean paired difference (Efron &
    Tibshirani 1993, ch. 6), resampling dev targets (:func:`bootstrap_se`).
    """
    ea, rs = (Fitness(metric).per_target(outcomes[k]) for k in (ea_key, rs_key))
    diff = float(ea.mean() - rs.mean())
    se = bootstrap_se(ea - rs, seed=seed)
    z = diff / se if se > 0 else None
    if ea_key == rs_key:
        verdict = "same architecture"
    elif z is not None:  # the one rule on the ±2 SE interval (|z| ≥ 2)
        verdict = {"ahead": "EA ahead", "behind": "random search ahead",
                   "within noise": "within noise"}[interval_verdict(diff - 2 * se, diff + 2 * se)]
    else:
        verdict = "within noise"
    return {"metric": metric, "targets": int(ea.size), "ea": {"key": ea_key, "fitness": float(ea.mean())},
            "random": {"key": rs_key, "fitness": float(rs.mean())}, "diff": diff, "paired_se": se, "z": z,
            "verdict": verdict}


class _Pick(FileModel):
    fitness: float


class SearchComparison(FileModel):
    """A ``compare_random.json`` (:func:`pick_comparison`): the fields
    :func:`pick_comparison_lines` reads."""

    metric: Literal[METRICS]
    targets: float
    ea: _Pick
    random: _Pick
    diff: float
    paired_se: float
    z: Optional[float] = None
    verdict: Literal["same architecture", "EA ahead", "random search ahead", "within noise"]


def read_pick_comparison(path) -> dict:
    """A ``compare_random.json`` (:func:`pick_comparison`), checked against :class:`SearchComparison`.

    Raises:
        LvsearchError: the file is missing, not JSON, or a field :func:`pick_comparison_lines`
            reads is missing or of the wrong type (named).
    """
    from lvsearch.io import read_checked

    return read_checked(path, SearchComparison, what="search comparison",
                        regenerate="lvsearch evolve --resume --compare-random on its search folder",
                        fix=f"delete {path} (a report then leaves the comparison out), or run lvsearch evolve "
                            "--resume --compare-random on its search folder to write it again")


def pick_comparison_lines(report: dict) -> list[str]:
    """What a user reads after ``evolve --compare-random`` (from :func:`pick_comparison` or
    :func:`read_pick_comparison`): the two picks' fitness, their paired difference and what one
    search seed each can show."""
    unit, scale = Fitness(report["metric"]).difference_unit
    ea, rs = report["ea"]["fitness"], report["random"]["fitness"]
    head = (f"EA pick vs random-search pick on the search's fitness ({report['metric']}, {report['targets']:,} dev "
            f"targets): {ea:.4f} vs {rs:.4f}")
    if report["verdict"] == "same architecture":
        return [f"{head}: both searches picked the same architecture"]
    z = report["z"]
    what = {"EA ahead": "the EA's pick is ahead", "random search ahead": "random search's pick is ahead",
            "within noise": "evaluation noise cannot separate them"}[report["verdict"]]
    compute = report.get("compute")
    spent = []
    if isinstance(compute, dict) and len(compute) == 2 and all(
            isinstance(c, dict) and all(isinstance(c.get(k), int) for k in ("evaluations", "passes"))
            for c in compute.values()):
        spent = ["compute: " + "; ".join(f"{label} {c['evaluations']:,} evaluations, {c['passes']:,} dev-sequence passes"
                                         for label, c in compute.items())
                 + " (random search runs until it has spent the EA's passes; both start from the same population)"]
    return [f"{head}; EA − random {report['diff'] * scale:+.3g} {unit}, paired standard error "
            f"{report['paired_se'] * scale:.3g} {unit}" + (f" ({z:+.1f} SE)" if z is not None else "") + f": {what}",
            *spent,
            "this is one seed of each search: a gap here can be the luck of this seed's draws; whether the EA beats "
            "random search is measured over several search seeds (benchmarks/search_arms.py; docs/results.md, "
            "\"Does the search work?\")"]


def search_noise(evaluator, keys: list[str], metric: str) -> dict:
    """:func:`noise_report` of a search's top-k ``keys`` (best first), re-scored per target on
    the evaluator's whole dev set (the targets their complete scores were made on)."""
    from lvsearch.arch import Arch

    archs = [Arch.from_key(k) for k in keys]
    return noise_report(evaluator.per_target(archs), keys, metric)


#: The command that writes a landscape file (named by the messages about a damaged one).
LANDSCAPE_COMMAND = "python benchmarks/landscape.py --report"


class _RandomDraws(FileModel):
    n: Annotated[int, Field(ge=1)]
    median: Finite
    top_decile_threshold: Finite
    best: Finite


class _AllTrained(FileModel):
    best: Optional[Finite] = None


class _SigmaSeed(FileModel):
    pooled_std: Optional[Annotated[float, Field(ge=0, allow_inf_nan=False)]] = None


class _BestOfK(FileModel):
    k: Annotated[int, Field(ge=1)]
    expected_best: Finite


class _Power(FileModel):
    method: Optional[str] = None
    minimum_detectable_difference: Optional[dict[str, dict[str, Optional[Finite]]]] = None


class _Gate(FileModel):
    seeds: Annotated[int, Field(ge=2)]
    best_shrunk: Finite
    random_search_mean: Optional[Finite] = None
    room: Optional[Finite] = None
    detectable: dict[str, Finite]


class _LandscapeSummary(FileModel):
    distribution_random: _RandomDraws
    gate: Optional[_Gate] = None
    distribution_all: Optional[_AllTrained] = None
    sigma_seed: Optional[_SigmaSeed] = None
    best_of_k_random: Optional[list[_BestOfK]] = None
    power: Optional[_Power] = None


class _LandscapeSettings(FileModel):
    space: Optional[str] = None
    steps: Optional[Count] = None


class LandscapeFile(FileModel):
    """The fields of a landscape file (``benchmarks/landscape.py`` → ``landscape.json``) that
    :func:`landscape_lines` reads (pydantic, :mod:`lvsearch.schema`): numbers finite (an integer
    too large for a float is refused), the pretraining-seed σ ≥ 0."""

    summary: _LandscapeSummary
    settings: Optional[_LandscapeSettings] = None


def landscape_lines(path, space: str | None = None) -> list[str]:
    """What a landscape file (``benchmarks/landscape.py`` → ``landscape.json``) says about
    whether search can pay off in its space: headroom over the pretraining-seed noise, whether
    6 search seeds can detect an EA − random-search difference of that size (the file's power
    analysis), and the expected best of k random architectures. ``space`` (e.g. the supernet's
    ``lvbert-elc@12``) adds a warning when the landscape was measured on another space.

    Raises:
        LvsearchError: the file is missing, not JSON, or not a landscape result
            (:class:`LandscapeFile`: a missing, non-numeric or non-finite median, top-decile
            threshold, best or count of the random draws, a negative or non-finite
            ``sigma_seed.pooled_std``, an integer too large for a float, or a malformed
            ``power``/``distribution_all``/``best_of_k_random``); one message naming the field.
    """
    from lvsearch.io import read_checked

    d = read_checked(path, LandscapeFile, what="landscape file", regenerate=LANDSCAPE_COMMAND,
                     fix=f"pass the landscape.json that {LANDSCAPE_COMMAND} writes (one ships as "
                         "benchmarks/results/landscape.json)")
    s = d["summary"]
    dist = s["distribution_random"]
    n, median, top, best_draw = (float(dist[k]) for k in ("n", "median", "top_decile_threshold", "best"))
    all_best = (s.get("distribution_all") or {}).get("best")
    best = max(float(all_best), best_draw) if all_best is not None else best_draw
    sigma = (s.get("sigma_seed") or {}).get("pooled_std")
    settings = d.get("settings") if isinstance(d.get("settings"), dict) else {}
    where_from = ", ".join(str(x) for x in (settings.get("space"), f"{settings['steps']}-step retrains"
                                            if isinstance(settings.get("steps"), int) else None) if x)
    lines = [f"landscape {path}{f' ({where_from})' if where_from else ''}: standalone MLM accuracy of {n:.0f} random "
             f"architectures: median {median:.4f}, top decile from {top:.4f}, best {best_draw:.4f}"
             + (f"; best trained so far (one seed) {best:.4f}" if best > best_draw else "")]
    if space and settings.get("space") and settings["space"] != space:
        lines.append(f"note: this landscape was measured on {settings['space']}, not on this supernet's {space}: its "
                     "numbers describe that space, not yours (benchmarks/landscape.py measures yours)")
    if not sigma:
        lines.append("headroom: unmeasured (the file has no pretraining-seed spread: summary.sigma_seed.pooled_std "
                     "is missing or 0)")
    else:
        head, head_all = (best_draw - median) / sigma, (best - median) / sigma
        known = f", best trained {head_all:.2f}" if best > best_draw else ""
        room = _gate_line(s.get("gate"))
        lines.append(f"headroom over a median architecture, in pretraining-seed σ ({sigma:.4f}): best random draw "
                     f"{head:.2f}{known}; " + ("below 2: one retrain's seed noise is as large as what search can gain "
                                               "here" if head_all < 2 else "a maximum of noisy runs: see the room line"
                                               if room and room[1] is False else "search has room to pay off here"))
        if room:
            lines.append(room[0])
    curve = s.get("best_of_k_random") or []
    best_k = [(c["k"], float(c["expected_best"])) for c in curve if c["k"] in (1, 5, len(curve))]
    power = _power_line(s.get("power") or {}, best, median, best_k[-1] if best_k else None)
    if power:
        lines.append(power)
    fidelity = _fidelity_line(d.get("fitness_variants"))
    if fidelity:
        lines.append(fidelity)
    if best_k:
        lines.append("expected best of k random architectures: " + ", ".join(f"k={k}: {v:.4f}" for k, v in best_k))
    return lines


def _gate_line(gate: dict | None) -> tuple[str, bool] | None:
    """The landscape's room rule (``summary.gate``, ``benchmarks/landscape.py``): the best trained
    architecture shrunk for selection, minus the mean of random search's picks, against the
    difference a paired t test over ``gate.seeds`` seeds detects from training noise; ``(line,
    room ≥ that difference)``, or None when the file has no such rule or no random-search picks."""
    if not gate or gate.get("room") is None or "training_noise_only" not in gate["detectable"]:
        return None
    room, need, n = float(gate["room"]), float(gate["detectable"]["training_noise_only"]), int(gate["seeds"])
    ok = room >= need
    return (f"room for a {n}-seed search test: the best trained architecture shrunk for selection "
            f"({float(gate['best_shrunk']):.4f}) − random search's picks ({float(gate['random_search_mean']):.4f}) = "
            f"{room * 100:+.2f} pp, against {need * 100:.2f} pp that {n} seeds detect from training noise: "
            + ("a search win is detectable here" if ok else "no search can be shown to beat random search here"),
            ok)


def _fidelity_line(variants) -> str | None:
    """How well the search's default fitness (−loss on 1024 dev sequences) ranks the landscape,
    over the whole band and among its best (the top-region τ, where a search's picks are), from
    a landscape file's ``fitness_variants``; None when the file has not measured it."""
    try:
        b = variants["1024"]["by_fitness"]["loss"]
        tau, region = float(b["kendall_tau"]), b["top_region"]
        top, n = float(region["kendall_tau"]), int(region["n"])
    except (KeyError, TypeError, ValueError):
        return None
    lo, hi = (region.get("kendall_tau_ci95") or [None, None]) if isinstance(region, dict) else (None, None)
    ci = f" [{lo:.2f}, {hi:.2f}]" if isinstance(lo, (int, float)) and isinstance(hi, (int, float)) else ""
    return (f"fitness: the search's default (−loss on 1024 dev sequences) ranks the landscape with Kendall τ {tau:.2f}, "
            f"its best {n} by standalone accuracy with τ {top:.2f}{ci}"
            + (": it barely sees the top, where the picks are" if top < 0.3 else ""))


def _power_line(power: dict, best: float, median: float, best_of_k: tuple[int, float] | None,
                seeds: int = 6) -> str | None:
    """Can EA vs random search be told apart over ``seeds`` search seeds? The room a search has
    over random search is estimated as the best trained architecture's accuracy (one seed: an
    estimate, not a bound) minus what random sampling reaches: the expected best of the
    landscape's ``k`` random draws (``best_of_k``; a random search with many evaluations picks
    above a median architecture), else the random draws' median. It is compared with the
    smallest paired mean difference a t test over ``seeds`` detects (``summary.power``, α 0.05,
    power 0.8): with pretraining-seed noise only, and with the arms benchmark's observed
    search-and-pretraining noise where the file has it. None when the file has no power analysis
    for ``seeds``."""
    mdes = power.get("minimum_detectable_difference") if isinstance(power, dict) else None
    if not isinstance(mdes, dict):
        return None
    got = {}
    for name in ("training_noise_only", "arms_ea_minus_random_search"):
        v = mdes.get(name)
        v = v.get(str(seeds)) if isinstance(v, dict) else None
        if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0:
            got[name] = float(v)
    if "training_noise_only" not in got:
        return None
    lo = got["training_noise_only"]
    hi = got.get("arms_ea_minus_random_search", lo)
    if best_of_k is not None:
        room, ref = best - best_of_k[1], f"the expected best of {best_of_k[0]} random architectures"
    else:
        room, ref = best - median, "a median random architecture"
    exact = " (exact power, noncentral t)" if str(power.get("method", "")).startswith("exact") else ""
    need = f"≥ {lo * 100:.1f} pp" + (f" (≥ {hi * 100:.1f} pp with search-seed noise)" if hi > lo else "") + exact
    head = (f"power: the best architecture trained so far is {room * 100:.1f} pp above {ref}; {seeds} search seeds "
            f"detect an EA − random-search difference {need}")
    if room < lo:
        return head + f": no search can be shown to beat random search with {seeds} seeds in this space"
    if room < hi:
        return head + (f": only a search that finds the best every time could show it; expect no detectable "
                       f"difference with {seeds} seeds")
    return head + ": a search could show a difference here; measure it (benchmarks/search_arms.py)"
