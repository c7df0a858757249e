"""``lvsearch evaluate --model hf:PATH_OR_NAME``: any Hugging Face masked LM in the same harness.

:func:`load_hf_model` loads ``AutoModelForMaskedLM`` and its fast tokenizer and wraps them so that
the BLiMP PLL scorer (:mod:`lvsearch.eval.blimp`), the fine-tuning harness
(:mod:`lvsearch.eval.finetune`) and the MLM dev metrics (:mod:`lvsearch.eval.mlm`) run on it
unchanged:

- :class:`HFScorer` (BLiMP, MLM dev): ``forward(ids (B, L), mask (B, L) bool)`` returns the base
  model's hidden states ``(B, L, H)`` and ``mlm_logits`` is the model's MLM head, so a scorer's
  ``model.mlm_logits(model(ids, mask)[rows, pos])`` runs the head only at the chosen positions
  (checked at load against the model's own logits on a probe input; a model whose head is not
  one module after its base model gets full logits ``(B, L, V)`` and an identity head).
- :class:`HFEncoder` (fine-tuning): the MLM model's base model (``model.base_model``, i.e. the
  ``AutoModel`` part, no MLM head), returning ``last_hidden_state (B, L, H)``; the classifier
  reads position 0 as for lvsearch encoders. Layer-wise LR decay is not available (it needs
  lvsearch's slot names).
- :class:`HFTokenizerView`: the fast tokenizer's ``tokenizers.Tokenizer`` with lvsearch's
  special-token names (``[PAD]`` ``[UNK]`` ``[CLS]`` ``[SEP]`` ``[MASK]``) mapped to the model's
  own (``<pad>``, ``<s>``, ... for RoBERTa-style tokenizers).

What may run and be unpickled (SECURITY.md): :func:`inspect_hf_source` reads only the folder's
JSON files, before anything is imported. Python files named by an ``auto_map`` (config.json,
tokenizer_config.json) run only with ``trust_remote_code`` (``--trust-remote-code``); the one
exception is a verified ``lvsearch export`` folder, whose two .py files equal the installed
template (sha256), and which is loaded with the installed template's classes, so none of its
files is imported. Weights are read with ``use_safetensors=True``; pickle weights only with
``allow_pickle`` (``--allow-pickle``) and then with ``weights_only=True``.

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
        """Masked LM as a scorer: ``forward(ids (B, L), mask (B, L) bool)`` returns the base
        model's ``last_hidden_state (B, L, H)`` and ``mlm_logits(h (..., H))`` the MLM head's
        logits ``(..., V)``, so a scorer runs the head only at the positions it reads. When the
        model's head is not one module after its base model (checked on a probe input by
        :meth:`split_head`), ``forward`` returns the full logits ``(B, L, V)`` and
        ``mlm_logits`` is the identity."""

        def __init__(self, model, dims):
            super().__init__()
            self.model, self.dims = model, dims
            self.head = None

        def split_head(self, probe: torch.Tensor) -> bool:
            """Use ``base_model`` + the one non-base child module as the head when that equals
            the model's own logits on ``probe`` (``(1, L)`` ids); returns whether it does."""
            base = self.model.base_model
            heads = [m for _, m in self.model.named_children() if m is not base]
            if base is self.model or len(heads) != 1:
                return False
            with torch.inference_mode():
                full = self.model(input_ids=probe).logits
                try:
                    split = heads[0](base(input_ids=probe).last_hidden_state)
                except Exception:  # noqa: BLE001 (a head that is not a plain hidden → logits module)
                    return False
            if isinstance(split, torch.Tensor) and split.shape == full.shape and torch.allclose(split, full, atol=1e-5):
                self.head = heads[0]
                return True
            return False

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
            am = None if attention_mask is None else attention_mask.long()
            if self.head is not None:
                return self.model.base_model(input_ids=input_ids, attention_mask=am).last_hidden_state
            return self.model(input_ids=input_ids, attention_mask=am).logits

        def mlm_logits(self, hidden: torch.Tensor) -> torch.Tensor:
            return hidden if self.head is None else self.head(hidden)

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


# Weight files as transformers names them (transformers.utils.SAFE_WEIGHTS_NAME, ...): the
# safetensors ones lvsearch loads, and the pickle formats it refuses without --allow-pickle.
SAFE_WEIGHTS = ("model.safetensors", "model.safetensors.index.json")
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle")
TOKENIZER_CONFIG = "tokenizer_config.json"
#: The tokenizer files of a folder that transformers reads when they are files and skips otherwise.
TOKENIZER_FILES = (TOKENIZER_CONFIG, "tokenizer.json", "special_tokens_map.json")
_CONSENT_FIX = ("read those files; if you trust them, pass --trust-remote-code to run them "
                "(an unedited 'lvsearch export' folder of this lvsearch version needs no flag)")


@dataclass(frozen=True)
class HFSource:
    """What loading ``hf:SPEC`` will read and run, found by :func:`inspect_hf_source` from the
    folder's JSON files alone (nothing imported, no weights read).

    Attributes:
        name: the argument after ``hf:``; folder: the local folder (None for a hub name, which
            is checked by transformers at load: ``trust_remote_code`` and ``use_safetensors``).
        remote_code: the Python files the folder's ``auto_map`` names (empty when none).
        lvsearch_export: a verified ``lvsearch export`` folder (:func:`lvsearch.export.export_code_problem`
            found nothing): loaded with the installed template's classes, none of its files run.
        pickle_weights: the pickle weight files that will be loaded (only with ``allow_pickle``
            and no safetensors file), else empty.
    """

    name: str
    folder: Path | None
    remote_code: tuple[str, ...] = ()
    lvsearch_export: bool = False
    pickle_weights: tuple[str, ...] = ()


def _read_json_object(path: Path, what: str) -> dict:
    from lvsearch.io import read_json

    try:
        obj = read_json(path, what=what)
    except LvsearchError as e:
        raise LvsearchError(str(e).split("\n  fix:")[0], fix=f"repair {path.name} or re-save the model ({_FIX_MLM})") from None
    if not isinstance(obj, dict):
        raise LvsearchError(f"{what} {path} is not a JSON object", fix=f"repair {path.name} or re-save the model")
    return obj


def _auto_map_files(obj: dict, folder: Path, source: str) -> list[str]:
    """The Python files an ``auto_map`` (config.json: ``{"AutoX": "module.Class", ...}``;
    tokenizer_config.json: the same or ``[slow, fast]``) makes transformers import."""
    am = obj.get("auto_map")
    if not am:
        return []
    values = list(am.values()) if isinstance(am, dict) else list(am) if isinstance(am, (list, tuple)) else [am]
    files = []
    for v in values:
        for ref in (v if isinstance(v, (list, tuple)) else [v]):
            if not isinstance(ref, str) or not ref:
                continue
            repo, _, ref = ref.rpartition("--")
            module = ref.rsplit(".", 1)[0]
            files.append(f"{module}.py of the hub repository {repo}" if repo else str(folder / f"{module}.py"))
    return files or [f"{folder / source} auto_map {am!r}"]


def inspect_hf_source(spec: str, *, trust_remote_code: bool = False, allow_pickle: bool = False) -> HFSource:
    """Check, before anything is imported or loaded, that ``hf:PATH_OR_NAME`` may be loaded.

    A local folder must have ``config.json`` (a JSON object). Python files named by an
    ``auto_map`` in ``config.json`` or ``tokenizer_config.json`` would run at load: they are
    refused unless ``trust_remote_code``, except in a verified ``lvsearch export`` folder
    (model type ``lvsearch``, ``auto_map`` naming only its two template modules, and
    :func:`lvsearch.export.export_code_problem` finding nothing). Weights must be safetensors
    (``model.safetensors`` or its sharded index); a folder with only pickle weights
    (``pytorch_model.bin``, ``*.pt``, ...) is refused unless ``allow_pickle``. A hub name is
    not inspected here (transformers applies ``trust_remote_code=False`` and
    ``use_safetensors=True`` to it at load).

    Raises:
        LvsearchError: an empty name; a missing folder; no ``config.json``; a tokenizer file
            (:data:`TOKENIZER_FILES`) that exists but is not a file; ``config.json`` or
            ``tokenizer_config.json`` not a JSON object; remote code without consent (the
            message names the files and ``--trust-remote-code``); only pickle weights without
            ``allow_pickle`` (the message says how to convert them). A folder without any
            weights file is refused by :func:`load_hf_model` (after the masked-LM check).
    """
    name = spec[len(HF_PREFIX):] if is_hf_spec(spec) else spec
    if not name:
        raise LvsearchError("--model hf: names no model", fix="pass hf:PATH (a local folder) or hf:NAME (a hub model)")
    local = Path(name).expanduser()
    folder = local if local.is_dir() else None
    if folder is None and (local.exists() or name.startswith((".", "/", "~")) or name.count("/") > 1):
        raise LvsearchError(f"Hugging Face model folder not found: {local}",
                            fix="pass hf:PATH to a folder with config.json (e.g. written by 'lvsearch export'), or hf:NAME of a hub model")
    if folder is None:
        return HFSource(name=name, folder=None)
    if not (folder / "config.json").is_file():
        raise LvsearchError(f"{folder} is not a Hugging Face model folder (no config.json)", fix=_FIX_MLM)
    for fname in TOKENIZER_FILES:  # transformers skips one that is not a file: the tokenizer would load without it
        if (folder / fname).exists() and not (folder / fname).is_file():
            raise LvsearchError(f"{folder / fname} is not a file (a folder or another special file); the tokenizer "
                                "would be loaded without it, with other settings than the model was saved with",
                                fix=f"replace it with the model's own {fname} (tokenizer.save_pretrained(DIR) "
                                    "writes it), or delete it if the model has none")
    config = _read_json_object(folder / "config.json", "Hugging Face config")
    tok_config = (_read_json_object(folder / TOKENIZER_CONFIG, "Hugging Face tokenizer config")
                  if (folder / TOKENIZER_CONFIG).is_file() else {})
    code = _auto_map_files(config, folder, "config.json") + _auto_map_files(tok_config, folder, TOKENIZER_CONFIG)
    code = tuple(dict.fromkeys(code))
    verified = False
    if code:
        from lvsearch.export import MODEL_TYPE, TEMPLATE_FILES, export_code_problem

        template = {str(folder / n) for n in TEMPLATE_FILES}
        if config.get("model_type") == MODEL_TYPE and not tok_config.get("auto_map") and set(code) <= template:
            problem = export_code_problem(folder)
            verified = problem is None
            why = f"; it looks like an 'lvsearch export' folder, but {problem}" if problem else ""
        else:
            why = ""
        if not verified and not trust_remote_code:
            where = " and ".join(n for n, c in (("config.json", config), (TOKENIZER_CONFIG, tok_config)) if c.get("auto_map"))
            raise LvsearchError(
                f"{folder} ships Python code that loading it would run: {', '.join(code)} (auto_map in {where}){why}; "
                "lvsearch runs no code from a model folder without --trust-remote-code",
                fix=(f"re-export the model with this lvsearch: lvsearch export --model MODEL_DIR --out {folder} "
                     "--overwrite (needs no flag to evaluate); --trust-remote-code would run these files: pass it only "
                     "if you trust where the folder came from and have read them") if why else _CONSENT_FIX)
    pickles: tuple[str, ...] = ()
    if not any((folder / n).is_file() for n in SAFE_WEIGHTS):
        pickles = tuple(sorted(p.name for p in folder.iterdir() if p.is_file() and p.suffix in PICKLE_SUFFIXES))
        if pickles and not allow_pickle:
            listed = ", ".join(str(folder / n) for n in pickles)
            raise LvsearchError(
                f"{folder} holds its weights only as pickle ({listed}), which can run code when it is loaded; "
                "lvsearch loads safetensors weights only",
                fix=f"convert it once, where you trust the file: python -c \"from transformers import AutoModelForMaskedLM; "
                    f"AutoModelForMaskedLM.from_pretrained('{folder}', use_safetensors=False).save_pretrained('{folder}')\" "
                    "(writes model.safetensors), or pass --allow-pickle to load it with torch's weights_only unpickler")
    return HFSource(name=name, folder=folder, remote_code=code, lvsearch_export=verified, pickle_weights=pickles)


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


def _load_error(where: str, what: str, e: Exception, fix: str) -> LvsearchError:
    """A transformers exception as one message; a refused custom-code or pickle load named as such."""
    text = str(e)
    if "trust_remote_code" in text:
        return LvsearchError(f"{where} ships Python code (an auto_map) that loading it would run; lvsearch runs no code "
                             "from a model without --trust-remote-code", fix=_CONSENT_FIX)
    if "Weights only load failed" in text:
        why = next((ln.strip() for ln in text.splitlines() if "WeightsUnpickler error" in ln), "")
        why = why.split("WeightsUnpickler error:", 1)[-1].split(". ")[0].strip()
        return LvsearchError(f"the pickle weights of {where} hold more than tensors, so torch's weights_only unpickler "
                             f"refused them{f' ({why})' if why else ''}; they may be malicious",
                             fix="do not load this file; ask its publisher for safetensors weights (model.safetensors)")
    if "safetensors" in text and "use_safetensors" in text:
        return LvsearchError(f"{where} has no safetensors weights (model.safetensors); lvsearch loads safetensors only",
                             fix="use a model published with safetensors weights, or pass --allow-pickle to load "
                                 "pytorch_model.bin with torch's weights_only unpickler")
    return LvsearchError(f"cannot load {what} of {where}: {_first_line(e)}", fix=fix)


def _load_masked_lm(source: HFSource, where: str, *, trust_remote_code: bool, allow_pickle: bool):
    """The config and masked-LM model of ``where`` (the installed template's classes for a verified
    ``lvsearch export`` folder); returns ``(config, model, code_note)``. Raises the refusals of
    :func:`load_hf_model` about the model (not loadable, not a masked LM, no weights, no MLM head)."""
    from transformers import AutoConfig, AutoModelForMaskedLM

    folder = source.folder
    if source.lvsearch_export:  # the installed template, byte-equal to the folder's files: none of them is imported
        from lvsearch.export.hf_template.configuration_lvsearch import LvsearchConfig
        from lvsearch.export.hf_template.modeling_lvsearch import LvsearchForMaskedLM

        config_cls, model_cls, code_kw = LvsearchConfig, LvsearchForMaskedLM, {}
        code_note = "lvsearch export (verified: the installed template's classes)"
    else:
        config_cls, model_cls, code_kw = AutoConfig, AutoModelForMaskedLM, {"trust_remote_code": trust_remote_code}
        code_note = ("--trust-remote-code: " + ", ".join(source.remote_code)) if source.remote_code else \
            ("--trust-remote-code (hub model)" if trust_remote_code and folder is None else "none")
    try:
        config = config_cls.from_pretrained(where, **code_kw)
    except Exception as e:  # noqa: BLE001 (transformers raises OSError/ValueError/... for unloadable models)
        raise _load_error(where, "the Hugging Face config", e, _FIX_MLM) from None
    weights_kw = {"use_safetensors": None if allow_pickle else True, "weights_only": True}
    try:
        model, info = model_cls.from_pretrained(where, config=config, output_loading_info=True, **weights_kw, **code_kw)
    except ValueError as e:
        if "Unrecognized configuration class" in str(e) or "masked" in str(e).lower():
            raise LvsearchError(f"{where} is not a masked language model (model type {config.model_type!r}: "
                                "AutoModelForMaskedLM has no class for it)", fix=_FIX_MLM) from None
        raise _load_error(where, "the masked LM", e, _FIX_MLM) from None
    except Exception as e:  # noqa: BLE001
        if folder is not None and isinstance(e, OSError) and not source.pickle_weights \
                and not any((folder / n).is_file() for n in SAFE_WEIGHTS):
            raise LvsearchError(f"{folder} has no weights file ({' or '.join(SAFE_WEIGHTS)})",
                                fix="save the model into the folder: model.save_pretrained(DIR) writes "
                                    "model.safetensors") from None
        raise _load_error(where, "the masked LM", e, _FIX_MLM) from None
    missing = sorted(info.get("missing_keys") or ())
    if missing:
        archs = getattr(config, "architectures", None) or ["(not recorded)"]
        raise LvsearchError(
            f"{where} is not a masked-LM checkpoint: its weights lack {len(missing)} parameter(s) of "
            f"{type(model).__name__} ({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''}), which would be "
            f"scored randomly initialised (the checkpoint's architectures: {', '.join(archs)})",
            fix="pass a model saved with its MLM head (e.g. from BertForMaskedLM, an 'lvsearch export' of an MLM "
                "model, or of an ELECTRA run with --generator)")
    return config, model, code_note


def _load_tokenizer(where: str, config, model, *, trust_remote_code: bool, lvsearch_export: bool):
    """The fast tokenizer of ``where``, checked: a mask and pad token, a vocabulary besides the
    special tokens, no id beyond the model's embedding rows. Raises LvsearchError naming the fix."""
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(where, config=config, trust_remote_code=trust_remote_code and not lvsearch_export)
    except Exception as e:  # noqa: BLE001
        raise _load_error(where, "the tokenizer", e,
                          "the folder needs a fast tokenizer (tokenizer.json + tokenizer_config.json)") from None
    if not hasattr(tok, "backend_tokenizer"):
        raise LvsearchError(f"the tokenizer of {where} is not a fast (tokenizers) tokenizer",
                            fix="save the model with a fast tokenizer (tokenizer.json)")
    if tok.mask_token is None or tok.pad_token is None:
        raise LvsearchError(f"the tokenizer of {where} has no mask or pad token, so it is not a masked-LM tokenizer",
                            fix=_FIX_MLM)
    vocab = tok.get_vocab()
    specials = set(tok.all_special_tokens)
    if not set(vocab) - specials:
        raise LvsearchError(
            f"the tokenizer of {where} has no vocabulary besides its {len(specials)} special tokens: there are no "
            f"tokenizer files (tokenizer.json, or the vocabulary files of its tokenizer class), so transformers built an "
            f"empty {type(tok).__name__}",
            fix="save the model's own tokenizer with it: tokenizer.save_pretrained(DIR) (writes tokenizer.json and "
                "tokenizer_config.json)")
    rows = model.get_input_embeddings().num_embeddings
    top = max(vocab.values()) + 1
    if top > rows:
        raise LvsearchError(
            f"the tokenizer of {where} has token ids up to {top - 1}, but the model's embedding has only {rows} rows "
            f"(config vocab_size {config.vocab_size}): the tokenizer is not the one the model was trained with",
            fix="save the model with its own tokenizer, or resize its embeddings to the tokenizer "
                "(model.resize_token_embeddings(len(tokenizer)), then train and save it again)")
    return tok


def _report_config(source: HFSource, config, model, code_note: str, prov: dict) -> dict:
    """The report's ``model.config`` entry of an ``hf:`` model (``prov``: its ``lvsearch_export.json``, or ``{}``)."""
    import transformers

    lv_cfg = prov.get("lvsearch_config") or {}
    return {
        "objective": "hf",
        "source": "hf",
        "hf": {"spec": source.name, "model_type": config.model_type, "class": type(model).__name__,
               "transformers": transformers.__version__, "code": code_note,
               "weights": ("pickle, --allow-pickle (weights_only=True): " + ", ".join(source.pickle_weights))
               if source.pickle_weights else "safetensors"},
        "arch": lv_cfg.get("arch") if prov.get("which") != "generator" else lv_cfg.get("generator_arch") or lv_cfg.get("arch"),
        "lvsearch_export": {k: prov[k] for k in ("source", "objective", "which") if k in prov} or None,
    }


def load_hf_model(spec: str, *, device: str = "cpu", trust_remote_code: bool = False,
                  allow_pickle: bool = False) -> HFLoaded:
    """Load ``hf:PATH_OR_NAME`` (the prefix optional here) for evaluation.

    :func:`inspect_hf_source` runs first: no code from the folder runs without
    ``trust_remote_code`` (a verified ``lvsearch export`` folder is loaded with the classes of
    the installed template, ``lvsearch.export.hf_template``); weights are read with
    ``use_safetensors=True``, or with ``allow_pickle`` and no safetensors file from pickle
    under ``weights_only=True``. Everything else goes through transformers with
    ``trust_remote_code`` as given.

    Raises:
        LvsearchError: the refusals of :func:`inspect_hf_source`; transformers is not
            installed; the path/name cannot be loaded (message with the reason; a hub model
            with custom code or without safetensors weights is named as such); the model is
            not a masked LM (AutoModelForMaskedLM has no class for its config, or the
            checkpoint lacks weights of its MLM head, e.g. a saved ``BertModel``); the folder
            has no weights file; its
            tokenizer is not a fast tokenizer, lacks a mask/pad token, has no vocabulary
            besides its special tokens (no tokenizer files), or has ids beyond the model's
            embedding rows. Each message names the path and the fix.
    """
    from lvsearch.export import PROVENANCE, read_provenance
    from lvsearch.io import sha256_file

    source = inspect_hf_source(spec, trust_remote_code=trust_remote_code, allow_pickle=allow_pickle)
    name, folder = source.name, source.folder
    try:
        import transformers
    except ImportError:
        raise LvsearchError("--model hf:... needs the transformers package",
                            fix="pip install 'transformers>=5' (or pip install -e '.[dev]')") from None
    where = str(folder) if folder is not None else name
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()  # lvsearch prints its own progress; no "Loading weights" bar
    config, model, code_note = _load_masked_lm(source, where, trust_remote_code=trust_remote_code,
                                               allow_pickle=allow_pickle)
    tok = _load_tokenizer(where, config, model, trust_remote_code=trust_remote_code,
                          lvsearch_export=source.lvsearch_export)
    view = HFTokenizerView(tok)
    dims = _dims(config, tok, int(tok.pad_token_id))
    HFScorer, HFEncoder = _torch_module_classes()
    model.to(device).eval()
    scorer = HFScorer(model, dims).eval()
    import torch

    specials = [i for i in (tok.cls_token_id, tok.mask_token_id, tok.sep_token_id) if i is not None]
    scorer.split_head(torch.tensor([specials + specials[:1]], device=device))
    encoder = HFEncoder(model.base_model, dims, int(getattr(config, "num_hidden_layers", 0) or 0)).eval()
    prov = {}
    if folder is not None and (folder / PROVENANCE).is_file():
        prov = read_provenance(folder)
    lv_cfg = prov.get("lvsearch_config") or {}
    report_config = _report_config(source, config, model, code_note, prov)
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


__all__ = ["HF_PREFIX", "HFLoaded", "HFSource", "HFTokenizerView", "is_hf_spec", "inspect_hf_source", "load_hf_model",
           "check_hf_tokenizer"]
