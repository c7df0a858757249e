"""The contract between a search strategy and the loop that runs it (:class:`Search`).

Per iteration the loop calls ``keys = strategy.evaluate(population)`` (score this iteration's
candidates; the default scores the population the strategy drew last time in one batch), adds
the new keys to the history, updates the top-k (best ``k`` complete candidates over everything
evaluated, ranked by fitness alone), calls ``strategy.after_batch(keys)``, records the curve
point, saves, and asks ``strategy.next_population()`` for the next iteration's candidates. A
fresh search starts from ``strategy.initial_population()``. What a strategy keeps between
iterations (NSGA-II's parents, aging's queue) it writes with :meth:`Strategy.state` and reads
back with :meth:`Strategy.load`, so a resumed search continues exactly.

A new strategy is a module with a :class:`Strategy` subclass and its entry in
:data:`lvsearch.search.strategies.STRATEGIES`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, ClassVar

from lvsearch.search.strategies.breeding import Breeding

if TYPE_CHECKING:
    from lvsearch.search.evaluator import EvalResult
    from lvsearch.search.evolution import Search, SearchConfig


class Strategy(ABC):
    """One search algorithm: how populations are made from what was evaluated.

    Class attributes:
        multi_objective: whether individuals hold ``(fitness, cost)`` (:meth:`values`) and the
            search reports a Pareto front.
        settings: the :class:`SearchConfig` fields only this strategy reads (another strategy
            given one of them is refused).

    Attributes:
        search: the running :class:`Search` (space, evaluator memo, top-k, seen keys, budget).
        breeding: its :class:`Breeding` (DEAP operators and the re-draw policy).
    """

    multi_objective: ClassVar[bool] = False
    settings: ClassVar[tuple[str, ...]] = ()

    def __init__(self, search: "Search"):
        self.search = search
        self.config = search.config
        self.breeding = Breeding(search, self)

    @classmethod
    def resolve(cls, config: "SearchConfig") -> None:
        """Fill in and check this strategy's own settings on a config being resolved (in place).

        Raises:
            LvsearchError: a setting outside its range, naming the option and a fix.
        """

    def values(self, r: "EvalResult") -> tuple:
        """The objectives of a scored candidate, as its DEAP fitness values."""
        return (r.fitness,)

    def initial_population(self) -> list[str]:
        """The first population (keys): ``P`` random architectures, the share
        ``sparse_init`` of them sparse-mixing draws, the rest uniform."""
        return self.breeding.random_population(sparse_share=self.config.sparse_init)

    def evaluate(self, population: list[str]) -> list[str]:
        """Score this iteration's candidates (through :meth:`Search.score`) and return their
        keys in evaluation order."""
        self.search.score(population)
        return population

    def after_batch(self, keys: list[str]) -> None:
        """Update what the strategy keeps once ``keys`` were scored and the top-k updated."""

    @abstractmethod
    def next_population(self) -> list[str]:
        """The candidates (keys) the next iteration evaluates; may be empty when
        :meth:`evaluate` draws them itself."""

    def state(self) -> dict[str, list[str]]:
        """What the strategy keeps, as state-file entries (lists of keys)."""
        return {}

    def load(self, state: dict) -> list[str]:
        """Restore :meth:`state` from a state file's dict; returns the keys it holds (each must
        be in the history).

        Raises:
            KeyError, TypeError, ValueError: a missing or malformed entry (a corrupted state).
        """
        return []

    def pareto(self) -> "list[EvalResult]":
        """The non-dominated set of everything evaluated (multi-objective strategies), else []."""
        return []

    def files(self) -> dict[str, dict]:
        """Extra JSON files the search writes beside its state after every iteration (name →
        content)."""
        return {}
