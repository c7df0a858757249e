"""The search's fitness: the one place a supernet score becomes a number to maximise.

A candidate architecture inherits the supernet's weights and is scored on a fixed masked dev
set (:func:`lvsearch.train.supernet.load_dev`, the standard BERT dev masking). Two metrics:

* ``loss`` (the default): minus the mean dev MLM cross-entropy over the prediction targets, in
  nats. Continuous, so it resolves candidates that accuracy ties (docs/results.md, "Fitness
  noise").
* ``accuracy``: the fraction of targets predicted exactly (LV-BERT's fitness, Sec. 3.2), in
  [0, 1]; it moves in steps of one target.

Both are "higher is better". State files written before the fitness was recorded were scored
with accuracy (:data:`LEGACY`); :meth:`Fitness.of_record` applies that rule, and nothing else
may guess a missing fitness.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from lvsearch.errors import LvsearchError

METRICS = ("accuracy", "loss")


@dataclass(frozen=True)
class Fitness:
    """One fitness metric (``"accuracy"`` or ``"loss"``) and everything derived from it."""

    metric: str

    def __post_init__(self):
        if self.metric not in METRICS:
            raise LvsearchError(f"unknown fitness {self.metric!r}", fix=f"use one of {', '.join(METRICS)}")

    @classmethod
    def parse(cls, value: "str | Fitness") -> "Fitness":
        """A :class:`Fitness` from its name (or itself).

        Raises:
            LvsearchError: an unknown name.
        """
        return value if isinstance(value, Fitness) else cls(str(value))

    @classmethod
    def of_record(cls, record: Mapping[str, Any] | None, key: str = "fitness") -> "Fitness":
        """The fitness a state file or ``best.json`` meta records under ``key``; a file from
        before the fitness was recorded was scored with :data:`LEGACY` (accuracy)."""
        value = (record or {}).get(key)
        return LEGACY if value is None else cls.parse(value)

    higher_is_better = True

    @property
    def continuous(self) -> bool:
        """Whether two candidates can tie only by chance (the loss), not by the count of targets
        they predict (accuracy)."""
        return self.metric == "loss"

    def recorded(self) -> dict[str, str]:
        """What a state file records: ``{"fitness": metric}``, or nothing for :data:`LEGACY`
        (states from before the fitness was recorded stay byte-identical on resume)."""
        return {} if self == LEGACY else {"fitness": self.metric}

    @property
    def label(self) -> str:
        """What the number is, for a plot axis or a report line."""
        return "dev MLM accuracy" if self.metric == "accuracy" else "−(mean dev MLM loss)"

    @property
    def unit(self) -> str:
        return "fraction of targets" if self.metric == "accuracy" else "nats"

    @property
    def axis_label(self) -> str:
        """``label (unit)``: the axis of a scatter or a curve of this fitness."""
        return f"{self.label} ({self.unit})"

    @property
    def description(self) -> str:
        """The label with what a reader must know to compare two values."""
        return "dev MLM accuracy (moves in steps of one target)" if self.metric == "accuracy" else self.label

    @property
    def difference_unit(self) -> tuple[str, float]:
        """``(unit, scale)`` in which differences of this fitness are reported: percentage
        points (× 100) for accuracy, nats (× 1) for the loss."""
        return ("pp", 100.0) if self.metric == "accuracy" else ("nats", 1.0)

    def score(self, *, accuracy: float | None, loss: float | None) -> float | None:
        """The fitness of a result with dev MLM ``accuracy`` (fraction) and mean ``loss``
        (nats): ``accuracy`` or ``−loss``; None when that value is missing."""
        value = accuracy if self.metric == "accuracy" else loss
        if value is None:
            return None
        return float(value) if self.metric == "accuracy" else -float(value)

    def of_row(self, row: Mapping[str, Any], *, accuracy: str = "accuracy", loss: str = "loss") -> float | None:
        """:meth:`score` of a mapping holding the two values under ``accuracy`` / ``loss``."""
        return self.score(accuracy=row.get(accuracy), loss=row.get(loss))

    def from_sums(self, correct: float, loss_sum: float, count: int) -> float:
        """The fitness from summed per-target outcomes over ``count`` targets (0 targets: 0)."""
        n = max(int(count), 1)
        return correct / n if self.metric == "accuracy" else -loss_sum / n

    def per_target(self, outcome: Mapping[str, Any]) -> np.ndarray:
        """``(T,)`` float64 per-target fitness of one candidate from its outcome arrays
        (``correct``: ``(T,)`` bool; ``loss``: ``(T,)`` nats): ``correct`` or ``−loss``."""
        if self.metric == "accuracy":
            return np.asarray(outcome["correct"]).astype(np.float64)
        return -np.asarray(outcome["loss"], dtype=np.float64)


DEFAULT = Fitness("loss")
LEGACY = Fitness("accuracy")  # state files written before the fitness was recorded
