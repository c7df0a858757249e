"""``Encoder``: one architecture as a standalone model, and the shared backbone code.

Execution is slot by slot so the search can cache hidden states of shared slot prefixes:

    states = [model.embed(input_ids)]                      # h_0
    for n in 1..N: states.append(model.run_slot(n, ..., states, mask))   # h_n
    hidden = model.finish(states)                          # final LN / weighted output
    logits = model.mlm_logits(hidden[labels != -100])

``forward`` is exactly that loop. Parameter names (also the safetensors keys):
``embeddings.{word,position,norm,project}.*``, ``slots.{n}.{OP}.*`` (n 1-based, OP a
registered op code, :mod:`lvsearch.ops`), ``mixing.logits`` (N, N), ``output_mixing.logits`` (N+1,), ``final_norm.*``
(pre-LN only), ``mlm_head.{dense,norm,bias}``. A slot with a variant (``arch.variants``) holds
its op's layer built at the variant's sizes under the same names. An Encoder's keys are a subset of the
Supernet's, which is how weights are inherited (a supernet with per-op α̂,
``model.mixing_per_op``, holds ``mixing.logits`` as ``(num_ops, N, N)``; ``Supernet.extract``
gathers the path's rows into the Encoder's ``(N, N)``).
"""

from __future__ import annotations

import functools
from typing import Sequence

import torch
from torch import nn

from lvsearch import ops as op_registry
from lvsearch.arch import Arch
from lvsearch.errors import LvsearchError
from lvsearch.model.dims import ModelDims
from lvsearch.model.embeddings import Embeddings
from lvsearch.model.heads import MLMHead
from lvsearch.model.mixing import LayerMixing, OutputMixing, alpha_matrix, mix_inputs
from lvsearch.ops.base import LN_EPS

INIT_STD = 0.02


def flops_per_token(arch: Arch, dims: ModelDims, seq_len: int, include_head: bool = False) -> float:
    """Forward FLOPs per token of ``arch`` (1 multiply-add = 2 FLOPs), matmuls only.

    Per slot, the op's own count at the slot's variant (``OpSpec.count_flops(dims, seq_len,
    variant)``, documented in each op module of :mod:`lvsearch.ops`: e.g. SA ``8 H^2 + 4 L H``,
    FF ``4 H I``), plus for slots mixing more
    than one input ``2 H |inputs|``; weighted output ``2 H (N+1)``.

    Plus the embedding projection ``2 E H`` when E != H and, with ``include_head``, the MLM
    head ``2 H E + 2 E V``. LayerNorm, softmax, activations and biases are ignored.
    """
    H, E = dims.hidden, dims.embedding
    table = op_registry.specs()
    total = 2.0 * E * H if E != H else 0.0
    for op, inputs, variant in zip(arch.ops, arch.inputs, arch.variants):
        total += table[op].count_flops(dims, seq_len, variant) if variant else table[op].flops(dims, seq_len)
        if len(inputs) > 1:
            total += 2 * H * len(inputs)
    if dims.weighted_output:
        total += 2 * H * (arch.num_slots + 1)
    if include_head:
        total += 2 * H * E + 2 * E * dims.vocab_size
    return float(total)


def _init_weights(module: nn.Module) -> None:
    """BERT initialisation: normal(0, 0.02) weights, zero biases, unit LayerNorm."""
    if isinstance(module, (nn.Linear, nn.Conv1d)):
        nn.init.normal_(module.weight, std=INIT_STD)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.Embedding):
        nn.init.normal_(module.weight, std=INIT_STD)
    elif isinstance(module, nn.LayerNorm):
        nn.init.ones_(module.weight)
        nn.init.zeros_(module.bias)


def scale_residual_init(slots, num_slots: int) -> None:
    """Scaled residual init (GPT-2, Radford et al. 2019 §2.3): the projection of each op that
    writes into the residual stream (``OpSpec.residual``: SA ``out``, FF ``fc2``, DC ``out``, ...)
    gets normal(0, 0.02 / sqrt(2 N))."""
    std = INIT_STD / (2 * num_slots) ** 0.5
    table = op_registry.specs()
    for ops in slots:
        for code, layer in ops.items():
            nn.init.normal_(getattr(layer, table[code].residual).weight, std=std)


@functools.lru_cache(maxsize=4096)
def slot_sizes(code: str, dims: ModelDims, variant: tuple) -> dict[str, int]:
    """Layer sizes of op ``code`` at ``variant`` for ``dims`` (``OpSpec.sizes``, cached; ``{}``
    for an op without elastic dimensions).

    Raises:
        LvsearchError: a variant value that does not fit ``dims`` (e.g. FF ``inner`` 0.3 of an
            ``ff_inner`` it does not divide into whole units).
    """
    try:
        return op_registry.get(code).sizes(dims, variant)
    except ValueError as e:
        raise LvsearchError(f"{code} variant {dict(variant)} does not fit the model: {e}",
                            fix="choose variant values that fit model.hidden / ff_inner / heads") from None


@functools.lru_cache(maxsize=4096)
def slot_params(code: str, dims: ModelDims, variant: tuple) -> int:
    """Parameters of one slot running op ``code`` at ``variant`` (the standalone layer's numel)."""
    return op_registry.get(code).num_params(dims, variant)


def _slot_layer(code: str, dims: ModelDims, choices: dict | None, variant: tuple = ()) -> nn.Module:
    spec = op_registry.get(code)
    if choices:
        return spec.make_shared(dims, choices)
    if variant:
        return spec.build(dims, **slot_sizes(code, dims, variant))
    return spec.build(dims)


@functools.lru_cache(maxsize=1024)
def _layer_weights(code: str, dims: ModelDims, choices: tuple, variant: tuple) -> int:
    """Weights of one slot layer, built on the ``meta`` device (no memory is allocated)."""
    with torch.device("meta"):
        layer = _slot_layer(code, dims, {k: list(v) for k, v in choices}, variant)
    return sum(p.numel() for p in layer.parameters())


def model_weights(dims: ModelDims, slot_ops: Sequence[Sequence[str]], slot_variants: Sequence[Sequence[tuple]],
                  slot_choices: dict | None = None) -> tuple[int, tuple[str, int]]:
    """``(weights, (largest slot layer, its weights))`` of a model before it is built: each
    slot layer counted on the ``meta`` device, plus the embeddings and the MLM head."""
    total, largest = 0, ("", 0)
    for ops, vs in zip(slot_ops, slot_variants):
        for op, v in zip(ops, vs):
            choices = tuple(sorted((k, tuple(x)) for k, x in ((slot_choices or {}).get(op) or {}).items()))
            n = _layer_weights(op, dims, choices, v)
            total += n
            if n > largest[1]:
                label = op + "".join(f" {k} {max(x)}" for k, x in choices) + "".join(f" {k} {x}" for k, x in v)
                largest = (label, n)
    embed = (dims.vocab_size + dims.max_len) * dims.embedding + dims.embedding * dims.hidden
    head = dims.hidden * dims.embedding + dims.vocab_size
    return total + embed + head, largest


def check_weight_memory(dims: ModelDims, slot_ops: Sequence[Sequence[str]], slot_variants: Sequence[Sequence[tuple]],
                        slot_choices: dict | None = None) -> None:
    """Refuse a model whose float32 weights alone would not fit this machine's physical memory,
    before any is allocated (:func:`model_weights`).

    Raises:
        LvsearchError: naming the slot count, the largest slot layer and the model sizes.
    """
    from lvsearch.device import device_memory_bytes

    ram, where = device_memory_bytes("cpu")  # every model is built on the CPU, then moved
    weights, (label, per_slot) = model_weights(dims, slot_ops, slot_variants, slot_choices)
    if ram is None or weights * 4 <= ram:
        return
    raise LvsearchError(
        f"a model of {len(slot_ops)} slots at hidden {dims.hidden} (vocabulary {dims.vocab_size}, embedding "
        f"{dims.embedding}) holds ~{weights:,} weights, {weights * 4 / (1 << 30):,.0f} GB in float32 before any "
        f"activation, more than {where}; the largest slot layer ({label}) holds {per_slot:,}",
        fix="lower num_slots, the op sizes in the search space (heads, inner, kernel) or the model section's sizes")


class _Backbone(nn.Module):
    """Embeddings, slot storage, output stage and MLM head shared by Encoder and Supernet.

    ``slot_ops[n-1]`` lists slot n's ops; ``slot_variants[n-1]`` (Encoder) the variant of each,
    ``slot_choices`` (Supernet) per op the layer sizes the slot's layer must run
    (``{code: {dimension: sizes}}``; the layer is then built by ``OpSpec.make_shared``)."""

    def __init__(self, dims: ModelDims, num_slots: int, slot_ops: Sequence[Sequence[str]], with_mixing: bool,
                 mixing_ops: Sequence[str] | None = None, slot_variants: Sequence[Sequence[tuple]] | None = None,
                 slot_choices: dict | None = None):
        super().__init__()
        variants = slot_variants or [[()] * len(ops) for ops in slot_ops]
        check_weight_memory(dims, slot_ops, variants, slot_choices)
        self.dims = dims
        self.num_slots = num_slots
        self.embeddings = Embeddings(dims.vocab_size, dims.embedding, dims.hidden, dims.max_len, dims.dropout,
                                     absolute=dims.position == "absolute")
        self.slots = nn.ModuleDict(
            {str(n): nn.ModuleDict({op: _slot_layer(op, dims, (slot_choices or {}).get(op), v) for op, v in zip(ops, vs)})
             for n, (ops, vs) in enumerate(zip(slot_ops, variants), start=1)}
        )
        self.mixing = (LayerMixing(num_slots, dims.mixing_init, dims.mixing_normalized, ops=mixing_ops)
                       if with_mixing else None)
        self.output_mixing = OutputMixing(num_slots, dims.mixing_init) if dims.weighted_output else None
        self.final_norm = nn.LayerNorm(dims.hidden, eps=LN_EPS) if dims.pre_ln else None
        self.mlm_head = MLMHead(dims.hidden, dims.embedding, dims.vocab_size)
        self.apply(_init_weights)
        if dims.init == "scaled":
            scale_residual_init(self.slots.values(), num_slots)

    # ---------------------------------------------------------------- slot-by-slot API
    def embed(self, input_ids: torch.Tensor) -> torch.Tensor:
        """``input_ids (B, L)`` long -> ``h_0 (B, L, H)``."""
        return self.embeddings(input_ids)

    def padding_mask(self, input_ids: torch.Tensor) -> torch.Tensor:
        """``input_ids (B, L)`` -> bool ``(B, L)``, True where the token is not ``dims.pad_id``."""
        return input_ids != self.dims.pad_id

    def _run_slot(self, n: int, arch: Arch, states: Sequence[torch.Tensor],
                  attention_mask: torch.Tensor | None) -> torch.Tensor:
        if len(states) < n:
            raise ValueError(f"slot {n} needs states h_0..h_{n - 1}, got {len(states)}")
        op, variant = arch.ops[n - 1], arch.variants[n - 1]
        x = mix_inputs(self.mixing, n, arch.inputs[n - 1], states, op)
        # The variant's sizes (the layer's own for an Encoder; slices of the largest for a Supernet).
        return self.slots[str(n)][op](x, _bool_mask(attention_mask), **slot_sizes(op, self.dims, variant))

    def finish(self, states: Sequence[torch.Tensor]) -> torch.Tensor:
        """``h_0..h_N`` -> the hidden states the MLM head reads ``(B, L, H)``: ``h_N`` or the
        weighted output mixture, then the final LayerNorm under pre-LN."""
        if len(states) != self.num_slots + 1:
            raise ValueError(f"expected {self.num_slots + 1} states h_0..h_N, got {len(states)}")
        x = self.output_mixing(states) if self.output_mixing is not None else states[-1]
        return self.final_norm(x) if self.final_norm is not None else x

    def mlm_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """``hidden (..., H)`` (any leading shape, e.g. only masked positions) -> ``(..., V)``."""
        return self.mlm_head(hidden, self.embeddings.word.weight)

    # ---------------------------------------------------------------- accounting
    def _shared_params(self) -> int:
        n = sum(p.numel() for p in self.embeddings.parameters())
        n += sum(p.numel() for p in self.mlm_head.parameters())  # decoder weight is tied: not counted again
        for m in (self.output_mixing, self.final_norm):
            if m is not None:
                n += sum(p.numel() for p in m.parameters())
        return n

    def _num_params(self, arch: Arch) -> int:
        # What the Encoder of ``arch`` saves (model.safetensors): shared parts, the op of every
        # slot, and the whole (N, N) α̂ matrix whenever some slot mixes several inputs (the
        # Encoder then holds ``mixing.logits``, unused entries included), not only the entries used.
        # A supernet with per-op logits holds (num_ops, N, N) but its extracted Encoder (N, N):
        # the count is the Encoder's either way.
        n = self._shared_params()
        for op, variant in zip(arch.ops, arch.variants):
            n += slot_params(op, self.dims, variant)
        if any(len(inputs) > 1 for inputs in arch.inputs):
            n += self.num_slots * self.num_slots
        return n


def _bool_mask(mask: torch.Tensor | None) -> torch.Tensor | None:
    if mask is None or mask.dtype == torch.bool:
        return mask
    return mask != 0


class Encoder(_Backbone):
    """One architecture as a standalone BERT-style encoder (LV-BERT; ELC-BERT mixing).

    Args:
        arch: the architecture (ops and inputs per slot).
        dims: sizes (:class:`ModelDims`).

    ``mixing.logits`` exists only when some slot of ``arch`` mixes several inputs.
    """

    def __init__(self, arch: Arch, dims: ModelDims):
        super().__init__(dims, arch.num_slots, [[op] for op in arch.ops],
                         with_mixing=any(len(i) > 1 for i in arch.inputs),
                         slot_variants=[[v] for v in arch.variants])
        self.arch = arch

    def run_slot(self, n: int, states: Sequence[torch.Tensor],
                 attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Output ``h_n (B, L, H)`` of slot ``n`` (1-based) from ``states = [h_0, .., h_{n-1}]``
        (longer lists are fine); ``attention_mask (B, L)`` bool, True = real token."""
        return self._run_slot(n, self.arch, states, attention_mask)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        """``input_ids (B, L)`` long, ``attention_mask (B, L)`` bool (True = real token) or
        None -> hidden ``(B, L, H)`` (see :meth:`finish`)."""
        states = [self.embed(input_ids)]
        for n in range(1, self.num_slots + 1):
            states.append(self.run_slot(n, states, attention_mask))
        return self.finish(states)

    def alpha_matrix(self) -> torch.Tensor:
        """α as ``(N, N)``: rows = slot, columns = input index (see :func:`mixing.alpha_matrix`)."""
        return alpha_matrix(self.arch, self.mixing)

    def num_params(self) -> int:
        """Parameters this model holds and saves (the numel of its ``state_dict``, tied decoder
        once): embeddings and head, every slot, and the whole ``(N, N)`` α̂ matrix when some
        slot mixes several inputs (unused entries included, since they are saved)."""
        return self._num_params(self.arch)

    def flops_per_token(self, seq_len: int, include_head: bool = False) -> float:
        """See :func:`flops_per_token`."""
        return flops_per_token(self.arch, self.dims, seq_len, include_head)
