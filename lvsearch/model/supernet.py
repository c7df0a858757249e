"""``Supernet``: every allowed op at every slot, trained by uniform single-path sampling
(LV-BERT section 3.2, eq. 6-7; Guo et al. 2020) with ELC-BERT mixing logits for every
(slot, earlier output) pair."""

from __future__ import annotations

from typing import Sequence

import torch

from lvsearch.arch import Arch
from lvsearch.model.dims import ModelDims
from lvsearch.model.encoder import Encoder, _Backbone, flops_per_token
from lvsearch.model.mixing import alpha_matrix
from lvsearch.space import SearchSpace


class Supernet(_Backbone):
    """Weight-sharing supernet over ``space``.

    Holds ``slots.{n}.{OP}`` for every slot n and every op of the space, shared embeddings
    and MLM head, and ``mixing.logits`` (N, N) when the space's connectivity is searchable.
    A forward pass runs only the ops on the path of the given architecture.
    """

    def __init__(self, space: SearchSpace, dims: ModelDims):
        super().__init__(dims, space.num_slots, [space.ops] * space.num_slots,
                         with_mixing=space.searchable_inputs)
        self.space = space
        self._valid: set[Arch] = set()

    def _check(self, arch: Arch) -> None:
        if arch not in self._valid:
            self.space.validate(arch)
            if len(self._valid) >= 100_000:  # bounded memo: training samples a new arch per step
                self._valid.clear()
            self._valid.add(arch)

    def run_slot(self, n: int, arch: Arch, states: Sequence[torch.Tensor],
                 attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Output ``h_n (B, L, H)`` of slot ``n`` (1-based) of ``arch`` from
        ``states = [h_0, .., h_{n-1}]``; ``attention_mask (B, L)`` bool, True = real token.

        Raises:
            LvsearchError: ``arch`` does not belong to the supernet's space.
        """
        self._check(arch)
        return self._run_slot(n, arch, states, attention_mask)

    def forward(self, input_ids: torch.Tensor, arch: Arch,
                attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """``input_ids (B, L)`` long, ``arch`` in the space, ``attention_mask (B, L)`` bool or
        None -> hidden ``(B, L, H)``. Only the path of ``arch`` is computed (and receives
        gradients)."""
        self._check(arch)
        states = [self.embed(input_ids)]
        for n in range(1, self.num_slots + 1):
            states.append(self._run_slot(n, arch, states, attention_mask))
        return self.finish(states)

    def extract(self, arch: Arch) -> Encoder:
        """A standalone :class:`Encoder` for ``arch`` holding copies of the inherited weights
        (same device, dtype and train/eval mode). Its outputs equal the supernet's on that path."""
        self._check(arch)
        ref = self.embeddings.word.weight
        enc = Encoder(arch, self.dims).to(device=ref.device, dtype=ref.dtype)
        sd = self.state_dict()
        enc.load_state_dict({k: sd[k] for k in enc.state_dict()}, strict=True)
        enc.train(self.training)
        return enc

    def alpha_matrix(self, arch: Arch) -> torch.Tensor:
        """α of ``arch`` as ``(N, N)``: rows = slot, columns = input index, rows sum to 1."""
        self._check(arch)
        return alpha_matrix(arch, self.mixing)

    def num_params(self, arch: Arch) -> int:
        """Parameters on the path of ``arch`` as its extracted Encoder saves them: embeddings
        and MLM head once (decoder tied), the op of every slot, and the whole ``(N, N)`` α̂
        matrix when some slot of ``arch`` mixes several inputs. Equals
        ``self.extract(arch).num_params()``."""
        self._check(arch)
        return self._num_params(arch)

    def flops_per_token(self, arch: Arch, seq_len: int, include_head: bool = False) -> float:
        """Forward FLOPs per token of ``arch``; formula in :func:`lvsearch.model.encoder.flops_per_token`."""
        return flops_per_token(arch, self.dims, seq_len, include_head)
