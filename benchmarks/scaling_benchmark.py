"""Extrapolation benchmark of the scaling-law estimators M1-M4 on the paper's 92 curves.

Data: ``benchmark.vision.csv`` and ``benchmark.lang.csv`` from Alabdulmohsin et al. (2022),
columns ``Domain, Task, Model, Seen Examples, Loss, Training``; a curve is one
``(Domain, Task, Model)``. For every curve, each estimator is fitted on the ``Training = 1``
rows and scored by the paper's metric, RMSE of ``log(prediction) - log(loss)``, on the
``Training = 0`` rows.

Data cleaning (the files as published): rows are not sorted by x (they are sorted here); the
language-modelling rows appear 4 times (exact duplicates are dropped); should distinct rows
share an x, their losses are averaged (counted in the output).

Where the data is looked for, first match wins:
  1. ``--data DIR``;
  2. ``<repo>/../shared/data/scaling`` (``<repo>`` = the folder above ``benchmarks/``);
  3. ``$LVSEARCH_SHARED_DATA/scaling``.

Output: ``benchmarks/results/scaling.json`` (``--out`` to change): per-curve parameters and
RMSE, and per domain the fraction of curves on which each estimator is best (strictly lowest
RMSE) or tied-best (within ``--tie-tol`` of the lowest) and its median RMSE.

Usage: ``python benchmarks/scaling_benchmark.py [--data DIR] [--jobs 2]``
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import sys
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(REPO))

from lvsearch.errors import LvsearchError  # noqa: E402
from lvsearch.io import atomic_write_json  # noqa: E402
from lvsearch.scaling import extrapolation_rmse, make_estimator  # noqa: E402

FILES = ("benchmark.vision.csv", "benchmark.lang.csv")
MODELS = ("M1", "M2", "M3", "M4")
DOMAIN_NAMES = {"IC": "image classification", "NMT": "neural machine translation",
                "LM": "language modelling", "BB": "BIG-Bench"}


def find_data_dir(explicit: str | None = None) -> Path | None:
    """The folder holding the two benchmark CSVs, or None (see the module docstring)."""
    candidates = []
    if explicit:
        candidates.append(Path(explicit))
    candidates.append((REPO / ".." / "shared" / "data" / "scaling").resolve())
    env = os.environ.get("LVSEARCH_SHARED_DATA")
    if env:
        candidates.append(Path(env) / "scaling")
    for c in candidates:
        if all((c / f).is_file() for f in FILES):
            return c
    return None


def load_curves(data_dir: Path) -> list[dict]:
    """All curves: dicts with domain, task, model, x_train, y_train, x_test, y_test (sorted)."""
    rows: dict[tuple, set] = defaultdict(set)
    for fname in FILES:
        path = data_dir / fname
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            need = {"Domain", "Task", "Model", "Seen Examples", "Loss", "Training"}
            if not need <= set(reader.fieldnames or ()):
                raise LvsearchError(f"{path}: expected columns {sorted(need)}, found {reader.fieldnames}",
                                    fix="pass the benchmark CSVs of Alabdulmohsin et al. 2022")
            for r in reader:
                key = (r["Domain"], r["Task"], r["Model"])
                rows[key].add((float(r["Seen Examples"]), float(r["Loss"]), int(float(r["Training"]))))
    curves = []
    for (domain, task, model), pts in rows.items():
        c = {"domain": domain, "task": task, "model": model, "merged_x": 0}
        for split, flag in (("train", 1), ("test", 0)):
            by_x: dict[float, list[float]] = defaultdict(list)
            for x, y, t in pts:
                if t == flag:
                    by_x[x].append(y)
            xs = np.array(sorted(by_x))
            c["merged_x"] += sum(len(v) > 1 for v in by_x.values())
            c[f"x_{split}"] = xs
            c[f"y_{split}"] = np.array([float(np.mean(by_x[x])) for x in xs])
        curves.append(c)
    curves.sort(key=lambda c: (c["domain"], c["task"], c["model"]))
    return curves


def estimator_options(name: str, eps0: float, select: str) -> dict:
    # eps_0 is fitted below the random-guess value of these (rescaled) curves. The same
    # `select` rule goes to M2, M3 and M4 (make_estimator maps it to what each one supports:
    # M3 has no "nearest" and uses its training-loss mode "global" instead), so the
    # estimators differ only in their law, not in how their non-convex parameter is chosen.
    return {"eps0": eps0, "fit_eps0": True, "select": select}


def run_curve(args: tuple[dict, float, str]) -> dict:
    curve, eps0, select = args
    out = {k: curve[k] for k in ("domain", "task", "model")}
    out.update(n_train=int(curve["x_train"].size), n_test=int(curve["x_test"].size),
               merged_duplicate_x=int(curve["merged_x"]), results={})
    for name in MODELS:
        opts = estimator_options(name, eps0, select)
        if name == "M4" and eps0 <= curve["y_train"].max():
            opts["eps0"] = None
        est = make_estimator(name, **opts)
        t0 = time.perf_counter()
        try:
            params = est.fit(curve["x_train"], curve["y_train"])
            rmse = extrapolation_rmse(est, curve["x_test"], curve["y_test"])
            res = {"params": params, "rmse": rmse}
        except LvsearchError as e:
            res = {"error": str(e), "rmse": None}
        res["fit_s"] = time.perf_counter() - t0
        out["results"][name] = res
    scores = {m: r["rmse"] for m, r in out["results"].items() if r["rmse"] is not None}
    out["best"] = min(scores, key=scores.get) if scores else None
    return out


def summarise(per_curve: list[dict], tie_tol: float) -> dict:
    by_dom: dict[str, list[dict]] = defaultdict(list)
    for c in per_curve:
        by_dom[c["domain"]].append(c)
    summary = {}
    for dom, cs in sorted(by_dom.items()):
        wins = {m: 0 for m in MODELS}
        tied = {m: 0 for m in MODELS}
        rmses = {m: [] for m in MODELS}
        for c in cs:
            scores = {m: c["results"][m]["rmse"] for m in MODELS if c["results"][m]["rmse"] is not None}
            lo = min(scores.values())
            for m, s in scores.items():
                rmses[m].append(s)
                tied[m] += s <= lo + tie_tol
            wins[c["best"]] += 1
        n = len(cs)
        summary[dom] = {
            "name": DOMAIN_NAMES.get(dom, dom),
            "n_curves": n,
            "best_frac": {m: wins[m] / n for m in MODELS},
            "best_or_tied_frac": {m: tied[m] / n for m in MODELS},
            "median_rmse": {m: float(np.median(rmses[m])) if rmses[m] else None for m in MODELS},
            "mean_rmse": {m: float(np.mean(rmses[m])) if rmses[m] else None for m in MODELS},
            "n_failed": {m: n - len(rmses[m]) for m in MODELS},
        }
    return summary


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", help="folder with benchmark.vision.csv and benchmark.lang.csv")
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "scaling.json"))
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="worker processes")
    ap.add_argument("--eps0", type=float, default=1.0,
                    help="random-guess loss: upper bound of M4's fitted eps_0; all curves are <= 1")
    ap.add_argument("--tie-tol", type=float, default=1e-3,
                    help="RMSE within this of the best counts as tied-best (log units)")
    ap.add_argument("--select", default="validate", choices=["validate", "nearest", "global"],
                    help="how M2/M4 choose eps_inf and M3 gamma: by extrapolation to a held-out "
                         "tail of the training rows (validate), or by training loss (nearest / "
                         "global; M3 uses global for both); see lvsearch.scaling.M4")
    ap.add_argument("--limit", type=int, default=None, help="only the first N curves (smoke test)")
    args = ap.parse_args(argv)

    data = find_data_dir(args.data)
    if data is None:
        print("scaling benchmark: data not found; pass --data DIR or set LVSEARCH_SHARED_DATA "
              "(looked in --data, <repo>/../shared/data/scaling, $LVSEARCH_SHARED_DATA/scaling)",
              file=sys.stderr)
        return 2
    curves = load_curves(data)
    if args.limit:
        curves = curves[: args.limit]
    t0 = time.perf_counter()
    work = [(c, args.eps0, args.select) for c in curves]
    if args.jobs > 1:
        with ProcessPoolExecutor(args.jobs) as pool:
            per_curve = list(pool.map(run_curve, work, chunksize=2))
    else:
        per_curve = [run_curve(w) for w in work]
    elapsed = time.perf_counter() - t0
    summary = summarise(per_curve, args.tie_tol)
    result = {
        "benchmark": "scaling-law extrapolation (Alabdulmohsin et al. 2022, 92 curves)",
        "metric": "RMSE of log(predicted loss) - log(loss) on the Training = 0 rows",
        "config": {"models": list(MODELS), "m4_eps0_max": args.eps0, "m4_fit_eps0": True,
                   "select": args.select, "val_ratio": 2.0,
                   "tie_tol": args.tie_tol, "jobs": args.jobs, "n_curves": len(per_curve)},
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                    "platform": platform.platform()},
        "runtime_s": round(elapsed, 2),
        "summary": summary,
        "curves": per_curve,
    }
    atomic_write_json(args.out, result)
    print(f"{len(per_curve)} curves in {elapsed:.1f} s ({args.jobs} worker(s)) -> {args.out}")
    print(f"{'domain':<6}{'n':>4}  " + "  ".join(f"{m + ' best':>8} {m + ' med':>8}" for m in MODELS))
    for dom, s in summary.items():
        cells = "  ".join(f"{s['best_frac'][m]:>8.0%} {s['median_rmse'][m]:>8.4f}" for m in MODELS)
        print(f"{dom:<6}{s['n_curves']:>4}  {cells}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
