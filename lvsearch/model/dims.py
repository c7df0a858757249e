"""``ModelDims``: the sizes and switches shared by :class:`Encoder` and :class:`Supernet`."""

from __future__ import annotations

import difflib
from dataclasses import asdict, dataclass, fields
from typing import Any

from lvsearch.errors import LvsearchError

FF_ACTIVATIONS = ("gelu", "geglu")
POSITIONS = ("absolute", "relative")
INITS = ("bert", "scaled")


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
        position: ``"absolute"`` (learned position embeddings added to the token embeddings,
            BERT) or ``"relative"`` (no position embeddings; every SA layer adds a learned
            bias per head and bucketed relative distance to its attention logits, T5 /
            Raffel et al. 2020 §2.1, as in LTG-BERT's bucketed positions, Samuel et al.
            2023). DC is position-aware through its convolution either way.
        relative_buckets: number of distance buckets (half per direction; exact distances
            up to a quarter of them, log-spaced beyond).
        relative_max_distance: distances at or beyond this share the outermost bucket.
        relative_init: initial relative bias, ``"local"`` (head h of n starts at
            ``-2^(-8h/n) |d|``, an ALiBi-style locality prior, Press et al. 2022) or ``"zero"``
            (uniform attention at the start, T5).
        init: ``"bert"`` (every matrix normal(0, 0.02)) or ``"scaled"`` (the same, but the
            projections that write into the residual stream — SA ``out``, FF ``fc2``, DC
            ``out`` — get std ``0.02 / sqrt(2 N)`` for N slots; GPT-2, Radford et al. 2019 §2.3).
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
    position: str = "absolute"
    relative_buckets: int = 32
    relative_max_distance: int = 128
    relative_init: str = "local"
    init: str = "bert"

    def __post_init__(self) -> None:
        def bad(msg: str, fix: str) -> LvsearchError:
            return LvsearchError(f"model dims: {msg}", fix=fix)

        for name in ("vocab_size", "hidden", "embedding", "ff_inner", "heads", "conv_kernel", "max_len",
                     "relative_buckets", "relative_max_distance"):
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
        if self.position not in POSITIONS:
            raise bad(f"unknown position {self.position!r}", f"use one of {', '.join(POSITIONS)}")
        if self.relative_buckets < 4 or self.relative_buckets % 2:
            raise bad(f"relative_buckets must be an even number ≥ 4, got {self.relative_buckets}", "e.g. 32")
        if self.relative_init not in ("local", "zero"):
            raise bad(f"unknown relative_init {self.relative_init!r}", "use local or zero")
        if self.init not in INITS:
            raise bad(f"unknown init {self.init!r}", f"use one of {', '.join(INITS)}")
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
