"""NSGA-II (Deb et al. 2002, ``deap.tools.selNSGA2``) on (fitness ↑, params, FLOPs or predicted
latency ↓).

Offspring (crossover and mutation of random parents of the current parent population) are
evaluated and ``selNSGA2(parents + offspring, P)`` keeps the next parents; the Pareto front of
everything evaluated is written to ``pareto.json``. The top-k the loop keeps is ranked by
fitness alone, as for every strategy.
"""

from __future__ import annotations

from deap import tools

from lvsearch.arch import Arch
from lvsearch.errors import LvsearchError
from lvsearch.search.evaluator import EvalResult
from lvsearch.search.strategies.base import Strategy
from lvsearch.search.strategies.breeding import arch_of


class NSGA2(Strategy):
    """Non-dominated sorting of parents + offspring on two objectives."""

    multi_objective = True

    def __init__(self, search):
        super().__init__(search)
        self.parents: list[str] = []  # the parent population (keys)

    def values(self, r: EvalResult) -> tuple:
        """``(fitness, cost)``; cost = params, FLOPs per token or predicted latency in ms
        (``nsga2_cost``).

        Raises:
            LvsearchError: the evaluator gives no such cost (no counts, or no latency table).
        """
        cost = {"params": r.params, "flops": r.flops, "latency": r.latency_ms}[self.config.nsga2_cost]
        if cost is None:
            raise LvsearchError(f"NSGA-II minimises {self.config.nsga2_cost}, which this evaluator does not give",
                                fix="pass --latency-table for --nsga2-cost latency; else use --strategy evolution")
        return (r.fitness, float(cost))

    def after_batch(self, keys: list[str]) -> None:
        union = [self.breeding.individual(Arch.from_key(k)) for k in dict.fromkeys(self.parents + keys)]
        chosen = tools.selNSGA2(union, self.config.population)
        self.parents = [arch_of(i).key for i in chosen]

    def next_population(self) -> list[str]:
        n = self.search.batch_size(self.config.population)
        return self.breeding.offspring(self.parents, n) if n else []

    def state(self) -> dict[str, list[str]]:
        return {"parents": self.parents}

    def load(self, state: dict) -> list[str]:
        self.parents = [str(k) for k in state["parents"]]
        return list(self.parents)

    def pareto(self) -> list[EvalResult]:
        """Non-dominated set of everything evaluated (fitness ↑, cost ↓), by increasing cost."""
        memo = self.search.evaluator.memo
        inds = [self.breeding.individual(Arch.from_key(h["key"])) for h in self.search.history]
        inds = [i for i in inds if i.fitness.valid]
        if not inds:
            return []
        front = tools.sortNondominated(inds, len(inds), first_front_only=True)[0]
        res = [memo[arch_of(i).key] for i in front]
        return sorted(res, key=lambda r: (self.values(r)[1], -r.fitness, r.key))

    def files(self) -> dict[str, dict]:
        return {"pareto.json": {
            "objectives": [f"{self.search.fitness_label} (max)",
                           ("latency ms" if self.config.nsga2_cost == "latency" else self.config.nsga2_cost) + " (min)"],
            "front": [r.to_dict() for r in self.pareto()],
        }}
