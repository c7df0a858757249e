"""The three slot operations: self-attention (SA), feed-forward (FF), dynamic convolution (DC).

Every layer maps ``x: (batch, seq, hidden)`` to the same shape, takes a boolean padding mask
``(batch, seq)`` with True = real token (or None = no padding), and carries its own residual
connection, LayerNorm and dropout (LV-BERT appendix A):

- post-LN (default): ``y = LayerNorm(x + Dropout(f(x)))``
- pre-LN (``pre_ln=True``): ``y = x + Dropout(f(LayerNorm(x)))``; the encoder then applies
  a final LayerNorm after the last slot.
"""

from __future__ import annotations

import math

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


def relative_buckets(distance: torch.Tensor, num_buckets: int, max_distance: int) -> torch.Tensor:
    """Bidirectional relative-position buckets (T5, Raffel et al. 2020 §2.1).

    Args:
        distance: integer tensor ``key_position - query_position`` (any shape).
        num_buckets: even, ≥ 4; half of the buckets for each direction.
        max_distance: distances ``|d| ≥ max_distance`` share the outermost bucket.

    Returns:
        Long tensor of the same shape with values in ``[0, num_buckets)``: within each half,
        ``|d| < num_buckets / 4`` map to their own bucket, larger ones log-spaced up to
        ``max_distance``. Depends only on ``distance``, so a bias indexed by it is invariant
        to shifting all positions.
    """
    half = num_buckets // 2
    base = torch.where(distance > 0, half, 0)
    d = distance.abs()
    exact = half // 2
    far = exact + (
        torch.log(d.clamp(min=1).float() / exact) / math.log(max(max_distance / exact, 1.0 + 1e-6)) * (half - exact)
    ).long()
    far = far.clamp(max=half - 1)
    return base + torch.where(d < exact, d, far)


def local_bias_init(num_buckets: int, max_distance: int, heads: int) -> torch.Tensor:
    """``(num_buckets, heads)`` initial relative bias with a locality prior: head ``h`` of ``n``
    starts at ``-slope_h · |d|`` with ``slope_h = 2^(-8h/n)``, ``h = 0 … n−1`` (ALiBi's
    geometric slopes, Press et al. 2022, shifted so the first head has slope 1), where ``|d|``
    is the smallest distance in the bucket. Attention then starts local (as a convolution
    does) instead of uniform, and the bias stays learnable."""
    d = torch.arange(-max_distance, max_distance + 1)
    buckets = relative_buckets(d, num_buckets, max_distance)
    dist = torch.full((num_buckets,), float(max_distance))
    dist.scatter_reduce_(0, buckets, d.abs().float(), reduce="amin")
    slopes = 2.0 ** (-8.0 * torch.arange(heads, dtype=torch.float32) / heads)
    return -dist[:, None] * slopes[None, :]


class SelfAttention(SlotLayer):
    """SA: multi-head scaled dot-product self-attention (Vaswani et al. 2017; LV-BERT eq. 10-12).

    Computed with ``torch.nn.functional.scaled_dot_product_attention``; keys at padding
    positions are masked out. Parameters: ``qkv`` (H -> 3H), ``out`` (H -> H), ``norm``, and
    with ``relative_buckets`` > 0 ``relative_bias`` (``(buckets, heads)``): logit ``(i, j)``
    of head ``h`` gets ``relative_bias[bucket(j - i), h]`` (T5-style learned relative
    positions, :func:`relative_buckets`), initialised with a locality prior
    (``relative_init="local"``, :func:`local_bias_init`) or to zero (``"zero"``, T5). Attention-probability dropout uses the
    layer's dropout rate.
    """

    def __init__(self, hidden: int, heads: int, dropout: float = 0.1, pre_ln: bool = False,
                 relative_buckets: int = 0, relative_max_distance: int = 128, relative_init: str = "local"):
        super().__init__(hidden, dropout, pre_ln)
        if hidden % heads:
            raise ValueError(f"hidden {hidden} not divisible by heads {heads}")
        self.heads = heads
        self.attn_dropout = dropout
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.out = nn.Linear(hidden, hidden)
        self.num_buckets, self.max_distance = relative_buckets, relative_max_distance
        self.relative_bias = nn.Parameter(torch.zeros(relative_buckets, heads)) if relative_buckets else None
        if self.relative_bias is not None and relative_init == "local":
            with torch.no_grad():
                self.relative_bias.copy_(local_bias_init(relative_buckets, relative_max_distance, heads))

    def position_bias(self, length: int, device: torch.device, offset: int = 0) -> torch.Tensor:
        """``(heads, L, L)`` additive logits bias for positions ``offset … offset + L - 1``."""
        pos = torch.arange(offset, offset + length, device=device)
        buckets = relative_buckets(pos[None, :] - pos[:, None], self.num_buckets, self.max_distance)
        return self.relative_bias[buckets].permute(2, 0, 1)

    def transform(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        b, l, h = x.shape
        q, k, v = self.qkv(x).view(b, l, 3, self.heads, h // self.heads).permute(2, 0, 3, 1, 4)
        attn_mask = None
        if mask is not None:
            # A sequence with no real token would give a softmax over nothing (NaN); let such
            # rows attend everywhere instead (their outputs are padding anyway).
            attn_mask = (mask | ~mask.any(dim=1, keepdim=True))[:, None, None, :]
        if self.relative_bias is not None:
            bias = self.position_bias(l, x.device).to(q.dtype)[None]  # (1, heads, L, L)
            if attn_mask is not None:
                bias = bias.masked_fill(~attn_mask, float("-inf"))
            attn_mask = bias
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
    """Build the layer for op code ``op`` (``"SA"``, ``"FF"``, ``"DC"``) from a ModelDims
    (``dims.position == "relative"`` gives SA layers a relative-position bias)."""
    if op == "SA":
        buckets = dims.relative_buckets if dims.position == "relative" else 0
        return SelfAttention(dims.hidden, dims.heads, dims.dropout, dims.pre_ln, buckets, dims.relative_max_distance,
                             dims.relative_init)
    if op == "FF":
        return FeedForward(dims.hidden, dims.ff_inner, dims.dropout, dims.pre_ln, dims.ff_activation)
    if op == "DC":
        return DynamicConv(dims.hidden, dims.heads, dims.conv_kernel, dims.dropout, dims.pre_ln)
    raise ValueError(f"unknown op {op!r}")
