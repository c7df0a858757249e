"""Fitness of architectures with weights inherited from a supernet: memo + prefix cache.

Fitness (LV-BERT, Yu et al. 2021, §3.3 and Algorithm 1): the masked-language-model accuracy of
an architecture on a fixed, pre-masked dev subset, computed with the supernet's shared weights
(single-path one-shot NAS, Guo et al. 2020) in eval mode (no dropout) under
``torch.inference_mode()``. Alongside it the evaluator reports the dev MLM loss (nats per
target), the parameter count of the path and its forward FLOPs per token.

Two things make a population cheap to score:

* **Memo.** Results are kept by canonical key (:attr:`Arch.key`); an architecture that was
  scored once is never run again (DEAP itself would re-evaluate duplicates).
* **Prefix cache.** Slot ``n``'s output ``h_n`` depends only on slots ``1..n`` (their ops and
  inputs) and on the fixed dev batch. With ELC connectivity slot ``n`` may read any of
  ``h_0..h_{n-1}``, so the unit of reuse is the whole state list ``h_0..h_n`` of a prefix
  (identified by ``arch.prefix(n).key``). A batch of candidates is scored as a trie over slot
  prefixes, depth-first: each trie node runs its slot once and all candidates below it share
  the result. States are kept along the current trie path only while
  ``(depth + 1) × bytes_per_state`` fits in ``cache_bytes``; below that depth every candidate
  finishes on its own (plain evaluation).

Exactness: every candidate's computation is the same sequence of ops on the same tensors
whether or not its prefix is shared (a slot sees bit-identical inputs), and per-chunk sums are
accumulated in the same order, so cached and uncached fitness are equal as floats (tested
with ``==``). With per-op α̂ (supernet ``model.mixing_per_op``) slot ``n``'s mixing row is
chosen by slot ``n``'s op, which is part of the trie key ``(ops[n-1], inputs[n-1])`` and of
``arch.prefix(n).key``, so the cache stays exact there too (tested).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Callable, Sequence

from lvsearch.arch import Arch
from lvsearch.errors import LvsearchError


@dataclass(frozen=True)
class EvalResult:
    """Score of one architecture.

    Attributes:
        key: :attr:`Arch.key`.
        fitness: MLM accuracy on the fixed dev set, in [0, 1] (or the value of a plain fitness
            function); ``None`` when the candidate was rejected.
        loss: dev MLM cross-entropy, nats per target (``None`` for plain functions/rejected).
        params: parameters on the path (embeddings and head once, see ``Supernet.num_params``).
        flops: forward FLOPs per token (matmul FLOPs, 2 per multiply-add).
        targets: number of masked positions scored.
        rejected: the violated constraint, or ``None``.
    """

    key: str
    fitness: float | None
    loss: float | None = None
    params: int | None = None
    flops: float | None = None
    targets: int | None = None
    rejected: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "EvalResult":
        return cls(**{k: d.get(k) for k in ("key", "fitness", "loss", "params", "flops", "targets", "rejected")})


@dataclass(frozen=True)
class Constraints:
    """Optional resource limits; a candidate above a limit is rejected before evaluation.

    Attributes:
        max_params: maximum parameters on the path (``Supernet.num_params``), or None.
        max_flops: maximum forward FLOPs per token at the supernet's seq_len, or None.
        min_params: minimum parameters on the path, or None; with ``max_params`` it holds a
            search to one size band (equal-size comparisons, e.g. a reference's count ± 5%).
    """

    max_params: int | None = None
    max_flops: float | None = None
    min_params: int | None = None

    def violation(self, params: int | None, flops: float | None) -> str | None:
        """A readable reason when ``params``/``flops`` exceed a limit, else None."""
        if self.max_params is not None and params is not None and params > self.max_params:
            return f"params {params:,} > max {self.max_params:,}"
        if self.min_params is not None and params is not None and params < self.min_params:
            return f"params {params:,} < min {self.min_params:,}"
        if self.max_flops is not None and flops is not None and flops > self.max_flops:
            return f"flops/token {flops:,.0f} > max {self.max_flops:,.0f}"
        return None


@dataclass
class EvalStats:
    """Counters of an evaluator (cumulative)."""

    requested: int = 0  # candidates passed to evaluate_many
    memo_hits: int = 0  # of which already known
    rejected: int = 0  # of which violated a constraint
    computed: int = 0  # of which were scored now (over all ranks)
    slot_runs: int = 0  # run_slot calls on this rank (per dev chunk)
    seconds: float = 0.0  # wall time spent computing on this rank

    def to_dict(self) -> dict:
        return asdict(self)


class BaseEvaluator:
    """Memo, constraints, distributed sharding; subclasses implement :meth:`_compute`.

    ``info`` is a :class:`lvsearch.train.distributed.DistInfo`; when it spans several processes,
    :meth:`evaluate_many` shards the candidates to be computed by whole prefix subtrees
    (:func:`shard_subtrees`), each rank computes its share and the results are all-gathered, so
    every rank ends with the same memo.
    """

    def __init__(self, constraints: Constraints | None = None, info=None):
        self.constraints = constraints or Constraints()
        self.info = info
        self.memo: dict[str, EvalResult] = {}
        self.stats = EvalStats()
        self._costs: dict[str, tuple[int | None, float | None]] = {}

    # ---------------------------------------------------------------- costs / constraints
    def _cost(self, arch: Arch) -> tuple[int | None, float | None]:
        return None, None

    def cost(self, arch: Arch) -> tuple[int | None, float | None]:
        """``(params, flops_per_token)`` of ``arch`` (None when unknown)."""
        c = self._costs.get(arch.key)
        if c is None:
            c = self._costs[arch.key] = self._cost(arch)
        return c

    def violation(self, arch: Arch) -> str | None:
        """The constraint ``arch`` violates, or None (no evaluation is run)."""
        return self.constraints.violation(*self.cost(arch))

    # ---------------------------------------------------------------- evaluation
    def evaluate(self, arch: Arch) -> EvalResult:
        """Score one architecture (see :meth:`evaluate_many`)."""
        return self.evaluate_many([arch])[0]

    def evaluate_many(self, archs: Sequence[Arch]) -> list[EvalResult]:
        """Score ``archs`` (results in the same order).

        Known keys come from the memo; candidates violating a constraint get an
        :class:`EvalResult` with ``fitness=None`` and ``rejected`` set (and are not run); the
        rest are computed once each, together (prefix cache), sharded over ranks when
        distributed, and added to the memo.
        """
        self.stats.requested += len(archs)
        pending: dict[str, Arch] = {}
        for a in archs:
            if a.key in self.memo or a.key in pending:
                self.stats.memo_hits += 1
                continue
            why = self.violation(a)
            if why is not None:
                params, flops = self.cost(a)
                self.memo[a.key] = EvalResult(a.key, None, params=params, flops=flops, rejected=why)
                self.stats.rejected += 1
                continue
            pending[a.key] = a
        if pending:
            todo = [pending[k] for k in sorted(pending)]
            t0 = time.perf_counter()
            if self.info is not None and self.info.enabled:
                import torch.distributed as dist

                mine = shard_subtrees(todo, self.info.world_size)[self.info.rank]
                local = self._compute(mine) if mine else {}
                gathered: list = [None] * self.info.world_size
                dist.all_gather_object(gathered, {k: r.to_dict() for k, r in local.items()})
                results = {k: EvalResult.from_dict(v) for part in gathered for k, v in part.items()}
            else:
                results = self._compute(todo)
            self.stats.seconds += time.perf_counter() - t0
            for k in sorted(results):
                self.memo[k] = results[k]
            self.stats.computed += len(results)
        return [self.memo[a.key] for a in archs]

    def _compute(self, archs: list[Arch]) -> dict[str, EvalResult]:
        raise NotImplementedError


class FunctionEvaluator(BaseEvaluator):
    """A plain Python fitness function ``fn(arch) -> float`` behind the same interface (memo,
    constraints, sharding). ``cost(arch) -> (params, flops)`` is optional. Used for toy
    problems with a known optimum and for tests."""

    def __init__(self, fn: Callable[[Arch], float], cost: Callable[[Arch], tuple] | None = None,
                 constraints: Constraints | None = None, info=None):
        super().__init__(constraints, info)
        self.fn, self._cost_fn = fn, cost

    def _cost(self, arch: Arch):
        return self._cost_fn(arch) if self._cost_fn is not None else (None, None)

    def _compute(self, archs: list[Arch]) -> dict[str, EvalResult]:
        out = {}
        for a in archs:
            params, flops = self.cost(a)
            out[a.key] = EvalResult(a.key, float(self.fn(a)), params=params, flops=flops)
        return out


class SupernetEvaluator(BaseEvaluator):
    """MLM dev accuracy of architectures with inherited supernet weights.

    Args:
        supernet: a trained :class:`lvsearch.model.Supernet` (put in eval mode here).
        dev: the fixed masked dev set (``input_ids``, ``labels``: ``(S, L)`` long), e.g.
            ``fixed_dev_set(data, num_sequences=..., seq_len=..., seed=...)`` with the supernet
            run's seq_len and the standard dev masking (:func:`lvsearch.search.job.load_dev`).
        seq_len: sequence length for :meth:`Supernet.flops_per_token` (default: the dev set's L).
        batch_size: dev sequences per forward chunk (None = the whole dev set at once).
        cache_bytes: memory budget of the prefix cache, bytes; one cached state costs
            ``batch_size × L × H × 4`` bytes (fp32).
        use_cache: False scores every candidate from scratch (the reference path).
        constraints: optional parameter / FLOP limits.
        device: where to run (the supernet is moved there).
        info: ``DistInfo`` for distributed evaluation, or None.

    Source: fitness as in LV-BERT (Yu et al. 2021) §3.3; inherited weights as in single-path
    one-shot NAS (Guo et al. 2020).
    """

    def __init__(self, supernet, dev, *, seq_len: int | None = None, batch_size: int | None = None,
                 cache_bytes: int = 512 << 20, use_cache: bool = True, constraints: Constraints | None = None,
                 device="cpu", info=None):
        import torch

        super().__init__(constraints, info)
        if cache_bytes < 0:
            raise LvsearchError(f"cache size must be ≥ 0 bytes, got {cache_bytes}", fix="e.g. --cache-mb 512")
        self.device = torch.device(device)
        self.net = supernet.to(self.device).eval()
        self.seq_len = int(seq_len or dev.input_ids.shape[1])
        self.use_cache, self.cache_bytes = use_cache, int(cache_bytes)
        n = dev.input_ids.shape[0]
        bs = n if not batch_size else min(int(batch_size), n)
        self.chunks = []
        for s in range(0, n, bs):
            ids = dev.input_ids[s:s + bs].to(self.device)
            mask = self.net.padding_mask(ids)
            self.chunks.append((ids, None if bool(mask.all()) else mask, dev.labels[s:s + bs].to(self.device)))
        hidden = self.net.dims.hidden
        self.state_bytes = bs * dev.input_ids.shape[1] * hidden * 4
        self.num_slots = self.net.num_slots

    def _cost(self, arch: Arch):
        return int(self.net.num_params(arch)), float(self.net.flops_per_token(arch, self.seq_len))

    @property
    def cache_depth(self) -> int:
        """How many states ``h_0..h_{d-1}`` the prefix cache may hold at once (0 = no sharing)."""
        if not self.use_cache:
            return 0
        return min(self.num_slots + 1, self.cache_bytes // max(1, self.state_bytes))

    def _compute(self, archs: list[Arch]) -> dict[str, EvalResult]:
        import torch

        from lvsearch.train.objectives import mlm_sums

        for a in archs:
            self.net.space.validate(a)
        sums = {a.key: [0.0, 0, 0] for a in archs}  # loss_sum, correct, count

        def score(arch: Arch, states: list) -> None:
            r = mlm_sums(self.net, self.net.finish(states), labels)
            acc = sums[arch.key]
            acc[0] += float(r["loss_sum"])
            acc[1] += int(r["correct"])
            acc[2] += int(r["count"])

        def finish_alone(arch: Arch, states: list) -> None:
            st = list(states)
            for n in range(len(st), self.num_slots + 1):
                st.append(self.net.run_slot(n, arch, st, mask))
                self.stats.slot_runs += 1
            score(arch, st)

        depth_limit = self.cache_depth

        def dfs(group: list[Arch], states: list) -> None:
            d = len(states) - 1  # slots 1..d are computed
            if d == self.num_slots:
                for a in group:  # unique keys: one arch per leaf
                    score(a, states)
                return
            if len(group) == 1 or len(states) + 1 > depth_limit:
                for a in group:
                    finish_alone(a, states)
                return
            children: dict[tuple, list[Arch]] = {}
            for a in group:  # same slot d+1  <=>  same prefix(d+1).key, given the same prefix(d)
                children.setdefault((a.ops[d], a.inputs[d]), []).append(a)
            for sub in children.values():
                h = self.net.run_slot(d + 1, sub[0], states, mask)
                self.stats.slot_runs += 1
                dfs(sub, states + [h])
                del h

        with torch.inference_mode():
            for ids, mask, labels in self.chunks:
                if depth_limit >= 1:
                    dfs(list(archs), [self.net.embed(ids)])
                else:
                    for a in archs:
                        finish_alone(a, [self.net.embed(ids)])
        out = {}
        for a in archs:
            loss_sum, correct, count = sums[a.key]
            params, flops = self.cost(a)
            out[a.key] = EvalResult(a.key, correct / max(count, 1), loss_sum / max(count, 1),
                                    params, flops, count)
        return out


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
