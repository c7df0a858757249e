"""Benchmark: the quickstart's arms as single-threaded worker processes at once vs one after the other.

Trains the quickstart's three arm architectures (``--archs``, default ``bert`` and two fixed
random architectures of the space) with ``retrain-quickstart`` for ``--steps`` steps each, twice on
the same machine in the same run:

* ``workers``: all arms at once, one torch thread each (:func:`lvsearch.quickstart.workers.run_jobs`,
  what ``lvsearch quickstart`` does on a CPU);
* ``sequential``: one arm after the other, each with ``--threads`` torch threads (2: torch's
  default on the 2-core machine; what the quickstart did before).

Reports the wall seconds of each way and their ratio (that a worker's weights equal a 1-thread
in-process retrain's is a test: ``tests/test_quickstart.py``). Writes
``benchmarks/results/arm_parallelism.json``. Not a test; run it on an otherwise idle machine.

Usage: ``python benchmarks/arm_parallelism.py --data CORPUS [--steps 300] [--threads 2]``
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from _common import machine, write_result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="prepared corpus (lvsearch data prepare --vocab-size 4096)")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--threads", type=int, default=2, help="torch threads of each sequential run")
    ap.add_argument("--archs", nargs="+", default=["bert", "random:1", "random:2"])
    ap.add_argument("--space", default="lvbert-elc")
    ap.add_argument("--work", type=Path, default=None, help="scratch folder (default: a temporary one)")
    args = ap.parse_args()

    import torch

    from lvsearch.quickstart.workers import WorkerJob, run_jobs
    from lvsearch.train.retrain import retrain

    work = args.work or Path(tempfile.mkdtemp(prefix="arm-par-"))
    sets = [f"space={args.space}", f"train.steps={args.steps}", f"train.eval_every={args.steps}",
            f"train.checkpoint_every={args.steps}", "eval.dev_sequences=64"]

    def kwargs(i: int, arch: str, where: str) -> dict:
        return {"arch_spec": arch, "recipe": "retrain-quickstart", "data_dir": str(args.data),
                "out": str(work / where / f"{i}"), "overrides": sets}

    t0 = time.perf_counter()
    jobs = run_jobs([WorkerJob(f"{i}", "retrain", kwargs(i, a, "workers"), steps=args.steps, run=str(work / "workers" / f"{i}"))
                     for i, a in enumerate(args.archs)], work / "logs", label="workers")
    workers_s = time.perf_counter() - t0

    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    seq = [retrain(**kwargs(i, a, "sequential")) for i, a in enumerate(args.archs)]
    sequential_s = time.perf_counter() - t0

    tokens = sum(int(s["tokens"]) for s in seq)
    result = {
        "what": "the quickstart's arms: single-threaded worker processes at once vs one after the other with "
                f"{args.threads} threads (benchmarks/arm_parallelism.py)",
        "machine": machine(), "settings": {"archs": args.archs, "steps": args.steps, "threads_sequential": args.threads,
                                           "recipe": "retrain-quickstart", "space": args.space},
        "workers": {"seconds": workers_s, "tokens_per_s": tokens / workers_s,
                    "weights_sha256": [j.result.get("weights_sha256") for j in jobs]},
        "sequential": {"seconds": sequential_s, "tokens_per_s": tokens / sequential_s,
                       "per_arm_tokens_per_s": [s.get("tokens_per_s") for s in seq]},
        "speedup_workers_over_sequential": sequential_s / workers_s,
    }
    print(write_result("arm_parallelism", result))
    print(f"workers {workers_s:.0f} s, sequential ({args.threads} threads) {sequential_s:.0f} s: "
          f"{sequential_s / workers_s:.2f}x")


if __name__ == "__main__":
    main()
