"""Masked-language-model corruption of token batches.

Two strategies (``MaskingConfig.strategy``):

* ``"token"`` — BERT (Devlin et al. 2019, §3.1): each eligible token is selected with
  probability ``probability`` (default 0.15). The number selected per sequence is
  ``floor(p·n + u)`` with ``u ~ U(0, 1)`` (fairseq's rounding), so the expected rate is exactly
  ``p`` and every sequence with ≥ 1 eligible token gets a prediction target on average.
* ``"span"`` — span masking as in SpanBERT (Joshi et al. 2020) / LTG-BERT (Samuel et al. 2023):
  span lengths are geometric, ``ℓ ~ Geo(span_p)`` clipped at ``max_span_length`` (mean ≈ 3.8
  for ``span_p = 0.2``, cap 10); spans start at uniformly drawn eligible positions until the
  budget ``floor(p·n + u)`` is reached; the 80/10/10 decision is made once per span.

Selected tokens become ``[MASK]`` with probability ``mask_token_frac`` (0.8), a random token
with ``random_token_frac`` (0.1), else stay unchanged (0.1). Special tokens (``[PAD] [UNK] [CLS]
[SEP] [MASK]``) are never selected, and random replacements never draw a special token.
All randomness comes from the ``torch.Generator`` passed in, so a seeded generator gives the
same masks in every process and on every run.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from lvsearch.data.tokenizer import SpecialIds
from lvsearch.errors import LvsearchError

IGNORE_INDEX = -100  # label of positions that are not predicted (PyTorch cross-entropy default)


@dataclass
class MaskingConfig:
    """MLM corruption settings (see the module docstring)."""

    probability: float = 0.15
    mask_token_frac: float = 0.8
    random_token_frac: float = 0.1
    strategy: str = "token"  # "token" | "span"
    span_p: float = 0.2
    max_span_length: int = 10

    def check(self) -> None:
        """Raises LvsearchError for out-of-range values."""
        if not 0 < self.probability < 1:
            raise LvsearchError(f"masking probability {self.probability} is not in (0, 1)", fix="e.g. 0.15")
        if self.mask_token_frac < 0 or self.random_token_frac < 0 or self.mask_token_frac + self.random_token_frac > 1:
            raise LvsearchError("mask_token_frac and random_token_frac must be ≥ 0 and sum to ≤ 1", fix="e.g. 0.8 and 0.1")
        if self.strategy not in ("token", "span"):
            raise LvsearchError(f"unknown masking strategy {self.strategy!r}", fix="use 'token' or 'span'")
        if not 0 < self.span_p <= 1 or self.max_span_length < 1:
            raise LvsearchError("span_p must be in (0, 1] and max_span_length ≥ 1", fix="e.g. 0.2 and 10")


class MLMMasker:
    """Apply MLM corruption to batches of token ids.

    Args:
        config: the masking settings.
        vocab_size: vocabulary size ``V``; random replacements are drawn from ids in ``[0, V)``
            that are not special tokens.
        special_ids: the tokenizer's special-token ids.
    """

    def __init__(self, config: MaskingConfig, vocab_size: int, special_ids: SpecialIds):
        config.check()
        self.config = config
        self.special = torch.tensor(sorted(set(special_ids.all())), dtype=torch.long)
        self.mask_id = special_ids.mask
        is_special = torch.zeros(vocab_size, dtype=torch.bool)
        is_special[self.special] = True
        self.replacement_ids = torch.nonzero(~is_special).squeeze(1)

    def eligible(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Bool ``(B, L)``: positions that may be selected (not a special token)."""
        return ~torch.isin(input_ids, self.special)

    def __call__(self, input_ids: torch.Tensor, generator: torch.Generator | None = None):
        """Corrupt a batch.

        Args:
            input_ids: LongTensor ``(B, L)``; not modified.
            generator: source of randomness (CPU generator).

        Returns:
            ``(corrupted, labels)``: LongTensors ``(B, L)``; ``labels`` holds the original id at
            selected positions and ``IGNORE_INDEX`` (−100) elsewhere.
        """
        eligible = self.eligible(input_ids)
        if self.config.strategy == "token":
            selected = self._select_tokens(eligible, generator)
            unit_draw = torch.rand(input_ids.shape, generator=generator)
        else:
            selected, unit_draw = self._select_spans(eligible, generator)
        labels = torch.where(selected, input_ids, torch.full_like(input_ids, IGNORE_INDEX))
        corrupted = input_ids.clone()
        to_mask = selected & (unit_draw < self.config.mask_token_frac)
        to_random = selected & (unit_draw >= self.config.mask_token_frac) & (
            unit_draw < self.config.mask_token_frac + self.config.random_token_frac
        )
        corrupted[to_mask] = self.mask_id
        n_random = int(to_random.sum())
        if n_random:
            pick = torch.randint(len(self.replacement_ids), (n_random,), generator=generator)
            corrupted[to_random] = self.replacement_ids[pick]
        return corrupted, labels

    def _budget(self, eligible: torch.Tensor, generator) -> torch.Tensor:
        n = eligible.sum(dim=1).to(torch.float64)
        u = torch.rand(n.shape, generator=generator, dtype=torch.float64)
        return torch.floor(self.config.probability * n + u).to(torch.long).clamp(max=n.to(torch.long))

    def _select_tokens(self, eligible: torch.Tensor, generator) -> torch.Tensor:
        budget = self._budget(eligible, generator)
        scores = torch.rand(eligible.shape, generator=generator)
        scores[~eligible] = 2.0  # never among the smallest
        ranks = scores.argsort(dim=1).argsort(dim=1)
        return (ranks < budget[:, None]) & eligible

    def _select_spans(self, eligible: torch.Tensor, generator):
        budget = self._budget(eligible, generator)
        B, L = eligible.shape
        selected = np.zeros((B, L), dtype=bool)
        unit = np.ones((B, L), dtype=np.float32)
        elig = eligible.numpy()
        cfg = self.config
        # Draw more spans than any sequence can need (each span covers ≥ 1 token), in one go.
        n_draw = int(budget.max()) if B else 0
        if n_draw:
            u_start = torch.rand((B, n_draw), generator=generator, dtype=torch.float64).numpy()
            u_len = torch.rand((B, n_draw), generator=generator, dtype=torch.float64).numpy()
            u_kind = torch.rand((B, n_draw), generator=generator).numpy()
            lengths = np.minimum(np.floor(np.log1p(-u_len) / np.log1p(-cfg.span_p)) + 1, cfg.max_span_length) if cfg.span_p < 1 else np.ones_like(u_len)
            for b in range(B):
                positions = np.flatnonzero(elig[b])
                left = int(budget[b])
                k = 0
                while left > 0 and k < n_draw:
                    start = positions[int(u_start[b, k] * len(positions))]
                    span = positions[(positions >= start) & (positions < start + lengths[b, k])]
                    span = span[~selected[b, span]][:left]
                    selected[b, span] = True
                    unit[b, span] = u_kind[b, k]
                    left -= len(span)
                    k += 1
                if left > 0:  # spans overlapped too often: top up with single tokens
                    free = positions[~selected[b, positions]][:left]
                    selected[b, free] = True
                    unit[b, free] = u_kind[b, -1]
        return torch.from_numpy(selected), torch.from_numpy(unit)
