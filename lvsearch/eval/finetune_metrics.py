"""How fine-tuning results are scored: the metrics of a task's kind (:func:`task_metrics`), the dev
metric that selects the epoch (:func:`primary_metric`), its name in tables (:func:`metric_label`) and
the summary over seeds (:func:`seed_summary`).
"""

from __future__ import annotations

import statistics
from typing import Sequence

from lvsearch.eval.tasks import TaskData

__all__ = ["task_metrics", "IMBALANCE_RATIO", "primary_metric", "metric_label", "seed_summary"]


def task_metrics(task: TaskData, labels: list, preds: list) -> dict:
    """The metrics of ``task``'s kind: :func:`~lvsearch.eval.metrics.regression_metrics` or
    :func:`~lvsearch.eval.metrics.classification_metrics` over ``task.num_outputs`` classes."""
    from lvsearch.eval.metrics import classification_metrics, regression_metrics

    if task.kind == "regression":
        return regression_metrics(labels, preds)
    return classification_metrics(labels, preds, task.num_outputs)


#: A classification task counts as imbalanced when its largest class holds more than this
#: multiple of the uniform share ``1/K`` of the training labels (binary: more than 60%).
IMBALANCE_RATIO = 1.2


def primary_metric(kind: str, labels: Sequence | None = None, num_classes: int | None = None) -> str:
    """The dev metric used to select the epoch (and shown first): ``pearson`` for regression;
    for classification ``accuracy`` when the training labels are balanced, otherwise the metric
    GLUE reports for such tasks: ``mcc`` (Matthews correlation, CoLA) for binary and ``f1``
    (macro-F1) for multi-class tasks, since accuracy rewards predicting the majority class.
    Balanced: the largest class holds at most :data:`IMBALANCE_RATIO` × ``1/K`` of ``labels``."""
    if kind == "regression":
        return "pearson"
    if not labels or not num_classes or num_classes < 2:
        return "accuracy"
    counts = [0] * num_classes
    for y in labels:
        counts[int(y)] += 1
    if max(counts) / len(labels) <= IMBALANCE_RATIO / num_classes:
        return "accuracy"
    return "mcc" if num_classes == 2 else "f1"


def metric_label(metric: str, num_classes: int | None, label_names: Sequence[str] | None = None) -> str:
    """How a metric is named in tables: which F1 ``f1`` is (binary F1 of class 1, or macro-F1)."""
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
