"""The op registry: one module per slot op in this package, found automatically.

Each module ``lvsearch/ops/<name>.py`` (other than :mod:`.base` and names starting with ``_``)
defines ``SPEC``, an :class:`~lvsearch.ops.base.OpSpec`: its layer, how to build it from the
model dims, its FLOPs per token, its residual projection, plot colour and letter. Adding an op
is adding one module here (and naming its code in a search-space YAML); docs/architecture.md
"How to add an op" walks through :mod:`lvsearch.ops.local`.

The registry is loaded lazily, on the first call of a function below (the op modules import
torch; ``import lvsearch.ops`` and ``import lvsearch.arch`` do not).

Op modules import only torch, the standard library and ``.base`` (relative), never the rest of
lvsearch, because ``lvsearch export`` ships them as the op code of a Hugging Face folder
(:func:`module_files`). The one exception is an import inside ``try/except ImportError``
(DC's fused kernel), with a fallback for a folder loaded without lvsearch.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lvsearch.errors import LvsearchError

if TYPE_CHECKING:  # pragma: no cover
    from .base import OpSpec, SlotLayer

_HERE = Path(__file__).resolve().parent
_NOT_OPS = ("base",)


def op_module_names() -> list[str]:
    """Names of the op modules in this package (``["dc", "ff", "local", "sa"]``), sorted."""
    return sorted(m.name for m in pkgutil.iter_modules([str(_HERE)])
                  if m.name not in _NOT_OPS and not m.name.startswith("_") and not m.ispkg)


def check_spec(spec: Any, module: str) -> None:
    """Raise when ``spec`` (``module``'s ``SPEC``) is not a complete :class:`OpSpec`.

    Raises:
        LvsearchError: naming ``module`` and the missing or malformed part.
    """
    from .base import OpSpec, SlotLayer

    def bad(what: str) -> LvsearchError:
        return LvsearchError(f"op module {module}: {what}",
                             fix="define SPEC = OpSpec(code=..., letter=..., title=..., colour=..., order=..., "
                                 "layer=..., build=..., flops=..., residual=..., paper=...) (see lvsearch/ops/local.py)")

    if spec is None:
        raise bad("defines no SPEC")
    if not isinstance(spec, OpSpec):
        raise bad(f"SPEC is a {type(spec).__name__}, not an OpSpec")
    if not isinstance(spec.code, str) or not re.fullmatch(r"[A-Z][A-Z0-9]{1,7}", spec.code):
        raise bad(f"code {spec.code!r} must be 2-8 upper-case letters/digits, starting with a letter")
    if not isinstance(spec.letter, str) or not re.fullmatch(r"[a-z]", spec.letter):
        raise bad(f"letter {spec.letter!r} must be one lower-case letter")
    for name in ("title", "paper"):
        if not isinstance(getattr(spec, name), str) or not getattr(spec, name).strip():
            raise bad(f"{name} is empty")
    if not isinstance(spec.colour, str) or not re.fullmatch(r"#[0-9A-Fa-f]{6}", spec.colour):
        raise bad(f"colour {spec.colour!r} must be '#RRGGBB'")
    if not isinstance(spec.order, int) or isinstance(spec.order, bool) or spec.order < 0:
        raise bad(f"order {spec.order!r} must be a non-negative integer")
    if not (isinstance(spec.layer, type) and issubclass(spec.layer, SlotLayer)):
        raise bad(f"layer {spec.layer!r} is not a SlotLayer subclass")
    for name in ("build", "flops", "path_weights"):
        if not callable(getattr(spec, name)):
            raise bad(f"{name} is not callable")
    if not isinstance(spec.residual, str) or not spec.residual:
        raise bad("residual names no projection")
    from .base import Elastic

    if not isinstance(spec.elastic, tuple) or not all(isinstance(e, Elastic) for e in spec.elastic):
        raise bad("elastic must be a tuple of Elastic")
    for attr in ("name", "letter"):
        seen = [getattr(e, attr) for e in spec.elastic]
        if len(seen) != len(set(seen)):
            raise bad(f"two elastic dimensions share a {attr}")
    for e in spec.elastic:
        if not re.fullmatch(r"[a-z][a-z_]*", e.name) or not re.fullmatch(r"[a-z]", e.letter):
            raise bad(f"elastic dimension {e.name!r} needs a lower-case name and a one-letter letter")
        for name in ("default", "check", "size"):
            if not callable(getattr(e, name)):
                raise bad(f"elastic dimension {e.name}: {name} is not callable")
    if spec.build_shared is not None and not callable(spec.build_shared):
        raise bad("build_shared is not callable")


@functools.lru_cache(maxsize=None)
def _load() -> dict[str, "OpSpec"]:
    found = []
    for name in op_module_names():
        qual = f"{__name__}.{name}"
        try:
            module = importlib.import_module(qual)
        except Exception as e:  # noqa: BLE001 (any error in an op module is that module's)
            raise LvsearchError(f"op module {qual} cannot be imported: {type(e).__name__}: {e}",
                                fix=f"repair lvsearch/ops/{name}.py (see lvsearch/ops/local.py)") from None
        spec = getattr(module, "SPEC", None)
        check_spec(spec, qual)
        found.append((spec, qual))
    for attr in ("code", "letter", "order"):
        seen: dict = {}
        for spec, qual in found:
            key = getattr(spec, attr)
            if key in seen:
                raise LvsearchError(f"op modules {seen[key]} and {qual} both use {attr} {key!r}",
                                    fix=f"give {qual} another {attr}")
            seen[key] = qual
    found.sort(key=lambda sq: sq[0].order)
    return {spec.code: spec for spec, _ in found}


def specs() -> dict[str, "OpSpec"]:
    """``{code: OpSpec}`` of every registered op, in canonical order (``OpSpec.order``).

    Raises:
        LvsearchError: an op module that cannot be imported, lacks a complete ``SPEC``
            (:func:`check_spec`), or shares a code, letter or order with another.
    """
    return dict(_load())


def codes() -> tuple[str, ...]:
    """Registered op codes in canonical order (``("SA", "FF", "DC", "LA")``)."""
    return tuple(_load())


def letters() -> dict[str, str]:
    """``{letter: code}`` of the compact architecture form (``{"s": "SA", ...}``)."""
    return {s.letter: s.code for s in _load().values()}


def describe() -> str:
    """The registered ops for messages: ``"SA (s, self-attention), FF (f, feed-forward), ..."``."""
    return ", ".join(f"{s.code} ({s.letter}, {s.title})" for s in _load().values())


def get(code: str) -> "OpSpec":
    """The spec of op ``code``.

    Raises:
        LvsearchError: ``code`` is not registered (the message lists the registered ops).
    """
    table = _load()
    if code not in table:
        raise LvsearchError(f"unknown op {code!r}", fix=f"registered ops: {describe()}")
    return table[code]


def build(code: str, dims: Any) -> "SlotLayer":
    """The layer of op ``code`` for ``dims`` (``ModelDims`` or anything with :data:`~lvsearch.ops.base.DIMS_FIELDS`).

    Raises:
        LvsearchError: unknown op.
    """
    return get(code).build(dims)


def module_files() -> dict[str, Path]:
    """``{file name: path}`` of the op code an export ships: ``base.py`` and every op module."""
    _load()
    return {f"{n}.py": _HERE / f"{n}.py" for n in ("base", *op_module_names())}


def module_of(code: str) -> str:
    """The module name (``"local"``) defining op ``code``."""
    spec = get(code)
    for name in op_module_names():
        if getattr(importlib.import_module(f"{__name__}.{name}"), "SPEC", None) is spec:
            return name
    raise LookupError(code)  # pragma: no cover (every registered spec comes from a module)


__all__ = ["specs", "codes", "letters", "describe", "get", "build", "module_files", "module_of", "op_module_names",
           "check_spec"]
