"""Lightweight dynamic convolution (Wu et al. 2019; LV-BERT appendix A, eq. 16).

For every position ``t`` and conv head ``h`` a softmax-normalised kernel ``D[t, h, :]`` of
``K`` taps is applied to the head's channels of the value sequence, shared across the
head's ``H / heads`` channels ("lightweight"):

    C[b, t, h*d + j] = sum_k D[b, t, h, k] * V[b, t + k - (K-1)//2, h*d + j]

with zero padding outside ``0..L-1`` and ``d = H / heads``. Positions where
``padding_mask`` is False contribute zero (their values are zeroed first), so padding never
leaks into real tokens.

:func:`dynamic_conv` is the one dispatch point: every caller goes through it, so a fused
CUDA kernel can be added later by extending :func:`_select_impl` without touching the DC
layer. Today every device uses :func:`dynamic_conv_torch`.
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable

__all__ = ["dynamic_conv", "dynamic_conv_torch"]


def _check(value: torch.Tensor, kernels: torch.Tensor, padding_mask: torch.Tensor | None) -> None:
    if value.dim() != 3 or kernels.dim() != 4:
        raise ValueError(f"expected value (B, L, H) and kernels (B, L, heads, K), got {tuple(value.shape)} and {tuple(kernels.shape)}")
    b, l, h = value.shape
    if kernels.shape[:2] != (b, l):
        raise ValueError(f"kernels {tuple(kernels.shape)} do not match value {tuple(value.shape)} in (B, L)")
    if h % kernels.shape[2]:
        raise ValueError(f"hidden size {h} is not divisible by {kernels.shape[2]} conv heads")
    if padding_mask is not None and padding_mask.shape != (b, l):
        raise ValueError(f"padding_mask {tuple(padding_mask.shape)} does not match (B, L) = {(b, l)}")


class _ShiftedDynamicConv(torch.autograd.Function):
    """Shifted multiply-add over the K taps with a hand-written backward.

    forward:  out[:, t] = sum_k padded[:, t + k] * kernels[:, t, :, k]
    backward: grad_padded[:, t + k] += g[:, t] * kernels[:, t, :, k]   (one buffer)
              grad_kernels[:, t, :, k] = sum_d g[:, t] * padded[:, t + k]
    Plain autograd of the same loop would allocate and zero-fill a full-size gradient buffer
    per tap (slice backward), which dominated the CPU time.
    """

    @staticmethod
    def forward(ctx, padded: torch.Tensor, kernels: torch.Tensor) -> torch.Tensor:
        # padded: (B, L + K - 1, heads, d); kernels: (B, L, heads, K) -> (B, L, heads, d)
        length, k = kernels.shape[1], kernels.shape[3]
        out = padded[:, 0:length] * kernels[..., 0:1]
        for tap in range(1, k):
            out.addcmul_(padded[:, tap:tap + length], kernels[..., tap:tap + 1])
        ctx.save_for_backward(padded, kernels)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out: torch.Tensor):
        padded, kernels = ctx.saved_tensors
        length, k = kernels.shape[1], kernels.shape[3]
        grad_out = grad_out.contiguous()
        grad_padded = grad_kernels = None
        if ctx.needs_input_grad[0]:
            grad_padded = torch.zeros_like(padded)
            for tap in range(k):
                grad_padded[:, tap:tap + length].addcmul_(grad_out, kernels[..., tap:tap + 1])
        if ctx.needs_input_grad[1]:
            grad_kernels = torch.stack(
                [(grad_out * padded[:, tap:tap + length]).sum(-1) for tap in range(k)], dim=-1
            )
        return grad_padded, grad_kernels


def dynamic_conv_torch(value: torch.Tensor, kernels: torch.Tensor,
                       padding_mask: torch.Tensor | None = None) -> torch.Tensor:
    """PyTorch implementation: a shifted multiply-add over the ``K`` kernel taps.

    Works on ``(B, L+K-1, heads, d)`` views of the zero-padded values, so memory is
    ``O(B L H)`` instead of the ``O(B L H K)`` windows of an ``unfold`` formulation (HF
    ConvBERT); the backward is hand-written (:class:`_ShiftedDynamicConv`). Same arguments
    and result as :func:`dynamic_conv`; first-order differentiable in ``value`` and
    ``kernels``.
    """
    _check(value, kernels, padding_mask)
    b, l, h = value.shape
    heads, k = kernels.shape[2], kernels.shape[3]
    if padding_mask is not None:
        value = value.masked_fill(~padding_mask.unsqueeze(-1), 0.0)
    left = (k - 1) // 2
    padded = F.pad(value, (0, 0, left, k - 1 - left)).view(b, l + k - 1, heads, h // heads)
    out = _ShiftedDynamicConv.apply(padded, kernels.to(value.dtype).contiguous())
    return out.reshape(b, l, h)


def _select_impl(value: torch.Tensor) -> Callable[..., torch.Tensor]:
    """Choose the implementation for ``value``'s device. A fused CUDA kernel (a later issue)
    is registered here, e.g. ``if value.is_cuda and _fused is not None: return _fused``."""
    return dynamic_conv_torch


def dynamic_conv(value: torch.Tensor, kernels: torch.Tensor,
                 padding_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Lightweight dynamic convolution of ``value`` with per-position kernels.

    Args:
        value: ``(B, L, H)`` sequence to convolve (``V`` of LV-BERT eq. 13).
        kernels: ``(B, L, heads, K)``, softmax-normalised over ``K`` (``D`` of eq. 15);
            ``H`` must be divisible by ``heads``; tap ``k`` reads position
            ``t + k - (K-1)//2``.
        padding_mask: ``(B, L)`` bool, True = real token, or None (no padding). Padding
            positions are zeroed before the convolution.

    Returns:
        ``(B, L, H)``, same dtype as ``value``.

    Raises:
        ValueError: inconsistent shapes.
    """
    return _select_impl(value)(value, kernels, padding_mask)
