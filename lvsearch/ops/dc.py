"""DC: span-based lightweight dynamic convolution (LV-BERT, Yu et al. 2021, appendix A,
eq. 13-17; ConvBERT, Jiang et al. 2020; Wu et al. 2019).

Inside lvsearch the convolution is :func:`lvsearch.kernels.dynamic_conv.dynamic_conv_softmax`
(one fused kernel on CUDA). In an exported folder without lvsearch this module falls back to
:func:`dynamic_conv_reference`, the same function in plain torch.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .base import OpSpec, SlotLayer


def dynamic_conv_reference(value: torch.Tensor, logits: torch.Tensor,
                           padding_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Pure-torch ``C[t, h*d + j] = sum_k softmax_k(logits)[t, h, k] V[t + k - (K-1)/2, h*d + j]``
    (zero padded at both ends; LV-BERT eq. 16).

    Args:
        value: ``(B, L, H)``, already zero at padding positions (the DC layer zeroes it).
        logits: ``(B, L, heads, K)`` kernel logits; softmax over the K taps.
        padding_mask: accepted for the kernel's signature; unused (``value`` is zeroed).

    Returns:
        ``(B, L, H)`` in ``value.dtype``.
    """
    b, l, h = value.shape
    heads, k = logits.shape[2], logits.shape[3]
    kernels = torch.softmax(logits, dim=-1).to(value.dtype)
    left = (k - 1) // 2
    padded = F.pad(value, (0, 0, left, k - 1 - left)).view(b, l + k - 1, heads, h // heads)
    out = padded[:, 0:l] * kernels[..., 0:1]
    for tap in range(1, k):
        out = out + padded[:, tap:tap + l] * kernels[..., tap:tap + 1]
    return out.reshape(b, l, h)


try:  # inside lvsearch: the fused kernel (CUDA) or lvsearch's torch path
    from lvsearch.kernels.dynamic_conv import dynamic_conv_softmax
except ImportError:  # an exported folder loaded without lvsearch
    dynamic_conv_softmax = dynamic_conv_reference


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


def build(dims) -> DynamicConv:
    """The DC layer of ``dims`` (``hidden``, ``heads`` = conv heads, ``conv_kernel``, ``dropout``, ``pre_ln``)."""
    return DynamicConv(dims.hidden, dims.heads, dims.conv_kernel, dims.dropout, dims.pre_ln)


def flops(dims, seq_len: int) -> float:
    """Forward FLOPs per token: ``8 H^2`` (GLU input 4H^2, pointwise 2H^2, output 2H^2)
    ``+ 2 H h K`` (kernel generator) ``+ 4 K H`` (depthwise + dynamic convolution), with
    h = ``heads``, K = ``conv_kernel``."""
    H, h, K = dims.hidden, dims.heads, dims.conv_kernel
    return float(8 * H * H + 2 * H * h * K + 4 * K * H)


SPEC = OpSpec(code="DC", letter="c", title="dynamic convolution", colour="#55A868", order=2, layer=DynamicConv,
              build=build, flops=flops, residual="out",
              paper="LV-BERT (Yu et al. 2021) appendix A eq. 13-17; ConvBERT (Jiang et al. 2020)")
