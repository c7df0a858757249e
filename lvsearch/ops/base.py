"""What every slot op shares: the residual/LayerNorm/dropout wrapper :class:`SlotLayer`, the
LayerNorm epsilon, and the op contract :class:`OpSpec`.

This file and the op modules next to it are also the op code of a Hugging Face export
(``lvsearch export`` copies them next to ``modeling_lvsearch.py``), so they import only torch,
the standard library and each other (relative imports), never the rest of lvsearch.

Every op layer maps ``x: (batch, seq, hidden)`` to the same shape, takes a boolean padding
mask ``(batch, seq)`` with True = real token (or None = no padding), and carries its own
residual connection, LayerNorm and dropout (LV-BERT, Yu et al. 2021, appendix A):

- post-LN (default): ``y = LayerNorm(x + Dropout(f(x)))``
- pre-LN (``pre_ln=True``): ``y = x + Dropout(f(LayerNorm(x)))``; the encoder then applies
  a final LayerNorm after the last slot.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import nn

#: LayerNorm epsilon used throughout (BERT/ELECTRA value).
LN_EPS = 1e-12

#: The model sizes an op's ``build`` and ``flops`` may read (attribute names of
#: ``lvsearch.model.ModelDims``; an export passes the same names built from its config).
DIMS_FIELDS: tuple[str, ...] = ("hidden", "heads", "ff_inner", "conv_kernel", "dropout", "pre_ln",
                                "ff_activation", "position", "relative_buckets", "relative_max_distance",
                                "relative_init")


class SlotLayer(nn.Module):
    """Residual + LayerNorm + dropout around :meth:`transform` (LV-BERT appendix A).

    Subclasses implement ``transform(x (B, L, H), mask (B, L) bool or None) -> (B, L, H)``
    (the op itself, without residual and norm)."""

    def __init__(self, hidden: int, dropout: float, pre_ln: bool):
        super().__init__()
        self.pre_ln = pre_ln
        self.norm = nn.LayerNorm(hidden, eps=LN_EPS)
        self.dropout = nn.Dropout(dropout)

    def transform(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:  # pragma: no cover
        raise NotImplementedError

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """``x: (B, L, H)``, ``mask: (B, L)`` bool (True = real token) or None -> ``(B, L, H)``."""
        if self.pre_ln:
            return x + self.dropout(self.transform(self.norm(x), mask))
        return self.norm(x + self.dropout(self.transform(x, mask)))


def _whole_layer(layer: nn.Module) -> dict[str, torch.Tensor]:
    return layer.state_dict()


@dataclass(frozen=True)
class OpSpec:
    """Everything lvsearch needs to know about one op; each op module defines one as ``SPEC``.

    Attributes:
        code: upper-case op code (``"SA"``); names the op in architecture JSON files, search
            space YAMLs, exports and state-dict keys (``slots.{n}.{code}.*``).
        letter: one lower-case letter for the compact architecture string (``"s"``).
        title: short human name (``"self-attention"``), for messages and legends.
        colour: plot colour (``"#RRGGBB"``).
        order: canonical position among the ops (SA 0, FF 1, DC 2, new ops after): a search
            space lists its ops in this order, and per-op α̂ matrices follow it.
        layer: the :class:`SlotLayer` subclass.
        build: ``build(dims) -> layer``; ``dims`` has the attributes :data:`DIMS_FIELDS`.
        flops: ``flops(dims, seq_len) -> float``: forward FLOPs per token of one slot running
            the op (1 multiply-add = 2 FLOPs, matmuls only).
        residual: name of the layer's ``nn.Linear`` that writes into the residual stream
            (gets the scaled init under ``init: scaled``).
        paper: where the op comes from (for docs and ``arch`` messages).
        path_weights: how the supernet shares the op's weights: the supernet holds one
            ``build(dims)`` layer per slot under ``slots.{n}.{code}``, and ``path_weights(layer)``
            is the state dict an Encoder's layer of that slot takes from it (default: the whole
            layer, unchanged keys).

    Parameters are counted from the built layer (:meth:`num_params`).
    """

    code: str
    letter: str
    title: str
    colour: str
    order: int
    layer: type
    build: Callable[[Any], SlotLayer]
    flops: Callable[[Any, int], float]
    residual: str
    paper: str
    path_weights: Callable[[nn.Module], dict] = _whole_layer

    def num_params(self, dims: Any) -> int:
        """Parameters of one slot running this op (``build(dims)``'s numel)."""
        return sum(p.numel() for p in self.build(dims).parameters())
