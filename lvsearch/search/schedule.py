"""How a batch of candidates is scheduled for scoring by a
:class:`~lvsearch.search.evaluator.SupernetEvaluator`: racing, successive halving over dev
targets (:class:`Racing`, the dev sequences permuted with :data:`RACING_ORDER_SEED`), and the
split of a batch over distributed ranks by whole prefix subtrees, so that each rank's prefix
cache still shares work (:func:`shard_subtrees`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from lvsearch.arch import Arch
from lvsearch.errors import LvsearchError

#: Seed of the permutation of the dev sequences under racing (the full set is unchanged).
RACING_ORDER_SEED = 0


@dataclass(frozen=True)
class Racing:
    """Successive halving over dev targets (racing; Jamieson & Talwalkar 2016, as in
    Hyperband, Li et al. 2018): every candidate of a batch is scored on the first ``rungs[0]``
    dev sequences; the best ``1/eta`` of them (at least one) continue to ``rungs[1]``, and so
    on; the survivors of the last rung are scored on the whole dev set. A candidate stopped at
    a rung keeps its partial means (``EvalResult.partial``); a survivor's score is exactly its
    full-set score (the per-chunk sums are the same floats added in the same order).

    Attributes:
        rungs: strictly increasing dev-sequence counts, each below the dev set's size.
        eta: keep fraction ``1/eta`` per rung (``eta`` > 1).
    """

    rungs: tuple[int, ...]
    eta: float = 4.0

    def check(self, dev_sequences: int) -> "Racing":
        """Validated copy. Raises LvsearchError: empty, not increasing, a rung ≥ ``dev_sequences``
        or < 1, ``eta`` ≤ 1."""
        rungs = tuple(int(r) for r in self.rungs)
        if not rungs or any(r < 1 for r in rungs) or any(b <= a for a, b in zip(rungs, rungs[1:])):
            raise LvsearchError(f"racing rungs {list(self.rungs)} must be increasing positive sequence counts",
                                fix="e.g. --racing 128 (score everyone on 128 sequences, the best quarter on all)")
        if rungs[-1] >= dev_sequences:
            raise LvsearchError(f"racing rung {rungs[-1]} is not below --dev-sequences {dev_sequences}",
                                fix="raise --dev-sequences or lower the rungs")
        if not self.eta > 1:
            raise LvsearchError(f"racing keep factor eta must be > 1, got {self.eta}", fix="e.g. --racing-eta 4")
        return Racing(rungs, float(self.eta))

    def survivors(self, n: int, floor: int = 0) -> int:
        """How many of ``n`` candidates continue past one rung: the best ``1/eta`` (at least
        one), and at least ``floor`` of them (all ``n`` if fewer)."""
        return max(1, math.ceil(n / self.eta), min(n, floor))


def shard_subtrees(archs: Sequence[Arch], world_size: int) -> list[list[Arch]]:
    """Split candidates over ``world_size`` ranks by whole prefix subtrees.

    The split depth ``d`` is the smallest with at least ``world_size`` distinct prefixes
    ``arch.prefix(d).key`` (or the full depth); groups sharing a depth-``d`` prefix stay on one
    rank, so the prefix cache still works there. Groups are assigned largest first to the
    least-loaded rank (ties: lower rank), deterministically on every rank. Returns one list per
    rank (possibly empty), each in the input order.
    """
    archs = list(archs)
    if world_size <= 1 or not archs:
        return [archs] + [[] for _ in range(max(0, world_size - 1))]
    n = archs[0].num_slots
    groups: dict[str, list[Arch]] = {}
    for d in range(1, n + 1):
        groups = {}
        for a in archs:
            groups.setdefault(a.prefix(d).key, []).append(a)
        if len(groups) >= world_size:
            break
    order = sorted(groups, key=lambda k: (-len(groups[k]), k))
    loads = [0] * world_size
    ranks: list[list[Arch]] = [[] for _ in range(world_size)]
    for k in order:
        r = min(range(world_size), key=lambda i: (loads[i], i))
        ranks[r].extend(groups[k])
        loads[r] += len(groups[k])
    pos = {a.key: i for i, a in enumerate(archs)}
    return [sorted(r, key=lambda a: pos[a.key]) for r in ranks]
