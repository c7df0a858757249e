"""The quickstart's budget plan: what every stage runs, as a function of ``--minutes``.

The constants are calibrated on the 2-core development machine (docs/results.md) so that the
default (20 minutes) finishes in time on the shared corpus; ``--minutes`` scales the step
counts and evaluation sizes linearly (with floors that keep every stage meaningful). The plan
is a pure function of its arguments: ``minutes``, seeds, finalists and the machine's
*slowdown* against the calibration machine, measured once before a new run
(:mod:`lvsearch.quickstart.speed`; 1.0 on a machine like it, or with ``--speed 1``, so the same
command gives the same steps there). A machine ``k``× slower gets the sizes of
``minutes / k`` on the calibration machine, so the run still takes ``minutes``. The plan is
recorded in ``quickstart.json`` (a resumed run keeps it) and in the report, together with what
was cut compared with the paper settings.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from lvsearch.errors import LvsearchError

#: Reference settings the plan is compared with in the report (../shared/DESIGN.md, "Reference
#: settings (from the seed papers)"). Step counts of the papers' runs are not stated there.
PAPER = {
    "supernet": "LV-BERT-small supernet: 24 slots, hidden 256, FF 1024, batch 128 × seq 128, 10k warm-up steps",
    "search": "population 50, 20 iterations (1000 evaluations), 25 crossovers + 25 mutations, top-k 10, "
              "fitness on a held-out 2% of the pretraining data",
    "retrain": "LV-BERT-small from scratch with ELECTRA RTD (generator 1/4 width, λ = 50), batch 128 × seq 128",
    "blimp": "all 67 paradigms × 1000 pairs",
    "finetune": "full training sets, several seeds",
}

#: The calibration point: what ``--minutes 20`` runs.
BASE_MINUTES = 20.0


@dataclass(frozen=True)
class Plan:
    """Sizes of every quickstart stage.

    Attributes:
        minutes: the budget this plan was made for (minutes of wall time on 2 CPU cores).
        slowdown: this machine's speed against the calibration machine's (seconds per training
            step there / here, quantized: :func:`lvsearch.quickstart.speed.quantized_slowdown`);
            the sizes below are those of ``minutes / slowdown`` there.
        vocab_size: WordPiece vocabulary of the prepared corpus (4096: see recipes/quickstart.yaml).
        supernet_steps: supernet training steps (batch 32 × 64 tokens).
        supernet_dev_sequences: dev sequences of the supernet's own panel evaluations.
        population, iterations: EA population ``P`` and iterations ``T``; random search makes
            the same ``P × T`` evaluations.
        topk: EA top-k.
        search_dev_sequences: sequences of the fixed masked dev set that scores candidates
            (``lvsearch evolve``'s default, 1024, from 20 minutes up).
        racing: racing rungs of the search (``"default"``: ``evolve``'s default plan, the rungs
            that fit the dev set; None: every candidate on every dev sequence).
        arms: the retrained arms, in report order (:data:`ARMS`).
        arm_processes: on a CPU, retrain and evaluate the arms in this many single-threaded
            worker processes at once (:mod:`lvsearch.quickstart.workers`; measured faster than
            one two-threaded process), or 0: one after the other in this process. GPUs always
            use 0.
        finalists: EA top-k finalists entering successive halving (``retrain --finalists``, η = 2)
            before the EA arm is chosen, or 0 (the default plan: the EA arm is the search's pick).
        finalists_compare_full: also train the cut finalists to the end and compare the
            pruning rules with training all (only with finalists, when the budget allows).
        retrain_steps: steps of every retrained arm (same for all arms).
        curve_every: dev evaluation interval (steps) of retrain runs (learning curves).
        curve_sequences: dev sequences of those curve evaluations.
        seeds: pretraining seeds per arm (0..seeds-1).
        mlm_dev_sequences: dev sequences of the final MLM accuracy.
        blimp_limit: BLiMP pairs per paradigm (first N of each file).
        finetune_train_limit, finetune_eval_limit, finetune_epochs, finetune_seeds: fine-tuning size.
        random_arch_seed: the seed of the ``random:SEED`` baseline architecture.
    """

    minutes: float
    vocab_size: int
    supernet_steps: int
    supernet_dev_sequences: int
    population: int
    iterations: int
    topk: int
    search_dev_sequences: int
    racing: str | None
    arms: tuple[str, ...]
    arm_processes: int
    finalists: int
    finalists_compare_full: bool
    retrain_steps: int
    curve_every: int
    curve_sequences: int
    seeds: int
    mlm_dev_sequences: int
    blimp_limit: int
    finetune_train_limit: int
    finetune_eval_limit: int
    finetune_epochs: int
    finetune_seeds: int
    random_arch_seed: int = 1
    slowdown: float = 1.0

    @property
    def sized_minutes(self) -> float:
        """The budget the sizes are made for on the calibration machine: ``minutes / slowdown``."""
        return self.minutes / self.slowdown

    def to_dict(self) -> dict:
        d = asdict(self)
        d["arms"] = list(self.arms)
        return d

    def cuts(self, supernet_desc: str = "batch 32 × seq 64, 12 slots, hidden 128",
             retrain_tokens_per_step: int = 2048) -> list[tuple[str, str, str]]:
        """``(stage, this run, paper scale)`` rows for the report's "what was cut" table;
        ``supernet_desc`` and ``retrain_tokens_per_step`` describe the recipes actually used."""
        racing = "" if self.racing is None else " (racing: most candidates scored on a first slice)"
        return [
            ("supernet", f"{self.supernet_steps} steps, {supernet_desc}", PAPER["supernet"]),
            ("search", f"population {self.population}, {self.iterations} iterations "
                       f"({self.population * self.iterations} evaluations) on up to {self.search_dev_sequences} "
                       f"dev sequences{racing}", PAPER["search"]),
            ("retrain", f"{len(self.arms)} arms × {self.retrain_steps} steps × {retrain_tokens_per_step:,} tokens, "
                        f"{self.seeds} seed(s)", PAPER["retrain"]),
            ("BLiMP", f"first {self.blimp_limit} pairs of each paradigm", PAPER["blimp"]),
            ("fine-tuning", f"{self.finetune_train_limit} training examples, {self.finetune_epochs} epoch(s), "
                            f"{self.finetune_seeds} seed(s), first {self.finetune_eval_limit} dev/test examples",
             PAPER["finetune"]),
        ]

    def stage_budgets(self) -> dict[str, float]:
        """Planned wall seconds of every stage on this machine when idle, in stage order: on the
        calibration machine for :attr:`sized_minutes`, times :attr:`slowdown`.

        The calibration run's measured seconds (:data:`STAGE_SHARES`) are scaled so that the
        stages of the default plan (one seed, no finalists) add up to ``minutes``. Extra seeds
        repeat the retrain and evaluate stages, so theirs are multiplied by ``seeds``. The
        finalist stage, off by default, comes on top: with ``finalists`` it gets its calibrated
        share (:data:`FINALISTS_SHARE`), so the run takes that much longer than ``--minutes``.
        """
        out = _scaled_shares(self.sized_minutes)
        scale = self.sized_minutes * 60 / sum(STAGE_SHARES.values())
        for name in ("retrain", "evaluate"):
            out[name] *= self.seeds
        out["finalists"] = FINALISTS_SHARE * scale if self.finalists else 0.0
        return {name: out[name] * self.slowdown for name in STAGE_ORDER}

    def total_minutes(self) -> float:
        """The planned wall time: the sum of :meth:`stage_budgets`, in minutes. This is the run's
        budget wherever one is shown: the stage banners' ETA and overrun warning and the report."""
        return sum(self.stage_budgets().values()) / 60


#: The arms a plan can retrain, in report order, and their titles. Every plan trains the first
#: three (the search's claim: EA pick vs random-search best, ``bert`` as the reference); a
#: ``random:SEED`` architecture is a supported arm that no plan spends its budget on any more
#: (the landscape benchmark measures the space's random draws far better).
ARMS = ("ea", "random-search", "bert", "random-arch")
ARM_TITLES = {
    "ea": "EA (searched)",
    "random-search": "random-search best",
    "bert": "bert (SA/FF interleaved)",
    "random-arch": "random architecture",
}

#: The stages in the order they run.
STAGE_ORDER = ("data", "supernet", "search", "finalists", "retrain", "evaluate", "rank", "report")

#: Measured seconds of each stage of the default plan in the calibration run (``--minutes 20``,
#: otherwise idle 2-core machine, docs/results.md "Quickstart", run F: 1,251 s over the stages,
#: 20.9 min wall on a host ~6% slower than run E's). ``bert`` trains and is evaluated in the
#: background during the supernet and search stages (and the start of the retrain stage), so
#: those are longer and the evaluate stage shorter than without it. Only the proportions matter:
#: :meth:`Plan.stage_budgets` scales them to the budget; the stage banners compare the time used
#: with them for an ETA and an overrun warning.
STAGE_SHARES = {"data": 14, "supernet": 251, "search": 267, "retrain": 593, "evaluate": 115, "rank": 9, "report": 2}

#: Extra seconds of the optional finalist stage (``--finalists 3``): in its calibration run
#: (docs/history.md "The previous plan", 576-step arms) it took 273 s and saved the EA arm's own
#: retrain (242 s for three arms); scaled to 1800-step arms.
FINALISTS_SHARE = (273 - 242 / 3) * 1800 / 576


def _scaled_shares(minutes: float) -> dict[str, float]:
    """:data:`STAGE_SHARES` as planned seconds for a budget of ``minutes``, adding up to it.

    The data stage prepares the whole corpus whatever the budget, so it keeps its calibrated
    seconds (at most half the budget); the other stages share the rest in their calibrated
    proportions."""
    total = minutes * 60
    data = min(float(STAGE_SHARES["data"]), 0.5 * total)
    rest = sum(v for n, v in STAGE_SHARES.items() if n != "data")
    return {n: data if n == "data" else v * (total - data) / rest for n, v in STAGE_SHARES.items()}


def pace_line(used_s: float, done_stages, budgets: dict[str, float]) -> tuple[str, float | None]:
    """``(text, pace)`` for a stage banner: the time used of the planned total and, once a stage
    with a budget has finished, the pace (used / planned for the stages done: 1.0 = on plan)
    and the whole run's ETA at that pace. ``budgets`` are the plan's planned seconds per stage
    (:meth:`Plan.stage_budgets`). ``pace`` is None before there is anything to compare."""
    total_min = sum(budgets.values()) / 60
    planned_done = sum(budgets.get(n, 0.0) for n in done_stages)
    used_min = used_s / 60
    if planned_done <= 0.01 * total_min * 60 or used_s <= 0:
        return f"{used_min:.1f} of ~{total_min:.0f} min used", None
    pace = used_s / planned_done
    eta_total = total_min * pace
    return (f"{used_min:.1f} of ~{total_min:.0f} min used; at this pace ({pace:.2f}× the plan) the whole run takes "
            f"~{eta_total:.0f} min, ~{max(0.0, eta_total - used_min):.0f} min left"), pace


#: A run this many times slower than its plan (:meth:`Plan.total_minutes`) is overrunning: the
#: stage banners warn once, and the report says so.
OVERRUN_WARN = 1.5


#: The longest quickstart plan (minutes): a week.
MAX_MINUTES = 7 * 24 * 60


def make_plan(minutes: float = BASE_MINUTES, seeds: int = 1, finalists: int = 0, slowdown: float = 1.0) -> Plan:
    """The plan for a budget of ``minutes`` (default 20), ``seeds`` pretraining seeds per arm,
    ``finalists`` EA finalists (0: none, the default) on a machine ``slowdown``× slower than the
    calibration machine (1.0: as fast; the sizes are those of ``minutes / slowdown`` there).

    The default plan spends the budget on what shows the search's claim: the searched arms
    (EA pick and random-search best) and ``bert`` are retrained for 1800 steps (3.7M tokens), in
    the range where the arms benchmark measured searched architectures clearing the MLM
    neighbour-count floor (3.6–4.1M tokens; docs/results.md, "Does the search work?"), all three
    at once in single-threaded worker processes (``bert`` already while the supernet trains and
    the search runs). Retraining is ~40% of the time, the supernet and the search ~40% (with
    ``bert`` training beside them), evaluation ~15% (:data:`STAGE_SHARES`). Above 20 minutes
    every stage's work grows linearly with ``minutes``, like its budget: training steps, the
    search's evaluations (population and iterations each × √(minutes / 20), on evolve's 1024 dev
    sequences), BLiMP pairs and fine-tuning examples × epochs × seeds (two fine-tuning seeds from
    40 minutes, each on half the examples). Below 20 minutes the sizes shrink with floors that
    keep every stage meaningful, so short runs finish early rather than late. Extra seeds repeat
    the retrain and evaluate stages (:meth:`Plan.stage_budgets`): ``seeds=3`` needs about
    2.1 × ``minutes``.

    Raises:
        LvsearchError: ``minutes`` ≤ 0, ``seeds`` < 1, ``finalists`` not 0 or ≥ 2, or ``slowdown``
            not finite and positive.
    """
    if not (math.isfinite(minutes) and minutes > 0):
        raise LvsearchError(f"--minutes must be > 0, got {minutes}", fix="e.g. --minutes 20 (the default)")
    if minutes > MAX_MINUTES:
        raise LvsearchError(f"--minutes {minutes:g} is above {MAX_MINUTES:,} (a week): the quickstart is a CPU-scale "
                            "demonstration", fix="use the verbs with the paper recipes for longer runs (README, "
                                                 "'Paper-scale workflow')")
    if seeds < 1:
        raise LvsearchError(f"--seeds must be ≥ 1, got {seeds}", fix="e.g. --seeds 1 (the default) or 3")
    if finalists < 0 or finalists == 1:
        raise LvsearchError(f"--finalists must be 0 (no finalist stage) or ≥ 2, got {finalists}",
                            fix="e.g. --finalists 3, or leave it out")
    if not (math.isfinite(slowdown) and slowdown > 0):
        raise LvsearchError(f"--speed must be a finite number > 0, got {slowdown}", fix="e.g. --speed 1 or --speed auto")
    s = minutes / slowdown / BASE_MINUTES
    small = s < 0.5

    def steps(base: int, floor: int, multiple: int) -> int:
        return max(floor, int(round(base * s / multiple)) * multiple)

    retrain = steps(1800, 48, 8)
    finetune_seeds = 1 if s < 2 else 2
    return Plan(
        minutes=float(minutes),
        vocab_size=4096,
        supernet_steps=steps(800, 40, 10),
        supernet_dev_sequences=32 if small else 128,
        population=8 if small else min(50, int(round(20 * s ** 0.5))),
        iterations=2 if small else max(3, min(20, int(round(5 * s ** 0.5)))),
        topk=4 if small else 10,
        search_dev_sequences=32 if small else min(1024, max(256, int(round(1024 * s)))),
        racing="default",
        arms=ARMS[:3],
        arm_processes=3,
        finalists=int(finalists),
        finalists_compare_full=bool(finalists) and s >= 2,
        retrain_steps=retrain,
        curve_every=max(1, retrain // 20),
        curve_sequences=32 if small else 64,
        seeds=int(seeds),
        mlm_dev_sequences=64 if small else 512,
        blimp_limit=max(1, min(1000, int(round(25 * s)))),
        finetune_train_limit=max(64, int(round(1500 * s / finetune_seeds))),
        finetune_eval_limit=max(64, min(2000, int(round(500 * s ** 0.5)))),
        finetune_epochs=1 if small else 2,
        finetune_seeds=finetune_seeds,
        slowdown=float(slowdown),
    )
