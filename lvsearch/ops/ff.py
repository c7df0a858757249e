"""FF: position-wise feed-forward (Vaswani et al. 2017; LV-BERT eq. 9), GELU or GEGLU
(Shazeer 2020)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .base import Elastic, OpSpec, SlotLayer


class FeedForward(SlotLayer):
    """FF: position-wise feed-forward ``W2 act(W1 x)`` (LV-BERT eq. 9).

    ``activation="gelu"``: ``fc1`` H -> inner, GELU, ``fc2`` inner -> H.
    ``activation="geglu"`` (Shazeer 2020): ``fc1`` H -> 2*inner, ``GELU(a) * b``, ``fc2``.

    Elastic width (a variant, :data:`INNER`): ``transform(x, mask, inner=k)`` uses the first
    ``k`` inner units only (rows of ``fc1``, for GEGLU of both halves, and columns of ``fc2``;
    slices, no copies).

    Raises:
        ValueError: unknown activation.
    """

    def __init__(self, hidden: int, inner: int, dropout: float = 0.1, pre_ln: bool = False,
                 activation: str = "gelu"):
        super().__init__(hidden, dropout, pre_ln)
        if activation not in ("gelu", "geglu"):
            raise ValueError(f"unknown FF activation {activation!r}")
        self.activation = activation
        self.inner = inner
        self.fc1 = nn.Linear(hidden, inner * (2 if activation == "geglu" else 1))
        self.fc2 = nn.Linear(inner, hidden)

    def _inner(self, inner: int | None) -> int:
        k = self.inner if inner is None else inner
        if not 1 <= k <= self.inner:
            raise ValueError(f"this FF layer has {self.inner} inner units; cannot run {k}")
        return k

    def transform(self, x: torch.Tensor, mask: torch.Tensor | None, inner: int | None = None) -> torch.Tensor:
        k = self._inner(inner)
        if k == self.inner:
            y = self.fc1(x)
            if self.activation == "geglu":
                a, g = y.chunk(2, dim=-1)
                y = F.gelu(a) * g
            else:
                y = F.gelu(y)
            return self.fc2(y)
        w, b = self.fc1.weight, self.fc1.bias
        y = F.gelu(F.linear(x, w[:k], b[:k]))
        if self.activation == "geglu":
            y = y * F.linear(x, w[self.inner:self.inner + k], b[self.inner:self.inner + k])
        return F.linear(y, self.fc2.weight[:, :k], self.fc2.bias)


#: The largest FF inner width a variant may ask for, in multiples of ``model.ff_inner``.
MAX_INNER = 64


def _check_inner(value) -> str | None:
    if not 0 < value <= MAX_INNER:  # NaN and infinity fail too
        return f"inner must be a positive multiple of model.ff_inner of at most {MAX_INNER}, got {value}"
    return None


def _inner_size(dims, value) -> int:
    units = value * dims.ff_inner
    if units < 1 or abs(units - round(units)) > 1e-9:
        raise ValueError(f"inner {value} x model.ff_inner {dims.ff_inner} = {units:g} is not a whole, positive "
                         "number of units")
    return int(round(units))


#: FF's elastic dimension: the inner width as a multiple of ``model.ff_inner`` (so a space
#: works at any model size); a variant of k units uses the first k.
INNER = Elastic(name="inner", letter="i", unit="multiples of model.ff_inner", default=lambda dims: 1,
                check=_check_inner, size=_inner_size, integer=False)


def build(dims, inner: int | None = None) -> FeedForward:
    """The FF layer of ``dims`` (``hidden``, ``ff_inner``, ``dropout``, ``pre_ln``, ``ff_activation``)
    with ``inner`` units (default ``dims.ff_inner``)."""
    return FeedForward(dims.hidden, dims.ff_inner if inner is None else inner, dims.dropout, dims.pre_ln,
                       dims.ff_activation)


def path_weights(layer: FeedForward, inner: int | None = None) -> dict[str, torch.Tensor]:
    """The weights of the ``inner``-unit variant of a (supernet) FF layer: the first units'
    rows of ``fc1`` (of both GEGLU halves) and columns of ``fc2``."""
    k = layer._inner(inner)
    sd = layer.state_dict()
    if k == layer.inner:
        return sd
    w, b, n = layer.fc1.weight.detach(), layer.fc1.bias.detach(), layer.inner
    if layer.activation == "geglu":
        sd["fc1.weight"], sd["fc1.bias"] = torch.cat([w[:k], w[n:n + k]]), torch.cat([b[:k], b[n:n + k]])
    else:
        sd["fc1.weight"], sd["fc1.bias"] = w[:k], b[:k]
    sd["fc2.weight"] = layer.fc2.weight.detach()[:, :k]
    return sd


def flops(dims, seq_len: int, inner: int | None = None) -> float:
    """Forward FLOPs per token: ``4 H I`` (gelu) or ``6 H I`` (geglu), I = ``inner`` (default ``ff_inner``)."""
    i = dims.ff_inner if inner is None else inner
    return float((6 if dims.ff_activation == "geglu" else 4) * dims.hidden * i)


SPEC = OpSpec(code="FF", letter="f", title="feed-forward", colour="#DD8452", order=1, layer=FeedForward,
              build=build, flops=flops, residual="fc2", paper="Vaswani et al. 2017; LV-BERT (Yu et al. 2021) eq. 9",
              path_weights=path_weights, elastic=(INNER,))
