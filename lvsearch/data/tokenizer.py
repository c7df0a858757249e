"""WordPiece tokenizer, trained and loaded with Hugging Face ``tokenizers``.

The tokenizer is BERT's recipe (Devlin et al. 2019): BERT normaliser (optional lower-casing,
accent stripping with lower-casing), BERT pre-tokeniser (whitespace + punctuation), WordPiece
model with ``##`` continuation prefix, and a template post-processor that adds
``[CLS] A [SEP]`` for one sequence and ``[CLS] A [SEP] B [SEP]`` for a pair, so that MLM
scoring and fine-tuning get the special tokens they need.

Special tokens are :data:`SPECIAL_TOKENS`; a freshly trained tokenizer gives them ids 0–4 in
that order. A loaded tokenizer may number them differently: always read ids from
:class:`SpecialIds`, never hard-code them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from lvsearch.errors import LvsearchError

PAD, UNK, CLS, SEP, MASK = "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"
SPECIAL_TOKENS = (PAD, UNK, CLS, SEP, MASK)


@dataclass(frozen=True)
class SpecialIds:
    """Ids of the five special tokens in one tokenizer."""

    pad: int
    unk: int
    cls: int
    sep: int
    mask: int

    def all(self) -> tuple[int, ...]:
        return (self.pad, self.unk, self.cls, self.sep, self.mask)

    @classmethod
    def of(cls, tokenizer, source: str = "tokenizer") -> "SpecialIds":
        """Read the ids from ``tokenizer``.

        Raises:
            LvsearchError: some special tokens are missing (the message lists them).
        """
        ids = {t: tokenizer.token_to_id(t) for t in SPECIAL_TOKENS}
        missing = [t for t, i in ids.items() if i is None]
        if missing:
            raise LvsearchError(
                f"{source} lacks the special token(s) {' '.join(missing)}; lvsearch needs "
                f"{' '.join(SPECIAL_TOKENS)}",
                fix="train a new tokenizer with 'lvsearch data prepare' (omit --tokenizer), or "
                "add the tokens to the tokenizer's vocabulary",
            )
        return cls(*(ids[t] for t in SPECIAL_TOKENS))


def _install_post_processor(tokenizer, ids: SpecialIds) -> None:
    from tokenizers.processors import TemplateProcessing

    tokenizer.post_processor = TemplateProcessing(
        single=f"{CLS} $A {SEP}",
        pair=f"{CLS} $A {SEP} $B:1 {SEP}:1",
        special_tokens=[(CLS, ids.cls), (SEP, ids.sep)],
    )


#: What BertNormalizer turns into a space (its other control characters it deletes, so they do not
#: separate words): tab, newline, carriage return and Rust's non-control White_Space characters.
_BERT_WHITESPACE = re.compile("[ \t\n\r\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+")


def _new_wordpiece(lowercase: bool):
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers

    tok = Tokenizer(models.WordPiece(unk_token=UNK, continuing_subword_prefix="##", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, lowercase=lowercase)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece(prefix="##")
    return tok


def _train(chunks: Iterable[str], *, vocab_size: int, lowercase: bool, min_frequency: int, special: list[str]):
    from tokenizers import trainers

    tok = _new_wordpiece(lowercase)
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=special,
                                        continuing_subword_prefix="##", show_progress=False)
    tok.train_from_iterator(chunks, trainer=trainer)
    return tok


def _repeated(counts: dict[str, int], order: list[str], chunk_words: int = 4096) -> Iterable[str]:
    """Text with each raw word of ``order`` ``counts[word]`` times, in chunks of about
    ``chunk_words`` words: the trainer counts exactly the words of the original text."""
    buf, n = [], 0
    for word in order:
        left = counts[word]
        while left:
            k = min(left, chunk_words)
            buf.append((word + " ") * k)
            n, left = n + k, left - k
            if n >= chunk_words:
                yield "".join(buf)
                buf, n = [], 0
    if buf:
        yield "".join(buf)


def train_wordpiece(
    texts: Iterable[str | list[str]],
    *,
    vocab_size: int = 16384,
    lowercase: bool = True,
    min_frequency: int = 2,
):
    """Train a WordPiece tokenizer on ``texts`` (strings or batches of strings); the same text
    gives a byte-identical tokenizer in every process.

    Hugging Face's trainer (``tokenizers`` BPE trainer under WordPiece) breaks ties between
    pairs of equal count by the ids of their pieces, and numbers the continuation pieces
    ``##c`` in the iteration order of a hash map of the words, which is seeded per process: on
    a corpus where equal counts compete for the last places, each run kept other pieces
    (measured: three runs on a 40 kB-per-file corpus gave three tokenizers). Here the text is read once into counts of its
    raw words (split where BertNormalizer puts spaces, so the trainer sees the same words with
    the same counts); a first, cheap training on the distinct words lists the characters and
    the ``##c`` pieces, and the real training gets them as leading special tokens in code-point
    order (characters first, as the trainer itself numbers them), so every piece has a fixed id
    before the first merge. The result is then renumbered canonically.

    Args:
        texts: training text, e.g. lines of the train split; iterated once.
        vocab_size: target vocabulary size including the special tokens; the result is
            smaller when the corpus has fewer distinct pieces.
        lowercase: lower-case (and strip accents) before tokenising, as BERT-uncased.
        min_frequency: pieces seen fewer times are not added.

    Returns:
        ``tokenizers.Tokenizer`` with the post-processor and decoder installed.
    """
    from collections import Counter

    from tokenizers import models

    counts: Counter[str] = Counter()
    for item in texts:
        for line in [item] if isinstance(item, str) else item:
            counts.update(w for w in _BERT_WHITESPACE.split(line) if w)
    order = sorted(counts)
    settings = {"lowercase": lowercase, "min_frequency": min_frequency}
    # 1. which ##c pieces the words make: no merge (the vocabulary is full at once)
    alphabet = _train((" ".join(order[i:i + 4096]) for i in range(0, len(order), 4096)), vocab_size=1,
                      special=list(SPECIAL_TOKENS), **settings)
    found = [t for t in alphabet.get_vocab() if t not in SPECIAL_TOKENS]
    chars = sorted(t for t in found if len(t) == 1)  # numbered by code point, as the trainer does
    continuation = sorted(t for t in found if t.startswith("##") and len(t) == 3)
    # 2. the training, every piece numbered before it starts: the characters first, as the trainer
    # numbers them itself, so a tie it settled the same way in every run is settled as before
    trained = _train(_repeated(counts, order), vocab_size=vocab_size,
                     special=[*SPECIAL_TOKENS, *chars, *continuation], **settings)
    # WordPiece's greedy longest-match depends only on the set of pieces, so numbering them
    # canonically (special tokens first, then by code point) changes no tokenisation.
    pieces = sorted(t for t in trained.get_vocab() if t not in SPECIAL_TOKENS)
    tok = _new_wordpiece(lowercase)
    tok.model = models.WordPiece({t: i for i, t in enumerate([*SPECIAL_TOKENS, *pieces])}, unk_token=UNK,
                                 continuing_subword_prefix="##", max_input_chars_per_word=100)
    tok.add_special_tokens(list(SPECIAL_TOKENS))
    _install_post_processor(tok, SpecialIds.of(tok))
    return tok


def load_tokenizer(path: str | Path, *, ensure_post_processor: bool = False):
    """Load a ``tokenizer.json`` and check it has what lvsearch needs.

    Args:
        path: the ``tokenizer.json`` file.
        ensure_post_processor: install the ``[CLS] … [SEP]`` template when the tokenizer does
            not already add those tokens (used when adopting an outside tokenizer); otherwise a
            tokenizer without it is an error.

    Raises:
        LvsearchError: missing or unreadable file, missing special tokens, or no
            ``[CLS] … [SEP]`` post-processing.
    """
    from tokenizers import Tokenizer

    path = Path(path)
    if not path.is_file():
        raise LvsearchError(f"tokenizer file not found: {path}", fix="pass the path of a tokenizer.json")
    try:
        tok = Tokenizer.from_file(str(path))
    except Exception as e:  # tokenizers raises a bare Exception on malformed files
        raise LvsearchError(
            f"{path} is not a Hugging Face tokenizer.json ({e})",
            fix="pass a file saved by tokenizers' Tokenizer.save (or let 'lvsearch data prepare' train one)",
        ) from None
    ids = SpecialIds.of(tok, source=f"tokenizer {path}")
    enc = tok.encode("a")
    if not (enc.ids and enc.ids[0] == ids.cls and enc.ids[-1] == ids.sep):
        if not ensure_post_processor:
            raise LvsearchError(
                f"tokenizer {path} does not add {CLS} … {SEP} around a sequence",
                fix="re-create it with 'lvsearch data prepare', which installs the template post-processor",
            )
        _install_post_processor(tok, ids)
    return tok


__all__ = ["SPECIAL_TOKENS", "SpecialIds", "load_tokenizer", "train_wordpiece"]
