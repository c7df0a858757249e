"""Classification and regression metrics for fine-tuning.

Uses scikit-learn when it is installed (``accuracy_score``, ``f1_score``,
``matthews_corrcoef``); otherwise the same quantities are computed from the confusion matrix
(definitions below, identical to scikit-learn's). Correlations always come from
``scipy.stats`` (``pearsonr``, ``spearmanr``).

* F1: binary F1 of the positive class (label id 1) for two classes, unweighted macro average
  of per-class F1 otherwise; a class with no predicted and no true examples has F1 0
  (scikit-learn's ``zero_division=0``).
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

try:  # pragma: no cover - depends on the environment
    import sklearn.metrics as _skm
except ImportError:  # scikit-learn is optional
    _skm = None

#: The library that computed F1/MCC ("scikit-learn" or "confusion matrix (numpy)").
BACKEND = "scikit-learn" if _skm is not None else "confusion matrix (numpy)"


def confusion_matrix(y_true: Sequence[int], y_pred: Sequence[int], num_classes: int) -> np.ndarray:
    """``(K, K)`` int64 counts; row = true class, column = predicted class."""
    c = np.zeros((num_classes, num_classes), dtype=np.int64)
    np.add.at(c, (np.asarray(y_true, dtype=np.int64), np.asarray(y_pred, dtype=np.int64)), 1)
    return c


def _f1_from_confusion(c: np.ndarray) -> float:
    tp = np.diag(c).astype(np.float64)
    pred, true = c.sum(0), c.sum(1)
    denom = pred + true
    f1 = np.divide(2 * tp, denom, out=np.zeros_like(tp), where=denom > 0)
    return float(f1[1]) if c.shape[0] == 2 else float(f1.mean())


def _mcc_from_confusion(c: np.ndarray) -> float:
    c = c.astype(np.float64)
    t, p = c.sum(1), c.sum(0)
    s, correct = c.sum(), np.trace(c)
    num = correct * s - (p * t).sum()
    den = math.sqrt((s * s - (p * p).sum()) * (s * s - (t * t).sum()))
    return float(num / den) if den > 0 else 0.0


def classification_metrics(y_true: Sequence[int], y_pred: Sequence[int], num_classes: int) -> dict:
    """``{"accuracy", "f1", "mcc"}`` for integer labels in ``[0, num_classes)``.

    Raises:
        ValueError: empty or different-length inputs.
    """
    if len(y_true) == 0 or len(y_true) != len(y_pred):
        raise ValueError("y_true and y_pred must be non-empty and of equal length")
    if _skm is not None:  # pragma: no cover - depends on the environment
        labels = list(range(num_classes))
        avg = "binary" if num_classes == 2 else "macro"
        return {
            "accuracy": float(_skm.accuracy_score(y_true, y_pred)),
            "f1": float(_skm.f1_score(y_true, y_pred, labels=labels, average=avg, pos_label=1, zero_division=0)),
            "mcc": float(_skm.matthews_corrcoef(y_true, y_pred)),
        }
    c = confusion_matrix(y_true, y_pred, num_classes)
    return {"accuracy": float(np.trace(c) / c.sum()), "f1": _f1_from_confusion(c), "mcc": _mcc_from_confusion(c)}


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


__all__ = ["BACKEND", "confusion_matrix", "classification_metrics", "regression_metrics"]
