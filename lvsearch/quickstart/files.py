"""The quickstart's own stage files as its report stage and stage loop read them (pydantic
models, :mod:`lvsearch.schema`), and :func:`read_stage_file`, which checks one. A damaged or
hand-edited stage file is one message naming the file and the field, not a KeyError or
TypeError traceback in the report stage.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

from pydantic import Field

from lvsearch.schema import Count, FileModel

Score = Optional[float]


class PickMeta(FileModel):
    fitness: Score = None


class SearchPick(FileModel):
    """A search's ``best.json`` (an architecture file with the search's ``meta``)."""

    ops: object
    meta: PickMeta


class CurvePoint(FileModel):
    topk_mean: Score = None


class SearchStateConfig(FileModel):
    iterations: Optional[Count] = None


class SearchExtra(FileModel):
    fitness: Optional[str] = None


class SearchState(FileModel):
    """The fields of a search's ``state.json`` the quickstart reads."""

    iteration: Optional[Count] = None
    config: Optional[SearchStateConfig] = None
    extra: Optional[SearchExtra] = None
    curve: Optional[list[CurvePoint]] = None


class SearchTopK(FileModel):
    """A search's ``topk.json``: its best complete candidates, best first (objects; the finalist
    stage reads their fields)."""

    topk: list[dict]


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
