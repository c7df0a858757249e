"""``ModelDims``: the sizes and switches shared by :class:`Encoder` and :class:`Supernet`;
``ModelSettings``: a recipe's ``model:`` section, checked (names and values) in one step, and
the one builder of a run's ``ModelDims`` from it."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from lvsearch.errors import LvsearchError

FF_ACTIVATIONS = ("gelu", "geglu")
POSITIONS = ("absolute", "relative")
INITS = ("bert", "scaled")
#: Upper bounds of the model sizes (BERT-large is hidden 1024, ff_inner 4096, 16 heads, 512
#: positions, a 30k vocabulary); the memory a model asks for within them is checked when it is
#: built (:func:`lvsearch.model.encoder.check_weight_memory`).
MAX_SIZES = {"vocab_size": 1 << 30, "hidden": 1 << 16, "embedding": 1 << 16, "ff_inner": 1 << 20, "heads": 1024,
             "conv_kernel": 1023, "max_len": 1 << 20, "relative_buckets": 1 << 16, "relative_max_distance": 1 << 20}


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
            if v > MAX_SIZES[name]:
                raise bad(f"{name} {v:,} is above the {MAX_SIZES[name]:,} lvsearch builds",
                          f"set {name} to at most {MAX_SIZES[name]:,}")
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
        try:
            return cls(**d)
        except LvsearchError as e:  # name the source
            raise LvsearchError(str(e).split("\n")[0].replace("model dims", where, 1), fix=e.fix) from None


#: Keys of a supernet recipe's ``model`` section that are not :class:`ModelDims` fields: they
#: shape the supernet only (see :class:`lvsearch.config.SupernetConfig`), never a standalone model.
SUPERNET_MODEL_KEYS = ("mixing_per_op",)

#: ``ModelDims`` fields a recipe may not set: they come from the prepared data.
DATA_DIMS = ("vocab_size", "pad_id")

_CHECK_VOCAB = 1 << 30  # a stand-in vocabulary for checking a recipe's values before the data is read


@dataclass(frozen=True)
class ModelSettings:
    """A recipe's ``model:`` section after checking, and the one builder of the run's dims.

    Built by :meth:`from_section` when a recipe loads (``SupernetConfig.check`` /
    ``RetrainConfig.check``, via their ``model_settings()``), so a bad name or value fails then,
    naming the recipe, before any data is read or anything is trained.

    Attributes:
        explicit: the section's :class:`ModelDims` fields (never ``vocab_size`` / ``pad_id``).
        base: defaults the explicit keys override (a retrain recipe's named ``size``, LV-BERT
            Table 5; empty for a supernet recipe).
        mixing_per_op: supernet-only ELC-BERT α̂ per candidate op (False elsewhere).
        source: how :meth:`dims` names these settings in an error.
    """

    explicit: Mapping[str, Any] = field(default_factory=dict)
    base: Mapping[str, Any] = field(default_factory=dict)
    mixing_per_op: bool = False
    source: str = "recipe model section"

    @classmethod
    def from_section(cls, section: Mapping[str, Any], source: str, *, supernet: bool = False,
                     base: Mapping[str, Any] | None = None, seq_len: int = 512,
                     dims_source: str = "recipe model section") -> ModelSettings:
        """Check a recipe's ``model`` section: names (the :class:`ModelDims` fields except
        :data:`DATA_DIMS`, plus :data:`SUPERNET_MODEL_KEYS` when ``supernet``), the supernet
        switch's type, and the values together with ``base`` (as :meth:`dims` will build them
        at ``seq_len``, with a stand-in vocabulary).

        Raises:
            LvsearchError: an unknown key (with the nearest valid one), a supernet-only key in
                another recipe, a non-boolean ``mixing_per_op``, or an invalid value; the
                message names ``source``.
        """
        allowed = [f.name for f in fields(ModelDims) if f.name not in DATA_DIMS]
        if supernet:
            allowed += SUPERNET_MODEL_KEYS
        for key in section:
            if key in SUPERNET_MODEL_KEYS and not supernet:
                raise LvsearchError(f"{source}: model.{key} is a supernet-only key",
                                    fix="set it in the train-supernet recipe; a standalone model has one op per slot "
                                        "and one (N, N) α̂ matrix already")
            if key not in allowed:
                close = difflib.get_close_matches(str(key), allowed, n=1)
                hint = f"did you mean {close[0]!r}? " if close else ""
                raise LvsearchError(f"{source}: unknown config key {f'model.{key}'!r}",
                                    fix=f"{hint}valid keys here: {', '.join(allowed)}")
        per_op = section.get("mixing_per_op", False)
        if not isinstance(per_op, bool):
            raise LvsearchError(f"{source}: model.mixing_per_op must be true or false, got {per_op!r}",
                                fix="--set model.mixing_per_op=true (with space=lvbert-elc: it needs ELC connectivity)")
        settings = cls(explicit={k: v for k, v in section.items() if k not in SUPERNET_MODEL_KEYS},
                       base=dict(base or {}), mixing_per_op=per_op, source=dims_source)
        try:  # named once, by ``source`` (the recipe), not also by ``dims_source``
            replace(settings, source="").dims(_CHECK_VOCAB, 0, seq_len)
        except LvsearchError as e:
            message = str(e).split("\n  fix: ", 1)[0]
            raise LvsearchError(f"{source}: {message}", fix=e.fix) from None
        except TypeError as e:  # a value of the wrong type that a comparison trips over
            raise LvsearchError(f"{source}: model section: {e}",
                                fix="give each model key a value of its type (see docs/recipes.md)") from None
        return settings

    def dims(self, vocab_size: int, pad_id: int, seq_len: int) -> ModelDims:
        """The run's :class:`ModelDims`: ``max_len`` = max(512, ``seq_len``), then ``base``, then
        the explicit keys, then the data's ``vocab_size`` and ``[PAD]`` id.

        Raises:
            LvsearchError: invalid values (:class:`ModelDims` checks), naming :attr:`source`.
        """
        d = {"max_len": max(512, seq_len), **self.base, **self.explicit, "vocab_size": vocab_size, "pad_id": pad_id}
        return ModelDims.from_dict(d, source=self.source)
