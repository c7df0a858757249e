"""The training sequences a run saw, replayed from its recorded settings: :func:`seen_sequences`,
:func:`seen_row_counts` (the same sample in bounded memory) and :func:`run_settings` (those
settings read from a model directory).

The floors fitted on them: MLM floors in :mod:`lvsearch.eval.floors`, the BLiMP floor in
:mod:`lvsearch.eval.blimp_floor`.
"""

from __future__ import annotations

import numpy as np

__all__ = ["seen_sequences", "seen_row_counts", "run_settings"]


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
