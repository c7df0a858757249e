"""A surrogate of standalone accuracy: supernet fitness plus structural features, fitted on the
standalone runs a landscape already made.

The supernet's fitness ranks a space's band moderately and its top barely (on the quickstart
space: Kendall τ 0.58 over 27 landscape architectures, 0.06 on 12 held-out searched picks),
while a free structural feature — where the first DC slot sits — ranks the held-out picks with
τ 0.49. The standalone runs a user makes for a landscape (``benchmarks/landscape.py``) are
labelled data for exactly this: a predictor of standalone accuracy from the supernet fitness and
the architecture's structure (predictor-based NAS, e.g. White et al. 2021, "How powerful are
performance predictors in neural architecture search?"). This one is deliberately small — ridge
regression (``sklearn.linear_model.RidgeCV``, leave-one-out choice of the penalty) on
standardised features — because a landscape holds a few dozen architectures.

Features of an architecture with ``n`` slots (:func:`structural_features`): the position of the
first DC slot as a fraction of ``n`` (1 when it has none), and the share of each op among its
slots; with the supernet fitness in front when one is given. A surrogate fitted on one space's
landscape applies to architectures of that space (the slot count is recorded and checked).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Sequence

from lvsearch import ops as op_registry
from lvsearch.arch import Arch
from lvsearch.errors import LvsearchError


def structural_names() -> tuple[str, ...]:
    """Names of the structural features a new fit uses, in order: ``first_dc``, then
    ``share_{code}`` for every registered op (:mod:`lvsearch.ops`)."""
    return ("first_dc", *(f"share_{op}" for op in op_registry.codes()))


def structural_features(arch: Arch, names: Sequence[str] | None = None) -> list[float]:
    """The features ``names`` (default :func:`structural_names`) of an ``n``-slot architecture:
    ``first_dc`` = first DC position / n (1.0 without DC), ``share_X`` = share of op X among
    its slots. A fitted surrogate passes its own names, so one fitted before an op was
    registered still predicts.

    Raises:
        LvsearchError: an unknown feature name.
    """
    n = arch.num_slots
    out = []
    for name in names if names is not None else structural_names():
        if name == "first_dc":
            out.append(next((i for i, op in enumerate(arch.ops) if op == "DC"), n) / n)
        elif name.startswith("share_"):
            out.append(arch.ops.count(name[len("share_"):]) / n)
        else:
            raise LvsearchError(f"surrogate: unknown feature {name!r}", fix="fit the surrogate again")
    return out


@dataclass(frozen=True)
class Surrogate:
    """A fitted ridge predictor of standalone accuracy (see the module docstring).

    Attributes:
        features: feature names, in order (``fitness`` first when the fitness is used).
        mean, scale: the standardisation of each feature (training mean and SD; SD 1 when constant).
        coef, intercept: the ridge fit on standardised features.
        alpha: the ridge penalty chosen by leave-one-out.
        num_slots: slot count of the architectures it was fitted on.
        n: training architectures.
    """

    features: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    coef: tuple[float, ...]
    intercept: float
    alpha: float
    num_slots: int
    n: int

    @property
    def uses_fitness(self) -> bool:
        return bool(self.features) and self.features[0] == "fitness"

    @classmethod
    def fit(cls, archs: Sequence[Arch], truth: Sequence[float], fitness: Sequence[float] | None = None,
            alphas: Sequence[float] | None = None) -> "Surrogate":
        """Fit on ``archs`` (one space) with standalone accuracies ``truth`` and, optionally, their
        supernet ``fitness`` (higher is better, e.g. −loss).

        Raises:
            LvsearchError: fewer than 5 architectures, mismatched lengths or slot counts,
                non-finite values.
        """
        import numpy as np
        from sklearn.linear_model import RidgeCV

        archs = list(archs)
        if len(archs) < 5:
            raise LvsearchError(f"a surrogate needs at least 5 trained architectures, got {len(archs)}",
                                fix="train more of the landscape first")
        if len(truth) != len(archs) or (fitness is not None and len(fitness) != len(archs)):
            raise LvsearchError("surrogate: architectures, standalone accuracies and fitness differ in length")
        slots = {a.num_slots for a in archs}
        if len(slots) != 1:
            raise LvsearchError(f"surrogate: architectures of several slot counts ({sorted(slots)})",
                                fix="fit one surrogate per space")
        X = cls._matrix(archs, fitness)
        y = np.asarray(truth, dtype=float)
        if not (np.isfinite(X).all() and np.isfinite(y).all()):
            raise LvsearchError("surrogate: a standalone accuracy or fitness is not finite")
        mean, sd = X.mean(axis=0), X.std(axis=0)
        sd[sd == 0] = 1.0
        grid = np.asarray(alphas if alphas is not None else np.logspace(-3, 3, 25), dtype=float)
        model = RidgeCV(alphas=grid).fit((X - mean) / sd, y)
        names = (("fitness",) if fitness is not None else ()) + structural_names()
        return cls(names, tuple(map(float, mean)), tuple(map(float, sd)), tuple(map(float, model.coef_)),
                   float(model.intercept_), float(model.alpha_), slots.pop(), len(archs))

    @staticmethod
    def _matrix(archs: Sequence[Arch], fitness: Sequence[float] | None, names: Sequence[str] | None = None):
        import numpy as np

        rows = [structural_features(a, names) for a in archs]
        if fitness is not None:
            rows = [[float(f), *r] for f, r in zip(fitness, rows)]
        return np.asarray(rows, dtype=float)

    def predict(self, archs: Sequence[Arch], fitness: Sequence[float] | None = None):
        """Predicted standalone accuracy of ``archs``: ``(N,)`` float ndarray.

        Raises:
            LvsearchError: a fitness is needed and missing (or given and not used), or an
                architecture has another slot count than the training set.
        """
        import numpy as np

        if self.uses_fitness != (fitness is not None):
            raise LvsearchError("surrogate: " + ("it was fitted with the supernet fitness: pass it" if self.uses_fitness
                                                 else "it was fitted without the supernet fitness"))
        bad = [a.key for a in archs if a.num_slots != self.num_slots]
        if bad:
            raise LvsearchError(f"surrogate fitted on {self.num_slots}-slot architectures, given {bad[0]}",
                                fix="fit the surrogate on a landscape of the search's space")
        names = self.features[1:] if self.uses_fitness else self.features
        X = (self._matrix(archs, fitness, names) - np.asarray(self.mean)) / np.asarray(self.scale)
        return X @ np.asarray(self.coef) + self.intercept

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "Surrogate":
        """Inverse of :meth:`to_dict`. Raises LvsearchError on a malformed mapping."""
        try:
            return cls(tuple(d["features"]), tuple(d["mean"]), tuple(d["scale"]), tuple(d["coef"]),
                       float(d["intercept"]), float(d["alpha"]), int(d["num_slots"]), int(d["n"]))
        except (KeyError, TypeError, ValueError):
            raise LvsearchError("not a surrogate written by lvsearch", fix="fit it again") from None


def leave_one_out(archs: Sequence[Arch], truth: Sequence[float], fitness: Sequence[float] | None = None) -> list[float]:
    """Each architecture's prediction by a surrogate fitted on all the others (the same penalty
    grid): an honest ranking of the training set itself, ``len(archs)`` floats."""
    archs, truth = list(archs), list(truth)
    out = []
    for i in range(len(archs)):
        rest = [j for j in range(len(archs)) if j != i]
        s = Surrogate.fit([archs[j] for j in rest], [truth[j] for j in rest],
                          [fitness[j] for j in rest] if fitness is not None else None)
        out.append(float(s.predict([archs[i]], [fitness[i]] if fitness is not None else None)[0]))
    return out
