"""What the quickstart report reads from the arms' evaluation reports: per-item 0/1 outcomes
(MLM dev targets, BLiMP pairs) for paired comparisons, the MLM floors and each arm's paired
difference from its neighbour-count floor, and the fine-tuning scores per task."""

from __future__ import annotations

import numpy as np

from lvsearch.stats import mean_difference_interval


def _bits(s: str) -> np.ndarray:
    return np.frombuffer(s.encode("ascii"), dtype=np.uint8) - ord("0")


def mlm_outcomes(report: dict) -> np.ndarray | None:
    """``(targets,)`` 0/1 per-target MLM dev outcomes of an evaluation report (the masked dev
    targets in order), or None when the report has none."""
    m = report.get("mlm") or {}
    s = m.get("per_target_correct")
    return None if not s else _bits(s)


def floor_entry(report: dict) -> dict | None:
    """The report's floors entry when it was computed, else None."""
    f = (report.get("mlm") or {}).get("floors") or {}
    return f if f.get("status") == "done" else None


def _floor_outcomes(report: dict, name: str = "neighbour-count") -> np.ndarray | None:
    f = floor_entry(report)
    s = None if f is None else f[name].get("per_target_correct")
    return None if not s else _bits(s)


def floor_comparison(reports: list[dict]) -> dict | None:
    """Paired bootstrap (:func:`lvsearch.stats.mean_difference_interval`) of the MLM dev outcomes of one arm's runs
    against their own neighbour-count floors (same targets, seed by seed); None when a report
    lacks per-target outcomes or floors."""
    a = [mlm_outcomes(r) for r in reports]
    b = [_floor_outcomes(r) for r in reports]
    if any(x is None for x in a + b) or any(x.shape != y.shape for x, y in zip(a, b)):
        return None
    return mean_difference_interval(np.concatenate(a), np.concatenate(b))


def blimp_outcomes(report: dict) -> np.ndarray | None:
    """``(pairs,)`` 0/1 per-pair BLiMP outcomes of an evaluation report (paradigms in sorted
    order, pairs in file order), or None when BLiMP did not run or lacks per-pair outcomes."""
    b = report.get("blimp") or {}
    if b.get("status") != "done":
        return None
    parts = [p.get("per_pair_correct", "") for _, p in sorted(b["paradigms"].items())]
    return _bits("".join(parts)) if all(parts) else None


def task_split(report: dict, task: str) -> str:
    return "test" if "test" in report["finetune"][task]["aggregate"] else "dev"


def learned(seed_result: dict) -> bool:
    """Whether a fine-tuning seed's training loss fell (reports before the rule count as learned)."""
    return seed_result.get("status", "ok") != "failed"


def task_scores(report: dict) -> dict[str, tuple[str, list[float]]]:
    """``{task: (metric, per-seed values)}`` on test when labelled, else dev; seeds whose
    training loss did not fall (``status == "failed"``) are left out."""
    out = {}
    for name, ft in (report.get("finetune") or {}).items():
        split = "test" if "test" in ft["aggregate"] else "dev"
        metric = ft.get("select_metric") or next(iter(ft["aggregate"][split]))
        vals = [r[split][metric] for r in ft.get("per_seed", [])
                if learned(r) and r.get(split) and r[split].get(metric) is not None]
        out[name] = (f"{split} {metric}", [float(v) for v in vals])
    return out
