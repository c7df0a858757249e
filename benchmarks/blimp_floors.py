"""Benchmark: BLiMP of the arms' models against the n-gram floor, under PLL and PLL-word-l2r.

For each model directory: its BLiMP floor (interpolated Kneser-Ney, discount 0.75, counted on
exactly the training sequences it saw, :func:`lvsearch.eval.blimp_floor.blimp_floor_for_model`;
``--orders`` are all measured, the library's order is the one reported as "floor") and the
model's BLiMP mean over paradigms under each metric, with the paired bootstrap of model −
floor (stratified by paradigm). The first ``--limit`` pairs of each paradigm; one torch
thread. Writes ``benchmarks/results/blimp_floors.json``. Not a test.

Usage: ``python benchmarks/blimp_floors.py --models RUN/model ... --data CORPUS [--limit 100]``
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from _common import machine, shared_data_dir, write_result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", required=True, help="model directories")
    ap.add_argument("--names", nargs="+", help="a label per model (default: the run folder's name)")
    ap.add_argument("--data", required=True, help="the prepared corpus the models trained on")
    ap.add_argument("--limit", type=int, default=100)
    ap.add_argument("--orders", type=int, nargs="+", default=[2, 3, 4, 5])
    ap.add_argument("--precision", default="auto")
    ap.add_argument("--metrics", nargs="+", default=["pll", "pll-word-l2r"])
    ap.add_argument("--name", default="blimp_floors", help="result file name under benchmarks/results (no .json)")
    args = ap.parse_args()

    import torch

    torch.set_num_threads(1)
    from lvsearch.data.shards import PreparedData
    from lvsearch.eval.blimp import PLLScorer, evaluate_blimp, read_blimp
    from lvsearch.eval.blimp_floor import (
        BLIMP_FLOOR_ORDER,
        blimp_floor_for_model,
        blimp_vs_floor,
        compact_blimp_floor,
    )
    from lvsearch.modeldir import load_model

    data = PreparedData.open(args.data)
    paradigms = read_blimp(shared_data_dir() / "blimp", limit=args.limit)
    names = args.names or [Path(m).resolve().parent.name for m in args.models]
    cache: dict = {}
    out = {"what": "BLiMP of the arms' models vs the Kneser-Ney floor of their training text, PLL and PLL-word-l2r "
                   "(benchmarks/blimp_floors.py)",
           "machine": machine(), "settings": {"limit": args.limit, "paradigms": len(paradigms), "data": args.data,
                                              "orders": args.orders, "floor_order": BLIMP_FLOOR_ORDER,
                                              "precision": args.precision, "threads": 1},
           "models": {}}
    for name, folder in zip(names, args.models):
        m = load_model(folder, device="cpu")
        extra = m.config.get("extra") or {}
        entry = {"folder": str(Path(folder).resolve()), "floors": {}, "metrics": {}}
        for order in args.orders:
            key = (order, str(m.training_args.get("train")), str(extra.get("steps")))
            if key not in cache:
                t0 = time.perf_counter()
                f = blimp_floor_for_model(m.training_args, extra, data, paradigms, order=order)
                f["seconds"] = time.perf_counter() - t0
                cache[key] = f
            entry["floors"][str(order)] = cache[key]
        floor = entry["floors"].get(str(BLIMP_FLOOR_ORDER))
        for metric in args.metrics:
            scorer = PLLScorer(m.encoder, m.tokenizer, metric=metric, precision=args.precision)
            res = evaluate_blimp(scorer, paradigms)
            row = {"mean_over_paradigms": res["mean_over_paradigms"], "mean_over_pairs": res["mean_over_pairs"],
                   "ties": res["ties"], "seconds": res["seconds"], "precision": res["precision"],
                   "per_paradigm": {u: p["accuracy"] for u, p in res["paradigms"].items()}}
            if floor and floor["status"] == "done":
                row["vs_floor"] = blimp_vs_floor(res, floor)
            entry["metrics"][metric] = row
            print(name, metric, f"{res['mean_over_paradigms']:.4f}", row.get("vs_floor"), f"{res['seconds']:.0f}s", flush=True)
        entry["floors"] = {o: {**compact_blimp_floor(f), "mean_over_paradigms": f.get("mean_over_paradigms")}
                           for o, f in entry["floors"].items()}
        out["models"][name] = entry
        write_result(args.name, out)  # after every model: a partial result survives an interruption
    print(write_result(args.name, out))


if __name__ == "__main__":
    main()
