"""Reference floors for MLM dev accuracy: what counting the training text alone achieves.

A model that does not beat these floors has learned nothing beyond local co-occurrence, so
differences between such models are not architecture effects. Two count models, both fitted
on exactly the training tokens a model saw (:func:`seen_sequences`) and scored on the same
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

import math
from dataclasses import dataclass

import numpy as np

from lvsearch.data.masking import IGNORE_INDEX
from lvsearch.errors import LvsearchError
from lvsearch.stats import RESAMPLES, paired_bootstrap

#: Names of the floors, in the order reports show them.
FLOOR_NAMES = ("unigram", "neighbour-count")
#: The floor a model must beat (strictly higher dev accuracy) to count as having learned
#: something; reports word a model that does not as :data:`NOT_PAST_FLOOR`.
REFERENCE_FLOOR = "neighbour-count"
NOT_PAST_FLOOR = "has not learned past local co-occurrence"
NOT_ARCH_EFFECT = ("its BLiMP and task differences from other models are not to be read as architecture effects")


def _stream(data, batch_size: int, seq_len: int, seed: int):
    from lvsearch.data.loader import BatchStream

    return BatchStream(data.sequences("train", seq_len), batch_size, seed)


def seen_sequences(data, *, batch_size: int, seq_len: int, seed: int, steps: int) -> np.ndarray:
    """The training sequences of the first ``steps`` global batches of a run.

    Reproduces :class:`lvsearch.data.loader.BatchStream` (the one the training loop reads), so
    the rows are exactly what a run with these ``train`` settings saw, repeats across epochs
    included. Memory grows with ``steps``; :func:`seen_row_counts` gives the same sample as
    (distinct rows, multiplicity) in memory bounded by the corpus.

    Args:
        data: :class:`~lvsearch.data.shards.PreparedData`.
        batch_size: global batch (sequences per optimizer step).
        seq_len: packing length ``L``.
        seed: the run's ``train.seed``.
        steps: optimizer steps taken (0 gives an empty array).

    Returns:
        int64 ``(steps · batch_size, L)``.

    Raises:
        LvsearchError: the split holds fewer sequences than one batch.
    """
    stream = _stream(data, batch_size, seq_len, seed)
    if steps <= 0:
        return np.empty((0, seq_len), dtype=np.int64)
    rows = [stream.permutation(e)[: stream.steps_per_epoch * batch_size]
            for e in range((steps - 1) // stream.steps_per_epoch + 1)]
    order = np.concatenate(rows)[: steps * batch_size]
    return stream.sequences[order]


def seen_row_counts(data, *, batch_size: int, seq_len: int, seed: int, steps: int) -> tuple[np.ndarray, np.ndarray]:
    """The sample of :func:`seen_sequences` as ``(rows, counts)``: the sorted distinct indices
    of the packed training sequences the first ``steps`` batches read and how often each was
    read (int64 ``(k,)`` each; ``counts.sum() == steps · batch_size``). Memory is bounded by
    the number of packed sequences, whatever ``steps`` is (a run of many epochs reads each row
    many times).

    Raises:
        LvsearchError: the split holds fewer sequences than one batch.
    """
    stream = _stream(data, batch_size, seq_len, seed)
    n = len(stream.sequences)
    counts = np.zeros(n, dtype=np.int64)
    per_epoch = stream.steps_per_epoch * batch_size
    left = max(0, steps) * batch_size
    epoch = 0
    while left > 0:
        take = min(left, per_epoch)
        counts += np.bincount(stream.permutation(epoch)[:take], minlength=n)
        left -= take
        epoch += 1
    rows = np.nonzero(counts)[0]
    return rows.astype(np.int64), counts[rows]


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
            sequences: training windows, e.g. :func:`seen_sequences`.
            vocab_size: ``V``; ids must lie in ``[0, V)``.
            special_ids: the tokenizer's :class:`~lvsearch.data.tokenizer.SpecialIds`; these
                ids are context only, never predicted.
            weights: optional ``(n,)`` non-negative integer multiplicity of each row (e.g. the
                counts of :func:`seen_row_counts`); the tables equal those of the rows
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

    The sample is :func:`seen_sequences`, counted as distinct rows with their multiplicity
    (:func:`seen_row_counts`), so a run of many epochs costs no more memory than one.

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


def _positive_int(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def run_settings(training_args: dict, extra: dict) -> tuple[dict | None, str | None]:
    """The ``(batch_size, seq_len, seed, steps)`` of the run that made a model directory, from
    its ``training_args.json`` (the run's config: ``train.batch_size``, ``train.seq_len``,
    ``train.seed``) and its config's ``extra`` (``steps``, else ``tokens / (batch · L)``).

    Returns:
        ``(settings dict, None)``, or ``(None, reason)`` naming what is missing.
    """
    train = (training_args or {}).get("train") if isinstance(training_args, dict) else None
    if not isinstance(train, dict):
        return None, "the model directory records no training settings (training_args.json has no 'train' section)"
    got = {k: train.get(k) for k in ("batch_size", "seq_len")}
    missing = [k for k, v in got.items() if _positive_int(v) is None]
    seed = train.get("seed")
    if not isinstance(seed, int) or isinstance(seed, bool):
        missing.append("seed")
    if missing:
        return None, f"training_args.json lacks train.{', train.'.join(missing)}"
    extra = extra if isinstance(extra, dict) else {}
    steps = _positive_int(extra.get("steps"))
    if steps is None and _positive_int(extra.get("tokens")):
        per_step = got["batch_size"] * got["seq_len"]
        if extra["tokens"] % per_step == 0:
            steps = extra["tokens"] // per_step
    if steps is None:
        return None, "the model directory does not record how many steps it was trained (config.json extra.steps)"
    return {**got, "seed": seed, "steps": steps}, None


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
        ``{"status": "unavailable", "reason"}`` (as :func:`floors_for_model`; never raises for a
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


# ---------------------------------------------------------------------------------------------
# Fine-tuning floor: bag of words on the same training examples.

#: Inverse regularisation strengths tried for the fine-tuning floor (picked on dev).
BOW_C_GRID = (0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0)
BOW_FLOOR_NAME = "tf-idf word 1-2-gram + logistic regression"


def _bow_features(train, others):
    """TF-IDF word uni+bigram features (scikit-learn ``TfidfVectorizer``, fitted on ``train``
    only); a pair task gets one vectoriser per side, side by side."""
    from scipy import sparse
    from sklearn.feature_extraction.text import TfidfVectorizer

    sides = [lambda e: e.a] + ([lambda e: e.b or ""] if any(e.b is not None for e in train) else [])
    out_train, out_other = [], [[] for _ in others]
    for side in sides:
        vec = TfidfVectorizer(ngram_range=(1, 2), lowercase=True, sublinear_tf=True)
        out_train.append(vec.fit_transform([side(e) for e in train]))
        for k, exs in enumerate(others):
            out_other[k].append(vec.transform([side(e) for e in exs]))
    return sparse.hstack(out_train).tocsr(), [sparse.hstack(m).tocsr() for m in out_other]


def finetune_floor(task, cfg, *, c_grid=BOW_C_GRID) -> dict:
    """The fine-tuning floor of ``task``: TF-IDF word uni+bigram features and scikit-learn's
    ``LogisticRegression`` (L2, lbfgs; ``Ridge`` with ``alpha = 1/C`` for regression), fitted on
    exactly the training examples fine-tuning uses (:func:`lvsearch.eval.finetune.training_examples`),
    ``C`` picked on dev by the task's selection metric (:func:`lvsearch.eval.finetune_metrics.primary_metric`;
    ties: the smaller C), test scored once with that C. Dev and test are never fitted on.

    Returns:
        ``{"status": "done", "name", "C", "c_grid", "select_metric", "dev_per_c", "dev", "test",
        "test_predictions", "train_used"}`` (``test``/``test_predictions`` None without test labels).

    Raises:
        LvsearchError: scikit-learn is not installed.
    """
    try:
        from sklearn.linear_model import LogisticRegression, Ridge
    except ImportError:
        raise LvsearchError("the fine-tuning floor needs scikit-learn", fix="pip install scikit-learn") from None
    from lvsearch.eval.finetune import eval_examples, training_examples
    from lvsearch.eval.finetune_metrics import primary_metric, task_metrics

    train = training_examples(task, cfg)
    evals = eval_examples(task, cfg)
    has_test = "test" in evals and task.test_labeled
    regression = task.kind == "regression"
    y = [e.label for e in train]
    select = primary_metric(task.kind, None if regression else y, task.num_outputs)
    others = [evals["dev"]] + ([evals["test"]] if has_test else [])
    Xtr, (Xdev, *rest) = _bow_features(train, others)

    def fit(c: float):
        model = Ridge(alpha=1.0 / c) if regression else LogisticRegression(C=c, max_iter=2000)
        return model.fit(Xtr, y)

    def preds(model, X):
        p = model.predict(X)
        return [float(v) for v in p] if regression else [int(v) for v in p]

    dev_y = [e.label for e in evals["dev"]]
    best = None
    per_c = {}
    for c in c_grid:
        m = fit(c)
        dev_m = task_metrics(task, dev_y, preds(m, Xdev))
        per_c[f"{c:g}"] = dev_m
        score = dev_m[select] if dev_m[select] is not None else -math.inf
        if best is None or score > best[0]:
            best = (score, c, m, dev_m)
    _, c, model, dev_m = best
    test_m = test_p = None
    if has_test:
        test_p = preds(model, rest[0])
        test_m = task_metrics(task, [e.label for e in evals["test"]], test_p)
    return {"status": "done", "name": BOW_FLOOR_NAME, "C": c, "c_grid": list(c_grid), "select_metric": select,
            "dev_per_c": per_c, "dev": dev_m, "test": test_m, "test_predictions": test_p, "train_used": len(train)}


def finetune_vs_floor(task, result: dict, floor: dict, *, n_resamples: int = RESAMPLES,
                      level: float = 0.95, seed: int = 0) -> dict | None:
    """Paired bootstrap over test examples of (mean over the model's non-failed seeds of the
    test selection metric) − (the floor's), recomputing both on each resample (percentile
    interval). None when there is no labelled test split, no learned seed, or a seed has no
    recorded test predictions (a report written before they were kept).

    Returns:
        ``{"metric", "model", "floor", "difference", "ci", "level", "resamples", "excludes_zero", "beats"}``.
    """
    from lvsearch.eval.finetune import eval_examples
    from lvsearch.eval.finetune_metrics import task_metrics

    seeds = [r for r in result.get("per_seed", []) if r.get("status") == "ok"]
    if not seeds or floor.get("test_predictions") is None or any(r.get("test_predictions") is None for r in seeds):
        return None
    metric = result["select_metric"]
    y = np.asarray([e.label for e in eval_examples(task, _cfg_of(result))["test"]])
    P = np.asarray([r["test_predictions"] for r in seeds])
    f = np.asarray(floor["test_predictions"])
    if P.shape[1] != len(y) or len(f) != len(y):
        raise LvsearchError("the fine-tuning floor was scored on other test examples than the model")

    def stat(idx) -> tuple[float, float]:
        ms = [task_metrics(task, y[idx].tolist(), p[idx].tolist())[metric] for p in P]
        fl = task_metrics(task, y[idx].tolist(), f[idx].tolist())[metric]
        ms = [0.0 if v is None else v for v in ms]
        return float(np.mean(ms)), 0.0 if fl is None else float(fl)

    rng = np.random.default_rng(seed)
    full = np.arange(len(y))
    m0, f0 = stat(full)
    if metric == "accuracy":  # per-example form, vectorised
        d = (P == y).mean(axis=0) - (f == y)
        diffs = d[rng.integers(0, len(y), size=(n_resamples, len(y)))].mean(axis=1)
    else:
        diffs = np.array([np.subtract(*stat(rng.integers(0, len(y), size=len(y)))) for _ in range(n_resamples)])
    alpha = (1 - level) / 2
    lo, hi = (float(x) for x in np.quantile(diffs, [alpha, 1 - alpha]))
    return {"metric": metric, "model": m0, "floor": f0, "difference": m0 - f0, "ci": [lo, hi], "level": level,
            "resamples": n_resamples, "excludes_zero": bool(lo > 0 or hi < 0), "beats": bool(lo > 0)}


def _cfg_of(result: dict):
    from lvsearch.eval.finetune import FinetuneConfig

    return FinetuneConfig(eval_limit=result.get("settings", {}).get("eval_limit"))


__all__ = [
    "BOW_C_GRID", "BOW_FLOOR_NAME", "finetune_floor", "finetune_vs_floor",
    "BLIMP_FLOOR_NAME", "BLIMP_FLOOR_ORDER", "blimp_floor_for_model", "blimp_floor_rows", "blimp_vs_floor",
    "compact_blimp_floor", "fit_blimp_floor", "score_blimp_floor",
    "floors_for_train",
    "FLOOR_NAMES", "NOT_ARCH_EFFECT", "NOT_PAST_FLOOR", "REFERENCE_FLOOR", "NeighbourCountModel", "beats_floor",
    "compact_floors", "floor_line", "floors_for_model", "floors_for_run", "run_settings", "score_floors", "seen_row_counts", "seen_sequences",
]
