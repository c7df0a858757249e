"""SA: multi-head scaled dot-product self-attention (Vaswani et al. 2017; LV-BERT eq. 10-12),
optionally with a T5-style learned relative-position bias (Raffel et al. 2020 §2.1)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .base import Elastic, OpSpec, SlotLayer


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
    positions are masked out. Parameters: ``qkv`` (H -> 3 A), ``out`` (A -> H), ``norm``, and
    with ``relative_buckets`` > 0 ``relative_bias`` (``(buckets, heads)``): logit ``(i, j)``
    of head ``h`` gets ``relative_bias[bucket(j - i), h]`` (T5-style learned relative
    positions, :func:`relative_buckets`), initialised with a locality prior
    (``relative_init="local"``, :func:`local_bias_init`) or to zero (``"zero"``, T5). Attention-probability dropout uses the
    layer's dropout rate. ``A = heads * head_dim`` (``head_dim`` defaults to ``hidden / heads``,
    so A = H); ``qkv``'s rows are ``(q|k|v, head, head_dim)``.

    Elastic heads (a variant, :data:`HEADS`): ``transform(x, mask, heads=h)`` runs the first
    ``h`` heads only, on slices of ``qkv``, ``out`` and ``relative_bias`` (no copies).

    Raises:
        ValueError: ``hidden`` not divisible by ``heads`` (without ``head_dim``).
    """

    def __init__(self, hidden: int, heads: int, dropout: float = 0.1, pre_ln: bool = False,
                 relative_buckets: int = 0, relative_max_distance: int = 128, relative_init: str = "local",
                 head_dim: int | None = None):
        super().__init__(hidden, dropout, pre_ln)
        if head_dim is None:
            if hidden % heads:
                raise ValueError(f"hidden {hidden} not divisible by heads {heads}")
            head_dim = hidden // heads
        self.heads = heads
        self.head_dim = head_dim
        self.attn_dropout = dropout
        self.qkv = nn.Linear(hidden, 3 * heads * head_dim)
        self.out = nn.Linear(heads * head_dim, hidden)
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

    def _heads(self, heads: int | None) -> int:
        h = self.heads if heads is None else heads
        if not 1 <= h <= self.heads:
            raise ValueError(f"this SA layer has {self.heads} heads; cannot run {h}")
        return h

    def transform(self, x: torch.Tensor, mask: torch.Tensor | None, heads: int | None = None) -> torch.Tensor:
        b, l, _ = x.shape
        nh, d = self._heads(heads), self.head_dim
        if nh == self.heads:
            q, k, v = self.qkv(x).view(b, l, 3, nh, d).permute(2, 0, 3, 1, 4)
        else:  # the first nh heads: a contiguous row slice of each of q, k, v
            w = self.qkv.weight.view(3, self.heads * d, -1)
            bias = self.qkv.bias.view(3, self.heads * d)
            q, k, v = (F.linear(x, w[t, : nh * d], bias[t, : nh * d]).view(b, l, nh, d).transpose(1, 2)
                       for t in range(3))
        attn_mask = None
        if mask is not None:
            # A sequence with no real token would give a softmax over nothing (NaN); let such
            # rows attend everywhere instead (their outputs are padding anyway).
            attn_mask = (mask | ~mask.any(dim=1, keepdim=True))[:, None, None, :]
        if self.relative_bias is not None:
            bias = self.position_bias(l, x.device)[:nh].to(q.dtype)[None]  # (1, heads, L, L)
            if attn_mask is not None:
                bias = bias.masked_fill(~attn_mask, float("-inf"))
            attn_mask = bias
        y = F.scaled_dot_product_attention(
            q, k, v, attn_mask=attn_mask, dropout_p=self.attn_dropout if self.training else 0.0
        )
        y = y.transpose(1, 2).reshape(b, l, nh * d)
        if nh == self.heads:
            return self.out(y)
        return F.linear(y, self.out.weight[:, : nh * d], self.out.bias)


#: The most attention heads a variant may ask for.
MAX_HEADS = 256


def _check_heads(value) -> str | None:
    return None if 1 <= value <= MAX_HEADS else f"heads must be in 1..{MAX_HEADS}, got {value}"


def _heads_size(dims, value) -> int:
    return int(value)


#: SA's elastic dimension: the number of heads, each ``model.hidden / model.heads`` wide (the
#: head width stays that of the model's head count; a variant with h heads uses the first h).
HEADS = Elastic(name="heads", letter="h", unit="attention heads of width hidden / model.heads",
                default=lambda dims: dims.heads, check=_check_heads, size=_heads_size)


def build(dims, heads: int | None = None) -> SelfAttention:
    """The SA layer of ``dims`` with ``heads`` heads (default ``dims.heads``) of width
    ``dims.hidden // dims.heads``; ``dims.position == "relative"`` gives it a relative-position bias."""
    buckets = dims.relative_buckets if dims.position == "relative" else 0
    return SelfAttention(dims.hidden, dims.heads if heads is None else heads, dims.dropout, dims.pre_ln, buckets,
                         dims.relative_max_distance, dims.relative_init, head_dim=dims.hidden // dims.heads)


def path_weights(layer: SelfAttention, heads: int | None = None) -> dict[str, torch.Tensor]:
    """The weights of the ``heads``-head variant of a (supernet) SA layer: the first heads' rows
    of ``qkv`` (per q, k, v), columns of ``out`` and columns of ``relative_bias``."""
    nh, d = layer._heads(heads), layer.head_dim
    sd = layer.state_dict()
    if nh == layer.heads:
        return sd
    hidden = layer.qkv.weight.shape[1]
    sd["qkv.weight"] = layer.qkv.weight.detach().view(3, layer.heads * d, hidden)[:, : nh * d].reshape(-1, hidden)
    sd["qkv.bias"] = layer.qkv.bias.detach().view(3, layer.heads * d)[:, : nh * d].reshape(-1)
    sd["out.weight"] = layer.out.weight.detach()[:, : nh * d]
    if layer.relative_bias is not None:
        sd["relative_bias"] = layer.relative_bias.detach()[:, :nh]
    return sd


def flops(dims, seq_len: int, heads: int | None = None) -> float:
    """Forward FLOPs per token: ``8 H A`` (QKV + output projections) ``+ 4 L A`` (scores and
    weighted values), L = ``seq_len``, A = ``heads · H / model.heads`` (= H by default)."""
    a = (dims.heads if heads is None else heads) * (dims.hidden // dims.heads)
    return float(8 * dims.hidden * a + 4 * seq_len * a)


SPEC = OpSpec(code="SA", letter="s", title="self-attention", colour="#4C72B0", order=0, layer=SelfAttention,
              build=build, flops=flops, residual="out",
              paper="Vaswani et al. 2017; LV-BERT (Yu et al. 2021) eq. 10-12",
              path_weights=path_weights, elastic=(HEADS,))
