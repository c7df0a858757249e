"""The search loop (:class:`Search`) and its settings (:class:`SearchConfig`); resumable.

One search evaluates populations of architectures on the evaluator, keeps the history, the
top-k set (best ``k`` complete candidates over everything evaluated, ranked by fitness), the
curve and the compute spent, and saves its state after every iteration. What the populations
are is its strategy's (one module each in :mod:`lvsearch.search.strategies`, behind the
:class:`~lvsearch.search.strategies.base.Strategy` contract): ``evolution`` (LV-BERT
Algorithm 1, the default), ``aging`` (regularized evolution), ``random`` and ``nsga2``. ``N_cro
+ N_mut`` must equal ``P``, so every strategy makes ``P × T`` evaluations.

**Racing and the breeding pool.** Under racing (:class:`lvsearch.search.schedule.Racing`) only
about ``P / eta²`` of a batch are scored on the whole dev set, and only those may enter the
top-k. Every batch therefore asks to complete what the top-k still lacks
(:attr:`Search.min_complete`), so the top-k holds ``k`` complete members from the first
iteration on.

**Compute.** Every result records the dev sequences it was scored on; the search counts them
(``passes``, in the state and on every curve point). With a ``budget`` in passes the search
also stops once it is spent, the last batch cut to what still fits, so strategies given one
budget compare at equal compute (``evolve --compare-random`` gives random search the EA's
passes and the same seed: the same first population).

The children policy (new, valid, unseen; re-drawn otherwise) is
:mod:`lvsearch.search.strategies.breeding`. The evaluator's memo still guarantees that no
architecture is scored twice. All randomness is Python's global ``random`` (which DEAP's
operators use), seeded from the search seed; its state (and numpy's and torch's) is saved after
every iteration in the state file, so a resumed search continues the identical random stream.
"""
from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from lvsearch import tracking
from lvsearch.arch import Arch
from lvsearch.errors import LvsearchError
from lvsearch.faults import kill_point
from lvsearch.io import differing_keys
from lvsearch.search.evaluator import BaseEvaluator, EvalResult
from lvsearch.search.folder import search_command
from lvsearch.search.strategies import DEFAULT_STRATEGY, STRATEGIES
from lvsearch.search.strategies.breeding import deap_creator
from lvsearch.space import SearchSpace

STATE_FORMAT = "lvsearch.search-state/v1"
STATE = "state.json"
CROSSOVER_KINDS = ("uniform", "one-point", "two-point")
#: The second NSGA-II objective, minimised (EvalResult fields ``params``, ``flops``, ``latency_ms``).
NSGA2_COSTS = ("params", "flops", "latency")
#: Mutation moves: ``redraw`` (LV-BERT: each op re-drawn with p, each optional input flipped
#: with the input rate) or ``one-op`` (exactly one slot's op changed to another op; the
#: neighbourhood move of local search, inputs unchanged).
MUTATION_KINDS = ("redraw", "one-op")
#: Default per-input flip probability of the ``redraw`` mutation (see SearchConfig).
INPUT_MUTATION_PROB = 0.0


@dataclass
class SearchConfig:
    """Settings of one search.

    Attributes:
        strategy: ``evolution`` (LV-BERT Algorithm 1), ``random``, ``nsga2`` or ``aging``
            (regularized evolution).
        population: ``P``, the initial population and every later population.
        iterations: ``T``, populations evaluated (``P × T`` evaluations in all).
        crossover: ``N_cro`` children by crossover per iteration (default ``P // 2``).
        mutation: ``N_mut`` children by mutation per iteration (default ``P − N_cro``).
        mutation_prob: ``p``, per-slot op re-draw probability (LV-BERT's 0.1).
        input_mutation_prob: per-optional-input flip probability of the ``redraw`` mutation
            (elc spaces). Default :data:`INPUT_MUTATION_PROB` = 0: measured on the quickstart
            supernet, a child that flips inputs but changes no op moves the fitness by 0.013
            nats (SD, against 0.12 for one op change and a population SD of 0.115), so at
            ``p`` for the 66 inputs of 12 slots about half of all mutation children were such
            near-clones; with 0, a child that changes no op is the parent itself and is
            re-drawn. Connectivity is still searched: the first population draws it and
            crossover recombines it per slot (docs/results.md, "Does the search work?").
        mutation_kind: ``redraw`` or ``one-op`` (:data:`MUTATION_KINDS`).
        budget: compute budget in dev-sequence passes (:attr:`EvalResult.passes`), or None.
            When set, the search also stops once it is spent: each batch is cut to the most
            candidates whose exact cost (:meth:`BaseEvaluator.batch_passes`) still fits, so
            two strategies given one budget compare at equal compute.
        topk: ``k``, size of the top-k set (parents of the EA).
        crossover_kind: ``uniform`` (each slot swapped with prob. 0.5), ``one-point``, ``two-point``.
        nsga2_cost: second NSGA-II objective, minimised: ``params``, ``flops`` or ``latency``
            (predicted from the search's latency table, ms per batch).
        seed: seed of the search's random stream.
        max_redraws: re-draws of a child before falling back to a random architecture.
        tournament: aging only: ``S``, members drawn per tournament (default ``max(2, P // 4)``).
        cycle: aging only: children evaluated together (default ``max(1, P // 4)``).
        sparse_init: share of the first population drawn from sparse ELC mixing
            (:meth:`SearchSpace.sample_sparse`), in [0, 1]; 0 (default): all uniform draws.
            The ``--compare-random`` control shares the first population, so it gets the
            same draws there and uniform draws after.
    """

    strategy: str = DEFAULT_STRATEGY
    population: int = 50
    iterations: int = 20
    crossover: int | None = None
    mutation: int | None = None
    mutation_prob: float = 0.1
    input_mutation_prob: float = INPUT_MUTATION_PROB
    mutation_kind: str = "redraw"
    topk: int = 10
    crossover_kind: str = "uniform"
    nsga2_cost: str = "params"
    seed: int = 0
    max_redraws: int = 100
    tournament: int | None = None
    cycle: int | None = None
    budget: int | None = None
    sparse_init: float = 0.0

    def resolved(self) -> "SearchConfig":
        """A copy with ``crossover``/``mutation`` filled in and every value checked.

        Raises:
            LvsearchError: unknown strategy/crossover kind/cost, population < 2, topk outside
                1..population, iterations < 1, p outside [0, 1], crossover + mutation ≠
                population, another strategy's setting, or one of the strategy's own out of
                range (:meth:`Strategy.resolve`).
        """
        c = SearchConfig(**asdict(self))
        if c.strategy not in STRATEGIES:
            raise LvsearchError(f"unknown search strategy {c.strategy!r}", fix=f"use one of {', '.join(STRATEGIES)}")
        if c.crossover_kind not in CROSSOVER_KINDS:
            raise LvsearchError(f"unknown crossover kind {c.crossover_kind!r}", fix=f"use one of {', '.join(CROSSOVER_KINDS)}")
        if c.nsga2_cost not in NSGA2_COSTS:
            raise LvsearchError(f"unknown NSGA-II cost {c.nsga2_cost!r}", fix=f"use one of {', '.join(NSGA2_COSTS)}")
        if c.population < 2:
            raise LvsearchError(f"--population must be ≥ 2, got {c.population}", fix="e.g. --population 50")
        if c.iterations < 1:
            raise LvsearchError(f"--iterations must be ≥ 1, got {c.iterations}", fix="e.g. --iterations 20")
        if not 1 <= c.topk <= c.population:
            raise LvsearchError(f"--topk {c.topk} must be between 1 and --population {c.population}",
                                fix="e.g. --topk 10 --population 50")
        if not 0.0 <= c.mutation_prob <= 1.0:
            raise LvsearchError(f"--mutation-prob must be in [0, 1], got {c.mutation_prob}", fix="e.g. 0.1")
        if not 0.0 <= c.input_mutation_prob <= 1.0:
            raise LvsearchError(f"--input-mutation-prob must be in [0, 1], got {c.input_mutation_prob}",
                                fix=f"e.g. {INPUT_MUTATION_PROB} (the default)")
        if not (isinstance(c.sparse_init, (int, float)) and 0.0 <= c.sparse_init <= 1.0):
            raise LvsearchError(f"--sparse-init must be a share in [0, 1], got {c.sparse_init!r}",
                                fix="e.g. --sparse-init 0.5 (half the first population from sparse mixing)")
        if c.mutation_kind not in MUTATION_KINDS:
            raise LvsearchError(f"unknown mutation kind {c.mutation_kind!r}", fix=f"use one of {', '.join(MUTATION_KINDS)}")
        if c.budget is not None and (isinstance(c.budget, bool) or not isinstance(c.budget, int) or c.budget < 1):
            raise LvsearchError(f"--budget must be a positive number of dev-sequence passes, got {c.budget!r}",
                                fix="e.g. --budget 200000, or omit it (the search runs --iterations)")
        given = [f"--{name} {getattr(c, name)}" for name in ("crossover", "mutation") if getattr(c, name) is not None]
        if c.crossover is None and c.mutation is None:
            c.crossover = c.population // 2
        if c.crossover is None:
            c.crossover = c.population - c.mutation
        if c.mutation is None:
            c.mutation = c.population - c.crossover
        if c.crossover < 0 or c.mutation < 0 or c.crossover + c.mutation != c.population:
            raise LvsearchError(
                f"{' and '.join(given)} {'does' if len(given) == 1 else 'do'} not fit --population {c.population}: "
                "the crossover and mutation children "
                f"of an iteration add up to the population, so each is between 0 and {c.population}",
                fix=f"e.g. --crossover {c.population // 2} --mutation {c.population - c.population // 2}",
            )
        strategy = STRATEGIES[c.strategy]
        for name, other in STRATEGIES.items():  # another strategy's settings are refused
            given = [f for f in other.settings if f not in strategy.settings and getattr(c, f) is not None]
            if given:
                flags = " and ".join("--" + f for f in other.settings)
                raise LvsearchError(f"{flags} are settings of --strategy {name}", fix=f"pass --strategy {name}, or drop them")
        strategy.resolve(c)
        return c

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_state(cls, d: dict) -> "SearchConfig":
        """The config a state file recorded; states written before the separate input rate,
        the mutation kind and the budget existed flipped inputs with ``mutation_prob``."""
        d = dict(d)
        d.setdefault("input_mutation_prob", d.get("mutation_prob", 0.1))
        return cls(**d)


# --------------------------------------------------------------------------- helpers
def rng_state() -> dict:
    """Python ``random``, numpy and torch CPU RNG states as JSON-able data."""
    import numpy as np
    import torch

    v, internal, gauss = random.getstate()
    name, keys, pos, has_gauss, cached = np.random.get_state()
    return {
        "python": [v, list(internal), gauss],
        "numpy": [name, keys.tolist(), int(pos), int(has_gauss), float(cached)],
        "torch": torch.get_rng_state().tolist(),
    }


def set_rng_state(s: dict) -> None:
    """Restore :func:`rng_state`."""
    import numpy as np
    import torch

    v, internal, gauss = s["python"]
    random.setstate((v, tuple(internal), gauss))
    name, keys, pos, has_gauss, cached = s["numpy"]
    np.random.set_state((name, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(torch.tensor(s["torch"], dtype=torch.uint8))


@dataclass
class SearchResult:
    """What a finished (or stopped) search holds.

    Attributes:
        history: one dict per evaluated architecture (``EvalResult`` fields + ``iteration``), in
            evaluation order; rejected candidates never appear (they are re-drawn).
        topk: the top-k set, best first.
        curve: per iteration ``{iteration, best, topk_mean, evaluated}``.
        pareto: NSGA-II: the non-dominated set of everything evaluated (else empty).
        iteration: completed iterations.
        done: all ``iterations`` completed, or the budget spent.
        passes: dev-sequence passes of everything evaluated (the search's compute).
    """

    history: list[dict]
    topk: list[EvalResult]
    curve: list[dict]
    pareto: list[EvalResult] = field(default_factory=list)
    iteration: int = 0
    done: bool = False
    passes: int = 0

    @property
    def best(self) -> EvalResult:
        return self.topk[0]


class Search:
    """One resumable search: the loop around a strategy (:mod:`lvsearch.search.strategies`).

    Args:
        space: the search space (children are validated against it).
        evaluator: a :class:`BaseEvaluator` (supernet or plain function); shared memo.
        config: :class:`SearchConfig` (resolved here); ``config.strategy`` names the strategy in
            :data:`~lvsearch.search.strategies.STRATEGIES`.
        out: folder for the state file and outputs, or None (in memory only).
        write: whether this process writes files (rank 0 under torchrun).
        on_iteration: called as ``f(search, iteration)`` after each iteration (live table).
        extra_state: JSON-able facts stored in the state and compared on resume.
        on_start: called with the search once it has started or its state was loaded (and
            checked) on resume, before the first new iteration.
        on_progress: called as ``f(stage, done, total)`` while a population is drawn and
            while it is scored (a first population of 100,000 takes minutes), e.g. with
            ``"iteration 1: drawing 100,000 architectures"``.

    Attributes:
        strategy: the :class:`~lvsearch.search.strategies.base.Strategy` making the populations.
        population: keys to evaluate at :attr:`iteration`; topk: the top-k keys, best first;
        history: every evaluated result (dict) with its iteration; curve: one point per
        iteration; seen: the evaluated keys; passes: dev-sequence passes spent.
    """

    def __init__(self, space: SearchSpace, evaluator: BaseEvaluator, config: SearchConfig, *,
                 out: str | Path | None = None, write: bool = True,
                 on_iteration: Callable | None = None, extra_state: dict | None = None,
                 on_start: Callable | None = None, on_progress: Callable[[str, int, int], None] | None = None):
        self.space, self.evaluator = space, evaluator
        self.config = config.resolved()
        self.out = Path(out) if out is not None else None
        self.write, self.on_iteration = write, on_iteration
        self.extra_state = extra_state or {}
        self.on_start = on_start
        self.on_progress = on_progress
        self.iteration = 0
        self.population: list[str] = []  # keys to evaluate at self.iteration
        self.topk: list[str] = []
        self.history: list[dict] = []
        self.curve: list[dict] = []
        self.seen: set[str] = set()
        self.passes = 0  # dev-sequence passes of everything evaluated (EvalResult.passes)
        self.strategy = STRATEGIES[self.config.strategy](self)

    # ---------------------------------------------------------------- compute
    @property
    def min_complete(self) -> int:
        """Candidates the next batch must score completely: what the top-k still lacks, so the
        breeding pool holds ``k`` complete members from the first iteration on (racing alone
        completes about ``P / eta²`` of a batch)."""
        return max(0, self.config.topk - len(self.topk))

    def batch_size(self, wanted: int) -> int:
        """``wanted`` candidates, or fewer where the budget cannot pay for them all (0 once spent)."""
        if self.config.budget is None:
            return wanted
        left = self.config.budget - self.passes
        n = wanted
        while n > 0 and self.evaluator.batch_passes(n, self.min_complete) > left:
            n -= 1
        return n

    @property
    def finished(self) -> bool:
        """All iterations run, or the budget too small for one more candidate."""
        return self.iteration >= self.config.iterations or (self.config.budget is not None and self.batch_size(1) == 0)

    def score(self, keys: list[str]) -> None:
        """Score a batch: ``evaluator.evaluate_many`` (completing what the top-k lacks, its
        progress reported to ``on_progress``) and count the passes of the keys new to the search."""
        archs = [Arch.from_key(k) for k in keys]
        if self.on_progress is None:
            self.evaluator.evaluate_many(archs, self.min_complete)
        else:
            stage = f"iteration {self.iteration + 1}: scoring {len(archs):,} architectures (× dev chunks)"
            self.evaluator.on_progress = lambda done, total: self.on_progress(stage, done, total)
            try:
                self.evaluator.evaluate_many(archs, self.min_complete)
            finally:
                self.evaluator.on_progress = None
        self.passes += sum(self.evaluator.memo[k].passes for k in keys if k not in self.seen)

    # ---------------------------------------------------------------- state
    def state_dict(self) -> dict:
        return {
            "format": STATE_FORMAT,
            "config": self.config.to_dict(),
            "space": self.space.to_dict(),
            "extra": self.extra_state,
            "iteration": self.iteration,
            "population": self.population,
            "parents": [],  # v1 holds NSGA-II's parents in every state (the strategy's own below)
            "topk": self.topk,
            "history": self.history,
            "curve": self.curve,
            **self.strategy.state(),
            "passes": self.passes,
            "rng": rng_state(),
            "done": self.finished,
        }

    def _check_resumable(self, s: dict, source: Path) -> None:
        """Refuse a state made with other settings, a smaller target, space or inputs."""
        recorded = SearchConfig.from_state(s["config"]).resolved()
        grow = ("iterations", "budget")
        mine = dict(self.config.to_dict(), iterations=None, budget=None)
        if dict(recorded.to_dict(), iterations=None, budget=None) != mine:
            diff = sorted(k for k, v in recorded.to_dict().items() if k not in grow and mine[k] != v)
            raise LvsearchError(f"--resume with different search settings than {source} ({', '.join(diff)})",
                                fix="resume with the original settings (only --iterations and --budget may grow)")
        # a smaller target would re-save the state under it, and best.json from a cut search
        for flag, old, new in (("--iterations", recorded.iterations, self.config.iterations),
                               ("--budget", recorded.budget, self.config.budget)):
            if old is not None and new is not None and new < old:
                raise LvsearchError(
                    f"--resume with {flag} {new:,}, below the {old:,} recorded in {source} ({int(s['iteration'])} "
                    f"iterations already run): {flag} may only grow",
                    fix=f"resume with {flag} {old:,} or more (omit it to keep the recorded one), or start a new --out")
        if s["space"] != self.space.to_dict():
            raise LvsearchError(f"--resume: {source} was made for another search space", fix="check --supernet")
        recorded_extra = s["extra"]
        old_t, new_t = recorded_extra.get("latency_table"), self.extra_state.get("latency_table")
        if isinstance(old_t, dict) and isinstance(new_t, dict) and old_t.get("sha256") == new_t.get("sha256"):
            recorded_extra = {**recorded_extra, "latency_table": new_t}  # the same table, moved or copied
        if recorded_extra != self.extra_state:
            diff = differing_keys(recorded_extra, self.extra_state)
            mine_sn, old_sn = self.extra_state.get("supernet_sha256"), s["extra"].get("supernet_sha256")
            if mine_sn is not None and old_sn != mine_sn:
                raise LvsearchError(
                    f"--resume: the supernet {self.extra_state.get('supernet')} is not the one the search in "
                    f"{source} was scored on (weights sha256 {str(mine_sn)[:12]}… now, "
                    f"{str(old_sn)[:12] + '…' if old_sn else 'not recorded'} when it started; step "
                    f"{self.extra_state.get('supernet_step')} now, {s['extra'].get('supernet_step')} then): "
                    f"continuing would mix scores from two supernets",
                    fix="start a new search on this supernet (--overwrite or another --out), or restore the supernet run")
            if {"latency_table", "max_latency"} & set(diff):
                then, now = _latency_flags(recorded_extra), _latency_flags(self.extra_state)
                if then == now and isinstance(old_t, dict) and isinstance(new_t, dict):  # same path, other bytes
                    raise LvsearchError(
                        f"--resume: the latency table {new_t.get('path')} was changed since the search in {source} "
                        f"started (content sha256 {str(old_t.get('sha256'))[:12]}… then, "
                        f"{str(new_t.get('sha256'))[:12]}… now): its candidates were admitted and ranked with "
                        "the recorded table",
                        fix="restore the table the search started with (its sha256 is in the state's "
                            "extra.latency_table), or start a new --out with this table")
                raise LvsearchError(
                    f"--resume: the search in {source} was run with {then or 'no latency table'}, and this resume "
                    f"passes {now or 'none'}: its candidates were admitted and ranked with the recorded ones",
                    fix=(f"resume with {then} (a copy of that table with the same content also does)" if then
                         else "resume without --latency-table and --max-latency") + ", or start a new --out")
            raise LvsearchError(f"--resume: {source} was made with different inputs ({', '.join(diff)})",
                                fix="resume with the original --supernet/--dev-sequences/--fitness/--racing/"
                                    "constraints (omit --fitness and --racing to take the recorded ones)")

    def load_state(self, s: dict, source: Path) -> None:
        """Restore from :meth:`state_dict`; ``iterations`` may be raised, nothing else may change.

        Raises:
            LvsearchError: wrong format, a different configuration/space/supernet, or a state
                that does not hold together (names ``source``).
        """
        bad = LvsearchError(f"search state {source} is corrupted or not an lvsearch search state",
                            fix="restore it from a backup, or start a new search with --overwrite")
        if not isinstance(s, dict) or s.get("format") != STATE_FORMAT:
            raise bad
        try:
            self._check_resumable(s, source)
            history = [dict(h) for h in s["history"]]
            results = [EvalResult.from_dict(h) for h in history]
            self.iteration = int(s["iteration"])
            self.population = [str(k) for k in s["population"]]
            self.topk = [str(k) for k in s["topk"]]
            self.curve = list(s["curve"])
            if not isinstance(s["parents"], list):
                raise bad
            kept = self.strategy.load(s)
            for k in self.population + self.topk + kept:
                self.space.validate(Arch.from_key(k))
            known = {r.key for r in results}
            if any(k not in known for k in self.topk + kept) or len(history) != len(known):
                raise bad
            # one curve point per finished iteration, and every history entry from one of them
            if len(self.curve) != self.iteration or any(int(h.get("iteration", -1)) > self.iteration
                                                          for h in history):
                raise bad
            set_rng_state(s["rng"])
        except LvsearchError as e:
            if e is bad or "--resume" in str(e):
                raise
            raise bad from None
        except (KeyError, TypeError, ValueError, IndexError, AttributeError):
            raise bad from None
        self.history = history
        self.seen = {r.key for r in results}
        self.passes = sum(r.passes for r in results)
        for r in results:
            self.evaluator.memo.setdefault(r.key, r)
        if not self.population and self.iteration > 0 and not self.finished:
            # iterations or the budget grew after a finished search: make the next population now
            self.population = self.strategy.next_population()

    def save(self) -> None:
        """Write the state, ``history.jsonl``, ``topk.json`` and the strategy's files (atomically)."""
        if self.out is None or not self.write:
            return
        import json

        from lvsearch.io import atomic_write_bytes, atomic_write_json

        atomic_write_json(self.out / STATE, self.state_dict())
        kill_point(f"search-save:{self.iteration}")
        lines = "".join(json.dumps(h, sort_keys=True) + "\n" for h in self.history)
        atomic_write_bytes(self.out / "history.jsonl", lines.encode("utf-8"))
        atomic_write_json(self.out / "topk.json", {
            "strategy": self.config.strategy, "iteration": self.iteration, "space": self.space.name,
            "topk": [self.evaluator.memo[k].to_dict() for k in self.topk],
        })
        for name, content in self.strategy.files().items():
            atomic_write_json(self.out / name, content)

    @property
    def fitness_label(self) -> str:
        """``fitness: <what it is>`` for the evaluator's fitness (:mod:`lvsearch.search.fitness`),
        or ``fitness`` for an evaluator without one (a function)."""
        fitness = getattr(self.evaluator, "fitness_def", None)
        return f"fitness: {fitness.label}" if fitness is not None else "fitness"

    # ---------------------------------------------------------------- the loop
    def start(self) -> None:
        """Seed the random stream and draw the initial population (a fresh search)."""
        random.seed(self.config.seed)
        import numpy as np
        import torch

        np.random.seed(self.config.seed % (2**32))
        torch.manual_seed(self.config.seed)
        self.iteration = 0
        self.population = self.strategy.initial_population()
        self.save()

    def _update_topk(self, keys: list[str]) -> None:
        """Top-k over everything evaluated: ``deap.tools.selBest`` on (old top-k + new keys),
        ranked by fitness alone (also under NSGA-II); ties keep the earlier entry. Candidates
        that racing stopped early (``partial``) are never admitted: every member's score is
        made on the whole dev set, the same targets."""
        from deap import tools

        creator = deap_creator()
        cand, have = [], set()
        for k in self.topk + keys:
            r = self.evaluator.memo[k]
            if k in have or not r.complete:
                continue
            have.add(k)
            ind = creator.LvsIndividual([k])
            ind.fitness.values = (r.fitness,)
            cand.append(ind)
        self.topk = [i[0] for i in tools.selBest(cand, self.config.topk)]

    def step(self) -> None:
        """One iteration: the strategy scores its candidates; the history, top-k, curve and
        tracking are updated; the strategy updates its pool and draws the next population."""
        t = self.iteration
        self.population = self.strategy.evaluate(self.population)
        for k in self.population:
            if k not in self.seen:
                self.seen.add(k)
                self.history.append(dict(self.evaluator.memo[k].to_dict(), iteration=t))
        self._update_topk(self.population)
        self.strategy.after_batch(self.population)
        top = [self.evaluator.memo[k].fitness for k in self.topk]
        self.curve.append({"iteration": t, "best": top[0] if top else None,
                           "topk_mean": sum(top) / len(top) if top else None,
                           "evaluated": len(self.history), "passes": self.passes})
        if self.out is not None:
            scored = sorted(f for f in (self.evaluator.memo[k].fitness for k in self.population) if f is not None)
            median = (scored[(len(scored) - 1) // 2] + scored[len(scored) // 2]) / 2 if scored else None
            tracking.log(self.out, t, {**self.curve[-1], "median": median}, "search/")
        self.iteration = t + 1
        self.population = self.strategy.next_population() if not self.finished else []

    def run(self, *, resume: bool = False, max_iterations: int | None = None) -> SearchResult:
        """Run (or continue) to ``config.iterations``; with ``max_iterations`` stop after that many
        iterations in total (used to simulate a killed run). The state is saved after every
        iteration."""
        if resume:
            from lvsearch.io import read_json

            path = self.out / STATE  # type: ignore[operator]
            self.load_state(read_json(path, what="search state", regenerate=search_command(self.out)), path)
            tracking.start_at(self.out, self.iteration)
            # The state holds everything; rewrite the files derived from it, which a kill
            # between the state write and theirs (or after a finished search) left stale.
            self.save()
        else:
            self.start()
        if self.out is not None:
            tracking.params(self.out, self.config.to_dict())
        if self.on_start is not None:
            self.on_start(self)
        stop = self.config.iterations if max_iterations is None else min(max_iterations, self.config.iterations)
        while self.iteration < stop and not self.finished:
            self.step()
            if self.out is not None:
                tracking.flush(self.out)  # before the state: a kill after it must not lose this point
            self.save()
            if self.on_iteration is not None:
                self.on_iteration(self, self.iteration - 1)
        return self.result()

    def pareto(self) -> list[EvalResult]:
        """The strategy's Pareto front of everything evaluated (NSGA-II), else []."""
        return self.strategy.pareto()

    def result(self) -> SearchResult:
        return SearchResult(
            history=list(self.history),
            topk=[self.evaluator.memo[k] for k in self.topk],
            curve=list(self.curve),
            pareto=self.strategy.pareto(),
            iteration=self.iteration,
            done=self.finished,
            passes=self.passes,
        )


def plot_curves(curves: dict[str, list[dict]], path: str | Path, title: str = "",
                ylabel: str = "fitness (dev MLM accuracy)") -> None:
    """Top-k best and mean fitness per iteration, one colour per search (LV-BERT Figure 3).

    Args:
        curves: label -> :attr:`SearchResult.curve`.
        path: PNG path (written atomically).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from lvsearch.io import save_figure

    fig, ax = plt.subplots(figsize=(6, 4), dpi=120)
    for i, (label, curve) in enumerate(curves.items()):
        it = [c["iteration"] + 1 for c in curve]
        color = f"C{i}"
        ax.plot(it, [c["best"] for c in curve], color=color, marker="o", ms=3, label=f"{label}: top-k best")
        ax.plot(it, [c["topk_mean"] for c in curve], color=color, ls="--", label=f"{label}: top-k mean")
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("iteration")
    ax.set_ylabel(ylabel)
    ax.set_title(title or "search progress")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path)


def _latency_flags(extra: dict) -> str:
    """``--latency-table PATH --max-latency MS`` as a search state's ``extra`` records them
    ("" when it has no table), for resume messages."""
    table = extra.get("latency_table")
    flags = f"--latency-table {table.get('path')}" if isinstance(table, dict) else ""
    if extra.get("max_latency") is not None:
        flags += f" --max-latency {extra['max_latency']:g}"
    return flags.strip()
