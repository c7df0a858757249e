"""How well a supernet ranks standalone-trained architectures, pooled from run folders
(target on the elastic space: Kendall τ on ≥ 12 architectures past the floor).

Standalone runs made for other benchmarks (a landscape's seed-0 runs, retrained search points)
all share a recipe, seed and dev set, so their MLM dev accuracies compare. This script pools
them into a ``rank_check.json``-format file (one row per architecture: key, standalone
accuracy and loss, parameters; the architecture is read from each run's ``config.json``, the
accuracy from its ``mlm.json``) and scores them on the supernet with ``lvsearch rank-check
--reuse`` (Kendall τ and Spearman ρ with bootstrap intervals, top-region τ, both fitness
metrics). ``--past-floor-only`` keeps the runs whose MLM accuracy beats the neighbour-count
floor, the condition under which standalone accuracy measures more than co-occurrence.

Usage::

    python benchmarks/standalone_rank.py --supernet SN --runs RUN [RUN ...] --work W
        [--dev-sequences 1024] [--past-floor-only] [--name standalone_rank]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from _common import machine, run_lvsearch, write_result


def standalone_row(run: Path) -> dict:
    """One rank-check row from a retrain run folder: the architecture key (``config.json``),
    MLM dev accuracy, loss and whether it beats the floor (``mlm.json``)."""
    from lvsearch.arch import Arch

    cfg = json.loads((run / "config.json").read_text())
    m = json.loads((run / "mlm.json").read_text())["mlm"]
    arch = Arch.from_dict(cfg["arch"], source=run / "config.json")
    return {"key": arch.key, "compact": arch.compact, "run": str(run), "standalone_accuracy": m["accuracy"],
            "standalone_loss": m["loss"], "beats_floor": m["floors"]["beats_floor"],
            "steps": json.loads((run / "summary.json").read_text()).get("steps")}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--supernet", type=Path, required=True)
    p.add_argument("--runs", type=Path, nargs="+", required=True, help="retrain run folders with mlm.json")
    p.add_argument("--work", type=Path, required=True, help="folder for the pooled file and the rank check")
    p.add_argument("--dev-sequences", type=int, default=1024, help="supernet dev sequences (evolve's default 1024)")
    p.add_argument("--past-floor-only", action="store_true")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--name", default="standalone_rank")
    args = p.parse_args()

    from lvsearch.search.rank_check import write_reuse_file
    from lvsearch.train.supernet import load_supernet

    rows, seen = [], set()
    for run in args.runs:
        if not (run / "mlm.json").exists():
            print(f"{run}: no mlm.json yet; left out", flush=True)
            continue
        r = standalone_row(run)
        if r["key"] in seen or (args.past_floor_only and not r["beats_floor"]):
            continue
        seen.add(r["key"])
        rows.append(r)
    steps = {r["steps"] for r in rows}
    if len(steps) != 1:
        raise SystemExit(f"the runs were trained for different step counts {sorted(map(str, steps))}: not comparable")
    count = load_supernet(args.supernet).supernet.num_params
    from lvsearch.arch import Arch

    archs = [{"key": r["key"], "standalone_accuracy": r["standalone_accuracy"], "standalone_loss": r["standalone_loss"],
              "params": count(Arch.from_key(r["key"]))} for r in rows]
    args.work.mkdir(parents=True, exist_ok=True)
    pooled = write_reuse_file(args.work / "pooled_rank_check.json", archs, steps=steps.pop(),
                              what="standalone runs pooled by benchmarks/standalone_rank.py")
    out = args.work / "rank_check"
    run_lvsearch(["rank-check", "--supernet", str(args.supernet), "--reuse", str(pooled), "--out", str(out),
                  "--dev-sequences", str(args.dev_sequences), "--overwrite"], args.work / "rank_check.log", args.threads)
    check = json.loads((out / "rank_check.json").read_text())
    result = {"what": "supernet fitness against standalone MLM accuracy of pooled standalone runs "
                      "(lvsearch rank-check --reuse)",
              "supernet": str(args.supernet), "dev_sequences": args.dev_sequences,
              "past_floor_only": args.past_floor_only, "runs": rows,
              "rank_check": check,
              "machine": machine()}
    print(write_result(args.name, result))


if __name__ == "__main__":
    main()
