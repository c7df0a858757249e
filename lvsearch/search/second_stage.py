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
from typing import Any, Callable, Optional

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
    from lvsearch.io import atomic_write_json
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
        from lvsearch.search.rank_check import FixedArchObjective, read_fixed_arch_summary
        from lvsearch.train.loop import train

        tcfg = replace(cfg.train, steps=stage.steps, warmup_steps=stage.steps // 10, eval_every=0, checkpoint_every=0,
                       keep_checkpoints=1, log_every=max(1, stage.steps // 5))
        want = {"steps": stage.steps, "supernet_step": loaded.step, "fresh_sequences": len(fresh), "targets": targets}
        for i, arch in enumerate(archs):
            run = Path(out) / f"{i:02d}"
            done = run / "summary.json"
            summary = None
            if done.is_file():
                rec = read_fixed_arch_summary(done, what="second-stage run summary",
                                              rerun="run the same evolve command with --resume (only that run of "
                                              "the second stage is trained again; the search is kept)")
                if rec.get("arch") == arch.key and all(rec.get(k) == v for k, v in want.items()):
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


# --------------------------------------------------------------------------- in lvsearch evolve
#: How a damaged ``second_stage.json`` is written again (named by the fix).
SECOND_STAGE_AGAIN = ("delete it and run the same evolve command with --resume (the second stage runs again; the "
                      "search is kept)")


def check_second_stage_inputs(stage: SecondStage, topk: int, prepared, n_dev: int, seq_len: int, out: Path, *,
                              resume: bool) -> None:
    """Before anything runs: the second stage has fresh dev sequences to score on (``prepared``'s
    dev split beyond the search's ``n_dev`` sequences of ``seq_len`` tokens), and a resume of the
    search in ``out`` asks for the second stage its folders already hold (so the EA and its
    random-search control never end up re-ranked with different compute, and best.json never
    contradicts second_stage.json). ``topk``: the search's ``--topk`` (the default ``k``).

    Raises:
        LvsearchError: no fresh sequence left, ``--second-stage-dev`` above what is left, or a
            resume whose second-stage switches differ from a recorded ``second_stage.json``.
    """
    from lvsearch.io import read_json
    from lvsearch.search.folder import RANDOM_DIR

    if stage.enabled:
        left = len(prepared.sequences("dev", seq_len)) - n_dev
        if left < 1:
            raise LvsearchError(f"--second-stage {stage.method} needs dev sequences the fitness does not use, but "
                                f"--dev-sequences takes all {n_dev} of {prepared.folder}'s dev split",
                                fix="score the search on fewer --dev-sequences (e.g. 1024), or drop --second-stage")
        if stage.dev_sequences is not None and stage.dev_sequences > left:
            raise LvsearchError(f"--second-stage-dev {stage.dev_sequences} is above the {left} dev sequences the "
                                f"fitness leaves fresh in {prepared.folder}",
                                fix=f"pass --second-stage-dev ≤ {left}, or omit it to use all {left}")
    if not resume:
        return
    want = {**stage.to_dict(), "k": stage.k if stage.k is not None else topk}
    for folder in (out, out / RANDOM_DIR):
        path = folder / SECOND_STAGE_FILE
        if not path.is_file():
            continue
        rec = read_json(path, what="second stage", regenerate=SECOND_STAGE_AGAIN)
        had = rec.get("settings") if isinstance(rec, dict) else None
        if not stage.enabled or had != want:
            shown = ", ".join(f"{k}={v}" for k, v in (had or {}).items())
            raise LvsearchError(f"--resume with other second-stage switches than {path} ({shown})",
                                fix="resume with the same --second-stage switches, or start again with --overwrite")


def run_second_stage(stage: SecondStage, loaded, prepared, res, folder: Path, *, topk: int, label: str, fitness: str,
                     dev_sequences: int, info, show: bool, best_meta: Callable[[Any], dict]) -> dict:
    """Re-rank the finished search ``res``'s (:class:`~lvsearch.search.evolution.SearchResult`)
    top-k by ``stage`` (:func:`rerank`); write ``folder/second_stage.json`` and point
    ``folder/best.json`` at the pick, with ``best_meta(result of the pick)`` as its meta plus
    the second stage's scores. A finished stage with the same settings and candidates is kept.
    ``topk``: the search's ``--topk`` (the default ``k``); ``dev_sequences``: the size of the
    search's dev set. Returns the record.

    Raises:
        LvsearchError: :func:`rerank`'s errors; a damaged recorded stage
            (:func:`check_second_stage_record`).
    """
    from lvsearch import ui
    from lvsearch.io import atomic_write_json, read_json

    k = stage.k if stage.k is not None else topk
    cands = [r for r in res.topk if r.complete][:k]
    settings = {**stage.to_dict(), "k": k}
    path = folder / SECOND_STAGE_FILE
    rec = read_json(path, what="second stage", regenerate=SECOND_STAGE_AGAIN) if path.is_file() else None
    if not (isinstance(rec, dict) and rec.get("settings") == settings and rec.get("candidates") == [r.key for r in cands]):
        out = rerank(loaded, [Arch.from_key(r.key) for r in cands], stage, search_dev_sequences=dev_sequences,
                     prepared=prepared, fitness=fitness, out=folder / SECOND_STAGE_DIR, info=info,
                     show_progress=show)
        rec = {"settings": settings, "candidates": [r.key for r in cands], "search_best": res.best.key, **out}
        if info.is_main:
            atomic_write_json(path, rec)
    else:
        check_second_stage_record(rec, path)
    if info.is_main and rec["pick"] is not None:
        row = next(r for r in rec["rows"] if r["key"] == rec["pick"])
        meta = best_meta(next(r for r in cands if r.key == rec["pick"]))
        meta["second_stage"] = {k2: rec[k2] for k2 in ("method", "steps", "dev_sequences", "targets")} | {
            "accuracy": row["accuracy"], "loss": row["loss"], "score": row["score"],
            "search_rank": rec["candidates"].index(rec["pick"]) + 1}
        Arch.from_key(rec["pick"]).to_json(folder / "best.json", space=loaded.space.name, meta=meta)
    if show:
        rank = rec["candidates"].index(rec["pick"]) + 1 if rec["pick"] is not None else None
        cost = (f"{rec['k']} candidates × {rec['steps']} steps" if rec["method"] == "finetune"
                else f"{rec['k']} candidates")
        ui.console.print(f"{label}: second stage ({rec['method']}, {cost}, {rec['targets']:,} fresh dev targets, "
                         f"{rec['seconds']:.0f}s): pick {rec['pick']} (#{rank} of the search's top-{rec['k']})",
                         highlight=False, markup=False, soft_wrap=True)
    return rec


def check_second_stage_record(rec: dict, path: Path) -> dict:
    """Check a recorded ``second_stage.json`` before a resume reuses it: the fields it is read
    for (:class:`SecondStageRecord`), and a pick that is one of its candidates with a row.

    Raises:
        LvsearchError: a field missing or of the wrong type, or a pick that is no candidate or
            has no row (names the file and the field; an edit here was a StopIteration traceback).
    """
    from lvsearch.io import check_fields

    fix = f"delete {path} and resume with the same command: the second stage runs again"
    check_fields(rec, SecondStageRecord, path, what="second stage record", fix=fix)
    if rec["pick"] is not None:
        if rec["pick"] not in rec["candidates"]:
            raise LvsearchError(f"second stage record {path} is malformed: field pick {rec['pick']!r} is not one of "
                                f"its candidates", fix=fix)
        if not any(r["key"] == rec["pick"] for r in rec["rows"]):
            raise LvsearchError(f"second stage record {path} is malformed: field rows has no row for the pick "
                                f"{rec['pick']!r}", fix=fix)
    return rec
