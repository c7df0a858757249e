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
from pathlib import Path

from lvsearch.errors import LvsearchError


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


def run_fit(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from lvsearch.scaling.fit import fit_curve, is_png, plot_fit

    if args.plot:
        from lvsearch.io import guard_output

        guard_output(args.plot, flag="--plot", inputs=[("CURVE", args.curve)], overwrite=args.overwrite, is_file=True,
                     own=is_png)
    fit = fit_curve(args.curve, models=args.models.split(","), x_key=args.x, y_key=args.y,
                    holdout_frac=args.holdout_frac, eps0=args.eps0, smooth=None if args.smooth == "none" else args.smooth,
                    predict_at=args.predict_at)
    x, n_fit = fit.x, fit.n_fit
    console = Console()
    if fit.rising:
        from lvsearch import ui

        ui.warn(f"{args.curve}: {args.y} rises over the fitted points ({fit.y[0]:g} → {fit.y[n_fit - 1]:g}); the scaling "
                "laws model a loss that falls with training, so these fits and extrapolations mean nothing")
    note = f", {fit.skipped} line(s) without {args.y!r} skipped" if fit.skipped else ""
    console.print(f"[bold]{args.curve}[/]: {x.size} points{note}; fit on the first {n_fit} "
                  f"({args.x} {x[0]:g} .. {x[n_fit - 1]:g}), {x.size - n_fit} held out")
    t = Table(title="fitted scaling laws (square-log loss; RMSE of log loss on the held-out tail)")
    for col in ("model", "law", "parameters", "train loss", "holdout RMSE"):
        t.add_column(col)
    for law in fit.laws:
        ptxt = ", ".join(f"{k}={v:.4g}" for k, v in law.params.items() if k not in ("model", "loss"))
        t.add_row(law.name, law.equation, ptxt, f"{law.params['loss']:.3g}", "-" if law.rmse is None else f"{law.rmse:.4f}")
    console.print(t)
    if fit.best is not None:
        console.print(f"lowest extrapolation RMSE: [bold]{fit.best.name}[/] ({fit.best.rmse:.4f})")
    if fit.predictions:
        pt = Table(title=f"predicted {args.y} (fits on the first {n_fit} points)")
        pt.add_column(args.x)
        for law in fit.laws:
            pt.add_column(law.name)
        for xp, by_name in fit.predictions.items():
            pt.add_row(f"{xp:g}", *[f"{by_name[law.name]:.5g}" for law in fit.laws])
        console.print(pt)
    if args.plot:
        plot_fit(fit, args.plot, x_key=args.x, y_key=args.y, title=Path(args.curve).name, predict_at=args.predict_at)
        console.print(f"plot written to {args.plot}")
    return 0
