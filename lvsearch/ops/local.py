"""LA: sliding-window (local) multi-head self-attention.

Each token attends only to the keys within ``window`` positions on either side of it, as the
local layers of ModernBERT (Warner et al. 2024), which alternate with global attention, and
Longformer's sliding window (Beltagy et al. 2020, §3.1). The layer has the projections of SA
(``qkv`` H -> 3H, ``out`` H -> H) with weights of its own, and runs
``torch.nn.functional.scaled_dot_product_attention`` with a band mask ``|i - j| <= window``
combined with the padding mask. It has no relative-position bias: under
``position: relative`` the band is its only positional signal.

This module is the worked example of docs/architecture.md "How to add an op": it and one line
in a search-space YAML (search_spaces/lvbert-local.yaml) are all the op needed.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .base import OpSpec, SlotLayer

#: Half-width of the attention window in tokens: token i sees keys i - WINDOW .. i + WINDOW
#: (2 * WINDOW + 1 keys; ModernBERT's local layers use a 128-token window, i.e. ±64).
WINDOW = 16


def band_mask(length: int, window: int, device: torch.device | None = None) -> torch.Tensor:
    """``(L, L)`` bool, True where ``|query - key| <= window``."""
    pos = torch.arange(length, device=device)
    return (pos[None, :] - pos[:, None]).abs() <= window


class LocalSelfAttention(SlotLayer):
    """LA: multi-head self-attention restricted to a window of ``±window`` tokens.

    ``x (B, L, H)``, ``mask (B, L)`` bool (True = real token) or None -> ``(B, L, H)``. A query
    attends to the real keys inside its window; a padding query whose window holds no real key
    attends to its whole window instead (its output is padding anyway), so no softmax is empty.
    Attention-probability dropout uses the layer's dropout rate.

    Raises:
        ValueError: ``hidden`` not divisible by ``heads``, or ``window`` < 0.
    """

    def __init__(self, hidden: int, heads: int, dropout: float = 0.1, pre_ln: bool = False, window: int = WINDOW):
        super().__init__(hidden, dropout, pre_ln)
        if hidden % heads:
            raise ValueError(f"hidden {hidden} not divisible by heads {heads}")
        if window < 0:
            raise ValueError(f"window must be >= 0, got {window}")
        self.heads = heads
        self.window = window
        self.attn_dropout = dropout
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.out = nn.Linear(hidden, hidden)

    def transform(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        b, l, h = x.shape
        q, k, v = self.qkv(x).view(b, l, 3, self.heads, h // self.heads).permute(2, 0, 3, 1, 4)
        band = band_mask(l, self.window, x.device)  # (L, L)
        if mask is None:
            allowed = band[None, None]  # (1, 1, L, L)
        else:
            allowed = band[None] & mask[:, None, :]  # (B, L, L)
            allowed = allowed | (band[None] & ~allowed.any(dim=-1, keepdim=True))
            allowed = allowed[:, None]  # (B, 1, L, L)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed,
                                           dropout_p=self.attn_dropout if self.training else 0.0)
        return self.out(y.transpose(1, 2).reshape(b, l, h))


def build(dims) -> LocalSelfAttention:
    """The LA layer of ``dims`` (``hidden``, ``heads``, ``dropout``, ``pre_ln``; window :data:`WINDOW`)."""
    return LocalSelfAttention(dims.hidden, dims.heads, dims.dropout, dims.pre_ln, WINDOW)


def flops(dims, seq_len: int) -> float:
    """Forward FLOPs per token: ``8 H^2`` (QKV + output projections) ``+ 4 H min(L, 2 W + 1)``
    (scores and weighted values over the window, W = :data:`WINDOW`): what a banded kernel
    computes. The SDPA path here forms the dense ``L x L`` scores and masks them."""
    return float(8 * dims.hidden * dims.hidden + 4 * dims.hidden * min(seq_len, 2 * WINDOW + 1))


SPEC = OpSpec(code="LA", letter="l", title="local self-attention", colour="#8172B3", order=3,
              layer=LocalSelfAttention, build=build, flops=flops, residual="out",
              paper="ModernBERT (Warner et al. 2024); Longformer (Beltagy et al. 2020)")
