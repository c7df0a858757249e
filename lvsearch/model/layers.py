"""The three slot operations: self-attention (SA), feed-forward (FF), dynamic convolution (DC).

Every layer maps ``x: (batch, seq, hidden)`` to the same shape, takes a boolean padding mask
``(batch, seq)`` with True = real token (or None = no padding), and carries its own residual
connection, LayerNorm and dropout (LV-BERT appendix A):

- post-LN (default): ``y = LayerNorm(x + Dropout(f(x)))``
- pre-LN (``pre_ln=True``): ``y = x + Dropout(f(LayerNorm(x)))``; the encoder then applies
  a final LayerNorm after the last slot.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from lvsearch.kernels.dynamic_conv import dynamic_conv_softmax

#: LayerNorm epsilon used throughout (BERT/ELECTRA value).
LN_EPS = 1e-12


class SlotLayer(nn.Module):
    """Residual + LayerNorm + dropout around :meth:`transform` (LV-BERT appendix A)."""

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


class SelfAttention(SlotLayer):
    """SA: multi-head scaled dot-product self-attention (Vaswani et al. 2017; LV-BERT eq. 10-12).

    Computed with ``torch.nn.functional.scaled_dot_product_attention``; keys at padding
    positions are masked out. Parameters: ``qkv`` (H -> 3H), ``out`` (H -> H), ``norm``.
    Attention-probability dropout uses the layer's dropout rate.
    """

    def __init__(self, hidden: int, heads: int, dropout: float = 0.1, pre_ln: bool = False):
        super().__init__(hidden, dropout, pre_ln)
        if hidden % heads:
            raise ValueError(f"hidden {hidden} not divisible by heads {heads}")
        self.heads = heads
        self.attn_dropout = dropout
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.out = nn.Linear(hidden, hidden)

    def transform(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        b, l, h = x.shape
        q, k, v = self.qkv(x).view(b, l, 3, self.heads, h // self.heads).permute(2, 0, 3, 1, 4)
        attn_mask = None
        if mask is not None:
            # A sequence with no real token would give a softmax over nothing (NaN); let such
            # rows attend everywhere instead (their outputs are padding anyway).
            attn_mask = (mask | ~mask.any(dim=1, keepdim=True))[:, None, None, :]
        y = F.scaled_dot_product_attention(
            q, k, v, attn_mask=attn_mask, dropout_p=self.attn_dropout if self.training else 0.0
        )
        return self.out(y.transpose(1, 2).reshape(b, l, h))


class FeedForward(SlotLayer):
    """FF: position-wise feed-forward ``W2 act(W1 x)`` (LV-BERT eq. 9).

    ``activation="gelu"``: ``fc1`` H -> inner, GELU, ``fc2`` inner -> H.
    ``activation="geglu"`` (Shazeer 2020): ``fc1`` H -> 2*inner, ``GELU(a) * b``, ``fc2``.
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


class DynamicConv(SlotLayer):
    """DC: span-based lightweight dynamic convolution (LV-BERT appendix A, eq. 13-17;
    cf. ConvBERT, Jiang et al. 2020; Wu et al. 2019).

    - eq. 13: ``V = GLU(x W_v)`` — ``value`` (H -> 2H) then GLU -> ``(B, L, H)``; V is zeroed
      at padding positions.
    - eq. 14: ``S = Pointwise(Depthwise(V))`` — ``depthwise``: per-channel conv of width
      ``kernel`` (``F.conv1d`` with ``groups=H``, no bias), ``pointwise``: H -> H linear.
    - eq. 15: ``D = softmax_K(reshape(S W_dyn))`` — ``kernel`` (H -> heads*K), softmax over the
      K taps: one kernel per conv head and position.
    - eq. 16: ``C = LightConv(V, D)`` — :func:`lvsearch.kernels.dynamic_conv.dynamic_conv_softmax`
      (softmax of eq. 15 and the convolution in one call; one fused kernel on CUDA), each
      head's kernel shared across its ``H/heads`` channels.
    - eq. 17: ``out`` (H -> H), then residual + LayerNorm (:class:`SlotLayer`).

    Folded projection: there is no nonlinearity between ``pointwise`` and ``kernel``, so the
    logits ``(Depthwise(V) W_pw^T + b_pw) W_dyn^T + b_dyn`` are computed as
    ``Depthwise(V) (W_dyn W_pw)^T + (W_dyn b_pw + b_dyn)`` (:meth:`kernel_logits`): the same
    function of the same parameters (same gradients up to float rounding), but the
    ``(B, L, H)`` pointwise output is never formed and the ``B L H^2`` matmul becomes
    ``B L H heads K`` plus a per-step ``heads K H^2`` fold. The parameters and their names
    are unchanged, so checkpoints are compatible.

    Zeroing V at padding before both convolutions means the contents of padding positions
    never reach real tokens.
    """

    def __init__(self, hidden: int, heads: int, kernel_size: int = 9, dropout: float = 0.1,
                 pre_ln: bool = False):
        super().__init__(hidden, dropout, pre_ln)
        if hidden % heads:
            raise ValueError(f"hidden {hidden} not divisible by conv heads {heads}")
        if kernel_size % 2 == 0:
            raise ValueError(f"conv kernel size must be odd, got {kernel_size}")
        self.heads = heads
        self.kernel_size = kernel_size
        self.value = nn.Linear(hidden, 2 * hidden)
        self.depthwise = nn.Conv1d(hidden, hidden, kernel_size, padding=kernel_size // 2,
                                   groups=hidden, bias=False)
        self.pointwise = nn.Linear(hidden, hidden)
        self.kernel = nn.Linear(hidden, heads * kernel_size)
        self.out = nn.Linear(hidden, hidden)

    def kernel_logits(self, v: torch.Tensor) -> torch.Tensor:
        """Kernel logits of eq. 14-15 before the softmax, with ``W_dyn W_pw`` folded.

        Args:
            v: ``(B, L, H)`` GLU value, zeroed at padding.

        Returns:
            ``(B, L, heads * K)``: ``Depthwise(v) (W_dyn W_pw)^T + (W_dyn b_pw + b_dyn)``.
        """
        dw = self.depthwise(v.transpose(1, 2)).transpose(1, 2)
        weight = self.kernel.weight @ self.pointwise.weight
        bias = torch.addmv(self.kernel.bias, self.kernel.weight, self.pointwise.bias)
        return F.linear(dw, weight, bias)

    def transform(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        b, l, _ = x.shape
        v = F.glu(self.value(x), dim=-1)
        if mask is not None:
            v = v.masked_fill(~mask.unsqueeze(-1), 0.0)
        logits = self.kernel_logits(v).view(b, l, self.heads, self.kernel_size)
        return self.out(dynamic_conv_softmax(v, logits, mask))


def make_layer(op: str, dims) -> SlotLayer:
    """Build the layer for op code ``op`` (``"SA"``, ``"FF"``, ``"DC"``) from a ModelDims."""
    if op == "SA":
        return SelfAttention(dims.hidden, dims.heads, dims.dropout, dims.pre_ln)
    if op == "FF":
        return FeedForward(dims.hidden, dims.ff_inner, dims.dropout, dims.pre_ln, dims.ff_activation)
    if op == "DC":
        return DynamicConv(dims.hidden, dims.heads, dims.conv_kernel, dims.dropout, dims.pre_ln)
    raise ValueError(f"unknown op {op!r}")
