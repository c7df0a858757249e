"""Successive halving on in-memory learning curves: the pure core of finalist pruning
(:mod:`lvsearch.scaling.finalists` trains; this module only decides).

:func:`halving_step` makes one decision (rank by the current loss, or by an estimator's
prediction at the full budget with a bootstrap interval, keeping whoever's interval reaches
the cut-off); :func:`successive_halving` replays the rungs of a whole job on complete curves
and counts the compute. Successive halving: Jamieson & Talwalkar 2016; Li et al. 2018.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from lvsearch.errors import LvsearchError
from lvsearch.scaling.curves import validate_curve
from lvsearch.scaling.estimators import prediction_interval
from lvsearch.scaling.fitting import Estimator
from lvsearch.scaling.m4 import M4

__all__ = ["DEGENERATE_WIDTH", "halving_step", "successive_halving"]


def _default_factory() -> Estimator:
    return M4()


#: A bootstrap prediction interval narrower than this (relative to max(1, |prediction|)) marks
#: a degenerate fit in :func:`halving_step`: it falls back to current-loss ranking.
DEGENERATE_WIDTH = 1e-6

#: ``lvsearch retrain --pruning`` value -> :func:`halving_step` rule
PRUNING = {"extrapolate": "m4", "current-loss": "current"}


def halving_rounds(n: int, eta: int) -> int:
    """Pruning rounds of successive halving over ``n`` finalists: how often ``ceil(n / eta)``
    must be applied to reach 1 (``ceil(log_eta n)``).

    Raises:
        LvsearchError: ``n < 2`` or ``eta < 2``.
    """
    if n < 2:
        raise LvsearchError(f"--finalists {n}: successive halving needs at least 2 finalists",
                            fix="pass --finalists 2 or more (or retrain one architecture without --finalists)")
    if eta < 2:
        raise LvsearchError(f"--eta {eta} must be an integer >= 2", fix="use --eta 2 (halve) or 3")
    rounds, alive = 0, n
    while alive > 1:
        alive = math.ceil(alive / eta)
        rounds += 1
    return rounds


def halving_rungs(budget: int, n: int, eta: int) -> list[int]:
    """Rung budgets (optimizer steps) of successive halving over ``n`` finalists.

    With ``R = halving_rounds(n, eta)``, rung ``i`` is ``budget / eta**(R - i)``,
    ``i = 0 .. R-1`` (``[budget/4, budget/2]`` for n = 4, eta = 2); the survivor then trains
    to ``budget``.

    Raises:
        LvsearchError: ``n < 2``, ``eta < 2``, or ``budget`` not divisible by ``eta**R``.
    """
    rounds = halving_rounds(n, eta)
    unit = eta**rounds
    if budget < unit or budget % unit:
        good = max(unit, budget // unit * unit)
        raise LvsearchError(
            f"--budget {budget} is not divisible by eta^rounds = {eta}^{rounds} = {unit} "
            f"({n} finalists, eta {eta}: {rounds} pruning rounds at budget/{unit} … budget/{eta})",
            fix=f"use a multiple of {unit}, e.g. --budget {good} or {good + unit}",
        )
    return [budget // eta ** (rounds - i) for i in range(rounds)]


def halving_step(
    curves: Mapping[str, tuple[Any, Any]],
    *,
    full_budget: float,
    eta: float = 2.0,
    rule: str = "m4",
    model_factory: Callable[[], Estimator] | None = None,
    n_boot: int = 50,
    level: float = 0.9,
    seed: int = 0,
    method: str = "residuals",
    offsets: Mapping[str, float] | None = None,
) -> dict:
    """One successive-halving decision on in-memory learning curves.

    Candidates are ranked by a score (lower is better) and the best ``ceil(n / eta)`` kept.

    * ``rule="current"``: score = last observed loss.
    * ``rule="m4"``: score = loss predicted at ``full_budget`` by the estimator of
      ``model_factory`` (default :class:`M4` with fitted ``eps_0``), with a bootstrap interval
      (:func:`prediction_interval`). The cut-off is the score of the last candidate kept by
      rank; a lower-ranked candidate is also kept when its interval's lower end is at or below
      that cut-off (its interval overlaps it), so pruning only drops candidates that are
      confidently worse. When the estimator cannot fit one of the curves (too few points, a
      loss above ``eps0``, ...), *every* candidate of this step is ranked by its last observed
      loss instead (a predicted final loss is not comparable with a current one); the log's
      ``"fallback"`` gives the reason, ``None`` when every curve was fitted. A *degenerate*
      fit — a bootstrap interval of zero width (:data:`DEGENERATE_WIDTH`), i.e. every refit
      pinned to the same prediction — counts as a failed fit: it never cuts a candidate.

    Args:
        curves: name -> ``(x, y)``, each of shape ``(n_i,)``, x strictly increasing, y > 0.
        full_budget: the training amount the candidates would be trained to (unit of x).
        eta: halving rate (> 1); ``ceil(n / eta)`` candidates are kept by rank.
        rule: ``"current"`` or ``"m4"``.
        model_factory, n_boot, level, seed, method: see :func:`prediction_interval`.
        offsets: name -> a known additive correction (unit of y) of a candidate's *predicted*
            loss, applied to the prediction and both interval ends before ranking (finalist
            pruning under a warmup-stable-decay schedule: the estimator extrapolates the
            stable phase and the offset is minus the measured cool-down drop). Ignored when
            candidates are ranked by their current loss. A missing name gets 0.

    Returns:
        decision log: ``{"rule", "full_budget", "eta", "n_keep_by_rank", "cutoff",
        "fallback", "ranking": [names, best first], "kept": [...], "cut": [...],
        "candidates": {name: {"last_x", "last_loss", "score", "lo", "hi", "scored_by",
        "decision", "reason"}}}``.

    Raises:
        LvsearchError: no candidates, unknown rule, ``eta <= 1``, or an invalid curve.
    """
    if not curves:
        raise LvsearchError("successive halving: no candidates", fix="pass at least one learning curve")
    if rule not in ("current", "m4"):
        raise LvsearchError(f"unknown ranking rule {rule!r}", fix="use 'current' or 'm4'")
    if not eta > 1:
        raise LvsearchError(f"eta must be > 1, got {eta}", fix="use eta = 2 or 3")
    factory = model_factory or _default_factory
    cand: dict[str, dict] = {}
    fallback = None
    for i, (name, (x, y)) in enumerate(curves.items()):
        xa, ya = validate_curve(x, y, source=f"candidate {name!r}")
        entry = {"last_x": float(xa[-1]), "last_loss": float(ya[-1]), "n_points": int(xa.size)}
        if rule == "m4" and fallback is None:
            try:
                pi = prediction_interval(factory, xa, ya, [full_budget], n_boot=n_boot,
                                         seed=seed + i, level=level, method=method)
                lo_, hi_, pred_ = float(pi["lo"][0]), float(pi["hi"][0]), float(pi["pred"][0])
                if n_boot > 0 and hi_ - lo_ <= DEGENERATE_WIDTH * max(1.0, abs(pred_)):
                    # every bootstrap refit gave the same prediction: the fit is pinned (a
                    # bound, too few distinct points), not certain; it must not cut anything
                    raise ArithmeticError(f"degenerate {factory().name} fit: zero-width interval "
                                          f"[{lo_:.4g}, {hi_:.4g}] from {xa.size} points")
                off = float((offsets or {}).get(name, 0.0))
                entry.update(score=pred_ + off, lo=lo_ + off, hi=hi_ + off,
                             scored_by=factory().name, n_boot_ok=pi["n_ok"])
                if offsets is not None:
                    entry.update(offset=off, extrapolated=pred_)
            except (LvsearchError, ArithmeticError) as e:
                fallback = f"candidate {name!r}: {str(e).splitlines()[0]}"
        cand[name] = entry
    scored_by = "current" if rule == "current" else f"current (fallback: {fallback})"
    for entry in cand.values():
        if rule == "current" or fallback is not None:
            last = entry["last_loss"]
            entry.update(score=last, lo=last, hi=last, scored_by=scored_by)
            for k in ("n_boot_ok", "offset", "extrapolated"):
                entry.pop(k, None)
    rule_used = "m4" if rule == "m4" and fallback is None else "current"
    ranking = sorted(cand, key=lambda n: (cand[n]["score"], n))
    k = max(1, math.ceil(len(ranking) / eta))
    cutoff = cand[ranking[k - 1]]["score"]
    kept, cut = [], []
    for pos, name in enumerate(ranking):
        e = cand[name]
        if pos < k:
            e["decision"], e["reason"] = "kept", f"rank {pos + 1} of {len(ranking)} (top {k})"
            kept.append(name)
        elif rule_used == "m4" and e["lo"] <= cutoff:
            e["decision"] = "kept"
            e["reason"] = (f"rank {pos + 1} but interval lower end {e['lo']:.4g} <= cut-off {cutoff:.4g}")
            kept.append(name)
        else:
            e["decision"] = "cut"
            what = "last loss" if rule_used == "current" else "predicted loss"
            extra = "" if rule_used == "current" else f", interval lower end {e['lo']:.4g}"
            e["reason"] = f"rank {pos + 1}: {what} {e['score']:.4g} > cut-off {cutoff:.4g}{extra}"
            cut.append(name)
    return {"rule": rule, "full_budget": float(full_budget), "eta": float(eta), "n_keep_by_rank": k,
            "cutoff": float(cutoff), "fallback": fallback, "ranking": ranking, "kept": kept, "cut": cut,
            "candidates": cand}


def successive_halving(
    curves: Mapping[str, tuple[Any, Any]],
    *,
    rungs: Sequence[float],
    full_budget: float | None = None,
    eta: float = 2.0,
    rule: str = "m4",
    predict_at: float | None = None,
    offsets: Sequence[Mapping[str, float]] | None = None,
    **step_kwargs,
) -> dict:
    """Simulate successive halving on complete, in-memory learning curves.

    At rung ``r`` (training amount ``rungs[r]``), every surviving curve is cut to its points
    with ``x <= rungs[r]`` (what would have been observed by then) and :func:`halving_step`
    decides who continues. Pure: no training, no files.

    Args:
        curves: name -> ``(x, y)``, each shape ``(n_i,)``.
        rungs: increasing training amounts at which to prune (unit of x).
        full_budget: training amount of the final models (default: largest x of any curve).
        predict_at: the x the estimator predicts at (default ``full_budget``; the stable
            phase's end under a warmup-stable-decay schedule).
        offsets: per rung, :func:`halving_step`'s ``offsets`` (None: none).
        eta, rule, step_kwargs: see :func:`halving_step`.

    Returns:
        ``{"rule", "rungs": [halving_step log + "budget"], "survivors": [...],
        "full_budget", "trained": {name: training amount reached}, "compute",
        "compute_all"}``: a candidate cut at rung ``r`` was trained to ``rungs[r]``, a survivor
        to ``full_budget``; ``compute`` is their sum and ``compute_all`` = ``n * full_budget``
        (training every candidate to the end), both in the unit of x.

    Raises:
        LvsearchError: rungs not increasing, or see :func:`halving_step`.
    """
    r = [float(v) for v in rungs]
    if not r or any(b <= a for a, b in zip(r, r[1:])):
        raise LvsearchError("successive halving: rungs must be a non-empty increasing list",
                            fix="pass e.g. rungs=[1e6, 4e6, 1.6e7]")
    arrays = {n: (np.asarray(x, float), np.asarray(y, float)) for n, (x, y) in curves.items()}
    if full_budget is None:
        full_budget = max(float(x.max()) for x, _ in arrays.values())
    alive = list(arrays)
    trained = dict.fromkeys(alive, float(full_budget))
    log = []
    for i, budget in enumerate(r):
        if len(alive) <= 1:
            break
        sub = {}
        for n in alive:
            x, y = arrays[n]
            m = x <= budget
            sub[n] = (x[m], y[m])
        step = halving_step(sub, full_budget=full_budget if predict_at is None else predict_at, eta=eta, rule=rule,
                            offsets=None if offsets is None else offsets[i], **step_kwargs)
        step["budget"] = budget
        log.append(step)
        for n in step["cut"]:
            trained[n] = budget
        alive = [n for n in alive if n in step["kept"]]
    return {"rule": rule, "full_budget": float(full_budget), "rungs": log, "survivors": alive,
            "trained": trained, "compute": float(sum(trained.values())),
            "compute_all": float(len(trained) * full_budget)}
