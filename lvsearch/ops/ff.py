"""FF: position-wise feed-forward (Vaswani et al. 2017; LV-BERT eq. 9), GELU or GEGLU
(Shazeer 2020)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .base import OpSpec, SlotLayer


class FeedForward(SlotLayer):
    """FF: position-wise feed-forward ``W2 act(W1 x)`` (LV-BERT eq. 9).

    ``activation="gelu"``: ``fc1`` H -> inner, GELU, ``fc2`` inner -> H.
    ``activation="geglu"`` (Shazeer 2020): ``fc1`` H -> 2*inner, ``GELU(a) * b``, ``fc2``.

    Raises:
        ValueError: unknown activation.
    """

    def __init__(self, hidden: int, inner: int, dropout: float = 0.1, pre_ln: bool = False,
                 activation: str = "gelu"):
        super().__init__(hidden, dropout, pre_ln)
        if activation not in ("gelu", "geglu"):
            raise ValueError(f"unknown FF activation {activation!r}")
        self.activation = activation
        self.fc1 = nn.Linear(hidden, inner * (2 if activation == "geglu" else 1))
        self.fc2 = nn.Linear(inner, hidden)

    def transform(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        y = self.fc1(x)
        if self.activation == "geglu":
            a, g = y.chunk(2, dim=-1)
            y = F.gelu(a) * g
        else:
            y = F.gelu(y)
        return self.fc2(y)


def build(dims) -> FeedForward:
    """The FF layer of ``dims`` (``hidden``, ``ff_inner``, ``dropout``, ``pre_ln``, ``ff_activation``)."""
    return FeedForward(dims.hidden, dims.ff_inner, dims.dropout, dims.pre_ln, dims.ff_activation)


def flops(dims, seq_len: int) -> float:
    """Forward FLOPs per token: ``4 H I`` (gelu) or ``6 H I`` (geglu), I = ``ff_inner``."""
    return float((6 if dims.ff_activation == "geglu" else 4) * dims.hidden * dims.ff_inner)


SPEC = OpSpec(code="FF", letter="f", title="feed-forward", colour="#DD8452", order=1, layer=FeedForward,
              build=build, flops=flops, residual="fc2", paper="Vaswani et al. 2017; LV-BERT (Yu et al. 2021) eq. 9")
