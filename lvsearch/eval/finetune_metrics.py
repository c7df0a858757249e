"""How fine-tuning results are scored: the metrics of a task's kind (:func:`task_metrics`), per-class
precision / recall / F1 of classification tasks (:func:`class_metrics`, :func:`per_class_summary`),
the dev metric that selects the epoch and decides the floor verdict (:func:`primary_metric`), its
name in tables (:func:`metric_label`) and the summary over seeds (:func:`seed_summary`).

The rule (one metric both selects each seed's epoch on dev and is compared with the bag-of-words
floor on test): **accuracy** when the training labels are balanced (the largest class holds at
most :data:`IMBALANCE_RATIO` × 1/K of them), else **macro F1** (unweighted mean of the K per-class
F1, binary tasks included), because accuracy rewards predicting the majority class and a class
the model never predicts then costs it nothing. Pearson for regression.
"""

from __future__ import annotations

import statistics
from typing import Sequence

from lvsearch.eval.tasks import TaskData

__all__ = ["task_metrics", "class_metrics", "per_class_summary", "never_predicted", "IMBALANCE_RATIO", "is_imbalanced",
           "primary_metric", "metric_label", "seed_summary"]


def task_metrics(task: TaskData, labels: list, preds: list) -> dict:
    """The metrics of ``task``'s kind: :func:`~lvsearch.eval.metrics.regression_metrics` or
    :func:`~lvsearch.eval.metrics.classification_metrics` over ``task.num_outputs`` classes."""
    from lvsearch.eval.metrics import classification_metrics, regression_metrics

    if task.kind == "regression":
        return regression_metrics(labels, preds)
    return classification_metrics(labels, preds, task.num_outputs)


def class_metrics(task: TaskData, labels: list, preds: list) -> dict | None:
    """Per-class ``precision``/``recall``/``f1``/``support``/``predicted`` lists of a classification
    task (:func:`~lvsearch.eval.metrics.per_class_metrics`, indexed by class id, the names in
    ``task.label_names``); None for regression."""
    from lvsearch.eval.metrics import per_class_metrics

    if task.kind == "regression":
        return None
    return per_class_metrics(labels, preds, task.num_outputs)


def never_predicted(per_class: dict | None, label_names: Sequence[str]) -> list[str]:
    """The names of the classes with true examples that ``per_class`` (:func:`class_metrics`)
    never predicts (e.g. a 19-of-1,500 class with F1 0 in every seed)."""
    if not per_class:
        return []
    return [label_names[k] for k, (n, p) in enumerate(zip(per_class["support"], per_class["predicted"])) if n and not p]


def per_class_summary(rows: list[dict | None], label_names: Sequence[str]) -> dict | None:
    """``{class name: {"precision", "recall", "f1": seed_summary, "support", "never_predicted_seeds"}}``
    over seeds' :func:`class_metrics` (None entries skipped; None when there are none)."""
    rows = [r for r in rows if r]
    if not rows:
        return None
    return {name: {**{m: seed_summary([r[m][k] for r in rows]) for m in ("precision", "recall", "f1")},
                   "support": rows[0]["support"][k],
                   "never_predicted_seeds": sum(1 for r in rows if r["support"][k] and not r["predicted"][k])}
            for k, name in enumerate(label_names)}


#: A classification task counts as imbalanced when its largest class holds more than this
#: multiple of the uniform share ``1/K`` of the training labels (binary: more than 60%).
IMBALANCE_RATIO = 1.2


def is_imbalanced(labels: Sequence, num_classes: int | None) -> bool:
    """Whether classification ``labels`` (ids in ``[0, num_classes)``) are imbalanced: the largest
    class holds more than :data:`IMBALANCE_RATIO` × ``1/K`` of them."""
    if not labels or not num_classes or num_classes < 2:
        return False
    counts = [0] * num_classes
    for y in labels:
        counts[int(y)] += 1
    return max(counts) / len(labels) > IMBALANCE_RATIO / num_classes


def primary_metric(kind: str, labels: Sequence | None = None, num_classes: int | None = None) -> str:
    """The metric that selects the epoch on dev, picks the floor's C on dev and decides the floor
    verdict on test (and is shown first): ``pearson`` for regression; for classification
    ``accuracy`` when the training labels are balanced, otherwise ``macro_f1`` (binary and
    multi-class alike), since accuracy rewards predicting the majority class and a class never
    predicted costs it almost nothing. Balanced: the largest class holds at most
    :data:`IMBALANCE_RATIO` × ``1/K`` of ``labels`` (:func:`is_imbalanced`).

    (Earlier versions judged an imbalanced binary task by MCC and a multi-class one by ``f1``,
    which is the same macro F1.)"""
    if kind == "regression":
        return "pearson"
    return "macro_f1" if is_imbalanced(labels or [], num_classes) else "accuracy"


def metric_label(metric: str, num_classes: int | None, label_names: Sequence[str] | None = None) -> str:
    """How a metric is named in tables: which F1 ``f1`` is (binary F1 of class 1, or macro-F1);
    ``macro_f1`` is the mean of the K per-class F1."""
    if metric == "macro_f1" and num_classes:
        return f"macro F1 (mean over {num_classes} classes)"
    if metric != "f1" or not num_classes:
        return metric
    if num_classes == 2:
        pos = f" = {label_names[1]}" if label_names and len(label_names) > 1 else ""
        return f"f1 (binary, positive class 1{pos})"
    return f"f1 (macro over {num_classes} classes)"


def seed_summary(values: list[float]) -> dict:
    """``{"mean", "std", "median", "n"}`` of the non-None ``values`` (one metric over seeds): ``std``
    is the sample standard deviation (ddof = 1), None with one value (unmeasured, not 0); all None
    and ``n = 0`` when there is no value."""
    vals = [v for v in values if v is not None]
    if not vals:
        return {"mean": None, "std": None, "median": None, "n": 0}
    return {
        "mean": statistics.fmean(vals),
        "std": statistics.stdev(vals) if len(vals) > 1 else None,  # one seed: spread unmeasured
        "median": statistics.median(vals),
        "n": len(vals),
    }
