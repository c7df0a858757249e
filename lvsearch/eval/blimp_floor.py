"""The BLiMP floor: an n-gram (Kneser-Ney) LM of exactly the training sequences a run saw, scored on
the model's BLiMP pairs, and the paired bootstrap of model − floor.

The MLM floors are in :mod:`lvsearch.eval.floors`; the replay of the training sequences in
:mod:`lvsearch.eval.replay`.
"""

from __future__ import annotations

import numpy as np

from lvsearch.errors import LvsearchError
from lvsearch.eval.replay import run_settings, seen_row_counts
from lvsearch.stats import paired_bootstrap

__all__ = ["BLIMP_FLOOR_NAME", "BLIMP_FLOOR_ORDER", "blimp_floor_for_model", "blimp_floor_rows", "blimp_vs_floor",
           "compact_blimp_floor", "fit_blimp_floor", "score_blimp_floor"]

# ---------------------------------------------------------------------------------------------
# BLiMP floor: an n-gram LM of the same replayed training sequences.

#: Order and discount of the BLiMP floor's interpolated Kneser-Ney LM (order chosen by
#: measurement, docs/results.md "Floors": the strongest of orders 2–4 at 4.1M tokens).
BLIMP_FLOOR_ORDER = 3
BLIMP_FLOOR_NAME = "kneser-ney"


def blimp_floor_rows(data, seqs: np.ndarray) -> np.ndarray:
    """``(n, L)`` bool: the tokens of packed training rows an n-gram may use: the body
    (columns ``1 … L−2``; the window's ``[CLS]`` and last ``[SEP]`` are cut points, not text),
    never ``[PAD]``. ``[SEP]`` inside the body (a document end) is a token."""
    ok = np.zeros(seqs.shape, dtype=bool)
    ok[:, 1:-1] = True
    return ok & (seqs != data.special_ids.pad)


def fit_blimp_floor(data, *, batch_size: int, seq_len: int, seed: int, steps: int,
                    order: int = BLIMP_FLOOR_ORDER):
    """The :class:`~lvsearch.eval.ngram.KneserNeyLM` (discount 0.75) counted over exactly the
    training sequences of the first ``steps`` batches of a run (:func:`seen_row_counts`, each
    row weighted by how often it was read).

    Raises:
        LvsearchError: fewer training sequences than one batch, ``steps < 1``.
    """
    from lvsearch.eval.ngram import KneserNeyLM

    if steps < 1:
        raise LvsearchError(f"a floor needs at least one training step, got steps={steps}")
    rows, counts = seen_row_counts(data, batch_size=batch_size, seq_len=seq_len, seed=seed, steps=steps)
    seqs = data.sequences("train", seq_len)[rows]
    return KneserNeyLM.fit(seqs, data.vocab_size, order=order, weights=counts, valid=blimp_floor_rows(data, seqs))


def score_blimp_floor(lm, tokenizer, paradigms) -> dict:
    """BLiMP of an n-gram LM: each sentence ``w_1..w_n`` (word pieces of ``tokenizer``, no
    special tokens) is scored ``Σ log P`` of ``w_1 … w_n [SEP]`` after a ``[SEP]`` (a document
    start, as in the packed training text), with :func:`lvsearch.eval.blimp.aggregate_blimp`'s
    pairs and tie rule (ties wrong).

    Returns:
        :func:`~lvsearch.eval.blimp.aggregate_blimp`'s dict plus ``order``, ``discount``,
        ``train_tokens`` and ``sentences``.
    """
    from lvsearch.data.tokenizer import SpecialIds
    from lvsearch.eval.blimp import aggregate_blimp

    sep = SpecialIds.of(tokenizer).sep
    sentences = list(dict.fromkeys(s for p in paradigms for pair in p.pairs for s in pair))
    enc = tokenizer.encode_batch(sentences, add_special_tokens=False)
    scores = lm.sentence_log_prob([[sep, *e.ids, sep] for e in enc])
    out = aggregate_blimp(paradigms, dict(zip(sentences, scores.tolist())))
    return {"name": BLIMP_FLOOR_NAME, "order": lm.order, "discount": lm.discount, "train_tokens": lm.tokens,
            "sentences": len(sentences), **out}


def blimp_floor_for_model(training_args: dict, extra: dict, data, paradigms, *, order: int = BLIMP_FLOOR_ORDER) -> dict:
    """The BLiMP floor of a model directory's training run, for ``lvsearch evaluate``: the
    n-gram LM of :func:`fit_blimp_floor` scored on the model's BLiMP pairs.

    Returns:
        ``{"status": "done", "run", "tokens_seen", **score_blimp_floor(...)}`` or
        ``{"status": "unavailable", "reason"}`` (as :func:`~lvsearch.eval.floors.floors_for_model`; never raises for a
        run that cannot be reconstructed).
    """
    run, reason = run_settings(training_args, extra)
    if run is None:
        return {"status": "unavailable", "reason": reason}
    recorded = (extra or {}).get("train_tokens") if isinstance(extra, dict) else None
    if isinstance(recorded, int) and recorded != data.num_tokens("train"):
        return {"status": "unavailable",
                "reason": f"the model was trained on a corpus of {recorded:,} train tokens, --mlm-data "
                          f"{data.folder} has {data.num_tokens('train'):,}: not the training corpus"}
    try:
        lm = fit_blimp_floor(data, order=order, **run)
    except LvsearchError as e:
        return {"status": "unavailable", "reason": str(e).splitlines()[0]}
    return {"status": "done", "run": run, "tokens_seen": run["steps"] * run["batch_size"] * run["seq_len"],
            **score_blimp_floor(lm, data.tokenizer, paradigms)}


# ---------------------------------------------------------------------------------------------
# Paired bootstrap of model − floor (lvsearch.stats.paired_bootstrap).


def blimp_vs_floor(model_blimp: dict, floor: dict, **kw) -> dict:
    """:func:`paired_bootstrap` of a model's BLiMP result against its floor's, pair by pair
    (stratified by paradigm; the statistic is the mean-over-paradigms difference).

    Raises:
        LvsearchError: the two results do not hold the same paradigms and pair counts.
    """
    uids = list(model_blimp["paradigms"])
    if set(uids) != set(floor["paradigms"]) or any(
            floor["paradigms"][u]["pairs"] != model_blimp["paradigms"][u]["pairs"] for u in uids):
        raise LvsearchError("the BLiMP floor was scored on other pairs than the model")
    m = "".join(model_blimp["paradigms"][u]["per_pair_correct"] for u in uids)
    f = "".join(floor["paradigms"][u]["per_pair_correct"] for u in uids)
    groups = np.repeat(np.arange(len(uids)), [model_blimp["paradigms"][u]["pairs"] for u in uids])
    return paired_bootstrap(m, f, groups, **kw)


def compact_blimp_floor(floor: dict) -> dict:
    """A BLiMP floor entry without its per-paradigm pair strings (terminal / summary use)."""
    return {k: v for k, v in floor.items() if k not in ("paradigms",)}
