"""ELC-BERT layer mixing (Charpentier & Samuel 2023, eq. 1-2).

Slot ``n`` (1-based) reads ``x_n = sum_{i in inputs[n]} alpha_{i,n} h_i`` where ``h_0`` is
the embedding output, ``h_i`` the output of slot ``i``, and
``alpha_{.,n} = softmax(alpha_hat_{.,n})`` over the allowed inputs only. The logits
``alpha_hat`` are one ``(num_slots, num_slots)`` parameter: row ``n-1`` = slot ``n``, column
``i`` = input ``i`` (only ``i < n`` is ever used).

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
from lvsearch.model.layers import LN_EPS

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
    """The α̂ logits and the convex combination of earlier outputs.

    Args:
        num_slots: N; the parameter ``logits`` has shape ``(N, N)``.
        init: ``"biased"`` or ``"zero"``.
        normalized: layer-normalise (no affine) each input before mixing.
    """

    def __init__(self, num_slots: int, init: str = "biased", normalized: bool = False):
        super().__init__()
        self.num_slots = num_slots
        self.normalized = normalized
        self.logits = nn.Parameter(_init_logits(num_slots, init))

    def weights(self, n: int, inputs: Sequence[int]) -> torch.Tensor:
        """α_{·,n}: softmax of row ``n-1`` over ``inputs`` -> ``(len(inputs),)``."""
        return torch.softmax(self.logits[n - 1, list(inputs)], dim=0)

    def forward(self, n: int, inputs: Sequence[int], states: Sequence[torch.Tensor]) -> torch.Tensor:
        """Input of slot ``n``: ``states[i]`` are ``(B, L, H)`` outputs ``h_0..h_{n-1}``."""
        if len(inputs) == 1:
            return states[inputs[0]]
        w = self.weights(n, inputs)
        x = None
        for j, i in enumerate(inputs):
            h = states[i]
            if self.normalized:
                h = F.layer_norm(h, h.shape[-1:], eps=LN_EPS)
            term = w[j].to(h.dtype) * h
            x = term if x is None else x + term
        return x


def mix_inputs(mixing: LayerMixing | None, n: int, inputs: Sequence[int],
               states: Sequence[torch.Tensor]) -> torch.Tensor:
    """Slot ``n``'s input; a single input is passed through untouched (no mixing needed)."""
    if len(inputs) == 1:
        return states[inputs[0]]
    if mixing is None:
        raise ValueError(f"slot {n} mixes {len(inputs)} inputs but the model has no mixing weights")
    return mixing(n, inputs, states)


def alpha_matrix(arch: Arch, mixing: LayerMixing | None) -> torch.Tensor:
    """α for every slot of ``arch`` as a ``(num_slots, num_slots)`` float tensor (detached, CPU).

    Row ``n-1`` = slot ``n``, column ``i`` = input ``i`` (0 = embeddings); entries outside
    ``inputs[n]`` are 0 and each row sums to 1. Single-input slots have weight 1.
    """
    n_slots = arch.num_slots
    out = torch.zeros(n_slots, n_slots)
    for n, inputs in enumerate(arch.inputs, start=1):
        if len(inputs) == 1:
            out[n - 1, inputs[0]] = 1.0
        else:
            if mixing is None:
                raise ValueError("arch mixes several inputs but the model has no mixing weights")
            out[n - 1, list(inputs)] = mixing.weights(n, inputs).detach().float().cpu()
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
