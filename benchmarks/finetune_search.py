"""Benchmark: which fine-tuning settings let the arms' models clear the bag-of-words floor.

A small stated grid (``--pooling`` × ``--lrs`` × ``--epochs``; the best epoch on dev is kept,
i.e. early stopping on dev) of :func:`lvsearch.eval.finetune.finetune_task` per model on one
task, with the first-``--eval-limit`` dev/test examples and a ``--train-limit`` sample (the arms
benchmark's 1,500 / 500), one seed. The winning setting is picked per model on **dev**; its
test score is compared with the floor (:func:`lvsearch.eval.finetune_floor.finetune_floor`, same
examples) by the paired bootstrap. Writes ``benchmarks/results/finetune_search_<task>.json`` (or ``--result``).
Not a test.

Usage: ``python benchmarks/finetune_search.py --models RUN/model ... --task TASK_DIR``
"""

from __future__ import annotations

import argparse
import itertools
import time
from pathlib import Path

from _common import machine, write_result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", required=True)
    ap.add_argument("--names", nargs="+")
    ap.add_argument("--task", required=True)
    ap.add_argument("--train-limit", type=int, default=1500)
    ap.add_argument("--eval-limit", type=int, default=500)
    ap.add_argument("--pooling", nargs="+", default=["cls", "mean"])
    ap.add_argument("--lrs", nargs="+", type=float, default=[1e-3, 3e-4])
    ap.add_argument("--epochs", nargs="+", type=int, default=[3, 10])
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--result", help="result name (default: finetune_search_<task>)")
    args = ap.parse_args()

    import torch

    torch.set_num_threads(1)
    from lvsearch.eval.finetune import FinetuneConfig, finetune_task
    from lvsearch.eval.finetune_floor import finetune_floor, finetune_vs_floor
    from lvsearch.eval.tasks import load_task
    from lvsearch.modeldir import load_model

    task = load_task(args.task)
    result_name = args.result or f"finetune_search_{task.name}"
    names = args.names or [Path(m).resolve().parent.name for m in args.models]
    grid = list(itertools.product(args.pooling, args.lrs, args.epochs))
    base = FinetuneConfig(train_limit=args.train_limit, eval_limit=args.eval_limit, seeds=tuple(range(args.seeds)))
    floor = finetune_floor(task, base)
    out = {"what": f"fine-tuning settings vs the bag-of-words floor on {task.name} (benchmarks/finetune_search.py)",
           "machine": machine(),
           "settings": {"task": args.task, "train_limit": args.train_limit, "eval_limit": args.eval_limit,
                        "seeds": args.seeds, "grid": [{"pooling": p, "lr": lr, "epochs": e} for p, lr, e in grid],
                        "selection": "per model, the grid point with the best dev score (its best epoch)"},
           "floor": {k: floor[k] for k in ("C", "dev", "test", "train_used")}, "models": {}}
    for name, folder in zip(names, args.models):
        m = load_model(folder, device="cpu")
        runs = []
        for pooling, lr, epochs in grid:
            cfg = FinetuneConfig(**{**base.__dict__, "pooling": pooling, "lr": lr, "epochs": epochs})
            t0 = time.perf_counter()
            res = finetune_task(m.encoder, m.tokenizer, task, cfg)
            sel = res["select_metric"]
            ok = res["status"] == "done"
            runs.append({"pooling": pooling, "lr": lr, "epochs": epochs, "status": res["status"],
                         "dev": res["aggregate"]["dev"][sel]["mean"] if ok else None,
                         "test": res["aggregate"]["test"][sel]["mean"] if ok else None,
                         "best_epochs": [r["best_epoch"] for r in res["per_seed"]],
                         "vs_floor": finetune_vs_floor(task, res, floor), "seconds": time.perf_counter() - t0})
            print(name, runs[-1], flush=True)
            out["models"][name] = {"folder": str(Path(folder).resolve()), "runs": runs, "picked_on_dev": None}
            write_result(result_name, out)  # after every run: a partial grid survives
        ok_runs = [r for r in runs if r["dev"] is not None]
        best = max(ok_runs, key=lambda r: r["dev"]) if ok_runs else None
        out["models"][name] = {"folder": str(Path(folder).resolve()), "runs": runs, "picked_on_dev": best}
        write_result(result_name, out)
    print(write_result(result_name, out))


if __name__ == "__main__":
    main()
