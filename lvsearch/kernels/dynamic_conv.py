"""Lightweight dynamic convolution (Wu et al. 2019; LV-BERT appendix A, eq. 16).

For every position ``t`` and conv head ``h`` a softmax-normalised kernel ``D[t, h, :]`` of
``K`` taps is applied to the head's channels of the value sequence, shared across the
head's ``H / heads`` channels ("lightweight"):

    C[b, t, h*d + j] = sum_k D[b, t, h, k] * V[b, t + k - (K-1)//2, h*d + j]

with zero padding outside ``0..L-1`` and ``d = H / heads``. Positions where
``padding_mask`` is False contribute zero (their values are zeroed first), so padding never
leaks into real tokens.

:func:`dynamic_conv` (softmax-normalised kernels) and :func:`dynamic_conv_softmax` (raw
kernel logits, softmax over the taps fused into the CUDA kernel) are the dispatch points;
:func:`_select_impl` picks the implementation per call:

* ``torch``: :func:`dynamic_conv_torch`, the reference, used on every device;
* ``cuda``: :func:`dynamic_conv_cuda`, the fused CUDA extension (``kernels/csrc/``, built
  on first use by :mod:`lvsearch.kernels._extension`), for CUDA tensors.

``$LVSEARCH_DC_IMPL`` = ``auto`` (default: the extension for CUDA tensors when it builds and
the kernel size is instantiated, else torch), ``torch`` (always the reference) or ``cuda``
(the extension or an :class:`~lvsearch.errors.LvsearchError`). Each distinct choice (setting,
device type, path, reason) is logged once on the ``lvsearch.kernels`` logger; falling back to torch for
CUDA tensors is also printed as a warning.
"""

from __future__ import annotations

import logging
import os

import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable

from lvsearch.errors import LvsearchError
from lvsearch.kernels._extension import SUPPORTED_KERNEL_SIZES, load_extension

__all__ = ["dynamic_conv", "dynamic_conv_softmax", "dynamic_conv_torch", "dynamic_conv_cuda",
           "IMPL_ENV", "SUPPORTED_KERNEL_SIZES"]

#: Environment variable forcing the implementation: ``auto``, ``torch`` or ``cuda``.
IMPL_ENV = "LVSEARCH_DC_IMPL"
_IMPLS = ("auto", "torch", "cuda")
log = logging.getLogger("lvsearch.kernels")
_logged: set[tuple] = set()


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


class _FusedDynamicConv(torch.autograd.Function):
    """The CUDA extension's forward and backward kernels as one autograd op.

    forward:  ``out, p = ext.forward(value, weights, mask, softmax)``; ``p`` (fp32, fp64 for
              double inputs) is kept for the backward instead of being recomputed.
    backward: ``ext.backward_value`` (gather over the taps, padding rows zeroed) and
              ``ext.backward_weights`` (per-tap dot products over each head's channels, then
              the softmax backward when ``softmax``). No atomics: deterministic.
    """

    @staticmethod
    def forward(ctx, value, weights, padding_mask, softmax: bool, save: bool = True):
        # save: keep p for a backward. The caller decides (grad mode is off inside forward, and
        # ctx.needs_input_grad only reflects requires_grad, so inference would keep p too).
        ext = load_extension()
        out, probs = ext.forward(value, weights, padding_mask, softmax, save)
        ctx.softmax = softmax
        ctx.save_for_backward(value, probs if save else None, padding_mask)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out: torch.Tensor):
        value, probs, padding_mask = ctx.saved_tensors
        ext = load_extension()
        grad_out = grad_out.to(value.dtype).contiguous()
        grad_value = grad_weights = None
        if ctx.needs_input_grad[0]:
            grad_value = ext.backward_value(grad_out, probs, padding_mask)
        if ctx.needs_input_grad[1]:
            grad_weights = ext.backward_weights(grad_out, value, probs, padding_mask, ctx.softmax)
        return grad_value, grad_weights, None, None, None


def dynamic_conv_cuda(value: torch.Tensor, weights: torch.Tensor,
                      padding_mask: torch.Tensor | None = None, *, softmax: bool = False) -> torch.Tensor:
    """Fused CUDA implementation (Wu et al. 2019; LV-BERT appendix A, eq. 15-16).

    One kernel computes, per position and conv head, the softmax over the ``K`` taps of
    ``weights`` (when ``softmax``; accumulated in fp32, fp64 for double) and the windowed
    weighted sum of the padding-masked ``value``, reading ``(B, L, H)`` directly (no
    transposes, no unfolded windows); two gather kernels form the backward (deterministic,
    no atomics). The depthwise convolution and the kernel projection are *not* in these
    kernels: the DC layer runs them as cuDNN/cuBLAS ops (with ``W_dyn @ W_pw`` folded, see
    :class:`lvsearch.ops.dc.DynamicConv`).

    Args:
        value: ``(B, L, H)`` CUDA tensor, float32, float16, bfloat16 or float64.
        weights: ``(B, L, heads, K)``: kernel logits when ``softmax`` else normalised kernels;
            cast to ``value.dtype``. ``K`` in :data:`SUPPORTED_KERNEL_SIZES`.
        padding_mask: ``(B, L)`` bool, True = real token, or None.
        softmax: apply the softmax over ``K`` inside the kernel.

    Returns:
        ``(B, L, H)`` in ``value.dtype``; first-order differentiable in ``value`` and ``weights``.

    Raises:
        ValueError: inconsistent shapes.
        LvsearchError: ``K`` not instantiated, tensors not on CUDA, or the extension cannot be
            built here (CPU torch, no CUDA toolkit, compile error).
    """
    _check(value, weights, padding_mask)
    k = weights.shape[3]
    if k not in SUPPORTED_KERNEL_SIZES:
        raise LvsearchError(f"the fused dynamic-conv CUDA kernel has no kernel size {k} "
                            f"(instantiated: {', '.join(map(str, SUPPORTED_KERNEL_SIZES))})",
                            fix=f"use one of those sizes, or set {IMPL_ENV}=torch (or auto) for the PyTorch path")
    if not value.is_cuda:
        raise LvsearchError(f"the fused dynamic-conv CUDA kernel needs CUDA tensors, got {value.device}",
                            fix=f"move the model to a CUDA device, or set {IMPL_ENV}=auto or torch")
    if padding_mask is not None:
        padding_mask = padding_mask.to(device=value.device, dtype=torch.bool).contiguous()
    value = value.contiguous()
    weights = weights.to(value.dtype).contiguous()
    save = torch.is_grad_enabled() and (value.requires_grad or weights.requires_grad)
    return _FusedDynamicConv.apply(value, weights, padding_mask, softmax, save)


def requested_impl() -> str:
    """``$LVSEARCH_DC_IMPL`` (lower-cased), ``auto`` when unset or empty.

    Raises:
        LvsearchError: any other value.
    """
    mode = os.environ.get(IMPL_ENV, "").strip().lower() or "auto"
    if mode not in _IMPLS:
        raise LvsearchError(f"{IMPL_ENV}={os.environ.get(IMPL_ENV)!r} is not one of {', '.join(_IMPLS)}",
                            fix=f"set {IMPL_ENV} to auto, torch or cuda (or unset it)")
    return mode


def _log_once(key: tuple, message: str, warn: bool = False) -> None:
    if key in _logged:
        return
    _logged.add(key)
    log.info(message)
    if warn:
        from lvsearch.ui import warn as ui_warn

        ui_warn(message)


def _select_impl(value: torch.Tensor, kernel_size: int) -> str:
    """``"cuda"`` or ``"torch"`` for this call, from :func:`requested_impl`, the device of
    ``value`` and whether the extension builds and has ``kernel_size``.

    Raises:
        LvsearchError: ``LVSEARCH_DC_IMPL=cuda`` and the extension cannot serve this call
            (CPU tensors, unsupported kernel size, no CUDA build); a bad setting.
    """
    mode = requested_impl()
    device = value.device.type
    if mode == "torch":
        choice, why = "torch", f"{IMPL_ENV}=torch"
    elif mode == "cuda":
        if not value.is_cuda:
            raise LvsearchError(f"{IMPL_ENV}=cuda but the dynamic convolution runs on {value.device}",
                                fix=f"move the model to a CUDA device, or set {IMPL_ENV}=auto or torch")
        if kernel_size not in SUPPORTED_KERNEL_SIZES:
            raise LvsearchError(f"{IMPL_ENV}=cuda but the fused kernel has no kernel size {kernel_size} "
                                f"(instantiated: {', '.join(map(str, SUPPORTED_KERNEL_SIZES))})",
                                fix=f"use one of those sizes, or set {IMPL_ENV}=auto or torch")
        load_extension()
        choice, why = "cuda", f"{IMPL_ENV}=cuda"
    elif not value.is_cuda:
        choice, why = "torch", f"{device} tensors"
    elif kernel_size not in SUPPORTED_KERNEL_SIZES:
        choice, why = "torch", f"kernel size {kernel_size} is not instantiated in the CUDA kernel"
    else:
        try:
            load_extension()
            choice, why = "cuda", "CUDA tensors, extension built"
        except LvsearchError as e:
            _log_once(("fallback", device), f"fused dynamic-conv CUDA kernel unavailable, using the PyTorch path: {e}",
                      warn=True)
            return "torch"
    _log_once((mode, device, choice, why), f"dynamic_conv: {choice} implementation ({why})")
    return choice


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
        LvsearchError: ``LVSEARCH_DC_IMPL`` forces a path that cannot run here (see
            :func:`_select_impl`).
    """
    _check(value, kernels, padding_mask)
    if _select_impl(value, kernels.shape[3]) == "cuda":
        return dynamic_conv_cuda(value, kernels, padding_mask, softmax=False)
    return dynamic_conv_torch(value, kernels, padding_mask)


def dynamic_conv_softmax(value: torch.Tensor, logits: torch.Tensor,
                         padding_mask: torch.Tensor | None = None) -> torch.Tensor:
    """``dynamic_conv(value, softmax(logits, dim=-1), padding_mask)``, with the softmax over
    the taps fused into the CUDA kernel (LV-BERT appendix A, eq. 15-16).

    Args:
        value: ``(B, L, H)`` sequence to convolve.
        logits: ``(B, L, heads, K)`` raw kernel logits (``reshape(S W_dyn)`` of eq. 15).
        padding_mask: ``(B, L)`` bool, True = real token, or None.

    Returns:
        ``(B, L, H)``, same dtype as ``value``. On the torch path the softmax runs in the
        logits' dtype, as before; the CUDA kernel computes it in fp32 (fp64 for double).

    Raises:
        ValueError: inconsistent shapes.
        LvsearchError: ``LVSEARCH_DC_IMPL`` forces a path that cannot run here.
    """
    _check(value, logits, padding_mask)
    if _select_impl(value, logits.shape[3]) == "cuda":
        return dynamic_conv_cuda(value, logits, padding_mask, softmax=True)
    return dynamic_conv_torch(value, torch.softmax(logits, dim=-1), padding_mask)
