"""Fine-tuning on sentence / sentence-pair classification and regression tasks.

Tasks come from a folder of ``train.tsv``, ``dev.tsv`` and optional ``test.tsv`` (tab-separated,
header row, no quoting) or from a Hugging Face dataset given as ``NAME:CONFIG`` or
``hf:NAME:CONFIG`` (e.g. ``glue:rte``; needs the hub or a local cache). Column roles are detected from standard names:

* text: the pairs ``sentence1/sentence2``, ``premise/hypothesis``, ``question/sentence``,
  ``question1/question2``, ``question/passage``; else a single ``sentence`` or ``text`` column;
* label: ``label``, else ``score`` or ``gold_label``.

Labels: when every train label is an integer the task is classification over the sorted
distinct integers; when they are numbers but not all integers it is regression (e.g. STS-B);
otherwise the distinct strings of the train split, sorted, become ids 0..K-1 (RTE:
``entailment`` = 0, ``not_entailment`` = 1). A test split without a label column (or whose
labels are all empty / -1, as in GLUE) is unlabeled and gets no test metric.

Model: the pretrained Encoder, then dropout (0.1) and one linear layer on the ``[CLS]`` hidden
state — no pooler (lvsearch pretraining has no next-sentence objective that would train one).
The Encoder has no segment (token type) embeddings, so the two texts of a pair are told apart
only by the ``[SEP]`` between them. Optimiser: AdamW, linear warm-up over the first 10% of
steps then linear decay to 0, gradient clipping at 1.0, and optional layer-wise learning-rate
decay (LLRD; ELECTRA, Clark et al. 2020, appendix A "Fine-tuning details"): slot ``n`` of ``N``
trains with ``lr · d^(N−n)``, the embeddings with ``lr · d^N`` (the lowest), the classifier, the
ELC mixing logits and the output stage with ``lr``. Defaults were measured on lvsearch's own
encoders (docs/results.md, "Fine-tuning defaults"): lr ``1e-3 · 128 / hidden``
(:func:`default_lr`; ELECTRA's inverse-width scaling at a higher level), LLRD off (``d = 1``),
batch 32, 3 epochs, warm-up 10%, weight decay 0. ELECTRA-small's lr 3e-4 with LLRD 0.8 per
*slot* (0.8^12 = 0.07 at the embeddings of a 12-slot stack) left the train loss of these
encoders at ln 2.

A seed whose training loss did not fall (:func:`loss_did_not_fall`: last-epoch mean ≥ 0.98 ×
the loss of the best constant prediction) is marked ``failed`` with the reason and left out of
the aggregate; reports show a task whose every seed failed as :data:`FAILED_TEXT`.

Each seed fine-tunes a fresh copy; the epoch with the best dev score is selected and evaluated
on test: accuracy on balanced classification tasks, MCC (binary) or macro-F1 (multi-class) on
imbalanced ones, Pearson for regression (:func:`primary_metric`). Results per seed and mean / std (sample,
ddof = 1) / median over seeds.
"""

from __future__ import annotations

import csv
import io
import math
import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from lvsearch.errors import LvsearchError
from lvsearch.io import read_text, shown

TEXT_PAIRS = (("sentence1", "sentence2"), ("premise", "hypothesis"), ("question", "sentence"),
              ("question1", "question2"), ("question", "passage"))
TEXT_SINGLE = ("sentence", "text")
LABEL_COLUMNS = ("label", "score", "gold_label")
SPLIT_FILES = {"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv"}
MAX_FIELD_CHARS = 1_000_000
"""The longest field (characters) a task file may hold: Python's csv module stops at 131,072 by
default; a longer field is refused with its line number (the tokenizer keeps only the first
``--max-len`` tokens of a text, so no real example needs more)."""


@dataclass
class Example:
    """One example: text ``a``, optional second text ``b``, label (class id, float or None)."""

    a: str
    b: str | None
    label: int | float | None


@dataclass
class TaskData:
    """A loaded task.

    Attributes:
        name: short name (folder name or ``NAME:CONFIG``).
        source: the folder path or the HF spec.
        kind: ``"classification"`` or ``"regression"``.
        label_names: class names by id (classification) or None.
        columns: detected column roles ``{"text_a", "text_b", "label"}``.
        splits: ``train``, ``dev`` and (when present) ``test`` examples.
        test_labeled: whether the test split has labels.
    """

    name: str
    source: str
    kind: str
    label_names: list[str] | None
    columns: dict
    splits: dict[str, list[Example]]
    test_labeled: bool = False

    @property
    def num_outputs(self) -> int:
        return 1 if self.kind == "regression" else len(self.label_names or [])


def detect_columns(columns: Sequence[str], where: str) -> dict:
    """Column roles ``{"text_a", "text_b" (or None), "label" (or None)}`` from a header.

    Raises:
        LvsearchError: no recognisable text column; the message lists the columns found.
    """
    cols = [c.strip() for c in columns]
    lower = {c.lower(): c for c in cols}
    text_a = text_b = None
    for a, b in TEXT_PAIRS:
        if a in lower and b in lower:
            text_a, text_b = lower[a], lower[b]
            break
    else:
        for a in TEXT_SINGLE:
            if a in lower:
                text_a = lower[a]
                break
    if text_a is None:
        known = ", ".join("/".join(p) for p in TEXT_PAIRS) + ", " + ", ".join(TEXT_SINGLE)
        found = ", ".join(shown(c) for c in cols) or "(none)"
        raise LvsearchError(f"{where}: no recognisable text column among the columns found: {found}",
                            fix=f"name the text column(s) one of: {known}")
    label = next((lower[c] for c in LABEL_COLUMNS if c in lower), None)
    return {"text_a": text_a, "text_b": text_b, "label": label}


def read_tsv(path: Path) -> tuple[list[str], list[tuple[int, dict]]]:
    """Header and ``(line number, row dict)`` list of a tab-separated file (no quoting).

    The file is UTF-8, with or without a leading byte-order mark (spreadsheet programs write
    one); :func:`lvsearch.io.read_text` reads it.

    Raises:
        LvsearchError: a file in another encoding (the message names it), an empty file, a
            row whose field count differs from the header (the header's names quoted), or a
            field longer than :data:`MAX_FIELD_CHARS` (its line named).
    """
    text = read_text(path, what="task file")  # UTF-8, a leading byte-order mark dropped
    reader = csv.reader(io.StringIO(text, newline=""), delimiter="\t", quoting=csv.QUOTE_NONE)
    header = next(reader, None)
    if not header:
        raise LvsearchError(f"{path} is empty (a header row is expected)", fix="write a header row, e.g. 'sentence<TAB>label'")
    header = [h.strip() for h in header]
    rows = []
    limit = csv.field_size_limit(MAX_FIELD_CHARS)
    try:
        for row in reader:
            lineno = reader.line_num
            if not row or (len(row) == 1 and not row[0].strip()):
                continue
            if len(row) != len(header):
                raise LvsearchError(f"{path}, line {lineno}: {len(row)} fields, the header has {len(header)} "
                                    f"({', '.join(shown(h) for h in header)})",
                                    fix="fix the line or the header (tabs inside a text field are not allowed)")
            rows.append((lineno, dict(zip(header, row))))
    except csv.Error as e:  # a field longer than MAX_FIELD_CHARS (the only error QUOTE_NONE reading raises)
        raise LvsearchError(f"{path}, line {reader.line_num}: cannot be read as a tab-separated row ({e}; "
                            f"lvsearch reads fields of up to {MAX_FIELD_CHARS:,} characters)",
                            fix="shorten the field or split the text; a line break missing at the end of an "
                                "earlier line also makes one long field") from None
    finally:
        csv.field_size_limit(limit)
    return header, rows


def _label_kind(values: list[str]) -> str:
    def all_parse(fn):
        try:
            for v in values:
                fn(v)
            return True
        except ValueError:
            return False

    if all_parse(int):
        return "int"
    if all_parse(float):
        return "float"
    return "str"


def _build_task(name: str, source: str, raw: dict[str, tuple[list[str], list[tuple[int, dict]]]],
                where: dict[str, str]) -> TaskData:
    """Turn raw ``{split: (header, rows)}`` into a :class:`TaskData` (see the module docstring)."""
    cols = detect_columns(raw["train"][0], where["train"])
    for split in ("dev", "test"):
        if split in raw:
            other = detect_columns(raw[split][0], where[split])
            if (other["text_a"], other["text_b"]) != (cols["text_a"], cols["text_b"]):
                raise LvsearchError(f"{where[split]}: text columns {shown(other['text_a'])}/{shown(other['text_b'])} differ "
                                    f"from the train split's {shown(cols['text_a'])}/{shown(cols['text_b'])}",
                                    fix="use the same header in every split")
    if cols["label"] is None:
        raise LvsearchError(f"{where['train']}: no label column among {', '.join(shown(c) for c in raw['train'][0])}",
                            fix=f"name the label column one of: {', '.join(LABEL_COLUMNS)}")
    for split, (header, rows) in raw.items():
        if cols["label"] in header:
            _refuse_nonfinite_labels(rows, cols["label"], where[split])
    train_labels = [r[cols["label"]].strip() for _, r in raw["train"][1]]
    if not train_labels:
        raise LvsearchError(f"{where['train']} has no examples", fix="add training examples")
    empty = next((ln for (ln, r), v in zip(raw["train"][1], train_labels) if not v), None)
    if empty is not None:
        raise LvsearchError(f"{where['train']}, line {empty}: empty label", fix="give every training example a label")
    kind = _label_kind(train_labels)
    if kind == "float":
        task_kind, names = "regression", None
        to_id: dict[str, int] = {}
    else:
        task_kind = "classification"
        distinct = sorted(set(train_labels), key=int) if kind == "int" else sorted(set(train_labels))
        if len(distinct) < 2:
            raise LvsearchError(f"{where['train']}: only one label ({distinct[0]!r}) in the train split",
                                fix="a classification task needs at least two classes")
        names = list(distinct)
        _warn_rare_labels(train_labels, raw["train"][1], where["train"])
        to_id = {v: i for i, v in enumerate(names)}
        if kind == "int":  # "01" and "1" are the same class
            to_id = {str(int(v)): i for i, v in enumerate(names)}

    splits: dict[str, list[Example]] = {}
    test_labeled = False
    for split, (header, rows) in raw.items():
        label_col = cols["label"] if cols["label"] in header else None
        values = [r[label_col].strip() if label_col else "" for _, r in rows]
        labeled = bool(label_col) and not all(v in ("", "-1") for v in values) if task_kind == "classification" \
            else bool(label_col) and not all(v == "" for v in values)
        if split in ("train", "dev") and not labeled:
            raise LvsearchError(f"{where[split]}: the {split} split has no labels", fix=f"add a {shown(cols['label'])} column")
        if split == "test":
            test_labeled = labeled
        exs = []
        for (lineno, r), v in zip(rows, values):
            a = r[cols["text_a"]]
            b = r[cols["text_b"]] if cols["text_b"] else None
            label: int | float | None = None
            if labeled:
                if task_kind == "regression":
                    try:
                        label = float(v)
                    except ValueError:
                        raise LvsearchError(f"{where[split]}, line {lineno}: label {v!r} is not a number",
                                            fix="regression tasks need numeric labels in every split") from None
                else:
                    key = str(int(v)) if kind == "int" and _label_kind([v]) == "int" else v
                    if key not in to_id:
                        raise LvsearchError(f"{where[split]}, line {lineno}: label {v!r} does not occur in the train split "
                                            f"(labels: {', '.join(shown(n) for n in names or [])})", fix="fix the label or add it to train")
                    label = to_id[key]
            exs.append(Example(a, b, label))
        splits[split] = exs
    return TaskData(name, source, task_kind, names, cols, splits, test_labeled)


def _refuse_nonfinite_labels(rows: list[tuple[int, dict]], column: str, where: str) -> None:
    """Refuse a label that reads as a non-finite number (``nan``, ``NaN``, ``inf``, ``-Infinity``):
    it is how pandas and spreadsheets write a missing value, and as a class or a regression
    target it made scikit-learn's floors fail with a traceback (or became a class of its own)."""
    for lineno, r in rows:
        v = r[column].strip()
        try:
            bad = not math.isfinite(float(v))
        except ValueError:
            continue
        if bad:
            raise LvsearchError(f"{where}, line {lineno}: label {v!r} is not a finite number (a missing value?)",
                                fix="give the example its label, or remove the line")


def _warn_rare_labels(labels: list[str], rows, where: str) -> None:
    """Warn when a class occurs in under 0.1% of ≥ 1000 training rows (at most 2 rows): the usual
    sign of a typo that silently adds a class (one ``positive`` among ``0``/``1`` makes a
    binary task 3-class). Warns, does not refuse: rare classes can be real."""
    from collections import Counter

    from lvsearch import ui

    counts = Counter(labels)
    n = len(labels)
    if n < 1000:
        return
    for value, c in sorted(counts.items()):
        if c <= 2 and c / n < 0.001:
            lines = [str(ln) for (ln, _), v in zip(rows, labels) if v == value]
            ui.warn(f"{where}: label {value!r} occurs {c} time(s) in {n:,} rows (line {', '.join(lines)}), so the task "
                    f"has {len(counts)} classes; if it is a typo, fix those lines")


def load_task_folder(folder: str | Path) -> TaskData:
    """Load a task folder (``train.tsv``, ``dev.tsv``, optional ``test.tsv``).

    Raises:
        LvsearchError: missing folder, ``train.tsv`` or ``dev.tsv`` (message lists the files
            found); malformed rows; no recognisable text or label column; labels in dev/test
            unseen in train.
    """
    folder = Path(folder)
    if folder.is_file():
        raise LvsearchError(f"--task {folder} is a file; a task is a folder", fix="pass the folder holding train.tsv and dev.tsv")
    if not folder.is_dir():
        raise LvsearchError(f"task folder not found: {folder}", fix="pass --task DIR (with train.tsv and dev.tsv) or NAME:CONFIG")
    raw, where = {}, {}
    for split, fname in SPLIT_FILES.items():
        path = folder / fname
        if not path.is_file():
            if split == "test":
                continue
            found = sorted(shown(p.name) for p in folder.iterdir())
            raise LvsearchError(f"task folder {folder} has no {fname} (found: {', '.join(found) or 'nothing'})",
                                fix="a task folder needs train.tsv and dev.tsv (test.tsv optional), tab-separated with a header")
        raw[split] = read_tsv(path)
        where[split] = str(path)
    return _build_task(folder.name, str(folder), raw, where)


def load_task_hf(spec: str) -> TaskData:
    """Load ``NAME:CONFIG`` (or ``NAME``) with Hugging Face ``datasets``; splits
    ``train``, ``validation`` (→ dev) and ``test``.

    Raises:
        LvsearchError: the dataset cannot be loaded (unknown name, hub unreachable, no cache),
            or it lacks a train/validation split or recognisable columns.
    """
    name, _, config = spec.partition(":")
    try:
        import datasets

        ds = datasets.load_dataset(name, config or None)
    except Exception as e:  # datasets raises many types (ConnectionError, FileNotFoundError, ValueError, ...)
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise LvsearchError(f"task {spec!r} is not a folder and could not be loaded as a Hugging Face dataset ({msg})",
                            fix="pass a task folder with train.tsv/dev.tsv, or a hub dataset NAME:CONFIG such as "
                                "glue:rte where the hub (or a local datasets cache) is reachable") from None
    split_map = {"train": "train", "dev": "validation", "test": "test"}
    raw, where = {}, {}
    for split, hf_split in split_map.items():
        if hf_split not in ds:
            if split == "test":
                continue
            raise LvsearchError(f"Hugging Face dataset {spec!r} has no {hf_split!r} split (splits: {', '.join(ds)})",
                                fix="use a dataset with train and validation splits, or a task folder")
        d = ds[hf_split]
        header = list(d.column_names)
        label_feature = next((d.features[c] for c in LABEL_COLUMNS if c in d.features), None)
        names = getattr(label_feature, "names", None)
        rows = []
        for i, r in enumerate(d):
            row = {}
            for c in header:
                v = r[c]
                if c in LABEL_COLUMNS and names is not None:
                    v = names[v] if isinstance(v, int) and 0 <= v < len(names) else ""
                row[c] = "" if v is None else str(v)
            rows.append((i + 1, row))
        raw[split], where[split] = (header, rows), f"{spec} ({hf_split} split)"
    return _build_task(spec, spec, raw, where)


def load_task(spec: str) -> TaskData:
    """A task folder when ``spec`` is an existing path, else a Hugging Face ``NAME:CONFIG``.

    ``hf:NAME[:CONFIG]`` always means a Hugging Face dataset: the ``hf:`` prefix is stripped and
    the rest goes to :func:`load_task_hf`, even when a folder of that name exists. Raises LvsearchError as :func:`load_task_folder` / :func:`load_task_hf`.
    """
    if spec.startswith("hf:"):
        if not spec[3:]:
            raise LvsearchError(f"--task {spec!r} names no dataset", fix="e.g. --task hf:glue:rte")
        return load_task_hf(spec[3:])
    p = Path(spec)
    if p.exists() or os.sep in spec or spec.startswith("."):
        return load_task_folder(p)
    return load_task_hf(spec)


# --------------------------------------------------------------------------- training
LR_BASE = 1e-3
"""Default peak learning rate at :data:`LR_REF_WIDTH` (see :func:`default_lr`)."""
LR_REF_WIDTH = 128
"""Hidden width at which :data:`LR_BASE` was measured (the quickstart / retrain-quickstart width)."""
LOSS_FELL_FRACTION = 0.98
"""A seed fails when its last-epoch mean train loss is ≥ this fraction of the constant-prediction loss."""
FAILED_TEXT = "failed (loss did not fall)"
"""How reports show a task whose every fine-tuning seed failed (see :func:`loss_did_not_fall`)."""


def default_lr(hidden: int) -> float:
    """Default peak fine-tuning learning rate for an encoder of width ``hidden``:
    ``LR_BASE · LR_REF_WIDTH / hidden`` (1e-3 at hidden 128, 5e-4 at 256, 1.7e-4 at 768).

    The inverse-width scaling is ELECTRA's own (3e-4 small / 1e-4 base at hidden 256 / 768,
    Clark et al. 2020, appendix A); the level was measured on lvsearch's CPU-budget encoders
    (docs/results.md, "Fine-tuning defaults"), which are far less pretrained than ELECTRA's and
    need a larger step. Raises LvsearchError for ``hidden < 1``.
    """
    if hidden < 1:
        raise LvsearchError(f"hidden width must be ≥ 1, got {hidden}", fix="pass the encoder's dims.hidden")
    return LR_BASE * LR_REF_WIDTH / hidden


def constant_loss(task_kind: str, labels: Sequence, num_outputs: int) -> float:
    """Training loss of the best constant prediction, the level a run that learned nothing stays at.

    Classification: the entropy (nats) of the label frequencies in ``labels`` (ln 2 = 0.693 for
    two balanced classes; a class with no example contributes 0). Regression: the population
    variance of ``labels`` (the MSE of always predicting their mean). ``num_outputs`` is the
    number of classes (unused for regression). Raises LvsearchError for an empty ``labels``.
    """
    if not labels:
        raise LvsearchError("no training labels to compute the constant-prediction loss", fix="add training examples")
    n = len(labels)
    if task_kind == "regression":
        mean = sum(labels) / n
        return sum((y - mean) ** 2 for y in labels) / n
    counts = [0] * num_outputs
    for y in labels:
        counts[y] += 1
    return -sum(c / n * math.log(c / n) for c in counts if c)


def loss_did_not_fall(loss_per_epoch: Sequence[float], baseline: float) -> str | None:
    """The failure reason when a fine-tuning run's training loss did not fall, else None.

    Rule: the mean train loss (nats for classification, MSE for regression; with dropout on) of
    the last epoch is ≥ :data:`LOSS_FELL_FRACTION` (0.98) × ``baseline``, the loss of the best
    constant prediction (:func:`constant_loss`). Such a run fitted its own training set no better
    than the class prior, so its dev/test score is the prior's (chance), not the encoder's.
    Raises LvsearchError for an empty ``loss_per_epoch``.
    """
    if not loss_per_epoch:
        raise LvsearchError("no train loss recorded", fix="fine-tune for at least one epoch")
    last = loss_per_epoch[-1]
    if not math.isfinite(last):
        return f"training loss did not fall: last-epoch mean train loss is {last}"
    if last >= LOSS_FELL_FRACTION * baseline:
        return (f"training loss did not fall: last-epoch mean train loss {last:.4f} ≥ {LOSS_FELL_FRACTION} × "
                f"{baseline:.4f}, the loss of the best constant prediction")
    return None


#: How the classifier reads the encoder: ``cls`` = the hidden state at position 0 ([CLS]);
#: ``mean`` = the mean of the hidden states over the non-padding positions.
POOLINGS = ("cls", "mean")


@dataclass
class FinetuneConfig:
    """Fine-tuning settings; defaults measured on lvsearch's encoders (docs/results.md,
    "Fine-tuning defaults"). ``lr=None`` means :func:`default_lr` of the encoder's width."""

    epochs: int = 3
    lr: float | None = None
    batch_size: int = 32
    max_len: int = 128
    seeds: Sequence[int] = (0, 1, 2)
    train_limit: int | None = None
    layer_decay: float = 1.0
    warmup_fraction: float = 0.1
    weight_decay: float = 0.0
    dropout: float = 0.1
    grad_clip: float = 1.0
    eval_batch_size: int = 128
    train_limit_seed: int = 0
    eval_limit: int | None = None
    pooling: str = "cls"

    def check(self) -> None:
        """Raises LvsearchError for out-of-range values."""
        for name in ("epochs", "batch_size", "max_len", "eval_batch_size"):
            if getattr(self, name) < 1:
                raise LvsearchError(f"--{name.replace('_', '-')} must be ≥ 1", fix="pass a positive integer")
        if self.lr is not None and not self.lr > 0:
            raise LvsearchError(f"--lr must be positive, got {self.lr}", fix="e.g. --lr 3e-4")
        if not 0 < self.layer_decay <= 1:
            raise LvsearchError(f"--layer-decay must be in (0, 1], got {self.layer_decay}", fix="e.g. 0.8 (1 = off)")
        if self.train_limit is not None and self.train_limit < 1:
            raise LvsearchError("--train-limit must be ≥ 1", fix="e.g. --train-limit 1000")
        if self.eval_limit is not None and self.eval_limit < 1:
            raise LvsearchError("--eval-limit must be ≥ 1", fix="e.g. --eval-limit 500")
        if not self.seeds:
            raise LvsearchError("no fine-tuning seeds", fix="e.g. --seeds 3")
        if self.pooling not in POOLINGS:
            raise LvsearchError(f"unknown --pooling {self.pooling!r}", fix=f"use one of {', '.join(POOLINGS)}")


def layerwise_param_groups(model, lr: float, decay: float, weight_decay: float = 0.0) -> list[dict]:
    """AdamW parameter groups with layer-wise LR decay for a :class:`SequenceClassifier`.

    Slot ``n`` of ``N``: ``lr · decay^(N−n)``; embeddings: ``lr · decay^N``; everything else
    trainable (classifier, ELC mixing logits, output mixing, final norm): ``lr``. The MLM head
    is frozen (not used by the classifier). ``weight_decay`` applies to matrices only.
    Each group has a ``depth`` entry (0 = top).
    """
    n_slots = model.encoder.num_slots
    groups: dict[tuple[int, bool], list] = {}
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        if name.startswith("encoder.embeddings."):
            depth = n_slots
        elif name.startswith("encoder.slots."):
            depth = n_slots - int(name.split(".")[2])
        else:
            depth = 0
        decayed = weight_decay > 0 and p.ndim >= 2
        groups.setdefault((depth, decayed), []).append(p)
    return [
        {"params": ps, "lr": lr * decay**depth, "weight_decay": weight_decay if dec else 0.0, "depth": depth}
        for (depth, dec), ps in sorted(groups.items())
    ]


def _make_classifier(encoder, num_outputs: int, dropout: float, pooling: str = "cls"):
    import torch
    from torch import nn

    class SequenceClassifier(nn.Module):
        """Encoder + dropout + linear on the pooled hidden state (``pooling``: ``cls`` =
        position 0, ``mean`` = mean over the attention mask's positions).

        ``forward(input_ids (B, L), attention_mask (B, L) bool) -> (B, num_outputs)``.
        """

        def __init__(self):
            super().__init__()
            self.encoder = encoder
            self.dropout = nn.Dropout(dropout)
            self.head = nn.Linear(encoder.dims.hidden, num_outputs)
            nn.init.normal_(self.head.weight, std=0.02)
            nn.init.zeros_(self.head.bias)
            for p in encoder.mlm_head.parameters():
                p.requires_grad_(False)

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            h = self.encoder(input_ids, attention_mask)  # (B, L, H)
            if pooling == "mean":
                m = attention_mask.to(h.dtype)[:, :, None]
                pooled = (h * m).sum(1) / m.sum(1).clamp(min=1.0)
            else:
                pooled = h[:, 0]
            return self.head(self.dropout(pooled))

    return SequenceClassifier()


def _encode(tokenizer, examples: list[Example], max_len: int) -> list[list[int]]:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_str(tokenizer.to_str())  # private copy: truncation settings are mutable state
    tok.no_padding()
    tok.enable_truncation(max_length=max_len, strategy="longest_first")
    if examples and examples[0].b is not None:
        enc = tok.encode_batch([(e.a, e.b or "") for e in examples])
    else:
        enc = tok.encode_batch([e.a for e in examples])
    return [e.ids for e in enc]


def _collate(seqs: list[list[int]], pad_id: int):
    import torch

    L = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), L), pad_id, dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.as_tensor(s, dtype=torch.long)
    mask = torch.arange(L)[None, :] < torch.tensor([len(s) for s in seqs])[:, None]  # (B, L) bool
    return ids, mask


def _predict(model, seqs: list[list[int]], pad_id: int, batch_size: int, regression: bool, device: str) -> list:
    import torch

    model.eval()
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))
    out: list = [None] * len(seqs)
    with torch.inference_mode():
        for k in range(0, len(order), batch_size):
            idx = order[k : k + batch_size]
            ids, mask = _collate([seqs[i] for i in idx], pad_id)
            logits = model(ids.to(device), mask.to(device)).float().cpu()
            preds = logits[:, 0].tolist() if regression else logits.argmax(-1).tolist()
            for i, p in zip(idx, preds):
                out[i] = p
    return out


def task_metrics(task: TaskData, labels: list, preds: list) -> dict:
    """The metrics of ``task``'s kind: :func:`~lvsearch.eval.metrics.regression_metrics` or
    :func:`~lvsearch.eval.metrics.classification_metrics` over ``task.num_outputs`` classes."""
    from lvsearch.eval.metrics import classification_metrics, regression_metrics

    if task.kind == "regression":
        return regression_metrics(labels, preds)
    return classification_metrics(labels, preds, task.num_outputs)


#: A classification task counts as imbalanced when its largest class holds more than this
#: multiple of the uniform share ``1/K`` of the training labels (binary: more than 60%).
IMBALANCE_RATIO = 1.2


def primary_metric(kind: str, labels: Sequence | None = None, num_classes: int | None = None) -> str:
    """The dev metric used to select the epoch (and shown first): ``pearson`` for regression;
    for classification ``accuracy`` when the training labels are balanced, otherwise the metric
    GLUE reports for such tasks: ``mcc`` (Matthews correlation, CoLA) for binary and ``f1``
    (macro-F1) for multi-class tasks, since accuracy rewards predicting the majority class.
    Balanced: the largest class holds at most :data:`IMBALANCE_RATIO` × ``1/K`` of ``labels``."""
    if kind == "regression":
        return "pearson"
    if not labels or not num_classes or num_classes < 2:
        return "accuracy"
    counts = [0] * num_classes
    for y in labels:
        counts[int(y)] += 1
    if max(counts) / len(labels) <= IMBALANCE_RATIO / num_classes:
        return "accuracy"
    return "mcc" if num_classes == 2 else "f1"


def metric_label(metric: str, num_classes: int | None, label_names: Sequence[str] | None = None) -> str:
    """How a metric is named in tables: which F1 ``f1`` is (binary F1 of class 1, or macro-F1)."""
    if metric != "f1" or not num_classes:
        return metric
    if num_classes == 2:
        pos = f" = {label_names[1]}" if label_names and len(label_names) > 1 else ""
        return f"f1 (binary, positive class 1{pos})"
    return f"f1 (macro over {num_classes} classes)"


def _summary(values: list[float]) -> dict:
    vals = [v for v in values if v is not None]
    if not vals:
        return {"mean": None, "std": None, "median": None, "n": 0}
    return {
        "mean": statistics.fmean(vals),
        "std": statistics.stdev(vals) if len(vals) > 1 else None,  # one seed: spread unmeasured
        "median": statistics.median(vals),
        "n": len(vals),
    }


def training_examples(task: TaskData, cfg: FinetuneConfig) -> list[Example]:
    """The training examples a fine-tuning run (and its floor) uses: all of ``train``, or with
    ``cfg.train_limit`` a sample of that many (torch ``randperm`` seeded ``cfg.train_limit_seed``,
    kept in file order), the same for every seed."""
    import torch

    train = task.splits["train"]
    if cfg.train_limit is not None and cfg.train_limit < len(train):
        g = torch.Generator().manual_seed(cfg.train_limit_seed)
        keep = sorted(torch.randperm(len(train), generator=g)[: cfg.train_limit].tolist())
        train = [train[i] for i in keep]
    return train


def eval_examples(task: TaskData, cfg: FinetuneConfig) -> dict[str, list[Example]]:
    """``{"dev": …, "test": …}`` (test when present): the first ``cfg.eval_limit`` of each (all by default)."""
    return {s: task.splits[s][: cfg.eval_limit] for s in ("dev", "test") if s in task.splits}


def finetune_task(
    encoder,
    tokenizer,
    task: TaskData,
    cfg: FinetuneConfig,
    *,
    device: str = "cpu",
    progress: Callable[[str, int, int], None] | None = None,
) -> dict:
    """Fine-tune a copy of ``encoder`` on ``task`` once per seed; select on dev, report test.

    Args:
        encoder: pretrained :class:`~lvsearch.model.Encoder` (not modified; deep-copied per seed).
        tokenizer: the model's ``tokenizers.Tokenizer``.
        task: a loaded :class:`TaskData`.
        cfg: :class:`FinetuneConfig`.
        progress: ``progress(what, done_steps, total_steps)`` after each optimiser step.

    Returns:
        JSON-ready dict: task info, settings (``lr`` is the peak rate used, ``lr_rule`` where it
        came from), ``per_seed`` (seed, ``status`` ``"ok"``/``"failed"`` and ``failure`` reason
        (:func:`loss_did_not_fall`), best_epoch, dev and test metrics at the selected epoch, dev
        metric per epoch, mean train loss per epoch, seconds), ``status`` (``"failed"`` when every
        seed failed, else ``"done"``), ``failed_seeds``, ``constant_loss``, ``aggregate``
        (``dev``/``test`` → metric → mean/std/median/n over the seeds that did not fail; n = 0
        and None values when all failed; ``std`` None with a single seed: unmeasured, not 0) and ``aggregate_all_seeds`` (the same over every seed).

    Raises:
        LvsearchError: ``cfg`` out of range (:meth:`FinetuneConfig.check`).
    """
    import copy

    import torch
    import torch.nn.functional as F

    from lvsearch.data.tokenizer import SpecialIds

    cfg.check()
    lr = cfg.lr if cfg.lr is not None else default_lr(encoder.dims.hidden)
    pad_id = SpecialIds.of(tokenizer).pad
    max_len = min(cfg.max_len, encoder.dims.max_len)
    train = training_examples(task, cfg)
    evals = eval_examples(task, cfg)
    enc = {"train": _encode(tokenizer, train, max_len)}
    for s, exs in evals.items():
        enc[s] = _encode(tokenizer, exs, max_len)
    y_train = [e.label for e in train]
    regression = task.kind == "regression"
    select = primary_metric(task.kind, y_train if task.kind != "regression" else None, task.num_outputs)
    steps_per_epoch = math.ceil(len(train) / cfg.batch_size)
    total = steps_per_epoch * cfg.epochs
    warmup = int(cfg.warmup_fraction * total)
    baseline = constant_loss(task.kind, y_train, task.num_outputs)

    def lr_mult(step: int) -> float:  # step counts finished optimiser steps
        if step < warmup:
            return (step + 1) / warmup
        return max(0.0, (total - step) / max(1, total - warmup))

    per_seed = []
    done_all = 0
    for seed in cfg.seeds:
        t0 = time.perf_counter()
        torch.manual_seed(seed)
        model = _make_classifier(copy.deepcopy(encoder), task.num_outputs, cfg.dropout, cfg.pooling).to(device)
        groups = layerwise_param_groups(model, lr, cfg.layer_decay, cfg.weight_decay)
        opt = torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.999), eps=1e-6)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_mult)
        gen = torch.Generator().manual_seed(seed)
        best_score, best_epoch, best_state, best_dev = -math.inf, -1, None, None
        dev_curve, loss_curve = [], []
        for epoch in range(cfg.epochs):
            model.train()
            perm = torch.randperm(len(train), generator=gen).tolist()
            losses = []
            for k in range(0, len(perm), cfg.batch_size):
                idx = perm[k : k + cfg.batch_size]
                ids, mask = _collate([enc["train"][i] for i in idx], pad_id)
                out = model(ids.to(device), mask.to(device))
                if regression:
                    loss = F.mse_loss(out[:, 0].float(), torch.tensor([y_train[i] for i in idx], dtype=torch.float32, device=device))
                else:
                    loss = F.cross_entropy(out.float(), torch.tensor([y_train[i] for i in idx], dtype=torch.long, device=device))
                opt.zero_grad(set_to_none=True)
                loss.backward()
                if cfg.grad_clip:
                    torch.nn.utils.clip_grad_norm_([p for g in groups for p in g["params"]], cfg.grad_clip)
                opt.step()
                sched.step()
                losses.append(loss.item())
                done_all += 1
                if progress is not None:
                    progress(f"{task.name} seed {seed}", done_all, total * len(cfg.seeds))
            loss_curve.append(statistics.fmean(losses))
            dev_pred = _predict(model, enc["dev"], pad_id, cfg.eval_batch_size, regression, device)
            dev_m = task_metrics(task, [e.label for e in evals["dev"]], dev_pred)
            dev_curve.append(dev_m)
            score = dev_m[select] if dev_m[select] is not None else -math.inf
            if score > best_score or best_state is None:
                best_score, best_epoch, best_dev = score, epoch + 1, dev_m
                best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        model.load_state_dict(best_state)
        test_m, test_predictions = None, None
        if "test" in enc and task.test_labeled:
            test_pred = _predict(model, enc["test"], pad_id, cfg.eval_batch_size, regression, device)
            test_m = task_metrics(task, [e.label for e in evals["test"]], test_pred)
            test_predictions = [float(v) if regression else int(v) for v in test_pred]
        failure = loss_did_not_fall(loss_curve, baseline)
        per_seed.append({
            "seed": seed, "status": "failed" if failure else "ok", "failure": failure,
            "best_epoch": best_epoch, "dev": best_dev, "test": test_m, "test_predictions": test_predictions,
            "dev_per_epoch": dev_curve, "train_loss_per_epoch": loss_curve,
            "seconds": time.perf_counter() - t0,
        })
    metric_names = list(per_seed[0]["dev"])
    learned = [r for r in per_seed if r["status"] == "ok"]

    def aggregate_of(runs: list[dict]) -> dict:
        agg = {"dev": {m: _summary([r["dev"][m] for r in runs]) for m in metric_names}}
        if task.test_labeled and "test" in enc:
            agg["test"] = {m: _summary([r["test"][m] for r in runs]) for m in metric_names}
        return agg

    aggregate = aggregate_of(learned)
    from lvsearch.eval.metrics import BACKEND

    return {
        "task": task.name, "source": task.source, "kind": task.kind, "label_names": task.label_names,
        "columns": task.columns, "select_metric": select, "metrics_backend": BACKEND,
        "select_rule": "dev pearson (regression)" if regression else (
            f"dev accuracy (balanced training labels)" if select == "accuracy" else
            f"dev {metric_label(select, task.num_outputs, task.label_names)}: the training labels are imbalanced "
            f"(largest class > {IMBALANCE_RATIO:g}/K), where accuracy rewards the majority class"),
        "metric_labels": {m: metric_label(m, None if regression else task.num_outputs, task.label_names)
                          for m in per_seed[0]["dev"]},
        "sizes": {"train_used": len(train), **{f"{s}_used": len(v) for s, v in evals.items()},
                  **{s: len(v) for s, v in task.splits.items()}},
        "test_labeled": task.test_labeled,
        "status": "failed" if not learned else "done",
        "failed_seeds": [r["seed"] for r in per_seed if r["status"] == "failed"],
        "failure_rule": f"a seed fails when its last-epoch mean train loss is ≥ {LOSS_FELL_FRACTION} × the loss of the "
                        "best constant prediction (label entropy in nats; label variance for regression); failed seeds "
                        "are left out of 'aggregate' (all seeds: 'aggregate_all_seeds')",
        "constant_loss": baseline,
        "settings": {
            "epochs": cfg.epochs, "lr": lr,
            "lr_rule": "--lr" if cfg.lr is not None else f"default {LR_BASE:g} × {LR_REF_WIDTH} / hidden "
                                                          f"(hidden {encoder.dims.hidden})",
            "batch_size": cfg.batch_size, "max_len": max_len,
            "seeds": list(cfg.seeds), "train_limit": cfg.train_limit, "train_limit_sample": "seeded random sample (seed "
            f"{cfg.train_limit_seed}), same for every fine-tuning seed" if cfg.train_limit else None,
            "layer_decay": cfg.layer_decay, "warmup_fraction": cfg.warmup_fraction, "weight_decay": cfg.weight_decay,
            "eval_limit": cfg.eval_limit, "eval_limit_sample": f"first {cfg.eval_limit} of dev and test" if cfg.eval_limit else None,
            "dropout": cfg.dropout, "grad_clip": cfg.grad_clip, "pooling": cfg.pooling,
            "classifier": "dropout + linear on " + ("[CLS]" if cfg.pooling == "cls" else "the mean hidden state")
                          + " (no pooler)",
        },
        "per_seed": per_seed,
        "aggregate": aggregate,
        "aggregate_all_seeds": aggregate_of(per_seed),
    }


__all__ = [
    "Example", "TaskData", "FinetuneConfig", "detect_columns", "read_tsv", "load_task", "load_task_folder",
    "load_task_hf", "layerwise_param_groups", "finetune_task", "training_examples", "eval_examples", "task_metrics", "primary_metric", "default_lr", "constant_loss",
    "loss_did_not_fall", "LR_BASE", "LR_REF_WIDTH", "LOSS_FELL_FRACTION", "FAILED_TEXT",
]
