"""Token + position embeddings (BERT, Devlin et al. 2019; ELECTRA embedding projection)."""

from __future__ import annotations

import torch
from torch import nn

from lvsearch.errors import LvsearchError
from lvsearch.ops.base import LN_EPS


class Embeddings(nn.Module):
    """``input_ids (B, L)`` -> ``h_0 (B, L, H)``.

    ``word`` (V x E) + learned ``position`` (max_len x E), LayerNorm, dropout, then
    ``project`` (E -> H) when E != H (LV-BERT small: E = 128, H = 256, as in ELECTRA).
    With ``absolute=False`` there is no ``position`` table (relative positions live in the
    attention layers; ``max_len`` still bounds the input length).
    ``word.weight`` is also the MLM decoder (tied; see :class:`~lvsearch.model.heads.MLMHead`).
    """

    def __init__(self, vocab_size: int, embedding: int, hidden: int, max_len: int, dropout: float,
                 absolute: bool = True):
        super().__init__()
        self.max_len = max_len
        self.word = nn.Embedding(vocab_size, embedding)
        self.position = nn.Embedding(max_len, embedding) if absolute else None
        self.norm = nn.LayerNorm(embedding, eps=LN_EPS)
        self.dropout = nn.Dropout(dropout)
        self.project = nn.Linear(embedding, hidden) if embedding != hidden else None

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Raises LvsearchError when ``L`` exceeds ``max_len``."""
        length = input_ids.shape[1]
        if length > self.max_len:
            raise LvsearchError(f"sequence length {length} exceeds the model's max_len {self.max_len}",
                                fix="shorten sequences or build the model with a larger max_len")
        x = self.word(input_ids)
        if self.position is not None:
            x = x + self.position(torch.arange(length, device=input_ids.device))
        x = self.dropout(self.norm(x))
        return self.project(x) if self.project is not None else x
