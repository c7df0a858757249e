"""Each arm against each floor, from measured files (no model is run).

MLM: the paired bootstrap (:func:`lvsearch.stats.paired_bootstrap`) of each run's
``mlm.json`` (written by ``lvsearch evaluate --mlm-data``: per-target outcomes of the model and
of its neighbour-count floor). BLiMP: ``benchmarks/results/blimp_floors.json``. Fine-tuning:
``benchmarks/results/finetune_search_<task>.json`` (the setting picked on dev). Writes
``benchmarks/results/floors_verdicts.json``. Not a test.

Usage: ``python benchmarks/floors_verdicts.py --runs NAME=RUN_DIR ... [--tasks sentence_polarity]``
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from _common import RESULTS, write_result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", nargs="+", required=True, help="NAME=RUN_DIR (a folder with mlm.json)")
    ap.add_argument("--tasks", nargs="*", default=["sentence_polarity"])
    args = ap.parse_args()
    from lvsearch.stats import paired_bootstrap

    blimp = json.loads((RESULTS / "blimp_floors.json").read_text())
    tasks = {t: json.loads(p.read_text()) for t in args.tasks if (p := RESULTS / f"finetune_search_{t}.json").is_file()}
    out = {"what": "each arm against its MLM, BLiMP and fine-tuning floors (benchmarks/floors_verdicts.py)",
           "sources": {"blimp": "blimp_floors.json", "tasks": {t: f"finetune_search_{t}.json" for t in tasks}}, "arms": {}}
    for spec in args.runs:
        name, run = spec.split("=", 1)
        mlm = json.loads((Path(run) / "mlm.json").read_text())["mlm"]
        nc = mlm["floors"]["neighbour-count"]
        entry = {"run": str(Path(run).resolve()),
                 "mlm": {"model": mlm["accuracy"], "floor": nc["accuracy"], "tokens_seen": mlm["floors"]["tokens_seen"],
                         **paired_bootstrap(mlm["per_target_correct"], nc["per_target_correct"])}}
        b = blimp["models"].get(name)
        if b:
            entry["blimp"] = {metric: {"model": v["mean_over_paradigms"], **v["vs_floor"]} for metric, v in b["metrics"].items()}
        for t, res in tasks.items():
            m = res["models"].get(name)
            if m:
                runs = [r for r in m["runs"] if r["dev"] is not None]
                pick = max(runs, key=lambda r: r["dev"]) if runs else None
                entry[t] = {"floor_test": res["floor"]["test"]["accuracy"], "picked_on_dev": pick, "runs": m["runs"]}
        out["arms"][name] = entry
    print(write_result("floors_verdicts", out))


if __name__ == "__main__":
    main()
