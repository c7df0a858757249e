"""The pick of an accuracy–cost search: the cheapest candidate at a stated fitness.

A front (NSGA-II's ``pareto.json``) is a set, and a user retrains one model. The rule, the
same for NSGA-II and for random search on its own candidates (the control of a
faster-at-equal-accuracy claim): among the complete candidates whose fitness is at least a
reference, the one with the lowest cost (predicted latency in ms per batch, parameters or
FLOPs per token: the search's ``nsga2_cost``); ties by the higher fitness, then the key. The
cheapest candidate at or above a fitness is always on the front of everything evaluated, so
for NSGA-II it is "the fastest front point at that fitness".

The reference is ``evolve --pick-fitness-at`` when given, else the median fitness of the
search's first population (iteration 0): an `--compare-random` control draws the same first
population, so both arms of one seed are picked at the same reference (HAT, Wang et al. 2020,
and OFA, Cai et al. 2020, likewise report the fastest model at a fixed accuracy).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from lvsearch.search.evaluator import EvalResult

#: The file an accuracy–cost search writes (an ``lvsearch.arch/v1`` file: ``retrain --arch``).
PICK_FILE = "pick.json"
#: ``nsga2_cost`` → the :class:`EvalResult` field that holds it, and its unit.
COST_FIELDS: dict[str, tuple[str, str]] = {"latency": ("latency_ms", "ms per batch (predicted)"),
                                           "params": ("params", "parameters"),
                                           "flops": ("flops", "FLOPs per token")}


def first_population_reference(history: Sequence[dict]) -> float | None:
    """The median fitness of the complete candidates of iteration 0 (a search's history rows,
    :attr:`Search.history`), or None when there is none."""
    first = [h["fitness"] for h in history
             if h.get("iteration") == 0 and h.get("fitness") is not None and not h.get("partial")]
    return float(statistics.median(first)) if first else None


def cheapest_at(results: Iterable[EvalResult], cost: str, reference: float) -> EvalResult | None:
    """The complete result with the lowest ``cost`` among those with fitness ≥ ``reference``
    (ties: higher fitness, then the key), or None when none reaches it.

    Raises:
        KeyError: ``cost`` is not one of :data:`COST_FIELDS`.
    """
    attr = COST_FIELDS[cost][0]
    ok = [r for r in results if r.complete and r.fitness is not None and r.fitness >= reference
          and getattr(r, attr) is not None]
    return min(ok, key=lambda r: (float(getattr(r, attr)), -r.fitness, r.key)) if ok else None


def pick_record(results: Sequence[EvalResult], cost: str, reference: float | None, source: str) -> dict:
    """What ``pick.json``'s meta says: the rule, the reference fitness and where it came from
    (``source``), how many complete candidates reach it, and the pick's key, fitness and cost
    (``pick`` None when none reaches it, or there is no reference)."""
    attr, unit = COST_FIELDS[cost]
    complete = [r for r in results if r.complete and r.fitness is not None]
    best = cheapest_at(complete, cost, reference) if reference is not None else None
    return {
        "rule": f"lowest {cost} among complete candidates with fitness >= the reference",
        "reference": {"fitness": reference, "source": source},
        "cost": cost, "cost_unit": unit,
        "candidates": len(complete),
        "at_or_above": sum(1 for r in complete if reference is not None and r.fitness >= reference),
        "pick": None if best is None else {"key": best.key, "fitness": best.fitness, cost: getattr(best, attr)},
    }


def write_pick(folder: Path, results: Sequence[EvalResult], cost: str, reference: float | None, source: str, *,
               space: str, meta_of: Callable[[EvalResult], dict]) -> dict:
    """Write ``folder/pick.json`` (an ``lvsearch.arch/v1`` file of the pick, its meta
    ``meta_of(pick)`` plus the :func:`pick_record` under ``"pick"``) and return the record;
    with no candidate at the reference no file is written (an older one is removed)."""
    from lvsearch.arch import Arch

    rec = pick_record(results, cost, reference, source)
    path = folder / PICK_FILE
    if rec["pick"] is None:
        path.unlink(missing_ok=True)
        return rec
    r = next(r for r in results if r.key == rec["pick"]["key"])
    Arch.from_key(r.key).to_json(path, space=space, meta=dict(meta_of(r), pick=rec))
    return rec
