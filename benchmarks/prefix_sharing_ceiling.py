"""Benchmark: the ceiling of prefix sharing in LV-BERT's evolution — no supernet needed.

The prefix cache's speedup on a population is bounded by ``slot runs without sharing /
distinct prefixes to compute`` (the per-candidate MLM head is extra, fixed cost). This script
runs the real search engine (``lvsearch.search.evolution.Search``: Algorithm 1 on DEAP, paper
defaults P = 50, T = 20, N_cro = N_mut = 25, p = 0.1, k = 10) with a cheap synthetic fitness
(agreement with a hidden target architecture + a deterministic per-key jitter) and counts,
for every iteration:

* ``within``: distinct prefixes of the population (what the trie evaluator computes);
* ``retain_topk``: the same, minus prefixes of the current top-k kept from earlier iterations
  (a cross-iteration cache of the parents' states, the strongest cheap retention policy).

Ratio = ``P × N`` slot runs / prefixes computed. Writes
``benchmarks/results/prefix_sharing_ceiling.json``. Not a test; runs in seconds.

Usage: ``python benchmarks/prefix_sharing_ceiling.py``
"""

from __future__ import annotations

import random
import sys
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine, write_result  # noqa: E402


def run(space_name: str, crossover_kind: str, seed: int) -> dict:
    from lvsearch.arch import Arch
    from lvsearch.search.evaluator import FunctionEvaluator
    from lvsearch.search.evolution import Search, SearchConfig
    from lvsearch.space import SearchSpace

    space = SearchSpace.load(space_name)
    target = space.sample(random.Random(1000 + seed))

    def fitness(a) -> float:
        agree = sum(x == y for x, y in zip(a.ops, target.ops)) / a.num_slots
        return agree + (zlib.crc32(a.key.encode()) % 1000) / 1e5

    class Counting(FunctionEvaluator):
        def __init__(self):
            super().__init__(fitness)
            self.rows = []
            self.kept: set[str] = set()

        def _compute(self, archs):
            n = archs[0].num_slots
            prefixes = {a.prefix(d).key for a in archs for d in range(1, n + 1)}
            self.rows.append({"candidates": len(archs), "plain": len(archs) * n, "within": len(prefixes),
                              "retain_topk": len(prefixes - self.kept)})
            out = super()._compute(archs)
            known = {k: r for k, r in self.memo.items() if r.fitness is not None} | out
            top = sorted(known, key=lambda k: (-known[k].fitness, k))[:10]
            self.kept = {Arch.from_key(k).prefix(d).key for k in top for d in range(1, n)}
            return out

    ev = Counting()
    Search(space, ev, SearchConfig(population=50, iterations=20, topk=10, crossover_kind=crossover_kind,
                                   seed=seed)).run()
    plain = sum(r["plain"] for r in ev.rows)
    return {
        "space": space_name, "crossover": crossover_kind, "seed": seed, "slots": space.num_slots,
        "ratio_within_population": plain / sum(r["within"] for r in ev.rows),
        "ratio_retain_topk": plain / sum(r["retain_topk"] for r in ev.rows),
        "ratio_first_population": ev.rows[0]["plain"] / ev.rows[0]["within"],
        "per_iteration": ev.rows,
    }


def main() -> None:
    runs = [run(space, kind, seed)
            for space in ("lvbert@12", "lvbert", "lvbert-elc@12")
            for kind in ("uniform", "one-point")
            for seed in (0, 1, 2)]
    summary = {}
    for r in runs:
        key = f"{r['space']} {r['crossover']}"
        summary.setdefault(key, {"within": [], "retain_topk": []})
        summary[key]["within"].append(round(r["ratio_within_population"], 3))
        summary[key]["retain_topk"].append(round(r["ratio_retain_topk"], 3))
    for k, v in summary.items():
        print(f"{k:28s} within population {v['within']}  + retained top-k prefixes {v['retain_topk']}")
    print(write_result("prefix_sharing_ceiling", {"machine": machine(), "summary": summary, "runs": runs}))


if __name__ == "__main__":
    main()
