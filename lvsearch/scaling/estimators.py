"""Learning-curve estimators M1-M4, their extrapolation error and bootstrap intervals.

The four estimators of Alabdulmohsin, Neyshabur & Zhai, "Revisiting Neural Scaling Laws in
Language and Vision" (NeurIPS 2022), Section 2, all written with an exponent ``c < 0``:

=====  ==========================================================  =================
name   law                                                         paper
=====  ==========================================================  =================
M1     ``eps(x) = beta * x**c``                                    Eq. (1)
M2     ``eps(x) - eps_inf = beta * x**c``                          Eq. (2)
M3     ``eps(x) = beta * (1/x + gamma)**(-c)``                     Eq. (3)
M4     ``(eps(x) - eps_inf) / (eps_0 - eps(x))**alpha = beta*x**c``  Eq. (4)
=====  ==========================================================  =================

``x`` is the amount of training (seen examples or tokens; any positive unit) and ``eps`` the
loss or error in the units of the curve (nats, error rate, ...). ``eps_inf`` is the loss with
infinite training (``0 <= eps_inf < min(y)``), ``eps_0`` the loss of random guessing
(``eps_0 > max(y)``), ``alpha >= 0`` (``alpha = 0`` turns M4 into M2), ``beta > 0``, ``gamma >= 0``.

Fitting follows the paper: every model is written as ``g(eps) = f(x)`` and fitted by minimising
the square-log loss ``L = 1/2 * mean((log g(y) - log f(x))**2)`` over two blocks:

* ``(log beta, c, alpha)`` enter ``log g - log f`` linearly, so for fixed ``(eps_inf, eps_0)``
  they are solved in closed form by bounded linear least squares (:func:`scipy.optimize.lsq_linear`,
  ``c <= 0``, ``alpha >= 0``);
* ``eps_0`` is profiled out by bounded 1-D minimisation and ``eps_inf`` chosen as below (the
  training-loss modes polish ``(eps_inf, eps_0)`` with L-BFGS-B and the analytic gradient). The
  linear block is re-solved inside every evaluation (variable projection: block coordinate
  descent with the first block solved exactly), which converges in tens of steps where plain
  alternation zig-zags for thousands.

The loss is not convex in ``eps_inf`` and, on real curves, usually falls monotonically as
``eps_inf -> 0`` (the lowest points dominate ``log(y - eps_inf)``), so minimising it alone sends
M2/M4 towards a pure power law that extrapolates badly. By default (``select="validate"``) the
one non-convex parameter of each law (``eps_inf`` of M2/M4, ``gamma`` of M3) is therefore chosen
by extrapolation: fit the head of the curve on a grid of values, score each on the held-out tail
(``x > x_max / val_ratio``), refit all points with the best value. ``select="nearest"`` (first
local minimum of the training loss below ``min(y)``) and ``"global"`` (lowest training loss) keep
the training-loss choice. ``x`` is divided by its first value before fitting (fitted numbers are
reported back in the caller's units), so multiplying ``x`` by a constant changes ``beta`` /
``gamma`` but not the predictions. Benchmark numbers: docs/results.md.

Known pitfall: ``eps_inf`` is bounded by the *lowest* observed loss, so one noisy low point pins
it (and with it the whole extrapolation). Pass ``smooth="moving-average"`` (centred window) to
fit on a smoothed curve, or ``smooth="running-min"`` to make a noisy curve monotone.

Also here: :func:`extrapolation_rmse` (the paper's metric) and :func:`prediction_interval` (a
bootstrap). The pruning rules that use them are in :mod:`lvsearch.scaling.halving`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Mapping, Sequence

import numpy as np
from scipy.optimize import brentq, lsq_linear, minimize, minimize_scalar

from lvsearch.errors import LvsearchError

__all__ = [
    "ESTIMATORS",
    "Estimator",
    "M1",
    "M2",
    "M3",
    "M4",
    "make_estimator",
    "validate_curve",
    "smooth_curve",
    "extrapolation_rmse",
    "prediction_interval",
]

#: Relative distance kept between eps_inf and min(y), and between eps_0 and max(y), as a
#: fraction of the loss range of the curve (log(y - eps_inf) is -inf at eps_inf = min(y)).
_MARGIN_FRAC = 1e-3


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


def _power_law_ls(logx: np.ndarray, target: np.ndarray, extra: np.ndarray | None = None):
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
#: is chosen. See :func:`_validation_split` and the module docstring.
_SELECT = {"M2": ("validate", "nearest", "global"), "M3": ("validate", "global"),
           "M4": ("validate", "nearest", "global")}


def _validation_split(xn: np.ndarray, ratio: float, min_fit: int) -> np.ndarray | None:
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


def _pick_by_validation(grid: np.ndarray, score: Callable[[float], float],
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


def _log_rmse(pred: np.ndarray, y: np.ndarray) -> float:
    """``sqrt(mean((log pred - log y)**2))``; ``inf`` if a prediction is not finite and > 0."""
    pred = np.asarray(pred, dtype=float)
    if not np.all(np.isfinite(pred)) or np.any(pred <= 0):
        return math.inf
    return float(np.sqrt(np.mean((np.log(pred) - np.log(y)) ** 2)))


@dataclass
class M1(Estimator):
    """M1, Eq. (1): ``eps(x) = beta * x**c`` (pure power law, ``c <= 0``, ``beta > 0``).

    Fitted in closed form: ``log y = log beta + c log x`` by bounded least squares.
    Parameters: ``beta`` (loss unit / x unit**c), ``c``.
    """

    name = "M1"
    equation = "eps = beta * x^c"
    n_params = 2

    def _fit(self, xn, y):
        lb, c, _, r = _power_law_ls(np.log(xn), np.log(y))
        self.info_["iterations"] = 1
        return {"log_beta": lb, "c": c}, 0.5 * float(np.mean(r**2))

    def _predict(self, xn):
        return np.exp(self._p["log_beta"] + self._p["c"] * np.log(xn))

    def _public_params(self):
        return {"beta": self._beta_public(), "c": self._p["c"]}


@dataclass
class M3(Estimator):
    """M3, Eq. (3): ``eps(x) = beta * (1/x + gamma)**(-c)`` (``c <= 0``, ``gamma >= 0``).

    For fixed ``gamma``, ``log y = log beta - c log(1/x + gamma)`` is linear and solved by
    bounded least squares (square-log loss, as for every estimator here). ``gamma`` is 1-D and
    scanned on a grid (``gamma = 0`` plus 49 log-spaced values from ``1e-4 / x_max`` to
    ``100 / x_0``), then refined by bounded Brent (:func:`scipy.optimize.minimize_scalar`) in
    ``log gamma``. ``gamma = 0`` is M1. Parameters: ``beta``, ``c``, ``gamma`` (unit 1 / x
    unit); the limit ``x -> inf`` is ``beta * gamma**(-c)``.

    Args:
        select: how ``gamma`` is chosen. ``"validate"`` (default): the grid value (refined)
            whose fit on the head of the curve extrapolates best, in log-RMSE, to the held-out
            tail (points with ``x > x_max / val_ratio``, see :func:`_validation_split`); the law
            is then refitted on all points with that ``gamma``. This is the same selection rule
            as :class:`M4` uses for ``eps_inf``, so the estimators are compared on equal terms.
            ``"global"``: the lowest training loss over all points (the paper's criterion).
            Curves too short to hold out a tail (fewer than 5 points left) use ``"global"``;
            ``info_["notes"]`` says so.
        val_ratio: extrapolation factor of the validation tail (> 1; default 2.0).

    Raises (from ``fit``):
        LvsearchError: unknown ``select``, ``val_ratio <= 1``, or see :meth:`Estimator.fit`.
    """

    select: str = "validate"
    val_ratio: float = 2.0

    name = "M3"
    equation = "eps = beta * (1/x + gamma)^(-c)"
    n_params = 3

    def _profile(self, gamma: float, xn, logy):
        lb, c, _, r = _power_law_ls(-np.log(1.0 / xn + gamma), logy)
        return 0.5 * float(np.mean(r**2)), lb, c

    def _fit(self, xn, y):
        if self.select not in _SELECT["M3"]:
            raise LvsearchError(f"{self.name}: unknown select={self.select!r}",
                                fix=f"use one of {', '.join(_SELECT['M3'])}")
        logy = np.log(y)
        # gamma is compared with 1/x, which after normalisation lies in [1/x_max, 1].
        grid = np.concatenate([[0.0], np.logspace(math.log10(1.0 / xn[-1]) - 4, 2, 49)])

        def bracket(k):  # in log(gamma), between the neighbours of grid[k]; none for gamma = 0
            if k == 0:
                return None
            lo = math.log(grid[k - 1]) if k > 1 else math.log(grid[1]) - 2.0
            return lo, math.log(grid[min(k + 1, grid.size - 1)])

        tail = None
        if self.select == "validate":
            tail = _validation_split(xn, self.val_ratio, self.n_params + 2)
            if tail is None:
                self.info_["notes"].append("too few points to hold out a validation tail: "
                                           "gamma chosen by training loss (select='global')")
        if tail is not None:
            xf, lyf, xt, yt = xn[~tail], logy[~tail], xn[tail], y[tail]

            def val_score(g):
                _, lb, c = self._profile(g, xf, lyf)
                return _log_rmse(np.exp(lb - c * np.log(1.0 / xt + g)), yt)

            lg_grid = np.concatenate([[-np.inf], np.log(grid[1:])])
            best_lg, best_val = _pick_by_validation(
                lg_grid, lambda t: val_score(math.exp(t)), bracket)
            best_g = math.exp(best_lg) if math.isfinite(best_lg) else 0.0
            self.info_.update(val_points=int(tail.sum()), val_rmse=best_val)
        else:
            losses = [self._profile(g, xn, logy)[0] for g in grid]
            k = int(np.argmin(losses))
            best_g, best_loss = float(grid[k]), float(losses[k])
            br = bracket(k)
            if br is not None:  # refine in log(gamma) between the neighbours of the best grid point
                res = minimize_scalar(lambda t: self._profile(math.exp(t), xn, logy)[0],
                                      bounds=br, method="bounded", options={"xatol": 1e-6})
                if res.fun < best_loss:
                    best_g, best_loss = float(math.exp(res.x)), float(res.fun)
        loss, lb, c = self._profile(best_g, xn, logy)
        self.info_["iterations"] = int(grid.size)
        self.info_["gamma_select"] = "validate" if tail is not None else "global"
        return {"log_beta": lb, "c": c, "gamma": best_g}, loss

    def _predict(self, xn):
        p = self._p
        return np.exp(p["log_beta"] - p["c"] * np.log(1.0 / xn + p["gamma"]))

    def _public_params(self):
        # beta (s/x + gamma)^-c = beta s^-c (1/x + gamma/s)^-c
        return {"beta": self._beta_public(), "c": self._p["c"], "gamma": self._p["gamma"] / self._x_scale}


@dataclass
class M4(Estimator):
    """M4, Eq. (4): ``(eps(x) - eps_inf) / (eps_0 - eps(x))**alpha = beta * x**c``.

    Constraints: ``alpha >= 0``, ``beta > 0``, ``c <= 0``, ``0 <= eps_inf < min(y)``,
    ``max(y) < eps_0`` (``<= eps0`` when a random-guess loss ``eps0`` is given). ``alpha = 0``
    is M2. Units: ``eps_inf``, ``eps_0`` in loss units; ``alpha``, ``c`` dimensionless.

    Fitting (module docstring): for fixed ``(eps_inf, eps_0)`` the block ``(log beta, c,
    alpha)`` is solved in closed form by bounded least squares on
    ``log(y - eps_inf) = log beta + c log x + alpha log(eps_0 - y)`` (square-log loss);
    ``eps_0`` is then profiled out by bounded 1-D minimisation of the same loss
    (:func:`scipy.optimize.minimize_scalar`, or L-BFGS-B with the analytic gradient in the
    ``"nearest"``/``"global"`` modes). What remains is the choice of ``eps_inf``, on which the
    loss is not convex (``select``):

    * ``"validate"`` (default): ``eps_inf`` is scanned on a grid log-spaced in the gap
      ``min(y) - eps_inf`` (``n_grid`` points from ``1e-3`` of the loss range down to
      ``eps_inf = 0``); at each value the law is fitted to the head of the curve and scored by
      the log-RMSE of its extrapolation to the held-out tail (points with
      ``x > x_max / val_ratio``, see :func:`_validation_split`); the best value is refined by
      bounded Brent between its grid neighbours, and the law is refitted on *all* points with
      ``eps_inf`` fixed there. Why: on the paper's benchmark the training loss usually
      decreases monotonically as ``eps_inf -> 0`` (points with ``y`` close to ``eps_inf``
      dominate ``log(y - eps_inf)``), so minimising it drives ``eps_inf`` to 0 and M4 to a
      plain power law that extrapolates poorly; choosing ``eps_inf`` by extrapolation on held-
      out data (the paper's own criterion for judging estimators) does not have that bias.
      Curves too short to hold out a tail (fewer than ``n_params + 2`` points left) fall back
      to ``"nearest"``; ``info_["notes"]`` says so.
    * ``"nearest"``: the first local minimum of the training loss met when scanning down from
      ``min(y)`` (where iterations started at ``eps_inf = min(y) - 1e-3`` settle), polished by
      L-BFGS-B within its basin.
    * ``"global"``: the lowest training loss on the scan, polished the same way.

    Prediction solves ``w = beta x**c (eps_0 - eps_inf - w)**alpha`` for
    ``w in (0, eps_0 - eps_inf)`` (left side minus right side is increasing in ``w``) with
    Brent's method, and returns ``eps_inf + w``.

    Args:
        eps0: random-guess loss ``eps_0`` in loss units (``1.0`` or ``1 - 1/n_classes`` for an
            error rate, ``log(vocab)`` for a loss in nats, ``1.0`` for curves rescaled to start
            at 0.999). Must exceed ``max(y)``. With ``fit_eps0=True`` it is the *upper bound*
            of the fitted ``eps_0``, which lies in ``[max(y) + margin, eps0]``: a curve may
            saturate below the random-guess loss (early plateau), never above it. ``None``:
            ``eps_0`` is fitted in ``[max(y) + margin, max(y) + 1.1 * (max(y) - min(y))]``.
        fit_eps0: fit ``eps_0`` (see ``eps0``) or keep it fixed at ``eps0``.
        alpha: ``None`` fits ``alpha``; a number fixes it (``0.0`` gives M2).
        select: ``"validate"`` (default), ``"nearest"`` or ``"global"`` (above).
        val_ratio: extrapolation factor of the validation tail (> 1; default 2.0, about the
            horizon of the paper's benchmark, whose test points reach ~2x the last fitted x).
        n_grid: points of the ``eps_inf`` scan.
        scan_eps0: when ``eps_0`` is fitted, also profile it at every scan point (better
            choices of ``eps_inf``, slower), else scan with ``eps_0`` at its start value and
            fit it only for the final ``eps_inf``.

    Raises (from ``fit``):
        LvsearchError: ``eps0 <= max(y)``, ``fit_eps0=False`` without ``eps0``, unknown
            ``select``, ``val_ratio <= 1``, too few points (4, or 5 with a fitted ``eps_0``; 3
            for M2), or an invalid curve.
    """

    eps0: float | None = None
    fit_eps0: bool = True
    alpha: float | None = None
    select: str = "validate"
    val_ratio: float = 2.0
    n_grid: int = 48
    scan_eps0: bool = True

    name = "M4"
    equation = "(eps - eps_inf) / (eps_0 - eps)^alpha = beta * x^c"

    @staticmethod
    def _select(phi: np.ndarray, mode: str) -> int:
        """Index of the grid point (ordered from eps_inf ~ min(y) down to 0) to polish."""
        if mode == "global":
            return int(np.argmin(phi))
        for i in range(phi.size - 1):
            if phi[i] <= phi[i + 1] and (i == 0 or phi[i] <= phi[i - 1]):
                return i
        return phi.size - 1

    @property
    def n_params(self) -> int:  # type: ignore[override]
        n = 3  # log beta, c, eps_inf
        if self.alpha is None:
            n += 1
        if self.alpha != 0.0 and self.fit_eps0:
            n += 1
        return n

    def _uses_eps0(self) -> bool:
        return self.alpha != 0.0

    def _fit(self, xn, y):
        key = "M2" if self.alpha == 0.0 else "M4"
        if self.select not in _SELECT[key]:
            raise LvsearchError(f"{self.name}: unknown select={self.select!r}",
                                fix=f"use one of {', '.join(_SELECT[key])}")
        ymin, ymax = float(y.min()), float(y.max())
        margin = _MARGIN_FRAC * max(ymax - ymin, 1e-9 * ymax)
        inf_hi = ymin - margin
        uses0 = self._uses_eps0()
        fit0 = uses0 and self.fit_eps0
        if uses0:
            if self.eps0 is None:
                if not self.fit_eps0:
                    raise LvsearchError(f"{self.name}: fit_eps0=False needs a value for eps0",
                                        fix="pass eps0 (the random-guess loss), or let it be fitted")
                e0_start = ymax + 0.1 * (ymax - ymin) + margin
                e0_hi = e0_start + (ymax - ymin)
            else:
                if not math.isfinite(self.eps0) or self.eps0 <= ymax:
                    raise LvsearchError(
                        f"{self.name}: eps0 = {self.eps0:g} must be larger than every observed loss "
                        f"(max {ymax:g})",
                        fix="pass the random-guess loss (e.g. log(vocab size) in nats, 1.0 for an error rate)",
                    )
                # the random-guess loss bounds eps_0 from above when it is fitted
                e0_start = e0_hi = max(float(self.eps0), ymax + margin) if self.fit_eps0 else float(self.eps0)
        else:
            e0_start = e0_hi = math.inf
        e0_lo = ymax + margin if fit0 else e0_start
        logx = np.log(xn)

        def linear_block(ei, e0, lx=logx, yy=y):
            target = np.log(yy - ei)
            if self.alpha is None:
                return _power_law_ls(lx, target, np.log(e0 - yy))
            fixed = self.alpha * np.log(e0 - yy) if uses0 else 0.0
            lb, c, _, r = _power_law_ls(lx, target - fixed)
            return lb, c, float(self.alpha), r

        def fit_at(ei, lx=logx, yy=y, profile0=True):
            """Fit with eps_inf fixed (eps_0 profiled by bounded Brent if fitted): (params, loss)."""
            e0 = e0_start
            if fit0 and profile0 and e0_hi > e0_lo:
                res = minimize_scalar(
                    lambda t: 0.5 * float(np.mean(linear_block(ei, t, lx, yy)[3] ** 2)),
                    bounds=(e0_lo, e0_hi), method="bounded",
                    options={"xatol": 1e-9 * max(1.0, abs(e0_hi))})
                e0 = float(res.x)
            lb, c, a, r = linear_block(ei, e0, lx, yy)
            p = {"log_beta": lb, "c": c, "alpha": a, "eps_inf": float(ei),
                 "eps0": float(e0) if uses0 else math.inf}
            return p, 0.5 * float(np.mean(r**2))

        # eps_inf grid, log-spaced in the gap min(y) - eps_inf, from ~min(y) down to 0
        gaps = np.geomspace(margin, ymin, self.n_grid) if ymin > margin else np.array([ymin])
        grid = np.clip(ymin - gaps, 0.0, inf_hi)
        grid[-1] = 0.0
        self.info_["eps0_fitted"] = fit0

        def bracket(k):  # the grid is decreasing: polish between the two neighbours of grid[k]
            return float(grid[min(k + 1, grid.size - 1)]), float(grid[max(k - 1, 0)])

        tail = None
        if self.select == "validate":
            tail = _validation_split(xn, self.val_ratio, self.n_params + 2)
            if tail is None:
                self.info_["notes"].append("too few points to hold out a validation tail: "
                                           "eps_inf chosen by training loss (select='nearest')")
        if tail is not None:
            lxf, yf, xt, yt = logx[~tail], y[~tail], xn[tail], y[tail]

            def val_score(ei):
                p, _ = fit_at(ei, lxf, yf, profile0=self.scan_eps0)
                try:
                    return _log_rmse(self._predict_p(p, xt), yt)
                except (ValueError, OverflowError, ZeroDivisionError):
                    return math.inf

            ei, val = _pick_by_validation(grid, val_score, bracket)
            p, loss = fit_at(min(max(ei, 0.0), inf_hi))
            self.info_.update(eps_inf_select="validate", val_points=int(tail.sum()), val_rmse=val,
                              iterations=int(grid.size))
            return p, loss
        mode = "global" if self.select == "global" else "nearest"
        return self._fit_by_training_loss(xn, y, grid, bracket, linear_block, fit_at,
                                          (e0_start, e0_lo, e0_hi, fit0, uses0), mode)

    def _fit_by_training_loss(self, xn, y, grid, bracket, linear_block, fit_at, e0cfg, mode):
        """``mode="nearest"``/``"global"``: pick the basin on the training loss, polish it."""
        e0_start, e0_lo, e0_hi, fit0, uses0 = e0cfg
        logx = np.log(xn)

        def profiled(v):
            # Variable projection: the linear block is solved exactly for these (eps_inf, eps_0);
            # by the envelope theorem the gradient is the partial gradient at that solution.
            ei, e0 = v[0], (v[1] if fit0 else e0_start)
            lb, c, a, _ = linear_block(ei, e0)
            d_inf = y - ei
            r = np.log(d_inf) - lb - c * logx
            if uses0:
                d0 = e0 - y
                r = r - a * np.log(d0)
            loss = 0.5 * float(np.mean(r**2))
            g_inf = -float(np.mean(r / d_inf))
            if fit0:
                return loss, np.array([g_inf, -a * float(np.mean(r / d0))])
            return loss, np.array([g_inf])

        e0_at = np.full(grid.size, e0_start)
        phi = np.empty(grid.size)
        for i, g in enumerate(grid):
            p, phi[i] = fit_at(float(g), profile0=self.scan_eps0)
            e0_at[i] = p["eps0"] if fit0 else e0_start
        k = self._select(phi, mode)
        # Polish (eps_inf, eps_0) with L-BFGS-B; eps_inf stays inside the basin of grid[k]
        # (between its neighbours) so the step cannot jump to another local minimum.
        v0 = np.array([grid[k]] + ([e0_at[k]] if fit0 else []))
        bounds = [bracket(k)] + ([(e0_lo, e0_hi)] if fit0 else [])
        res = minimize(profiled, v0, jac=True, method="L-BFGS-B", bounds=bounds,
                       options={"maxiter": self.max_iter, "ftol": self.tol, "gtol": 1e-12})
        v = np.asarray(res.x, dtype=float) if res.fun <= phi[k] else v0
        e0 = float(v[1]) if fit0 else e0_start
        lb, c, a, r = linear_block(float(v[0]), e0)
        self.info_.update(iterations=int(grid.size + res.nit), eps_inf_select=mode)
        return ({"log_beta": lb, "c": c, "alpha": a, "eps_inf": float(v[0]), "eps0": float(e0)},
                0.5 * float(np.mean(r**2)))

    def _predict(self, xn):
        return self._predict_p(self._p, xn)

    @staticmethod
    def _predict_p(p: dict, xn: np.ndarray) -> np.ndarray:
        """Eq. (4) solved for eps at normalised ``xn`` with parameters ``p`` (internal units)."""
        xn = np.asarray(xn, dtype=float)
        logf = p["log_beta"] + p["c"] * np.log(xn)
        f = np.exp(logf)
        a = p["alpha"]
        if a < 1e-12:
            return p["eps_inf"] + f
        b = p["eps0"] - p["eps_inf"]
        out = np.empty_like(f, dtype=float)
        lo, hi = 1e-300, 1.0 - 1e-16
        for i, lf in np.ndenumerate(logf):
            # With t = w / b, solve log t - alpha log(1 - t) = log f + (alpha - 1) log b: the left
            # side increases from -inf to +inf on (0, 1), so Brent's method on a bracket is safe
            # (and, in log form, free of overflow for large alpha or eps_0).
            k = float(lf) + (a - 1.0) * math.log(b)
            if math.isnan(k) or not math.isfinite(a):
                raise ArithmeticError(f"M4 prediction undefined for parameters {p} (degenerate fit)")
            h = lambda t, k=k: math.log(t) - a * math.log1p(-t) - k  # noqa: E731
            if h(lo) >= 0:
                t = lo
            elif h(hi) <= 0:
                t = hi
            else:
                try:
                    t = brentq(h, lo, hi, xtol=1e-300, rtol=1e-14, maxiter=500)
                except RuntimeError as e:  # no convergence: report as a failed fit, not a crash
                    raise ArithmeticError(f"M4 prediction did not converge ({e})") from None
            out[i] = t * b
        return p["eps_inf"] + out

    def _public_params(self):
        p = self._p
        d = {"beta": self._beta_public(), "c": p["c"], "eps_inf": p["eps_inf"]}
        if self._uses_eps0():
            d.update(alpha=p["alpha"], eps0=p["eps0"])
        return d


@dataclass
class M2(M4):
    """M2, Eq. (2): ``eps(x) - eps_inf = beta * x**c`` (M4 with ``alpha = 0``).

    Fitted exactly as :class:`M4` (``eps_0`` plays no role): ``(log beta, c)`` in closed form
    for each ``eps_inf``; ``eps_inf`` chosen by ``select`` (default ``"validate"``: the value
    whose fit on the head of the curve extrapolates best to the held-out tail, then refitted on
    all points; ``"nearest"``/``"global"``: by training loss), with the same grid and
    ``val_ratio``, so M2 and M4 are compared on equal terms.
    Parameters: ``beta``, ``c``, ``eps_inf`` (loss units).
    """

    alpha: float | None = 0.0
    name = "M2"
    equation = "eps - eps_inf = beta * x^c"

    def __post_init__(self):
        if self.alpha != 0.0:
            raise LvsearchError("M2 has alpha = 0 by definition", fix="use M4 to fit alpha")


#: constructor options that only some estimators have (dropped by make_estimator for the rest)
_OPTIONAL_KWARGS = ("eps0", "fit_eps0", "scan_eps0", "n_grid", "select", "val_ratio")

#: name -> estimator class
ESTIMATORS: dict[str, type[Estimator]] = {"M1": M1, "M2": M2, "M3": M3, "M4": M4}


def make_estimator(name: str, **kwargs) -> Estimator:
    """A new estimator by name (``"M1"`` ... ``"M4"``, case-insensitive).

    ``kwargs`` go to the constructor. Options that only some estimators have (``eps0``,
    ``fit_eps0``, ``scan_eps0``, ``n_grid`` of M4; ``select``, ``val_ratio`` of M2-M4) are
    dropped for the ones that lack them, so one option set can configure all four; ``select``
    values an estimator does not know (M3 has no ``"nearest"``) are mapped to its
    training-loss mode (``"global"``).

    Raises:
        LvsearchError: unknown name.
    """
    key = name.strip().upper()
    if key not in ESTIMATORS:
        raise LvsearchError(f"unknown scaling-law estimator {name!r}",
                            fix=f"use one of {', '.join(ESTIMATORS)}")
    cls = ESTIMATORS[key]
    accepted = {f.name for f in fields(cls) if f.init}
    kwargs = {k: v for k, v in kwargs.items() if k in accepted or k not in _OPTIONAL_KWARGS}
    if key in _SELECT and kwargs.get("select", _SELECT[key][0]) not in _SELECT[key]:
        if kwargs["select"] in ("nearest", "global"):
            kwargs["select"] = "global"
    return cls(**kwargs)


def extrapolation_rmse(model: Estimator, x_test: Any, y_test: Any) -> float:
    """The paper's extrapolation error: ``sqrt(mean((log yhat - log y)**2))``.

    Args:
        model: a fitted estimator.
        x_test: held-out training amounts, shape ``(m,)``, > 0.
        y_test: held-out losses, shape ``(m,)``, > 0.

    Returns:
        RMSE of natural-log losses (dimensionless; 0.01 ~ 1% relative error).

    Raises:
        LvsearchError: empty or invalid test points, or an unfitted model.
    """
    xt = np.asarray(x_test, dtype=float).reshape(-1)
    yt = np.asarray(y_test, dtype=float).reshape(-1)
    if xt.size == 0 or xt.shape != yt.shape:
        raise LvsearchError("extrapolation_rmse: need the same number (>= 1) of x and y test points",
                            fix="hold out at least one point")
    if np.any(~np.isfinite(yt)) or np.any(yt <= 0):
        raise LvsearchError("extrapolation_rmse: test losses must be finite and > 0",
                            fix="drop non-positive or missing losses")
    pred = model.predict(xt)
    return float(np.sqrt(np.mean((np.log(pred) - np.log(yt)) ** 2)))


def prediction_interval(
    model_factory: Callable[[], Estimator],
    x: Any,
    y: Any,
    x_new: Any,
    n_boot: int = 100,
    seed: int = 0,
    *,
    level: float = 0.9,
    method: str = "residuals",
) -> dict:
    """Bootstrap interval for predicted losses at ``x_new``.

    ``method="residuals"``: fit once, resample the log-space residuals
    ``log y - log yhat`` with replacement, refit on ``yhat * exp(r*)``. ``method="points"``:
    refit on the distinct points of a bootstrap draw of indices (kept sorted; the first and
    last points are always kept so the fitted range does not shrink). Refits that fail (too
    few distinct points, degenerate curve) are skipped and counted.

    Args:
        model_factory: returns a fresh, unfitted estimator (e.g. ``lambda: M4(eps0=1.0)``).
        x, y: the curve, shape ``(n,)`` (see :func:`validate_curve`).
        x_new: where to predict, shape ``(m,)`` or scalar, in the unit of ``x``.
        n_boot: bootstrap refits.
        seed: seed of the resampling (numpy ``default_rng``).
        level: central coverage of the interval (0.9 -> 5th and 95th percentiles).
        method: ``"residuals"`` or ``"points"``.

    Returns:
        dict with ``"x"`` (shape ``(m,)``), ``"pred"`` (point prediction of the fit on all
        data), ``"lo"``, ``"hi"`` (interval bounds, loss units), ``"n_ok"`` (successful
        refits), ``"n_failed"``, ``"level"``, ``"method"``.

    Raises:
        LvsearchError: invalid curve, unknown method, ``level`` outside (0, 1), or the fit on
            all data fails.
    """
    if method not in ("residuals", "points"):
        raise LvsearchError(f"unknown bootstrap method {method!r}", fix="use 'residuals' or 'points'")
    if not 0.0 < level < 1.0:
        raise LvsearchError(f"level must be in (0, 1), got {level}", fix="pass e.g. level=0.9")
    base = model_factory()
    xa, ya = validate_curve(x, y, source="prediction_interval", min_points=base.n_params)
    xn = np.atleast_1d(np.asarray(x_new, dtype=float))
    base.fit(xa, ya)
    pred = np.atleast_1d(base.predict(xn))
    yhat = base.predict(xa)
    resid = np.log(ya) - np.log(yhat)
    rng = np.random.default_rng(seed)
    samples, failed = [], 0
    for _ in range(int(n_boot)):
        m = model_factory()
        try:
            if method == "residuals":
                yb = yhat * np.exp(rng.choice(resid, size=resid.size, replace=True))
                m.fit(xa, yb)
            else:
                idx = np.unique(np.concatenate([[0, xa.size - 1], rng.integers(0, xa.size, xa.size)]))
                m.fit(xa[idx], ya[idx])
            samples.append(np.atleast_1d(m.predict(xn)))
        except (LvsearchError, ValueError, ArithmeticError):
            failed += 1
    if samples:
        s = np.stack(samples)
        q = (1.0 - level) / 2.0
        lo, hi = np.quantile(s, q, axis=0), np.quantile(s, 1.0 - q, axis=0)
        lo, hi = np.minimum(lo, pred), np.maximum(hi, pred)
    else:
        lo, hi = pred.copy(), pred.copy()
    return {"x": xn, "pred": pred, "lo": lo, "hi": hi, "n_ok": len(samples), "n_failed": failed,
            "level": level, "method": method}
