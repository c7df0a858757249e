"""Tiny Hugging Face model folders for the ``evaluate --model hf:`` consent and refusal tests
(tests/test_export.py, tests/test_reliability.py): a stock BertForMaskedLM and damaged or
hostile variants of it. Each builds in well under a second (hidden 16, one layer).

A "marker" is an absolute path that the folder's code writes when it runs (remote code at
import, a pickle payload at unpickling): a test asserts it never appears without consent.
"""

from __future__ import annotations

import json
from pathlib import Path


def bert_config(vocab_size: int):
    from transformers import BertConfig

    return BertConfig(vocab_size=vocab_size, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                      intermediate_size=32, max_position_embeddings=128)


def save_tokenizer(folder: Path, tokenizer_json: Path) -> None:
    """The lvsearch tokenizer as a fast HF tokenizer (tokenizer.json + tokenizer_config.json)."""
    from transformers import PreTrainedTokenizerFast

    PreTrainedTokenizerFast(tokenizer_file=str(tokenizer_json), pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]",
                            sep_token="[SEP]", mask_token="[MASK]").save_pretrained(folder)


class _Payload:
    """Unpickling it runs ``open(marker, 'w')`` (what a hostile pytorch_model.bin does)."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return exec, (f"open({self.marker!r}, 'w').close()",)


def bert_folder(folder: Path, tokenizer_json: Path | None, *, vocab_size: int, head: bool = True,
                weights: str = "safetensors", marker: Path | None = None, seed: int = 0) -> Path:
    """A saved BertForMaskedLM (``head=False``: a BertModel, no MLM head) with ``vocab_size``
    embedding rows and, unless ``tokenizer_json`` is None, that tokenizer. ``weights``:
    ``"safetensors"`` (save_pretrained), ``"pickle"`` (only ``pytorch_model.bin``, torch.save of
    the state dict) or ``"poison"`` (the same plus an object whose unpickling writes ``marker``)."""
    import torch
    from transformers import BertForMaskedLM, BertModel

    torch.manual_seed(seed)
    model = (BertForMaskedLM if head else BertModel)(bert_config(vocab_size))
    if weights == "safetensors":
        model.save_pretrained(folder)
    else:
        folder.mkdir(parents=True)
        model.config.save_pretrained(folder)
        state = dict(model.state_dict())
        if weights == "poison":
            state["payload"] = _Payload(marker)
        torch.save(state, folder / "pytorch_model.bin")
    if tokenizer_json is not None:
        save_tokenizer(folder, tokenizer_json)
    return folder


MARKER_CONFIG = """\
open({marker!r}, "w").close()  # runs at import: the marker says this file was executed
from transformers import BertConfig


class MarkerConfig(BertConfig):
    model_type = "marker-bert"
"""
MARKER_MODEL = """\
from transformers import BertForMaskedLM

from .marker_config import MarkerConfig


class MarkerForMaskedLM(BertForMaskedLM):
    config_class = MarkerConfig
"""
MARKER_TOKENIZER = """\
open({marker!r}, "w").close()
from transformers import PreTrainedTokenizerFast


class MarkerTokenizer(PreTrainedTokenizerFast):
    pass
"""


def remote_code_folder(folder: Path, tokenizer_json: Path, *, vocab_size: int, marker: Path,
                       in_tokenizer: bool = False) -> Path:
    """A working BertForMaskedLM whose ``config.json`` ``auto_map`` points at its own
    ``marker_config.py`` / ``marker_model.py`` (``in_tokenizer``: whose ``tokenizer_config.json``
    ``auto_map`` points at ``marker_tokenizer.py``); importing that code writes ``marker``."""
    bert_folder(folder, tokenizer_json, vocab_size=vocab_size)
    if in_tokenizer:
        (folder / "marker_tokenizer.py").write_text(MARKER_TOKENIZER.format(marker=str(marker)))
        path = folder / "tokenizer_config.json"
        cfg = json.loads(path.read_text())
        cfg["auto_map"] = {"AutoTokenizer": [None, "marker_tokenizer.MarkerTokenizer"]}
        cfg["tokenizer_class"] = "MarkerTokenizer"
    else:
        (folder / "marker_config.py").write_text(MARKER_CONFIG.format(marker=str(marker)))
        (folder / "marker_model.py").write_text(MARKER_MODEL)
        path = folder / "config.json"
        cfg = json.loads(path.read_text())
        cfg["model_type"] = "marker-bert"
        cfg["auto_map"] = {"AutoConfig": "marker_config.MarkerConfig", "AutoModelForMaskedLM": "marker_model.MarkerForMaskedLM"}
    path.write_text(json.dumps(cfg, indent=2))
    return folder


def flip_byte(path: Path, offset: int = 5) -> None:
    """Change one byte of ``path`` (by default the 6th: inside a module docstring, so the file stays valid Python)."""
    raw = bytearray(path.read_bytes())
    raw[offset] ^= 1
    path.write_bytes(bytes(raw))
