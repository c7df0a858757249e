"""Prepared datasets on disk: token shards + ``manifest.json`` + ``tokenizer.json``.

Layout of a prepared folder (written by :func:`lvsearch.data.prepare.prepare`)::

    manifest.json        format tag, sources (with sha256), settings, tokenizer hash,
                         per-split counts and shard list
    tokenizer.json       the WordPiece tokenizer
    train-00000.bin …    flat token-id streams (np.uint16 when the vocabulary fits, else
    dev-00000.bin …      np.uint32); each document's tokens are followed by one [SEP]

Sequences are packed at read time (:class:`PackedSequences`): sequence ``i`` of a shard is
``[CLS] stream[i·(L−2) : (i+1)·(L−2)] [SEP]``, so documents are concatenated with ``[SEP]``
between them, no padding is wasted, and the packing length ``L`` can be chosen per run without
re-tokenising. The last ``< L−2`` tokens of each shard are not used.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
from pydantic import Field

from lvsearch.data.tokenizer import SpecialIds, load_tokenizer
from lvsearch.errors import LvsearchError
from lvsearch.io import check_fields, read_json, sha256_file
from lvsearch.schema import Count, FileModel

MANIFEST = "manifest.json"
TOKENIZER = "tokenizer.json"
FORMAT = "lvsearch.data/v1"


def prepare_command(folder: str | Path) -> str:
    """The command that writes the prepared dataset ``folder`` anew (named by the fix for a
    damaged ``manifest.json``)."""
    return f"lvsearch data prepare --input SOURCES --out {folder} --overwrite"


SPLITS = ("train", "dev")

#: A file of the prepared folder, named by the manifest: a plain file name (no folder part).
_FileName = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")]


class ManifestShard(FileModel):
    file: _FileName
    tokens: Count
    sha256: str


class ManifestSplit(FileModel):
    tokens: Count
    shards: list[ManifestShard]


class ManifestSplits(FileModel):
    train: ManifestSplit
    dev: ManifestSplit


class ManifestSpecialIds(FileModel):
    pad: Count
    unk: Count
    cls: Count
    sep: Count
    mask: Count


class ManifestTokenizer(FileModel):
    sha256: str
    vocab_size: Annotated[int, Field(ge=1)]
    special_ids: ManifestSpecialIds


class ManifestSettings(FileModel):
    seq_len: Annotated[int, Field(ge=3)]


class DatasetManifest(FileModel):
    """The fields of ``manifest.json`` that :class:`PreparedData` reads (others are kept; the
    ``format`` tag is checked first, with its own message)."""

    sources: list[dict]
    settings: ManifestSettings
    tokenizer: ManifestTokenizer
    dtype: Literal["uint16", "uint32"]
    splits: ManifestSplits


def token_dtype(vocab_size: int) -> np.dtype:
    """Smallest unsigned dtype holding ids ``< vocab_size`` (uint16 up to 65 536, else uint32)."""
    return np.dtype(np.uint16 if vocab_size <= 1 << 16 else np.uint32)


class PackedSequences:
    """Fixed-length training sequences cut from one split's token shards (read-only, memmapped).

    Args:
        shards: the split's token streams, 1-D integer arrays (usually ``np.memmap``).
        seq_len: sequence length ``L`` including ``[CLS]`` and ``[SEP]``; at least 3.
        cls_id, sep_id: ids of ``[CLS]`` and ``[SEP]``.

    Indexing with an int gives an ``(L,)`` int64 array, with an integer array of shape ``(n,)``
    an ``(n, L)`` int64 array.
    """

    def __init__(self, shards: list[np.ndarray], seq_len: int, cls_id: int, sep_id: int):
        if seq_len < 3:
            raise LvsearchError(f"sequence length {seq_len} is too short", fix="use a length of at least 3 (e.g. 128)")
        self.shards = shards
        self.seq_len = seq_len
        self.cls_id, self.sep_id = cls_id, sep_id
        body = seq_len - 2
        counts = np.array([len(s) // body for s in shards], dtype=np.int64)
        self._starts = np.concatenate([[0], np.cumsum(counts)])

    def __len__(self) -> int:
        return int(self._starts[-1])

    def __getitem__(self, index):
        single = np.isscalar(index)
        idx = np.atleast_1d(np.asarray(index, dtype=np.int64))
        n = len(self)
        if idx.size and (idx.min() < -n or idx.max() >= n):
            raise IndexError(f"sequence index out of range for {n} sequences")
        idx = np.where(idx < 0, idx + n, idx)
        body = self.seq_len - 2
        out = np.empty((idx.size, self.seq_len), dtype=np.int64)
        out[:, 0] = self.cls_id
        out[:, -1] = self.sep_id
        shard_of = np.searchsorted(self._starts, idx, side="right") - 1
        offsets = np.arange(body)
        for s in np.unique(shard_of):
            rows = np.nonzero(shard_of == s)[0]
            local = idx[rows] - self._starts[s]
            out[rows, 1:-1] = self.shards[s][(local * body)[:, None] + offsets]
        return out[0] if single else out


@dataclass
class PreparedData:
    """A prepared dataset folder, opened read-only.

    Use :meth:`open`; it checks the manifest's format and that the tokenizer and every shard
    have the size and sha256 the manifest records. :meth:`verify` also re-hashes the sources.
    """

    folder: Path
    manifest: dict

    @classmethod
    def open(cls, folder: str | Path) -> "PreparedData":
        """Open a folder written by ``lvsearch data prepare``.

        Raises:
            LvsearchError: the folder or its manifest is missing or malformed (a field the
                reader needs missing or of the wrong type: :class:`DatasetManifest`), a shard or the
                tokenizer is missing, or a shard's size or a shard's or the tokenizer's sha256
                disagrees with the manifest (truncated or modified).
        """
        folder = Path(folder)
        if not folder.is_dir():
            raise LvsearchError(f"data folder not found: {folder}", fix="run 'lvsearch data prepare --out DIR' first")
        if not (folder / MANIFEST).is_file():
            raise LvsearchError(
                f"{folder} is not a prepared dataset (no {MANIFEST})",
                fix="give the --out folder of 'lvsearch data prepare'",
            )
        manifest = read_json(folder / MANIFEST, what="dataset manifest", regenerate=prepare_command(folder))
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
            raise LvsearchError(
                f"{folder / MANIFEST} is not an lvsearch dataset manifest (format {FORMAT!r} expected)",
                fix="re-run 'lvsearch data prepare' into this folder with --overwrite",
            )
        check_fields(manifest, DatasetManifest, folder / MANIFEST, what="dataset manifest",
                     fix=f"restore it, or write it again: {prepare_command(folder)}")
        data = cls(folder, manifest)
        data._check_files()
        return data

    def _check_files(self) -> None:
        if not (self.folder / TOKENIZER).is_file():
            raise LvsearchError(f"{self.folder / TOKENIZER} is missing", fix="re-run 'lvsearch data prepare' with --overwrite")
        itemsize = self.dtype.itemsize
        for split in SPLITS:
            for shard in self.manifest["splits"][split]["shards"]:
                path = self.folder / shard["file"]
                want = shard["tokens"] * itemsize
                if not path.is_file():
                    raise LvsearchError(f"shard {path} is missing", fix="re-run 'lvsearch data prepare' with --overwrite")
                if path.stat().st_size != want:
                    raise LvsearchError(
                        f"shard {path} has {path.stat().st_size} bytes, the manifest says {want} (truncated or modified)",
                        fix="re-run 'lvsearch data prepare' with --overwrite",
                    )
        # Sizes catch truncation; hashes catch a modified file of the right size (about 0.05 s
        # per 10 MB of shards, paid once per open).
        fix = "re-run 'lvsearch data prepare' into this folder with --overwrite ('lvsearch data verify DIR' lists every problem)"
        if sha256_file(self.folder / TOKENIZER) != self.tokenizer_sha256:
            raise LvsearchError(f"{self.folder / TOKENIZER} was modified after 'data prepare' wrote it "
                                f"(sha256 differs from {self.folder / MANIFEST})", fix=fix)
        for split in SPLITS:
            for shard in self.manifest["splits"][split]["shards"]:
                if sha256_file(self.folder / shard["file"]) != shard["sha256"]:
                    raise LvsearchError(f"shard {self.folder / shard['file']} was modified after 'data prepare' wrote it "
                                        f"(sha256 differs from {self.folder / MANIFEST})", fix=fix)

        # The manifest's own facts must agree with the files (a hand-edited manifest would
        # otherwise index out of the embedding table deep inside training).
        fix_manifest = "restore manifest.json, or re-run 'lvsearch data prepare' into this folder with --overwrite"
        tok = self.tokenizer
        if tok.get_vocab_size() != self.vocab_size:
            raise LvsearchError(f"{self.folder / MANIFEST} says vocab_size {self.vocab_size}, but "
                                f"{self.folder / TOKENIZER} has {tok.get_vocab_size()} pieces", fix=fix_manifest)
        try:
            recorded = self.special_ids
            actual = SpecialIds.of(tok, str(self.folder / TOKENIZER))
        except (TypeError, KeyError):
            raise LvsearchError(f"{self.folder / MANIFEST} has malformed special_ids", fix=fix_manifest) from None
        if recorded != actual:
            raise LvsearchError(f"{self.folder / MANIFEST} special_ids {recorded} disagree with {self.folder / TOKENIZER} "
                                f"({actual})", fix=fix_manifest)

    @cached_property
    def manifest_sha256(self) -> str:
        """Hash of ``manifest.json``; run folders record it to detect a dataset rebuilt in place."""
        return sha256_file(self.folder / MANIFEST)

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.manifest["dtype"])

    @property
    def vocab_size(self) -> int:
        return int(self.manifest["tokenizer"]["vocab_size"])

    @property
    def tokenizer_sha256(self) -> str:
        """Hash of ``tokenizer.json``; checkpoints record it to detect a tokenizer mismatch."""
        return self.manifest["tokenizer"]["sha256"]

    @property
    def seq_len(self) -> int:
        """Default packing length chosen at prepare time."""
        return int(self.manifest["settings"]["seq_len"])

    @cached_property
    def tokenizer(self):
        return load_tokenizer(self.folder / TOKENIZER)

    @property
    def special_ids(self) -> SpecialIds:
        return SpecialIds(**self.manifest["tokenizer"]["special_ids"])

    def num_tokens(self, split: str) -> int:
        """Tokens in ``split`` (``"train"`` or ``"dev"``), document separators included."""
        return int(self.manifest["splits"][split]["tokens"])

    def shards(self, split: str) -> list[np.ndarray]:
        """Memory-mapped token streams of ``split``, read-only."""
        return [
            np.memmap(self.folder / s["file"], dtype=self.dtype, mode="r", shape=(s["tokens"],))
            for s in self.manifest["splits"][split]["shards"]
            if s["tokens"] > 0
        ]

    def sequences(self, split: str, seq_len: int | None = None) -> PackedSequences:
        """Packed ``[CLS] … [SEP]`` sequences of ``split`` with length ``seq_len`` (default: manifest's).

        Raises:
            LvsearchError: unknown split, or the split is too small for one sequence.
        """
        if split not in SPLITS:
            raise LvsearchError(f"unknown split {split!r}", fix=f"use one of {', '.join(SPLITS)}")
        ids = self.special_ids
        seqs = PackedSequences(self.shards(split), seq_len or self.seq_len, ids.cls, ids.sep)
        if len(seqs) == 0:
            raise LvsearchError(
                f"the {split} split of {self.folder} has {self.num_tokens(split)} tokens, fewer than one "
                f"sequence of length {seqs.seq_len}",
                fix="use a shorter --seq-len or more text",
            )
        return seqs

    def verify(self, *, check_sources: bool = True) -> list[str]:
        """Recompute hashes; return a list of problems (empty when all is well).

        Checks the tokenizer and every shard against the manifest's sha256, and (with
        ``check_sources``) every source file and the embedded corpus against the hashes
        recorded at tokenisation time. Hugging Face sources are checked by fingerprint only
        when the dataset can be loaded again; otherwise they are reported as unchecked.
        """
        problems = []
        if sha256_file(self.folder / TOKENIZER) != self.tokenizer_sha256:
            problems.append(f"{self.folder / TOKENIZER}: sha256 differs from the manifest")
        for split in SPLITS:
            for s in self.manifest["splits"][split]["shards"]:
                if sha256_file(self.folder / s["file"]) != s["sha256"]:
                    problems.append(f"{self.folder / s['file']}: sha256 differs from the manifest")
        if check_sources:
            problems.extend(changed_sources(self.manifest["sources"]))
        return problems


def changed_sources(recorded: list[dict]) -> list[str]:
    """Sources whose content changed since they were recorded in a manifest.

    Returns one line per changed, missing or unreadable source; Hugging Face sources are
    not re-downloaded and are therefore not checked.
    """
    from lvsearch.data.sources import BuiltinPythonDocsSource

    problems = []
    for src in recorded:
        if src["kind"] == "file":
            path = Path(src["path"])
            if not path.is_file():
                problems.append(f"{path}: source file is gone")
            elif path.stat().st_size != src["bytes"] or sha256_file(path) != src["sha256"]:
                problems.append(f"{path}: source file changed since tokenisation (sha256 differs)")
        elif src["kind"] == "builtin":
            now = BuiltinPythonDocsSource().describe()
            if now["sha256"] != src["sha256"]:
                problems.append(
                    f"{src['name']}: the embedded corpus differs (Python {now['python']} now, {src['python']} at tokenisation)"
                )
    return problems
