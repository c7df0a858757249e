"""``lvsearch data prepare``: raw text → WordPiece tokenizer → token shards + manifest.

Two passes over the sources: the first trains the tokenizer on the train split only (dev text
never influences the vocabulary), the second tokenises both splits into flat token streams
(see :mod:`lvsearch.data.shards` for the on-disk layout). Everything is written into a
temporary folder next to ``--out`` and moved into place only when complete, so an interrupted
run or a failure never leaves a half-written dataset and never destroys an existing one.

The output is a pure function of the inputs and settings: re-running on the same input gives
byte-identical files (no timestamps in the manifest; wall time is only printed).
"""

from __future__ import annotations

import array
import os
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from lvsearch import __version__
from lvsearch.data.shards import FORMAT, MANIFEST, SPLITS, TOKENIZER, changed_sources, token_dtype
from lvsearch.data.sources import ResolvedInputs, iter_split_documents, resolve_inputs
from lvsearch.data.tokenizer import SpecialIds, load_tokenizer, train_wordpiece
from lvsearch.errors import LvsearchError
from lvsearch.io import (
    atomic_write_json,
    check_writable_folder,
    guard_output,
    read_json,
    remove_stale_temps,
    sha256_file,
    umask,
)
from lvsearch.lock import holds_output

#: Lines encoded per call of the Rust tokenizer.
ENCODE_BATCH_LINES = 8192


@dataclass
class PrepareSettings:
    """Settings of ``data prepare``; all of them are recorded in the manifest."""

    vocab_size: int = 16384
    lowercase: bool = True
    min_frequency: int = 2
    seq_len: int = 128
    dev_fraction: float = 0.02
    seed: int = 0
    shard_tokens: int = 1 << 27  # 128M tokens = 256 MB per uint16 shard

    def check(self) -> None:
        """Raises LvsearchError on out-of-range values."""
        if self.vocab_size < 100:
            raise LvsearchError(f"--vocab-size {self.vocab_size} is too small", fix="use at least 100 (default 16384)")
        if self.seq_len < 8:
            raise LvsearchError(f"--seq-len {self.seq_len} is too short", fix="use at least 8 (default 128)")
        if not 0 <= self.dev_fraction < 1:
            raise LvsearchError(f"--dev-fraction {self.dev_fraction} is not in [0, 1)", fix="e.g. 0.02")
        if self.shard_tokens < self.seq_len:
            raise LvsearchError("--shard-tokens must be at least --seq-len")


@dataclass
class SplitStats:
    documents: int = 0
    lines: int = 0
    words: int = 0
    tokens: int = 0
    shards: list = field(default_factory=list)


@dataclass
class PrepareResult:
    out: Path
    manifest: dict
    seconds: float
    skipped: list[str]
    ignored: list[str]


class _ShardWriter:
    """Appends token ids to ``<split>-NNNNN.bin`` files, rolling over every ``shard_tokens``."""

    def __init__(self, folder: Path, split: str, dtype: np.dtype, shard_tokens: int):
        self.folder, self.split, self.dtype, self.shard_tokens = folder, split, dtype, shard_tokens
        self.buffer = array.array("I")
        self.shards: list[dict] = []
        self._file = None
        self._in_shard = 0

    def _open(self) -> None:
        name = f"{self.split}-{len(self.shards):05d}.bin"
        self._file = open(self.folder / name, "wb")
        self.shards.append({"file": name, "tokens": 0})
        self._in_shard = 0

    def extend(self, ids) -> None:
        self.buffer.extend(ids)
        if len(self.buffer) >= 1 << 20:
            self.flush()

    def flush(self) -> None:
        data = np.frombuffer(self.buffer, dtype=np.uint32) if len(self.buffer) else np.empty(0, np.uint32)
        pos = 0
        while pos < len(data):
            if self._file is None or self._in_shard >= self.shard_tokens:
                self.close()
                self._open()
            take = min(len(data) - pos, self.shard_tokens - self._in_shard)
            data[pos : pos + take].astype(self.dtype).tofile(self._file)
            self._in_shard += take
            self.shards[-1]["tokens"] += take
            pos += take
        self.buffer = array.array("I")

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def finish(self) -> list[dict]:
        self.flush()
        self.close()
        for s in self.shards:
            s["sha256"] = sha256_file(self.folder / s["file"])
        return self.shards


def check_out_folder(out: Path, *, overwrite: bool) -> None:
    """Refuse to write into ``out`` unless it is absent, empty, or a dataset with ``overwrite``.

    Raises:
        LvsearchError: ``out`` is a file; holds a prepared dataset and ``overwrite`` is off (the
            message says whether its sources changed since); or holds other files.
    """
    if out.exists() and not out.is_dir():
        raise LvsearchError(f"--out {out} is a file", fix="choose a folder path")
    check_writable_folder(out)
    if not out.is_dir() or not any(out.iterdir()):
        return
    manifest_path = out / MANIFEST
    if not manifest_path.is_file():
        raise LvsearchError(
            f"--out {out} is not empty and holds no lvsearch dataset; refusing to write into it",
            fix="choose a new or empty folder",
        )
    if overwrite:
        return
    try:
        changed = changed_sources(read_json(manifest_path, what="dataset manifest").get("sources", []))
    except (LvsearchError, AttributeError, KeyError, TypeError):
        changed = ["(its manifest is unreadable)"]
    state = (
        "its sources changed since tokenisation:\n" + "\n".join(f"    {c}" for c in changed)
        if changed
        else "the sources it was made from are unchanged since tokenisation"
    )
    raise LvsearchError(
        f"--out {out} already holds a prepared dataset; {state}",
        fix="pass --overwrite to rebuild it, or choose another --out",
    )


def _replace_folder(tmp: Path, out: Path) -> None:
    """Move the finished ``tmp`` folder to ``out``, replacing an old dataset only at the end."""
    if out.exists():
        backup = out.with_name(f".{out.name}.old-{os.getpid()}")
        os.replace(out, backup)
        os.replace(tmp, out)
        shutil.rmtree(backup, ignore_errors=True)
    else:
        os.replace(tmp, out)
    # leftovers of earlier prepares into ``out`` killed before their rename
    remove_stale_temps(out.parent, f".{out.name}.tmp-")
    remove_stale_temps(out.parent, f".{out.name}.old-")


@holds_output("out")
def prepare(
    inputs: list[str],
    out: str | Path,
    settings: PrepareSettings | None = None,
    *,
    hf_datasets: list[str] = (),  # type: ignore[assignment]
    text_column: str = "text",
    tokenizer: str | Path | None = None,
    skip_bad_files: bool = False,
    overwrite: bool = False,
    show_progress: bool = True,
) -> PrepareResult:
    """Prepare a dataset folder from raw text (see the module docstring).

    Args:
        inputs: ``--input`` values (files, folders, ``builtin:python-docs``, HF local data).
        out: output folder; must be new/empty, or hold a dataset and ``overwrite`` be set.
        settings: vocabulary, packing and split settings.
        hf_datasets: hub datasets as ``NAME[:CONFIG]``.
        text_column: text column of HF datasets.
        tokenizer: an existing ``tokenizer.json`` to use instead of training one.
        skip_bad_files: skip binary / non-UTF-8 files with a warning instead of failing.
        overwrite: replace an existing dataset in ``out``.

    Raises:
        LvsearchError: any bad input (see :func:`resolve_inputs`, :func:`check_out_folder`), or
            a split that ends up empty.
    """
    from lvsearch import ui

    settings = settings or PrepareSettings()
    settings.check()
    out = Path(out).expanduser().resolve()
    guard_output(out, overwrite=overwrite, writes=("manifest.json", "tokenizer.json", "*.bin", "environment.json"),
                 inputs=[*(("--input", Path(i).expanduser()) for i in inputs if not str(i).startswith("builtin:")),
                         ("--tokenizer", tokenizer)])
    check_out_folder(out, overwrite=overwrite)
    start = time.perf_counter()
    resolved = resolve_inputs(inputs, list(hf_datasets), text_column=text_column, skip_bad_files=skip_bad_files)
    for line in resolved.skipped:
        ui.warn(f"skipped {line}")

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    tmp.chmod(0o777 & ~umask())  # mkdtemp creates 0700
    try:
        with ui.progress(enabled=show_progress) as bar:
            tok, n_docs = _get_tokenizer(resolved, settings, tokenizer, bar)
            tok.save(str(tmp / TOKENIZER))
            stats = _tokenise(resolved, settings, tok, tmp, bar, n_docs)
        for split in SPLITS:
            if stats[split].documents == 0 or stats[split].tokens == 0:
                raise LvsearchError(_empty_split_message(split, stats, resolved, settings))
        manifest = _manifest(resolved, settings, tok, tmp, stats)
        atomic_write_json(tmp / MANIFEST, manifest)
        _replace_folder(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return PrepareResult(out, manifest, time.perf_counter() - start, resolved.skipped, resolved.ignored)


def _get_tokenizer(resolved: ResolvedInputs, settings: PrepareSettings, path, bar):
    """The tokenizer (loaded from ``path`` or trained) and the number of documents read (or None)."""
    if path is not None:
        return load_tokenizer(path, ensure_post_processor=True), None
    task = bar.add_task("training tokenizer", total=None, info="")
    docs = 0

    def train_lines():
        nonlocal docs
        for split, doc in iter_split_documents(resolved, dev_fraction=settings.dev_fraction, seed=settings.seed):
            docs += 1
            if docs % 256 == 0:
                bar.update(task, completed=docs, info=f"{docs} documents read")
            if split == "train":
                yield doc

    tok = train_wordpiece(
        train_lines(), vocab_size=settings.vocab_size, lowercase=settings.lowercase, min_frequency=settings.min_frequency
    )
    bar.update(task, total=docs, completed=docs, info=f"vocab {tok.get_vocab_size()}")
    if tok.get_vocab_size() < settings.vocab_size:
        from lvsearch import ui

        ui.warn(f"--vocab-size {settings.vocab_size}: the train split yields {tok.get_vocab_size()} WordPiece tokens "
                f"(min frequency {settings.min_frequency}), so the vocabulary has {tok.get_vocab_size()}")
    return tok, docs


def _tokenise(resolved, settings, tok, folder: Path, bar, n_docs: int | None) -> dict[str, SplitStats]:
    ids = SpecialIds.of(tok)
    dtype = token_dtype(tok.get_vocab_size())
    writers = {s: _ShardWriter(folder, s, dtype, settings.shard_tokens) for s in SPLITS}
    stats = {s: SplitStats() for s in SPLITS}
    task = bar.add_task("tokenising", total=n_docs, info="")
    encode = getattr(tok, "encode_batch_fast", tok.encode_batch)
    pending: list[tuple[str, list[str]]] = []
    pending_lines = 0

    def flush() -> None:
        nonlocal pending, pending_lines
        lines = [line for _, doc in pending for line in doc]
        encodings = iter(encode(lines, add_special_tokens=False))
        for split, doc in pending:
            w = writers[split]
            for _ in doc:
                w.extend(next(encodings).ids)
            w.extend((ids.sep,))
        pending, pending_lines = [], 0
        bar.update(task, completed=sum(s.documents for s in stats.values()), info="documents")

    for split, doc in iter_split_documents(resolved, dev_fraction=settings.dev_fraction, seed=settings.seed):
        st = stats[split]
        st.documents += 1
        st.lines += len(doc)
        st.words += sum(len(line.split()) for line in doc)
        pending.append((split, doc))
        pending_lines += len(doc)
        if pending_lines >= ENCODE_BATCH_LINES:
            flush()
    flush()
    for split in SPLITS:
        stats[split].shards = writers[split].finish()
        stats[split].tokens = sum(s["tokens"] for s in stats[split].shards)
    bar.update(task, total=sum(s.documents for s in stats.values()))
    return stats


def _empty_split_message(split: str, stats, resolved: ResolvedInputs, settings: PrepareSettings) -> str:
    n_docs = sum(s.documents for s in stats.values())
    if n_docs == 0:
        return "the inputs contain no text (0 documents)\n  fix: check the inputs; blank files give no documents"
    if split == "dev":
        if resolved.has_dev:
            return "the dev split is empty: the *.dev files / validation split hold no text\n  fix: add text to them"
        return (
            f"the dev split is empty: {n_docs} document(s) and --dev-fraction {settings.dev_fraction} put none in dev\n"
            "  fix: raise --dev-fraction, add more documents (blank lines separate documents), or add *.dev files"
        )
    return "the train split is empty: all text went to dev\n  fix: add training text (*.train or *.txt files) or lower --dev-fraction"


def _manifest(resolved: ResolvedInputs, settings: PrepareSettings, tok, folder: Path, stats) -> dict:
    ids = SpecialIds.of(tok)
    return {
        "format": FORMAT,
        "lvsearch_version": __version__,
        "sources": [s.describe() for s in resolved.sources],
        "ignored_files": resolved.ignored,
        "skipped_files": resolved.skipped,
        "settings": asdict(settings),
        "tokenizer": {
            "file": TOKENIZER,
            "sha256": sha256_file(folder / TOKENIZER),
            "vocab_size": tok.get_vocab_size(),
            "special_ids": {k: getattr(ids, k) for k in ("pad", "unk", "cls", "sep", "mask")},
        },
        "dtype": token_dtype(tok.get_vocab_size()).name,
        "splits": {s: asdict(stats[s]) for s in SPLITS},
    }
