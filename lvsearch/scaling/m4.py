"""M4, Eq. (4) of Alabdulmohsin, Neyshabur & Zhai 2022, and its special case M2 (Eq. 2, ``alpha = 0``):
the laws with a limit loss ``eps_inf``, fitted as described in :mod:`lvsearch.scaling.estimators`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq, minimize, minimize_scalar

from lvsearch.errors import LvsearchError
from lvsearch.scaling.fitting import (
    MARGIN_FRAC,
    SELECT_MODES,
    Estimator,
    log_rmse,
    pick_by_validation,
    power_law_ls,
    validation_split,
)

__all__ = ["M4", "M2"]


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
      ``x > x_max / val_ratio``, see :func:`validation_split`); the best value is refined by
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
        if self.select not in SELECT_MODES[key]:
            raise LvsearchError(f"{self.name}: unknown select={self.select!r}",
                                fix=f"use one of {', '.join(SELECT_MODES[key])}")
        ymin, ymax = float(y.min()), float(y.max())
        margin = MARGIN_FRAC * max(ymax - ymin, 1e-9 * ymax)
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
                return power_law_ls(lx, target, np.log(e0 - yy))
            fixed = self.alpha * np.log(e0 - yy) if uses0 else 0.0
            lb, c, _, r = power_law_ls(lx, target - fixed)
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
            tail = validation_split(xn, self.val_ratio, self.n_params + 2)
            if tail is None:
                self.info_["notes"].append("too few points to hold out a validation tail: "
                                           "eps_inf chosen by training loss (select='nearest')")
        if tail is not None:
            lxf, yf, xt, yt = logx[~tail], y[~tail], xn[tail], y[tail]

            def val_score(ei):
                p, _ = fit_at(ei, lxf, yf, profile0=self.scan_eps0)
                try:
                    return log_rmse(self._predict_p(p, xt), yt)
                except (ValueError, OverflowError, ZeroDivisionError):
                    return math.inf

            ei, val = pick_by_validation(grid, val_score, bracket)
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
