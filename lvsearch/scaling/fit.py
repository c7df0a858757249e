"""``lvsearch scaling fit``'s job: fit scaling-law estimators M1–M4 to one learning curve.

Reads ``x`` and ``y`` from a CSV (header row) or JSON-lines curve (e.g. ``retrain``'s
``curve.jsonl``: ``tokens`` / ``dev_mlm_loss``), fits each estimator on the first
``1 − holdout_frac`` of the points, and measures the extrapolation RMSE of log loss on the
held-out tail, the metric of Alabdulmohsin et al. 2022 ("Revisiting Neural Scaling Laws in
Language and Vision", NeurIPS; estimators in :mod:`lvsearch.scaling.estimators`).
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from lvsearch.errors import LvsearchError
from lvsearch.io import iter_jsonl


def read_curve(path: str | Path, xkey: str, ykey: str) -> tuple[list[float], list[float], int]:
    """Read ``(x, y, n_skipped)`` from a CSV or JSONL learning curve.

    Raises:
        LvsearchError: missing/empty/unreadable file, unknown column or key (the message lists
            the available ones), non-numeric value, fewer than 2 points, or x not strictly
            increasing.
    """
    path = Path(path)
    if not path.is_file():
        raise LvsearchError(f"learning curve not found: {path}", fix="check the path")
    from lvsearch.io import read_text

    try:
        text = read_text(path, what="learning curve")
    except OSError as e:
        raise LvsearchError(f"cannot read learning curve {path}: {e}", fix="pass a UTF-8 CSV or JSONL file") from None
    if not text.strip():
        raise LvsearchError(f"learning curve {path} is empty",
                            fix=f"write one point per line with the keys {xkey!r} and {ykey!r}")
    xs, ys, skipped = [], [], 0

    def num(v, key, where):
        try:
            out = float(v)
        except (TypeError, ValueError):
            out = math.nan
        if not math.isfinite(out):
            raise LvsearchError(f"{path}, {where}: {key!r} is {v!r}, not a finite number",
                                fix="fix or drop that line")
        return out

    if path.suffix.lower() == ".jsonl":
        keys: set[str] = set()
        for lineno, obj in iter_jsonl(path, text, fix="write one JSON object per line"):
            keys.update(obj)
            if ykey not in obj or obj[ykey] is None:
                skipped += 1
                continue
            if xkey not in obj:
                raise LvsearchError(f"{path}, line {lineno}: has {ykey!r} but no {xkey!r}; keys: "
                                    f"{', '.join(sorted(obj))}", fix="pass the right --x")
            xs.append(num(obj[xkey], xkey, f"line {lineno}"))
            ys.append(num(obj[ykey], ykey, f"line {lineno}"))
        for key, opt in ((xkey, "--x"), (ykey, "--y")):
            if key not in keys:
                raise LvsearchError(f"{path}: no line has the key {key!r}; available keys: "
                                    f"{', '.join(sorted(keys)) or '(none)'}", fix=f"pass {opt} KEY")
    elif path.suffix.lower() in (".csv", ".tsv", ".txt"):
        rows = list(csv.reader(text.splitlines(), delimiter="\t" if path.suffix.lower() == ".tsv" else ","))
        header = [h.strip() for h in rows[0]]
        for key, opt in ((xkey, "--x"), (ykey, "--y")):
            if key not in header:
                raise LvsearchError(f"{path}: no column {key!r}; available columns: {', '.join(header)}",
                                    fix=f"pass {opt} COLUMN")
        ix, iy = header.index(xkey), header.index(ykey)
        for lineno, row in enumerate(rows[1:], 2):
            if not any(c.strip() for c in row):
                continue
            if len(row) <= max(ix, iy):
                raise LvsearchError(f"{path}, line {lineno}: {len(row)} fields, expected {len(header)}",
                                    fix="fix the row")
            xs.append(num(row[ix].strip(), xkey, f"line {lineno}"))
            ys.append(num(row[iy].strip(), ykey, f"line {lineno}"))
    else:
        raise LvsearchError(f"{path}: unknown learning-curve format {path.suffix!r}",
                            fix="pass a .csv (header row) or .jsonl file")
    if len(xs) < 2:
        raise LvsearchError(f"learning curve {path} has {len(xs)} point(s) with {xkey!r} and {ykey!r}",
                            fix="log at least a few points (M1 needs 2, M4 needs 5)")
    for i in range(1, len(xs)):
        if xs[i] <= xs[i - 1]:
            raise LvsearchError(
                f"{path}: {xkey!r} is not strictly increasing ({xs[i - 1]:g} then {xs[i]:g}, point {i + 1})",
                fix="sort the file by x and merge duplicate x values")
    for key, vals, fix in ((xkey, xs, f"drop the {xkey} = 0 point (log-log fits need x > 0)"),
                           (ykey, ys, f"fit a positive quantity such as a loss (found {ykey} ≤ 0)")):
        bad = [v for v in vals if v <= 0]
        if bad:
            raise LvsearchError(f"{path}: {key!r} must be > 0 (found {bad[0]:g})", fix=fix)
    return xs, ys, skipped


def is_png(path) -> bool:
    """Whether ``path`` is a PNG image (what ``--plot`` writes; the only file it replaces)."""
    try:
        with open(path, "rb") as fh:
            return fh.read(8) == b"\x89PNG\r\n\x1a\n"
    except OSError:
        return False


@dataclass
class FittedLaw:
    """One estimator fitted to the curve.

    Attributes:
        name: ``M1`` … ``M4``; equation: its law as text; params: fitted parameters (with the
        training ``loss``); rmse: extrapolation RMSE of log y on the held-out tail (None
        without a tail); estimator: the fitted object (``predict(x)``).
    """

    name: str
    equation: str
    params: dict
    rmse: float | None
    estimator: Any


@dataclass
class CurveFit:
    """The result of :func:`fit_curve`: ``x``/``y`` as read (float64 arrays), ``n_fit`` points
    fitted, ``skipped`` lines without ``y``, the fitted laws, and ``predictions``
    (``{x: {name: y}}`` at the requested x)."""

    x: Any
    y: Any
    n_fit: int
    skipped: int
    laws: list[FittedLaw]
    predictions: dict = field(default_factory=dict)

    @property
    def rising(self) -> bool:
        """Whether the fitted part of the curve ends above where it starts: M1–M4 model a loss
        that falls with training, so their fits of a rising curve mean nothing."""
        return bool(self.y[self.n_fit - 1] > self.y[0])

    @property
    def best(self) -> FittedLaw | None:
        """The law with the lowest extrapolation RMSE (None without a held-out tail)."""
        scored = [law for law in self.laws if law.rmse is not None]
        return min(scored, key=lambda law: law.rmse) if scored else None


def fit_curve(curve: str | Path, *, models: Sequence[str], x_key: str, y_key: str, holdout_frac: float = 0.5,
              eps0: float | None = None, smooth: str | None = None, predict_at: Sequence[float] = ()) -> CurveFit:
    """Fit ``models`` (``M1`` … ``M4``) to the learning curve in ``curve``.

    Raises:
        LvsearchError: no models, ``holdout_frac`` outside [0, 1), a bad curve file
            (:func:`read_curve`), fewer points left to fit than a model has parameters,
            ``eps0`` not above every fitted y (M4), or a non-positive ``predict_at``.
    """
    import numpy as np

    from lvsearch.scaling import extrapolation_rmse, make_estimator

    names = [m.strip().upper() for m in models if m.strip()]
    if not names:
        raise LvsearchError("--models is empty", fix="pass e.g. --models M2,M4")
    if not 0.0 <= holdout_frac < 1.0:
        raise LvsearchError(f"--holdout-frac must be in [0, 1), got {holdout_frac}", fix="pass e.g. 0.5")
    xs, ys, skipped = read_curve(curve, x_key, y_key)
    x, y = np.array(xs), np.array(ys)
    n_test = int(round(holdout_frac * x.size))
    n_fit = x.size - n_test
    ests = {n: make_estimator(n, eps0=eps0, smooth=smooth) for n in names}
    need = max(e.n_params for e in ests.values())
    if n_fit < need:
        raise LvsearchError(
            f"{curve}: {n_fit} of {x.size} points left for fitting, but {need} are needed "
            f"for {', '.join(names)}",
            fix="lower --holdout-frac, log more points, or choose simpler --models (M1 needs 2)")
    if eps0 is not None and "M4" in ests and eps0 <= y[:n_fit].max():
        raise LvsearchError(f"--eps0 {eps0:g} must exceed every fitted loss in {curve} "
                            f"(max {y[:n_fit].max():g})",
                            fix="pass the random-guess loss (e.g. ln(vocab size) for MLM loss in nats)")
    for p in predict_at:
        if not (math.isfinite(p) and p > 0):
            raise LvsearchError(f"--predict-at {p:g}: must be a positive number", fix="pass training amounts > 0")
    laws = []
    for name, est in ests.items():
        params = est.fit(x[:n_fit], y[:n_fit])
        rmse = extrapolation_rmse(est, x[n_fit:], y[n_fit:]) if n_test else None
        laws.append(FittedLaw(name, est.equation, params, rmse, est))
    predictions = {xp: {law.name: float(law.estimator.predict(xp)) for law in laws} for xp in predict_at}
    return CurveFit(x=x, y=y, n_fit=n_fit, skipped=skipped, laws=laws, predictions=predictions)


def plot_fit(fit: CurveFit, path: str | Path, *, x_key: str, y_key: str, title: str, predict_at: Sequence[float] = ()) -> None:
    """A log-log plot of the curve (fitted and held-out points) and each fitted law, to ``path`` (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from lvsearch.io import save_figure

    x, y, n_fit = fit.x, fit.y, fit.n_fit
    hi = max([x[-1], *predict_at])
    grid = np.geomspace(x[0], hi * 1.05, 200)
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    ax.loglog(x[:n_fit], y[:n_fit], "ko", ms=3, label="fitted points")
    if n_fit < x.size:
        ax.loglog(x[n_fit:], y[n_fit:], "o", mfc="none", mec="k", ms=4, label="held out")
    for law in fit.laws:
        ax.loglog(grid, law.estimator.predict(grid), lw=1.3, label=law.name)
    ax.axvline(x[n_fit - 1], color="0.7", lw=0.8, ls="--")
    ax.set_xlabel(x_key)
    ax.set_ylabel(y_key)
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
