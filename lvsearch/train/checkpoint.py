"""Checkpoints: safetensors for tensors, JSON for everything else, written atomically.

Layout inside a run folder::

    checkpoints/step-0000100/model.safetensors       module.state_dict()
    checkpoints/step-0000100/optimizer.safetensors   AdamW moments: "state.<param index>.<name>"
    checkpoints/step-0000100/state.json              step, tokens, optimizer param groups,
                                                     sha256 of both tensor files, extra state
    checkpoints/latest.json                          {"step": 100, "dir": "step-0000100",
                                                      "state_sha256": sha256 of its state.json}

A checkpoint folder is assembled under a temporary name and renamed into place, then
``latest.json`` is replaced atomically, so a crash at any moment leaves the previous checkpoint
intact and ``latest.json`` always names a complete one. :func:`load_checkpoint` checks the
sha256 of both tensor files before loading anything, and that ``latest.json``, the folder name
and ``state.json`` agree on the step (and ``state.json`` on its sha256): a truncated, modified
or inconsistent checkpoint is an error, never loaded silently. A temporary folder left by a
write that was killed (``.step-*``) is removed by the next successful checkpoint write. Nothing
is unpickled.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Optional

import torch
from pydantic import Field, model_validator
from safetensors.torch import load_file

from lvsearch.errors import LvsearchError
from lvsearch.faults import kill_point
from lvsearch.io import (atomic_write_json, check_fields, read_checked, read_json, remove_stale_temps, save_safetensors,
                         sha256_file, umask)
from lvsearch.schema import Count, FileModel

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
        kill_point(f"checkpoint-write:{step}")
        atomic_write_json(tmp / "state.json", state)
        final = root / name
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    atomic_write_json(root / LATEST, {"step": step, "dir": name, "state_sha256": sha256_file(final / "state.json")})
    for old in sorted(p for p in root.glob("step-*") if p.is_dir())[:-keep]:
        shutil.rmtree(old, ignore_errors=True)
    remove_stale_temps(root, ".step-")  # leftovers of writes killed before their rename
    return final


#: A name inside a checkpoint folder or ``checkpoints/``: no folder part.
_Name = Annotated[str, Field(pattern=r"^[^/\\]+$")]


class CheckpointPointer(FileModel):
    """``checkpoints/latest.json``: the newest complete checkpoint folder and its step."""

    step: Count
    dir: _Name
    state_sha256: Optional[str] = None


class CheckpointOptimizer(FileModel):
    param_groups: list[dict]


class CheckpointState(FileModel):
    """The fields of a checkpoint's ``state.json`` that loading reads (``format`` is checked
    first, with its own message): the step, the sha256 of each tensor file, and the optimizer's
    parameter groups when ``optimizer.safetensors`` is one of the files."""

    step: Count
    files: dict[_Name, str]
    optimizer: Optional[CheckpointOptimizer] = None

    @model_validator(mode="after")
    def _optimizer_recorded(self):
        if "optimizer.safetensors" in self.files and self.optimizer is None:
            raise ValueError("'optimizer' is missing while optimizer.safetensors is one of its files")
        return self


def _step_of_folder(path: Path) -> int | None:
    name = path.name
    if name.startswith("step-") and name[5:].isdigit():
        return int(name[5:])
    return None


_POINTER_FIX = "restore it, or rewrite it to name a complete step-* folder: {\"step\": N, \"dir\": \"step-000000N\"}"


def _read_pointer(root: Path) -> dict:
    pointer = read_checked(root / LATEST, CheckpointPointer, what="checkpoint pointer", fix=_POINTER_FIX,
                           regenerate=_POINTER_FIX)
    folder_step = _step_of_folder(root / pointer["dir"])
    if folder_step != pointer["step"]:
        raise LvsearchError(
            f"{root / LATEST} says step {pointer['step']} but names folder {pointer['dir']} (step {folder_step})",
            fix=_POINTER_FIX)
    return pointer


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    """The folder ``latest.json`` names, or None when the run has no checkpoint.

    Raises:
        LvsearchError: ``latest.json`` is malformed, or its step disagrees with the folder name.
    """
    root = Path(run_dir) / CHECKPOINTS
    if not (root / LATEST).is_file():
        return None
    return root / _read_pointer(root)["dir"]


def latest_step(run_dir: str | Path) -> int:
    """Optimizer steps of the checkpoint ``latest.json`` names (0 when the run has none).

    Raises:
        LvsearchError: ``latest.json`` is malformed.
    """
    root = Path(run_dir) / CHECKPOINTS
    if not (root / LATEST).is_file():
        return 0
    return _read_pointer(root)["step"]


def verify_checkpoint(path: str | Path) -> dict:
    """Check a checkpoint folder without loading its tensors; returns its ``state.json``.

    The step in ``state.json`` must equal the folder's (``step-NNNNNNN``), and when
    ``checkpoints/latest.json`` names this folder, its recorded sha256 of ``state.json`` must
    match: a state that disagrees with what was recorded is never believed (a resume from it
    would train the wrong steps and overwrite later records).

    Raises:
        LvsearchError: the folder, ``state.json`` or a tensor file is missing, a tensor
            file's sha256 differs from the one recorded (truncated or modified), or
            ``state.json`` disagrees with the folder name or with ``latest.json``.
    """
    path = Path(path)
    if not path.is_dir():
        raise LvsearchError(f"checkpoint not found: {path}", fix="check the run folder; was the run started?")
    again = ("resume from an earlier checkpoint (edit checkpoints/latest.json to name it), or train the run again "
             "with the same command and --overwrite")
    state = read_json(path / "state.json", what="checkpoint state", regenerate=again)
    if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
        raise LvsearchError(f"{path / 'state.json'} is not an lvsearch checkpoint state", fix="use another checkpoint")
    check_fields(state, CheckpointState, path / "state.json", what="checkpoint state", fix=again)
    folder_step = _step_of_folder(path)
    if folder_step is not None and state["step"] != folder_step:
        raise LvsearchError(
            f"{path / 'state.json'} says step {state.get('step')!r}, but the folder is {path.name} (modified)",
            fix="restore the file, resume from an earlier checkpoint (edit checkpoints/latest.json), or restart the run")
    pointer_file = path.parent / LATEST
    if pointer_file.is_file():
        pointer = read_json(pointer_file, what="checkpoint pointer")
        if isinstance(pointer, dict) and pointer.get("dir") == path.name and pointer.get("state_sha256") not in (
                None, sha256_file(path / "state.json")):
            raise LvsearchError(
                f"{path / 'state.json'} was modified after it was written (sha256 differs from {pointer_file})",
                fix="restore the file, resume from an earlier checkpoint (edit checkpoints/latest.json), or restart the run")
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
