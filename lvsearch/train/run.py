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
import shutil
from pathlib import Path
from typing import Any, Callable

from lvsearch.config import build_dataclass, load_config, to_jsonable
from lvsearch.errors import LvsearchError
from lvsearch.io import differing_keys, read_json
from lvsearch.train.checkpoint import CHECKPOINTS, latest_checkpoint, latest_step, verify_checkpoint

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
    recorded = read_json(out / CONFIG, what="run config") if (out / CONFIG).exists() else {}
    if isinstance(recorded, dict) and recorded.get("format") not in (None, run_format):
        raise LvsearchError(
            f"--out {out} holds a run of another kind ({recorded.get('format')}); --overwrite only replaces a {run_format} run",
            fix="choose another --out",
        )
    shutil.rmtree(out)


def read_run_config(run_dir: Path, run_format: str, cls: type, *, missing_fix: str) -> tuple[Any, dict]:
    """``(config dataclass, recorded config.json)`` of a run folder of job ``run_format``.

    Raises:
        LvsearchError: ``config.json`` is missing (``missing_fix`` says what to do), unreadable,
            or belongs to another job.
    """
    if not (run_dir / CONFIG).is_file():
        raise LvsearchError(f"{run_dir} holds no run ({CONFIG} missing; a {run_format} run was expected)", fix=missing_fix)
    recorded = read_json(run_dir / CONFIG, what="run config")
    if not isinstance(recorded, dict) or recorded.get("format") != run_format:
        raise LvsearchError(f"{run_dir / CONFIG} is not a {run_format} run config", fix="check the path")
    return build_dataclass(cls, recorded["config"], str(run_dir / CONFIG)), recorded


def resume_config(out: Path, cls: type, run_format: str, recipe: str | None, overrides: list[str]) -> tuple[Any, dict]:
    """The recorded configuration of the run in ``out`` (for ``--resume``).

    Raises:
        LvsearchError: no run or no checkpoint in ``out``, a run of another job, or a
            ``recipe``/``overrides`` that resolve to a different configuration.
    """
    config, recorded = read_run_config(out, run_format, cls, missing_fix="start without --resume")
    if recipe or overrides:
        new, _ = load_config(cls, recipe, overrides)
        a, b = normalise(to_jsonable(new)), recorded["config"]
        if a != b:
            diff = differing_keys(a, b)
            raise LvsearchError(
                f"--resume with a different configuration than {out / CONFIG} (sections differ: {', '.join(diff)})",
                fix="resume without --config/--set (the recorded config is used), or start a new --out",
            )
    if latest_checkpoint(out) is None:
        raise LvsearchError(f"--resume: {out} has no checkpoint yet", fix="start the run again (--overwrite)")
    return config, recorded


def check_same_tokenizer(recorded: dict, data_sha: str, data_folder: Path, out: Path) -> None:
    """Refuse data prepared with another tokenizer than the run's.

    Raises:
        LvsearchError: the hashes differ (the message names both folders).
    """
    if recorded["data"]["tokenizer_sha256"] != data_sha:
        raise LvsearchError(
            f"data folder {data_folder} was prepared with another tokenizer than the run in {out} "
            f"(sha256 {data_sha[:12]}… vs {recorded['data']['tokenizer_sha256'][:12]}…)",
            fix=f"pass the --data folder the run was started with ({recorded['data']['folder']})",
        )


def select_config(
    out: Path,
    cls: type,
    run_format: str,
    recipe: str | None,
    overrides: list[str],
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
        LvsearchError: see :func:`resume_config`, :func:`check_same_tokenizer`,
            :func:`check_new_run` and ``check_new``.
    """
    from lvsearch.train.distributed import barrier

    if resume:
        config, recorded = resume_config(out, cls, run_format, recipe, overrides)
        check_same_tokenizer(recorded, data.tokenizer_sha256, data.folder, out)
        return config, recorded
    config, _ = load_config(cls, recipe, overrides)
    if check_new is not None:
        check_new(config)
    if info.is_main:
        check_new_run(out, overwrite=overwrite, run_format=run_format)
    barrier(info)
    return config, None


def begin_run(out: Path, record: dict, data, info, *, resume: bool) -> None:
    """Write ``config.json`` (``record`` plus the data's folder, tokenizer hash and vocabulary
    size, and the world size) and a copy of the data's tokenizer into a new run folder (rank 0;
    nothing on resume), then wait for every rank."""
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
                "vocab_size": data.vocab_size,
                "train_tokens": data.num_tokens("train"),
            },
            "world_size": info.world_size,
        }
        atomic_write_json(out / CONFIG, record)
        shutil.copyfile(data.folder / TOKENIZER, out / TOKENIZER)
    barrier(info)


def finished_summary(out: Path, target_steps: int) -> dict | None:
    """The recorded summary when the run in ``out`` is finished at ``target_steps``, else None.

    Finished means: ``summary.json`` is a JSON object with ``steps == target_steps`` and a
    non-empty ``final_eval``, and ``checkpoints/latest.json`` names step ``target_steps``, a
    checkpoint that is verified (sha256) as a resume would: a damaged one is reported. A
    missing, unreadable or incomplete summary (a run killed between its final checkpoint and
    the summary write) gives None: the caller resumes, which evaluates the checkpoint again.

    Raises:
        LvsearchError: ``checkpoints/latest.json`` is malformed, or the checkpoint it names is
            missing, truncated or modified.
    """
    path = out / SUMMARY
    if not path.is_file():
        return None
    try:
        summary = read_json(path, what="run summary")
    except LvsearchError:
        return None  # rewritten by the resume
    if not isinstance(summary, dict) or summary.get("steps") != target_steps or not summary.get("final_eval"):
        return None
    if latest_step(out) != target_steps:
        return None
    verify_checkpoint(latest_checkpoint(out))
    return summary


def report_finished(out: Path, summary: dict, info) -> None:
    """Tell the user (rank 0) that ``--resume`` found the run in ``out`` already finished."""
    from lvsearch import ui

    if info.is_main:
        ui.console.print(f"the run in {out} is already finished ({summary['steps']} steps): nothing to do, "
                         f"no file changed ({SUMMARY} holds its final evaluation)", highlight=False)
