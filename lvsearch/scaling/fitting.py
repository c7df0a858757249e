"""The estimators' shared machinery: the :class:`Estimator` base class (``fit``/``predict`` in the
caller's units) and the fitting helpers of the laws.

* :func:`power_law_ls` — the closed-form block ``(log beta, c, alpha)`` by bounded linear least
  squares;
* :data:`SELECT_MODES`, :func:`validation_split`, :func:`pick_by_validation` — how the one
  non-convex parameter of a law is chosen by extrapolation to a held-out tail;
* :func:`log_rmse` — the log-space error those choices are scored by.

The laws themselves are in :mod:`lvsearch.scaling.estimators` (M1, M3) and
:mod:`lvsearch.scaling.m4` (M4, M2); the method is described in the former's docstring.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
from scipy.optimize import lsq_linear, minimize_scalar

from lvsearch.errors import LvsearchError
from lvsearch.scaling.curves import smooth_curve, validate_curve

__all__ = ["MARGIN_FRAC", "SELECT_MODES", "Estimator", "power_law_ls", "validation_split", "pick_by_validation",
           "log_rmse"]

#: Relative distance kept between eps_inf and min(y), and between eps_0 and max(y), as a
#: fraction of the loss range of the curve (log(y - eps_inf) is -inf at eps_inf = min(y)).
MARGIN_FRAC = 1e-3


@dataclass
class Estimator:
    """Common interface of the scaling-law estimators.

    ``fit(x, y)`` returns the fitted parameters (a dict, in the caller's units of ``x`` and
    ``y``); ``predict(x)`` returns predicted losses. After fitting, ``params_`` holds the same
    dict, ``loss_`` the square-log training loss and ``info_`` diagnostics (iterations, start
    values tried, smoothing used, notes).

    Args:
        smooth: ``None``, ``"running-min"`` or ``"moving-average"``: fit on a smoothed copy of
            ``y`` (see :func:`smooth_curve`); the original ``y`` is never modified.
        window: window of ``"moving-average"``.
        max_iter: most block-coordinate-descent rounds per start.
        tol: stop when one round lowers the loss by less than ``tol * (1 + loss)``.
    """

    smooth: str | None = None
    window: int = 5
    max_iter: int = 200
    tol: float = 1e-10

    name = "M?"
    equation = ""
    n_params = 0

    params_: dict | None = field(default=None, init=False, repr=False)
    loss_: float = field(default=math.nan, init=False, repr=False)
    info_: dict = field(default_factory=dict, init=False, repr=False)
    _x_scale: float = field(default=1.0, init=False, repr=False)
    _p: dict = field(default_factory=dict, init=False, repr=False)

    # -- public API -------------------------------------------------------------------------
    def fit(self, x: Any, y: Any) -> dict:
        """Fit the law to a learning curve.

        Args:
            x: training amounts, shape ``(n,)``, > 0, strictly increasing (any unit).
            y: losses, shape ``(n,)``, > 0, finite (any unit); ``n >= n_params``.

        Returns:
            The fitted parameters in the units of ``x`` and ``y`` (``beta`` multiplies ``x**c``
            with ``x`` in the caller's units), plus ``"model"`` and ``"loss"`` (the square-log
            training loss).

        Raises:
            LvsearchError: invalid curve (see :func:`validate_curve`) or fewer points than
                parameters.
        """
        x, y = validate_curve(x, y, source=f"{self.name} fit", min_points=self.n_params)
        ys = smooth_curve(y, self.smooth, self.window)
        self._x_scale = float(x[0])
        xn = x / self._x_scale
        self.info_ = {"smoothing": self.smooth or "none", "n_points": int(x.size), "notes": []}
        self._p, self.loss_ = self._fit(xn, ys)
        self.params_ = {"model": self.name, **self._public_params(), "loss": float(self.loss_)}
        return dict(self.params_)

    def predict(self, x: Any) -> np.ndarray:
        """Predicted loss at training amounts ``x`` (scalar or array, same unit as in ``fit``).

        Returns an array of the shape of ``x`` (0-d for a scalar), in the unit of ``y``.

        Raises:
            LvsearchError: called before :meth:`fit`, or ``x`` not finite and > 0.
        """
        if self.params_ is None:
            raise LvsearchError(f"{self.name}: predict() called before fit()", fix="call fit(x, y) first")
        xa = np.asarray(x, dtype=float)
        if not np.all(np.isfinite(xa)) or np.any(xa <= 0):
            raise LvsearchError(f"{self.name}: prediction points must be finite and > 0",
                                fix="pass positive training amounts")
        return self._predict(xa / self._x_scale)

    # -- to implement ------------------------------------------------------------------------
    def _fit(self, xn: np.ndarray, y: np.ndarray) -> tuple[dict, float]:
        raise NotImplementedError

    def _predict(self, xn: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _public_params(self) -> dict:
        raise NotImplementedError

    # -- helpers -----------------------------------------------------------------------------
    def _beta_public(self) -> float:
        # beta * (x / s)**c = (beta * s**-c) * x**c; a degenerate fit (steep c on a short curve)
        # can put this beyond float range: reported as inf (predictions use the scaled params)
        try:
            return float(math.exp(self._p["log_beta"] - self._p["c"] * math.log(self._x_scale)))
        except OverflowError:
            return math.inf


def power_law_ls(logx: np.ndarray, target: np.ndarray, extra: np.ndarray | None = None):
    """Solve ``target ~ log_beta + c*logx (+ alpha*extra)`` with ``c <= 0``, ``alpha >= 0``.

    Returns ``(log_beta, c, alpha, residual)``, residual = target - fit, shape ``(n,)``.
    """
    cols = [np.ones_like(logx), logx]
    lb, ub = [-np.inf, -np.inf], [np.inf, 0.0]
    if extra is not None:
        cols.append(extra)
        lb.append(0.0)
        ub.append(np.inf)
    a = np.stack(cols, axis=1)
    sol = lsq_linear(a, target, bounds=(lb, ub), method="bvls")
    coef = sol.x
    resid = target - a @ coef
    alpha = float(coef[2]) if extra is not None else 0.0
    return float(coef[0]), float(coef[1]), alpha, resid


#: ``select`` values: how the non-convex 1-D parameter (``eps_inf`` of M2/M4, ``gamma`` of M3)
#: is chosen. See :func:`validation_split` and the module docstring.
SELECT_MODES = {"M2": ("validate", "nearest", "global"), "M3": ("validate", "global"),
           "M4": ("validate", "nearest", "global")}


def validation_split(xn: np.ndarray, ratio: float, min_fit: int) -> np.ndarray | None:
    """Boolean mask (shape ``(n,)``) of the validation tail of a curve, or ``None``.

    The tail is every point with ``x > x_max / ratio`` (at least the last point), so a fit on
    the remaining head has to extrapolate by up to a factor ``ratio`` in ``x`` to reach it,
    as the final fit will have to beyond ``x_max``. ``None`` when fewer than ``min_fit``
    points would be left to fit (the caller then falls back to the training loss alone).

    Raises:
        LvsearchError: ``ratio <= 1``.
    """
    if not ratio > 1.0:
        raise LvsearchError(f"val_ratio must be > 1, got {ratio}",
                            fix="pass val_ratio=2.0 (validate on the last factor of 2 in x)")
    tail = xn > xn[-1] / ratio
    if not tail.any():
        tail[-1] = True
    if int((~tail).sum()) < min_fit:
        return None
    return tail


def pick_by_validation(grid: np.ndarray, score: Callable[[float], float],
                        refine: Callable[[int], tuple[float, float] | None]) -> tuple[float, float]:
    """The grid value with the lowest validation ``score``, refined by bounded Brent.

    ``refine(k)`` returns the bracket (in the same coordinate as ``grid``) around ``grid[k]``
    to polish in, or ``None``. Returns ``(value, score)``; ``score`` is ``inf`` where a fit
    fails or predicts non-finite losses, and such values are never picked over finite ones.
    """
    scores = np.array([score(float(v)) for v in grid])
    k = int(np.argmin(scores))
    best_v, best_s = float(grid[k]), float(scores[k])
    br = refine(k)
    if br is not None and math.isfinite(best_s) and br[1] > br[0]:
        res = minimize_scalar(score, bounds=br, method="bounded", options={"xatol": 1e-9 * max(1.0, abs(br[1]))})
        if math.isfinite(res.fun) and res.fun < best_s:
            best_v, best_s = float(res.x), float(res.fun)
    return best_v, best_s


def log_rmse(pred: np.ndarray, y: np.ndarray) -> float:
    """``sqrt(mean((log pred - log y)**2))``; ``inf`` if a prediction is not finite and > 0."""
    pred = np.asarray(pred, dtype=float)
    if not np.all(np.isfinite(pred)) or np.any(pred <= 0):
        return math.inf
    return float(np.sqrt(np.mean((np.log(pred) - np.log(y)) ** 2)))
