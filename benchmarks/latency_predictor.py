"""The latency predictor against measured end-to-end latency (targets: median
absolute error ≤ 10%, worst ≤ 25%).

For each thread count: ``lvsearch latency measure`` on the supernet run (the table, then its
calibration ``measured ≈ a + b · table sum`` fitted on ``--calibrate`` architectures drawn with
seed 1), then ``lvsearch latency validate`` on ``--archs`` other architectures (seed 0): the
product's predictor out of sample, and the raw table sum on the same architectures. Both run in
this process through the job functions, with the same timing settings. The load average before
and after each setting is kept: other jobs on the machine make a timing provisional.

Usage::

    python benchmarks/latency_predictor.py --supernet RUN [--threads 1 2] [--archs 50] [--calibrate 20] [--batch 8]
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from _common import machine, write_result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--supernet", required=True, help="a train-supernet run folder")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--archs", type=int, default=50)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--calibrate", type=int, default=20)
    ap.add_argument("--name", default="latency_predictor")
    args = ap.parse_args()

    from lvsearch.latency.job import measure, validate
    from lvsearch.latency.table import MeasureOptions

    settings = []
    with tempfile.TemporaryDirectory() as tmp:
        for threads in args.threads:
            opts = MeasureOptions(device="cpu", batch=args.batch, threads=threads, warmup=args.warmup,
                                  repeats=args.repeats, calibrate=args.calibrate)
            load_before = os.getloadavg()
            table_path = Path(tmp) / f"table-{threads}.json"
            table = measure(args.supernet, table_path, opts, show_progress=False)
            rec = validate(args.supernet, table_path, Path(tmp) / f"check-{threads}.json", archs=args.archs, seed=0,
                           opts=opts, show_progress=False)
            s, raw = rec["summary"], rec["table_sum_summary"]
            print(f"{threads} threads: predictor median APE {100 * s['median_ape']:.1f}%, worst "
                  f"{100 * s['worst_ape']:.1f}%, rho {s['spearman_rho']:.3f}; raw table sum "
                  f"{100 * raw['median_ape']:.1f}% / {100 * raw['worst_ape']:.1f}% (signed "
                  f"{100 * raw['mean_signed_error']:+.1f}%)", flush=True)
            settings.append({"threads": threads, "table": table.model_dump(mode="json"), "summary": s,
                             "table_sum_summary": raw, "rows": rec["rows"],
                             "load_average_before": list(load_before), "load_average_after": list(os.getloadavg())})
    write_result(args.name, {
        "supernet": str(Path(args.supernet).resolve()), "archs": args.archs, "batch": args.batch,
        "repeats": args.repeats, "warmup": args.warmup, "calibrate": args.calibrate, "machine": machine(),
        "targets": {"median_ape": 0.10, "worst_ape": 0.25},
        "settings": settings,
    })


if __name__ == "__main__":
    main()
