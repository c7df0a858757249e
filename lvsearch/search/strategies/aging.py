"""Aging evolution (regularized evolution, Real et al. 2019, Algorithm 1).

The population is a queue of the ``P`` most recently evaluated architectures (first the random
initial population). Every child is made by tournament selection — ``S`` members drawn
uniformly without replacement, the one with the best fitness is the parent (ties: the first
drawn) — and mutation; after it is evaluated it joins the queue and the oldest member leaves,
so the queue always holds ``P`` architectures and every one dies after ``P`` newer evaluations,
however good its (noisy) fitness. Under racing the members of a tournament are compared on the
deepest racing level all of them reached (the same dev targets,
:func:`lvsearch.search.evaluator.same_target_keys`). Children are evaluated ``cycle`` at a time
(one batch for the prefix cache); an iteration makes ``P`` children, so ``P × T`` evaluations
as for the other strategies. The queue is saved in the state.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from lvsearch.arch import Arch
from lvsearch.errors import LvsearchError
from lvsearch.search.evaluator import same_target_keys
from lvsearch.search.strategies.base import Strategy

if TYPE_CHECKING:
    from lvsearch.search.evolution import SearchConfig


class Aging(Strategy):
    """Tournament of ``S`` queue members, mutate the winner, the oldest member leaves."""

    settings = ("tournament", "cycle")

    def __init__(self, search):
        super().__init__(search)
        self.queue: list[str] = []  # the population, oldest first

    @classmethod
    def resolve(cls, config: "SearchConfig") -> None:
        """Defaults ``S = max(2, P // 4)``, ``cycle = max(1, P // 4)``; both in 1..P."""
        c = config
        c.tournament = max(2, c.population // 4) if c.tournament is None else c.tournament
        c.cycle = max(1, c.population // 4) if c.cycle is None else c.cycle
        if not 1 <= c.tournament <= c.population:
            raise LvsearchError(f"--tournament {c.tournament} must be between 1 and --population {c.population}",
                                fix=f"e.g. --tournament {max(2, c.population // 4)}")
        if not 1 <= c.cycle <= c.population:
            raise LvsearchError(f"--cycle {c.cycle} must be between 1 and --population {c.population}",
                                fix=f"e.g. --cycle {max(1, c.population // 4)}")

    def child(self) -> list:
        """One child (as DEAP's list of individuals): tournament of ``S`` queue members, the
        winner mutated. The members are compared on the dev targets all of them were scored on
        (:func:`same_target_keys`: racing leaves them at different levels); ties: the first drawn."""
        drawn = random.sample(self.queue, self.config.tournament)
        keys = same_target_keys([self.search.evaluator.memo[k] for k in drawn])
        best = drawn[max(range(len(drawn)), key=lambda i: (keys[i], -i))]
        tb = self.breeding.toolbox
        return list(tb.mutate(tb.clone(self.breeding.individual(Arch.from_key(best)))))

    def evaluate(self, population: list[str]) -> list[str]:
        """The first iteration scores the random population, which becomes the queue; every
        later one makes ``P`` children, ``cycle`` at a time: each batch is drawn from the
        current queue, scored, then pushed (oldest members leave) before the next is drawn.
        Under a budget the iteration ends early once the next batch no longer fits (the last
        one cut)."""
        if self.search.iteration == 0:
            self.queue = list(super().evaluate(population))
            return population
        c = self.config
        made: list[str] = []
        while len(made) < c.population:
            size = self.search.batch_size(min(c.cycle, c.population - len(made)))
            if size == 0:
                break
            batch: list[str] = []
            taken = set(made)
            for _ in range(size):
                a = self.breeding.draw(self.child, taken)[0]
                taken.add(a.key)
                batch.append(a.key)
            self.search.score(batch)
            for k in batch:
                self.queue.append(k)
                if len(self.queue) > c.population:
                    self.queue.pop(0)
            made += batch
        return made

    def next_population(self) -> list[str]:
        return []  # the children depend on the queue as it ages: drawn in evaluate()

    def state(self) -> dict[str, list[str]]:
        return {"queue": self.queue}

    def load(self, state: dict) -> list[str]:
        self.queue = [str(k) for k in state.get("queue", [])]
        return list(self.queue)
