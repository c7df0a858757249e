"""``lvsearch export``: a model directory as a Hugging Face transformers model folder.

Layout of the export (``trust_remote_code=True`` loads it; no lvsearch needed)::

    OUT/config.json                  model_type "lvsearch", the architecture (ops, inputs, op_sizes) and
                                     dims, auto_map -> the two files below, architectures
    OUT/configuration_lvsearch.py    LvsearchConfig        (copied from hf_template/)
    OUT/modeling_lvsearch.py         LvsearchModel, ...ForMaskedLM, ...ForSequenceClassification,
                                     ...ForTokenClassification, ...ForPreTraining (RTD)
    OUT/base.py, OUT/sa.py, ...      the op code: lvsearch/ops/base.py and every registered op
                                     module, byte copies (:func:`lvsearch.ops.module_files`)
    OUT/ops_index.py                 imports the shipped op modules (:func:`ops_index_source`)
    OUT/model.safetensors            weights under the HF names (:func:`hf_name`); the tied MLM
                                     decoder is not stored (transformers ties it at load)
    OUT/tokenizer.json               byte copy of the model directory's tokenizer
    OUT/tokenizer_config.json        PreTrainedTokenizerFast with [PAD] [UNK] [CLS] [SEP] [MASK]
    OUT/special_tokens_map.json
    OUT/lvsearch_export.json         provenance: source folder, objective, which encoder, and
                                     ``code_sha256`` of every .py file (:func:`template_sha256`)

Which encoder: an MLM model exports its Encoder with its MLM head (``AutoModelForMaskedLM``,
``pipeline("fill-mask")``). An ELECTRA model exports the discriminator (``AutoModel``, and
``AutoModelForPreTraining`` with the replaced-token-detection head, read from the run's last
checkpoint when it is there); its MLM head was never trained and is left out. ``generator=True``
exports the ELECTRA generator instead, with its trained MLM head.

Each slot of the exported model runs lvsearch's own op code (the shipped op modules; one
source of truth); the modeling file adds the embeddings, mixing and heads.
``tests/test_export.py`` and ``tests/test_ops.py`` check both agree to 1e-5 on real batches
with padding for every registered op and switch.

The folder is written under a temporary sibling name and renamed into place at the end; an
existing non-empty ``OUT`` is refused unless ``overwrite``, and an ``OUT`` that is the model
directory or contains it is always refused. Tensors are safetensors only.

``lvsearch evaluate --model hf:OUT`` loads an export without ``--trust-remote-code`` only while
:func:`export_code_problem` finds nothing: its .py files (:func:`export_code`) are byte-equal
to what the installed lvsearch writes and to the sha256 recorded at export. It then runs the
installed template's classes, never the folder's files (SECURITY.md).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from lvsearch.errors import LvsearchError
from lvsearch.io import (
    check_replaceable,
    check_writable_folder,
    replace_folder,
    restore_replaced_folder,
)
from lvsearch.lock import holds_output
from lvsearch.schema import FileModel

if TYPE_CHECKING:  # pragma: no cover
    import torch

    from lvsearch.modeldir import LoadedModel

TEMPLATE_DIR = Path(__file__).resolve().parent / "hf_template"
TEMPLATE_FILES = ("configuration_lvsearch.py", "modeling_lvsearch.py")
EXPORT_FORMAT = "lvsearch.hf-export/v1"
PROVENANCE = "lvsearch_export.json"


class _ExportedConfig(FileModel):
    extra: Optional[dict] = None


class ExportProvenance(FileModel):
    """The fields of ``lvsearch_export.json`` that readers use (others are kept): the template
    files' sha256, the lvsearch model config (``arch``, ``extra``) and the training arguments."""

    code_sha256: Optional[dict[str, str]] = None
    lvsearch_config: Optional[_ExportedConfig] = None
    training_args: Optional[dict] = None


def read_provenance(folder: str | os.PathLike) -> dict:
    """The parsed ``FOLDER/lvsearch_export.json`` of an export, checked (:class:`ExportProvenance`).

    Raises:
        LvsearchError: the file is not JSON, or a field of it has the wrong type (names the
            file, the field and the re-export).
    """
    from lvsearch.io import read_checked

    path = Path(folder) / PROVENANCE
    fix = "export the model again: lvsearch export --model MODEL_DIR --out FOLDER --overwrite"
    return read_checked(path, ExportProvenance, what="lvsearch export provenance", fix=fix, regenerate=fix)
MODEL_TYPE = "lvsearch"
AUTO_MAP = {
    "AutoConfig": "configuration_lvsearch.LvsearchConfig",
    "AutoModel": "modeling_lvsearch.LvsearchModel",
    "AutoModelForMaskedLM": "modeling_lvsearch.LvsearchForMaskedLM",
    "AutoModelForSequenceClassification": "modeling_lvsearch.LvsearchForSequenceClassification",
    "AutoModelForTokenClassification": "modeling_lvsearch.LvsearchForTokenClassification",
    "AutoModelForPreTraining": "modeling_lvsearch.LvsearchForPreTraining",
}
BASE = "lvsearch"  # base_model_prefix of the HF model

_FIXED = {
    "embeddings.word.weight": f"{BASE}.embeddings.word_embeddings.weight",
    "embeddings.position.weight": f"{BASE}.embeddings.position_embeddings.weight",
    "embeddings.norm.weight": f"{BASE}.embeddings.LayerNorm.weight",
    "embeddings.norm.bias": f"{BASE}.embeddings.LayerNorm.bias",
    "embeddings.project.weight": f"{BASE}.embeddings.projection.weight",
    "embeddings.project.bias": f"{BASE}.embeddings.projection.bias",
    "mixing.logits": f"{BASE}.mixing_logits",
    "output_mixing.logits": f"{BASE}.output_mixing_logits",
    "final_norm.weight": f"{BASE}.final_LayerNorm.weight",
    "final_norm.bias": f"{BASE}.final_LayerNorm.bias",
    "mlm_head.dense.weight": "lm_head.dense.weight",
    "mlm_head.dense.bias": "lm_head.dense.bias",
    "mlm_head.norm.weight": "lm_head.LayerNorm.weight",
    "mlm_head.norm.bias": "lm_head.LayerNorm.bias",
    "mlm_head.bias": "lm_head.bias",
    # ELECTRA replaced-token-detection head (lvsearch.train.retrain.Electra.rtd_head)
    "rtd_head.0.weight": "discriminator_predictions.dense.weight",
    "rtd_head.0.bias": "discriminator_predictions.dense.bias",
    "rtd_head.2.weight": "discriminator_predictions.dense_prediction.weight",
    "rtd_head.2.bias": "discriminator_predictions.dense_prediction.bias",
}
_SLOT = re.compile(r"^slots\.(\d+)\.([A-Z][A-Z0-9]*)\.([A-Za-z_][A-Za-z_0-9.]*)$")


def hf_name(name: str) -> str:
    """The exported (HF) name of lvsearch state-dict key ``name``.

    ``embeddings.word.weight`` -> ``lvsearch.embeddings.word_embeddings.weight``;
    ``slots.{n}.{OP}.{param}`` (n 1-based, OP a registered op) -> ``lvsearch.layers.{n-1}.{param}``
    (the exported layer is lvsearch's op module, so its names are unchanged);
    ``mixing.logits`` -> ``lvsearch.mixing_logits``;
    ``mlm_head.*`` -> ``lm_head.*``; ``rtd_head.{0,2}.*`` -> ``discriminator_predictions.*``.

    Raises:
        ValueError: a name lvsearch's Encoder does not have (outside the table, or a slot of an
            op that is not registered).
    """
    if name in _FIXED:
        return _FIXED[name]
    from lvsearch import ops as op_registry

    m = _SLOT.match(name)
    if m and m.group(2) in op_registry.codes():
        return f"{BASE}.layers.{int(m.group(1)) - 1}.{m.group(3)}"
    raise ValueError(f"no Hugging Face name for lvsearch parameter {name!r}")


def hf_state_dict(state: dict[str, "torch.Tensor"], *, mlm_head: bool = True) -> dict[str, "torch.Tensor"]:
    """Rename an lvsearch Encoder state dict (plus optional ``rtd_head.*``) with :func:`hf_name`;
    tensors are cloned to contiguous CPU float copies. ``mlm_head=False`` drops ``mlm_head.*``
    (an ELECTRA discriminator's untrained head).

    Raises:
        ValueError: an unknown name, or two names mapping to one (a bug in the table).
    """
    out: dict = {}
    for k, v in state.items():
        if not mlm_head and k.startswith("mlm_head."):
            continue
        new = hf_name(k)
        if new in out:
            raise ValueError(f"two lvsearch parameters map to {new!r}")
        out[new] = v.detach().to("cpu").clone().contiguous()
    return out


def hf_config(arch, dims, *, architectures: list[str], extra: dict | None = None) -> dict:
    """``config.json`` of the export: :class:`LvsearchConfig` arguments from ``arch`` and
    ``dims`` (:class:`~lvsearch.model.ModelDims`), ``auto_map`` and ``architectures``.

    Init-only switches (``init``, ``mixing_init``, ``relative_init``) are recorded under
    ``lvsearch`` for provenance; they do not change a loaded model."""
    import transformers

    from lvsearch.model.encoder import slot_sizes

    cfg = {
        "model_type": MODEL_TYPE,
        "architectures": architectures,
        "auto_map": dict(AUTO_MAP),
        "vocab_size": dims.vocab_size,
        "hidden_size": dims.hidden,
        "embedding_size": dims.embedding,
        "intermediate_size": dims.ff_inner,
        "num_attention_heads": dims.heads,
        "conv_kernel_size": dims.conv_kernel,
        "max_position_embeddings": dims.max_len,
        "hidden_dropout_prob": dims.dropout,
        "pre_ln": dims.pre_ln,
        "ff_activation": dims.ff_activation,
        "mixing_normalized": dims.mixing_normalized,
        "weighted_output": dims.weighted_output,
        "position": dims.position,
        "relative_buckets": dims.relative_buckets,
        "relative_max_distance": dims.relative_max_distance,
        "ops": list(arch.ops),
        "inputs": [list(i) for i in arch.inputs],
        **({"op_sizes": [slot_sizes(op, dims, v) if v else {} for op, v in zip(arch.ops, arch.variants)]}
           if arch.has_variants else {}),
        "num_hidden_layers": arch.num_slots,
        "layer_norm_eps": 1e-12,
        "initializer_range": 0.02,
        "pad_token_id": dims.pad_id,
        "tie_word_embeddings": True,
        "torch_dtype": "float32",
        "transformers_version": transformers.__version__,
        "lvsearch": {"arch": arch.compact, "init": dims.init, "mixing_init": dims.mixing_init,
                     "relative_init": dims.relative_init, **(extra or {})},
    }
    return cfg


def tokenizer_files(tokenizer, max_len: int) -> tuple[dict, dict]:
    """``(tokenizer_config.json, special_tokens_map.json)`` for a ``tokenizers.Tokenizer`` with
    lvsearch's special tokens (BERT's names: [PAD] [UNK] [CLS] [SEP] [MASK]).

    Raises:
        LvsearchError: a special token is missing (:class:`~lvsearch.data.tokenizer.SpecialIds`).
    """
    from lvsearch.data.tokenizer import CLS, MASK, PAD, SEP, UNK, SpecialIds

    SpecialIds.of(tokenizer)
    special = {"pad_token": PAD, "unk_token": UNK, "cls_token": CLS, "sep_token": SEP, "mask_token": MASK}
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        **special,
        "model_max_length": max_len,
        "model_input_names": ["input_ids", "attention_mask"],
        "padding_side": "right",
        "clean_up_tokenization_spaces": False,
    }
    return config, special


def _read_rtd_head(model_dir: Path) -> tuple[dict | None, str]:
    """The ELECTRA RTD head tensors ``rtd_head.*`` from the run's last checkpoint
    (``MODEL_DIR/../checkpoints/latest.json``), read with safetensors; ``(None, reason)`` when
    absent. The model directory itself stores only the discriminator Encoder."""
    from safetensors import safe_open

    from lvsearch.io import read_json

    latest = model_dir.parent / "checkpoints" / "latest.json"
    if not latest.is_file():
        return None, f"no checkpoint next to the model directory ({latest} absent)"
    try:
        ckpt = model_dir.parent / "checkpoints" / str(read_json(latest, what="checkpoint pointer")["dir"])
        path = ckpt / "model.safetensors"
        with safe_open(str(path), framework="pt") as f:
            keys = [k for k in f.keys() if k.startswith("rtd_head.")]
            tensors = {k: f.get_tensor(k) for k in keys}
    except (LvsearchError, KeyError, TypeError, OSError, Exception) as e:  # noqa: BLE001 (any unreadable checkpoint)
        return None, f"the last checkpoint could not be read ({str(e).splitlines()[0]})"
    if sorted(tensors) != sorted(k for k in _FIXED if k.startswith("rtd_head.")):
        return None, f"{path} holds no complete rtd_head"
    return tensors, f"read from {path}"


def ops_index_source() -> str:
    """Text of the exported ``ops_index.py``: static relative imports of every shipped op module
    (transformers copies a remote-code file's siblings only when they are imported as
    ``from .name import ...``), collected into ``OPS`` (code -> spec, canonical order)."""
    from lvsearch import ops as op_registry

    names = op_registry.op_module_names()
    lines = ['"""The ops this export ships: ``OPS`` (op code -> OpSpec, canonical order) and ``SlotLayer``.',
             "", "Written by ``lvsearch export`` from lvsearch's op registry; the modules are byte copies of",
             'lvsearch/ops (see modeling_lvsearch.py)."""', "", "from .base import SlotLayer"]
    lines += [f"from .{n} import SPEC as _{n}" for n in names]
    lines += ["", f"OPS = {{s.code: s for s in sorted(({', '.join(f'_{n}' for n in names)},), key=lambda s: s.order)}}",
              "", '__all__ = ["OPS", "SlotLayer"]', ""]
    return "\n".join(lines)


def export_code() -> dict[str, bytes]:
    """``{file name: bytes}`` of every Python file an export ships: the template files
    (:data:`TEMPLATE_FILES`), ``ops_index.py`` (:func:`ops_index_source`), ``base.py`` and
    every registered op module (:func:`lvsearch.ops.module_files`).

    Raises:
        LvsearchError: the op registry cannot be loaded (:func:`lvsearch.ops.specs`).
    """
    from lvsearch import ops as op_registry

    code = {name: (TEMPLATE_DIR / name).read_bytes() for name in TEMPLATE_FILES}
    code["ops_index.py"] = ops_index_source().encode("utf-8")
    for name, path in op_registry.module_files().items():
        code[name] = path.read_bytes()
    return code


def template_sha256() -> dict[str, str]:
    """``{file name: sha256}`` of the code an export of the installed lvsearch ships
    (:func:`export_code`); ``lvsearch export`` records it as ``code_sha256`` in
    ``lvsearch_export.json``."""
    from lvsearch.io import sha256_bytes

    return {name: sha256_bytes(data) for name, data in export_code().items()}


def export_code_problem(folder: str | os.PathLike) -> str | None:
    """Why ``folder``'s Python files are not a verified ``lvsearch export`` (a sentence naming
    the file), or None when every file of :func:`export_code` (template, op index, op modules)
    is byte-equal (sha256) to what the installed lvsearch ships and to the ``code_sha256``
    recorded in its ``lvsearch_export.json``. Reads files only; imports nothing from ``folder``."""
    from lvsearch.io import read_json, sha256_file

    folder = Path(folder)
    prov_path = folder / "lvsearch_export.json"
    if not prov_path.is_file():
        return f"it has no {prov_path.name}, so it was not written by 'lvsearch export'"
    try:
        prov = read_json(prov_path, what="lvsearch export provenance")
    except LvsearchError:
        return f"{prov_path} is not valid JSON"
    recorded = prov.get("code_sha256") if isinstance(prov, dict) else None
    if not isinstance(recorded, dict):
        return f"{prov_path} records no code_sha256 (it was exported by an older lvsearch)"
    want = template_sha256()
    for name in want:
        path = folder / name
        if not path.is_file():
            return f"{path} is missing"
        got = sha256_file(path)
        rec = recorded.get(name)
        if got != want[name]:
            if got == rec:
                return (f"{path} does not match what this lvsearch version writes (sha256 {got[:12]}…, as recorded "
                        f"in {prov_path.name}, vs the installed template's {want[name][:12]}…): it was edited, its "
                        "recorded sha256 with it, or another lvsearch version wrote it")
            return (f"{path} was changed after the export (sha256 {got[:12]}…; recorded {str(rec)[:12]}…, "
                    f"the installed template {want[name][:12]}…)")
        if rec != got:
            return f"{prov_path} records another sha256 for {name} ({str(rec)[:12]}…) than the file has ({got[:12]}…)"
    return None


def check_out(out: Path, overwrite: bool, *, source: Path | None = None) -> None:
    """Refuse an ``out`` that is the model directory ``source`` or contains it (with or without
    ``overwrite``: replacing it would delete the source), that names no folder of its own or
    holds the current folder (``.``, ``..``, ``''``: :func:`lvsearch.io.check_replaceable`), that
    is a file, or that is a non-empty folder without ``overwrite``.

    Raises:
        LvsearchError: naming ``out`` and the fix.
    """
    if source is not None:
        src, dst = Path(source).resolve(), Path(out).resolve()
        if dst == src or dst in src.parents:
            what = "is the model directory" if dst == src else "contains the model directory"
            raise LvsearchError(f"--out {out} {what} {source}; exporting there would delete the model it is exported "
                                "from (refused with or without --overwrite)",
                                fix=f"pass an --out outside {source}, e.g. --out {src.parent / (src.name + '-hf')}")
    check_replaceable(out)
    if out.exists() and not out.is_dir():
        raise LvsearchError(f"--out {out} is a file", fix="pass a folder path for the exported model")
    check_writable_folder(out)
    if out.is_dir() and any(out.iterdir()):
        if not is_export(out):
            raise LvsearchError(f"--out {out} exists and is not empty, and holds no lvsearch export (no lvsearch_export.json); "
                                "--overwrite replaces only an earlier export (refused with or without it)",
                                fix="pass a new or empty folder")
        if not overwrite:
            raise LvsearchError(f"--out {out} exists and is not empty (an earlier export); refusing to overwrite it",
                                fix="pass a new or empty folder, or --overwrite to replace it")


def is_export(folder: Path) -> bool:
    """Whether ``folder`` holds an export this verb wrote (``lvsearch_export.json`` of
    :data:`EXPORT_FORMAT`): the only folder ``export --overwrite`` replaces."""
    import json

    try:
        return json.loads((folder / "lvsearch_export.json").read_text(encoding="utf-8")).get("format") == EXPORT_FORMAT
    except (OSError, ValueError, AttributeError, UnicodeDecodeError):
        return False


@holds_output("out")
def export_model(model_dir: str | os.PathLike, out: str | os.PathLike, *, generator: bool = False,
                 overwrite: bool = False, loaded: "LoadedModel | None" = None) -> dict:
    """Write the Hugging Face folder of model directory ``model_dir`` to ``out`` (layout in the
    module docstring).

    Args:
        model_dir: an lvsearch model directory (``lvsearch retrain`` output, RUN/model).
        out: the export folder; must be new or empty unless ``overwrite``.
        generator: export the ELECTRA generator (``generator.safetensors``) instead of the encoder.
        overwrite: replace an existing ``out`` (only at the final rename).
        loaded: an already loaded ``model_dir`` (skips loading it again).

    Returns:
        ``{"out": Path, "which": "encoder" | "discriminator" | "generator", "architectures": [...],
        "mlm_head": bool, "rtd_head": str | None, "tensors": int}``.

    Raises:
        LvsearchError: ``model_dir`` is not a loadable model directory (see
            :func:`lvsearch.modeldir.load_model`); ``--generator`` for a model without a
            generator; ``out`` refused (:func:`check_out`: a file, non-empty without
            ``overwrite``, or the model directory or a folder containing it). Nothing is
            written then.
    """
    from lvsearch.io import atomic_write_bytes, atomic_write_json, save_safetensors, sha256_bytes, umask
    from lvsearch.modeldir import TOKENIZER, load_model

    model_dir, out = Path(model_dir), Path(out)
    check_out(out, overwrite, source=model_dir)
    restore_replaced_folder(out)  # a replacement killed between its renames: the old export comes back
    check_out(out, overwrite, source=model_dir)
    if loaded is None and (model_dir / "model" / "config.json").is_file():  # a retrain run folder
        raise LvsearchError(f"{model_dir} is a run folder, not a model directory", fix=f"pass --model {model_dir / 'model'}")
    if loaded is None:
        loaded = load_model(model_dir)
    rtd, rtd_note = None, None
    if generator:
        if loaded.generator is None:
            raise LvsearchError(f"{model_dir} has no ELECTRA generator (no generator.safetensors; objective "
                                f"{loaded.objective!r})", fix="drop --generator to export the model itself")
        enc, which, with_mlm = loaded.generator, "generator", True
        architectures = ["LvsearchForMaskedLM"]
    elif loaded.objective == "electra":
        enc, which, with_mlm = loaded.encoder, "discriminator", False
        architectures = ["LvsearchForPreTraining"]
        rtd, rtd_note = _read_rtd_head(model_dir)
    else:
        enc, which, with_mlm = loaded.encoder, "encoder", True
        architectures = ["LvsearchForMaskedLM"]
    state = dict(enc.state_dict())
    if rtd is not None:
        state.update(rtd)
    tensors = hf_state_dict(state, mlm_head=with_mlm)
    code = export_code()
    provenance = {"format": EXPORT_FORMAT, "source": str(model_dir.resolve()), "objective": loaded.objective,
                  "which": which, "tokenizer_sha256": loaded.tokenizer_sha256,
                  "code_sha256": {name: sha256_bytes(data) for name, data in code.items()},
                  "rtd_head": rtd_note, "lvsearch_config": loaded.config,
                  "training_args": loaded.training_args}
    config = hf_config(enc.arch, enc.dims, architectures=architectures,
                       extra={"objective": loaded.objective, "which": which})
    tok_config, special = tokenizer_files(loaded.tokenizer, enc.dims.max_len)

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp"))
    try:
        os.chmod(tmp, 0o777 & ~umask())
        save_safetensors(tensors, tmp / "model.safetensors", metadata={"format": "pt"})
        for name, data in code.items():
            atomic_write_bytes(tmp / name, data)
        atomic_write_bytes(tmp / "tokenizer.json", (loaded.folder / TOKENIZER).read_bytes())
        atomic_write_json(tmp / "tokenizer_config.json", tok_config)
        atomic_write_json(tmp / "special_tokens_map.json", special)
        atomic_write_json(tmp / "lvsearch_export.json", provenance)
        atomic_write_json(tmp / "config.json", config)
        if out.exists():
            check_out(out, overwrite, source=model_dir)  # still allowed (it may have been filled meanwhile)
        replace_folder(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return {"out": out, "which": which, "architectures": architectures, "mlm_head": with_mlm,
            "rtd_head": rtd_note, "tensors": len(tensors)}


__all__ = ["export_model", "hf_name", "hf_state_dict", "hf_config", "tokenizer_files", "check_out", "template_sha256",
           "export_code_problem", "export_code", "ops_index_source", "read_provenance", "ExportProvenance", "AUTO_MAP",
           "EXPORT_FORMAT", "PROVENANCE", "TEMPLATE_FILES"]
