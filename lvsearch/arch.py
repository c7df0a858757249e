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

An :class:`Arch` is frozen and hashable; :attr:`Arch.key` is a canonical string used for
memoisation and de-duplication. On disk it is JSON with a format tag::

    {"format": "lvsearch.arch/v1", "ops": "ccsffs...", "inputs": [[0], [1], ...],
     "num_slots": 24, "space": "lvbert", "meta": {...}}

``space`` and ``meta`` are optional and informative; validation against a search space is
done by :meth:`lvsearch.space.SearchSpace.validate`.

This module also holds the named reference architectures (:func:`reference_arch`) and
:func:`resolve_arch`, which turns a user's ``--arch`` string (a JSON path or a name) into an
``Arch``.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from lvsearch import ops as op_registry
from lvsearch.errors import LvsearchError
from lvsearch.io import atomic_write_json, read_json

if TYPE_CHECKING:  # pragma: no cover
    from lvsearch.space import SearchSpace

#: Format tag written into (and required in) every architecture JSON file.
ARCH_FORMAT = "lvsearch.arch/v1"
_ARCH_KEYS = ("format", "ops", "inputs", "num_slots", "space", "meta")


def _where(source: str | os.PathLike | None) -> str:
    return f"architecture file {source}" if source is not None else "architecture"


def _parse_ops(ops: str | Iterable[str], source: str | os.PathLike | None = None) -> tuple[str, ...]:
    """Normalise a compact string (``"csf"``) or a sequence of op codes to a tuple of codes."""
    where = _where(source)
    if isinstance(ops, str):
        letters = op_registry.letters()
        out = []
        for n, ch in enumerate(ops, start=1):
            if ch not in letters:
                raise LvsearchError(
                    f"{where}: slot {n} has unknown op letter {ch!r} in {ops!r}",
                    fix="use the letters of the registered ops: "
                    + ", ".join(f"{c} = {op}" for c, op in letters.items()),
                )
            out.append(letters[ch])
        return tuple(out)
    codes = op_registry.codes()
    out = []
    for n, op in enumerate(ops, start=1):
        if not isinstance(op, str) or op.upper() not in codes:
            raise LvsearchError(
                f"{where}: slot {n} has unknown op {op!r}",
                fix=f"use a registered op: {op_registry.describe()}",
            )
        out.append(op.upper())
    return tuple(out)


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


@dataclass(frozen=True)
class Arch:
    """One architecture: an op and a set of inputs per slot.

    Args:
        ops: op codes per slot (``("SA", "FF", ...)``) or the compact string (``"sf..."``).
        inputs: per slot, the indices of the earlier outputs it mixes (0 = embedding
            output); slot ``n`` (1-based) may use ``0..n-1``. ``None`` = sequential
            (``inputs[n-1] = (n-1,)``).

    Raises:
        LvsearchError: unknown op, wrong number of input lists, an input referring to the
            slot itself or a later slot, or an empty input set.
    """

    ops: tuple[str, ...]
    inputs: tuple[tuple[int, ...], ...] = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        ops = _parse_ops(self.ops)
        if not ops:
            raise LvsearchError("architecture has no slots", fix="give at least one op")
        inputs = self.inputs
        if inputs is None:
            inputs = [(n - 1,) for n in range(1, len(ops) + 1)]
        object.__setattr__(self, "ops", ops)
        object.__setattr__(self, "inputs", _parse_inputs(inputs, len(ops)))

    # ----------------------------------------------------------------- constructors
    @classmethod
    def sequential(cls, ops: str | Iterable[str]) -> "Arch":
        """The plain stack: slot ``n`` reads only output ``n-1`` (LV-BERT)."""
        return cls(_parse_ops(ops), None)

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
                                fix="write it with Arch.to_json")
        fmt = d.get("format")
        if fmt is None:
            raise LvsearchError(f"{where} has no format tag",
                                fix=f'add "format": "{ARCH_FORMAT}"')
        if fmt != ARCH_FORMAT:
            raise LvsearchError(f"{where} has format {fmt!r}, expected {ARCH_FORMAT!r}",
                                fix="regenerate the file with this version of lvsearch")
        unknown = [k for k in d if k not in _ARCH_KEYS]
        if unknown:
            import difflib

            k = unknown[0]
            close = difflib.get_close_matches(k, _ARCH_KEYS, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"valid keys: {', '.join(_ARCH_KEYS)}"
            raise LvsearchError(f"{where}: unknown key {k!r}", fix=hint)
        if "ops" not in d:
            raise LvsearchError(f"{where} has no 'ops'", fix='add "ops": "ccsffs..."')
        ops = _parse_ops(d["ops"], source)
        if not ops:
            raise LvsearchError(f"{where}: 'ops' is empty", fix="give one op per slot")
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
        return cls(ops, _parse_inputs(inputs, len(ops), source))

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
        """The ops as one letter per slot (``c`` = DC, ``s`` = SA, ``f`` = FF, ... :mod:`lvsearch.ops`)."""
        table = op_registry.specs()
        return "".join(table[op].letter for op in self.ops)

    @property
    def is_sequential(self) -> bool:
        """True when every slot reads only the previous output."""
        return all(inp == (n - 1,) for n, inp in enumerate(self.inputs, start=1))

    @property
    def key(self) -> str:
        """Canonical key: the compact string, plus ``|`` and the inputs when not sequential.

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
        return Arch(self.ops[:n], self.inputs[:n])

    def __str__(self) -> str:
        return self.key

    def to_dict(self, *, space: str | None = None, meta: dict | None = None) -> dict:
        """JSON-ready dict with the format tag; ``space`` and ``meta`` are informative."""
        d: dict[str, Any] = {
            "format": ARCH_FORMAT,
            "ops": self.compact,
            "inputs": [list(inp) for inp in self.inputs],
            "num_slots": self.num_slots,
        }
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
        LvsearchError: unknown name, bad seed, ``lvbert-paper`` with a slot count other than
            24, or an architecture using an op the space does not allow.
    """
    n = space.num_slots
    if name.startswith("random:"):
        seed_text = name.split(":", 1)[1]
        try:
            seed = int(seed_text)
        except ValueError:
            raise LvsearchError(f"reference architecture {name!r}: seed {seed_text!r} is not an integer",
                                fix="use random:SEED, e.g. random:0") from None
        return space.sample(random.Random(seed))
    if name == "bert":
        ops = _bert_ops(n)
    elif name == "sandwich":
        ops = _sandwich_ops(n)
    elif name == "lvbert-paper":
        if n != len(LVBERT_SMALL_ORDER):
            raise LvsearchError(
                f"reference architecture 'lvbert-paper' has 24 slots, but search space "
                f"{space.name!r} has {n}",
                fix="use a 24-slot search space (e.g. lvbert) or another reference (bert, sandwich, random:SEED)",
            )
        ops = [_LVBERT_CODES[i] for i in LVBERT_SMALL_ORDER]
    else:
        import difflib

        names = list(REFERENCE_ARCHS) + ["random:SEED"]
        close = difflib.get_close_matches(name, names, n=1)
        raise LvsearchError(
            f"unknown reference architecture {name!r}",
            fix=(f"did you mean {close[0]!r}? " if close else "")
            + f"use one of {', '.join(names)} or a path to an architecture JSON file",
        )
    arch = Arch.sequential(ops)
    space.validate(arch, source=f"reference architecture {name!r}")
    return arch


def resolve_arch(spec: str | os.PathLike, space: "SearchSpace") -> Arch:
    """Turn a user's architecture spec into a validated :class:`Arch`.

    ``spec`` is a path to an architecture JSON file, or a name accepted by
    :func:`reference_arch` (``bert``, ``sandwich``, ``lvbert-paper``, ``random:SEED``).

    Raises:
        LvsearchError: unknown name / missing file / invalid file, or an architecture that
            does not fit ``space``.
    """
    text = os.fspath(spec)
    if text in REFERENCE_ARCHS or text.startswith("random:"):
        return reference_arch(text, space)
    path = Path(text)
    if not path.exists() and not text.endswith(".json"):
        return reference_arch(text, space)  # raises "unknown reference architecture"
    arch = Arch.from_json(path)
    space.validate(arch, source=path)
    return arch
