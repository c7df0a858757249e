"""Retrained points of an accuracy–latency search against ``bert``: measured latency and
standalone MLM accuracy (target: a point faster than ``bert`` at equal or better accuracy, or
the numbers that say why not).

Each arm is an architecture file and the run folder of its standalone retrain
(``lvsearch retrain --config retrain-quickstart ...`` then ``lvsearch evaluate --no-blimp
--mlm-data CORPUS`` into ``RUN/mlm.json``; every arm with the same recipe, seed and dev set, so
their per-target outcomes pair). This script

* times every arm end to end on this machine with the job behind ``lvsearch latency time``
  (:func:`lvsearch.latency.predict.time_named`: the architecture extracted from the supernet
  runs the retrained model's graph) at each ``--threads``, in ``--rounds`` whole rounds over
  all arms (the median per arm is kept, every round recorded), beside the latency table's
  prediction;
* reads each run's MLM dev accuracy and its paired bootstrap against ``bert``'s run
  (:func:`lvsearch.stats.paired_bootstrap` over the same dev targets);
* breaks each arm's table sum into slot ops and ELC mixing, the part ``bert`` (sequential) has
  none of.

Timings are only as good as the machine is idle: the JSON records the load average before
timing. Usage::

    python benchmarks/front_points.py --supernet SN --table TABLE.json --bert RUN \\
        --arm fast ARCH.json RUN --arm knee ARCH.json RUN ... [--threads 1 2] [--name front_points]
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import numpy as np

from _common import machine, write_result


def mlm(run: Path) -> dict:
    """``RUN/mlm.json``'s MLM block (accuracy, per-target outcomes, floors)."""
    return json.loads((run / "mlm.json").read_text())["mlm"]


def table_parts(arch, table) -> dict:
    """The table sum of ``arch`` split into slot ops, ELC mixing and the fixed overhead (ms),
    with how many slots mix and their mean input count."""
    from lvsearch.latency.predict import table_parts as parts

    return {**parts(arch, table), "mixing_slots": sum(len(i) > 1 for i in arch.inputs),
            "mean_inputs": sum(len(i) for i in arch.inputs) / arch.num_slots}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--supernet", type=Path, required=True, help="the supernet the arms were searched on")
    p.add_argument("--table", type=Path, required=True, help="the latency table the search used")
    p.add_argument("--bert", type=Path, required=True, help="bert's standalone run folder (RUN/mlm.json)")
    p.add_argument("--arm", nargs=3, action="append", required=True, metavar=("NAME", "ARCH", "RUN"),
                   help="an arm: its name, architecture file and standalone run folder")
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--repeats", type=int, default=15)
    p.add_argument("--rounds", type=int, default=3, help="timing rounds over every arm; the median is kept")
    p.add_argument("--name", default="front_points")
    args = p.parse_args()

    from lvsearch.arch import Arch, reference_arch
    from lvsearch.latency.predict import predict_ms, time_named
    from lvsearch.latency.table import MeasureOptions, load_table
    from lvsearch.stats import paired_bootstrap

    table = load_table(args.table)
    space = table.search_space()
    arms = [("bert", "bert", args.bert)] + [(n, a, Path(r)) for n, a, r in args.arm]
    archs = {n: reference_arch(a, space) if a == "bert" else Arch.from_json(a) for n, a, _ in arms}
    load = os.getloadavg()
    rounds: dict[int, list[list[float]]] = {t: [] for t in args.threads}
    for _ in range(args.rounds):  # whole rounds: a drift of the machine hits every arm alike
        for t in args.threads:
            opts = MeasureOptions(device="cpu", batch=table.batch, seq_len=table.seq_len, threads=t,
                                  repeats=args.repeats, dtype=table.dtype)
            rec = time_named(args.supernet, [a for _, a, _ in arms], opts=opts, show_progress=False)
            rounds[t].append([r["measured_ms"] for r in rec["rows"]])
            params = [r["params"] for r in rec["rows"]]
    timed = {t: [float(np.median([rd[i] for rd in rounds[t]])) for i in range(len(arms))] for t in args.threads}
    ratio_rounds = {t: [[rd[i] / rd[0] for rd in rounds[t]] for i in range(len(arms))] for t in args.threads}
    base = mlm(args.bert)
    rows = []
    for i, (name, spec, run) in enumerate(arms):
        m = mlm(run)
        row = {"name": name, "arch": str(spec), "compact": archs[name].compact, "run": str(run), "params": params[i],
               "predicted_ms": predict_ms(archs[name], table), **table_parts(archs[name], table),
               "measured_ms": {str(t): timed[t][i] for t in args.threads},
               "measured_ms_rounds": {str(t): [rd[i] for rd in rounds[t]] for t in args.threads},
               "mlm_accuracy": m["accuracy"], "mlm_loss": m["loss"],
               "floor": m["floors"]["neighbour-count"]["accuracy"], "beats_floor": m["floors"]["beats_floor"]}
        if name != "bert":
            row["vs_bert"] = {
                "accuracy": paired_bootstrap(m["per_target_correct"], base["per_target_correct"]),
                "latency_ratio": {str(t): timed[t][i] / timed[t][0] for t in args.threads},
                "latency_ratio_rounds": {str(t): ratio_rounds[t][i] for t in args.threads}}
            row["faster_and_as_accurate"] = {
                str(t): bool(timed[t][i] < timed[t][0] and row["vs_bert"]["accuracy"]["ci"][1] >= 0)
                for t in args.threads}
        rows.append(row)
    result = {
        "what": "retrained search points against bert: measured end-to-end latency (batch "
                f"{table.batch} × {table.seq_len} tokens, {table.dtype}, median of {args.repeats} blocks) and "
                "standalone MLM dev accuracy (paired bootstrap over the same targets)",
        "supernet": str(args.supernet), "table": str(args.table), "table_where": table.where,
        "load_average_before_timing": list(load), "machine": machine(), "threads": args.threads,
        "rounds": args.rounds, "repeats": args.repeats, "arms": rows,
    }
    print(write_result(args.name, result))
    for r in rows:
        vs = r.get("vs_bert")
        acc = (f"; vs bert {vs['accuracy']['difference'] * 100:+.2f} pp [{vs['accuracy']['ci'][0] * 100:+.2f}, "
               f"{vs['accuracy']['ci'][1] * 100:+.2f}], latency × "
               + "/".join(f"{vs['latency_ratio'][str(t)]:.2f}" for t in args.threads) if vs else "")
        print(f"{r['name']}: {r['mlm_accuracy']:.4f} MLM, "
              + "/".join(f"{r['measured_ms'][str(t)]:.1f}" for t in args.threads)
              + f" ms at {'/'.join(map(str, args.threads))} threads (predicted {r['predicted_ms']:.1f}; mixing "
              f"{r['mixing_ms']:.1f} ms on {r['mixing_slots']} slots){acc}")


if __name__ == "__main__":
    main()
