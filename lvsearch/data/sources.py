"""Corpus sources: where raw text comes from, as documents (lists of lines).

Three kinds of source, all yielding ``(split, lines)`` pairs through :meth:`Source.documents`:

* :class:`TextFileSource` — plain UTF-8 text files and folders of them. A folder contributes
  its ``*.txt``, ``*.train`` and ``*.dev`` files (recursively); the BabyLM layout
  (``train/*.train``, ``dev/*.dev``) is recognised by extension: ``.train`` files are training
  text, ``.dev`` files validation text, everything else unassigned. ``*.test`` files in a
  folder are listed as ignored: test text must never leak into pretraining.
  Documents are separated by blank lines; a run of more than :data:`MAX_DOC_LINES` lines without
  a blank line is cut into documents of that many lines (so a file with no blank lines still
  splits into train/dev at a useful granularity).
* :class:`HFDatasetSource` — a Hugging Face dataset: a hub name (``NAME[:CONFIG]``), a folder
  written by ``save_to_disk``, or local data files (``.json``, ``.jsonl``, ``.csv``, ``.parquet``)
  read with ``datasets.load_dataset``. Each row of the text column is one document (its lines are
  the row's text split at newlines); empty rows are skipped. Split ``train`` is training text,
  ``validation``/``valid``/``dev`` is validation text, ``test`` is ignored; a dataset with no
  validation split is split by ``dev_fraction`` like unassigned text.
* :class:`BuiltinPythonDocsSource` (``builtin:python-docs``) — a small technical-English corpus
  built from the documentation that ships with CPython: the ``pydoc`` topic pages
  (``pydoc_data.topics``) and the docstrings of the standard-library sources, read with ``ast``
  (nothing is imported or executed). About 0.3M words; its content depends on the Python
  version, which the manifest records. It exists so that demos and tests run with nothing
  downloaded; it is not representative English.

Splitting into train/dev (:func:`assign_split`): when any source has explicit validation text
(``*.dev`` files, a ``validation`` split), unassigned documents go to train. Otherwise each
document goes to dev with probability ``dev_fraction`` (default 0.02, as LV-BERT holds out 2%),
decided by a hash of ``(seed, source, document index)``, so the split is reproducible and
does not depend on reading order across sources.
"""

from __future__ import annotations

import ast
import codecs
import hashlib
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Protocol

from lvsearch.errors import LvsearchError
from lvsearch.io import eight_bit_guess, sha256_bytes, sniff_encoding

#: Split names. ``None`` means "not assigned by the source".
TRAIN, DEV = "train", "dev"
#: Longest document (in non-blank lines) before it is cut; see the module docstring.
MAX_DOC_LINES = 1000
#: File extensions collected from folders, and the split each implies.
FOLDER_EXTENSIONS = {".txt": None, ".train": TRAIN, ".dev": DEV}
#: Extensions of local data files read through ``datasets.load_dataset``.
HF_FILE_BUILDERS = {".json": "json", ".jsonl": "json", ".csv": "csv", ".parquet": "parquet"}
HF_DEV_SPLITS = ("validation", "valid", "dev")

Document = list[str]


class Source(Protocol):
    """A corpus source. ``key`` identifies it in split hashing and the manifest."""

    key: str
    has_dev: bool

    def documents(self) -> Iterator[tuple[str | None, Document]]:
        """Yield ``(split, lines)`` per document; ``split`` is ``"train"``, ``"dev"`` or None."""
        ...

    def describe(self) -> dict:
        """A JSON-able description for the manifest, with a content hash."""
        ...


def split_documents(lines: Iterator[str]) -> Iterator[Document]:
    """Group lines into documents at blank lines (and every :data:`MAX_DOC_LINES` lines).

    Lines are stripped of surrounding whitespace; blank lines only separate documents.
    """
    doc: Document = []
    for line in lines:
        line = line.strip()
        if not line:
            if doc:
                yield doc
                doc = []
            continue
        doc.append(line)
        if len(doc) >= MAX_DOC_LINES:
            yield doc
            doc = []
    if doc:
        yield doc


# --------------------------------------------------------------------------------------
# Plain text files
# --------------------------------------------------------------------------------------


@dataclass
class FileCheck:
    """Result of reading one file once: its hash, size and whether it is usable text."""

    path: Path
    bytes: int
    sha256: str
    problem: str | None  # None, "binary (contains NUL bytes)" or "not UTF-8 (...)"


def check_text_file(path: Path) -> FileCheck:
    """Hash ``path`` and check that it is UTF-8 text (a leading byte-order mark allowed) without
    NUL bytes, in one streaming read; a UTF-16/32 file is named as such (its first bytes)."""
    h = hashlib.sha256()
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    problem = None
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            if size == 0 and (found := sniff_encoding(chunk[:512])) is not None:
                problem = f"{found} text, not UTF-8"
            size += len(chunk)
            h.update(chunk)
            if problem is None:
                if b"\x00" in chunk:
                    problem = "binary (contains NUL bytes)"
                else:
                    try:
                        decoder.decode(chunk)
                    except UnicodeDecodeError as e:
                        bad = e.object[e.start]
                        problem = (f"not UTF-8 (byte 0x{bad:02x} near offset {size - len(chunk) + e.start}, "
                                   f"{eight_bit_guess(bad)})")
    if problem is None:
        try:
            decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            problem = "not UTF-8 (truncated multi-byte character at end of file)"
    return FileCheck(path, size, h.hexdigest(), problem)


@dataclass
class TextFileSource:
    """One UTF-8 text file; its split comes from the extension (``.train``/``.dev``) or is None."""

    path: Path
    split: str | None
    check: FileCheck
    has_dev: bool = field(init=False)

    def __post_init__(self) -> None:
        self.has_dev = self.split == DEV

    @property
    def key(self) -> str:
        # Content-addressed, so a moved or renamed corpus keeps the same random split.
        return f"file:{self.check.sha256}"

    def documents(self) -> Iterator[tuple[str | None, Document]]:
        with open(self.path, encoding="utf-8-sig") as f:  # a leading byte-order mark is dropped
            for doc in split_documents(f):
                yield self.split, doc

    def describe(self) -> dict:
        return {
            "kind": "file",
            "path": str(self.path),
            "split": self.split,
            "bytes": self.check.bytes,
            "sha256": self.check.sha256,
        }


def collect_text_files(path: Path) -> tuple[list[tuple[Path, str | None]], list[Path]]:
    """Files a path contributes: ``([(file, split)], ignored_test_files)``.

    Raises:
        LvsearchError: the path does not exist, or a folder holds no usable files.
    """
    if not path.exists():
        raise LvsearchError(
            f"input not found: {path}",
            fix="check the path, or use 'builtin:python-docs' for the embedded corpus",
        )
    if path.is_file():
        return [(path, FOLDER_EXTENSIONS.get(path.suffix))], []
    files, ignored = [], []
    for f in sorted(p for p in path.rglob("*") if p.is_file()):
        if f.suffix in FOLDER_EXTENSIONS:
            files.append((f, FOLDER_EXTENSIONS[f.suffix]))
        elif f.suffix == ".test":
            ignored.append(f)
    if not files:
        raise LvsearchError(
            f"folder {path} holds no *.txt, *.train or *.dev files",
            fix="point --input at a folder of text files (BabyLM layout: train/*.train, dev/*.dev)",
        )
    return files, ignored


# --------------------------------------------------------------------------------------
# Hugging Face datasets
# --------------------------------------------------------------------------------------


@dataclass
class HFDatasetSource:
    """A Hugging Face dataset split (or an unsplit dataset); one row of ``text_column`` = one document."""

    label: str  # what the user passed
    split_name: str  # the dataset's split name ("train", "validation", ... or "" if unsplit)
    split: str | None
    dataset: object  # datasets.Dataset
    text_column: str
    has_dev: bool = field(init=False)

    def __post_init__(self) -> None:
        self.has_dev = self.split == DEV

    @property
    def key(self) -> str:
        return f"hf:{self.label}:{self.split_name}"

    def documents(self) -> Iterator[tuple[str | None, Document]]:
        for batch in self.dataset.iter(batch_size=1000):  # type: ignore[attr-defined]
            for text in batch[self.text_column]:
                if not text:
                    continue
                doc = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
                if doc:
                    yield self.split, doc

    def describe(self) -> dict:
        ds = self.dataset
        return {
            "kind": "hf",
            "dataset": self.label,
            "hf_split": self.split_name,
            "split": self.split,
            "text_column": self.text_column,
            "rows": int(ds.num_rows),  # type: ignore[attr-defined]
            "fingerprint": getattr(ds, "_fingerprint", None),
        }


def _hf_split_role(name: str) -> str | None | bool:
    """Map a HF split name to train/dev/None; False means "ignore" (test splits)."""
    if name == "train":
        return TRAIN
    if name in HF_DEV_SPLITS:
        return DEV
    if name.startswith("test"):
        return False
    return None


def load_hf_sources(spec: str, text_column: str, *, local: Path | None = None) -> list[HFDatasetSource]:
    """Open a Hugging Face dataset as sources, one per split.

    Args:
        spec: hub name ``NAME[:CONFIG]`` (e.g. ``wikitext:wikitext-103-raw-v1``), or the path
            of a ``save_to_disk`` folder / local data file when ``local`` is given.
        text_column: name of the column holding the text.
        local: the local path, when ``spec`` is a folder or data file.

    Raises:
        LvsearchError: the dataset cannot be loaded (unknown name, no network, bad file), or it
            has no column ``text_column`` (the message lists the columns it has).
    """
    import datasets  # heavy; imported only when a HF source is used

    datasets.disable_progress_bars()
    try:
        if local is not None and local.is_dir():
            ds = datasets.load_from_disk(str(local))
        elif local is not None:
            ds = datasets.load_dataset(HF_FILE_BUILDERS[local.suffix], data_files=str(local))
        else:
            name, _, config = spec.partition(":")
            ds = datasets.load_dataset(name, config or None)
    except Exception as e:  # datasets raises many types: network, file-format, not-found
        raise LvsearchError(
            f"could not load Hugging Face dataset {spec!r}: {type(e).__name__}: {e}".rstrip(),
            fix="check the dataset name (NAME[:CONFIG]) or path, and that the hub is reachable",
        ) from None
    splits = list(ds.items()) if isinstance(ds, datasets.DatasetDict) else [("", ds)]
    # Without a validation split, "train" is just the default name (local data files get it
    # too): leave its documents unassigned so --dev-fraction holds some out.
    has_dev_split = any(_hf_split_role(name) == DEV for name, _ in splits)
    sources = []
    for split_name, d in splits:
        role = _hf_split_role(split_name) if split_name else None
        if role is False:
            continue
        if role == TRAIN and not has_dev_split:
            role = None
        if text_column not in d.column_names:
            raise LvsearchError(
                f"Hugging Face dataset {spec!r} (split {split_name or '-'}) has no column "
                f"{text_column!r}; its columns are {', '.join(d.column_names)}",
                fix="choose the text column with --text-column NAME",
            )
        sources.append(HFDatasetSource(spec, split_name, role, d, text_column))
    if not sources:
        raise LvsearchError(f"Hugging Face dataset {spec!r} has no train or validation split")
    return sources


# --------------------------------------------------------------------------------------
# Embedded corpus
# --------------------------------------------------------------------------------------

BUILTIN_PYTHON_DOCS = "builtin:python-docs"
_SKIP_DIRS = {"test", "tests", "idle_test", "site-packages", "dist-packages", "__pycache__"}


def _paragraph_lines(text: str) -> Document:
    """Reflow wrapped text: one line per paragraph (paragraphs separated by blank lines)."""
    out, para = [], []
    for line in text.splitlines():
        line = line.strip()
        if line:
            para.append(line)
        elif para:
            out.append(" ".join(para))
            para = []
    if para:
        out.append(" ".join(para))
    return out


def python_docs_documents() -> list[Document]:
    """Documents of ``builtin:python-docs``: pydoc topics, then stdlib docstrings per module.

    Deterministic for one Python installation (files are read in sorted order, topics by
    name). Module sources are parsed with :mod:`ast`; nothing is imported or executed.
    """
    import pydoc_data.topics

    docs: list[Document] = []
    for name in sorted(pydoc_data.topics.topics):
        doc = _paragraph_lines(pydoc_data.topics.topics[name])
        if doc:
            docs.append(doc)
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    for path in sorted(stdlib.rglob("*.py")):
        if _SKIP_DIRS.intersection(path.relative_to(stdlib).parts):
            continue
        try:
            tree = ast.parse(path.read_bytes())
        except (SyntaxError, ValueError, OSError):
            continue  # e.g. lib2to3 fixtures written for Python 2
        doc: Document = []
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                text = ast.get_docstring(node)
                if text:
                    doc.extend(_paragraph_lines(text))
        if doc:
            docs.append(doc)
    return docs


@dataclass
class BuiltinPythonDocsSource:
    """``builtin:python-docs``: CPython's bundled documentation (see the module docstring)."""

    key: str = BUILTIN_PYTHON_DOCS
    has_dev: bool = False
    _docs: list[Document] | None = None

    def _load(self) -> list[Document]:
        if self._docs is None:
            self._docs = python_docs_documents()
        return self._docs

    def documents(self) -> Iterator[tuple[str | None, Document]]:
        for doc in self._load():
            yield None, doc

    def describe(self) -> dict:
        text = "\n\n".join("\n".join(d) for d in self._load())
        return {
            "kind": "builtin",
            "name": BUILTIN_PYTHON_DOCS,
            "python": ".".join(map(str, sys.version_info[:3])),
            "documents": len(self._load()),
            "sha256": sha256_bytes(text.encode("utf-8")),
            "note": "small technical-English corpus built from CPython's bundled docs",
        }


# --------------------------------------------------------------------------------------
# Resolving inputs
# --------------------------------------------------------------------------------------


@dataclass
class ResolvedInputs:
    """Sources ready to read, plus what was skipped and why (for the summary and manifest)."""

    sources: list[Source]
    ignored: list[str]  # *.test files found in folders
    skipped: list[str]  # "path: problem" for files skipped with --skip-bad-files

    @property
    def has_dev(self) -> bool:
        return any(s.has_dev for s in self.sources)


def resolve_inputs(
    inputs: list[str],
    hf_datasets: list[str] = (),  # type: ignore[assignment]
    *,
    text_column: str = "text",
    skip_bad_files: bool = False,
) -> ResolvedInputs:
    """Turn ``--input`` / ``--hf-dataset`` values into sources.

    ``inputs`` entries are ``builtin:python-docs``, a text file, a folder, a ``save_to_disk``
    folder (recognised by its ``dataset_info.json``/``dataset_dict.json``) or a local
    ``.json/.jsonl/.csv/.parquet`` data file. Every text file is read once here (hash + UTF-8
    check) so bad files are reported before any work starts.

    Raises:
        LvsearchError: a path is missing; a folder has no text files; some files are binary
            or not UTF-8 and ``skip_bad_files`` is False (the message lists all of them). Bad
            files fail by default because silently dropping them would change the corpus.
    """
    if not inputs and not hf_datasets:
        raise LvsearchError("no input given", fix="pass --input PATH (or builtin:python-docs) or --hf-dataset NAME")
    sources: list[Source] = []
    ignored: list[str] = []
    candidates: list[tuple[Path, str | None]] = []
    for spec in inputs:
        if spec == BUILTIN_PYTHON_DOCS:
            sources.append(BuiltinPythonDocsSource())
            continue
        if spec.startswith("builtin:"):
            raise LvsearchError(f"unknown embedded corpus {spec!r}", fix=f"the embedded corpus is {BUILTIN_PYTHON_DOCS}")
        path = Path(spec).expanduser().resolve()
        if path.is_dir() and ((path / "dataset_info.json").exists() or (path / "dataset_dict.json").exists()):
            sources.extend(load_hf_sources(spec, text_column, local=path))
            continue
        if path.is_file() and path.suffix in HF_FILE_BUILDERS:
            sources.extend(load_hf_sources(spec, text_column, local=path))
            continue
        files, ign = collect_text_files(path)
        candidates.extend(files)
        ignored.extend(str(p) for p in ign)
    for spec in hf_datasets:
        sources.extend(load_hf_sources(spec, text_column))

    seen: set[Path] = set()
    checks = []
    for path, split in candidates:
        if path in seen:
            continue
        seen.add(path)
        checks.append((check_text_file(path), split))
    bad = [c for c, _ in checks if c.problem]
    if bad and not skip_bad_files:
        listing = "\n".join(f"    {c.path}: {c.problem}" for c in bad)
        raise LvsearchError(
            f"{len(bad)} input file(s) are not UTF-8 text:\n{listing}",
            fix="convert them (e.g. iconv -f WINDOWS-1252 -t UTF-8, or -f UTF-16), remove them, or pass "
            "--skip-bad-files to skip them with a warning",
        )
    sources.extend(TextFileSource(c.path, split, c) for c, split in checks if not c.problem)
    skipped = [f"{c.path}: {c.problem}" for c in bad]
    if not sources:
        raise LvsearchError("no usable input: every input file was skipped", fix="check the inputs")
    return ResolvedInputs(sources, ignored, skipped)


def assign_split(
    source_split: str | None, source_key: str, doc_index: int, *, any_dev: bool, dev_fraction: float, seed: int
) -> str:
    """Split of one document: the source's own, else train when explicit dev text exists, else
    dev with probability ``dev_fraction`` by a hash of ``(seed, source_key, doc_index)``."""
    if source_split is not None:
        return source_split
    if any_dev or dev_fraction <= 0:
        return TRAIN
    digest = hashlib.blake2b(f"{seed}\0{source_key}\0{doc_index}".encode(), digest_size=8).digest()
    u = int.from_bytes(digest, "little") / 2**64
    return DEV if u < dev_fraction else TRAIN


def iter_split_documents(
    resolved: ResolvedInputs, *, dev_fraction: float, seed: int
) -> Iterator[tuple[str, Document]]:
    """All documents of all sources with their final split (see :func:`assign_split`)."""
    any_dev = resolved.has_dev
    for source in resolved.sources:
        for i, (split, doc) in enumerate(source.documents()):
            yield assign_split(split, source.key, i, any_dev=any_dev, dev_fraction=dev_fraction, seed=seed), doc


__all__ = [
    "BUILTIN_PYTHON_DOCS",
    "DEV",
    "TRAIN",
    "BuiltinPythonDocsSource",
    "HFDatasetSource",
    "ResolvedInputs",
    "TextFileSource",
    "assign_split",
    "check_text_file",
    "iter_split_documents",
    "resolve_inputs",
    "split_documents",
]

