"""ELC-BERT layer mixing (Charpentier & Samuel 2023, eq. 1-2).

Slot ``n`` (1-based) reads ``x_n = sum_{i in inputs[n]} alpha_{i,n} h_i`` where ``h_0`` is
the embedding output, ``h_i`` the output of slot ``i``, and
``alpha_{.,n} = softmax(alpha_hat_{.,n})`` over the allowed inputs only. The logits
``alpha_hat`` are one ``(num_slots, num_slots)`` parameter: row ``n-1`` = slot ``n``, column
``i`` = input ``i`` (only ``i < n`` is ever used).

Per-op logits (supernet only, ``model.mixing_per_op``): the parameter is
``(num_ops, num_slots, num_slots)``, one such matrix per candidate op; slot ``n`` reads the
row ``n-1`` of the matrix of the op it runs (``logits[ops.index(op), n-1]``), so every
candidate op of a slot learns its own α̂ over that slot's inputs. A standalone model runs one
op per slot and needs only the ``(N, N)`` matrix of those rows (``Supernet.extract``).

Variants (ELC-BERT section 3/ablations), chosen by :class:`~lvsearch.model.ModelDims`:

- ``init="biased"`` (default): logit 1 on the previous output ``n-1``, 0 elsewhere.
- ``init="zero"``: all logits 0 (uniform mixing).
- ``normalized=True``: each ``h_i`` is layer-normalised (no affine) before mixing.
- weighted output (:class:`OutputMixing`): the MLM head reads a learned softmax mixture of
  ``h_0 .. h_N``.

Slots with a single input skip the mixing arithmetic entirely (``x_n = h_i``), so
``inputs[n] = {n-1}`` everywhere is bit-for-bit the sequential stack.
"""

from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from lvsearch.arch import Arch
from lvsearch.ops.base import LN_EPS

MIXING_INITS = ("biased", "zero")


def _init_logits(num_slots: int, init: str) -> torch.Tensor:
    if init not in MIXING_INITS:
        raise ValueError(f"unknown mixing init {init!r}; use one of {MIXING_INITS}")
    logits = torch.zeros(num_slots, num_slots)
    if init == "biased":
        for n in range(1, num_slots + 1):
            logits[n - 1, n - 1] = 1.0
    return logits


class LayerMixing(nn.Module):
    """The α̂ logits and the convex combination of earlier outputs (ELC-BERT, Charpentier &
    Samuel 2023, eq. 1-2).

    Args:
        num_slots: N; the parameter ``logits`` has shape ``(N, N)``, or
            ``(len(ops), N, N)`` with ``ops``.
        init: ``"biased"`` or ``"zero"`` (the same init for every op's matrix).
        normalized: layer-normalise (no affine) each input before mixing.
        ops: per-op logits (supernet ``model.mixing_per_op``): the candidate ops, in the
            order of the first axis of ``logits``; None (default) = one matrix shared by
            every op.
    """

    def __init__(self, num_slots: int, init: str = "biased", normalized: bool = False,
                 ops: Sequence[str] | None = None):
        super().__init__()
        self.num_slots = num_slots
        self.normalized = normalized
        self.ops = tuple(ops) if ops is not None else None
        logits = _init_logits(num_slots, init)
        if self.ops is not None:
            if not self.ops or len(set(self.ops)) != len(self.ops):
                raise ValueError(f"per-op mixing needs distinct ops, got {self.ops}")
            logits = logits.unsqueeze(0).repeat(len(self.ops), 1, 1).contiguous()
        self.logits = nn.Parameter(logits)

    @property
    def per_op(self) -> bool:
        """True when every op has its own ``(N, N)`` logits (``logits`` is 3-D)."""
        return self.ops is not None

    def row(self, n: int, op: str | None = None) -> torch.Tensor:
        """α̂ row of slot ``n`` (1-based) -> ``(N,)``: ``logits[n-1]``, or with per-op logits
        ``logits[ops.index(op), n-1]`` (``op`` is then required)."""
        if self.ops is None:
            return self.logits[n - 1]
        if op not in self.ops:
            raise ValueError(f"per-op mixing of ops {self.ops} needs the op of slot {n}, got {op!r}")
        return self.logits[self.ops.index(op), n - 1]

    def weights(self, n: int, inputs: Sequence[int], op: str | None = None) -> torch.Tensor:
        """α_{·,n}: softmax of slot ``n``'s row (of op ``op`` with per-op logits) over
        ``inputs`` -> ``(len(inputs),)``."""
        return torch.softmax(self.row(n, op)[list(inputs)], dim=0)

    def forward(self, n: int, inputs: Sequence[int], states: Sequence[torch.Tensor],
                op: str | None = None) -> torch.Tensor:
        """Input of slot ``n`` running ``op`` (used only with per-op logits): ``states[i]`` are
        ``(B, L, H)`` outputs ``h_0..h_{n-1}`` -> ``(B, L, H)``."""
        if len(inputs) == 1:
            return states[inputs[0]]
        w = self.weights(n, inputs, op)
        x = None
        for j, i in enumerate(inputs):
            h = states[i]
            if self.normalized:
                h = F.layer_norm(h, h.shape[-1:], eps=LN_EPS)
            term = w[j].to(h.dtype) * h
            x = term if x is None else x + term
        return x


def mix_inputs(mixing: LayerMixing | None, n: int, inputs: Sequence[int],
               states: Sequence[torch.Tensor], op: str | None = None) -> torch.Tensor:
    """Slot ``n``'s input ``(B, L, H)``; a single input is passed through untouched (no mixing
    needed). ``op``: the op slot ``n`` runs (selects its α̂ row with per-op logits)."""
    if len(inputs) == 1:
        return states[inputs[0]]
    if mixing is None:
        raise ValueError(f"slot {n} mixes {len(inputs)} inputs but the model has no mixing weights")
    return mixing(n, inputs, states, op)


def alpha_matrix(arch: Arch, mixing: LayerMixing | None) -> torch.Tensor:
    """α for every slot of ``arch`` as a ``(num_slots, num_slots)`` float tensor (detached, CPU).

    Row ``n-1`` = slot ``n``, column ``i`` = input ``i`` (0 = embeddings); entries outside
    ``inputs[n]`` are 0 and each row sums to 1. Single-input slots have weight 1. With per-op
    logits, slot ``n``'s row comes from the matrix of ``arch.ops[n-1]``.
    """
    n_slots = arch.num_slots
    out = torch.zeros(n_slots, n_slots)
    for n, inputs in enumerate(arch.inputs, start=1):
        if len(inputs) == 1:
            out[n - 1, inputs[0]] = 1.0
        else:
            if mixing is None:
                raise ValueError("arch mixes several inputs but the model has no mixing weights")
            out[n - 1, list(inputs)] = mixing.weights(n, inputs, arch.ops[n - 1]).detach().float().cpu()
    return out


class OutputMixing(nn.Module):
    """ELC-BERT "weighted output": the MLM head reads ``sum_i softmax(w)_i h_i`` over the
    embedding output and every slot output ``h_0..h_N``. ``logits``: ``(N+1,)``; biased
    init puts logit 1 on ``h_N``."""

    def __init__(self, num_slots: int, init: str = "biased"):
        super().__init__()
        if init not in MIXING_INITS:
            raise ValueError(f"unknown mixing init {init!r}; use one of {MIXING_INITS}")
        logits = torch.zeros(num_slots + 1)
        if init == "biased":
            logits[-1] = 1.0
        self.logits = nn.Parameter(logits)

    def forward(self, states: Sequence[torch.Tensor]) -> torch.Tensor:
        """``states``: ``h_0..h_N``, each ``(B, L, H)`` -> ``(B, L, H)``."""
        if len(states) != self.logits.numel():
            raise ValueError(f"expected {self.logits.numel()} states, got {len(states)}")
        w = torch.softmax(self.logits, dim=0)
        x = None
        for j, h in enumerate(states):
            term = w[j].to(h.dtype) * h
            x = term if x is None else x + term
        return x
