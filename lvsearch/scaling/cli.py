"""``lvsearch scaling ...``: fit scaling-law estimators M1-M4 to a learning curve; and the
arguments of ``lvsearch retrain --finalists K`` (:func:`add_finalist_arguments`,
:func:`run_finalists_args`), whose job is :func:`lvsearch.scaling.finalists.run_finalists`.

``lvsearch scaling fit CURVE.(csv|jsonl)`` reads ``x`` and ``y`` columns (CSV with a header
row) or keys (JSON lines, e.g. the ``curve.jsonl`` of ``lvsearch retrain``: ``--x tokens
--y dev_mlm_loss``), fits each estimator on the first ``1 - holdout_frac`` of the points,
and prints the fitted parameters, the extrapolation RMSE on the held-out tail (the paper's
metric) and predictions; ``--plot`` writes a log-log plot of data and fits.
JSONL lines that lack the y key (e.g. train-only log lines) are skipped and counted.
"""

from __future__ import annotations

import argparse
import csv
import math
from pathlib import Path

from lvsearch.errors import LvsearchError
from lvsearch.io import iter_jsonl


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("scaling", help="fit scaling laws (M1-M4) to learning curves",
                       description="Fit the learning-curve estimators M1-M4 of Alabdulmohsin, Neyshabur & Zhai "
                       "(2022) and extrapolate.")
    p.set_defaults(group_parser=p)
    ss = p.add_subparsers(dest="scaling_command", metavar="SUBCOMMAND")
    from lvsearch.argtypes import float_in, positive_float

    f = ss.add_parser("fit", help="fit M1-M4 to one learning curve and extrapolate",
                      description=__doc__.split("\n\n")[1].replace("``", ""))
    f.add_argument("curve", help="learning curve: .csv (header row) or .jsonl (one object per line)")
    f.add_argument("--x", default="tokens", help="column/key of the training amount (default: tokens)")
    f.add_argument("--y", default="loss", help="column/key of the loss (default: loss)")
    f.add_argument("--models", default="M1,M2,M3,M4", help="comma-separated estimators (default: all)")
    f.add_argument("--holdout-frac", type=float_in(0, 1, hi_open=True), default=0.5,
                   help="fraction of the last points held out to measure extrapolation (default 0.5; 0 = fit all)")
    f.add_argument("--predict-at", type=positive_float, nargs="+", default=[], metavar="X",
                   help="training amounts to predict the loss at")
    f.add_argument("--plot", metavar="OUT.png", help="write a log-log plot of data and fits (a new file, or a PNG "
                                                      "with --overwrite; never the curve itself)")
    f.add_argument("--overwrite", action="store_true", help="replace an existing --plot PNG")
    f.add_argument("--eps0", type=positive_float, default=None,
                   help="M4 random-guess loss eps_0 (start value, fitted); default: fitted from max(y)")
    f.add_argument("--smooth", choices=["none", "running-min", "moving-average"], default="none",
                   help="fit on a smoothed copy of y (a single noisy low point pins eps_inf)")
    f.set_defaults(func=run_fit)


def add_finalist_arguments(p: argparse.ArgumentParser) -> None:
    """The finalist-pruning options of ``lvsearch retrain`` (``--finalists K`` selects the mode)."""
    g = p.add_argument_group("finalist pruning (successive halving; see below)")
    g.add_argument("--finalists", type=int, metavar="K", help="prune the first K architectures of --arch (topk.json, "
                   "a JSON list of specs, or comma-separated names) by successive halving; --out is the job folder")
    g.add_argument("--budget", type=int, metavar="STEPS", help="full training budget per finalist (default: the recipe's train.steps)")
    g.add_argument("--eta", type=int, default=2, help="halving rate: keep the best 1/eta, multiply the budget by eta (default 2)")
    g.add_argument("--pruning", choices=["current-loss", "extrapolate"], default="current-loss",
                   help="rank by the current dev loss (default: measured to pick as well or better, docs/results.md) "
                        "or by the M4-extrapolated dev loss at the full budget")
    g.add_argument("--compare-full", action="store_true",
                   help="also train the cut finalists to the budget: does each rule's pick agree with training all?")
    g.add_argument("--n-boot", type=int, default=50, help="bootstrap refits per prediction interval (default 50)")
    from lvsearch.dispatch import add_dispatch_arguments

    add_dispatch_arguments(p, "each round's finalist trainings (with --finalists)")


def run_finalists_args(args: argparse.Namespace, overrides: list[str]) -> int:
    """``lvsearch retrain --finalists K``: the parsed ``retrain`` arguments as
    :class:`~lvsearch.scaling.finalists.FinalistOptions`, then
    :func:`~lvsearch.scaling.finalists.run_finalists`."""
    from lvsearch.scaling.finalists import FinalistOptions, run_finalists

    if not args.arch:
        raise LvsearchError("--finalists needs --arch (topk.json, a JSON list, or comma-separated names)",
                            fix="e.g. --arch runs/search/topk.json; re-run the same command to continue a job")
    from lvsearch.dispatch import options_from_args

    opts = FinalistOptions(finalists=args.finalists, budget=args.budget, eta=args.eta, pruning=args.pruning,
                           compare_full=args.compare_full, n_boot=args.n_boot)
    run_finalists(args.arch, args.config, args.data, args.out, opts, overrides=overrides, overwrite=args.overwrite,
                  device=args.device, dispatch=options_from_args(args))
    return 0


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
    bad = [v for v in xs if v <= 0] or [v for v in ys if v <= 0]
    if bad:
        raise LvsearchError(f"{path}: {xkey!r} and {ykey!r} must be > 0 (found {bad[0]:g})",
                            fix="drop the x = 0 point; fit a positive loss")
    return xs, ys, skipped


def _is_png(path) -> bool:
    """Whether ``path`` is a PNG image (what ``--plot`` writes; the only file it replaces)."""
    try:
        with open(path, "rb") as fh:
            return fh.read(8) == b"\x89PNG\r\n\x1a\n"
    except OSError:
        return False


def run_fit(args: argparse.Namespace) -> int:
    import numpy as np
    from rich.console import Console
    from rich.table import Table

    from lvsearch.scaling import extrapolation_rmse, make_estimator

    names = [m.strip().upper() for m in args.models.split(",") if m.strip()]
    if not names:
        raise LvsearchError("--models is empty", fix="pass e.g. --models M2,M4")
    if args.plot:
        from lvsearch.io import guard_output

        guard_output(args.plot, flag="--plot", inputs=[("CURVE", args.curve)], overwrite=args.overwrite, is_file=True,
                     own=_is_png)
    if not 0.0 <= args.holdout_frac < 1.0:
        raise LvsearchError(f"--holdout-frac must be in [0, 1), got {args.holdout_frac}", fix="pass e.g. 0.5")
    xs, ys, skipped = read_curve(args.curve, args.x, args.y)
    x, y = np.array(xs), np.array(ys)
    n_test = int(round(args.holdout_frac * x.size))
    n_fit = x.size - n_test
    opts = {"eps0": args.eps0, "smooth": None if args.smooth == "none" else args.smooth}
    ests = {n: make_estimator(n, **opts) for n in names}
    need = max(e.n_params for e in ests.values())
    if n_fit < need:
        raise LvsearchError(
            f"{args.curve}: {n_fit} of {x.size} points left for fitting, but {need} are needed "
            f"for {', '.join(names)}",
            fix="lower --holdout-frac, log more points, or choose simpler --models (M1 needs 2)")
    if args.eps0 is not None and "M4" in ests and args.eps0 <= y[:n_fit].max():
        raise LvsearchError(f"--eps0 {args.eps0:g} must exceed every fitted loss in {args.curve} "
                            f"(max {y[:n_fit].max():g})",
                            fix="pass the random-guess loss (e.g. ln(vocab size) for MLM loss in nats)")
    for p in args.predict_at:
        if not (math.isfinite(p) and p > 0):
            raise LvsearchError(f"--predict-at {p:g}: must be a positive number", fix="pass training amounts > 0")

    console = Console()
    note = f", {skipped} line(s) without {args.y!r} skipped" if skipped else ""
    console.print(f"[bold]{args.curve}[/]: {x.size} points{note}; fit on the first {n_fit} "
                  f"({args.x} {x[0]:g} .. {x[n_fit - 1]:g}), {n_test} held out")
    fitted, rows = {}, []
    for name, est in ests.items():
        params = est.fit(x[:n_fit], y[:n_fit])
        fitted[name] = est
        rmse = extrapolation_rmse(est, x[n_fit:], y[n_fit:]) if n_test else None
        rows.append((name, est.equation, params, rmse))
    t = Table(title="fitted scaling laws (square-log loss; RMSE of log loss on the held-out tail)")
    for col in ("model", "law", "parameters", "train loss", "holdout RMSE"):
        t.add_column(col)
    for name, eq, params, rmse in rows:
        ptxt = ", ".join(f"{k}={v:.4g}" for k, v in params.items() if k not in ("model", "loss"))
        t.add_row(name, eq, ptxt, f"{params['loss']:.3g}", "-" if rmse is None else f"{rmse:.4f}")
    console.print(t)
    if n_test:
        best = min((r for r in rows), key=lambda r: r[3])
        console.print(f"lowest extrapolation RMSE: [bold]{best[0]}[/] ({best[3]:.4f})")
    if args.predict_at:
        pt = Table(title=f"predicted {args.y} (fits on the first {n_fit} points)")
        pt.add_column(args.x)
        for name in fitted:
            pt.add_column(name)
        for xp in args.predict_at:
            pt.add_row(f"{xp:g}", *[f"{float(fitted[n].predict(xp)):.5g}" for n in fitted])
        console.print(pt)
    if args.plot:
        _plot(args, x, y, n_fit, fitted)
        console.print(f"plot written to {args.plot}")
    return 0


def _plot(args, x, y, n_fit, fitted) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from lvsearch.io import save_figure

    hi = max([x[-1], *args.predict_at])
    grid = np.geomspace(x[0], hi * 1.05, 200)
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    ax.loglog(x[:n_fit], y[:n_fit], "ko", ms=3, label="fitted points")
    if n_fit < x.size:
        ax.loglog(x[n_fit:], y[n_fit:], "o", mfc="none", mec="k", ms=4, label="held out")
    for name, est in fitted.items():
        ax.loglog(grid, est.predict(grid), lw=1.3, label=name)
    ax.axvline(x[n_fit - 1], color="0.7", lw=0.8, ls="--")
    ax.set_xlabel(args.x)
    ax.set_ylabel(args.y)
    ax.set_title(Path(args.curve).name)
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, args.plot, dpi=120)
