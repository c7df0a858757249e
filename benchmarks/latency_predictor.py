"""The latency predictor against measured end-to-end latency (issue 38's targets: median
absolute error ≤ 10%, worst ≤ 25%).

For each thread count: ``lvsearch latency measure`` on the supernet run, then ``lvsearch
latency validate`` on ``--archs`` architectures sampled from its space (seed 0). Both run in
this process through the job functions, with the same timing settings. Besides the table-sum
predictor it reports a calibrated one, ``measured ≈ a + b · predicted`` (least squares,
scikit-learn), scored out of sample by 5-fold cross-validation: it shows how much of the error
is a shared scale or offset (a Python overhead per forward, cache effects) rather than
noise. The load average before and after each setting is kept: other jobs on the machine make a
timing provisional.

Usage::

    python benchmarks/latency_predictor.py --supernet RUN [--threads 1 2] [--archs 50] [--batch 8]
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import numpy as np
from _common import machine, write_result


def calibrated(predicted: np.ndarray, measured: np.ndarray) -> dict:
    """Out-of-sample errors of ``measured ≈ a + b · predicted`` (5-fold CV) and the full fit."""
    from sklearn.linear_model import LinearRegression
    from sklearn.model_selection import KFold, cross_val_predict

    x = predicted.reshape(-1, 1)
    cv = cross_val_predict(LinearRegression(), x, measured, cv=KFold(5, shuffle=True, random_state=0))
    ape = np.abs(cv - measured) / measured
    fit = LinearRegression().fit(x, measured)
    return {"median_ape": float(np.median(ape)), "worst_ape": float(ape.max()),
            "intercept_ms": float(fit.intercept_), "slope": float(fit.coef_[0])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--supernet", required=True, help="a train-supernet run folder")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--archs", type=int, default=50)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--name", default="latency_predictor")
    args = ap.parse_args()

    from lvsearch.latency.job import measure, validate
    from lvsearch.latency.table import MeasureOptions

    settings = []
    with tempfile.TemporaryDirectory() as tmp:
        for threads in args.threads:
            opts = MeasureOptions(device="cpu", batch=args.batch, threads=threads, warmup=args.warmup,
                                  repeats=args.repeats)
            load_before = os.getloadavg()
            table_path = Path(tmp) / f"table-{threads}.json"
            table = measure(args.supernet, table_path, opts, show_progress=False)
            rec = validate(args.supernet, table_path, Path(tmp) / f"check-{threads}.json", archs=args.archs, seed=0,
                           opts=opts, show_progress=False)
            p = np.array([r["predicted_ms"] for r in rec["rows"]])
            m = np.array([r["measured_ms"] for r in rec["rows"]])
            s = rec["summary"]
            cal = calibrated(p, m)
            print(f"{threads} threads: median APE {100 * s['median_ape']:.1f}%, worst {100 * s['worst_ape']:.1f}%, "
                  f"signed {100 * s['mean_signed_error']:+.1f}%, rho {s['spearman_rho']:.3f}; calibrated "
                  f"{100 * cal['median_ape']:.1f}% / {100 * cal['worst_ape']:.1f}%", flush=True)
            settings.append({"threads": threads, "table": table.model_dump(mode="json"), "summary": s,
                             "calibrated_cv": cal, "rows": rec["rows"],
                             "load_average_before": list(load_before), "load_average_after": list(os.getloadavg())})
    write_result(args.name, {
        "supernet": str(Path(args.supernet).resolve()), "archs": args.archs, "batch": args.batch,
        "repeats": args.repeats, "warmup": args.warmup, "machine": machine(),
        "targets": {"median_ape": 0.10, "worst_ape": 0.25},
        "settings": settings,
    })


if __name__ == "__main__":
    main()
