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

from .base import Elastic, OpSpec, SlotLayer


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

    Elastic kernel (a variant, :data:`KERNEL`; once-for-all's elastic kernel, Cai et al. 2020
    §3.2): built with ``smaller_kernels``, the layer holds one ``k x k`` matrix
    ``kernel_transforms.{k}`` per smaller size (shared across channels, initialised to the
    identity), and ``transform(x, mask, kernel=k)`` convolves with the depthwise kernel
    :meth:`depthwise_weight` ``(k)`` (the centre crop of the next larger size's kernel times that
    matrix) and takes the centre ``k`` taps of the dynamic kernel generator ``kernel``.

    Raises:
        ValueError: ``hidden`` not divisible by ``heads``; an even kernel size; a smaller kernel
            that is even or not smaller.
    """

    def __init__(self, hidden: int, heads: int, kernel_size: int = 9, dropout: float = 0.1,
                 pre_ln: bool = False, smaller_kernels: tuple[int, ...] = ()):
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
        smaller = sorted(set(smaller_kernels), reverse=True)
        for k in smaller:
            if k % 2 == 0 or not 1 <= k < kernel_size:
                raise ValueError(f"a smaller conv kernel must be odd and below {kernel_size}, got {k}")
        self.kernel_transforms = (nn.ParameterDict({str(k): nn.Parameter(torch.eye(k)) for k in smaller})
                                  if smaller else None)

    def _kernel(self, kernel: int | None) -> int:
        k = self.kernel_size if kernel is None else kernel
        if k != self.kernel_size and (self.kernel_transforms is None or str(k) not in self.kernel_transforms):
            raise ValueError(f"this DC layer runs kernel {self.kernel_size}"
                             + (f" and {', '.join(self.kernel_transforms)}" if self.kernel_transforms else "")
                             + f"; cannot run {k}")
        return k

    def depthwise_weight(self, kernel: int) -> torch.Tensor:
        """``(H, 1, kernel)`` depthwise kernel of a variant: the full kernel, or the centre crop
        of the next larger size's kernel (recursively) times ``kernel_transforms.{kernel}``
        (``F.linear``: each channel's taps mapped by the ``k x k`` matrix)."""
        k = self._kernel(kernel)
        w, size = self.depthwise.weight, self.kernel_size
        if k == size:
            return w
        for s in sorted((int(n) for n in self.kernel_transforms), reverse=True):
            if s < k:
                break
            start = (size - s) // 2
            w, size = F.linear(w[..., start:start + s], self.kernel_transforms[str(s)]), s
        return w

    def generator(self, kernel: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The dynamic kernel generator of a variant, ``(weight (heads, k, H), bias (heads, k))``:
        views of the centre ``k`` taps of ``kernel``."""
        k, big = self._kernel(kernel), self.kernel_size
        start = (big - k) // 2
        hidden = self.kernel.weight.shape[1]
        return (self.kernel.weight.view(self.heads, big, hidden)[:, start:start + k],
                self.kernel.bias.view(self.heads, big)[:, start:start + k])

    def kernel_logits(self, v: torch.Tensor, kernel: int | None = None) -> torch.Tensor:
        """Kernel logits of eq. 14-15 before the softmax, with ``W_dyn W_pw`` folded.

        Args:
            v: ``(B, L, H)`` GLU value, zeroed at padding.
            kernel: the variant's kernel size K (default the layer's).

        Returns:
            ``(B, L, heads * K)``: ``Depthwise(v) (W_dyn W_pw)^T + (W_dyn b_pw + b_dyn)``.
        """
        k = self._kernel(kernel)
        if k == self.kernel_size:
            dw = self.depthwise(v.transpose(1, 2)).transpose(1, 2)
            weight = self.kernel.weight @ self.pointwise.weight
            bias = torch.addmv(self.kernel.bias, self.kernel.weight, self.pointwise.bias)
            return F.linear(dw, weight, bias)
        dw = F.conv1d(v.transpose(1, 2), self.depthwise_weight(k), padding=k // 2,
                      groups=v.shape[-1]).transpose(1, 2)
        gw, gb = self.generator(k)
        weight = torch.matmul(gw, self.pointwise.weight).reshape(self.heads * k, -1)
        bias = (torch.matmul(gw, self.pointwise.bias) + gb).reshape(-1)
        return F.linear(dw, weight, bias)

    def transform(self, x: torch.Tensor, mask: torch.Tensor | None, kernel: int | None = None) -> torch.Tensor:
        b, l, _ = x.shape
        k = self._kernel(kernel)
        v = F.glu(self.value(x), dim=-1)
        if mask is not None:
            v = v.masked_fill(~mask.unsqueeze(-1), 0.0)
        logits = self.kernel_logits(v, k).view(b, l, self.heads, k)
        return self.out(dynamic_conv_softmax(v, logits, mask))


#: The widest DC kernel a variant may ask for (taps; LV-BERT uses 9).
MAX_KERNEL = 1023


def _check_kernel(value) -> str | None:
    if value < 1 or value % 2 == 0:
        return f"kernel must be an odd positive integer (the convolution is centred), got {value}"
    if value > MAX_KERNEL:
        return f"kernel must be at most {MAX_KERNEL} taps, got {value}"
    return None


#: DC's elastic dimension: the kernel width (odd); a smaller kernel is a transformed centre crop.
KERNEL = Elastic(name="kernel", letter="k", unit="taps (odd)", default=lambda dims: dims.conv_kernel,
                 check=_check_kernel, size=lambda dims, value: int(value))


def build(dims, kernel: int | None = None) -> DynamicConv:
    """The DC layer of ``dims`` (``hidden``, ``heads`` = conv heads, ``conv_kernel``, ``dropout``, ``pre_ln``)
    with kernel width ``kernel`` (default ``dims.conv_kernel``)."""
    return DynamicConv(dims.hidden, dims.heads, dims.conv_kernel if kernel is None else kernel, dims.dropout,
                       dims.pre_ln)


def build_shared(dims, choices: dict) -> DynamicConv:
    """The supernet's DC layer running every kernel in ``choices["kernel"]``: the largest kernel,
    plus a kernel transform per smaller one."""
    sizes = sorted(choices["kernel"])
    return DynamicConv(dims.hidden, dims.heads, sizes[-1], dims.dropout, dims.pre_ln, tuple(sizes[:-1]))


def path_weights(layer: DynamicConv, kernel: int | None = None) -> dict[str, torch.Tensor]:
    """The weights of the ``kernel``-tap variant of a (supernet) DC layer as a standalone layer
    built at that kernel holds them: the transformed depthwise kernel
    (:meth:`DynamicConv.depthwise_weight`) and the centre taps of the generator; no transforms."""
    k = layer._kernel(kernel)
    sd = {name: t for name, t in layer.state_dict().items() if not name.startswith("kernel_transforms.")}
    if k == layer.kernel_size:
        return sd
    with torch.no_grad():
        gw, gb = layer.generator(k)
        sd["depthwise.weight"] = layer.depthwise_weight(k).detach().clone()
        sd["kernel.weight"] = gw.reshape(layer.heads * k, -1)
        sd["kernel.bias"] = gb.reshape(-1)
    return sd


def flops(dims, seq_len: int, kernel: int | None = None) -> float:
    """Forward FLOPs per token: ``8 H^2`` (GLU input 4H^2, pointwise 2H^2, output 2H^2)
    ``+ 2 H h K`` (kernel generator) ``+ 4 K H`` (depthwise + dynamic convolution), with
    h = ``heads``, K = ``kernel`` (default ``conv_kernel``)."""
    H, h, K = dims.hidden, dims.heads, dims.conv_kernel if kernel is None else kernel
    return float(8 * H * H + 2 * H * h * K + 4 * K * H)


SPEC = OpSpec(code="DC", letter="c", title="dynamic convolution", colour="#55A868", order=2, layer=DynamicConv,
              build=build, flops=flops, residual="out",
              paper="LV-BERT (Yu et al. 2021) appendix A eq. 13-17; ConvBERT (Jiang et al. 2020)",
              path_weights=path_weights, elastic=(KERNEL,), build_shared=build_shared)
