"""``ModelDims``: the sizes and switches shared by :class:`Encoder` and :class:`Supernet`."""

from __future__ import annotations

import difflib
from dataclasses import asdict, dataclass, fields
from typing import Any

from lvsearch.errors import LvsearchError

FF_ACTIVATIONS = ("gelu", "geglu")


@dataclass(frozen=True)
class ModelDims:
    """Model sizes. Defaults are LV-BERT-small (Yu et al. 2021, section 4.1).

    Attributes:
        vocab_size: V, tokenizer vocabulary size.
        hidden: H, width of every slot.
        embedding: E, embedding width; projected to H when E != H (ELECTRA-style).
        ff_inner: FF inner size (4 H in the paper).
        heads: attention heads, and conv heads of the DC layer (same count, as in LV-BERT).
        conv_kernel: DC kernel width K (odd).
        max_len: number of learned positions.
        dropout: hidden and attention dropout.
        pre_ln: pre-LN slots (+ a final LayerNorm) instead of post-LN.
        ff_activation: ``"gelu"`` or ``"geglu"``.
        mixing_init: ELC α̂ init, ``"biased"`` or ``"zero"``.
        mixing_normalized: layer-normalise slot outputs before mixing.
        weighted_output: MLM head reads a learned mixture of all slot outputs.
        pad_id: padding token id; ``model.padding_mask(input_ids)`` builds a mask from it
            (models never guess a mask: ``attention_mask=None`` means no padding).
    """

    vocab_size: int
    hidden: int = 256
    embedding: int = 128
    ff_inner: int = 1024
    heads: int = 4
    conv_kernel: int = 9
    max_len: int = 512
    dropout: float = 0.1
    pre_ln: bool = False
    ff_activation: str = "gelu"
    mixing_init: str = "biased"
    mixing_normalized: bool = False
    weighted_output: bool = False
    pad_id: int = 0

    def __post_init__(self) -> None:
        def bad(msg: str, fix: str) -> LvsearchError:
            return LvsearchError(f"model dims: {msg}", fix=fix)

        for name in ("vocab_size", "hidden", "embedding", "ff_inner", "heads", "conv_kernel", "max_len"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise bad(f"{name} must be a positive integer, got {v!r}", f"set {name} to a positive integer")
        if self.hidden % self.heads:
            raise bad(f"hidden {self.hidden} is not divisible by heads {self.heads}",
                      "choose heads dividing hidden (LV-BERT small: hidden 256, heads 4)")
        if self.conv_kernel % 2 == 0:
            raise bad(f"conv_kernel must be odd, got {self.conv_kernel}", "use e.g. 9")
        if not 0.0 <= self.dropout < 1.0:
            raise bad(f"dropout must be in [0, 1), got {self.dropout}", "e.g. 0.1")
        if self.ff_activation not in FF_ACTIVATIONS:
            raise bad(f"unknown ff_activation {self.ff_activation!r}", f"use one of {', '.join(FF_ACTIVATIONS)}")
        if self.mixing_init not in ("biased", "zero"):
            raise bad(f"unknown mixing_init {self.mixing_init!r}", "use biased or zero")
        if not 0 <= self.pad_id < self.vocab_size:
            raise bad(f"pad_id {self.pad_id} outside the vocabulary (size {self.vocab_size})",
                      "set pad_id to the tokenizer's [PAD] id")

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (JSON/YAML ready)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any], source: str | None = None) -> "ModelDims":
        """Inverse of :meth:`to_dict`.

        Raises:
            LvsearchError: unknown key (with the nearest valid key), missing vocab_size or
                invalid values; the message names ``source`` when given.
        """
        where = f"model dims in {source}" if source else "model dims"
        names = [f.name for f in fields(cls)]
        if not isinstance(d, dict):
            raise LvsearchError(f"{where} must be a mapping", fix=f"keys: {', '.join(names)}")
        for k in d:
            if k not in names:
                close = difflib.get_close_matches(str(k), names, n=1)
                raise LvsearchError(f"{where}: unknown key {k!r}",
                                    fix=(f"did you mean {close[0]!r}? " if close else "") + f"valid keys: {', '.join(names)}")
        if "vocab_size" not in d:
            raise LvsearchError(f"{where}: missing vocab_size", fix="set vocab_size to the tokenizer's vocabulary size")
        return cls(**d)
