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

Here: M1 and M3, the registry (:func:`make_estimator`), :func:`extrapolation_rmse` (the paper's
metric) and :func:`prediction_interval` (a bootstrap). M4 and M2 are in :mod:`lvsearch.scaling.m4`,
the base class and the shared fitting helpers in :mod:`lvsearch.scaling.fitting`, the curve check
and smoothing in :mod:`lvsearch.scaling.curves`. The pruning rules that use them are in
:mod:`lvsearch.scaling.halving`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any, Callable

import numpy as np
from scipy.optimize import minimize_scalar

from lvsearch.errors import LvsearchError
from lvsearch.scaling.curves import validate_curve
from lvsearch.scaling.fitting import (
    SELECT_MODES,
    Estimator,
    log_rmse,
    pick_by_validation,
    power_law_ls,
    validation_split,
)
from lvsearch.scaling.m4 import M2, M4

__all__ = [
    "ESTIMATORS",
    "M1",
    "M3",
    "make_estimator",
    "extrapolation_rmse",
    "prediction_interval",
]


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
        lb, c, _, r = power_law_ls(np.log(xn), np.log(y))
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
            tail (points with ``x > x_max / val_ratio``, see :func:`validation_split`); the law
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
        lb, c, _, r = power_law_ls(-np.log(1.0 / xn + gamma), logy)
        return 0.5 * float(np.mean(r**2)), lb, c

    def _fit(self, xn, y):
        if self.select not in SELECT_MODES["M3"]:
            raise LvsearchError(f"{self.name}: unknown select={self.select!r}",
                                fix=f"use one of {', '.join(SELECT_MODES['M3'])}")
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
            tail = validation_split(xn, self.val_ratio, self.n_params + 2)
            if tail is None:
                self.info_["notes"].append("too few points to hold out a validation tail: "
                                           "gamma chosen by training loss (select='global')")
        if tail is not None:
            xf, lyf, xt, yt = xn[~tail], logy[~tail], xn[tail], y[tail]

            def val_score(g):
                _, lb, c = self._profile(g, xf, lyf)
                return log_rmse(np.exp(lb - c * np.log(1.0 / xt + g)), yt)

            lg_grid = np.concatenate([[-np.inf], np.log(grid[1:])])
            best_lg, best_val = pick_by_validation(
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
    if key in SELECT_MODES and kwargs.get("select", SELECT_MODES[key][0]) not in SELECT_MODES[key]:
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
