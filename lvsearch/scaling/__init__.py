"""Scaling laws: learning-curve estimators and the finalist pruning built on them.

* :mod:`lvsearch.scaling.estimators` — M1–M4 of Alabdulmohsin, Neyshabur & Zhai 2022
  (Eq. 1–4; M1, M3 and the registry there, M4/M2 in :mod:`lvsearch.scaling.m4`),
  :func:`extrapolation_rmse`, :func:`prediction_interval` (bootstrap);
* :mod:`lvsearch.scaling.fitting` — the :class:`Estimator` base class and the shared fitting helpers;
  :mod:`lvsearch.scaling.curves` — :func:`validate_curve`, :func:`smooth_curve`;
* :mod:`lvsearch.scaling.halving` — :func:`halving_rounds` / :func:`halving_rungs` (the
  rung budgets), :func:`halving_step` / :func:`successive_halving`, the pure pruning rules on
  in-memory curves;
* :mod:`lvsearch.scaling.finalists` — ``lvsearch retrain --finalists K``: successive halving
  over real retrain runs (imports the training code; not re-exported here);
* :mod:`lvsearch.scaling.cli` — ``lvsearch scaling fit``.

The estimator and halving API is re-exported here (``from lvsearch.scaling import M4``).
"""

from lvsearch.scaling.curves import smooth_curve, validate_curve
from lvsearch.scaling.estimators import (
    ESTIMATORS,
    M1,
    M3,
    extrapolation_rmse,
    make_estimator,
    prediction_interval,
)
from lvsearch.scaling.fitting import Estimator
from lvsearch.scaling.halving import (
    DEGENERATE_WIDTH,
    halving_rounds,
    halving_rungs,
    halving_step,
    successive_halving,
)
from lvsearch.scaling.m4 import M2, M4

__all__ = [
    "ESTIMATORS", "Estimator", "M1", "M2", "M3", "M4", "make_estimator", "validate_curve", "smooth_curve",
    "extrapolation_rmse", "prediction_interval", "DEGENERATE_WIDTH", "halving_rounds", "halving_rungs", "halving_step",
    "successive_halving",
]
