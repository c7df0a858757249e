"""Reference floors for MLM dev accuracy: what counting the training text alone achieves.

A model that does not beat these floors has learned nothing beyond local co-occurrence, so
differences between such models are not architecture effects. Two count models, both fitted
on exactly the training tokens a model saw (:func:`lvsearch.eval.replay.seen_sequences`) and scored on the same
fixed masked dev set and targets as the models (:func:`score_floors`):

* **unigram**: every target is predicted as the most frequent non-special training token.
* **neighbour-count**: a target at position ``t`` is predicted from its neighbours
  ``x[t-1]`` and ``x[t+1]`` in the corrupted dev input, where a neighbour is *available* when
  it exists and is not itself a prediction target (its token may have been replaced) nor
  padding. With both available: the most frequent middle token ``m`` of the training triples
  ``(left, m, right)``; if that pair was never seen, or only the left (right) neighbour is
  available, the most frequent ``m`` after ``left`` (before ``right``); then unigram.
  Ties go to the smallest token id. Special tokens are context, never predictions.

Counting runs inside packed training sequences (``[CLS] … [SEP]``, documents joined by
``[SEP]``), the same windows the model was trained on, with numpy ``unique`` over int64 keys:
a few seconds for millions of tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lvsearch.data.masking import IGNORE_INDEX
from lvsearch.errors import LvsearchError
from lvsearch.eval.replay import run_settings, seen_row_counts

#: Names of the floors, in the order reports show them.
FLOOR_NAMES = ("unigram", "neighbour-count")
#: The floor a model must beat (strictly higher dev accuracy) to count as having learned
#: something; reports word a model that does not as :data:`NOT_PAST_FLOOR`.
REFERENCE_FLOOR = "neighbour-count"
NOT_PAST_FLOOR = "has not learned past local co-occurrence"
#: How a model stands against its floor, by the verdict of the interval of (accuracy − floor)
#: (:func:`lvsearch.stats.interval_verdict`): "below" only when the whole interval is below 0.
FLOOR_RELATION = {"ahead": "above", "behind": "below", "within noise": "within noise of"}
NOT_ARCH_EFFECT = ("its BLiMP and task differences from other models are not to be read as architecture effects")



def _best_middle(context: np.ndarray, middle: np.ndarray, vocab: int,
                 weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """For each distinct context key, the most frequent middle token (ties: smallest id);
    occurrence ``i`` counts ``weights[i]`` times (default 1).

    Returns ``(sorted unique context keys, best middle per key)``.
    """
    if context.size == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    if weights is None:
        keys, counts = np.unique(context * vocab + middle, return_counts=True)
    else:
        keys, inverse = np.unique(context * vocab + middle, return_inverse=True)
        counts = np.bincount(inverse.ravel(), weights=weights, minlength=len(keys)).astype(np.int64)
    ctx, mid = keys // vocab, keys % vocab
    # Sort by context, then count descending, then middle ascending: first row per context wins.
    order = np.lexsort((mid, -counts, ctx))
    ctx, mid = ctx[order], mid[order]
    first = np.ones(len(ctx), dtype=bool)
    first[1:] = ctx[1:] != ctx[:-1]
    return ctx[first], mid[first]


def _lookup(keys: np.ndarray, values: np.ndarray, query: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(found (n,) bool, value (n,) int64)`` for ``query`` in sorted ``keys``."""
    if keys.size == 0 or query.size == 0:
        return np.zeros(query.shape, bool), np.zeros(query.shape, np.int64)
    pos = np.clip(np.searchsorted(keys, query), 0, len(keys) - 1)
    found = keys[pos] == query
    return found, np.where(found, values[pos], 0)


@dataclass
class NeighbourCountModel:
    """Count tables of one training sample (see the module docstring).

    Build with :meth:`fit`; ``unigram`` is the most frequent non-special token.
    """

    vocab_size: int
    tokens: int
    unigram: int
    pair_keys: np.ndarray
    pair_best: np.ndarray
    left_keys: np.ndarray
    left_best: np.ndarray
    right_keys: np.ndarray
    right_best: np.ndarray

    @classmethod
    def fit(cls, sequences: np.ndarray, vocab_size: int, special_ids,
            weights: np.ndarray | None = None) -> NeighbourCountModel:
        """Count over ``sequences`` ``(n, L)`` integer ids (neighbours never cross rows).

        Args:
            sequences: training windows, e.g. :func:`~lvsearch.eval.replay.seen_sequences`.
            vocab_size: ``V``; ids must lie in ``[0, V)``.
            special_ids: the tokenizer's :class:`~lvsearch.data.tokenizer.SpecialIds`; these
                ids are context only, never predicted.
            weights: optional ``(n,)`` non-negative integer multiplicity of each row (e.g. the
                counts of :func:`~lvsearch.eval.replay.seen_row_counts`); the tables equal those of the rows
                repeated that many times. None = every row once.

        Raises:
            LvsearchError: no non-special token to count, ids outside ``[0, V)``, or
                ``weights`` of the wrong shape or negative.
        """
        seqs = np.asarray(sequences, dtype=np.int64)
        if seqs.ndim != 2:
            raise LvsearchError(f"expected (n, L) training sequences, got shape {seqs.shape}")
        w = None
        if weights is not None:
            w = np.asarray(weights, dtype=np.int64)
            if w.shape != (seqs.shape[0],) or (w.size and w.min() < 0):
                raise LvsearchError(f"row weights must be {seqs.shape[0]} non-negative integers, got shape {w.shape}")
        V = int(vocab_size)
        if seqs.size and (seqs.min() < 0 or seqs.max() >= V):
            raise LvsearchError(f"token ids outside [0, {V}) in the training sequences",
                                fix="pass the vocabulary size of the tokenizer that made the data")
        special = np.zeros(V, dtype=bool)
        special[list(special_ids.all())] = True
        if w is not None:
            keep = w > 0
            seqs, w = seqs[keep], w[keep]
        ok = ~special[seqs]
        # Per-position weight (the row's multiplicity), selected like the positions.
        wpos = None if w is None else np.broadcast_to(w[:, None], seqs.shape)

        def sel(m: np.ndarray, cols: slice) -> np.ndarray | None:
            return None if wpos is None else wpos[:, cols][m]

        uni = np.bincount(seqs[ok], weights=sel(ok, slice(None)), minlength=V)
        if uni.sum() == 0:
            raise LvsearchError("no non-special training token to count", fix="count over more training steps")
        # Middle positions with both neighbours in the row: (left, m, right).
        mid, mid_ok = seqs[:, 1:-1], ok[:, 1:-1]
        left, right = seqs[:, :-2], seqs[:, 2:]
        pair_keys, pair_best = _best_middle((left * V + right)[mid_ok], mid[mid_ok], V, sel(mid_ok, slice(1, -1)))
        # Left-only (l, m) over positions 1..L-1 and right-only (m, r) over 0..L-2.
        m_l, ok_l = seqs[:, 1:], ok[:, 1:]
        left_keys, left_best = _best_middle(seqs[:, :-1][ok_l], m_l[ok_l], V, sel(ok_l, slice(1, None)))
        m_r, ok_r = seqs[:, :-1], ok[:, :-1]
        right_keys, right_best = _best_middle(seqs[:, 1:][ok_r], m_r[ok_r], V, sel(ok_r, slice(None, -1)))
        return cls(V, int(round(uni.sum())), int(np.argmax(uni)), pair_keys, pair_best,
                   left_keys, left_best, right_keys, right_best)

    def predict(self, input_ids: np.ndarray, labels: np.ndarray, pad_id: int | None = None) -> dict[str, np.ndarray]:
        """Predictions at the targets of a masked batch.

        Args:
            input_ids: ``(B, L)`` corrupted ids (the model's input).
            labels: ``(B, L)``: the true id at targets, ``IGNORE_INDEX`` elsewhere.
            pad_id: padding id (never used as a neighbour); None = no padding.

        Returns:
            ``{"neighbour-count": (P,), "unigram": (P,), "level": (P,)}`` int64 arrays over the
            ``P`` targets in row-major order (the order of ``hidden[labels != -100]``);
            ``level`` is 0 = (left, right) pair, 1 = left only, 2 = right only, 3 = unigram.
        """
        ids = np.asarray(input_ids, dtype=np.int64)
        lab = np.asarray(labels, dtype=np.int64)
        B, L = ids.shape
        usable = lab == IGNORE_INDEX
        if pad_id is not None:
            usable &= ids != pad_id
        b, t = np.nonzero(lab != IGNORE_INDEX)
        has_l = (t > 0) & usable[b, np.maximum(t - 1, 0)]
        has_r = (t < L - 1) & usable[b, np.minimum(t + 1, L - 1)]
        lt, rt = ids[b, np.maximum(t - 1, 0)], ids[b, np.minimum(t + 1, L - 1)]
        V = self.vocab_size
        pred = np.full(len(t), self.unigram, dtype=np.int64)
        level = np.full(len(t), 3, dtype=np.int64)
        # Fill from the weakest back-off to the strongest so stronger levels overwrite.
        for lvl, avail, keys, best, query in (
            (2, has_r, self.right_keys, self.right_best, rt),
            (1, has_l, self.left_keys, self.left_best, lt),
            (0, has_l & has_r, self.pair_keys, self.pair_best, lt * V + rt),
        ):
            found, value = _lookup(keys, best, query)
            hit = avail & found
            pred[hit] = value[hit]
            level[hit] = lvl
        return {"neighbour-count": pred, "unigram": np.full(len(t), self.unigram, np.int64), "level": level}


def score_floors(model: NeighbourCountModel, dev, pad_id: int | None = None) -> dict[str, dict]:
    """Score both floors on a fixed masked dev set.

    Args:
        model: fitted :class:`NeighbourCountModel`.
        dev: :class:`~lvsearch.data.loader.DevSet` (the one the models are scored on).
        pad_id: padding id, if the dev set can hold padding.

    Returns:
        ``{name: {"accuracy", "predicted_tokens", "per_target_correct"}}`` for each of
        :data:`FLOOR_NAMES`, plus ``"backoff"`` (fraction of targets at each level) and
        ``"train_tokens"`` (non-special tokens counted) in the neighbour-count entry.
        ``per_target_correct`` uses the same one-character-per-target format and order as
        :func:`lvsearch.eval.mlm.mlm_dev_metrics`, so floors pair with models target by target.
    """
    ids, labels = dev.input_ids.numpy(), dev.labels.numpy()
    gold = labels[labels != IGNORE_INDEX]
    if gold.size == 0:
        raise LvsearchError("the dev set has no masked targets", fix="prepare more dev text")
    out = model.predict(ids, labels, pad_id)
    result: dict[str, dict] = {}
    for name in FLOOR_NAMES:
        hit = out[name] == gold
        result[name] = {
            "accuracy": float(hit.mean()),
            "predicted_tokens": int(gold.size),
            "per_target_correct": "".join("1" if h else "0" for h in hit.tolist()),
        }
    levels = np.bincount(out["level"], minlength=4) / gold.size
    result["neighbour-count"]["backoff"] = dict(zip(("pair", "left", "right", "unigram"), map(float, levels)))
    result["neighbour-count"]["train_tokens"] = model.tokens
    result["unigram"]["train_tokens"] = model.tokens
    return result


def floors_for_train(data, dev, train_cfg, steps: int) -> dict[str, dict] | None:
    """:func:`floors_for_run` with a run's :class:`~lvsearch.config.TrainConfig`
    (``batch_size``, ``seq_len``, ``seed``); None when ``steps`` < 1 (nothing was trained)."""
    if steps < 1:
        return None
    return floors_for_run(data, dev, batch_size=train_cfg.batch_size, seq_len=train_cfg.seq_len,
                          seed=train_cfg.seed, steps=steps)


def floors_for_run(data, dev, *, batch_size: int, seq_len: int, seed: int, steps: int) -> dict[str, dict]:
    """Both floors for a run that took ``steps`` steps of ``batch_size × seq_len`` tokens with
    ``train.seed = seed``, scored on ``dev``; also records ``tokens_seen`` (= steps·batch·L).

    The sample is :func:`~lvsearch.eval.replay.seen_sequences`, counted as distinct rows with their
    multiplicity (:func:`~lvsearch.eval.replay.seen_row_counts`), so a run of many epochs costs no more memory than one.

    Args:
        data: :class:`~lvsearch.data.shards.PreparedData` the run trained on.
        dev: the :class:`~lvsearch.data.loader.DevSet` the model was scored on.
        batch_size, seq_len, seed, steps: the run's ``train.batch_size`` (global),
            ``train.seq_len``, ``train.seed`` and the optimizer steps it took.

    Returns:
        :func:`score_floors`' dict, each entry with ``tokens_seen`` added.

    Raises:
        LvsearchError: fewer training sequences than one batch, ``steps < 1`` (nothing
            seen), or a dev set without targets.
    """
    if steps < 1:
        raise LvsearchError(f"a floor needs at least one training step, got steps={steps}")
    rows, counts = seen_row_counts(data, batch_size=batch_size, seq_len=seq_len, seed=seed, steps=steps)
    seqs = data.sequences("train", seq_len)[rows]
    floors = score_floors(NeighbourCountModel.fit(seqs, data.vocab_size, data.special_ids, weights=counts), dev,
                          pad_id=data.special_ids.pad)
    for v in floors.values():
        v["tokens_seen"] = int(steps * batch_size * seq_len)
    return floors



def floors_for_model(training_args: dict, extra: dict, data, dev) -> dict:
    """The reference floors of a model directory's training run, for ``lvsearch evaluate``.

    Args:
        training_args: the model directory's ``training_args.json``.
        extra: its ``config.json`` ``extra`` (``steps``/``tokens``; ``train_tokens`` of the
            training split when recorded, to check that ``data`` is the training corpus).
        data: :class:`~lvsearch.data.shards.PreparedData` (``--mlm-data``; same tokenizer).
        dev: the dev set the model was scored on.

    Returns:
        ``{"status": "done", "run": {batch_size, seq_len, seed, steps}, "tokens_seen", "unigram":
        {...}, "neighbour-count": {...}}`` (entries of :func:`score_floors`, per-target strings
        included), optionally ``"note"``; or ``{"status": "unavailable", "reason": ...}`` when the
        run cannot be reconstructed (foreign model, other corpus, too few sequences). Never raises
        for those cases: floors are a reference, not a requirement.
    """
    run, reason = run_settings(training_args, extra)
    if run is None:
        return {"status": "unavailable", "reason": reason}
    extra = extra if isinstance(extra, dict) else {}
    note = None
    recorded = extra.get("train_tokens")
    actual = data.num_tokens("train")
    if isinstance(recorded, int):
        if recorded != actual:
            return {"status": "unavailable",
                    "reason": f"the model was trained on a corpus of {recorded:,} train tokens, --mlm-data "
                              f"{data.folder} has {actual:,}: not the training corpus"}
    else:
        note = "the model directory does not record its training corpus; assumed to be --mlm-data"
    try:
        floors = floors_for_run(data, dev, **run)
    except LvsearchError as e:
        return {"status": "unavailable", "reason": str(e).splitlines()[0]}
    out = {"status": "done", "run": run, "tokens_seen": run["steps"] * run["batch_size"] * run["seq_len"], **floors}
    if note:
        out["note"] = note
    return out


def compact_floors(floors: dict[str, dict]) -> dict[str, dict]:
    """``floors`` without the long ``per_target_correct`` strings (for ``summary.json`` and
    terminal output): accuracy, predicted_tokens, train_tokens, tokens_seen, backoff."""
    return {name: {k: v for k, v in floors[name].items() if k != "per_target_correct"} for name in FLOOR_NAMES if name in floors}


def beats_floor(accuracy: float, floors: dict[str, dict]) -> bool:
    """True when ``accuracy`` (a fraction of the same dev targets) is strictly above the
    :data:`REFERENCE_FLOOR` (neighbour-count) accuracy of ``floors``."""
    return float(accuracy) > float(floors[REFERENCE_FLOOR]["accuracy"])


def floor_line(label: str, accuracy: float, floors: dict[str, dict]) -> str:
    """One line: ``label`` accuracy against both floors and the verdict, e.g.
    ``dev MLM accuracy 0.3120 vs floors: unigram 0.0610, neighbour-count 0.2210
    (40,960 tokens seen) → beats the neighbour-count floor``."""
    tokens = floors[REFERENCE_FLOOR].get("tokens_seen")
    seen = f" ({tokens:,} tokens seen)" if tokens is not None else ""
    verdict = ("beats the neighbour-count floor" if beats_floor(accuracy, floors)
               else f"{NOT_PAST_FLOOR} (not above the neighbour-count floor)")
    return (f"{label} {accuracy:.4f} vs floors: unigram {floors['unigram']['accuracy']:.4f}, "
            f"neighbour-count {floors[REFERENCE_FLOOR]['accuracy']:.4f}{seen} → {verdict}")


__all__ = [
    "FLOOR_NAMES", "NOT_ARCH_EFFECT", "NOT_PAST_FLOOR", "REFERENCE_FLOOR", "NeighbourCountModel", "beats_floor",
    "compact_floors", "floor_line", "floors_for_model", "floors_for_run", "floors_for_train", "score_floors",
]
