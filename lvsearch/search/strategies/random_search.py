"""Random search: every iteration ``P`` new uniformly sampled architectures.

The control of every other strategy: the same outputs and the same number of evaluations (or,
with a budget, the same dev-sequence passes; ``evolve --compare-random`` gives it the EA's
seed, so the same first population).
"""

from __future__ import annotations

from lvsearch.search.strategies.base import Strategy


class RandomSearch(Strategy):
    """``P`` fresh uniform samples per iteration."""

    def next_population(self) -> list[str]:
        return self.breeding.random_population()
