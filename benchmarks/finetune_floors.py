"""The bag-of-words fine-tuning floor (:func:`lvsearch.eval.finetune_floor.finetune_floor`) of each task
at the arms benchmark's sizes (a seeded 1,500-example train sample, first 500 dev/test) and with
every example. Writes ``benchmarks/results/finetune_floors.json``. Not a test.

Usage: ``python benchmarks/finetune_floors.py [--tasks sentence_polarity rte]``
"""

from __future__ import annotations

import argparse
import time

from _common import shared_data_dir, write_result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", nargs="+", default=["sentence_polarity", "rte"])
    args = ap.parse_args()
    from lvsearch.eval.finetune import FinetuneConfig
    from lvsearch.eval.finetune_floor import finetune_floor
    from lvsearch.eval.tasks import load_task

    out = {"what": "bag-of-words fine-tuning floors (benchmarks/finetune_floors.py)", "tasks": {}}
    for name in args.tasks:
        task = load_task(str(shared_data_dir() / "tasks" / name))
        rows = {}
        for label, cfg in (("train 1500 sample, eval first 500", FinetuneConfig(train_limit=1500, eval_limit=500)),
                           ("all examples", FinetuneConfig())):
            t0 = time.perf_counter()
            f = finetune_floor(task, cfg)
            rows[label] = {"C": f["C"], "select_metric": f["select_metric"], "dev": f["dev"], "test": f["test"],
                           "train_used": f["train_used"], "seconds": time.perf_counter() - t0}
            print(name, label, f["C"], f["test"])
        out["tasks"][name] = rows
    print(write_result("finetune_floors", out))


if __name__ == "__main__":
    main()
