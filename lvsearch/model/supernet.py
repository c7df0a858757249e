"""``Supernet``: every allowed op at every slot, trained by uniform single-path sampling
(LV-BERT section 3.2, eq. 6-7; Guo et al. 2020) with ELC-BERT mixing logits for every
(slot, earlier output) pair — shared by the candidate ops of a slot (default) or, with
``mixing_per_op``, one set per (op, slot, earlier output)."""

from __future__ import annotations

from typing import Sequence

import torch

from lvsearch import ops as op_registry
from lvsearch.arch import Arch
from lvsearch.errors import LvsearchError
from lvsearch.model.dims import ModelDims
from lvsearch.model.encoder import Encoder, _Backbone, flops_per_token, slot_sizes
from lvsearch.model.mixing import alpha_matrix
from lvsearch.space import SearchSpace


class Supernet(_Backbone):
    """Weight-sharing supernet over ``space``.

    Holds ``slots.{n}.{OP}`` for every slot n and every op of the space (an op with variants
    in the space at its largest listed size, ``OpSpec.make_shared``: a variant runs on slices
    of those weights, and DC adds ``kernel_transforms.{k}``), shared embeddings
    and MLM head, and ``mixing.logits`` when the space's connectivity is searchable: ``(N, N)``
    shared by every candidate op of a slot, or with ``mixing_per_op`` ``(len(space.ops), N, N)``,
    one matrix per op in the order of ``space.ops``. A forward pass runs only the ops on the
    path of the given architecture; with per-op logits slot ``n`` mixes its inputs with row
    ``n-1`` of the matrix of the op it runs (ELC-BERT mixing, Charpentier & Samuel 2023, per
    candidate op).

    Args:
        space: the search space (slots, ops, connectivity).
        dims: model sizes and switches.
        mixing_per_op: one α̂ matrix per candidate op (the recipe key ``model.mixing_per_op``).

    Raises:
        LvsearchError: ``mixing_per_op`` on a space without searchable connectivity (there
            is no α̂ then).
    """

    def __init__(self, space: SearchSpace, dims: ModelDims, *, mixing_per_op: bool = False):
        if mixing_per_op and not space.searchable_inputs:
            raise LvsearchError(
                f"model.mixing_per_op needs a search space with searchable connectivity; {space.name!r} has none "
                "(every slot reads only the previous output, so there are no α̂ logits)",
                fix="use space lvbert-elc, or drop model.mixing_per_op",
            )
        choices = {}
        for op in space.ops:
            listed = space.variant_values(op)
            if listed or op_registry.get(op).elastic:
                choices[op] = {name: sorted({slot_sizes(op, dims, ((name, v),))[name] for v in values})
                               for name, values in listed.items()}
        super().__init__(dims, space.num_slots, [space.ops] * space.num_slots,
                         with_mixing=space.searchable_inputs,
                         mixing_ops=space.ops if mixing_per_op else None,
                         slot_choices={op: c for op, c in choices.items() if c})
        self.space = space
        self.mixing_per_op = bool(mixing_per_op)
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
        (same device, dtype and train/eval mode). Its outputs equal the supernet's on that path.

        With per-op logits the Encoder's ``mixing.logits (N, N)`` gets, as row ``n-1``, row
        ``n-1`` of the matrix of ``arch.ops[n-1]`` (every row, also of single-input slots, whose
        rows the Encoder saves but never reads). Slot ``n``'s layer is built at its variant's
        sizes and takes ``OpSpec.path_weights(layer, **sizes)`` of the supernet's
        ``slots.{n}.{op}`` (the sliced weights, DC's transformed kernel; the whole layer for an
        op without variants, :mod:`lvsearch.ops`)."""
        self._check(arch)
        ref = self.embeddings.word.weight
        enc = Encoder(arch, self.dims).to(device=ref.device, dtype=ref.dtype)
        sd = self.state_dict()
        table = op_registry.specs()
        path = {}
        for n, (op, variant) in enumerate(zip(arch.ops, arch.variants), start=1):
            sizes = slot_sizes(op, self.dims, variant)
            for k, v in table[op].path_weights(self.slots[str(n)][op], **sizes).items():
                path[f"slots.{n}.{op}.{k}"] = v
        wanted = {}
        for k in enc.state_dict():
            if k == "mixing.logits" and self.mixing_per_op:
                wanted[k] = self.path_mixing_logits(arch)
            else:
                wanted[k] = path[k] if k.startswith("slots.") else sd[k]
        enc.load_state_dict(wanted, strict=True)
        enc.train(self.training)
        return enc

    def path_mixing_logits(self, arch: Arch) -> torch.Tensor:
        """The α̂ logits ``arch`` uses, as an ``(N, N)`` detached copy: row ``n-1`` = slot ``n``
        (of the op ``arch.ops[n-1]`` with per-op logits; the shared matrix otherwise).

        Raises:
            ValueError: the supernet has no mixing logits (space without searchable connectivity).
        """
        self._check(arch)
        if self.mixing is None:
            raise ValueError("this supernet has no mixing logits (its space's connectivity is not searchable)")
        with torch.no_grad():
            if not self.mixing_per_op:
                return self.mixing.logits.detach().clone()
            return torch.stack([self.mixing.row(n, op) for n, op in enumerate(arch.ops, start=1)]).detach().clone()

    def alpha_matrix(self, arch: Arch) -> torch.Tensor:
        """α of ``arch`` as ``(N, N)``: rows = slot, columns = input index, rows sum to 1 (with
        per-op logits each row from the matrix of that slot's op)."""
        self._check(arch)
        return alpha_matrix(arch, self.mixing)

    def num_params(self, arch: Arch) -> int:
        """Parameters on the path of ``arch`` as its extracted Encoder saves them: embeddings
        and MLM head once (decoder tied), the op of every slot, and the whole ``(N, N)`` α̂
        matrix when some slot of ``arch`` mixes several inputs (also with per-op logits: the
        path's rows form one ``(N, N)`` matrix). Equals ``self.extract(arch).num_params()``."""
        self._check(arch)
        return self._num_params(arch)

    def flops_per_token(self, arch: Arch, seq_len: int, include_head: bool = False) -> float:
        """Forward FLOPs per token of ``arch``; formula in :func:`lvsearch.model.encoder.flops_per_token`."""
        return flops_per_token(arch, self.dims, seq_len, include_head)
