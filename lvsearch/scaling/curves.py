"""Learning curves as the estimators take them: :func:`validate_curve` (the one check of a curve's
shape and values) and :func:`smooth_curve` (optional smoothing before a fit).

Used by every estimator in :mod:`lvsearch.scaling.estimators` and by the pruning rules in
:mod:`lvsearch.scaling.halving`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lvsearch.errors import LvsearchError

__all__ = ["validate_curve", "smooth_curve"]


def validate_curve(x: Any, y: Any, *, source: str = "learning curve", min_points: int = 1):
    """Check a learning curve and return it as two float arrays.

    Args:
        x: training amounts, shape ``(n,)``, finite, > 0, strictly increasing.
        y: losses, shape ``(n,)``, finite, > 0 (the laws are fitted in log space).
        source: how the curve is named in error messages (a file name, a candidate name).
        min_points: fewest points accepted.

    Returns:
        ``(x, y)`` as float64 arrays of shape ``(n,)``.

    Raises:
        LvsearchError: shapes differ, too few points, non-finite or non-positive values, or
            ``x`` not strictly increasing.
    """
    try:
        xa = np.asarray(x, dtype=float).reshape(-1)
        ya = np.asarray(y, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        raise LvsearchError(
            f"{source}: x and y must be numbers", fix="pass numeric arrays of the same length"
        ) from None
    if xa.shape != ya.shape:
        raise LvsearchError(
            f"{source}: x has {xa.size} values but y has {ya.size}",
            fix="pass one loss per training amount",
        )
    if xa.size < min_points:
        raise LvsearchError(
            f"{source}: {xa.size} point(s), but at least {min_points} are needed",
            fix="log more points of the learning curve, or choose a simpler estimator (M1 needs 2)",
        )
    if not (np.all(np.isfinite(xa)) and np.all(np.isfinite(ya))):
        raise LvsearchError(f"{source}: x and y must be finite (found NaN or inf)",
                            fix="drop the rows with missing or diverged values")
    if np.any(xa <= 0):
        raise LvsearchError(f"{source}: x must be > 0 (found {xa.min():g})",
                            fix="count training from 1, not 0 (drop the x = 0 point)")
    if np.any(ya <= 0):
        raise LvsearchError(f"{source}: losses must be > 0 (found {ya.min():g})",
                            fix="fit a positive loss or error (scaling laws are fitted in log space)")
    if xa.size > 1 and np.any(np.diff(xa) <= 0):
        i = int(np.argmax(np.diff(xa) <= 0))
        raise LvsearchError(
            f"{source}: x must be strictly increasing (x[{i}] = {xa[i]:g}, x[{i + 1}] = {xa[i + 1]:g})",
            fix="sort the curve by x and merge duplicate x values",
        )
    return xa, ya


def smooth_curve(y: np.ndarray, method: str | None, window: int = 5) -> np.ndarray:
    """Smooth losses ``y`` (shape ``(n,)``) before fitting; returns a new array.

    ``method``: ``None``/``"none"`` (copy), ``"running-min"`` (``min(y[:i+1])``: monotone, but
    still pinned by a noisy low point), ``"moving-average"`` (centred window of ``window``
    points, shrinking at the ends; damps single noisy points).

    Raises:
        LvsearchError: unknown method or ``window < 1``.
    """
    y = np.asarray(y, dtype=float)
    if method in (None, "none"):
        return y.copy()
    if method == "running-min":
        return np.minimum.accumulate(y)
    if method == "moving-average":
        if window < 1:
            raise LvsearchError(f"smoothing window must be >= 1, got {window}", fix="pass --window 5")
        h = window // 2
        c = np.concatenate([[0.0], np.cumsum(y)])
        idx = np.arange(y.size)
        lo = np.maximum(idx - h, 0)
        hi = np.minimum(idx + h + 1, y.size)
        return (c[hi] - c[lo]) / (hi - lo)
    raise LvsearchError(f"unknown smoothing {method!r}",
                        fix="use one of: none, running-min, moving-average")

