"""``lvsearch evaluate --model hf:PATH_OR_NAME``: any Hugging Face masked LM in the same harness.

:func:`load_hf_model` loads ``AutoModelForMaskedLM`` and its fast tokenizer (with
``trust_remote_code=True``, so an ``lvsearch export`` folder works too) and wraps them so that
the BLiMP PLL scorer (:mod:`lvsearch.eval.blimp`), the fine-tuning harness
(:mod:`lvsearch.eval.finetune`) and the MLM dev metrics (:mod:`lvsearch.eval.mlm`) run on it
unchanged:

- :class:`HFScorer` (BLiMP, MLM dev): ``forward(ids (B, L), mask (B, L) bool)`` returns the MLM
  logits ``(B, L, V)`` of every position and ``mlm_logits`` is the identity, so a scorer's
  ``model.mlm_logits(model(ids, mask)[rows, pos])`` is the model's own MLM head at the chosen
  positions. Memory per forward pass is ``rows × L × V`` floats (the BLiMP token budget bounds
  ``rows × L``).
- :class:`HFEncoder` (fine-tuning): the MLM model's base model (``model.base_model``, i.e. the
  ``AutoModel`` part, no MLM head), returning ``last_hidden_state (B, L, H)``; the classifier
  reads position 0 as for lvsearch encoders. Layer-wise LR decay is not available (it needs
  lvsearch's slot names).
- :class:`HFTokenizerView`: the fast tokenizer's ``tokenizers.Tokenizer`` with lvsearch's
  special-token names (``[PAD]`` ``[UNK]`` ``[CLS]`` ``[SEP]`` ``[MASK]``) mapped to the model's
  own (``<pad>``, ``<s>``, ... for RoBERTa-style tokenizers).

MLM dev metrics need the prepared data's token ids to mean the same tokens: the model's
``tokenizer.json`` must be the data's (same sha256, as for model directories) or have the
same vocabulary (:func:`check_hf_tokenizer`); otherwise they are refused with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from lvsearch.errors import LvsearchError

HF_PREFIX = "hf:"
_FIX_MLM = ("pass a masked language model (a folder or hub name that AutoModelForMaskedLM loads, e.g. an "
            "'lvsearch export' folder or bert-base-uncased), or an lvsearch model directory without the hf: prefix")


def is_hf_spec(spec: str | None) -> bool:
    """Whether a ``--model`` argument names a Hugging Face model (``hf:PATH_OR_NAME``)."""
    return bool(spec) and str(spec).startswith(HF_PREFIX)


class HFTokenizerView:
    """A ``tokenizers.Tokenizer`` (the fast tokenizer's backend, private copy without padding or
    truncation) whose :meth:`token_to_id` also answers lvsearch's special-token names with the
    ids of the model's own special tokens."""

    def __init__(self, hf_tokenizer):
        from tokenizers import Tokenizer

        self.backend = Tokenizer.from_str(hf_tokenizer.backend_tokenizer.to_str())
        self.backend.no_padding()
        self.backend.no_truncation()
        t = hf_tokenizer
        self.names = {"[PAD]": t.pad_token, "[UNK]": t.unk_token, "[CLS]": t.cls_token or t.bos_token,
                      "[SEP]": t.sep_token or t.eos_token, "[MASK]": t.mask_token}

    def token_to_id(self, token: str):
        mapped = self.names.get(token) or token
        return self.backend.token_to_id(mapped)

    def encode_batch(self, texts, *args, **kwargs):
        return self.backend.encode_batch(texts, *args, **kwargs)

    def encode(self, *args, **kwargs):
        return self.backend.encode(*args, **kwargs)

    def to_str(self) -> str:
        return self.backend.to_str()

    def get_vocab(self) -> dict:
        return self.backend.get_vocab()

    def get_vocab_size(self) -> int:
        return self.backend.get_vocab_size()


def _dims(config, tokenizer, pad_id: int) -> SimpleNamespace:
    max_len = getattr(config, "max_position_embeddings", None) or 512
    tok_max = getattr(tokenizer, "model_max_length", None)
    if isinstance(tok_max, int) and 0 < tok_max < 10**6:
        max_len = min(max_len, tok_max)
    hidden = getattr(config, "hidden_size", None) or getattr(config, "d_model", None) or getattr(config, "dim", None)
    return SimpleNamespace(max_len=int(max_len), hidden=int(hidden), vocab_size=int(config.vocab_size), pad_id=pad_id)


def _torch_module_classes():
    import torch
    from torch import nn

    class HFScorer(nn.Module):
        """Masked LM as a scorer: ``forward(ids (B, L), mask (B, L) bool) -> logits (B, L, V)``;
        ``mlm_logits`` = identity (see the module docstring)."""

        def __init__(self, model, dims):
            super().__init__()
            self.model, self.dims = model, dims

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
            am = None if attention_mask is None else attention_mask.long()
            return self.model(input_ids=input_ids, attention_mask=am).logits

        def mlm_logits(self, logits: torch.Tensor) -> torch.Tensor:
            return logits

        def padding_mask(self, input_ids: torch.Tensor) -> torch.Tensor:
            return input_ids != self.dims.pad_id

    class HFEncoder(nn.Module):
        """The base model of a masked LM for fine-tuning: ``forward(ids (B, L), mask (B, L))``
        -> ``last_hidden_state (B, L, H)``. ``mlm_head`` is an empty module (the MLM head is not
        part of it); ``num_slots`` = ``config.num_hidden_layers``."""

        def __init__(self, base, dims, num_slots: int):
            super().__init__()
            self.base, self.dims, self.num_slots = base, dims, num_slots
            self.mlm_head = nn.Module()

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
            am = None if attention_mask is None else attention_mask.long()
            return self.base(input_ids=input_ids, attention_mask=am).last_hidden_state

    return HFScorer, HFEncoder


@dataclass
class HFLoaded:
    """A Hugging Face masked LM loaded for ``lvsearch evaluate`` (in eval mode, on ``device``).

    Attributes:
        scorer: :class:`HFScorer` (BLiMP, MLM dev metrics).
        encoder: :class:`HFEncoder` (fine-tuning).
        tokenizer: :class:`HFTokenizerView`.
        spec: the argument after ``hf:``; folder: its resolved local folder (None for a hub name).
        config: the report's ``model.config`` (``objective`` ``"hf"``, ``source`` ``"hf"``, the
            HF model type and class, and ``arch`` of an lvsearch export, else None).
        num_params: parameters of the MLM model (tied weights once).
        tokenizer_sha256: sha256 of the folder's ``tokenizer.json`` (None when absent).
        training_args, extra: of the source model directory when the folder is an lvsearch
            export (``lvsearch_export.json``), else empty (used by the MLM reference floors).
    """

    scorer: Any
    encoder: Any
    tokenizer: HFTokenizerView
    spec: str
    folder: Path | None
    config: dict
    num_params: int
    tokenizer_sha256: str | None
    training_args: dict = field(default_factory=dict)
    extra: dict = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.folder.resolve().name if self.folder is not None else self.spec.replace("/", "_")


def load_hf_model(spec: str, *, device: str = "cpu") -> HFLoaded:
    """Load ``hf:PATH_OR_NAME`` (the prefix optional here) for evaluation.

    Raises:
        LvsearchError: transformers is not installed; the path/name cannot be loaded (message
            with the reason); the model is not a masked LM (AutoModelForMaskedLM has no class
            for its config); its tokenizer is not a fast tokenizer or lacks a mask/pad token.
            Each message names the path and the fix.
    """
    from lvsearch.io import read_json, sha256_file

    name = spec[len(HF_PREFIX):] if is_hf_spec(spec) else spec
    if not name:
        raise LvsearchError("--model hf: names no model", fix="pass hf:PATH (a local folder) or hf:NAME (a hub model)")
    try:
        import transformers
        from transformers import AutoConfig, AutoModelForMaskedLM, AutoTokenizer
    except ImportError:
        raise LvsearchError("--model hf:... needs the transformers package",
                            fix="pip install 'transformers>=5' (or pip install -e '.[dev]')") from None
    local = Path(name).expanduser()
    folder = local if local.is_dir() else None
    if folder is None and (local.exists() or name.startswith((".", "/", "~")) or name.count("/") > 1):
        raise LvsearchError(f"Hugging Face model folder not found: {local}",
                            fix="pass hf:PATH to a folder with config.json (e.g. written by 'lvsearch export'), or hf:NAME of a hub model")
    if folder is not None and not (folder / "config.json").is_file():
        raise LvsearchError(f"{folder} is not a Hugging Face model folder (no config.json)", fix=_FIX_MLM)
    where = str(folder) if folder is not None else name
    transformers.logging.set_verbosity_error()
    try:
        config = AutoConfig.from_pretrained(where, trust_remote_code=True)
    except Exception as e:  # noqa: BLE001 (transformers raises OSError/ValueError/... for unloadable models)
        raise LvsearchError(f"cannot load the Hugging Face config of {where}: {str(e).splitlines()[0]}", fix=_FIX_MLM) from None
    try:
        model = AutoModelForMaskedLM.from_pretrained(where, trust_remote_code=True)
    except ValueError as e:
        if "Unrecognized configuration class" in str(e) or "masked" in str(e).lower():
            raise LvsearchError(f"{where} is not a masked language model (model type {config.model_type!r}: "
                                "AutoModelForMaskedLM has no class for it)", fix=_FIX_MLM) from None
        raise LvsearchError(f"cannot load {where} as a masked LM: {str(e).splitlines()[0]}", fix=_FIX_MLM) from None
    except Exception as e:  # noqa: BLE001
        raise LvsearchError(f"cannot load {where} as a masked LM: {str(e).splitlines()[0]}", fix=_FIX_MLM) from None
    try:
        tok = AutoTokenizer.from_pretrained(where, trust_remote_code=True)
    except Exception as e:  # noqa: BLE001
        raise LvsearchError(f"cannot load the tokenizer of {where}: {str(e).splitlines()[0]}",
                            fix="the folder needs a fast tokenizer (tokenizer.json + tokenizer_config.json)") from None
    if not hasattr(tok, "backend_tokenizer"):
        raise LvsearchError(f"the tokenizer of {where} is not a fast (tokenizers) tokenizer",
                            fix="save the model with a fast tokenizer (tokenizer.json)")
    if tok.mask_token is None or tok.pad_token is None:
        raise LvsearchError(f"the tokenizer of {where} has no mask or pad token, so it is not a masked-LM tokenizer",
                            fix=_FIX_MLM)
    view = HFTokenizerView(tok)
    dims = _dims(config, tok, int(tok.pad_token_id))
    HFScorer, HFEncoder = _torch_module_classes()
    model.to(device).eval()
    scorer = HFScorer(model, dims).eval()
    encoder = HFEncoder(model.base_model, dims, int(getattr(config, "num_hidden_layers", 0) or 0)).eval()
    prov = {}
    if folder is not None and (folder / "lvsearch_export.json").is_file():
        prov = read_json(folder / "lvsearch_export.json", what="lvsearch export provenance")
    lv_cfg = prov.get("lvsearch_config") or {}
    report_config = {
        "objective": "hf",
        "source": "hf",
        "hf": {"spec": name, "model_type": config.model_type, "class": type(model).__name__,
               "transformers": transformers.__version__},
        "arch": lv_cfg.get("arch") if prov.get("which") != "generator" else lv_cfg.get("generator_arch") or lv_cfg.get("arch"),
        "lvsearch_export": {k: prov[k] for k in ("source", "objective", "which") if k in prov} or None,
    }
    tok_file = folder / "tokenizer.json" if folder is not None else None
    return HFLoaded(
        scorer=scorer, encoder=encoder, tokenizer=view, spec=name, folder=folder, config=report_config,
        num_params=sum(p.numel() for p in model.parameters()),
        tokenizer_sha256=sha256_file(tok_file) if tok_file is not None and tok_file.is_file() else None,
        training_args=prov.get("training_args") or {}, extra=lv_cfg.get("extra") or {},
    )


def check_hf_tokenizer(loaded: HFLoaded, data) -> str:
    """Check the model's tokenizer gives the prepared data's token ids; returns how
    (``"same tokenizer.json"`` or ``"same vocabulary"``).

    Raises:
        LvsearchError: the vocabularies differ (the fixed dev set is token ids of the data's
            tokenizer, so the model would be scored on other tokens).
    """
    if loaded.tokenizer_sha256 is not None and loaded.tokenizer_sha256 == data.tokenizer_sha256:
        return "same tokenizer.json"
    if loaded.tokenizer.get_vocab() == data.tokenizer.get_vocab():
        return "same vocabulary"
    raise LvsearchError(
        f"hf:{loaded.spec} does not use the tokenizer of the prepared data {data.folder} (its vocabulary differs), "
        "so its MLM dev accuracy on that data's token ids would be meaningless",
        fix="drop --mlm-data for this model (BLiMP and fine-tuning tokenise raw text with the model's own tokenizer), "
            "or prepare data with the model's tokenizer: lvsearch data prepare --tokenizer PATH/tokenizer.json",
    )


__all__ = ["HF_PREFIX", "HFLoaded", "HFTokenizerView", "is_hf_spec", "load_hf_model", "check_hf_tokenizer"]
