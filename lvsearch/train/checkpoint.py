"""Checkpoints: safetensors for tensors, JSON for everything else, written atomically.

Layout inside a run folder::

    checkpoints/step-0000100/model.safetensors       module.state_dict()
    checkpoints/step-0000100/optimizer.safetensors   AdamW moments: "state.<param index>.<name>"
    checkpoints/step-0000100/state.json              step, tokens, optimizer param groups,
                                                     sha256 of both tensor files, extra state
    checkpoints/latest.json                          {"step": 100, "dir": "step-0000100"}

A checkpoint folder is assembled under a temporary name and renamed into place, then
``latest.json`` is replaced atomically, so a crash at any moment leaves the previous checkpoint
intact and ``latest.json`` always names a complete one. :func:`load_checkpoint` checks the
sha256 of both tensor files before loading anything: a truncated or modified checkpoint is an
error, never loaded silently. Nothing is unpickled.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file

from lvsearch.errors import LvsearchError
from lvsearch.io import atomic_write_json, read_json, save_safetensors, sha256_file, umask

CHECKPOINTS = "checkpoints"
LATEST = "latest.json"
STATE_FORMAT = "lvsearch.checkpoint/v1"


@dataclass
class Checkpoint:
    """A loaded checkpoint: tensors for the module and optimizer, and the JSON state."""

    path: Path
    step: int
    model: dict[str, torch.Tensor]
    optimizer: dict | None
    state: dict


def _optimizer_tensors(opt_state: dict) -> tuple[dict[str, torch.Tensor], dict]:
    tensors = {}
    for idx, st in opt_state["state"].items():
        for name, value in st.items():
            t = value if torch.is_tensor(value) else torch.tensor(value)
            tensors[f"state.{idx}.{name}"] = t.detach().cpu().contiguous()
    return tensors, {"param_groups": opt_state["param_groups"]}


def _optimizer_from_tensors(tensors: dict[str, torch.Tensor], meta: dict) -> dict:
    state: dict[int, dict] = {}
    for key, t in tensors.items():
        _, idx, name = key.split(".", 2)
        state.setdefault(int(idx), {})[name] = t
    return {"state": state, "param_groups": meta["param_groups"]}


def save_checkpoint(
    run_dir: str | Path,
    step: int,
    module: torch.nn.Module,
    optimizer: torch.optim.Optimizer | None,
    extra: dict,
    *,
    keep: int = 2,
) -> Path:
    """Write checkpoint ``step`` into ``run_dir/checkpoints`` and point ``latest.json`` at it.

    Args:
        run_dir: the run folder.
        step: optimizer steps completed.
        module: its ``state_dict()`` is saved (tied weights are saved once per name).
        optimizer: saved when given.
        extra: JSON-able state stored in ``state.json`` under ``"extra"``.
        keep: how many most recent checkpoints to keep; older ones are deleted.

    Returns:
        The checkpoint folder.
    """
    root = Path(run_dir) / CHECKPOINTS
    root.mkdir(parents=True, exist_ok=True)
    name = f"step-{step:07d}"
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=root))
    try:
        tmp.chmod(0o777 & ~umask())
        model_sd = {k: v.detach().cpu().contiguous() for k, v in module.state_dict().items()}
        # safetensors refuses tensors sharing memory (tied weights): clone duplicates.
        seen: dict[int, str] = {}
        for k, v in model_sd.items():
            ptr = v.data_ptr()
            if ptr in seen and v.numel():
                model_sd[k] = v.clone()
            seen[ptr] = k
        save_safetensors(model_sd, tmp / "model.safetensors")
        state = {"format": STATE_FORMAT, "step": step, "extra": extra, "files": {}}
        files = ["model.safetensors"]
        if optimizer is not None:
            tensors, meta = _optimizer_tensors(optimizer.state_dict())
            save_safetensors(tensors, tmp / "optimizer.safetensors")
            state["optimizer"] = meta
            files.append("optimizer.safetensors")
        state["files"] = {f: sha256_file(tmp / f) for f in files}
        atomic_write_json(tmp / "state.json", state)
        final = root / name
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    atomic_write_json(root / LATEST, {"step": step, "dir": name})
    for old in sorted(p for p in root.glob("step-*") if p.is_dir())[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    """The folder ``latest.json`` names, or None when the run has no checkpoint."""
    root = Path(run_dir) / CHECKPOINTS
    if not (root / LATEST).is_file():
        return None
    pointer = read_json(root / LATEST, what="checkpoint pointer")
    if not isinstance(pointer, dict) or "dir" not in pointer:
        raise LvsearchError(f"{root / LATEST} is malformed", fix="delete it to resume from the newest complete step-* folder")
    return root / pointer["dir"]


def latest_step(run_dir: str | Path) -> int:
    """Optimizer steps of the checkpoint ``latest.json`` names (0 when the run has none).

    Raises:
        LvsearchError: ``latest.json`` is malformed.
    """
    path = latest_checkpoint(run_dir)
    if path is None:
        return 0
    step = read_json(Path(run_dir) / CHECKPOINTS / LATEST, what="checkpoint pointer").get("step")
    if not isinstance(step, int):
        raise LvsearchError(f"{Path(run_dir) / CHECKPOINTS / LATEST} has no step", fix="delete it and resume")
    return step


def verify_checkpoint(path: str | Path) -> dict:
    """Check a checkpoint folder without loading its tensors; returns its ``state.json``.

    Raises:
        LvsearchError: the folder, ``state.json`` or a tensor file is missing, or a tensor
            file's sha256 differs from the one recorded (truncated or modified).
    """
    path = Path(path)
    if not path.is_dir():
        raise LvsearchError(f"checkpoint not found: {path}", fix="check the run folder; was the run started?")
    state = read_json(path / "state.json", what="checkpoint state")
    if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
        raise LvsearchError(f"{path / 'state.json'} is not an lvsearch checkpoint state", fix="use another checkpoint")
    for name, digest in state["files"].items():
        f = path / name
        if not f.is_file():
            raise LvsearchError(f"checkpoint file missing: {f}", fix="resume from an earlier checkpoint or restart the run")
        if sha256_file(f) != digest:
            raise LvsearchError(
                f"checkpoint file {f} is truncated or modified (sha256 differs from state.json)",
                fix="resume from an earlier checkpoint (edit checkpoints/latest.json) or restart the run",
            )
    return state


def load_checkpoint(path: str | Path, *, with_optimizer: bool = True) -> Checkpoint:
    """Load and verify (:func:`verify_checkpoint`) a checkpoint folder.

    Raises:
        LvsearchError: the folder, ``state.json`` or a tensor file is missing, or a tensor
            file's sha256 differs from the one recorded (truncated or modified).
    """
    path = Path(path)
    state = verify_checkpoint(path)
    model = load_file(str(path / "model.safetensors"))
    optimizer = None
    if with_optimizer and "optimizer.safetensors" in state["files"]:
        optimizer = _optimizer_from_tensors(load_file(str(path / "optimizer.safetensors")), state["optimizer"])
    return Checkpoint(path, int(state["step"]), model, optimizer, state)
