"""Output heads: the MLM head (ELECTRA/LV-BERT generator head), mapping back to the embedding width."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from lvsearch.ops.base import LN_EPS


class MLMHead(nn.Module):
    """Masked-LM head: ``dense`` (H -> E), GELU, ``norm`` (LayerNorm E), then the decoder
    ``x @ word_embeddingsᵀ + bias`` tied to the word embeddings (BERT/ELECTRA).

    The tied weight is passed in at call time rather than stored, so the state dict holds it
    once (safetensors refuses shared tensors).
    """

    def __init__(self, hidden: int, embedding: int, vocab_size: int):
        super().__init__()
        self.dense = nn.Linear(hidden, embedding)
        self.norm = nn.LayerNorm(embedding, eps=LN_EPS)
        self.bias = nn.Parameter(torch.zeros(vocab_size))

    def forward(self, hidden: torch.Tensor, word_weight: torch.Tensor) -> torch.Tensor:
        """``hidden (..., H)``, ``word_weight (V, E)`` -> logits ``(..., V)``."""
        return F.linear(self.norm(F.gelu(self.dense(hidden))), word_weight, self.bias)
