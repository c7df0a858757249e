"""Evolution: LV-BERT's evolutionary algorithm (Yu et al. 2021, §3.3 Algorithm 1) on DEAP.

A random initial population of ``P`` architectures; after every iteration the top-k set (best
``k`` complete candidates over everything evaluated so far, kept by the loop) is the parent
pool, and the next population is ``N_cro`` children of crossover between two distinct random
top-k parents (uniform per slot, one-point or two-point) and ``N_mut`` mutants of a random
top-k parent (:mod:`lvsearch.search.strategies.breeding`). Paper defaults ``P = 50, T = 20,
N_cro = N_mut = 25, p = 0.1, k = 10``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lvsearch.errors import LvsearchError
from lvsearch.search.strategies.base import Strategy

if TYPE_CHECKING:
    from lvsearch.search.evolution import SearchConfig


class Evolution(Strategy):
    """LV-BERT Algorithm 1: crossover and mutation of the top-k."""

    @classmethod
    def resolve(cls, config: "SearchConfig") -> None:
        if config.crossover > 0 and config.topk < 2:
            raise LvsearchError("crossover needs --topk ≥ 2 (two distinct parents)",
                                fix="raise --topk or set --crossover 0")

    def next_population(self) -> list[str]:
        n = self.search.batch_size(self.config.population)
        return self.breeding.offspring(self.search.topk, n) if n else []
