"""Model directories: the hand-off format between ``lvsearch retrain`` and ``lvsearch evaluate``.

Layout (format tag ``lvsearch.model/v1``)::

    MODEL_DIR/config.json           {"format": "lvsearch.model/v1", "arch": Arch.to_dict(),
                                     "dims": ModelDims.to_dict(), "tokenizer_sha256": hex,
                                     "objective": "mlm" | "electra",
                                     "generator_dims": ModelDims.to_dict() | null,
                                     "generator_arch": Arch.to_dict() | null, "extra": {...}}
    MODEL_DIR/model.safetensors     the Encoder's state dict (incl. its MLM head; for ELECTRA
                                    the discriminator, whose MLM head is untrained)
    MODEL_DIR/generator.safetensors optional: the ELECTRA generator Encoder (its MLM head is
                                    what BLiMP / MLM metrics use for an ELECTRA model)
    MODEL_DIR/tokenizer.json        copy of the tokenizer; its sha256 must equal the config's
    MODEL_DIR/training_args.json    free-form training settings (informative)

The folder is assembled under a temporary sibling name and renamed into place, so a crash never
leaves a half-written model directory and an existing one is replaced only at the last step.
Tensors are safetensors, everything else JSON: nothing is ever unpickled.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lvsearch.errors import LvsearchError
from lvsearch.io import atomic_write_json, copy_file, read_json, replace_folder, save_safetensors, sha256_file, umask

if TYPE_CHECKING:  # pragma: no cover
    import torch

    from lvsearch.arch import Arch
    from lvsearch.model import Encoder, ModelDims

MODEL_FORMAT = "lvsearch.model/v1"
CONFIG = "config.json"
WEIGHTS = "model.safetensors"
GENERATOR_WEIGHTS = "generator.safetensors"
TOKENIZER = "tokenizer.json"
TRAINING_ARGS = "training_args.json"
OBJECTIVES = ("mlm", "electra")
_CONFIG_KEYS = ("format", "arch", "dims", "tokenizer_sha256", "objective", "generator_dims")

_FIX_REWRITE = "re-create the model directory with 'lvsearch retrain' (or lvsearch.modeldir.save_model_dir)"


@dataclass
class LoadedModel:
    """A model directory loaded for evaluation (modules in ``eval()`` mode, on ``device``).

    Attributes:
        encoder: the :class:`~lvsearch.model.Encoder` of ``model.safetensors``.
        generator: the ELECTRA generator Encoder when ``generator.safetensors`` exists, else None.
        tokenizer: the ``tokenizers.Tokenizer`` of ``tokenizer.json``.
        arch, dims: architecture and sizes of ``encoder``.
        config: the parsed ``config.json``.
        folder: the model directory.
        training_args: the parsed ``training_args.json`` (``{}`` when absent).
    """

    encoder: "Encoder"
    generator: "Encoder | None"
    tokenizer: Any
    arch: "Arch"
    dims: "ModelDims"
    config: dict
    folder: Path
    training_args: dict = field(default_factory=dict)

    @property
    def objective(self) -> str:
        return self.config["objective"]

    @property
    def tokenizer_sha256(self) -> str:
        return self.config["tokenizer_sha256"]


def _state_dict(module) -> dict[str, "torch.Tensor"]:
    # Clone so that no two saved tensors share memory (safetensors refuses shared storage).
    return {k: v.detach().to("cpu").clone().contiguous() for k, v in module.state_dict().items()}


def save_model_dir(
    folder: str | os.PathLike,
    encoder: "Encoder",
    *,
    arch: "Arch",
    dims: "ModelDims",
    tokenizer_path: str | os.PathLike,
    objective: str,
    training_args: dict,
    generator: "Encoder | None" = None,
    extra: dict | None = None,
) -> Path:
    """Write a model directory (layout in the module docstring) atomically; returns its path.

    Args:
        folder: the model directory; an existing model directory (one with ``config.json``)
            is replaced as a whole, an empty folder is filled.
        encoder: the trained Encoder (for ``objective="electra"`` the discriminator).
        arch, dims: must equal ``encoder.arch`` / ``encoder.dims``.
        tokenizer_path: the ``tokenizer.json`` the model was trained with (copied; its sha256
            goes into the config).
        objective: ``"mlm"`` or ``"electra"``.
        training_args: JSON-serialisable training settings (written to ``training_args.json``).
        generator: the ELECTRA generator (only with ``objective="electra"``).
        extra: JSON-serialisable extra information stored under ``config["extra"]``.

    Raises:
        ValueError: inconsistent arguments (a programming error, not user input).
        LvsearchError: the tokenizer file is missing, or ``folder`` exists, is not empty and is
            not a model directory (it is never replaced then).
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
    if encoder.arch != arch or encoder.dims != dims:
        raise ValueError("arch/dims differ from the encoder's own arch/dims")
    if generator is not None and objective != "electra":
        raise ValueError("a generator is only saved with objective='electra'")
    tokenizer_path = Path(tokenizer_path)
    if not tokenizer_path.is_file():
        raise LvsearchError(f"tokenizer file not found: {tokenizer_path}", fix="pass the tokenizer.json the model was trained with")
    folder = Path(folder)
    if folder.exists() and not (folder / CONFIG).is_file() and (not folder.is_dir() or any(folder.iterdir())):
        raise LvsearchError(f"{folder} exists and is not a model directory (no {CONFIG}); refusing to replace it",
                            fix="choose a new or empty folder for the model")
    config = {
        "format": MODEL_FORMAT,
        "arch": arch.to_dict(),
        "dims": dims.to_dict(),
        "tokenizer_sha256": sha256_file(tokenizer_path),
        "objective": objective,
        "generator_dims": generator.dims.to_dict() if generator is not None else None,
        "generator_arch": generator.arch.to_dict() if generator is not None else None,
        "extra": extra or {},
    }
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}.", suffix=".tmp"))
    try:
        os.chmod(tmp, 0o777 & ~umask())
        meta = {"format": MODEL_FORMAT}
        save_safetensors(_state_dict(encoder), tmp / WEIGHTS, metadata=meta)
        if generator is not None:
            save_safetensors(_state_dict(generator), tmp / GENERATOR_WEIGHTS, metadata=meta)
        copy_file(tokenizer_path, tmp / TOKENIZER)
        atomic_write_json(tmp / TRAINING_ARGS, training_args)
        atomic_write_json(tmp / CONFIG, config)
        replace_folder(tmp, folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return folder


def _check_config(config: Any, path: Path) -> dict:
    if not isinstance(config, dict):
        raise LvsearchError(f"{path} must hold a JSON object", fix=_FIX_REWRITE)
    fmt = config.get("format")
    if fmt != MODEL_FORMAT:
        looks_hf = fmt is None and ("model_type" in config or "architectures" in config)
        raise LvsearchError(
            f"{path} has format {fmt!r}, expected {MODEL_FORMAT!r} (not an lvsearch model directory, or "
            "written by another version)" + ("; it looks like a Hugging Face model folder" if looks_hf else ""),
            fix=f"evaluate it as one: --model hf:{path.parent}" if looks_hf else _FIX_REWRITE,
        )
    missing = [k for k in _CONFIG_KEYS if k not in config]
    if missing:
        raise LvsearchError(f"{path} lacks the key(s) {', '.join(missing)}", fix=_FIX_REWRITE)
    if config["objective"] not in OBJECTIVES:
        raise LvsearchError(f"{path}: unknown objective {config['objective']!r} (expected one of {', '.join(OBJECTIVES)})",
                            fix=_FIX_REWRITE)
    return config


def _load_weights(module, path: Path, device: str) -> None:
    """Load safetensors ``path`` into ``module`` after checking names and shapes."""
    from safetensors import safe_open
    from safetensors.torch import load_file

    if not path.is_file():
        raise LvsearchError(f"weights file not found: {path}", fix=_FIX_REWRITE)
    try:
        with safe_open(str(path), framework="pt") as f:
            shapes = {k: tuple(f.get_slice(k).get_shape()) for k in f.keys()}
    except Exception as e:  # safetensors raises its own error types for corrupt headers
        raise LvsearchError(f"{path} is not a readable safetensors file ({e})", fix=_FIX_REWRITE) from None
    want = {k: tuple(v.shape) for k, v in module.state_dict().items()}
    missing = sorted(set(want) - set(shapes))
    unexpected = sorted(set(shapes) - set(want))
    if missing or unexpected:
        parts = []
        if missing:
            parts.append(f"missing {len(missing)} tensor(s), e.g. {', '.join(missing[:3])}")
        if unexpected:
            parts.append(f"{len(unexpected)} unexpected tensor(s), e.g. {', '.join(unexpected[:3])}")
        raise LvsearchError(
            f"{path} does not match the architecture in config.json ({'; '.join(parts)})",
            fix="the weights and config.json come from different models; " + _FIX_REWRITE,
        )
    wrong = [f"{k} {shapes[k]} vs {want[k]}" for k in sorted(want) if shapes[k] != want[k]]
    if wrong:
        raise LvsearchError(
            f"{path}: tensor shapes differ from the dims in config.json ({'; '.join(wrong[:3])})",
            fix="the weights and config.json come from different models; " + _FIX_REWRITE,
        )
    module.load_state_dict(load_file(str(path), device=device), strict=True)


def load_model(folder: str | os.PathLike, *, device: str = "cpu") -> LoadedModel:
    """Load a model directory written by :func:`save_model_dir`.

    Args:
        folder: the model directory.
        device: torch device for the modules.

    Returns:
        :class:`LoadedModel` with modules in ``eval()`` mode.

    Raises:
        LvsearchError: the folder, ``config.json``, ``model.safetensors`` or ``tokenizer.json``
            is missing; the config has the wrong format tag or keys; the tokenizer's sha256
            differs from the config's; the tokenizer's vocabulary is larger than the model's;
            the safetensors names or shapes do not match the architecture. Each message names
            the file and the fix.
    """
    from lvsearch.arch import Arch
    from lvsearch.data.tokenizer import load_tokenizer
    from lvsearch.model import Encoder, ModelDims

    folder = Path(folder)
    if not folder.is_dir():
        raise LvsearchError(f"model directory not found: {folder}",
                            fix="pass a folder written by 'lvsearch retrain' (it holds config.json and model.safetensors)")
    cfg_path = folder / CONFIG
    if not cfg_path.is_file():
        raise LvsearchError(f"{folder} is not a model directory (no {CONFIG})",
                            fix="pass a folder written by 'lvsearch retrain' (it holds config.json and model.safetensors)")
    config = _check_config(read_json(cfg_path, what="model config"), cfg_path)
    arch = Arch.from_dict(config["arch"], source=f"{cfg_path} (arch)")
    dims = ModelDims.from_dict(config["dims"], source=str(cfg_path))
    tok_path = folder / TOKENIZER
    if not tok_path.is_file():
        raise LvsearchError(f"tokenizer file missing: {tok_path}",
                            fix="copy the tokenizer.json the model was trained with into the model directory")
    if sha256_file(tok_path) != config["tokenizer_sha256"]:
        raise LvsearchError(
            f"{tok_path} is not the tokenizer this model was trained with (sha256 differs from {cfg_path})",
            fix="copy the original tokenizer.json (the one of the prepared data used for training) into the model directory",
        )
    tokenizer = load_tokenizer(tok_path)
    if tokenizer.get_vocab_size() > dims.vocab_size:
        raise LvsearchError(
            f"{tok_path} has {tokenizer.get_vocab_size()} tokens, more than the model's vocab_size {dims.vocab_size}",
            fix=_FIX_REWRITE,
        )
    encoder = Encoder(arch, dims)
    _load_weights(encoder, folder / WEIGHTS, device)
    encoder.to(device).eval()
    generator = None
    gen_path = folder / GENERATOR_WEIGHTS
    if gen_path.is_file():
        if config["objective"] != "electra" or config.get("generator_dims") is None:
            raise LvsearchError(f"{gen_path} exists but {cfg_path} describes no generator (objective "
                                f"{config['objective']!r}, generator_dims null)", fix=_FIX_REWRITE)
        gen_dims = ModelDims.from_dict(config["generator_dims"], source=f"{cfg_path} (generator_dims)")
        gen_arch_d = config.get("generator_arch")
        gen_arch = Arch.from_dict(gen_arch_d, source=f"{cfg_path} (generator_arch)") if gen_arch_d else arch
        generator = Encoder(gen_arch, gen_dims)
        _load_weights(generator, gen_path, device)
        generator.to(device).eval()
    args_path = folder / TRAINING_ARGS
    training_args = read_json(args_path, what="training arguments") if args_path.is_file() else {}
    return LoadedModel(encoder, generator, tokenizer, arch, dims, config, folder, training_args)


__all__ = ["MODEL_FORMAT", "LoadedModel", "save_model_dir", "load_model"]
