"""Which racing plan keeps the top candidates for the least compute? Simulated from per-target losses.

A racing plan (``lvsearch evolve --racing N[,N…] --racing-eta E``) scores every candidate of a
batch on the first rung's dev sequences and lets only the best ``1/E`` go on. Its risk is to stop
a candidate that the whole dev set would rank near the top; its gain is compute. Both follow
from the per-target losses of a pool of architectures on the whole fitness dev set (evolve's
default, 1024 sequences, in the racing order of :data:`RACING_ORDER_SEED`), so every plan is
replayed on the same numbers:

* the pool: ``--pool`` distinct random draws of the quickstart space inside bert's parameter
  band (± 5%), scored once with ``SupernetEvaluator.per_target``;
* each plan is replayed ``--replays`` times on random batches of ``--batch`` candidates (evolve
  races each ``evaluate_many`` batch, i.e. one population of new children): rung means over the
  first ``n`` rows, survivors ``ceil(b / E)`` per rung, survivors scored on all rows;
* reported per plan: recall of the pool's top decile by full-set loss (the fraction of those
  candidates that end with a complete score — the only ones a search can pick), the mean
  full-set rank of the best complete candidate per batch, and the cost in dev-sequence
  evaluations per candidate relative to the old fixed 128-sequence fitness (prefix sharing
  aside; ``benchmarks/fitness_noise.py`` measures wall time).

Usage::

    python benchmarks/racing_plans.py --supernet SN --data CORPUS [--pool 80] [--batch 20]
"""

from __future__ import annotations

import argparse
import math
import random
import time
from pathlib import Path

import numpy as np

from _common import bert_band, machine, write_result

PLANS = [((), 4.0), ((128, 512), 4.0), ((128,), 4.0), ((64, 256), 4.0), ((96, 384), 4.0), ((64,), 4.0),
         ((128, 512), 3.0), ((64, 256), 3.0), ((32, 128, 512), 4.0)]


def replay(row_loss: np.ndarray, row_count: np.ndarray, rungs: tuple[int, ...], eta: float, batch: int,
           replays: int, seed: int = 0) -> dict:
    """``row_loss (P, R)``: summed loss per candidate and dev row (racing order); ``row_count (R,)``
    targets per row. Returns recall of the top decile, cost per candidate (sequences) and the mean
    full-set rank (0 = best) of each batch's best complete candidate."""
    n_pool, n_rows = row_loss.shape
    cum_loss = np.cumsum(row_loss, axis=1)
    cum_count = np.cumsum(row_count)
    full = cum_loss[:, -1] / cum_count[-1]
    order = np.argsort(full)
    rank = np.empty(n_pool, dtype=int)
    rank[order] = np.arange(n_pool)
    top = set(order[: max(1, n_pool // 10)].tolist())
    rng = random.Random(seed)
    kept_top = seen_top = 0
    cost = 0.0
    best_ranks = []
    for _ in range(replays):
        idx = list(range(n_pool))
        rng.shuffle(idx)
        for b0 in range(0, n_pool - batch + 1, batch):
            alive = idx[b0 : b0 + batch]
            done_rows = 0
            for r in rungs:
                cost += len(alive) * (r - done_rows)
                mean = cum_loss[alive, r - 1] / cum_count[r - 1]
                keep = max(1, math.ceil(len(alive) / eta))
                alive = [alive[i] for i in np.argsort(mean, kind="stable")[:keep]]
                done_rows = r
            cost += len(alive) * (n_rows - done_rows)
            seen_top += sum(1 for i in idx[b0 : b0 + batch] if i in top)
            kept_top += sum(1 for i in alive if i in top)
            best_ranks.append(min(rank[i] for i in alive))
    n_cands = replays * (n_pool // batch) * batch
    return {"rungs": list(rungs), "eta": eta, "top_decile_recall": kept_top / max(seen_top, 1),
            "sequences_per_candidate": cost / n_cands, "cost_vs_fixed_128": cost / n_cands / 128,
            "best_complete_rank_mean": float(np.mean(best_ranks))}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--supernet", type=Path, required=True)
    p.add_argument("--data", type=Path, default=None)
    p.add_argument("--pool", type=int, default=80)
    p.add_argument("--batch", type=int, default=20, help="candidates per evaluate_many batch (the population)")
    p.add_argument("--dev-sequences", type=int, default=1024)
    p.add_argument("--replays", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()

    import torch

    from lvsearch.search.evaluator import Constraints, SupernetEvaluator
    from lvsearch.search.schedule import RACING_ORDER_SEED, Racing
    from lvsearch.train.supernet import load_dev
    from lvsearch.train.supernet import load_supernet

    torch.set_num_threads(1)
    loaded = load_supernet(args.supernet, device="cpu")
    dev, _ = load_dev(loaded, args.data, args.dev_sequences)
    ref, lo, hi = bert_band(loaded)
    # racing only orders the rows (the permutation of RACING_ORDER_SEED); per_target scores everything
    ev = SupernetEvaluator(loaded.supernet, dev, seq_len=loaded.config.train.seq_len, fitness="loss",
                           racing=Racing((1,), 4.0), constraints=Constraints(max_params=hi, min_params=lo))
    rng, pool = random.Random(args.seed), {}
    while len(pool) < args.pool:
        a = loaded.space.sample(rng)
        if ev.violation(a) is None:
            pool.setdefault(a.key, a)
    archs = list(pool.values())
    t0 = time.perf_counter()
    per = ev.per_target(archs)
    seconds = time.perf_counter() - t0
    perm = np.random.default_rng(RACING_ORDER_SEED).permutation(len(dev))
    row_count = (dev.labels[torch.from_numpy(perm)] != -100).sum(1).numpy()
    row_of_target = np.repeat(np.arange(len(dev)), row_count)
    row_loss = np.stack([np.bincount(row_of_target, weights=per[a.key]["loss"], minlength=len(dev)) for a in archs])
    plans = [replay(row_loss, row_count, r, e, args.batch, args.replays, args.seed) for r, e in PLANS]
    result = {
        "what": "racing plans replayed on per-target losses of a band pool: top-decile recall vs cost",
        "machine": machine(), "supernet_step": loaded.step, "dev_sequences": len(dev),
        "targets": int(row_count.sum()), "pool": len(archs), "batch": args.batch, "replays": args.replays,
        "band": [lo, hi], "seconds_scoring": seconds, "plans": plans,
    }
    path = write_result("racing_plans", result)
    print(f"wrote {path}")
    for r in plans:
        print(f"rungs {r['rungs']!s:>16} eta {r['eta']}: recall {r['top_decile_recall']:.3f}, "
              f"cost ×{r['cost_vs_fixed_128']:.2f} of fixed 128, best complete rank {r['best_complete_rank_mean']:.2f}")


if __name__ == "__main__":
    main()
