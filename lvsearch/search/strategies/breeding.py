"""The children policy every strategy shares, on DEAP: new, valid, unseen architectures.

An architecture is a DEAP individual: the list of its ``(op, inputs, variant)`` slots (slots are
immutable tuples, so a shallow copy is a full clone). The toolbox registers ``mate`` =
``deap.tools.cxUniform(indpb=0.5)`` / ``cxOnePoint`` / ``cxTwoPoint`` on the slot list (children
stay valid: slot n's inputs only refer to 0..n−1), ``mutate`` = :meth:`SearchSpace.mutate`
(each slot's op re-drawn with ``p``, each optional input of elc spaces flipped with its own rate)
or :meth:`SearchSpace.mutate_one_op`, and ``clone``.

A child that violates a constraint (max params/FLOPs) or duplicates an architecture already
evaluated in this search or already drawn for the next population is discarded and re-drawn
(new parents, new crossover/mutation); after ``max_redraws`` failures a uniformly random
architecture is drawn instead. So every batch holds new, valid architectures; nothing invalid
is ever kept. All randomness is Python's global ``random`` (which DEAP's operators use).
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Callable

from deap import base, creator, tools

from lvsearch.arch import Arch
from lvsearch.errors import LvsearchError

if TYPE_CHECKING:
    from lvsearch.search.evolution import Search
    from lvsearch.search.strategies.base import Strategy


def deap_creator():
    """DEAP's ``creator`` with lvsearch's classes: ``LvsFitnessMax``/``LvsIndividual`` (one
    fitness, maximised) and ``LvsFitnessMO``/``LvsIndividualMO`` (weights ``(1, −1)``: fitness ↑,
    cost ↓); each an individual is a list of ``(op, inputs, variant)`` slots."""
    if not hasattr(creator, "LvsFitnessMax"):
        creator.create("LvsFitnessMax", base.Fitness, weights=(1.0,))
        creator.create("LvsIndividual", list, fitness=creator.LvsFitnessMax)
        creator.create("LvsFitnessMO", base.Fitness, weights=(1.0, -1.0))
        creator.create("LvsIndividualMO", list, fitness=creator.LvsFitnessMO)
    return creator


def arch_of(ind) -> Arch:
    """The architecture of a DEAP individual (its slot list)."""
    return Arch(tuple(s[0] for s in ind), tuple(s[1] for s in ind), tuple(s[2] for s in ind))


class Breeding:
    """DEAP individuals, operators and the re-draw policy of one search.

    Args:
        search: the :class:`~lvsearch.search.evolution.Search` (its space, evaluator memo,
            constraints, the keys it has evaluated, its budget and progress callback).
        strategy: the strategy whose objectives (:meth:`Strategy.values`) an individual's
            fitness holds.
    """

    def __init__(self, search: "Search", strategy: "Strategy"):
        self.search, self.strategy = search, strategy
        self.config = search.config
        made = deap_creator()
        self.Individual = made.LvsIndividualMO if strategy.multi_objective else made.LvsIndividual
        tb = base.Toolbox()
        kind = self.config.crossover_kind
        if kind == "uniform":
            tb.register("mate", tools.cxUniform, indpb=0.5)
        elif kind == "one-point":
            tb.register("mate", tools.cxOnePoint)
        else:
            tb.register("mate", tools.cxTwoPoint)
        tb.register("mutate", self.mutate)
        tb.register("clone", self.Individual)  # slots are immutable tuples: a shallow copy is a clone
        self.toolbox = tb

    def individual(self, arch: Arch):
        """``arch`` as an individual, its fitness set from the memo when it was scored."""
        ind = self.Individual(zip(arch.ops, arch.inputs, arch.variants))
        r = self.search.evaluator.memo.get(arch.key)
        if r is not None and r.fitness is not None:
            ind.fitness.values = self.strategy.values(r)
        return ind

    def mutate(self, ind):
        """The configured mutation move on ``ind`` in place (DEAP's ``(ind,)`` convention)."""
        c, arch = self.config, arch_of(ind)
        if c.mutation_kind == "one-op":
            child = self.search.space.mutate_one_op(arch, random)
        else:
            child = self.search.space.mutate(arch, random, c.mutation_prob, input_p=c.input_mutation_prob)
        ind[:] = list(zip(child.ops, child.inputs, child.variants))
        return (ind,)

    def acceptable(self, arch: Arch, taken: set[str]) -> bool:
        """New to this search and to ``taken``, and within the constraints."""
        s = self.search
        return arch.key not in s.seen and arch.key not in taken and s.evaluator.violation(arch) is None

    def random_new(self, taken: set[str], sparse: bool = False) -> Arch:
        """A uniformly random acceptable architecture (``sparse``: a sparse-mixing draw,
        :meth:`SearchSpace.sample_sparse`); under ``--max-latency`` a draw above the limit is
        first moved below it (``BaseEvaluator.within_latency``).

        Raises:
            LvsearchError: none found in ``max(1000, 10 × max_redraws)`` tries (the space, or its
                part within the constraints, is smaller than the search needs).
        """
        s = self.search
        tried = max(1000, 10 * self.config.max_redraws)
        for _ in range(tried):
            a = s.space.sample_sparse(random) if sparse else s.space.sample(random)
            if self.acceptable(a, taken):
                return a
            if s.evaluator.violation(a) is not None:  # under --max-latency: move the draw below the limit
                moved = s.evaluator.within_latency(a, s.space, random)
                if moved is not None and self.acceptable(moved, taken):
                    return moved
        limits = getattr(s.evaluator, "constraints", None)
        if limits is None or limits.switches() == "no constraint":
            raise LvsearchError(f"could not draw a new architecture in {tried} tries ({len(s.seen)} evaluated so far): "
                                f"the space {s.space.name} holds too few architectures for this search",
                                fix="use a smaller --population/--iterations for this space, or a space with more slots")
        raise LvsearchError(
            f"could not draw a new architecture within {limits.switches()} in {tried} tries "
            f"({len(s.seen)} evaluated so far, {len(taken)} more drawn for this batch): the architectures of "
            "this space that fit are fewer than the search needs",
            fix=f"{limits.relax_fix()}, or use a smaller --population/--iterations",
        )

    def draw(self, make: Callable[[], list], taken: set[str]) -> list[Arch]:
        """Children from ``make()`` that are acceptable (first of each key), or one random
        architecture after ``max_redraws`` failures."""
        for _ in range(self.config.max_redraws):
            good = [a for a in (arch_of(i) for i in make()) if self.acceptable(a, taken)]
            uniq = []
            for a in good:
                if a.key not in {u.key for u in uniq}:
                    uniq.append(a)
            if uniq:
                return uniq
        return [self.random_new(taken)]

    def offspring(self, parents: list[str], n: int) -> list[str]:
        """``n`` children of ``parents`` (keys): ``N_cro`` by crossover of two distinct random
        parents, then ``N_mut`` mutants of a random parent; a budget-cut batch keeps that
        order's first ``n``."""
        pool = [self.individual(Arch.from_key(k)) for k in parents]
        tb = self.toolbox
        taken: set[str] = set()
        out: list[str] = []

        def mate():
            if len(pool) < 2:  # racing can leave one complete parent after a small first population
                return mutate()
            p1, p2 = random.sample(pool, 2)
            return list(tb.mate(tb.clone(p1), tb.clone(p2)))

        def mutate():
            (p,) = tools.selRandom(pool, 1)
            return list(tb.mutate(tb.clone(p)))

        n_cro = min(self.config.crossover, n)
        for want, make in ((n_cro, mate), (n - n_cro, mutate)):
            made = 0
            while made < want:
                for a in self.draw(make, taken):
                    if made < want:
                        taken.add(a.key)
                        out.append(a.key)
                        made += 1
        return out

    def random_population(self, sparse_share: float = 0.0) -> list[str]:
        """``P`` uniformly random acceptable architectures (fewer where the budget is short),
        reported to the search's ``on_progress``; the first ``round(sparse_share × P)`` of them
        are sparse-mixing draws (:meth:`SearchSpace.sample_sparse`; ``evolve --sparse-init``)."""
        s = self.search
        taken: set[str] = set()
        out = []
        n = s.batch_size(self.config.population)
        n_sparse = round(sparse_share * self.config.population)
        for i in range(n):
            a = self.random_new(taken, sparse=i < n_sparse)
            taken.add(a.key)
            out.append(a.key)
            if s.on_progress is not None:
                s.on_progress(f"iteration {s.iteration + 1}: drawing {n:,} architectures", i + 1, n)
        return out
