"""Classification and regression metrics for fine-tuning.

Classification metrics are scikit-learn's (``accuracy_score``, ``f1_score``,
``matthews_corrcoef``); correlations come from ``scipy.stats`` (``pearsonr``, ``spearmanr``).

* F1 (``f1``): binary F1 of the positive class (label id 1) for two classes, unweighted macro
  average of per-class F1 otherwise; a class with no predicted and no true examples has F1 0
  (``zero_division=0``).
* Macro F1 (``macro_f1``, every classification task, binary included): the unweighted mean of
  the K per-class F1 (scikit-learn ``average="macro"`` over ``labels=0..K-1``), so a class the
  model never predicts counts as F1 0 however small it is. Per-class precision, recall, F1,
  support and predicted counts: :func:`per_class_metrics` (``precision_recall_fscore_support``).
* Matthews correlation (Matthews 1975; multi-class form of Gorodkin 2004, "Comparing two
  K-category assignments by a K-category correlation coefficient"): with confusion
  matrix ``C``, ``t_k`` true and ``p_k`` predicted counts of class k, ``c = trace(C)``,
  ``s = Σ C``: ``MCC = (c·s − Σ p_k t_k) / sqrt((s² − Σ p_k²)(s² − Σ t_k²))``, 0 when the
  denominator is 0.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

#: The library that computes F1/MCC (recorded in every fine-tuning result).
BACKEND = "scikit-learn"


def confusion_matrix(y_true: Sequence[int], y_pred: Sequence[int], num_classes: int) -> np.ndarray:
    """``(K, K)`` int64 counts; row = true class, column = predicted class (scikit-learn's)."""
    from sklearn.metrics import confusion_matrix as cm

    return cm(y_true, y_pred, labels=list(range(num_classes))).astype(np.int64)


def classification_metrics(y_true: Sequence[int], y_pred: Sequence[int], num_classes: int) -> dict:
    """``{"accuracy", "f1", "macro_f1", "mcc"}`` for integer labels in ``[0, num_classes)``.

    Raises:
        ValueError: empty or different-length inputs.
    """
    import sklearn.metrics as skm

    if len(y_true) == 0 or len(y_true) != len(y_pred):
        raise ValueError("y_true and y_pred must be non-empty and of equal length")
    labels = list(range(num_classes))
    avg = "binary" if num_classes == 2 else "macro"
    return {
        "accuracy": float(skm.accuracy_score(y_true, y_pred)),
        "f1": float(skm.f1_score(y_true, y_pred, labels=labels, average=avg, pos_label=1, zero_division=0)),
        "macro_f1": float(skm.f1_score(y_true, y_pred, labels=labels, average="macro", zero_division=0)),
        "mcc": float(skm.matthews_corrcoef(y_true, y_pred)),
    }


def per_class_metrics(y_true: Sequence[int], y_pred: Sequence[int], num_classes: int) -> dict:
    """Per class ``k = 0..K-1`` (lists indexed by class id): ``precision``, ``recall``, ``f1``
    (scikit-learn ``precision_recall_fscore_support``, ``zero_division=0``), ``support`` (true
    examples) and ``predicted`` (examples predicted as ``k``; 0 = the class is never predicted).

    Raises:
        ValueError: empty or different-length inputs.
    """
    import sklearn.metrics as skm

    if len(y_true) == 0 or len(y_true) != len(y_pred):
        raise ValueError("y_true and y_pred must be non-empty and of equal length")
    labels = list(range(num_classes))
    p, r, f, support = skm.precision_recall_fscore_support(y_true, y_pred, labels=labels, average=None, zero_division=0)
    predicted = np.bincount(np.asarray(y_pred, dtype=np.int64), minlength=num_classes)[:num_classes]
    return {"precision": [float(v) for v in p], "recall": [float(v) for v in r], "f1": [float(v) for v in f],
            "support": [int(v) for v in support], "predicted": [int(v) for v in predicted]}


def regression_metrics(y_true: Sequence[float], y_pred: Sequence[float]) -> dict:
    """``{"pearson", "spearman", "mse"}`` (scipy.stats; correlations are NaN → reported as
    None when a side is constant).

    Raises:
        ValueError: fewer than 2 points or different-length inputs.
    """
    from scipy import stats

    if len(y_true) < 2 or len(y_true) != len(y_pred):
        raise ValueError("regression metrics need at least 2 paired values")
    yt, yp = np.asarray(y_true, dtype=np.float64), np.asarray(y_pred, dtype=np.float64)

    def corr(fn):
        if np.ptp(yt) == 0 or np.ptp(yp) == 0:
            return None
        v = float(fn(yt, yp)[0])
        return v if math.isfinite(v) else None

    return {"pearson": corr(stats.pearsonr), "spearman": corr(stats.spearmanr), "mse": float(np.mean((yt - yp) ** 2))}


__all__ = ["BACKEND", "confusion_matrix", "classification_metrics", "per_class_metrics", "regression_metrics"]
