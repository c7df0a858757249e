"""The quickstart's budget plan: what every stage runs, as a function of ``--minutes``.

The constants are calibrated on the 2-core development machine (docs/results.md) so that the
default (20 minutes) finishes in time on the shared corpus; ``--minutes`` scales the step
counts and evaluation sizes linearly (with floors that keep every stage meaningful). The plan
is a pure function of its arguments — the same command gives the same steps on every machine;
a faster machine simply finishes sooner. It is recorded in ``quickstart.json`` and in the
report, together with what was cut compared with the paper settings.
"""

from __future__ import annotations

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
        vocab_size: WordPiece vocabulary of the prepared corpus (4096: see recipes/quickstart.yaml).
        supernet_steps: supernet training steps (batch 32 × 64 tokens).
        population, iterations: EA population ``P`` and iterations ``T``; random search makes
            the same ``P × T`` evaluations.
        topk: EA top-k.
        search_dev_sequences: sequences of the fixed masked dev set that scores candidates.
        finalists: EA top-k finalists entering successive halving (``retrain --finalists``, η = 2);
            the pick, trained to the full budget, is the EA arm.
        finalists_compare_full: also train the cut finalists to the end and compare the
            pruning rules with training all (only when the budget allows).
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
    population: int
    iterations: int
    topk: int
    search_dev_sequences: int
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

    def to_dict(self) -> dict:
        return asdict(self)

    def cuts(self, supernet_desc: str = "batch 32 × seq 64, 12 slots, hidden 128",
             retrain_tokens_per_step: int = 2048) -> list[tuple[str, str, str]]:
        """``(stage, this run, paper scale)`` rows for the report's "what was cut" table;
        ``supernet_desc`` and ``retrain_tokens_per_step`` describe the recipes actually used."""
        return [
            ("supernet", f"{self.supernet_steps} steps, {supernet_desc}", PAPER["supernet"]),
            ("search", f"population {self.population}, {self.iterations} iterations "
                       f"({self.population * self.iterations} evaluations) on {self.search_dev_sequences} dev sequences",
             PAPER["search"]),
            ("retrain", f"{self.retrain_steps} steps × {retrain_tokens_per_step:,} tokens per arm, {self.seeds} seed(s)",
             PAPER["retrain"]),
            ("BLiMP", f"first {self.blimp_limit} pairs of each paradigm", PAPER["blimp"]),
            ("fine-tuning", f"{self.finetune_train_limit} training examples, {self.finetune_epochs} epoch(s), "
                            f"{self.finetune_seeds} seed(s), first {self.finetune_eval_limit} dev/test examples",
             PAPER["finetune"]),
        ]


#: The four retrained arms, in report order, and their titles.
ARMS = ("ea", "random-search", "bert", "random-arch")
ARM_TITLES = {
    "ea": "EA (searched)",
    "random-search": "random-search best",
    "bert": "bert (SA/FF interleaved)",
    "random-arch": "random architecture",
}

#: Share of the wall time each stage took in the calibration run (``--minutes 20``, idle 2-core
#: machine, docs/results.md "Quickstart": data 9 s, supernet 242 s, search 44 s, finalists
#: 273 s, retrain 242 s, evaluate 365 s, rank 1 s of 1,176 s). The stage banners compare the
#: time used with these shares of the budget to give an ETA and to warn about an overrun.
STAGE_SHARES = {"data": 9, "supernet": 242, "search": 44, "finalists": 273, "retrain": 242, "evaluate": 365,
                "rank": 1, "report": 0}


def expected_fraction_done(done_stages) -> float:
    """Fraction of the planned wall time the stages in ``done_stages`` take (by
    :data:`STAGE_SHARES`), in [0, 1]."""
    total = sum(STAGE_SHARES.values())
    return sum(STAGE_SHARES.get(n, 0) for n in done_stages) / total


def pace_line(minutes: float, used_s: float, done_stages) -> tuple[str, float | None]:
    """``(text, pace)`` for a stage banner: the time used of the budget and, once a stage with a
    share has finished, the pace (used / planned for the stages done: 1.0 = on plan) and the
    whole run's ETA at that pace. ``pace`` is None before there is anything to compare."""
    used_min = used_s / 60
    frac = expected_fraction_done(done_stages)
    if frac <= 0.01 or used_s <= 0:
        return f"{used_min:.1f} of ~{minutes:g} min used", None
    pace = used_s / (frac * minutes * 60)
    eta_total = minutes * pace
    return (f"{used_min:.1f} of ~{minutes:g} min used; at this pace ({pace:.2f}× the plan) the whole run takes "
            f"~{eta_total:.0f} min, ~{max(0.0, eta_total - used_min):.0f} min left"), pace


def make_plan(minutes: float = BASE_MINUTES, seeds: int = 1) -> Plan:
    """The plan for a budget of ``minutes`` (default 20) and ``seeds`` pretraining seeds per arm.

    Budget shares at the calibration point (measured, docs/results.md): supernet ≈ 35%,
    search ≈ 8%, retraining four arms (+ finalists) ≈ 40%, evaluation ≈ 15%. Every training
    length scales linearly with ``minutes``; search size and evaluation sizes scale more slowly
    and have floors. Extra seeds multiply the retrain and evaluation stages: a run with
    ``seeds=3`` needs roughly ``minutes × 2`` of wall time.

    Raises:
        LvsearchError: ``minutes`` ≤ 0 or ``seeds`` < 1.
    """
    if not minutes > 0:
        raise LvsearchError(f"--minutes must be > 0, got {minutes}", fix="e.g. --minutes 20 (the default)")
    if seeds < 1:
        raise LvsearchError(f"--seeds must be ≥ 1, got {seeds}", fix="e.g. --seeds 1 (the default) or 3")
    s = minutes / BASE_MINUTES
    small = s < 0.5

    def steps(base: int, floor: int, multiple: int) -> int:
        return max(floor, int(round(base * s / multiple)) * multiple)

    retrain = steps(576, 48, 24)
    return Plan(
        minutes=float(minutes),
        vocab_size=4096,
        supernet_steps=steps(1500, 40, 10),
        population=8 if small else min(50, int(round(20 * s ** 0.5))),
        iterations=2 if small else max(3, min(20, int(round(5 * s)))),
        topk=4 if small else 10,
        search_dev_sequences=32 if small else min(256, int(round(128 * s ** 0.5))),
        finalists=3,
        finalists_compare_full=s >= 2,
        retrain_steps=retrain,
        curve_every=retrain // 24,
        curve_sequences=32 if small else 64,
        seeds=int(seeds),
        mlm_dev_sequences=64 if small else 256,
        blimp_limit=max(1, min(1000, int(round(50 * s)))),
        finetune_train_limit=max(64, int(round(1500 * s))),
        finetune_eval_limit=max(64, min(2000, int(round(500 * s ** 0.5)))),
        finetune_epochs=1 if small else 3,
        finetune_seeds=1 if s < 1 else 2,
    )
