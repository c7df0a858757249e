"""What ``lvsearch arch show`` prints: an architecture with its space, α weights and size.

The job behind the verb: resolve the architecture (a file or a reference name), the space it
lives in (from ``--supernet``, ``--space`` or the file) and, with a trained supernet, its
learned ELC α weights (ELC-BERT, Charpentier & Samuel 2023: a softmax over the inputs a
slot reads), parameter count and forward FLOPs per token.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lvsearch.arch import Arch, arch_file, check_reference_name, resolve_arch
from lvsearch.errors import LvsearchError
from lvsearch.space import SearchSpace


@dataclass
class ArchView:
    """An architecture as ``arch show`` presents it.

    Attributes:
        arch: the architecture.
        space: its search space, when known.
        alpha: ``(num_slots, num_slots)`` tensor of α weights (row = slot − 1, column = input
            index; 0 where a slot does not read) from a supernet, or None.
        params, flops: parameter count and forward FLOPs per token at ``seq_len`` (from the
            supernet; or as recorded by the search in the file's meta, ``seq_len`` None), or None.
        meta: the file's ``meta`` (fitness, loss, supernet, …), ``{}`` for a name.
    """

    arch: Arch
    space: SearchSpace | None = None
    alpha: Any = None
    params: int | None = None
    flops: float | None = None
    seq_len: int | None = None
    meta: dict = field(default_factory=dict)


def arch_view(spec: str, *, supernet: str | Path | None = None, space: str | None = None) -> ArchView:
    """Resolve ``spec`` (an architecture JSON file or a reference name) for display.

    Raises:
        LvsearchError: a missing or malformed file, an unknown name, a name without a space
            (no ``space`` or ``supernet``), ``space`` differing from the supernet's, or an
            architecture that is not in its space.
    """
    from lvsearch.io import read_json

    # the spec itself first (read once), before the supernet or space it is shown in
    path, d = arch_file(spec), None
    if path is None:
        check_reference_name(spec)
    else:
        d = read_json(path, what="architecture file")
        arch = Arch.from_dict(d, source=path)
    loaded = sp = None
    if supernet:
        from lvsearch.train.supernet import load_supernet

        loaded = load_supernet(supernet)
        sp = loaded.space
    if space:
        named = SearchSpace.load(space)
        if sp is not None and named.to_dict() | {"name": ""} != sp.to_dict() | {"name": ""}:
            raise LvsearchError(f"--space {space} does not match the supernet's space {sp.name}",
                                fix="omit --space when --supernet is given")
        sp = sp or named
    meta: dict = {}
    if d is not None:
        meta = d.get("meta") if isinstance(d.get("meta"), dict) else {}
        if sp is None and isinstance(d.get("space"), str):
            try:
                sp = SearchSpace.load(d["space"])
            except LvsearchError:
                sp = None
        if sp is not None:
            sp.validate(arch, source=spec)
    else:
        if sp is None:
            raise LvsearchError(f"the reference architecture {spec!r} needs a search space to be built",
                                fix=f"pass --space or --supernet, e.g. lvsearch arch show {spec} --space lvbert")
        arch = resolve_arch(spec, sp)
    view = ArchView(arch=arch, space=sp, meta=meta)
    if loaded is not None:
        view.alpha = loaded.supernet.alpha_matrix(arch).detach()
        view.seq_len = loaded.config.train.seq_len
        view.params = loaded.supernet.num_params(arch)
        view.flops = loaded.supernet.flops_per_token(arch, view.seq_len)
    elif isinstance(meta.get("params"), int) and isinstance(meta.get("flops"), (int, float)):
        view.params, view.flops = meta["params"], float(meta["flops"])
    return view
