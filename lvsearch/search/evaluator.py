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
from dataclasses import asdict, dataclass, replace
from typing import Callable, Sequence

from lvsearch.arch import Arch
from lvsearch.errors import LvsearchError
from lvsearch.search.fitness import DEFAULT as DEFAULT_FITNESS
from lvsearch.search.fitness import Fitness
from lvsearch.search.schedule import RACING_ORDER_SEED, Racing, shard_subtrees


@dataclass(frozen=True)
class EvalResult:
    """Score of one architecture.

    Attributes:
        key: :attr:`Arch.key`.
        fitness: the search's fitness, higher is better: MLM accuracy on the fixed dev set in
            [0, 1] (``fitness="accuracy"``), minus the mean dev MLM loss (``"loss"``), or the
            value of a plain fitness function; ``None`` when the candidate was rejected.
        loss: dev MLM cross-entropy, nats per target (``None`` for plain functions/rejected).
        params: parameters on the path (embeddings and head once, see ``Supernet.num_params``).
        flops: forward FLOPs per token (matmul FLOPs, 2 per multiply-add).
        targets: number of masked positions scored.
        rejected: the violated constraint, or ``None``.
        accuracy: dev MLM accuracy on those targets, whatever the fitness metric (``None`` for
            plain functions/rejected).
        partial: True when racing stopped the candidate at a lower rung: its scores are means
            over its first ``targets`` targets only, not comparable with complete ones, and a
            search never puts it in its top-k.
        scores: the fitness after each racing level the candidate reached, on the first
            ``rungs[0]``, ``rungs[1]``, … dev sequences and (complete candidates) on all of
            them; the last entry is ``fitness``. Level ``i`` covers the same targets for every
            candidate of one evaluator, so two candidates compare on their deepest common
            level (:func:`same_target_keys`). ``(fitness,)`` without racing; ``None`` for
            entries written before it existed.
        sequences: dev sequences the candidate was scored on: the compute it cost, in
            dev-sequence passes (``None`` for plain functions, which count one per evaluation).
        latency_ms: predicted forward latency in ms per batch (the search's latency table,
            :func:`lvsearch.latency.predict.predict_ms`); ``None`` without a table.
    """

    key: str
    fitness: float | None
    loss: float | None = None
    params: int | None = None
    flops: float | None = None
    targets: int | None = None
    rejected: str | None = None
    accuracy: float | None = None
    partial: bool = False
    scores: tuple[float, ...] | None = None
    sequences: int | None = None
    latency_ms: float | None = None

    @property
    def complete(self) -> bool:
        """Scored (not rejected) on the evaluator's whole target set."""
        return self.fitness is not None and not self.partial

    @property
    def passes(self) -> int:
        """What scoring it cost: its dev sequences, or 1 for a plain function (0 when rejected)."""
        if self.fitness is None:
            return 0
        return self.sequences if self.sequences is not None else 1

    def to_dict(self) -> dict:
        d = asdict(self)
        if d["scores"] is not None:
            d["scores"] = list(d["scores"])
        if d["latency_ms"] is None:  # only with a latency table: other searches' files are unchanged
            del d["latency_ms"]
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "EvalResult":
        """Inverse of :meth:`to_dict`; entries written before ``accuracy``/``partial``/``scores``
        existed (accuracy fitness, always complete; no per-level scores) read as such."""
        r = {k: d.get(k) for k in ("key", "fitness", "loss", "params", "flops", "targets", "rejected", "accuracy",
                                   "sequences", "latency_ms")}
        if r["accuracy"] is None and r["fitness"] is not None and r["loss"] is not None and "accuracy" not in d:
            r["accuracy"] = r["fitness"]  # older states: the fitness was the accuracy
        scores = d.get("scores")
        return cls(**r, partial=bool(d.get("partial", False)),
                   scores=tuple(float(x) for x in scores) if scores is not None else None)


def same_target_keys(results: Sequence[EvalResult]) -> list[tuple]:
    """Sort keys (higher is better) that compare ``results`` on the same dev targets.

    Racing leaves candidates at different levels (:attr:`EvalResult.scores`); a mean over the
    first 64 dev sequences and one over 1024 differ by the subset's offset (about 0.1 nats on
    the quickstart supernet, near the population's SD), so they are never compared. Every
    result is keyed by its score on the deepest level all of them reached: level ``i`` is the
    same dev sequences for every candidate of one evaluator. Results without per-level scores
    (states written before them) fall back to ``(complete, fitness)``: a complete score first.

    Raises:
        ValueError: a rejected result (no fitness) among ``results``.
    """
    if any(r.fitness is None for r in results):
        raise ValueError("a rejected candidate has no fitness to compare")
    if not results:
        return []
    if any(r.scores is None for r in results):
        return [(r.complete, r.fitness) for r in results]
    level = min(len(r.scores) for r in results) - 1
    return [(r.scores[level],) for r in results]


@dataclass(frozen=True)
class Constraints:
    """Optional resource limits; a candidate above a limit is rejected before evaluation.

    Attributes:
        max_params: maximum parameters on the path (``Supernet.num_params``), or None.
        max_flops: maximum forward FLOPs per token at the supernet's seq_len, or None.
        min_params: minimum parameters on the path, or None; with ``max_params`` it holds a
            search to one size band (equal-size comparisons, e.g. a reference's count ± 5%).
        max_latency: maximum predicted latency in ms per batch (the evaluator's latency table),
            or None.
    """

    max_params: int | None = None
    max_flops: float | None = None
    min_params: int | None = None
    max_latency: float | None = None

    def switches(self) -> str:
        """The limits in force as the ``evolve`` switches that set them, e.g. ``--min-params
        1,000,000 and --max-params 1,050,000`` (``no constraint`` when none is set)."""
        parts = [f"{flag} {value:,.0f}" for flag, value in (("--min-params", self.min_params),
                                                           ("--max-params", self.max_params),
                                                           ("--max-flops", self.max_flops)) if value is not None]
        if self.max_latency is not None:
            parts.append(f"--max-latency {self.max_latency:g} ms")
        return " and ".join(parts) or "no constraint"

    def relax_fix(self) -> str:
        """How to let more architectures through, naming every switch in force."""
        if self.min_params is not None and self.max_params is not None:
            how = "widen the size band (lower --min-params and/or raise --max-params)"
        elif self.min_params is not None:
            how = "lower --min-params"
        elif self.max_params is not None or self.max_flops is not None:
            how = "raise " + "/".join(f for f, v in (("--max-params", self.max_params), ("--max-flops", self.max_flops))
                                       if v is not None)
        else:
            how = "use a larger search space"
        if self.max_flops is not None and (self.min_params is not None or self.max_params is not None):
            how += ", or raise --max-flops"
        if self.max_latency is not None:
            how = "raise --max-latency" if how == "use a larger search space" else how + ", or raise --max-latency"
        return how

    def violation(self, params: int | None, flops: float | None, latency_ms: float | None = None) -> str | None:
        """A readable reason when ``params``/``flops``/``latency_ms`` exceed a limit, else None."""
        if self.max_params is not None and params is not None and params > self.max_params:
            return f"params {params:,} > max {self.max_params:,}"
        if self.min_params is not None and params is not None and params < self.min_params:
            return f"params {params:,} < min {self.min_params:,}"
        if self.max_flops is not None and flops is not None and flops > self.max_flops:
            return f"flops/token {flops:,.0f} > max {self.max_flops:,.0f}"
        if self.max_latency is not None and latency_ms is not None and latency_ms > self.max_latency:
            return f"latency {latency_ms:.3f} ms > max {self.max_latency:g} ms"
        return None


@dataclass
class EvalStats:
    """Counters of an evaluator (cumulative)."""

    requested: int = 0  # candidates passed to evaluate_many
    memo_hits: int = 0  # of which already known
    rejected: int = 0  # of which violated a constraint
    computed: int = 0  # of which were scored now (over all ranks)
    passes: int = 0  # dev-sequence passes of those (EvalResult.passes), over all ranks
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

    ``on_progress``, when set, is called as ``on_progress(done, total)`` while a batch is
    computed (``done`` of ``total`` candidate × dev-chunk passes on this rank; the supernet
    evaluator calls it, a :class:`FunctionEvaluator` does not), so a long first population shows
    progress.
    """

    def __init__(self, constraints: Constraints | None = None, info=None, latency_table=None):
        self.constraints = constraints or Constraints()
        self.latency_table = latency_table
        self.info = info
        self.on_progress: Callable[[int, int], None] | None = None
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

    def latency_ms(self, arch: Arch) -> float | None:
        """Predicted latency of ``arch`` from the latency table (ms per batch), or None without one."""
        if self.latency_table is None:
            return None
        from lvsearch.latency.predict import predict_ms

        return predict_ms(arch, self.latency_table)

    def within_latency(self, arch: Arch, space, rng) -> Arch | None:
        """``arch`` moved under ``--max-latency`` by cost-lowering steps
        (:func:`lvsearch.latency.predict.within_latency`), or None: no latency limit, or no
        step left above it. The other constraints are not checked here."""
        limit = self.constraints.max_latency
        if self.latency_table is None or limit is None:
            return None
        from lvsearch.latency.predict import within_latency

        return within_latency(arch, self.latency_table, space, limit, rng)

    def violation(self, arch: Arch) -> str | None:
        """The constraint ``arch`` violates, or None (no evaluation is run)."""
        return self.constraints.violation(*self.cost(arch), self.latency_ms(arch))

    # ---------------------------------------------------------------- evaluation
    def evaluate(self, arch: Arch) -> EvalResult:
        """Score one architecture (see :meth:`evaluate_many`)."""
        return self.evaluate_many([arch])[0]

    def fork(self) -> "BaseEvaluator":
        """The same evaluator (model, dev set, constraints, settings) with an empty memo and
        its own counters: two searches compared with each other each get one, so neither
        inherits the other's scores (a memo hit would skip racing and cost nothing)."""
        import copy

        twin = copy.copy(self)
        twin.memo, twin.stats, twin.on_progress = {}, EvalStats(), None
        return twin

    def batch_passes(self, n: int, min_complete: int = 0) -> int:
        """Exact dev-sequence passes of scoring ``n`` new candidates in one batch: ``n`` for a
        plain function (one per evaluation)."""
        return int(n)

    def evaluate_many(self, archs: Sequence[Arch], min_complete: int = 0) -> list[EvalResult]:
        """Score ``archs`` (results in the same order).

        Known keys come from the memo; candidates violating a constraint get an
        :class:`EvalResult` with ``fitness=None`` and ``rejected`` set (and are not run); the
        rest are computed once each, together (prefix cache), sharded over ranks when
        distributed, and added to the memo. ``min_complete``: under racing, at least this many
        of the computed candidates (all of them if fewer) survive every rung and are scored
        on the whole dev set (a search whose top-k is not yet full asks for the missing ones).
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
                self.memo[a.key] = EvalResult(a.key, None, params=params, flops=flops, rejected=why,
                                              latency_ms=self.latency_ms(a))
                self.stats.rejected += 1
                continue
            pending[a.key] = a
        if pending:
            todo = [pending[k] for k in sorted(pending)]
            t0 = time.perf_counter()
            results = self._compute_all(todo, min_complete)
            self.stats.seconds += time.perf_counter() - t0
            for k in sorted(results):
                if self.latency_table is not None:
                    results[k] = replace(results[k], latency_ms=self.latency_ms(pending[k]))
                self.memo[k] = results[k]
                self.stats.passes += results[k].passes
            self.stats.computed += len(results)
        return [self.memo[a.key] for a in archs]

    def _sharded(self, fn: Callable[[list[Arch]], dict], archs: list[Arch]) -> dict:
        """``fn(archs)`` (a dict keyed by arch key, JSON-able values), computed over ranks by
        whole prefix subtrees and all-gathered when distributed, so every rank gets all of it."""
        if self.info is None or not self.info.enabled:
            return fn(archs)
        import torch.distributed as dist

        mine = shard_subtrees(archs, self.info.world_size)[self.info.rank]
        local = fn(mine) if mine else {}
        gathered: list = [None] * self.info.world_size
        dist.all_gather_object(gathered, local)
        return {k: v for part in gathered for k, v in part.items()}

    def _compute_all(self, archs: list[Arch], min_complete: int = 0) -> dict[str, EvalResult]:
        """Results of the candidates not in the memo (sharded over ranks when distributed);
        ``min_complete`` matters only under racing."""
        got = self._sharded(lambda a: {k: r.to_dict() for k, r in self._compute(a).items()}, archs)
        return {k: EvalResult.from_dict(v) for k, v in got.items()}

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
            fit = float(self.fn(a))
            out[a.key] = EvalResult(a.key, fit, params=params, flops=flops, scores=(fit,))
        return out


class SupernetEvaluator(BaseEvaluator):
    """MLM dev fitness of architectures with inherited supernet weights.

    Args:
        supernet: a trained :class:`lvsearch.model.Supernet` (put in eval mode here).
        dev: the fixed masked dev set (``input_ids``, ``labels``: ``(S, L)`` long), e.g.
            ``fixed_dev_set(data, num_sequences=..., seq_len=..., seed=...)`` with the supernet
            run's seq_len and the standard dev masking (:func:`lvsearch.train.supernet.load_dev`).
        seq_len: sequence length for :meth:`Supernet.flops_per_token` (default: the dev set's L).
        batch_size: dev sequences per forward chunk (None = the whole dev set, or each racing
            segment, at once).
        cache_bytes: memory budget of the prefix cache, bytes; one cached state costs
            ``batch_size × L × H × 4`` bytes (fp32).
        use_cache: False scores every candidate from scratch (the reference path).
        constraints: optional parameter / FLOP limits.
        device: where to run (the supernet is moved there).
        info: ``DistInfo`` for distributed evaluation, or None.
        fitness: ``"accuracy"`` (dev MLM accuracy, LV-BERT's fitness) or ``"loss"`` (minus the
            mean dev MLM cross-entropy in nats: continuous, so no ties).
        racing: :class:`Racing` over the dev sequences, or None (everyone scored on all). The
            dev rows are then taken in a seeded random order (:data:`~lvsearch.search.schedule.RACING_ORDER_SEED`), so
            every rung is a random subset of the dev set; the full set is the same.

    Raises:
        LvsearchError: negative cache size, unknown fitness metric, invalid racing rungs.

    Source: fitness as in LV-BERT (Yu et al. 2021) §3.3; inherited weights as in single-path
    one-shot NAS (Guo et al. 2020).
    """

    def __init__(self, supernet, dev, *, seq_len: int | None = None, batch_size: int | None = None,
                 cache_bytes: int = 512 << 20, use_cache: bool = True, constraints: Constraints | None = None,
                 device="cpu", info=None, fitness: str | Fitness = DEFAULT_FITNESS, racing: Racing | None = None):
        import torch

        super().__init__(constraints, info)
        if cache_bytes < 0:
            raise LvsearchError(f"cache size must be ≥ 0 bytes, got {cache_bytes}", fix="e.g. --cache-mb 512")
        self.fitness_def = Fitness.parse(fitness)
        self.fitness_metric = self.fitness_def.metric
        self.device = torch.device(device)
        self.net = supernet.to(self.device).eval()
        self.seq_len = int(seq_len or dev.input_ids.shape[1])
        self.use_cache, self.cache_bytes = use_cache, int(cache_bytes)
        n = dev.input_ids.shape[0]
        self.racing = racing.check(n) if racing is not None else None
        ids_all, labels_all = dev.input_ids, dev.labels
        if self.racing is not None:  # rungs are seeded random subsets, not the first dev files
            import numpy as np

            order = torch.from_numpy(np.random.default_rng(RACING_ORDER_SEED).permutation(n))
            ids_all, labels_all = ids_all[order], labels_all[order]
        # chunk boundaries: every racing rung is a boundary, then batch_size within each segment
        edges = [0, *(self.racing.rungs if self.racing else ()), n]
        self.chunks, self.rung_chunks = [], []
        for lo, hi in zip(edges, edges[1:]):
            bs = hi - lo if not batch_size else min(int(batch_size), hi - lo)
            for s in range(lo, hi, bs):
                e = min(s + bs, hi)
                ids = ids_all[s:e].to(self.device)
                mask = self.net.padding_mask(ids)
                self.chunks.append((ids, None if bool(mask.all()) else mask, labels_all[s:e].to(self.device)))
            self.rung_chunks.append(len(self.chunks))  # chunks that cover the first `hi` sequences
        self.rung_sequences = edges[1:]  # dev sequences scored once a candidate passed each level
        hidden = self.net.dims.hidden
        bs = max(int(c[0].shape[0]) for c in self.chunks)
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

    def net_for(self, arch: Arch):
        """The supernet whose weights score ``arch``: :attr:`net` here. A subclass that scores
        parts of the space with other weights of the same space and dims overrides it
        (:class:`lvsearch.search.few_shot.FewShotEvaluator`); parameter and FLOP counts, the
        padding mask and the prefix-cache budget always come from :attr:`net`."""
        return self.net

    def _run(self, archs: list[Arch], chunks: range, on_hidden: Callable) -> None:
        """Run every architecture on dev ``chunks`` through the prefix trie, calling
        ``on_hidden(arch, chunk_index, final_hidden, labels)`` once per (arch, chunk), in chunk
        order and, within a chunk, per scoring supernet (:meth:`net_for`, in order of first
        appearance) in the trie's deterministic order."""
        import torch

        depth_limit = self.cache_depth
        if self.on_progress is not None:  # count (arch, chunk) passes for the progress line
            report, total, done = self.on_progress, len(archs) * len(chunks), [0]
            inner = on_hidden

            def on_hidden(arch, c, hidden, labels):  # the same callback, counted
                inner(arch, c, hidden, labels)
                done[0] += 1
                report(done[0], total)

        def finish_alone(net, arch: Arch, states: list, c: int, mask, labels) -> None:
            st = list(states)
            for n in range(len(st), self.num_slots + 1):
                st.append(net.run_slot(n, arch, st, mask))
                self.stats.slot_runs += 1
            on_hidden(arch, c, net.finish(st), labels)

        def dfs(net, group: list[Arch], states: list, c: int, mask, labels) -> None:
            d = len(states) - 1  # slots 1..d are computed
            if d == self.num_slots:
                for a in group:  # unique keys: one arch per leaf
                    on_hidden(a, c, net.finish(states), labels)
                return
            if len(group) == 1 or len(states) + 1 > depth_limit:
                for a in group:
                    finish_alone(net, a, states, c, mask, labels)
                return
            children: dict[tuple, list[Arch]] = {}
            for a in group:  # same slot d+1  <=>  same prefix(d+1).key, given the same prefix(d)
                children.setdefault((a.ops[d], a.inputs[d], a.variants[d]), []).append(a)
            for sub in children.values():
                h = net.run_slot(d + 1, sub[0], states, mask)
                self.stats.slot_runs += 1
                dfs(net, sub, states + [h], c, mask, labels)
                del h

        groups: dict[int, tuple] = {}  # one trie per scoring supernet (one group unless net_for is overridden)
        for a in archs:
            net = self.net_for(a)
            groups.setdefault(id(net), (net, []))[1].append(a)
        with torch.inference_mode():
            for c in chunks:
                ids, mask, labels = self.chunks[c]
                for net, group in groups.values():
                    if depth_limit >= 1:
                        dfs(net, group, [net.embed(ids)], c, mask, labels)
                    else:
                        for a in group:
                            finish_alone(net, a, [net.embed(ids)], c, mask, labels)

    def _fitness(self, sums: list) -> float:
        loss_sum, correct, count = sums
        return self.fitness_def.from_sums(correct, loss_sum, count)

    def _result(self, arch: Arch, sums: list, partial: bool, scores: tuple[float, ...], sequences: int) -> EvalResult:
        loss_sum, correct, count = sums
        params, flops = self.cost(arch)
        acc, loss = correct / max(count, 1), loss_sum / max(count, 1)
        return EvalResult(arch.key, self._fitness(sums), loss, params, flops, count, accuracy=acc, partial=partial,
                          scores=scores, sequences=sequences)

    def batch_passes(self, n: int, min_complete: int = 0) -> int:
        """Exact dev-sequence passes of scoring ``n`` new candidates in one batch: every one on
        the first rung, the survivors (:meth:`Racing.survivors` with ``min_complete`` as the
        floor) on each next level's extra sequences; ``n ×`` the dev set without racing."""
        total, alive, done = 0, int(n), 0
        for i, upto in enumerate(self.rung_sequences):
            total += alive * (upto - done)
            done = upto
            if i < len(self.rung_sequences) - 1:
                alive = self.racing.survivors(alive, min_complete) if alive else 0
        return total

    def _sums(self, archs: list[Arch], chunks: range, start: dict[str, list] | None = None) -> dict[str, list]:
        """``{key: [loss_sum, correct, count]}`` of ``archs``: ``start`` (the sums of earlier
        chunks; zeros when None) plus dev ``chunks``, added one chunk at a time."""
        from lvsearch.train.objectives import mlm_sums

        sums = {a.key: list(start[a.key]) if start else [0.0, 0, 0] for a in archs}  # loss_sum, correct, count

        def add(arch: Arch, c: int, hidden, labels) -> None:
            r = mlm_sums(self.net_for(arch), hidden, labels)
            acc = sums[arch.key]
            acc[0] += float(r["loss_sum"])
            acc[1] += int(r["correct"])
            acc[2] += int(r["count"])

        self._run(archs, chunks, add)
        return sums

    def _compute_all(self, archs: list[Arch], min_complete: int = 0) -> dict[str, EvalResult]:
        """Score ``archs`` rung by rung (one rung without racing); each rung's chunks are
        computed over ranks and gathered, so every rank ranks the same sums and keeps the same
        survivors (at least ``min_complete`` of them, :meth:`Racing.survivors`). Chunk sums are
        added one chunk at a time in chunk order, so a survivor's sums are the same floats as
        without racing over the same chunks (rungs that are multiples of ``batch_size`` leave
        the chunks unchanged; otherwise the loss may differ in the last bits, the accuracy
        never). Every result records its fitness at each level it reached (``scores``)."""
        for a in archs:
            self.net.space.validate(a)
        sums = {a.key: [0.0, 0, 0] for a in archs}
        scores: dict[str, list[float]] = {a.key: [] for a in archs}
        out: dict[str, EvalResult] = {}
        alive, done = list(archs), 0
        for i, upto in enumerate(self.rung_chunks):
            sums.update(self._sharded(lambda a, lo=done, hi=upto: self._sums(a, range(lo, hi), sums), alive))
            done = upto
            for a in alive:
                scores[a.key].append(self._fitness(sums[a.key]))
            if i == len(self.rung_chunks) - 1:
                break
            ranked = sorted(alive, key=lambda a: (-scores[a.key][-1], a.key))
            for a in ranked[self.racing.survivors(len(ranked), min_complete):]:
                out[a.key] = self._result(a, sums[a.key], True, tuple(scores[a.key]), self.rung_sequences[i])
            alive = [a for a in alive if a.key not in out]
        for a in alive:
            out[a.key] = self._result(a, sums[a.key], False, tuple(scores[a.key]), self.rung_sequences[-1])
        return out

    def per_target(self, archs: Sequence[Arch]) -> dict[str, dict]:
        """Per-target outcomes on the whole dev set, for noise measurements (no memo, no racing).

        Args:
            archs: architectures of the supernet's space.

        Returns ``{key: {"correct": (T,) bool ndarray, "loss": (T,) float64 ndarray (nats)}}``,
        targets in chunk order (row-major; the racing permutation when racing is set), the same
        ``T`` for every key; their means are the evaluator's accuracy and loss. Used by
        :mod:`lvsearch.search.noise` (bootstrap and paired standard errors).

        Raises:
            LvsearchError: an architecture outside the supernet's space.
        """
        import numpy as np
        import torch.nn.functional as F

        from lvsearch.data.masking import IGNORE_INDEX

        parts: dict[str, list] = {a.key: [] for a in archs}

        def keep(arch: Arch, c: int, hidden, labels) -> None:
            t = labels != IGNORE_INDEX
            logits = self.net_for(arch).mlm_logits(hidden[t]).float()
            gold = labels[t]
            parts[arch.key].append(((logits.argmax(-1) == gold).cpu().numpy(),
                                    F.cross_entropy(logits, gold, reduction="none").double().cpu().numpy()))

        for a in archs:
            self.net.space.validate(a)
        self._run(list(archs), range(len(self.chunks)), keep)
        return {k: {"correct": np.concatenate([p[0] for p in v]), "loss": np.concatenate([p[1] for p in v])}
                for k, v in parts.items()}
