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
from lvsearch.data.loader import DevSet
from lvsearch.data.masking import IGNORE_INDEX


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
