"""Search spaces: which ops each slot may hold and which inputs it may mix.

A search space is a YAML file in the top-level ``search_spaces/`` folder::

    name: lvbert-elc
    description: LV-BERT ops with ELC-BERT connectivity
    num_slots: 24
    ops: [SA, FF, DC]
    connectivity: elc        # sequential | elc

``ops`` may instead be a mapping that gives an op's *variants* (its elastic dimensions,
:class:`lvsearch.ops.base.Elastic`) as lists of allowed values; an op mapped to ``{}`` or
nothing has none::

    ops:
      SA: {heads: [2, 4]}          # heads of width model.hidden / model.heads
      FF: {inner: [0.5, 1, 2]}     # multiples of model.ff_inner (a space works at any size)
      DC: {kernel: [3, 9, 15]}     # odd kernel widths
      LA: {}

A slot then chooses an op and a value per listed dimension (``lvsearch.arch``: ``s(h2)``);
an architecture may leave a dimension out (the op's default, e.g. the reference ``bert``).

``connectivity: sequential`` fixes ``inputs[n] = {n-1}`` (LV-BERT, Yu et al. 2021).
``connectivity: elc`` makes connectivity searchable: slot ``n`` always mixes the previous
output ``n-1`` and may mix any earlier output ``0..n-2`` (ELC-BERT, Charpentier & Samuel
2023, restricted to a searchable subset of predecessors).

:class:`SearchSpace` also holds the random primitives the searches build on: uniform
sampling (single-path sampling of the supernet, LV-BERT eq. 6-7) and mutation (LV-BERT
section 3.3 evolution). All randomness comes from a ``random.Random`` passed in, so a seeded
run is reproducible. Crossover is DEAP's (``cxUniform`` / ``cxOnePoint`` / ``cxTwoPoint`` on
the slot list, registered by :class:`lvsearch.search.strategies.breeding.Breeding`).
"""

from __future__ import annotations

import difflib
import os
import random
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import lvsearch
from lvsearch import ops as op_registry
from lvsearch.arch import Arch
from lvsearch.errors import LvsearchError
from lvsearch.io import read_yaml

#: Allowed values of ``connectivity``.
CONNECTIVITIES: tuple[str, ...] = ("sequential", "elc")
#: Upper end of the per-architecture keep probability of a sparse-mixing draw
#: (:meth:`SearchSpace.sample_sparse`); a uniform draw keeps each optional input with 0.5.
SPARSE_KEEP_MAX: float = 0.2
_SPACE_KEYS: tuple[str, ...] = ("name", "description", "num_slots", "ops", "connectivity")
#: The most slots a space may have (LV-BERT searches 24; a supernet of 1024 slots at the base
#: size holds ~3·10^9 weights). The memory a space asks for is checked besides, per model size
#: (:func:`lvsearch.model.dims.check_model_memory`).
MAX_SLOTS: int = 1024
#: The longest ``name`` and ``description`` a space may have (characters).
MAX_NAME_CHARS, MAX_DESCRIPTION_CHARS = 200, 10_000


def _shown(value: Any, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters, for messages about a bad value."""
    text = repr(value) if not isinstance(value, (dict, list)) or len(value) < 20 else f"a {type(value).__name__}"
    return text if len(text) <= limit else text[:limit - 3] + "..."


def search_spaces_dir() -> Path:
    """The repository's ``search_spaces/`` folder (next to the ``lvsearch`` package)."""
    return Path(lvsearch.__file__).resolve().parents[1] / "search_spaces"


def available_spaces() -> list[str]:
    """Names of the YAML files in :func:`search_spaces_dir`."""
    d = search_spaces_dir()
    return sorted(p.stem for p in d.glob("*.yaml")) if d.is_dir() else []


@dataclass(frozen=True)
class SearchSpace:
    """Ops per slot and the connectivity rule.

    Attributes:
        name: short name (the YAML file's stem unless ``name:`` is given).
        num_slots: number of slots (layers) of every architecture in the space.
        ops: allowed op codes, registered ops (:mod:`lvsearch.ops`: ``SA``, ``FF``, ``DC``,
            ``LA``, ...), in canonical order.
        connectivity: ``"sequential"`` or ``"elc"`` (see module docstring).
        description: free text.
        source: the YAML file it was loaded from, or ``None``.
        elastic: per op with variants, ``(code, ((dimension, allowed values), ...))``, in
            canonical op order, dimensions sorted by name, values sorted (filled from the
            mapping form of ``ops``, module docstring).
    """

    name: str
    num_slots: int
    ops: tuple[str, ...]
    connectivity: str = "sequential"
    description: str = ""
    source: Path | None = field(default=None, compare=False)
    elastic: tuple = ()

    def __post_init__(self) -> None:
        where = f"search space {self.source}" if self.source else f"search space {_shown(self.name)}"
        if not isinstance(self.num_slots, int) or isinstance(self.num_slots, bool) or self.num_slots < 1:
            raise LvsearchError(f"{where}: num_slots must be a positive integer, got {_shown(self.num_slots)}",
                                fix="e.g. num_slots: 24")
        if self.num_slots > MAX_SLOTS:
            raise LvsearchError(f"{where}: num_slots {self.num_slots:,} is above the {MAX_SLOTS:,} slots lvsearch "
                                "builds (LV-BERT searches 24)", fix=f"use num_slots ≤ {MAX_SLOTS}, e.g. num_slots: 24")
        for key, value, limit in (("name", self.name, MAX_NAME_CHARS),
                                  ("description", self.description, MAX_DESCRIPTION_CHARS)):
            if not isinstance(value, str):
                raise LvsearchError(f"{where}: {key} must be a string, got {_shown(value)}",
                                    fix=f"quote it: {key}: \"...\"")
            if len(value) > limit:
                raise LvsearchError(f"{where}: {key} has {len(value):,} characters, more than {limit:,}",
                                    fix=f"shorten {key}")
        if isinstance(self.ops, dict):
            self._parse_variants(where)
        ops = list(self.ops) if isinstance(self.ops, (list, tuple)) else None
        if not ops:
            raise LvsearchError(f"{where}: ops must be a non-empty list", fix="e.g. ops: [SA, FF, DC]")
        registered = op_registry.codes()
        for op in ops:
            if not isinstance(op, str) or op.upper() not in registered:
                raise LvsearchError(f"{where}: unknown op {_shown(op)}",
                                    fix=f"use registered ops: {op_registry.describe()}")
        norm = tuple(op for op in registered if op in {o.upper() for o in ops})
        object.__setattr__(self, "ops", norm)
        if not isinstance(self.connectivity, str) or self.connectivity not in CONNECTIVITIES:
            close = (difflib.get_close_matches(self.connectivity, CONNECTIVITIES, n=1)
                     if isinstance(self.connectivity, str) else [])
            raise LvsearchError(
                f"{where}: unknown connectivity {_shown(self.connectivity)}",
                fix=(f"did you mean {close[0]!r}? " if close else "") + f"use one of {', '.join(CONNECTIVITIES)}",
            )

    def _parse_variants(self, where: str) -> None:
        registered = op_registry.codes()
        elastic = {}
        for op, dims in self.ops.items():
            code = op.upper() if isinstance(op, str) else op
            if code not in registered:
                raise LvsearchError(f"{where}: unknown op {_shown(op)}",
                                    fix=f"use registered ops: {op_registry.describe()}")
            spec = op_registry.get(code)
            listing = "; ".join(f"{e.name} ({e.unit})" for e in spec.elastic) or "none"
            if dims is None:
                dims = {}
            if not isinstance(dims, dict):
                raise LvsearchError(f"{where}: ops.{code} must map variant dimensions to lists of values, got "
                                    f"{_shown(dims)}",
                                    fix=f"e.g. ops: {{SA: {{heads: [2, 4]}}, FF: {{}}}}; {code}'s dimensions: {listing}")
            pairs = []
            for name, values in dims.items():
                try:
                    dim = spec.dimension(name)
                except (KeyError, TypeError):
                    raise LvsearchError(f"{where}: ops.{code} has unknown variant dimension {_shown(name)}",
                                        fix=f"{code}'s elastic dimensions: {listing}") from None
                if not isinstance(values, list) or not values:
                    raise LvsearchError(f"{where}: ops.{code}.{name} must be a non-empty list of values, got "
                                        f"{_shown(values)}",
                                        fix=f"give a list of {dim.unit}, e.g. {name}: [...]")
                norm = set()
                for v in values:
                    try:
                        norm.add(dim.normalise(v))
                    except ValueError as e:
                        raise LvsearchError(f"{where}: ops.{code}.{name} has {_shown(v)}: {e}",
                                            fix=f"{name} takes {dim.unit}") from None
                pairs.append((name, tuple(sorted(norm))))
            if pairs:
                elastic[code] = tuple(sorted(pairs))
        object.__setattr__(self, "ops", tuple(self.ops))
        object.__setattr__(self, "elastic", tuple((c, elastic[c]) for c in registered if c in elastic))

    # ----------------------------------------------------------------- loading
    @classmethod
    def from_dict(cls, d: Any, source: str | os.PathLike | None = None, default_name: str = "custom") -> "SearchSpace":
        """Build a space from a parsed YAML mapping.

        Raises:
            LvsearchError: not a mapping, unknown key (with the nearest valid key), missing
                ``num_slots``/``ops``, bad values. The message names ``source``.
        """
        where = f"search space {source}" if source is not None else "search space"
        if not isinstance(d, dict):
            raise LvsearchError(f"{where} must be a YAML mapping", fix="see search_spaces/lvbert.yaml")
        for k in d:
            if k not in _SPACE_KEYS:
                close = difflib.get_close_matches(k, _SPACE_KEYS, n=1) if isinstance(k, str) else []
                raise LvsearchError(
                    f"{where}: unknown key {_shown(k)}",
                    fix=(f"did you mean {close[0]!r}? " if close else "") + f"valid keys: {', '.join(_SPACE_KEYS)}",
                )
        for k in ("num_slots", "ops"):
            if k not in d:
                raise LvsearchError(f"{where}: missing key {k!r}", fix="see search_spaces/lvbert.yaml")
        return cls(
            name=d.get("name", default_name),
            num_slots=d["num_slots"],
            ops=tuple(d["ops"]) if isinstance(d["ops"], list) else (dict(d["ops"]) if isinstance(d["ops"], dict)
                                                                     else d["ops"]),
            connectivity=d.get("connectivity", "sequential"),
            description="" if d.get("description") is None else d["description"],
            source=Path(source) if source is not None else None,
        )

    @classmethod
    def load(cls, name_or_path: str | os.PathLike) -> "SearchSpace":
        """Load a space by bare name (``search_spaces/NAME.yaml``) or by YAML path.

        Raises:
            LvsearchError: unknown name (with the nearest available one), missing file, a file
                over the bounded reader's caps (:func:`lvsearch.io.read_yaml`: size, depth,
                alias expansion), invalid YAML or an invalid space.
        """
        text = os.fspath(name_or_path)
        base, at, slots = text.rpartition("@")
        if at and slots.isdigit() and base and len(slots) <= 9:
            # "NAME@N" is how with_num_slots() names a shrunk space.
            return cls.load(base).with_num_slots(int(slots))
        is_path = text.endswith((".yaml", ".yml")) or os.sep in text or "/" in text
        if is_path:
            path = Path(text)
        else:
            path = search_spaces_dir() / f"{text}.yaml"
            if not path.is_file():
                names = available_spaces()
                close = difflib.get_close_matches(text, names, n=1)
                raise LvsearchError(
                    f"unknown search space {text!r} (no {path})",
                    fix=(f"did you mean {close[0]!r}? " if close else "")
                    + f"available: {', '.join(names) or 'none'}; or pass a path to a YAML file",
                )
        data = read_yaml(path, what="search space file")
        return cls.from_dict(data, source=path, default_name=path.stem)

    def to_dict(self) -> dict:
        """The YAML mapping of this space (round-trips through :meth:`from_dict`)."""
        variants = self.variant_values
        return {
            "name": self.name,
            "description": self.description,
            "num_slots": self.num_slots,
            "ops": ({op: {k: list(v) for k, v in variants(op).items()} for op in self.ops} if self.elastic
                    else list(self.ops)),
            "connectivity": self.connectivity,
        }

    def variant_values(self, op: str) -> dict[str, tuple]:
        """``{dimension: allowed values}`` of op ``op`` in this space (``{}``: no variants)."""
        return dict(dict(self.elastic).get(op, ()))

    def choices(self) -> list[tuple[str, tuple]]:
        """Every choice a slot has, ``(op, variant)``, in canonical order: each op, and for an
        op with variants every combination of its listed values (the product, dimensions
        sorted by name); ``(op, ())`` for an op without."""
        import itertools

        out = []
        for op in self.ops:
            listed = self.variant_values(op)
            names = sorted(listed)
            for values in itertools.product(*(listed[n] for n in names)):
                out.append((op, tuple(zip(names, values))))
        return out

    def _draw_variant(self, op: str, rng: random.Random) -> tuple:
        # No random numbers are drawn for an op without variants (spaces without variants
        # sample exactly as before variants existed).
        return tuple((name, rng.choice(values)) for name, values in sorted(self.variant_values(op).items()))

    # ----------------------------------------------------------------- queries
    @property
    def searchable_inputs(self) -> bool:
        """True when connectivity is searched (``elc``), False for the sequential stack."""
        return self.connectivity == "elc"

    @classmethod
    def resolve(cls, name_or_path: str | os.PathLike, num_slots: int | None = None, *,
                source: str = "recipe") -> "SearchSpace":
        """The one rule from a recipe's (or a flag's) ``space`` and ``num_slots`` to a space:
        :meth:`load` it, then resize it to ``num_slots`` when that is given and differs
        (``NAME@N``, :meth:`with_num_slots`). A bare family name (``lvbert``) thus names the
        family at any depth, and ``NAME@N`` a fixed depth.

        Raises:
            LvsearchError: as :meth:`load`, or ``num_slots`` below 1 (naming ``source``).
        """
        space = cls.load(name_or_path)
        if num_slots is None or num_slots == space.num_slots:
            return space
        if num_slots < 1:
            raise LvsearchError(f"{source}: num_slots must be ≥ 1, got {num_slots}", fix="e.g. num_slots=12")
        return space.with_num_slots(int(num_slots))

    def with_num_slots(self, n: int) -> "SearchSpace":
        """The same space with ``n`` slots (recipes shrink spaces for CPU runs).

        The result is named ``NAME@n`` (``load("NAME@n")`` rebuilds it) unless ``n`` is
        unchanged.
        """
        base = self.name.rpartition("@")[0] if "@" in self.name else self.name
        if n == self.num_slots:
            return self
        return replace(self, num_slots=n, name=f"{base}@{n}")

    def optional_inputs(self, n: int) -> range:
        """Inputs slot ``n`` (1-based) may add beyond ``n-1``: ``0..n-2`` for elc, none otherwise."""
        return range(0, n - 1) if self.searchable_inputs else range(0)

    def size(self) -> int:
        """Number of distinct architectures in the space."""
        conn = 2 ** sum(len(self.optional_inputs(n)) for n in range(1, self.num_slots + 1))
        return len(self.choices()) ** self.num_slots * conn

    def validate(self, arch: Arch, source: str | os.PathLike | None = None) -> Arch:
        """Check that ``arch`` belongs to this space; returns it unchanged.

        Raises:
            LvsearchError: wrong slot count, an op the space does not allow, a variant value
                the space does not list (a dimension left out is the op's default and
                allowed), or inputs the connectivity rule forbids (sequential: exactly ``{n-1}``; elc: must contain
                ``n-1``). The message names ``source`` and the space.
        """
        where = f"{source}" if source is not None else "architecture"
        sp = f"search space {self.name!r}" + (f" ({self.source})" if self.source else "")
        if arch.num_slots != self.num_slots:
            raise LvsearchError(
                f"{where} has {arch.num_slots} slots, but {sp} has {self.num_slots}",
                fix=f"pass --set num_slots={arch.num_slots} (a recipe's slot count; or --space "
                    f"{self.name.rpartition('@')[0] or self.name}@{arch.num_slots} where a command takes --space), "
                    "or use an architecture made for this space",
            )
        for n, (op, inp, variant) in enumerate(zip(arch.ops, arch.inputs, arch.variants), start=1):
            if op not in self.ops:
                raise LvsearchError(
                    f"{where}: slot {n} uses op {op}, which {sp} does not allow",
                    fix=f"allowed ops: {', '.join(self.ops)}",
                )
            listed = self.variant_values(op)
            for name, value in variant:
                if value not in listed.get(name, ()):
                    allowed = (f"{sp} allows {name} in {list(listed[name])} for {op}" if name in listed
                               else f"{sp} lists no {name} variants for {op}: leave {name} out (the default)")
                    raise LvsearchError(f"{where}: slot {n} uses {op} with {name} {value}, which {sp} does not allow",
                                        fix=allowed)
            if self.searchable_inputs:
                if n - 1 not in inp:
                    raise LvsearchError(
                        f"{where}: slot {n} does not read the previous output {n - 1}, which {sp} requires",
                        fix=f"add {n - 1} to the inputs of slot {n}",
                    )
            elif inp != (n - 1,):
                raise LvsearchError(
                    f"{where}: slot {n} has inputs {list(inp)}, but {sp} is sequential",
                    fix=f"use inputs [{n - 1}] for slot {n}, or an ELC search space (e.g. --set space=lvbert-elc)",
                )
        return arch

    # ----------------------------------------------------------------- sampling
    def sample(self, rng: random.Random, keep_input_prob: float = 0.5, dense_prob: float = 0.0) -> Arch:
        """Draw one architecture.

        Each slot's op is uniform over :attr:`ops`, independently (uniform single-path
        sampling, LV-BERT eq. 6-7), then each of the op's listed variant dimensions uniform
        over its values. With searchable connectivity the previous output is
        always kept; first, with probability ``dense_prob`` the whole architecture gets the
        dense mask (every slot reads all earlier outputs, ELC-BERT); otherwise each earlier
        output ``0..n-2`` is kept independently with probability ``keep_input_prob``.
        In sequential spaces the connectivity arguments are ignored and no extra random
        numbers are drawn.
        """
        ops, variants = [], []
        for _ in range(self.num_slots):
            ops.append(rng.choice(self.ops))
            variants.append(self._draw_variant(ops[-1], rng))
        if not self.searchable_inputs:
            return Arch(tuple(ops), None, tuple(variants))
        dense = dense_prob > 0 and rng.random() < dense_prob
        inputs = []
        for n in range(1, self.num_slots + 1):
            if dense:
                inputs.append(tuple(range(n)))
            else:
                kept = [i for i in self.optional_inputs(n) if rng.random() < keep_input_prob]
                inputs.append(tuple(kept) + (n - 1,))
        return Arch(tuple(ops), tuple(inputs), tuple(variants))

    def sample_sparse(self, rng: random.Random) -> Arch:
        """Draw one architecture from the sparse-mixing region: ops and variants as in
        :meth:`sample`, each optional input kept with a probability drawn per architecture
        uniformly from ``[0, SPARSE_KEEP_MAX]`` (so from no mixing at all, ``bert``'s
        connectivity, to about a fifth of the inputs). Uniform draws keep half the inputs, so
        their ELC mixing alone costs more than ``bert``'s whole latency margin on 24 slots
        (docs/results.md, "Retrained search points against `bert`"); these draws start a search
        where a fast architecture can be found (``evolve --sparse-init``). In sequential spaces
        this is :meth:`sample` (the same random numbers are drawn).
        """
        if not self.searchable_inputs:
            return self.sample(rng)
        return self.sample(rng, keep_input_prob=rng.uniform(0.0, SPARSE_KEEP_MAX))

    def mutate(self, arch: Arch, rng: random.Random, p: float = 0.1, input_p: float | None = None) -> Arch:
        """Mutation (LV-BERT section 3.3, probability 0.1 in the paper).

        Each slot's whole choice is re-drawn with probability ``p``: its op uniformly from
        :attr:`ops`, then its variant as in :meth:`sample` (the re-draw may return the same
        choice). In searchable spaces each optional input
        (``0..n-2`` of slot ``n``) is then flipped with probability ``input_p`` (``p`` when
        None, as before the two rates were separate; ``0`` draws no random numbers for the
        inputs: LV-BERT's mutation re-draws op genes only); the previous output is never
        removed. Returns a new Arch (``arch`` is not validated against the space).
        """
        ops, variants = list(arch.ops), list(arch.variants)
        for i in range(len(ops)):
            if rng.random() < p:
                ops[i] = rng.choice(self.ops)
                variants[i] = self._draw_variant(ops[i], rng)
        input_p = p if input_p is None else input_p
        if not self.searchable_inputs or input_p == 0:
            return Arch(tuple(ops), arch.inputs, tuple(variants))
        inputs = []
        for n, inp in enumerate(arch.inputs, start=1):
            s = set(inp)
            for i in self.optional_inputs(n):
                if rng.random() < input_p:
                    s ^= {i}
            s.add(n - 1)
            inputs.append(tuple(sorted(s)))
        return Arch(tuple(ops), tuple(inputs), tuple(variants))

    def mutate_one_op(self, arch: Arch, rng: random.Random) -> Arch:
        """The one-op neighbourhood move: one slot, uniform, gets another choice (op and
        variant, :meth:`choices`), uniform over the space's other choices; inputs unchanged.
        Every child differs from its parent in exactly one slot (a space with one choice
        returns ``arch`` unchanged)."""
        choices = self.choices()
        if len(choices) < 2:
            return arch
        ops, variants = list(arch.ops), list(arch.variants)
        i = rng.randrange(len(ops))
        ops[i], variants[i] = rng.choice([c for c in choices if c != (ops[i], variants[i])])
        return Arch(tuple(ops), arch.inputs, tuple(variants))
