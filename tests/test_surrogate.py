"""The surrogate of standalone accuracy (lvsearch/search/surrogate.py): features, fit, predict,
round trip, leave-one-out and bad input."""

from __future__ import annotations

import random

import numpy as np
import pytest
from scipy.stats import kendalltau

from lvsearch.arch import Arch
from lvsearch.errors import LvsearchError
from lvsearch.search.surrogate import Surrogate, leave_one_out, structural_features, structural_names
from lvsearch.space import SearchSpace


def _archs(n: int, slots: int = 12, seed: int = 0) -> list[Arch]:
    space = SearchSpace.load("lvbert-elc").with_num_slots(slots)
    rng, out = random.Random(seed), {}
    while len(out) < n:
        a = space.sample(rng)
        out.setdefault(a.key, a)
    return list(out.values())


def test_structural_features():
    assert structural_names() == ("first_dc", "share_SA", "share_FF", "share_DC", "share_LA")  # every registered op
    assert structural_features(Arch.sequential("sfcc")) == [0.5, 0.25, 0.25, 0.5, 0.0]
    assert structural_features(Arch.sequential("sfsl")) == [1.0, 0.5, 0.25, 0.0, 0.25]
    # a surrogate fitted before an op was registered computes its own feature names
    old = ("first_dc", "share_SA", "share_FF", "share_DC")
    assert structural_features(Arch.sequential("sfsf"), old) == [1.0, 0.5, 0.5, 0.0]
    with pytest.raises(LvsearchError, match="unknown feature 'share'"):
        structural_features(Arch.sequential("sfsf"), ("share",))


def test_surrogate_learns_a_structural_truth_and_round_trips():
    archs = _archs(40)
    rng = np.random.default_rng(0)
    # a truth driven by where the first DC sits, plus a noisy fitness that sees a little of it
    truth = [0.30 - 0.02 * structural_features(a)[0] + rng.normal(0, 0.001) for a in archs]
    fitness = [t + rng.normal(0, 0.01) for t in truth]
    s = Surrogate.fit(archs[:30], truth[:30], fitness[:30])
    pred = s.predict(archs[30:], fitness[30:])
    assert kendalltau(pred, truth[30:]).statistic > kendalltau(fitness[30:], truth[30:]).statistic
    assert Surrogate.from_dict(s.to_dict()) == s
    loo = leave_one_out(archs[:12], truth[:12])
    assert len(loo) == 12 and kendalltau(loo, truth[:12]).statistic > 0.5


def test_surrogate_bad_input():
    archs = _archs(6)
    with pytest.raises(LvsearchError, match="at least 5"):
        Surrogate.fit(archs[:3], [0.1, 0.2, 0.3])
    with pytest.raises(LvsearchError, match="slot counts"):
        Surrogate.fit(archs[:4] + _archs(2, slots=6), [0.1] * 6)
    with pytest.raises(LvsearchError, match="not finite"):
        Surrogate.fit(archs, [0.1, 0.2, float("nan"), 0.3, 0.2, 0.1])
    s = Surrogate.fit(archs, [0.1, 0.2, 0.3, 0.3, 0.2, 0.1])
    with pytest.raises(LvsearchError, match="without the supernet fitness"):
        s.predict(archs, [1.0] * 6)
    with pytest.raises(LvsearchError, match="12-slot"):
        s.predict(_archs(1, slots=6))
    with pytest.raises(LvsearchError, match="not a surrogate"):
        Surrogate.from_dict({"features": []})
