"""Benchmark: prefix cache of the search evaluator — candidates/s with vs without sharing.

Two populations of 50 architectures of a trained supernet's space (``lvbert``, sequential):

1. ``random``: 50 uniform samples (the EA's initial population / random search);
2. ``ea``: the population of a late iteration of LV-BERT's evolution (25 crossover + 25
   mutation children of the top-10), produced by running the search for ``--generations``
   iterations with the cached evaluator; children share long prefixes with their parents.

Each population is scored by a fresh ``SupernetEvaluator`` (empty memo) with the prefix cache
(``use_cache=True``) and without (``use_cache=False``, every candidate from the embedding up),
interleaved, ``--repeats`` times; the medians are reported with ``slot_runs`` (slot forward
passes) and the check that both give identical fitness and loss (``==`` on floats).
Writes ``benchmarks/results/prefix_cache.json``. Not a test.

Usage: ``python benchmarks/prefix_cache.py --supernet RUN [--dev-sequences 64] [--repeats 2]``
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine, write_result  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--supernet", required=True)
    ap.add_argument("--data", default=None)
    ap.add_argument("--dev-sequences", type=int, default=64)
    ap.add_argument("--population", type=int, default=50)
    ap.add_argument("--generations", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()

    import torch

    from lvsearch.arch import Arch
    from lvsearch.search.evaluator import SupernetEvaluator
    from lvsearch.search.evolution import Search, SearchConfig
    from lvsearch.train.supernet import load_dev
    from lvsearch.train.supernet import load_supernet

    torch.set_num_threads(args.threads)
    loaded = load_supernet(args.supernet)
    dev, _ = load_dev(loaded, args.data, args.dev_sequences)
    space = loaded.space
    rng = random.Random(0)
    pops = {"random": []}
    seen = set()
    while len(pops["random"]) < args.population:
        a = space.sample(rng)
        if a.key not in seen:
            seen.add(a.key)
            pops["random"].append(a)
    # An EA population: run the real search (cached evaluator) and take the last population.
    gen_eval = SupernetEvaluator(loaded.supernet, dev, seq_len=loaded.config.train.seq_len)
    cfg = SearchConfig(population=args.population, iterations=args.generations, topk=10, seed=0)
    t0 = time.perf_counter()
    res = Search(space, gen_eval, cfg).run()
    gen_seconds = time.perf_counter() - t0
    last = [h["key"] for h in res.history if h["iteration"] == args.generations - 1]
    pops["ea"] = [Arch.from_key(k) for k in last]

    out: dict = {"machine": machine(), "load_average_start": os.getloadavg(), "supernet": str(Path(args.supernet).resolve()),
                 "supernet_step": loaded.step, "space": space.name, "dims": loaded.dims.to_dict(),
                 "dev_sequences": int(dev.input_ids.shape[0]), "seq_len": int(dev.input_ids.shape[1]),
                 "population": args.population, "ea_generations": args.generations,
                 "ea_generation_seconds": gen_seconds, "populations": {}}
    for name, archs in pops.items():
        times = {"cached": [], "uncached": []}
        runs, results = {}, {}
        for rep in range(args.repeats):
            for mode in (("cached", "uncached") if rep % 2 == 0 else ("uncached", "cached")):
                ev = SupernetEvaluator(loaded.supernet, dev, seq_len=loaded.config.train.seq_len,
                                       use_cache=mode == "cached")
                t0 = time.perf_counter()
                r = ev.evaluate_many(archs)
                times[mode].append(time.perf_counter() - t0)
                runs[mode], results[mode] = ev.stats.slot_runs, r
        exact = all(a.fitness == b.fitness and a.loss == b.loss for a, b in zip(results["cached"], results["uncached"]))
        med = {m: statistics.median(v) for m, v in times.items()}
        prefixes = {a.prefix(n).key for a in archs for n in range(1, space.num_slots + 1)}
        out["populations"][name] = {
            "candidates": len(archs),
            "distinct_prefixes": len(prefixes),
            "slot_runs": runs,
            "seconds": times,
            "candidates_per_s": {m: len(archs) / med[m] for m in med},
            "speedup": med["uncached"] / med["cached"],
            "slot_run_ratio": runs["uncached"] / runs["cached"],
            "exact": exact,
        }
        print(f"{name}: {out['populations'][name]['candidates_per_s']} speedup {out['populations'][name]['speedup']:.2f}x "
              f"slot runs {runs} exact {exact}", flush=True)
    out["load_average_end"] = os.getloadavg()
    print(write_result("prefix_cache", out))


if __name__ == "__main__":
    main()
