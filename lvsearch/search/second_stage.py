"""The search's second stage: re-rank a search's top-k on fresh dev targets before the pick.

A search picks the best of many noisy fitness values, so its winner's score on the targets that
selected it is biased upwards (the winner's curse), and its top-k are often within the noise of
each other. The second stage takes the ``k`` distinct best architectures of a finished search and
scores them again, on dev sequences the search never saw (:func:`lvsearch.data.loader.held_out_dev_set`):

- ``rescore``: the inherited supernet weights, as the search's fitness, on the fresh targets (one
  more evaluation per candidate; "a second look", as successive halving on fresh data does in
  GreedyNAS, You et al. 2020, and Hyperband, Li et al. 2018, without the elimination rounds);
- ``finetune``: each candidate's inherited weights (:meth:`Supernet.extract`) trained on for
  ``steps`` MLM steps with the supernet run's recipe (its data stream from step 0, batch,
  masking, peak learning rate; warm-up ``steps // 10``, the schedule shortened to ``steps``),
  then scored on the fresh targets (NSGANetV2, Lu et al. 2020, fine-tunes inherited weights
  before its final ranking).

The same settings give every search the same compute (``k × steps`` optimizer steps, ``k``
evaluations on the fresh targets): evolve applies one :class:`SecondStage` to the EA and to its
random-search control alike, and records the compute in each ``second_stage.json``.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Optional

from lvsearch.arch import Arch
from lvsearch.errors import LvsearchError
from lvsearch.search.fitness import Fitness
from lvsearch.schema import Count, FileModel

SECOND_STAGE_METHODS = ("none", "rescore", "finetune")
SECOND_STAGE_FILE = "second_stage.json"
SECOND_STAGE_DIR = "second_stage"


@dataclass(frozen=True)
class SecondStage:
    """Settings of the second stage.

    Attributes:
        method: ``none``, ``rescore`` or ``finetune`` (module docstring).
        k: how many distinct architectures of the top-k are re-ranked (None: the search's ``topk``).
        steps: optimizer steps of ``finetune`` per candidate (ignored by ``rescore``).
        dev_sequences: fresh dev sequences to score on (None: every dev sequence the search's
            fitness does not use).

    Raises:
        LvsearchError: an unknown method, ``k < 1``, ``steps < 1`` or ``dev_sequences < 1``.
    """

    method: str = "none"
    k: int | None = None
    steps: int = 100
    dev_sequences: int | None = None

    def __post_init__(self) -> None:
        if self.method not in SECOND_STAGE_METHODS:
            raise LvsearchError(f"--second-stage {self.method!r} is not one of {', '.join(SECOND_STAGE_METHODS)}",
                                fix="e.g. --second-stage finetune")
        if self.k is not None and (not isinstance(self.k, int) or self.k < 1):
            raise LvsearchError(f"--second-stage-k must be ≥ 1, got {self.k}", fix="e.g. --second-stage-k 10, or omit it for --topk")
        if not isinstance(self.steps, int) or self.steps < 1:
            raise LvsearchError(f"--second-stage-steps must be ≥ 1, got {self.steps}", fix="e.g. --second-stage-steps 100")
        if self.dev_sequences is not None and (not isinstance(self.dev_sequences, int) or self.dev_sequences < 1):
            raise LvsearchError(f"--second-stage-dev must be ≥ 1 sequence, got {self.dev_sequences}",
                                fix="e.g. --second-stage-dev 512, or omit it for every dev sequence the search does not use")

    @property
    def enabled(self) -> bool:
        return self.method != "none"

    def to_dict(self) -> dict:
        return asdict(self)




def rerank(loaded, archs: list[Arch], stage: SecondStage, *, search_dev_sequences: int | None, prepared,
           fitness: str, out: Path | None, info, show_progress: bool = False) -> dict:
    """Score ``archs`` by ``stage`` on dev sequences disjoint from the search's.

    Args:
        loaded: a :func:`lvsearch.train.supernet.load_supernet` result.
        archs: the candidates (distinct), e.g. a search's top-k best first.
        stage: the settings (``method`` not ``none``).
        search_dev_sequences: the size of the search's fixed dev set (left out; None = all).
        prepared: the run's :class:`~lvsearch.data.shards.PreparedData`.
        fitness: ``accuracy`` or ``loss`` — what the pick maximises (``accuracy`` / ``− loss``).
        out: folder for the ``finetune`` runs (``NN/``; a finished run with the same
            architecture, steps, supernet step and fresh set is kept on a re-run); None with
            ``rescore`` only.
        info: distributed placement.

    Returns:
        ``{"method", "k", "steps", "dev_sequences", "targets", "optimizer_steps", "tokens",
        "seconds", "rows": [{"key", "accuracy", "loss", "score"} in the order given], "pick"}``;
        ``optimizer_steps`` = ``len(archs) × steps`` for ``finetune``, 0 for ``rescore``.

    Raises:
        LvsearchError: nothing left of the dev split for fresh targets, an empty ``archs``.
    """
    from lvsearch.data.loader import held_out_dev_set
    from lvsearch.io import atomic_write_json, read_json
    from lvsearch.search.evaluator import SupernetEvaluator

    if not archs:
        raise LvsearchError("the second stage got no architecture to re-rank")
    t0 = time.perf_counter()
    cfg = loaded.config
    fresh = held_out_dev_set(prepared, exclude_sequences=search_dev_sequences, num_sequences=stage.dev_sequences,
                             seq_len=cfg.train.seq_len, seed=cfg.eval.seed)
    targets = int((fresh.labels != -100).sum())
    rows: list[dict] = []
    opt_steps = 0
    if stage.method == "rescore":
        ev = SupernetEvaluator(loaded.supernet, fresh, seq_len=cfg.train.seq_len, device=info.device, info=info,
                               fitness=fitness)
        for r in ev.evaluate_many(archs):
            rows.append({"key": r.key, "accuracy": r.accuracy, "loss": r.loss})
    elif stage.method == "finetune":
        from lvsearch.search.rank_check import FixedArchObjective
        from lvsearch.train.loop import train

        tcfg = replace(cfg.train, steps=stage.steps, warmup_steps=stage.steps // 10, eval_every=0, checkpoint_every=0,
                       keep_checkpoints=1, log_every=max(1, stage.steps // 5))
        want = {"steps": stage.steps, "supernet_step": loaded.step, "fresh_sequences": len(fresh), "targets": targets}
        for i, arch in enumerate(archs):
            run = Path(out) / f"{i:02d}"
            done = run / "summary.json"
            summary = None
            if done.is_file():
                rec = read_json(done, what="second-stage run summary")
                if isinstance(rec, dict) and rec.get("arch") == arch.key and all(rec.get(k) == v for k, v in want.items()):
                    summary = rec
            if summary is None:
                if info.is_main:
                    if run.exists():
                        shutil.rmtree(run)
                    run.mkdir(parents=True)
                obj = FixedArchObjective(arch, loaded.dims, prepared, replace(cfg, train=tcfg), fresh, info,
                                         init=loaded.supernet.extract(arch))
                summary = train(obj, tcfg, run, info, tokens_per_step=tcfg.batch_size * tcfg.seq_len, resume=False,
                                checkpoint_extra={"arch": arch.key}, label=f"second stage {i + 1}/{len(archs)}",
                                show_progress=show_progress)
                summary = {**summary, "arch": arch.key, **want}
                if info.is_main:
                    atomic_write_json(done, summary)
            final = summary.get("final_eval") or {}
            rows.append({"key": arch.key, "accuracy": final.get("accuracy"), "loss": final.get("loss")})
        opt_steps = len(archs) * stage.steps
    else:
        raise LvsearchError(f"second stage method {stage.method!r} has nothing to run")
    for row in rows:
        row["score"] = Fitness.parse(fitness).of_row(row) if row["loss"] is not None else None
    scored = [r for r in rows if r["score"] is not None]
    pick = max(scored, key=lambda r: r["score"])["key"] if scored else None
    return {
        "method": stage.method, "k": len(archs), "steps": stage.steps if stage.method == "finetune" else 0,
        "dev_sequences": len(fresh), "targets": targets, "fitness": fitness, "optimizer_steps": opt_steps,
        "tokens": opt_steps * cfg.train.batch_size * cfg.train.seq_len, "seconds": time.perf_counter() - t0,
        "rows": rows, "pick": pick,
    }


# ------------------------------------------------------------------ the record's file format

class SecondStageRow(FileModel):
    key: str
    accuracy: Optional[float] = None
    loss: Optional[float] = None
    score: Optional[float] = None


class SecondStageRecord(FileModel):
    """``second_stage.json`` as a resume reads it (written by the search job from :func:`rerank`)."""

    settings: dict
    candidates: list[str]
    pick: Optional[str]
    rows: list[SecondStageRow]
    method: str
    k: Count
    steps: Count
    dev_sequences: Count
    targets: Count
    seconds: float
