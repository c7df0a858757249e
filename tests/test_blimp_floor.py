"""The BLiMP floor (lvsearch.eval.ngram, lvsearch.eval.floors): Kneser-Ney probabilities equal a
hand computation, counting follows the replayed training rows, and the paired bootstrap."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lvsearch.errors import LvsearchError
from lvsearch.stats import paired_bootstrap
from lvsearch.eval.blimp import Paradigm, aggregate_blimp
from lvsearch.eval.blimp_floor import blimp_floor_rows, blimp_vs_floor, fit_blimp_floor, score_blimp_floor
from lvsearch.eval.replay import seen_sequences
from lvsearch.eval.ngram import KneserNeyLM

# Vocabulary a=0, b=1, c=2; rows "a b c" and "b b c"; order 2, D = 0.5.
ROWS = np.array([[0, 1, 2], [1, 1, 2]])
# Hand computation (module docstring of lvsearch.eval.ngram):
#   bigram raw counts: ab 1, bc 2, bb 1 → history b: C = 3, T = 2; history a: C = 1, T = 1.
#   unigram continuation counts (distinct left tokens): b {a, b} 2, c {b} 1, a none 0 → C = 3, T = 2.
#   P1(a) = (0 + 0.5·2·1/3)/3 = 1/9, P1(b) = (1.5 + 1/3)/3 = 11/18, P1(c) = (0.5 + 1/3)/3 = 5/18.
#   P2(c|b) = (1.5 + 0.5·2·5/18)/3 = 16/27, P2(b|b) = (0.5 + 11/18)/3 = 10/27, P2(a|b) = (1/9)/3 = 1/27.
#   P2(b|a) = (0.5 + 0.5·1·11/18)/1 = 29/36; history c is never seen → P1.
HAND = {(1, 1): 10 / 27, (1, 2): 16 / 27, (1, 0): 1 / 27, (0, 1): 29 / 36, (2, 0): 1 / 9, (2, 1): 11 / 18}


def test_kneser_ney_equals_hand_computation():
    lm = KneserNeyLM.fit(ROWS, 3, order=2, discount=0.5)
    hist = np.array([[h] for h, _ in HAND])
    got = np.exp(lm.log_prob(np.array([w for _, w in HAND]), hist))
    assert got == pytest.approx(list(HAND.values()), abs=1e-12)
    # A sentence "b c" after a start token a, and a sentence start without history (P1).
    assert lm.sentence_log_prob([[0, 1, 2]])[0] == pytest.approx(np.log(29 / 36) + np.log(16 / 27))
    assert np.exp(lm.log_prob(np.array([0, 1, 2]), np.array([[-1]] * 3))) == pytest.approx([1 / 9, 11 / 18, 5 / 18])


def test_kneser_ney_is_a_distribution_and_weights_repeat_rows():
    rng = np.random.default_rng(0)
    rows = rng.integers(0, 7, size=(20, 9))
    w = rng.integers(0, 3, size=20)
    lm = KneserNeyLM.fit(rows, 7, order=3, weights=w)
    rep = KneserNeyLM.fit(np.repeat(rows, w, axis=0), 7, order=3)
    for hist in ([[-1, -1]], [[-1, 3]], [[2, 5]], [[6, 6]]):
        p = np.exp(lm.log_prob(np.arange(7), np.array(hist * 7)))
        assert p.sum() == pytest.approx(1.0, abs=1e-12)
        assert np.exp(rep.log_prob(np.arange(7), np.array(hist * 7))) == pytest.approx(p, abs=1e-12)
    # valid=False tokens are never part of an n-gram: masking a column = cutting the rows there
    valid = np.ones(rows.shape, bool)
    valid[:, 4] = False
    cut = KneserNeyLM.fit(np.concatenate([rows[:, :4], rows[:, 5:]]), 7, order=3)
    masked = KneserNeyLM.fit(rows, 7, order=3, valid=valid)
    q = np.array([[1, 2]] * 7)
    assert np.exp(masked.log_prob(np.arange(7), q)) == pytest.approx(np.exp(cut.log_prob(np.arange(7), q)), abs=1e-12)


def test_kneser_ney_bad_input():
    with pytest.raises(LvsearchError, match="order"):
        KneserNeyLM.fit(ROWS, 3, order=0)
    with pytest.raises(LvsearchError, match="discount"):
        KneserNeyLM.fit(ROWS, 3, discount=1.0)
    with pytest.raises(LvsearchError, match="outside"):
        KneserNeyLM.fit(ROWS, 2)
    with pytest.raises(LvsearchError, match="int64"):
        KneserNeyLM.fit(ROWS, 4096, order=6)


def test_paired_bootstrap():
    r = paired_bootstrap("1111111111" * 10, "0000000000" * 10)
    assert r["difference"] == 1.0 and r["ci"] == [1.0, 1.0] and r["beats"]
    r = paired_bootstrap([1, 0] * 50, [0, 1] * 50)
    assert r["difference"] == 0.0 and r["ci"][0] < 0 < r["ci"][1] and not r["excludes_zero"]
    # groups: mean over groups of the per-group difference (group 0: +1 over 2 items, group 1: 0 over 8)
    r = paired_bootstrap([1, 1] + [0] * 8, [0, 0] + [0] * 8, groups=[0, 0] + [1] * 8)
    assert r["difference"] == pytest.approx(0.5) and r["ci"] == pytest.approx([0.5, 0.5])
    with pytest.raises(LvsearchError, match="equal"):
        paired_bootstrap([1, 0], [1])


# --------------------------------------------------------------------------- real data
@pytest.fixture(scope="module")
def data(small_corpus: Path):
    from lvsearch.data.shards import PreparedData

    return PreparedData.open(small_corpus)


def test_blimp_floor_counts_exactly_the_replayed_rows(data):
    run = {"batch_size": 16, "seq_len": 64, "seed": 3, "steps": 7}
    lm = fit_blimp_floor(data, order=3, **run)
    seen = seen_sequences(data, **run)
    ref = KneserNeyLM.fit(seen, data.vocab_size, order=3, valid=blimp_floor_rows(data, seen))
    assert lm.tokens == ref.tokens == 7 * 16 * 62
    for a, b in zip(lm.levels, ref.levels):
        assert np.array_equal(a.gram_keys, b.gram_keys) and np.array_equal(a.gram_counts, b.gram_counts)
    # window [CLS] and final [SEP] are not text: no n-gram uses them
    ok = blimp_floor_rows(data, seen)
    assert not ok[:, 0].any() and not ok[:, -1].any()

    tok = data.tokenizer
    p = Paradigm("u", "term", "f", [("the cat sat.", "cat the sat."), ("a b", "a b")], Path("u.jsonl"), 2)
    res = score_blimp_floor(lm, tok, [p])
    sep = data.special_ids.sep
    s = {x: lm.sentence_log_prob([[sep, *tok.encode(x, add_special_tokens=False).ids, sep]])[0]
         for x in ("the cat sat.", "cat the sat.", "a b")}
    assert res["paradigms"]["u"]["per_pair_correct"] == aggregate_blimp([p], s)["paradigms"]["u"]["per_pair_correct"]
    assert res["ties"] == 1 and res["paradigms"]["u"]["per_pair_correct"][1] == "0"  # same tie rule: ties are wrong
    cmp = blimp_vs_floor(res, res)
    assert cmp["difference"] == 0.0 and not cmp["beats"]
