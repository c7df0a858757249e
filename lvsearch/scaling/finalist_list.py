"""The finalists of a ``lvsearch retrain --finalists K`` job: the ``--arch`` input (a
``topk.json`` of ``lvsearch evolve``, a JSON list of architecture specs, one architecture JSON,
or comma-separated names/paths) read into the first K architectures, validated against the
recipe's space, checked for provenance and named ``NN-compact`` (:func:`resolve_finalists`).
The job that trains them is :mod:`lvsearch.scaling.finalists`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lvsearch.arch import ARCH_FORMAT, Arch, resolve_arch
from lvsearch.config import RetrainConfig
from lvsearch.errors import LvsearchError
from lvsearch.io import read_json


@dataclass(frozen=True)
class Finalist:
    """One finalist: its job name (``NN-compact``), architecture, the label of the ``--arch``
    entry it came from, and that entry's provenance meta (supernet, step, tokenizer, fitness)."""

    name: str
    arch: Arch
    source: str
    meta: dict



def _entries(spec: str) -> tuple[list[tuple[Any, str, dict]], str]:
    """The ``--arch`` input as ``[(arch or spec string, label, meta)]`` and a description.

    ``spec``: ``topk.json`` of ``lvsearch evolve`` (``{"topk": [{"key": …}, …]}``, best first;
    provenance meta from ``best.json`` beside it), a JSON list (items: a reference name or
    architecture-JSON path, an architecture object, or ``{"key": …}``), one architecture JSON,
    or comma-separated names/paths (``bert,sandwich,random:1``).
    """

    path = Path(spec)
    if not (path.suffix == ".json" or path.is_file()):
        items = [s.strip() for s in spec.split(",") if s.strip()]
        return [(s, s, {}) for s in items], "the comma-separated --arch list"
    data = read_json(path, what="finalist list (--arch)")

    def from_key(item: dict, where: str) -> Arch:
        try:
            return Arch.from_key(str(item["key"]))
        except LvsearchError as e:
            raise LvsearchError(f"{where}: {e}", fix="regenerate the file with lvsearch evolve") from None
        except (TypeError, ValueError):
            raise LvsearchError(f"{where}: key {item.get('key')!r} is not an architecture key",
                                fix="regenerate the file with lvsearch evolve") from None

    if isinstance(data, dict) and isinstance(data.get("topk"), list):
        meta: dict = {}
        best = path.parent / "best.json"
        if best.is_file():
            bm = (read_json(best, what="architecture file") or {}).get("meta") or {}
            meta = {k: bm[k] for k in ("supernet", "supernet_step", "tokenizer_sha256") if k in bm}
        out = []
        for i, item in enumerate(data["topk"], 1):
            if not isinstance(item, dict) or "key" not in item:
                raise LvsearchError(f"{path}: top-k entry {i} has no 'key'", fix="regenerate the file with lvsearch evolve")
            arch = from_key(item, f"{path}, top-k entry {i}")
            extra = {k: item[k] for k in ("fitness", "loss", "params", "flops") if item.get(k) is not None}
            out.append((arch, f"top-{i} {arch.key}", {**meta, **extra}))
        return out, str(path)
    if isinstance(data, dict) and data.get("format") == ARCH_FORMAT:
        return [(str(path), str(path), {})], str(path)
    if isinstance(data, list):
        out = []
        for i, item in enumerate(data, 1):
            where = f"{path}, item {i}"
            if isinstance(item, str):
                p = Path(item)
                if not p.is_absolute() and not p.exists() and (path.parent / p).exists():
                    item = str(path.parent / p)
                out.append((item, item, {}))
            elif isinstance(item, dict) and "format" in item:
                arch = Arch.from_dict(item, source=where)
                out.append((arch, arch.key, item.get("meta") or {}))
            elif isinstance(item, dict) and "key" in item:
                arch = from_key(item, where)
                out.append((arch, arch.key, {}))
            else:
                raise LvsearchError(f"{where} is not an architecture spec",
                                    fix='use a name ("bert"), an architecture JSON path, an architecture object or {"key": "sfsf…"}')
        return out, str(path)
    raise LvsearchError(
        f"{path} is neither a topk.json of 'lvsearch evolve', a JSON list of architecture specs, nor an architecture JSON",
        fix='pass runs/search/topk.json, a list such as ["bert", "sandwich", "best.json"], or bert,sandwich,…',
    )


def resolve_finalists(spec: str, k: int, config: RetrainConfig, data) -> list[Finalist]:
    """The first ``k`` architectures of ``spec`` (see :func:`_entries`), validated against the
    recipe's space and checked for provenance, named ``NN-compact``.

    Raises:
        LvsearchError: unreadable input, fewer than ``k`` entries, an invalid or duplicate
            architecture, or one searched with another tokenizer.
    """
    from lvsearch.train.retrain import check_arch_file_provenance, check_provenance, recipe_space

    entries, where = _entries(spec)
    if k > len(entries):
        raise LvsearchError(f"--finalists {k} but {where} holds {len(entries)} architecture(s)",
                            fix=f"pass --finalists {len(entries)} or fewer, or a longer list")
    out: list[Finalist] = []
    seen: dict[str, str] = {}
    for i, (item, label, meta) in enumerate(entries[:k]):
        if isinstance(item, Arch):
            arch = recipe_space(config, item.num_slots).validate(item, source=f"{where} ({label})")
            check_provenance(meta, f"{where} ({label})", data)
        else:
            check_arch_file_provenance(item, data)
            arch = resolve_arch(item, recipe_space(config, None, item))
            if Path(item).is_file():
                meta = (read_json(item, what="architecture file") or {}).get("meta") or {}
        if arch.key in seen:
            raise LvsearchError(f"finalists {seen[arch.key]!r} and {label!r} are the same architecture ({arch.compact})",
                                fix="list each architecture once")
        seen[arch.key] = label
        out.append(Finalist(f"{i + 1:02d}-{arch.compact}", arch, label, meta))
    return out
