"""``Arch``: the one contract every lvsearch verb speaks.

An architecture is a list of *slots*. Slot ``n`` (1-based) holds one operation and a set of
inputs (LV-BERT, Yu et al. 2021, section 3; ELC-BERT, Charpentier & Samuel 2023, section 3):

- ``ops[n-1]`` is the code of a registered op (:mod:`lvsearch.ops`): ``"SA"`` (multi-head
  self-attention), ``"FF"`` (feed-forward), ``"DC"`` (dynamic convolution), ``"LA"`` (local
  self-attention), ... The compact form writes one letter per slot, as in the LV-BERT paper:
  ``s`` = SA, ``f`` = FF, ``c`` = DC, ``l`` = LA (e.g. ``"ccsffs..."``).
- ``inputs[n-1]`` is a non-empty subset of ``{0, ..., n-1}``: the earlier outputs that slot
  ``n`` mixes (0 = embedding output). ``inputs[n-1] == (n-1,)`` for every slot is the plain
  sequential stack.

- ``variants[n-1]`` is the slot's *variant*: a value per elastic dimension of its op
  (:class:`lvsearch.ops.base.Elastic`: SA ``heads``, FF ``inner`` as a multiple of
  ``model.ff_inner``, DC ``kernel``), as ``((name, value), ...)`` sorted by name; ``()`` (and
  any dimension left out) means the op's default (today's layer: ``model.heads`` heads,
  ``model.ff_inner`` units, ``model.conv_kernel`` taps). Values are never normalised against
  a model's dims, so ``s`` and ``s(h4)`` are different architectures even where
  ``model.heads`` is 4.

The compact form writes a variant as a parenthesised suffix of the slot's letter, one
``letter value`` per dimension (the dimension's :attr:`~lvsearch.ops.base.Elastic.letter`,
comma-separated, sorted by name): ``s(h2)`` = SA with 2 heads, ``f(i0.5)`` = FF at half
``model.ff_inner``, ``c(k3)`` = DC with kernel 3, e.g. ``"c(k3)s(h2)f(i0.5)f..."``.

An :class:`Arch` is frozen and hashable; :attr:`Arch.key` is a canonical string used for
memoisation and de-duplication (an architecture without variants keeps its key of before
variants existed). On disk it is JSON with a format tag; without variants the v1 form::

    {"format": "lvsearch.arch/v1", "ops": "ccsffs...", "inputs": [[0], [1], ...],
     "num_slots": 24, "space": "lvbert", "meta": {...}}

and with some variant v2, which adds one object per slot (``{}`` = default)::

    {"format": "lvsearch.arch/v2", "ops": "ccsffs...", "variants": [{"kernel": 3}, {}, {"heads": 2}, ...],
     "inputs": [...], "num_slots": 24, ...}

Both formats load; v2 is written only when needed, so v1 readers keep reading every
architecture without variants.

``space`` and ``meta`` are optional and informative; validation against a search space is
done by :meth:`lvsearch.space.SearchSpace.validate`.

This module also holds the named reference architectures (:func:`reference_arch`) and
:func:`resolve_arch`, which turns a user's ``--arch`` string (a JSON path or a name) into an
``Arch``.
"""

from __future__ import annotations

import os
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from lvsearch import ops as op_registry
from lvsearch.errors import LvsearchError
from lvsearch.io import atomic_write_json, read_json

if TYPE_CHECKING:  # pragma: no cover
    from lvsearch.space import SearchSpace

#: Format tag of an architecture JSON file without variants (every file before variants).
ARCH_FORMAT = "lvsearch.arch/v1"
#: Format tag of an architecture JSON file with per-slot variants.
ARCH_FORMAT_V2 = "lvsearch.arch/v2"
#: Every format tag :meth:`Arch.from_dict` reads.
ARCH_FORMATS = (ARCH_FORMAT, ARCH_FORMAT_V2)
_ARCH_KEYS = ("format", "ops", "variants", "inputs", "num_slots", "space", "meta")

_SLOT_RE = re.compile(r"([a-z])(?:\(([^)]*)\))?")


def _where(source: str | os.PathLike | None) -> str:
    return f"architecture file {source}" if source is not None else "architecture"


def _parse_ops(ops: str | Iterable[str], source: str | os.PathLike | None = None) -> tuple[str, ...]:
    """Normalise a compact string (``"csf"``, variant suffixes dropped) or a sequence of op codes to a tuple of codes."""
    return _parse_slots(ops, source)[0]


def _parse_slots(ops: str | Iterable[str], source: str | os.PathLike | None = None
                 ) -> tuple[tuple[str, ...], tuple[tuple, ...] | None]:
    """``(codes, variants)`` of a compact string (variants from its ``(...)`` suffixes) or of a
    sequence of op codes (variants ``None``)."""
    where = _where(source)
    if isinstance(ops, str):
        letters = op_registry.letters()
        out, variants, pos, n = [], [], 0, 0
        while pos < len(ops):
            n += 1
            m = _SLOT_RE.match(ops, pos)
            if m is None or m.group(1) not in letters:
                ch = ops[pos]
                raise LvsearchError(
                    f"{where}: slot {n} has unknown op letter {ch!r} in {ops!r}",
                    fix="use the letters of the registered ops: "
                    + ", ".join(f"{c} = {op}" for c, op in letters.items())
                    + " (a variant as a suffix, e.g. s(h2))",
                )
            code = letters[m.group(1)]
            out.append(code)
            variants.append(_parse_suffix(code, m.group(2), n, ops, where) if m.group(2) is not None else ())
            pos = m.end()
        return tuple(out), tuple(variants)
    codes = op_registry.codes()
    out = []
    for n, op in enumerate(ops, start=1):
        if not isinstance(op, str) or op.upper() not in codes:
            raise LvsearchError(
                f"{where}: slot {n} has unknown op {op!r}",
                fix=f"use a registered op: {op_registry.describe()}",
            )
        out.append(op.upper())
    return tuple(out), None


def _dims_of(code: str) -> str:
    spec = op_registry.get(code)
    if not spec.elastic:
        return f"{code} has no elastic dimensions"
    return f"{code}'s elastic dimensions: " + ", ".join(f"{e.name} ({e.letter}, {e.unit})" for e in spec.elastic)


def _parse_suffix(code: str, text: str, n: int, ops: str, where: str) -> tuple:
    spec = op_registry.get(code)
    by_letter = {e.letter: e.name for e in spec.elastic}
    pairs = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        letter, raw = part[0], part[1:]
        if letter not in by_letter:
            raise LvsearchError(f"{where}: slot {n} ({code}) has unknown variant letter {letter!r} in {ops!r}",
                                fix=_dims_of(code))
        try:
            value = float(raw) if any(c in raw for c in ".eE") else int(raw)
        except ValueError:
            raise LvsearchError(f"{where}: slot {n} ({code}) has variant {part!r} without a number in {ops!r}",
                                fix="write the letter then the value, e.g. s(h2), f(i0.5), c(k3)") from None
        if by_letter[letter] in pairs:
            raise LvsearchError(f"{where}: slot {n} ({code}) gives {by_letter[letter]} twice in {ops!r}",
                                fix=f"give each dimension once, e.g. {code[0].lower()}({letter}{pairs[by_letter[letter]]})")
        pairs[by_letter[letter]] = value
    return _parse_variant(code, pairs, n, where)


def _parse_variant(code: str, variant: Any, n: int, where: str) -> tuple:
    """``variant`` (a mapping or pairs ``name -> value``) of slot ``n``'s op ``code`` as sorted,
    normalised pairs.

    Raises:
        LvsearchError: not a mapping, an unknown dimension, or an invalid value (naming ``where``).
    """
    if isinstance(variant, (dict, tuple, list)) and not variant:
        return ()
    if isinstance(variant, dict):
        items = list(variant.items())
    else:
        try:
            items = [(k, v) for k, v in variant]
        except (TypeError, ValueError):
            raise LvsearchError(f"{where}: the variant of slot {n} must be an object, got {variant!r}",
                                fix='e.g. {"heads": 2} for SA, {} for the default') from None
    spec = op_registry.get(code)
    out = {}
    for name, value in items:
        try:
            dim = spec.dimension(name)
        except KeyError:
            raise LvsearchError(f"{where}: slot {n} ({code}) has unknown variant dimension {name!r}",
                                fix=_dims_of(code)) from None
        try:
            out[name] = dim.normalise(value)
        except ValueError as e:
            raise LvsearchError(f"{where}: slot {n} ({code}) has {name} {value!r}: {e}", fix=_dims_of(code)) from None
    return tuple(sorted(out.items()))


def _format_value(value: Any) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def variant_suffix(code: str, variant: tuple) -> str:
    """The compact suffix of a variant: ``""`` for the default, else ``"(h2)"``."""
    if not variant:
        return ""
    spec = op_registry.get(code)
    return "(" + ",".join(f"{spec.dimension(name).letter}{_format_value(v)}" for name, v in variant) + ")"


def variant_label(code: str, variant: tuple) -> str:
    """A slot's choice for humans: ``"SA"``, ``"SA heads=2"``, ``"FF inner=0.5"``."""
    return code + "".join(f" {name}={_format_value(v)}" for name, v in variant)


def _parse_inputs(
    inputs: Sequence[Iterable[int]], num_slots: int, source: str | os.PathLike | None = None
) -> tuple[tuple[int, ...], ...]:
    """Normalise and check inputs: slot n (1-based) may only read outputs 0..n-1."""
    where = _where(source)
    if len(inputs) != num_slots:
        raise LvsearchError(
            f"{where}: {len(inputs)} input lists for {num_slots} slots",
            fix="give exactly one list of inputs per slot",
        )
    out = []
    for n, inp in enumerate(inputs, start=1):
        if isinstance(inp, (str, bytes)) or not isinstance(inp, Iterable):
            raise LvsearchError(
                f"{where}: inputs of slot {n} must be a list of integers, got {inp!r}",
                fix=f"e.g. [{n - 1}] for the sequential stack",
            )
        items = list(inp)
        for i in items:
            if not isinstance(i, int) or isinstance(i, bool):
                raise LvsearchError(
                    f"{where}: inputs of slot {n} must be integers, got {i!r}",
                    fix=f"use indices 0..{n - 1} (0 = embedding output)",
                )
            if i >= n or i < 0:
                what = "itself" if i == n else ("a later slot" if i > n else "a negative index")
                raise LvsearchError(
                    f"{where}: slot {n} reads input {i}, which is {what}",
                    fix=f"slot {n} may only read outputs 0..{n - 1} (0 = embedding output)",
                )
        if not items:
            raise LvsearchError(
                f"{where}: slot {n} has no inputs",
                fix=f"every slot needs at least one input, e.g. [{n - 1}]",
            )
        out.append(tuple(sorted(set(items))))
    return tuple(out)


def _check_variants(ops: tuple[str, ...], variants: Any, source: str | os.PathLike | None) -> tuple:
    where = _where(source)
    if isinstance(variants, (str, bytes, dict)) or not isinstance(variants, Iterable):
        raise LvsearchError(f"{where}: 'variants' must be a list with one object per slot",
                            fix='e.g. [{"kernel": 3}, {}, {"heads": 2}] ({} = the default)')
    variants = list(variants)
    if len(variants) != len(ops):
        raise LvsearchError(f"{where}: {len(variants)} variants for {len(ops)} slots",
                            fix="give exactly one variant object per slot ({} = the default)")
    return tuple(_parse_variant(op, v, n, where) for n, (op, v) in enumerate(zip(ops, variants), start=1))


@dataclass(frozen=True)
class Arch:
    """One architecture: an op and a set of inputs per slot.

    Args:
        ops: op codes per slot (``("SA", "FF", ...)``) or the compact string (``"sf..."``,
            with variant suffixes ``"s(h2)f..."``).
        inputs: per slot, the indices of the earlier outputs it mixes (0 = embedding
            output); slot ``n`` (1-based) may use ``0..n-1``. ``None`` = sequential
            (``inputs[n-1] = (n-1,)``).
        variants: per slot, its variant (a mapping or pairs ``name -> value`` of its op's
            elastic dimensions; empty = default). ``None`` = the compact string's suffixes,
            or every slot at its default.

    Raises:
        LvsearchError: unknown op, wrong number of input lists, an input referring to the
            slot itself or a later slot, an empty input set, a variant dimension the op does
            not have or an invalid value (e.g. an even DC kernel), or variants given both as
            suffixes and as ``variants``.
    """

    ops: tuple[str, ...]
    inputs: tuple[tuple[int, ...], ...] = None  # type: ignore[assignment]
    variants: tuple[tuple[tuple[str, Any], ...], ...] = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        ops, from_text = _parse_slots(self.ops)
        if not ops:
            raise LvsearchError("architecture has no slots", fix="give at least one op")
        inputs = self.inputs
        if inputs is None:
            inputs = [(n - 1,) for n in range(1, len(ops) + 1)]
        variants = self.variants
        if variants is not None and from_text is not None and any(from_text):
            raise LvsearchError("architecture: variants given both as suffixes and as variants",
                                fix="give them in one place")
        if variants is None:
            variants = from_text or ((),) * len(ops)
        variants = _check_variants(ops, variants, None)
        object.__setattr__(self, "ops", ops)
        object.__setattr__(self, "inputs", _parse_inputs(inputs, len(ops)))
        object.__setattr__(self, "variants", variants)

    # ----------------------------------------------------------------- constructors
    @classmethod
    def sequential(cls, ops: str | Iterable[str]) -> "Arch":
        """The plain stack: slot ``n`` reads only output ``n-1`` (LV-BERT); a compact string keeps
        its variant suffixes."""
        return cls(ops if isinstance(ops, str) else tuple(ops), None)

    @classmethod
    def from_dict(cls, d: Any, source: str | os.PathLike | None = None) -> "Arch":
        """Parse the JSON object written by :meth:`to_dict`.

        Raises:
            LvsearchError: not an object, missing/wrong format tag, unknown keys, bad ops or
                inputs; the message names ``source``.
        """
        where = _where(source)
        if not isinstance(d, dict):
            raise LvsearchError(f"{where} must hold a JSON object, got {type(d).__name__}",
                                fix='write an object like the best.json of \'lvsearch evolve\' '
                                    '({"format": ..., "ops": [...], "inputs": [...]})')
        fmt = d.get("format")
        if fmt is None and isinstance(d.get("topk"), list):  # a search's topk.json: a list, not one arch
            from lvsearch.ui import plural

            raise LvsearchError(f"{where} is a search's top-k list ({plural(len(d['topk']), 'architecture')}), not one "
                                "architecture",
                                fix="pass the search's best.json or pick.json for one architecture, or add "
                                    "--finalists K to 'lvsearch retrain' to retrain the list's best K")
        if fmt is None:
            raise LvsearchError(f"{where} has no format tag",
                                fix=f'add "format": "{ARCH_FORMAT}"')
        if fmt not in ARCH_FORMATS:
            other = isinstance(fmt, str) and fmt.startswith("lvsearch.") and not fmt.startswith("lvsearch.arch/")
            raise LvsearchError(f"{where} has format {fmt!r}, expected {' or '.join(map(repr, ARCH_FORMATS))}",
                                fix="it is another lvsearch file, not an architecture: pass an architecture file "
                                    "(e.g. best.json from 'lvsearch evolve')" if other
                                else "regenerate the file with this version of lvsearch")
        unknown = [k for k in d if k not in _ARCH_KEYS]
        if unknown:
            import difflib

            k = unknown[0]
            close = difflib.get_close_matches(k, _ARCH_KEYS, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"valid keys: {', '.join(_ARCH_KEYS)}"
            raise LvsearchError(f"{where}: unknown key {k!r}", fix=hint)
        if "ops" not in d:
            raise LvsearchError(f"{where} has no 'ops'", fix='add "ops": "ccsffs..."')
        ops, suffixes = _parse_slots(d["ops"], source)
        if not ops:
            raise LvsearchError(f"{where}: 'ops' is empty", fix="give one op per slot")
        variants = d.get("variants")
        if variants is not None and fmt == ARCH_FORMAT:
            raise LvsearchError(f"{where}: 'variants' needs format {ARCH_FORMAT_V2!r}",
                                fix=f'set "format": "{ARCH_FORMAT_V2}"')
        if variants is not None and suffixes is not None and any(suffixes):
            raise LvsearchError(f"{where}: variants given both as 'ops' suffixes and as 'variants'",
                                fix="give them in one place")
        variants = _check_variants(ops, variants if variants is not None else (suffixes or ((),) * len(ops)), source)
        if "num_slots" in d and d["num_slots"] != len(ops):
            raise LvsearchError(
                f"{where}: num_slots is {d['num_slots']} but 'ops' has {len(ops)} slots",
                fix="make num_slots equal to the number of ops",
            )
        inputs = d.get("inputs")
        if inputs is None:
            inputs = [[n - 1] for n in range(1, len(ops) + 1)]
        if not isinstance(inputs, list):
            raise LvsearchError(f"{where}: 'inputs' must be a list of lists",
                                fix="e.g. [[0], [1], [0, 2]]")
        return cls(ops, _parse_inputs(inputs, len(ops), source), variants)

    @classmethod
    def from_key(cls, key: str) -> "Arch":
        """Inverse of :attr:`key` (``compact`` or ``compact|i,j;k;…``).

        Raises:
            LvsearchError: unknown op letters or inputs that do not form a valid architecture.
        """
        compact, bar, rest = key.partition("|")
        if not bar:
            return cls.sequential(compact)
        try:
            inputs = tuple(tuple(int(i) for i in s.split(",")) for s in rest.split(";"))
        except ValueError:
            raise LvsearchError(f"architecture key {key!r}: inputs are not integers",
                                fix="keys look like 'sfc|0;1;0,2' (ops, then per slot its inputs)") from None
        return cls(compact, inputs)

    @classmethod
    def from_json(cls, path: str | os.PathLike) -> "Arch":
        """Read an architecture JSON file (see module docstring for the format).

        Raises:
            LvsearchError: missing file, invalid JSON, or an invalid architecture; the
                message names ``path``.
        """
        return cls.from_dict(read_json(path, what="architecture file"), source=path)

    # ----------------------------------------------------------------- views
    @property
    def num_slots(self) -> int:
        """Number of slots (layers)."""
        return len(self.ops)

    def __len__(self) -> int:
        return len(self.ops)

    @property
    def compact(self) -> str:
        """The ops as one letter per slot (``c`` = DC, ``s`` = SA, ``f`` = FF, ... :mod:`lvsearch.ops`),
        each non-default variant as a suffix (``s(h2)``, :func:`variant_suffix`)."""
        table = op_registry.specs()
        return "".join(table[op].letter + variant_suffix(op, v) for op, v in zip(self.ops, self.variants))

    @property
    def letters(self) -> str:
        """The ops as one letter per slot, without variants."""
        table = op_registry.specs()
        return "".join(table[op].letter for op in self.ops)

    @property
    def has_variants(self) -> bool:
        """True when some slot has a non-default variant."""
        return any(self.variants)

    def choice(self, n: int) -> tuple[str, tuple]:
        """Slot ``n``'s (1-based) choice: ``(op, variant)``."""
        return self.ops[n - 1], self.variants[n - 1]

    def slot_code(self, n: int) -> str:
        """Slot ``n``'s (1-based) choice as its op code plus variant suffix (``"SA"``, ``"SA(h2)"``)."""
        op, variant = self.choice(n)
        return op + variant_suffix(op, variant)

    def label(self, n: int) -> str:
        """Slot ``n``'s (1-based) choice for humans (``"SA heads=2"``, :func:`variant_label`)."""
        return variant_label(*self.choice(n))

    @property
    def is_sequential(self) -> bool:
        """True when every slot reads only the previous output."""
        return all(inp == (n - 1,) for n, inp in enumerate(self.inputs, start=1))

    @property
    def key(self) -> str:
        """Canonical key: the compact string (with variant suffixes), plus ``|`` and the inputs
        when not sequential.

        The inputs part lists, per slot, its sorted inputs joined by ``,``, slots joined by
        ``;``. Two archs are equal iff their keys are equal.
        """
        if self.is_sequential:
            return self.compact
        return self.compact + "|" + ";".join(",".join(map(str, inp)) for inp in self.inputs)

    def prefix(self, n: int) -> "Arch":
        """The first ``n`` slots as an Arch (its key identifies a shared prefix)."""
        if not 1 <= n <= self.num_slots:
            raise ValueError(f"prefix length {n} outside 1..{self.num_slots}")
        return Arch(self.ops[:n], self.inputs[:n], self.variants[:n])

    def __str__(self) -> str:
        return self.key

    def to_dict(self, *, space: str | None = None, meta: dict | None = None) -> dict:
        """JSON-ready dict with the format tag (v1 without variants, v2 with, module docstring);
        ``space`` and ``meta`` are informative."""
        d: dict[str, Any] = {
            "format": ARCH_FORMAT_V2 if self.has_variants else ARCH_FORMAT,
            "ops": self.letters,
        }
        if self.has_variants:
            d["variants"] = [dict(v) for v in self.variants]
        d.update({"inputs": [list(inp) for inp in self.inputs], "num_slots": self.num_slots})
        if space is not None:
            d["space"] = space
        if meta is not None:
            d["meta"] = meta
        return d

    def to_json(self, path: str | os.PathLike, *, space: str | None = None,
                meta: dict | None = None) -> None:
        """Write :meth:`to_dict` to ``path`` atomically."""
        atomic_write_json(path, self.to_dict(space=space, meta=meta))


# --------------------------------------------------------------------------- references
#: LV-BERT-small layer order (Yu et al. 2021, table/figure of the searched model),
#: 0 = DC, 1 = SA, 2 = FF.
LVBERT_SMALL_ORDER: tuple[int, ...] = (
    0, 0, 1, 2, 2, 1, 0, 2, 2, 1, 0, 0, 1, 2, 0, 2, 1, 0, 2, 0, 1, 1, 2, 1,
)
_LVBERT_CODES = ("DC", "SA", "FF")

#: Names accepted by :func:`reference_arch` (plus ``random:SEED``).
REFERENCE_ARCHS: tuple[str, ...] = ("bert", "sandwich", "lvbert-paper")


def _bert_ops(n: int) -> list[str]:
    return ["SA" if i % 2 == 0 else "FF" for i in range(n)]


def _sandwich_ops(n: int) -> list[str]:
    # Press et al. 2020: s^k (sf)^(P-k) f^k for P = n // 2 sublayer pairs. We use the
    # sandwich coefficient k = P // 2 (24 slots: 6 SA, 6 interleaved pairs, 6 FF). With an
    # odd slot count one extra SA leads.
    pairs = n // 2
    k = pairs // 2
    return ["SA"] * (n % 2) + ["SA"] * k + ["SA", "FF"] * (pairs - k) + ["FF"] * k  # n % 2 + 2 · pairs = n ops


#: What to pass instead of a bad architecture spec (the ``fix`` of its errors).
SPEC_FIX = "pass an architecture JSON file (e.g. best.json from 'lvsearch evolve') or a reference name: " + \
    ", ".join(REFERENCE_ARCHS) + ", random:SEED"


def _random_seed(name: str) -> int:
    """The seed of ``random:SEED``. Raises LvsearchError when SEED is not an integer."""
    seed_text = name.split(":", 1)[1]
    try:
        return int(seed_text)
    except ValueError:
        raise LvsearchError(f"reference architecture {name!r}: seed {seed_text!r} is not an integer",
                            fix="use random:SEED, e.g. random:0") from None


def check_reference_name(name: str) -> None:
    """Check a reference architecture name without a search space (what :func:`reference_arch`
    accepts: ``bert``, ``sandwich``, ``lvbert-paper``, ``random:SEED``); whether it fits a space
    is checked when it is built.

    Raises:
        LvsearchError: an empty name, an unknown name (with the closest one, and for a
            comma-separated list the verb that takes one), or a seed that is not an integer.
    """
    if not name.strip():
        raise LvsearchError("the architecture is empty", fix=SPEC_FIX)
    if name.startswith("random:"):
        _random_seed(name)
        return
    if name in REFERENCE_ARCHS:
        return
    import difflib

    names = list(REFERENCE_ARCHS) + ["random:SEED"]
    if "," in name:
        raise LvsearchError(f"unknown reference architecture {name!r}: a comma-separated list names several",
                            fix="pass one architecture here; a list is for 'lvsearch retrain --finalists K'")
    close = difflib.get_close_matches(name, names, n=1)
    raise LvsearchError(
        f"unknown reference architecture {name!r}",
        fix=(f"did you mean {close[0]!r}? " if close else "")
        + f"use one of {', '.join(names)} or a path to an architecture JSON file",
    )


def reference_arch(name: str, space: "SearchSpace") -> Arch:
    """A named reference architecture with ``space.num_slots`` slots, sequential inputs.

    Names:
        ``bert``: interleaved ``s f s f ...`` (Devlin et al. 2019; odd slot counts end in s).
        ``sandwich``: sandwich transformer (Press et al. 2020) ``s^k (s f)^(P-k) f^k`` with
        ``P = num_slots // 2`` and ``k = P // 2`` (24 slots: ``ssssss`` + 6 x ``sf`` +
        ``ffffff``); an odd slot count adds one leading ``s``.
        ``lvbert-paper``: the LV-BERT-small order (Yu et al. 2021), 24 slots only.
        ``random:SEED``: ``space.sample(random.Random(SEED))``.

    Raises:
        LvsearchError: a bad name (:func:`check_reference_name`), ``lvbert-paper`` with a slot
            count other than 24, or an architecture using an op the space does not allow.
    """
    check_reference_name(name)
    n = space.num_slots
    if name.startswith("random:"):
        return space.sample(random.Random(_random_seed(name)))
    if name == "bert":
        ops = _bert_ops(n)
    elif name == "sandwich":
        ops = _sandwich_ops(n)
    else:  # lvbert-paper
        if n != len(LVBERT_SMALL_ORDER):
            raise LvsearchError(
                f"reference architecture 'lvbert-paper' has 24 slots, but search space "
                f"{space.name!r} has {n}",
                fix="use a 24-slot space (retrain and train-supernet: --set num_slots=24) or another reference "
                    "(bert, sandwich, random:SEED)",
            )
        ops = [_LVBERT_CODES[i] for i in LVBERT_SMALL_ORDER]
    arch = Arch.sequential(ops)
    space.validate(arch, source=f"reference architecture {name!r}")
    return arch


def arch_file(spec: str | os.PathLike) -> Path | None:
    """The architecture JSON file a user's spec names, or None when the spec is a name for
    :func:`reference_arch`: a file is an existing path, or text that ends in ``.json`` or holds
    a path separator (no name does); anything else, the empty spec included, is a name."""
    text = os.fspath(spec)
    if not text.strip() or text in REFERENCE_ARCHS or text.startswith("random:"):
        return None
    path = Path(text)
    return path if path.exists() or text.endswith(".json") or "/" in text or os.sep in text else None


def check_arch_spec(spec: str | os.PathLike) -> Path | None:
    """Check a user's architecture spec as far as it can be checked without a search space:
    returns the architecture file it names, read and valid (:meth:`Arch.from_json`), or None
    for a valid reference name (:func:`check_reference_name`). The fit to a space is checked by
    :func:`resolve_arch`.

    Raises:
        LvsearchError: an empty spec; a file missing, not JSON or not an architecture; an
            unknown name or a ``random:`` seed that is not an integer."""
    path = arch_file(spec)
    if path is None:
        check_reference_name(os.fspath(spec))
    else:
        Arch.from_json(path)
    return path


def resolve_arch(spec: str | os.PathLike, space: "SearchSpace") -> Arch:
    """Turn a user's architecture spec into a validated :class:`Arch`.

    ``spec`` is a path to an architecture JSON file, or a name accepted by
    :func:`reference_arch` (``bert``, ``sandwich``, ``lvbert-paper``, ``random:SEED``).

    Raises:
        LvsearchError: unknown name / missing file / invalid file, or an architecture that
            does not fit ``space``.
    """
    path = arch_file(spec)
    if path is None:
        return reference_arch(os.fspath(spec), space)  # an unknown name raises "unknown reference architecture"
    arch = Arch.from_json(path)
    space.validate(arch, source=path)
    return arch
