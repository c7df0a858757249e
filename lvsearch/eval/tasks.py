"""Fine-tuning tasks: :func:`load_task` reads a folder of TSV files or a Hugging Face dataset into a
:class:`TaskData` (column roles, label kind and ids, splits).

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

Fine-tuning on a loaded task: :mod:`lvsearch.eval.finetune`.
"""

from __future__ import annotations

import csv
import io
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from lvsearch.errors import LvsearchError
from lvsearch.io import read_text, shown

__all__ = ["Example", "TaskData", "detect_columns", "read_tsv", "load_task", "load_task_folder", "load_task_hf",
           "MAX_FIELD_CHARS"]


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
                def names(c: dict) -> str:  # one text column (a single-sentence task) or a pair
                    return " and ".join(shown(x) for x in (c["text_a"], c["text_b"]) if x is not None)

                raise LvsearchError(f"{where[split]}: text column(s) {names(other)} differ from the train split's "
                                    f"{names(cols)}", fix="use the same header in every split")
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

