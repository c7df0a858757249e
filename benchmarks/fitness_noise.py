"""Fitness noise on the quickstart supernet: does the search's fitness resolve the top?

On ``--pool`` distinct random architectures of the supernet's space inside ``bert``'s
parameter band (± 5%), each scored with inherited weights on the whole dev split
(``SupernetEvaluator.per_target``), for both fitness metrics (MLM accuracy, minus MLM loss)
and for the first ``n`` dev sequences in racing order (a seeded random subset) at several
``n``:

* the standard error of one candidate's fitness: over targets (binomial / iid) and over
  sequences (a cluster bootstrap: targets of one sequence are not independent);
* the paired standard error of the difference between two candidates on the same targets,
  for neighbouring members of the pool's top decile (ranked on the whole dev split);
* the spread of the top decile (its best minus its worst, on the whole split) and the ratio
  paired SE / spread (a fitness resolves the top when it is ≤ 1/3);
* exact ties among the top-10 at each ``n``; Kendall τ of the n-sequence fitness with the
  whole-split fitness over the pool, and the top-10 overlap;
* the spread from re-drawing the dev masks (``fixed_dev_set`` seeds), for the top decile;
* candidates/s of a search-like workload (batches of ``--batch`` candidates): today's
  128-sequence fitness, the whole split, and racing plans.

Writes ``benchmarks/results/fitness_noise.json``.

Usage::

    python benchmarks/fitness_noise.py --supernet SN [--pool 200] [--batch 20]
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

import numpy as np

from _common import bert_band, machine, write_result

SIZES = (128, 256, 512, 1024, None)


def pool_archs(loaded, n: int, seed: int = 0):
    """``n`` distinct seeded draws of the supernet's space inside ``bert``'s band."""
    count = loaded.supernet.num_params
    _, lo, hi = bert_band(loaded)
    rng, out = random.Random(seed), {}
    while len(out) < n:
        a = loaded.space.sample(rng)
        if lo <= count(a) <= hi:
            out.setdefault(a.key, a)
    return list(out.values())


def target_rows(dev) -> np.ndarray:
    """Dev row of every target, in ``per_target`` order (row-major)."""
    from lvsearch.data.masking import IGNORE_INDEX

    t = (dev.labels != IGNORE_INDEX).numpy()
    return np.nonzero(t)[0]


def cluster_se(values: np.ndarray, rows: np.ndarray, n_boot: int = 400, seed: int = 0) -> float:
    """SE of the mean of ``values`` under a bootstrap of whole dev sequences (``rows``)."""
    uniq, inv = np.unique(rows, return_inverse=True)
    sums = np.bincount(inv, weights=values, minlength=uniq.size)
    cnts = np.bincount(inv, minlength=uniq.size).astype(float)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, uniq.size, size=(n_boot, uniq.size))
    means = sums[idx].sum(1) / cnts[idx].sum(1)
    return float(means.std(ddof=1))


def analyse(vals: dict[str, np.ndarray], rows: np.ndarray, keep_rows: np.ndarray | None, metric: str) -> dict:
    from scipy.stats import kendalltau

    keys = list(vals)
    full = {k: float(v.mean()) for k, v in vals.items()}
    sel = np.ones(rows.size, bool) if keep_rows is None else np.isin(rows, keep_rows)
    sub = {k: v[sel] for k, v in vals.items()}
    fit = {k: float(v.mean()) for k, v in sub.items()}
    order_full = sorted(keys, key=lambda k: -full[k])
    decile = order_full[:max(2, len(keys) // 10)]
    se_iid = [float(sub[k].std(ddof=1) / np.sqrt(sub[k].size)) for k in decile]
    se_cluster = [cluster_se(sub[k], rows[sel]) for k in decile[:10]]
    paired = [cluster_se(sub[a] - sub[b], rows[sel]) for a, b in zip(decile, decile[1:])]
    paired_iid = [float((sub[a] - sub[b]).std(ddof=1) / np.sqrt(sel.sum())) for a, b in zip(decile, decile[1:])]
    spread = full[decile[0]] - full[decile[-1]]
    top10_sub = sorted(keys, key=lambda k: (-fit[k], k))[:10]
    from lvsearch.search.noise import count_ties

    return {
        "metric": metric, "targets": int(sel.sum()),
        "se_one_score_iid_median": float(np.median(se_iid)), "se_one_score_cluster_median": float(np.median(se_cluster)),
        "paired_se_cluster_median": float(np.median(paired)), "paired_se_iid_median": float(np.median(paired_iid)),
        "top_decile_spread_full": spread, "top_decile_size": len(decile),
        "paired_se_over_spread": float(np.median(paired)) / spread if spread else None,
        "ties_top10": count_ties([fit[k] for k in top10_sub]),
        "kendall_tau_vs_full": float(kendalltau([fit[k] for k in keys], [full[k] for k in keys]).statistic),
        "top10_overlap_with_full": len(set(top10_sub) & set(order_full[:10])),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--supernet", type=Path, required=True)
    p.add_argument("--pool", type=int, default=200)
    p.add_argument("--batch", type=int, default=20, help="candidates per evaluate_many call (the population)")
    p.add_argument("--mask-seeds", type=int, default=4, help="extra dev-mask redraws")
    p.add_argument("--speed-candidates", type=int, default=40, help="candidates of the throughput workload")
    args = p.parse_args()

    import torch

    from lvsearch.search.evaluator import SupernetEvaluator
    from lvsearch.search.schedule import RACING_ORDER_SEED, Racing
    from lvsearch.train.supernet import load_dev
    from lvsearch.search.fitness import Fitness
    from lvsearch.train.supernet import load_supernet

    loaded = load_supernet(args.supernet)
    archs = pool_archs(loaded, args.pool)
    seq_len = loaded.config.train.seq_len
    dev, data = load_dev(loaded, None, "all")
    n_dev = int(dev.input_ids.shape[0])
    t0 = time.perf_counter()
    outcomes = SupernetEvaluator(loaded.supernet, dev, seq_len=seq_len).per_target(archs)
    seconds_all = time.perf_counter() - t0
    rows = target_rows(dev)
    perm = np.random.default_rng(RACING_ORDER_SEED).permutation(n_dev)  # the racing order
    result: dict = {"what": "fitness noise of the quickstart supernet (benchmarks/fitness_noise.py)",
                    "supernet": str(args.supernet), "supernet_step": loaded.step, "pool": len(archs),
                    "dev_sequences_all": n_dev, "targets_all": int(rows.size), "machine": machine(),
                    "torch_threads": torch.get_num_threads(), "by_size": {}}
    for metric in ("accuracy", "loss"):
        vals = {k: Fitness(metric).per_target(o) for k, o in outcomes.items()}
        for n in SIZES:
            keep = None if n is None else perm[:n]
            result["by_size"].setdefault(str(n or "all"), {})[metric] = analyse(vals, rows, keep, metric)
    # the dev set the search used until now: 128 sorted seeded rows (fixed_dev_set), not a racing prefix
    dev128, _ = load_dev(loaded, None, 128)
    ev = SupernetEvaluator(loaded.supernet, dev128, seq_len=seq_len)
    sc = ev.evaluate_many(archs)
    from lvsearch.search.noise import count_ties

    for metric in ("accuracy", "loss"):
        fit = sorted(((r.accuracy if metric == "accuracy" else -r.loss) for r in sc), reverse=True)
        result["by_size"]["128"][metric]["ties_top10_fixed_dev_set_128"] = count_ties(fit[:10])
    # spread from re-drawing the masks (fixed_dev_set seed), top decile of the pool (accuracy ranking)
    from lvsearch.data.loader import fixed_dev_set

    full_acc = {k: float(o["correct"].mean()) for k, o in outcomes.items()}
    decile = sorted(full_acc, key=lambda k: -full_acc[k])[:max(2, len(archs) // 10)]
    dec_archs = [a for a in archs if a.key in set(decile)]
    redraw: dict = {}
    for n in (128, None):
        per = {k: {"accuracy": [], "loss": []} for k in decile}
        for s in range(args.mask_seeds + 1):
            seed = loaded.config.eval.seed + s
            d = fixed_dev_set(data, num_sequences=n, seq_len=seq_len, seed=seed)
            for r in SupernetEvaluator(loaded.supernet, d, seq_len=seq_len).evaluate_many(dec_archs):
                per[r.key]["accuracy"].append(r.accuracy)
                per[r.key]["loss"].append(-r.loss)
        redraw[str(n or "all")] = {m: {"std_over_redraws_median": float(np.median([np.std(v[m], ddof=1) for v in per.values()])),
                                       "draws": args.mask_seeds + 1} for m in ("accuracy", "loss")}
    result["mask_redraw_top_decile"] = redraw
    # throughput of a search-like workload: batches of --batch candidates
    speed = {}
    plans = {"fixed 128 (until now)": (dev128, None), "all": (dev, None),
             "all, racing 128 eta 4": (dev, Racing((128,), 4.0)),
             "all, racing 128,512 eta 4": (dev, Racing((128, 512), 4.0)),
             "all, racing 256 eta 4": (dev, Racing((256,), 4.0))}
    for name, (d, racing) in plans.items():
        ev = SupernetEvaluator(loaded.supernet, d, seq_len=seq_len, racing=racing, fitness="loss")
        work = archs[:args.speed_candidates]
        t0 = time.perf_counter()
        for i in range(0, len(work), args.batch):
            ev.evaluate_many(work[i:i + args.batch])
        dt = time.perf_counter() - t0
        speed[name] = {"seconds": dt, "candidates_per_s": len(work) / dt, "candidates": len(work)}
    base = speed["fixed 128 (until now)"]["seconds"]
    for v in speed.values():
        v["time_vs_fixed_128"] = v["seconds"] / base
    result["throughput"] = speed
    result["seconds_per_target_scoring_all"] = seconds_all
    print(write_result("fitness_noise", result))


if __name__ == "__main__":
    main()
