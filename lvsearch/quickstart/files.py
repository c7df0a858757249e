"""The quickstart's own stage files as its report stage and stage loop read them (pydantic
models, :mod:`lvsearch.schema`), and :func:`read_stage_file`, which checks one. The search's
files are read through :class:`lvsearch.search.folder.SearchFolder`. A damaged or
hand-edited stage file is one message naming the file and the field, not a KeyError or
TypeError traceback in the report stage.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

from pydantic import Field

from lvsearch.schema import Count, FileModel

Score = Optional[float]


class RetrainRunConfig(FileModel):
    """A retrain run's ``config.json``: the architecture it trained (checked by ``Arch.from_dict``)."""

    arch: dict


class RankRow(FileModel):
    arm: str
    supernet_fitness: Score = None
    standalone_accuracy: Score = None


class Rank(FileModel):
    """The rank stage's ``rank.json``."""

    rows: list[RankRow]
    n: Count
    kendall_tau: Score = None
    kendall_p: Score = None
    spearman_rho: Score = None
    spearman_p: Score = None
    kendall_tau_ci95: Optional[Annotated[list[Score], Field(min_length=2, max_length=2)]] = None
    dev_sequences: Count
    supernet_step: Count


class StageRecord(FileModel):
    seconds: float = 0.0
    status: Optional[str] = None
    result: Optional[dict] = None


class QuickstartState(FileModel):
    """``quickstart.json``: the settings, the plan and one record per stage."""

    settings: dict
    plan: dict
    stages: dict[str, StageRecord]


class RetrainSummary(FileModel):
    """A retrain run's ``summary.json`` (an object; its fields are read where they are used)."""


#: How a damaged stage file is written again (named by the fixes).
QUICKSTART_AGAIN = "run the same quickstart command again with another --out (the stage that wrote it runs again there)"


def read_stage_file(path: str | Path, schema: type, *, what: str) -> dict:
    """The JSON of the quickstart stage file ``path``, checked against ``schema``.

    Raises:
        LvsearchError: the file is missing, not JSON, or a field does not fit (named), with the
            fix: restore it, or run the quickstart again into another ``--out``.
    """
    from lvsearch.io import read_checked

    return read_checked(path, schema, what=what, regenerate=QUICKSTART_AGAIN,
                        fix=f"restore the file from a copy, or {QUICKSTART_AGAIN}")


#: The quickstart's state file; its folders: one retrain run per arm and seed, one report each.
STATE_FILE = "quickstart.json"
RETRAIN_DIR = "retrain"
EVAL_DIR = "eval"


def run_names(arm: str, seeds: int) -> list[str]:
    """Run and report names of ``arm`` over ``seeds`` pretraining seeds: ``ARM`` for seed 0,
    ``ARM-seedK`` for the others (``OUT/retrain/NAME``, ``OUT/eval/NAME.json``)."""
    return [arm if k == 0 else f"{arm}-seed{k}" for k in range(seeds)]


def quickstart_reports(folder: str | Path) -> list[tuple[str, Path]] | None:
    """The evaluation reports behind a quickstart's folders, as ``(run name, OUT/eval/NAME.json)``:
    for the quickstart folder ``OUT`` every run of its plan (arms in plan order, then seeds); for
    an arm's retrain run ``OUT/retrain/NAME`` (or its ``model/``) that run's. None when ``folder``
    is neither. The reports need not exist yet.

    Raises:
        LvsearchError: ``OUT/quickstart.json`` is damaged (:func:`read_stage_file`).
    """
    import os

    folder = Path(os.path.abspath(folder))
    if folder.name == "model" and folder.parent.parent.name == RETRAIN_DIR:
        folder = folder.parent
    if folder.parent.name == RETRAIN_DIR and (folder.parent.parent / STATE_FILE).is_file():
        return [(folder.name, folder.parent.parent / EVAL_DIR / f"{folder.name}.json")]
    if not (folder / STATE_FILE).is_file():
        return None
    plan = read_stage_file(folder / STATE_FILE, QuickstartState, what="quickstart state")["plan"]
    arms, seeds = plan.get("arms"), plan.get("seeds", 1)
    if not (isinstance(arms, list) and all(isinstance(a, str) for a in arms) and isinstance(seeds, int) and seeds >= 1):
        from lvsearch.errors import LvsearchError

        raise LvsearchError(f"quickstart state {folder / STATE_FILE} is malformed: field plan.arms or plan.seeds "
                            f"(found {arms!r}, {seeds!r})", fix=f"restore the file from a copy, or {QUICKSTART_AGAIN}")
    return [(name, folder / EVAL_DIR / f"{name}.json") for arm in arms for name in run_names(arm, seeds)]
