"""The evaluation report's file format (``lvsearch.eval-report/v1``, written by ``lvsearch
evaluate``): the fields that ``lvsearch report``, ``evaluate --compare`` and the quickstart's
report read, as pydantic models (:mod:`lvsearch.schema`). :func:`lvsearch.eval.report.read_report`
checks every report against :class:`EvalReport` before anything is rendered, so a damaged or
hand-edited report is one message naming the field, never a traceback or a table of garbage.
"""

from __future__ import annotations

from typing import Annotated, Literal, Optional

from pydantic import Field, model_validator

from lvsearch.schema import Count, FileModel, Finite, needs_when_done

Score = Optional[float]  # a metric (NaN allowed: a Pearson of constant predictions), or null


class ModelConfig(FileModel):
    objective: str
    source: Optional[str] = None
    arch: Optional[dict] = None


class ModelInfo(FileModel):
    name: str
    folder: str
    num_params: Count
    config: ModelConfig


class VsFloor(FileModel):
    """A paired comparison with a floor: model − floor, its 95% interval, whether it lies above 0."""

    difference: Finite
    ci: Annotated[list[Finite], Field(min_length=2, max_length=2)]
    beats: bool


class Accuracy(FileModel):
    accuracy: Score = None


class MlmFloors(FileModel):
    status: Literal["done", "unavailable"]
    reason: Optional[str] = None
    tokens_seen: Optional[Count] = None
    unigram: Optional[Accuracy] = None
    neighbour_count: Optional[Accuracy] = Field(None, alias="neighbour-count")
    beats_floor: Optional[bool] = None
    vs_floor: Optional[VsFloor] = None
    done_check = needs_when_done("tokens_seen", "unigram", "neighbour_count")


class Mlm(FileModel):
    status: Literal["done", "skipped", "not applicable"]
    reason: Optional[str] = None
    accuracy: Optional[Finite] = None
    loss: Optional[Finite] = None
    floors: Optional[MlmFloors] = None
    per_target_correct: Optional[str] = None
    done_check = needs_when_done("accuracy", "loss")


class BlimpFloor(FileModel):
    status: Literal["done", "unavailable"]
    reason: Optional[str] = None
    order: Optional[Count] = None
    tokens_seen: Optional[Count] = None
    mean_over_paradigms: Score = None
    vs_floor: Optional[VsFloor] = None
    done_check = needs_when_done("order", "tokens_seen")


class Paradigm(FileModel):
    per_pair_correct: Optional[str] = None


class Blimp(FileModel):
    status: Literal["done", "skipped", "not applicable"]
    reason: Optional[str] = None
    mean_over_paradigms: Score = None
    mean_over_pairs: Score = None
    pairs: Optional[Count] = None
    ties: Optional[Count] = None
    phenomena: Optional[dict[str, Accuracy]] = None
    paradigms: Optional[dict[str, Paradigm]] = None
    metric: Optional[str] = None
    floor: Optional[BlimpFloor] = None
    sentences_per_second: Optional[Finite] = None
    done_check = needs_when_done("pairs", "ties", "phenomena")


class Summary(FileModel):
    """Mean / sample std / median over the seeds whose training loss fell, and their count."""

    mean: Score = None
    std: Score = None
    median: Score = None
    n: Count

    @model_validator(mode="after")
    def median_with_mean(self):
        if self.mean is not None and self.median is None:
            raise ValueError("a mean needs its median")
        return self


class TaskFloor(FileModel):
    status: Literal["done", "unavailable"]
    reason: Optional[str] = None
    C: Optional[Finite] = None
    dev: Optional[dict[str, Score]] = None
    test: Optional[dict[str, Score]] = None
    done_check = needs_when_done("C")


class Task(FileModel):
    status: Optional[Literal["done", "failed"]] = None
    aggregate: dict[Literal["dev", "test"], dict[str, Summary]]
    per_seed: Optional[list[dict]] = None
    failed_seeds: Optional[list[int]] = None
    metric_labels: Optional[dict[str, str]] = None
    select_metric: Optional[str] = None
    floor: Optional[TaskFloor] = None
    vs_floor: Optional[VsFloor] = None

    @model_validator(mode="after")
    def has_a_split(self):
        if not self.aggregate or not all(self.aggregate.values()):
            raise ValueError("aggregate needs a 'dev' or 'test' entry, each with at least one metric")
        return self


class EvalReport(FileModel):
    format: Literal["lvsearch.eval-report/v1"]
    model: ModelInfo
    mlm: Optional[Mlm] = None
    blimp: Optional[Blimp] = None
    finetune: Optional[dict[str, Task]] = None
