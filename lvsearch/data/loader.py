"""Batches for training and the fixed, pre-masked dev set used to compare architectures.

:class:`BatchStream` is a pure function of ``(seed, step)``: the batch of step ``s`` is the
same whether the run started at step 0 or resumed at step ``s``, which is what exact resume
needs; there is no hidden iterator state to checkpoint besides the step. Each epoch visits
every packed sequence once in a seeded random order (a trailing partial global batch is
dropped). Under data parallelism rank ``r`` of ``W`` takes rows ``[r·b, (r+1)·b)`` of each
global batch of ``W·b`` sequences, so the union over ranks equals the single-process batch.

:func:`fixed_dev_set` builds the dev batch that every architecture is evaluated on: a seeded
choice of dev sequences masked once with a seeded generator. It is a deterministic function
of its arguments (CPU RNG), so every process and every run gets identical masks. Every dev
evaluation of lvsearch (learning curves, supernet panel, search fitness, ``evaluate``,
reference floors) uses the standard BERT masking :data:`DEV_MASKING` whatever masking the run
trained with, so dev accuracies of runs with different ``masking`` settings stay comparable.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from lvsearch.data.masking import MaskingConfig, MLMMasker
from lvsearch.data.shards import PackedSequences, PreparedData
from lvsearch.errors import LvsearchError

#: The masking of every dev set lvsearch scores (``MaskingConfig()``: 15% of non-special
#: tokens, token strategy, 80/10/10 [MASK]/random/keep), independent of a run's training masking.
DEV_MASKING = MaskingConfig()


class BatchStream:
    """Shuffled ``(batch, seq)`` int64 batches of packed sequences, addressable by step.

    Args:
        sequences: the split's packed sequences.
        batch_size: sequences per step *per rank*.
        seed: shuffling seed.
        rank, world_size: data-parallel position; the global batch is ``batch_size·world_size``.

    Raises:
        LvsearchError: the split holds fewer sequences than one global batch.
    """

    def __init__(self, sequences: PackedSequences, batch_size: int, seed: int, *, rank: int = 0, world_size: int = 1):
        self.sequences = sequences
        self.batch_size, self.seed, self.rank, self.world_size = batch_size, seed, rank, world_size
        self.global_batch = batch_size * world_size
        self.steps_per_epoch = len(sequences) // self.global_batch
        if self.steps_per_epoch == 0:
            raise LvsearchError(
                f"the training split has {len(sequences)} sequences of length {sequences.seq_len}, fewer than "
                f"one global batch of {self.global_batch}",
                fix="lower the batch size or the sequence length, or prepare more text",
            )
        self._epoch, self._perm = -1, None

    def permutation(self, epoch: int) -> np.ndarray:
        """The order of the training sequences in ``epoch``: shape ``(num_sequences,)``, row
        indices, drawn from ``(seed, epoch)`` alone (so the reference floors count exactly the
        tokens a run sees). Cached for the last epoch asked."""
        if epoch != self._epoch:
            self._perm = np.random.default_rng([self.seed, epoch]).permutation(len(self.sequences))
            self._epoch = epoch
        return self._perm  # type: ignore[return-value]

    def batch(self, step: int) -> torch.Tensor:
        """This rank's batch of global step ``step`` (0-based): LongTensor ``(batch_size, seq_len)``."""
        epoch, within = divmod(step, self.steps_per_epoch)
        start = within * self.global_batch + self.rank * self.batch_size
        rows = self.permutation(epoch)[start : start + self.batch_size]
        return torch.from_numpy(self.sequences[rows])

    def epoch_of(self, step: int) -> float:
        """Fractional epoch reached after ``step`` steps."""
        return step / self.steps_per_epoch


@dataclass
class DevSet:
    """A fixed masked dev batch: ``input_ids`` (corrupted), ``labels`` (−100 where not
    predicted) and ``original_ids`` (uncorrupted), LongTensors ``(n, L)``."""

    input_ids: torch.Tensor
    labels: torch.Tensor
    original_ids: torch.Tensor

    def __len__(self) -> int:
        return self.input_ids.shape[0]

    def batches(self, batch_size: int):
        """Yield ``(input_ids, labels)`` chunks of at most ``batch_size`` rows, in order."""
        for i in range(0, len(self), batch_size):
            yield self.input_ids[i : i + batch_size], self.labels[i : i + batch_size]


def fixed_dev_set(
    data: PreparedData,
    *,
    num_sequences: int | None = 256,
    seq_len: int | None = None,
    seed: int = 1234,
    masking: MaskingConfig | None = None,
) -> DevSet:
    """The deterministic pre-masked dev batch of a prepared dataset.

    Args:
        data: the prepared dataset (its ``dev`` split is used).
        num_sequences: how many dev sequences (a seeded sample; all when None or larger).
        seq_len: packing length (default: the dataset's).
        seed: seed of the sample and of the masks.
        masking: MLM settings (default :data:`DEV_MASKING`, the standard BERT masking; every
            lvsearch job leaves it at that default so that dev accuracies do not depend on the
            training masking — pass another only for experiments outside the tools).

    Returns:
        :class:`DevSet` of ``min(num_sequences, available)`` rows of length ``seq_len``.

    Raises:
        LvsearchError: the dev split has no sequence of this length (see
            :meth:`PreparedData.sequences`).
    """
    seqs = data.sequences("dev", seq_len)
    n = len(seqs) if num_sequences is None else min(num_sequences, len(seqs))
    rows = np.sort(np.random.default_rng(seed).choice(len(seqs), size=n, replace=False))
    ids = torch.from_numpy(seqs[rows])
    masker = MLMMasker(masking or DEV_MASKING, data.vocab_size, data.special_ids)
    corrupted, labels = masker(ids, torch.Generator().manual_seed(seed))
    return DevSet(corrupted, labels, ids)


def held_out_dev_set(
    data: PreparedData,
    *,
    exclude_sequences: int | None,
    num_sequences: int | None = None,
    seq_len: int | None = None,
    seed: int = 1234,
    masking: MaskingConfig | None = None,
) -> DevSet:
    """Dev sequences disjoint from ``fixed_dev_set(data, num_sequences=exclude_sequences,
    seq_len=seq_len, seed=seed)``: fresh targets for re-scoring architectures that were selected
    on that set (a score on the targets that selected a candidate is biased upwards — the
    winner's curse; a second look on fresh targets is not). Its masks are drawn with ``seed + 1``.

    Args:
        data: the prepared dataset (its ``dev`` split).
        exclude_sequences: size of the fixed dev set to leave out (None: all — nothing is left).
        num_sequences: how many of the remaining sequences (a seeded sample; all when None or
            larger).
        seq_len, seed, masking: as :func:`fixed_dev_set` (the excluded set's values).

    Returns:
        :class:`DevSet` of ``min(num_sequences, remaining)`` rows.

    Raises:
        LvsearchError: no dev sequence is left outside the excluded set.
    """
    seqs = data.sequences("dev", seq_len)
    total = len(seqs)
    n_ex = total if exclude_sequences is None else min(exclude_sequences, total)
    used = np.random.default_rng(seed).choice(total, size=n_ex, replace=False)
    rest = np.setdiff1d(np.arange(total), used)
    if rest.size == 0:
        raise LvsearchError(
            f"{data.folder}: the dev split has {total} sequences{f' of length {seq_len}' if seq_len else ''} and the search's "
            f"fitness uses {n_ex} of them: none is left for a second look on fresh targets",
            fix="score the search on fewer --dev-sequences, or prepare the data with a larger dev split",
        )
    n = rest.size if num_sequences is None else min(num_sequences, rest.size)
    rows = np.sort(np.random.default_rng(seed + 1).choice(rest, size=n, replace=False))
    ids = torch.from_numpy(seqs[rows])
    masker = MLMMasker(masking or DEV_MASKING, data.vocab_size, data.special_ids)
    corrupted, labels = masker(ids, torch.Generator().manual_seed(seed + 1))
    return DevSet(corrupted, labels, ids)
