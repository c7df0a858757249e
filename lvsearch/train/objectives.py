"""Training objectives as modules whose ``forward`` returns summed losses (for the loop).

MLM (Devlin et al. 2019): cross-entropy of the true token at the selected positions only
(``labels != -100``); logits are computed for those positions alone, which skips ~85% of the
``H × V`` output projection compared with scoring every position.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from lvsearch.arch import Arch
from lvsearch.config import TrainConfig
from lvsearch.data.loader import BatchStream, DevSet
from lvsearch.data.masking import IGNORE_INDEX, MaskingConfig, MLMMasker
from lvsearch.data.shards import PreparedData
from lvsearch.errors import LvsearchError
from lvsearch.train.distributed import DistInfo
from lvsearch.train.loop import step_seed


class MaskedBatches:
    """Masked micro-batches of each step for this rank.

    Every rank reads and masks the whole global batch of the step (masks from a generator
    seeded by ``(seed, step)``) and keeps its own rows, split into ``grad_accum`` micro-batches:
    the union over ranks is then exactly the single-process batch (tested).

    Raises:
        LvsearchError: the global batch is not divisible by ``world_size × grad_accum``.
    """

    def __init__(self, data: PreparedData, train: TrainConfig, masking: MaskingConfig, info: DistInfo):
        per_rank, rem = divmod(train.batch_size, info.world_size * train.grad_accum)
        if rem or per_rank == 0:
            raise LvsearchError(
                f"train.batch_size {train.batch_size} is not divisible by world size {info.world_size} × "
                f"train.grad_accum {train.grad_accum}",
                fix="choose a global batch that is a multiple of both",
            )
        self.train, self.info, self.micro = train, info, per_rank
        self.stream = BatchStream(data.sequences("train", train.seq_len), train.batch_size, train.seed)
        self.masker = MLMMasker(masking, data.vocab_size, data.special_ids)

    def __call__(self, step: int) -> tuple[list[dict], torch.Tensor]:
        """``([{"input_ids", "labels", "original_ids"} per micro-batch], global labels (B, L))``."""
        ids = self.stream.batch(step)
        gen = torch.Generator().manual_seed(step_seed(self.train.seed, step, 0, "mask"))
        corrupted, labels = self.masker(ids, gen)
        start = self.info.rank * self.micro * self.train.grad_accum
        out = []
        for i in range(self.train.grad_accum):
            sl = slice(start + i * self.micro, start + (i + 1) * self.micro)
            out.append({"input_ids": corrupted[sl], "labels": labels[sl], "original_ids": ids[sl]})
        return out, labels


def mlm_sums(backbone: nn.Module, hidden: torch.Tensor, labels: torch.Tensor) -> dict[str, torch.Tensor]:
    """MLM loss and accuracy sums at the prediction targets.

    Args:
        backbone: a model with ``mlm_logits(hidden (..., H)) -> (..., V)``.
        hidden: ``(B, L, H)`` final hidden states.
        labels: ``(B, L)`` long, original ids at targets, ``-100`` elsewhere.

    Returns:
        ``loss_sum`` (scalar, differentiable, nats summed over targets), ``count`` (targets)
        and ``correct`` (targets whose arg-max prediction is the label), both detached.
    """
    targets = labels != IGNORE_INDEX
    logits = backbone.mlm_logits(hidden[targets]).float()
    gold = labels[targets]
    loss_sum = F.cross_entropy(logits, gold, reduction="sum")
    correct = (logits.argmax(dim=-1) == gold).sum()
    return {"loss_sum": loss_sum, "count": targets.sum().detach(), "correct": correct.detach()}


def mlm_log_metrics(sums: dict[str, float]) -> dict[str, float]:
    """Mean training MLM loss (nats) and accuracy from summed :func:`mlm_sums` outputs."""
    count = max(sums["count"], 1.0)
    return {"loss": sums["loss_sum"] / count, "accuracy": sums["correct"] / count}


class SupernetMLM(nn.Module):
    """The supernet under the MLM objective; ``forward`` runs the path of one architecture.

    Its state dict is the supernet's with the prefix ``net.``.
    """

    def __init__(self, net: nn.Module):
        super().__init__()
        self.net = net

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor, arch: Arch) -> dict[str, torch.Tensor]:
        """``input_ids``, ``labels``: ``(B, L)`` long; returns :func:`mlm_sums` of ``arch``'s path."""
        return mlm_sums(self.net, self.net(input_ids, arch), labels)


@torch.no_grad()
def evaluate_mlm(forward, backbone: nn.Module, dev: DevSet, batch_size: int, device: torch.device) -> dict[str, float]:
    """MLM loss (nats/target) and accuracy of ``forward(input_ids) -> hidden`` on a fixed dev set.

    Args:
        forward: callable mapping ``(B, L)`` ids to ``(B, L, H)`` hidden states (e.g.
            ``lambda ids: supernet(ids, arch)``); called in eval mode by the caller.
        backbone: provides ``mlm_logits``.
        dev: the fixed masked dev set.
        batch_size: sequences per forward pass.
        device: where to run.
    """
    loss = correct = count = 0.0
    for ids, labels in dev.batches(batch_size):
        ids, labels = ids.to(device), labels.to(device)
        sums = mlm_sums(backbone, forward(ids), labels)
        loss += float(sums["loss_sum"])
        correct += float(sums["correct"])
        count += float(sums["count"])
    return {"loss": loss / max(count, 1.0), "accuracy": correct / max(count, 1.0), "targets": int(count)}
