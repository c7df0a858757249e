"""What every slot op shares: the residual/LayerNorm/dropout wrapper :class:`SlotLayer`, the
LayerNorm epsilon, and the op contract :class:`OpSpec`.

This file and the op modules next to it are also the op code of a Hugging Face export
(``lvsearch export`` copies them next to ``modeling_lvsearch.py``), so they import only torch,
the standard library and each other (relative imports), never the rest of lvsearch.

An op may have elastic dimensions (:class:`Elastic`: SA heads, FF inner width, DC kernel);
its supernet layer is built at the largest size and runs a smaller *variant* on slices of its
weights.

Every op layer maps ``x: (batch, seq, hidden)`` to the same shape, takes a boolean padding
mask ``(batch, seq)`` with True = real token (or None = no padding), and carries its own
residual connection, LayerNorm and dropout (LV-BERT, Yu et al. 2021, appendix A):

- post-LN (default): ``y = LayerNorm(x + Dropout(f(x)))``
- pre-LN (``pre_ln=True``): ``y = x + Dropout(f(LayerNorm(x)))``; the encoder then applies
  a final LayerNorm after the last slot.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import nn

#: LayerNorm epsilon used throughout (BERT/ELECTRA value).
LN_EPS = 1e-12

#: The model sizes an op's ``build`` and ``flops`` may read (attribute names of
#: ``lvsearch.model.ModelDims``; an export passes the same names built from its config).
DIMS_FIELDS: tuple[str, ...] = ("hidden", "heads", "ff_inner", "conv_kernel", "dropout", "pre_ln",
                                "ff_activation", "position", "relative_buckets", "relative_max_distance",
                                "relative_init")


class SlotLayer(nn.Module):
    """Residual + LayerNorm + dropout around :meth:`transform` (LV-BERT appendix A).

    Subclasses implement ``transform(x (B, L, H), mask (B, L) bool or None) -> (B, L, H)``
    (the op itself, without residual and norm)."""

    def __init__(self, hidden: int, dropout: float, pre_ln: bool):
        super().__init__()
        self.pre_ln = pre_ln
        self.norm = nn.LayerNorm(hidden, eps=LN_EPS)
        self.dropout = nn.Dropout(dropout)

    def transform(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:  # pragma: no cover
        raise NotImplementedError

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None, **sizes: int) -> torch.Tensor:
        """``x: (B, L, H)``, ``mask: (B, L)`` bool (True = real token) or None -> ``(B, L, H)``.
        ``sizes`` (elastic ops only): the variant to run, passed to ``transform``."""
        if self.pre_ln:
            return x + self.dropout(self.transform(self.norm(x), mask, **sizes))
        return self.norm(x + self.dropout(self.transform(x, mask, **sizes)))


def _whole_layer(layer: nn.Module, **sizes: int) -> dict[str, torch.Tensor]:
    return layer.state_dict()


@dataclass(frozen=True)
class Elastic:
    """One elastic dimension of an op: a size a slot may choose per architecture (a *variant*),
    weight-shared in the supernet (once-for-all, Cai et al. 2020; HAT, Wang et al. 2020).

    An architecture names a variant by ``name`` and a *value* (the unit a search space and an
    architecture file use, e.g. FF ``inner: 0.5`` = half of ``model.ff_inner``); ``size`` turns
    the value into the layer's size (the keyword of the op's ``build``, ``flops``,
    ``path_weights`` and ``SlotLayer.forward``, named ``name`` too).

    Attributes:
        name: the dimension (``"heads"``), also the keyword of the op's functions.
        letter: one lower-case letter for the compact architecture form (``s(h2)``).
        unit: what a value means, for messages and docs (``"attention heads"``).
        default: ``default(dims) -> value`` of the op without a variant (today's layer).
        check: ``check(value) -> message or None``: why ``value`` is not a valid value,
            whatever the model dims (type, sign, parity).
        size: ``size(dims, value) -> int``: the layer size of ``value``; raises ``ValueError``
            when ``value`` does not fit ``dims`` (e.g. a fraction of ``ff_inner`` that is not
            a whole number of units).
        integer: values are integers (else any positive number; an integral one is stored as int).
    """

    name: str
    letter: str
    unit: str
    default: Callable[[Any], Any]
    check: Callable[[Any], "str | None"]
    size: Callable[[Any, Any], int]
    integer: bool = True

    def normalise(self, value: Any) -> Any:
        """``value`` as stored in an architecture (an integral float becomes an int).

        Raises:
            ValueError: the message of :attr:`check` when the value is invalid.
        """
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{self.name} must be a number, got {value!r}")
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if self.integer and not isinstance(value, int):
            raise ValueError(f"{self.name} must be an integer, got {value!r}")
        why = self.check(value)
        if why:
            raise ValueError(why)
        return value


@dataclass(frozen=True)
class OpSpec:
    """Everything lvsearch needs to know about one op; each op module defines one as ``SPEC``.

    Attributes:
        code: upper-case op code (``"SA"``); names the op in architecture JSON files, search
            space YAMLs, exports and state-dict keys (``slots.{n}.{code}.*``).
        letter: one lower-case letter for the compact architecture string (``"s"``).
        title: short human name (``"self-attention"``), for messages and legends.
        colour: plot colour (``"#RRGGBB"``).
        order: canonical position among the ops (SA 0, FF 1, DC 2, new ops after): a search
            space lists its ops in this order, and per-op α̂ matrices follow it.
        layer: the :class:`SlotLayer` subclass.
        build: ``build(dims, **sizes) -> layer``; ``dims`` has the attributes
            :data:`DIMS_FIELDS`; ``sizes`` (only for ops with :attr:`elastic` dimensions) the
            layer size per elastic dimension, each defaulting to today's layer.
        flops: ``flops(dims, seq_len, **sizes) -> float``: forward FLOPs per token of one slot
            running the op (1 multiply-add = 2 FLOPs, matmuls only).
        residual: name of the layer's ``nn.Linear`` that writes into the residual stream
            (gets the scaled init under ``init: scaled``).
        paper: where the op comes from (for docs and ``arch`` messages).
        path_weights: how the supernet shares the op's weights: the supernet holds one
            ``build_shared`` layer per slot under ``slots.{n}.{code}``, and
            ``path_weights(layer, **sizes)`` is the state dict an Encoder's layer of that slot,
            built at ``sizes``, takes from it (default: the whole layer, unchanged keys).
        elastic: the op's elastic dimensions (:class:`Elastic`; empty = no variants). Its layer's
            ``transform`` then takes the sizes as keywords and runs a smaller variant on
            slices of its weights (no copies).
        build_shared: ``build_shared(dims, choices) -> layer``: the supernet's layer of a slot
            that may run every size in ``choices`` (``{name: sorted sizes}``); default:
            ``build(dims, **{name: max(sizes)})``.

    Parameters are counted from the built layer (:meth:`num_params`).
    """

    code: str
    letter: str
    title: str
    colour: str
    order: int
    layer: type
    build: Callable[[Any], SlotLayer]
    flops: Callable[[Any, int], float]
    residual: str
    paper: str
    path_weights: Callable[..., dict] = _whole_layer
    elastic: tuple = ()
    build_shared: "Callable[[Any, dict], SlotLayer] | None" = None

    def dimension(self, name: str) -> Elastic:
        """The elastic dimension ``name``.

        Raises:
            KeyError: the op has no such dimension.
        """
        for e in self.elastic:
            if e.name == name:
                return e
        raise KeyError(name)

    def sizes(self, dims: Any, variant: Any = ()) -> dict[str, int]:
        """Layer size per elastic dimension of ``variant`` (``{name: value}`` or pairs; missing
        dimensions at their default), ``{}`` for an op without elastic dimensions.

        Raises:
            ValueError: a value that does not fit ``dims``.
        """
        given = dict(variant)
        return {e.name: int(e.size(dims, given[e.name] if e.name in given else e.default(dims)))
                for e in self.elastic}

    def make(self, dims: Any, variant: Any = ()) -> SlotLayer:
        """A standalone layer of ``variant`` (``build(dims, **sizes)``)."""
        return self.build(dims, **self.sizes(dims, variant))

    def make_shared(self, dims: Any, choices: dict) -> SlotLayer:
        """The supernet layer of a slot running every size in ``choices`` (``{name: sizes}``)."""
        if not self.elastic:
            return self.build(dims)
        full = {e.name: sorted(set(choices.get(e.name, ())) | {self.sizes(dims)[e.name]}) for e in self.elastic}
        if self.build_shared is not None:
            return self.build_shared(dims, full)
        return self.build(dims, **{k: max(v) for k, v in full.items()})

    def count_flops(self, dims: Any, seq_len: int, variant: Any = ()) -> float:
        """Forward FLOPs per token of ``variant`` (:attr:`flops` at its sizes)."""
        return float(self.flops(dims, seq_len, **self.sizes(dims, variant)))

    def num_params(self, dims: Any, variant: Any = ()) -> int:
        """Parameters of one slot running this op at ``variant`` (the built layer's numel). The
        layer is built on the meta device: no memory, and no draw from torch's random generator
        (a count must not move the random stream, or a resumed search would diverge)."""
        with torch.device("meta"):
            layer = self.make(dims, variant)
        return sum(p.numel() for p in layer.parameters())
