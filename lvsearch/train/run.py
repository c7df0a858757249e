"""Run folders shared by the training jobs: new-run checks, resume, overwrite.

A run folder holds ``config.json`` (a format tag naming the job, the resolved recipe and the
facts later stages need), ``tokenizer.json``, ``metrics.jsonl``, ``curve.jsonl`` (evaluations
against tokens seen), ``checkpoints/`` and ``summary.json``.

* A new run refuses a folder that already holds a run (``--resume`` continues it,
  ``--overwrite`` replaces it) or any other non-empty folder (never deleted).
* ``--resume`` uses the recorded configuration; passing a different recipe or ``--set``
  values is refused with the sections that differ.
* A finished run stays finished: ``--resume`` of a run whose ``summary.json`` is complete at
  the target step changes no file (:func:`finished_summary`). A run killed between its final
  checkpoint and ``summary.json`` is not finished: resuming it evaluates the final checkpoint
  again and writes the summary.
"""

from __future__ import annotations

import json
import os
import reprlib
import shutil
from pathlib import Path
from typing import Any, Callable, Optional, Union

from pydantic import Field

from lvsearch.config import Overrides, build_dataclass, load_config, override_map, to_jsonable
from lvsearch.errors import LvsearchError
from lvsearch.io import check_writable_folder, copy_file, differing_leaves, guard_output, read_json
from lvsearch.train.checkpoint import CHECKPOINTS, latest_checkpoint, latest_step, verify_checkpoint
from lvsearch.schema import Count, FileModel

CONFIG = "config.json"
SUMMARY = "summary.json"


def normalise(obj: Any) -> Any:
    """JSON round trip (tuples → lists) so configs compare equal to what was recorded."""
    return json.loads(json.dumps(obj))


def check_new_run(out: Path, *, overwrite: bool, run_format: str) -> None:
    """Make sure a new run may be written to ``out``; with ``overwrite``, delete an old run there.

    Raises:
        LvsearchError: ``out`` is a file, holds a run (and no ``overwrite``), holds a run of
            another job, or holds other files.
    """
    if out.exists() and not out.is_dir():
        raise LvsearchError(f"--out {out} is a file", fix="choose a folder path")
    check_writable_folder(out)
    if not out.is_dir() or not any(out.iterdir()):
        return
    holds_run = (out / CONFIG).exists() or (out / CHECKPOINTS).exists()
    if not holds_run:
        raise LvsearchError(f"--out {out} is not empty and holds no lvsearch run", fix="choose a new or empty folder")
    if not overwrite:
        raise LvsearchError(
            f"--out {out} already holds a training run",
            fix="pass --resume to continue it, --overwrite to replace it, or choose another --out",
        )
    recorded = (read_json(out / CONFIG, what="run config", regenerate=restart_command(run_format, out))
                if (out / CONFIG).exists() else {})
    if isinstance(recorded, dict) and recorded.get("format") not in (None, run_format):
        raise LvsearchError(
            f"--out {out} holds a run of another kind ({recorded.get('format')}); --overwrite only replaces a {run_format} run",
            fix="choose another --out",
        )
    shutil.rmtree(out)


def restart_command(run_format: str, out: str | os.PathLike) -> str:
    """The command that writes the run ``out`` of job ``run_format`` anew (named by the fix for
    a damaged ``config.json``, without which the run cannot be resumed)."""
    verb = {"supernet": "train-supernet --config RECIPE", "retrain": "retrain --arch ARCH --config RECIPE"}.get(
        run_format.removeprefix("lvsearch.").split("-run/")[0], "train-supernet --config RECIPE")
    return f"lvsearch {verb} --data DATA --out {out} --overwrite (trains the run again from step 0)"


class RunData(FileModel):
    folder: str
    tokenizer_sha256: str


class RunSpace(FileModel):
    """The search space a supernet run trained (:meth:`lvsearch.space.SearchSpace.to_dict`)."""

    name: str
    num_slots: Count


class RunTrain(FileModel):
    batch_size: Count
    seq_len: Count


class RunRecipe(FileModel):
    """The resolved recipe (checked in full by :func:`read_run_config`'s dataclass)."""

    train: RunTrain


class RunDims(FileModel):
    hidden: Count


class RunConfigFile(FileModel):
    """The fields of a run's ``config.json`` its readers use (a supernet run's also holds the
    ``space`` it trained and its model ``dims``)."""

    format: str
    config: RunRecipe
    data: RunData
    space: Optional[RunSpace] = None
    dims: Optional[RunDims] = None


class SupernetRunConfig(RunConfigFile):
    """A supernet run's ``config.json``: a run config with the ``space`` it trained and its ``dims``."""

    space: RunSpace
    dims: RunDims


def read_config_file(run_dir: str | os.PathLike, run_format: str, schema: type = RunConfigFile, *,
                     what: str = "run config") -> dict:
    """A run's ``config.json`` checked against ``schema`` (:class:`RunConfigFile`,
    :class:`SupernetRunConfig`); the job's format tag is not checked (:func:`read_run_config`
    does that). ``run_format`` names the job that trains the run again, for the fix.

    Raises:
        LvsearchError: missing, not JSON, or a field of the wrong type (named, with the command
            that trains the run again).
    """
    from lvsearch.io import read_checked

    run_dir = Path(run_dir)
    return read_checked(run_dir / CONFIG, schema, what=what, regenerate=restart_command(run_format, run_dir),
                        fix=config_fix(run_format, run_dir))


def config_fix(run_format: str, run_dir: str | os.PathLike) -> str:
    """The fix for a damaged ``config.json`` of the ``run_format`` run in ``run_dir``."""
    return f"restore it from a copy, or train the run again: {restart_command(run_format, run_dir)}"


def read_run_config(run_dir: Path, run_format: str, cls: type, *, missing_fix: str) -> tuple[Any, dict]:
    """``(config dataclass, recorded config.json)`` of a run folder of job ``run_format``.

    Raises:
        LvsearchError: ``config.json`` is missing (``missing_fix`` says what to do), unreadable,
            or belongs to another job.
    """
    if not (run_dir / CONFIG).is_file():
        raise LvsearchError(f"{run_dir} holds no run ({CONFIG} missing; a {run_format} run was expected)", fix=missing_fix)
    recorded = read_json(run_dir / CONFIG, what="run config", regenerate=restart_command(run_format, run_dir))
    if not isinstance(recorded, dict) or recorded.get("format") != run_format:
        raise LvsearchError(f"{run_dir / CONFIG} is not a {run_format} run config", fix="check the path")
    from lvsearch.io import check_fields

    check_fields(recorded, RunConfigFile, run_dir / CONFIG, what="run config", fix=config_fix(run_format, run_dir))
    return build_dataclass(cls, recorded["config"], str(run_dir / CONFIG)), recorded


def resume_config(out: Path, cls: type, run_format: str, recipe: str | dict | None, overrides: Overrides) -> tuple[Any, dict]:
    """The recorded configuration of the run in ``out`` (for ``--resume``).

    Raises:
        LvsearchError: no run or no checkpoint in ``out``, a run of another job, or a
            ``recipe``/``overrides`` that resolve to a different configuration.
    """
    config, recorded = read_run_config(out, run_format, cls, missing_fix="start without --resume")
    if recipe or overrides:
        new, _ = load_config(cls, recipe, overrides)
        a, b = normalise(to_jsonable(new)), recorded["config"]
        diffs = differing_leaves(b, a)
        if not recipe:  # --set alone: compared on the keys it sets (the rest is the recorded config's)
            given = set(override_map(overrides))
            diffs = [d for d in diffs if any(d[0] == k or d[0].startswith(k + ".") for k in given)]
        if diffs:
            diff = ", ".join(f"{k}: {reprlib.repr(old)} → {reprlib.repr(now)}" for k, old, now in diffs)
            raise LvsearchError(
                f"--resume with a different configuration than {out / CONFIG} ({diff}): a run resumes with the "
                "settings it started with (its steps also set its learning-rate schedule)",
                fix="resume without --config/--set (the recorded config is used), or start a new --out with "
                    "these settings",
            )
    if latest_checkpoint(out) is None:
        raise LvsearchError(f"--resume: {out} has no checkpoint yet", fix="start the run again (--overwrite)")
    return config, recorded


def check_same_data(recorded: dict, data, out: Path) -> None:
    """Refuse ``data`` (a :class:`~lvsearch.data.shards.PreparedData`) prepared with another
    tokenizer than the run's.

    Also refuses a dataset whose ``manifest.json`` changed since the run recorded it (rebuilt in
    place) and a run folder whose ``tokenizer.json`` copy was modified.

    Raises:
        LvsearchError: the hashes differ (the message names the files and folders).
    """
    data_sha, data_folder = data.tokenizer_sha256, data.folder
    if recorded["data"]["tokenizer_sha256"] != data_sha:
        raise LvsearchError(
            f"data folder {data_folder} was prepared with another tokenizer than the run in {out} "
            f"(sha256 {data_sha[:12]}… vs {recorded['data']['tokenizer_sha256'][:12]}…)",
            fix=f"pass the --data folder the run was started with ({recorded['data']['folder']})",
        )
    recorded_manifest = recorded["data"].get("manifest_sha256")
    if recorded_manifest is not None and recorded_manifest != data.manifest_sha256:
        raise LvsearchError(
            f"data folder {data_folder} changed since the run in {out} started ({data_folder / 'manifest.json'} sha256 "
            f"{data.manifest_sha256[:12]}… now, {recorded_manifest[:12]}… recorded in {out / CONFIG}): the same "
            f"steps would read other batches",
            fix="restore the dataset the run was started with, or start a new run (--overwrite or another --out)",
        )
    from lvsearch.data.shards import TOKENIZER
    from lvsearch.io import sha256_file

    copy = out / TOKENIZER
    if copy.is_file() and sha256_file(copy) != recorded["data"]["tokenizer_sha256"]:
        raise LvsearchError(f"{copy} was modified (sha256 differs from {out / CONFIG})",
                            fix=f"copy {data_folder / TOKENIZER} over it (the data's tokenizer is the right one)")


def select_config(
    out: Path,
    cls: type,
    run_format: str,
    recipe: str | dict | None,
    overrides: Overrides,
    *,
    resume: bool,
    overwrite: bool,
    data,
    info,
    check_new: Callable[[Any], None] | None = None,
) -> tuple[Any, dict | None]:
    """The configuration of a run: the recorded one on ``resume`` (same tokenizer required),
    else the recipe with ``overrides``, checked by ``check_new(config)`` and then
    :func:`check_new_run` (rank 0; ``overwrite`` deletes an old run only after every check
    passed). Returns ``(config, recorded config.json or None)``.

    Raises:
        LvsearchError: see :func:`resume_config`, :func:`check_same_data`,
            :func:`check_new_run` and ``check_new``.
    """
    from lvsearch.train.distributed import barrier

    if resume:
        config, recorded = resume_config(out, cls, run_format, recipe, overrides)
        check_same_data(recorded, data, out)
        return config, recorded
    config, _ = load_config(cls, recipe, overrides)
    if check_new is not None:
        check_new(config)
    if info.is_main:
        check_step_memory(config, data)
    if info.is_main:
        guard_output(out, overwrite=overwrite, writes=RUN_WRITES,
                     inputs=[("--data", getattr(data, "folder", None)), ("--few-shot-from (init_from)", getattr(config, "init_from", None))])
        check_new_run(out, overwrite=overwrite, run_format=run_format)
    barrier(info)
    return config, None


#: What a training run (train-supernet, retrain) writes at the top of its folder: what its
#: ``--overwrite`` may replace (anything else there is refused, :func:`lvsearch.io.guard_output`).
RUN_WRITES = ("config.json", "tokenizer.json", "metrics.jsonl", "curve.jsonl", "checkpoints", "summary.json",
              "environment.json", "model", "tracking")

#: Attention activations per step above which a new run warns (bytes).
COSTLY_STEP_BYTES = 4 << 30


def _slot_count(config: Any) -> int:
    """The slots a run's config builds: ``num_slots``, else its space's, else 12."""
    slots = getattr(config, "num_slots", None)
    if slots is None and isinstance(getattr(config, "space", None), str):
        try:  # the recipe's space sets the depth when num_slots does not
            from lvsearch.space import SearchSpace

            slots = SearchSpace.load(config.space).num_slots
        except LvsearchError:
            slots = None
    return slots or 12


def step_attention_bytes(config: Any) -> int:
    """Rough size (bytes) of one training step's attention activations: batch × heads × L² fp32
    scores, kept twice (scores and softmax) for the backward pass, at every slot (a supernet
    path or a retrained stack may put SA at any slot). An upper-bound estimate for warnings."""
    train, model = config.train, config.model
    slots = _slot_count(config)
    # a recipe's `model` section is a dict of explicit dims (retrain: over its named size)
    heads = model.get("heads") if isinstance(model, dict) else getattr(model, "heads", None)
    if heads is None and isinstance(getattr(config, "size", None), str):
        from lvsearch.config import MODEL_SIZES

        heads = MODEL_SIZES.get(config.size, {}).get("heads")
    heads = heads or 1
    return int(train.batch_size * heads * train.seq_len ** 2 * 4 * 2 * slots)


def physical_memory_bytes() -> int | None:
    """This machine's physical memory (bytes), or None where the OS does not say
    (:func:`lvsearch.device.physical_memory_bytes`)."""
    from lvsearch.device import physical_memory_bytes as ram

    return ram()


def check_step_memory(config: Any, data) -> None:
    """Warn when a new run's settings make each step very large: attention activations above
    :data:`COSTLY_STEP_BYTES`, or ``train.seq_len`` more than 4× the data's prepared sequence
    length (the usual sign of a typo, e.g. ``train.seq_len=12800``). Such a step takes tens of
    seconds and several GB on a CPU. Refuse when the estimate exceeds the machine's physical
    memory: that run could only fail, after allocating for minutes.

    Raises:
        LvsearchError: the estimated attention activations exceed physical memory; the message
            names the cause (``num_slots`` above 48, twice LV-BERT's, at a length of at most
            4× the data's; else ``train.seq_len``) and its fix.
    """
    from lvsearch import ui

    est = step_attention_bytes(config)
    seq, data_seq = config.train.seq_len, data.seq_len
    ram = physical_memory_bytes()
    if ram is not None and est > ram:
        n = _slot_count(config)
        per_slot = est / n
        if n <= 48 or seq > 4 * data_seq:  # the length (or batch) is the cause, not a slot count of twice LV-BERT's
            cause, fix = (f"train.seq_len={seq} (the data was prepared for sequences of {data_seq})",
                          f"lower train.seq_len (e.g. --set train.seq_len={data_seq}) or train.batch_size")
        else:
            cause, fix = (f"num_slots={n} (LV-BERT uses 24)",
                          f"lower num_slots (at most {max(1, int(ram // per_slot)):,} fit at this length and batch), "
                          "e.g. --set num_slots=24")
        raise LvsearchError(
            f"{cause}: one step's attention activations at train.batch_size={config.train.batch_size} × "
            f"train.seq_len={seq} × {n:,} slots would need up to ~{est / (1 << 30):,.0f} GB, more "
            f"than this machine's {ram / (1 << 30):.0f} GB", fix=fix)
    if est > COSTLY_STEP_BYTES or seq > 4 * data_seq:
        ui.warn(f"train.seq_len={seq} (the data was prepared for {data_seq}) with train.batch_size="
                f"{config.train.batch_size}: attention activations alone need up to ~{est / (1 << 30):.1f} GB per step, "
                "and a step may take tens of seconds on a CPU. Intended? Otherwise lower train.seq_len or "
                "train.batch_size (--set train.seq_len=128)")


def begin_run(out: Path, record: dict, data, info, *, resume: bool) -> None:
    """Write ``config.json`` (``record`` plus the data's folder, tokenizer hash and vocabulary
    size, and the world size) and a copy of the data's tokenizer into a new run folder (rank 0;
    on resume neither), record the numerical environment (``environment.json``,
    :func:`lvsearch.repro.record_environment`: new, or one more resume entry), then wait for
    every rank."""
    from lvsearch.data.shards import TOKENIZER
    from lvsearch.io import atomic_write_json
    from lvsearch.train.distributed import barrier

    if info.is_main and not resume:
        out.mkdir(parents=True, exist_ok=True)
        record = {
            **record,
            "data": {
                "folder": str(data.folder.resolve()),
                "tokenizer_sha256": data.tokenizer_sha256,
                "manifest_sha256": data.manifest_sha256,
                "vocab_size": data.vocab_size,
                "train_tokens": data.num_tokens("train"),
            },
            "world_size": info.world_size,
        }
        atomic_write_json(out / CONFIG, record)
        copy_file(data.folder / TOKENIZER, out / TOKENIZER)
    if info.is_main:
        from lvsearch.repro import record_environment

        record_environment(out, str(info.device), resume=resume)
    barrier(info)


Score = Optional[float]  # NaN kept: a diverged run records it


class EvalScores(FileModel):
    """One evaluation: ``loss`` (nats per masked target) and ``accuracy`` (0..1)."""

    loss: Score = None
    accuracy: Score = None


class FinalEval(FileModel):
    """A run's final evaluation (``summary.json``'s ``final_eval``): the fields readers use,
    each job writing its own: a supernet ``panel`` and ``unigram_accuracy``; a retrain run
    ``dev_mlm`` or ``generator_mlm`` and ``curve``; a fixed-architecture run (rank check,
    second stage) ``loss`` and ``accuracy``."""

    panel: Optional[dict[str, EvalScores]] = None
    unigram_accuracy: Score = None
    dev_mlm: Optional[EvalScores] = None
    generator_mlm: Optional[EvalScores] = None
    curve: Optional[dict[str, Score]] = None
    loss: Score = None
    accuracy: Score = None


class FloorRecord(FileModel):
    """One reference floor (:func:`lvsearch.eval.floors.compact_floors`)."""

    accuracy: float
    predicted_tokens: Optional[Count] = None
    tokens_seen: Optional[Count] = None


class Floors(FileModel):
    neighbour_count: FloorRecord = Field(alias="neighbour-count")
    unigram: FloorRecord


class RunSummary(FileModel):
    """The fields of a run's ``summary.json`` its readers use (written by
    :func:`lvsearch.train.loop.train` plus each job's own entries). Every field may be absent:
    :func:`finished_summary` treats a summary without ``steps`` or ``final_eval`` as incomplete.
    ``beats_floor``: per panel architecture (supernet) or one verdict (retrain)."""

    steps: Optional[Count] = None
    tokens: Optional[Count] = None
    tokens_per_s: Score = None
    final_eval: Optional[FinalEval] = None
    floors: Optional[Floors] = None
    beats_floor: Union[None, bool, dict[str, bool]] = None


def summary_fix(path: Path, rerun: str = "resume the run (its final checkpoint is evaluated again and the summary "
                                           "written anew)") -> str:
    """The fix for a damaged ``summary.json`` at ``path``: delete it and ``rerun``."""
    return f"restore {path} from a copy, or delete it and {rerun}"


def read_summary(path: Path, schema: type = RunSummary, *, what: str = "run summary",
                 rerun: str | None = None) -> dict | None:
    """The ``summary.json`` at ``path`` checked against ``schema`` (a :class:`RunSummary`), or
    None when it is missing or unreadable (not JSON: the caller runs again and rewrites it).

    Raises:
        LvsearchError: a JSON object whose field has the wrong type (named, with the fix:
            delete the file and ``rerun``).
    """
    from lvsearch.io import check_fields

    if not path.is_file():
        return None
    try:
        summary = read_json(path, what=what)
    except LvsearchError:
        return None  # rewritten by the run
    if not isinstance(summary, dict):
        return None
    return check_fields(summary, schema, path, what=what, fix=summary_fix(path, *([rerun] if rerun else [])))


def finished_summary(out: Path, target_steps: int) -> dict | None:
    """The recorded summary when the run in ``out`` is finished at ``target_steps``, else None.

    Finished means: ``summary.json`` is a JSON object with ``steps == target_steps`` and a
    non-empty ``final_eval``, and ``checkpoints/latest.json`` names step ``target_steps``, a
    checkpoint that is verified (sha256) as a resume would: a damaged one is reported. A
    missing, unreadable or incomplete summary (a run killed between its final checkpoint and
    the summary write) gives None: the caller resumes, which evaluates the checkpoint again.

    Raises:
        LvsearchError: a field of ``summary.json`` has the wrong type (:class:`RunSummary`;
            the fix: delete it and resume), ``checkpoints/latest.json`` is malformed, or the
            checkpoint it names is missing, truncated or modified.
    """
    summary = read_summary(out / SUMMARY)
    if summary is None or summary.get("steps") != target_steps or not summary.get("final_eval"):
        return None
    if latest_step(out) != target_steps:
        return None
    verify_checkpoint(latest_checkpoint(out))
    return summary


def train_state(run: Path, steps: int) -> str:
    """``done`` (a finished run: summary with its final evaluation at ``steps``,
    :func:`finished_summary`), ``partial`` (a checkpoint to resume, which also completes a run
    killed before its summary) or ``new``: how a pipeline stage that trains ``run`` to ``steps``
    starts it.

    Raises:
        LvsearchError: as :func:`finished_summary` (a damaged summary or checkpoint)."""
    if finished_summary(run, steps) is not None:
        return "done"
    if (run / "config.json").exists() and latest_checkpoint(run) is not None:
        return "partial"
    return "new"


def report_finished(out: Path, summary: dict, info) -> None:
    """Tell the user (rank 0) that ``--resume`` found the run in ``out`` already finished."""
    from lvsearch import ui

    if info.is_main:
        ui.console.print(f"the run in {out} is already finished ({summary['steps']} steps): nothing to do, "
                         f"no file changed ({SUMMARY} holds its final evaluation)", highlight=False)
