"""BLiMP zero-shot evaluation by masked-LM pseudo-log-likelihood.

BLiMP (Warstadt et al. 2020, TACL, "BLiMP: The Benchmark of Linguistic Minimal Pairs for
English") holds 67 paradigms (``UID``) of 1000 minimal pairs, grouped into 12 phenomena
(``linguistics_term``). A model is right on a pair when it scores ``sentence_good`` strictly
higher than ``sentence_bad``. Ties count as wrong and are reported separately (the BabyLM 2023
pipeline counts them as right, which rewards a constant scorer).

A sentence ``W = w_1..w_n`` (word pieces, without ``[CLS]``/``[SEP]``) is scored by its
pseudo-log-likelihood (Salazar et al. 2020, ACL, "Masked Language Model Scoring", §2 — the PLL definition):

    PLL(W) = Σ_{t=1..n} log P_MLM(w_t | W_{\\t})

where ``W_{\\t}`` is ``[CLS] W [SEP]`` with position ``t`` replaced by ``[MASK]``; or by
PLL-word-l2r (Kauf & Ivanova 2023, ACL, "A Better Way to Do Masked Language Model Scoring"),
which also masks the pieces of ``w_t``'s word to the right of ``t`` (the default,
:data:`DEFAULT_METRIC`; chosen by measurement, docs/results.md "Floors"). All ``n`` masked
copies of a sentence (and the copies of other sentences) are batched together; rows are padded
with ``[PAD]`` and an attention mask, sentences are sorted by length so padding is small, and
the MLM head and log-softmax run only at the one scored position of each row. Every result
records its ``metric`` and ``precision``.

Paradigm folders are read in BLiMP's JSONL format (one object per line with at least
``sentence_good``, ``sentence_bad``, ``UID``, ``linguistics_term``; ``field`` optional).
"""

from __future__ import annotations

import bisect
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from lvsearch.errors import LvsearchError
from lvsearch.io import iter_jsonl, read_text

REQUIRED_KEYS = ("sentence_good", "sentence_bad", "UID", "linguistics_term")


@dataclass
class Paradigm:
    """One BLiMP paradigm: ``pairs`` is a list of ``(sentence_good, sentence_bad)``."""

    uid: str
    linguistics_term: str
    field: str
    pairs: list[tuple[str, str]]
    file: Path
    total_pairs: int  # pairs in the file before ``limit``


def read_blimp(folder: str | Path, *, limit: int | None = None) -> list[Paradigm]:
    """Read every ``*.jsonl`` paradigm file of ``folder`` (sorted by file name).

    Args:
        folder: folder of BLiMP JSONL files.
        limit: keep the first ``limit`` pairs of each paradigm (file order; deterministic);
            None keeps all.

    Raises:
        LvsearchError: the folder is missing or holds no ``*.jsonl``; a line is not a JSON
            object, lacks a required key or has an empty sentence (message: file and line);
            a file has no pairs or mixes several UIDs.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise LvsearchError(f"BLiMP folder not found: {folder}", fix="pass --blimp DIR, a folder of BLiMP *.jsonl files")
    files = sorted(folder.glob("*.jsonl"))
    if not files:
        raise LvsearchError(f"{folder} holds no *.jsonl files",
                            fix="pass --blimp DIR pointing at the BLiMP data (one <paradigm>.jsonl per paradigm)")
    if limit is not None and limit < 1:
        raise LvsearchError(f"--blimp-limit must be ≥ 1, got {limit}", fix="e.g. --blimp-limit 100")
    out = []
    for path in files:
        pairs: list[tuple[str, str]] = []
        uid = term = fld = None
        text = read_text(path, what="BLiMP file")  # UTF-8, a leading byte-order mark dropped
        for lineno, obj in iter_jsonl(path, text, fix="repair the line or restore the original BLiMP file"):
            missing = [k for k in REQUIRED_KEYS if k not in obj]
            if missing:
                raise LvsearchError(f"{path}, line {lineno}: missing key(s) {', '.join(missing)}",
                                    fix=f"each line needs {', '.join(REQUIRED_KEYS)}")
            good, bad = obj["sentence_good"], obj["sentence_bad"]
            if not (isinstance(good, str) and isinstance(bad, str) and good.strip() and bad.strip()):
                raise LvsearchError(f"{path}, line {lineno}: sentence_good and sentence_bad must be non-empty strings",
                                    fix="repair the line or restore the original BLiMP file")
            if uid is None:
                uid, term, fld = str(obj["UID"]), str(obj["linguistics_term"]), str(obj.get("field", ""))
            elif str(obj["UID"]) != uid:
                raise LvsearchError(f"{path}, line {lineno}: UID {obj['UID']!r} differs from {uid!r} on earlier lines",
                                    fix="keep one paradigm per file")
            pairs.append((good, bad))
        if not pairs:
            raise LvsearchError(f"{path} holds no minimal pairs", fix="remove the empty file or restore it")
        total = len(pairs)
        if limit is not None:
            pairs = pairs[:limit]
        out.append(Paradigm(uid, term, fld, pairs, path, total))  # type: ignore[arg-type]
    return out


#: BLiMP sentence scores: ``pll`` (Salazar et al. 2020) and ``pll-word-l2r`` (Kauf & Ivanova 2023).
METRICS = ("pll-word-l2r", "pll")
#: The default (measured on the arms' models; docs/results.md "Floors").
DEFAULT_METRIC = "pll-word-l2r"
PRECISIONS = ("fp32", "bf16")


def resolve_precision(precision: str, device: str) -> str:
    """``"fp32"`` or ``"bf16"`` for the scorer's forward passes: ``auto`` is bf16 on CUDA and on
    CPUs with native bf16 (the training loop's rule, :func:`lvsearch.device.cpu_has_native_bf16`),
    else fp32. Raises LvsearchError for another value."""
    if precision in PRECISIONS:
        return precision
    if precision != "auto":
        raise LvsearchError(f"unknown BLiMP precision {precision!r}", fix="use auto, fp32 or bf16")
    from lvsearch.device import cpu_has_native_bf16

    return "bf16" if str(device).startswith("cuda") or (str(device) == "cpu" and cpu_has_native_bf16()) else "fp32"


class PLLScorer:
    """Pseudo-log-likelihood of sentences under a masked LM.

    ``metric="pll"`` (Salazar et al. 2020, §2): copy ``t`` masks token ``t`` only.
    ``metric="pll-word-l2r"`` (Kauf & Ivanova 2023, ACL, "A Better Way to Do Masked Language
    Model Scoring", §3 eq. 3, PLL-word-l2r): copy ``t`` masks token ``t`` and the tokens of the
    same word to its right (``t' > t`` with ``word(t') = word(t)``, words as the tokenizer's
    pre-tokenizer splits them: ``Encoding.word_ids``), so a multi-piece word is not scored from
    its own later pieces. In both, ``log P(w_t)`` is read at position ``t`` only.

    Args:
        model: an :class:`~lvsearch.model.Encoder` (its MLM head is used) or an
            :class:`~lvsearch.eval.hf.HFScorer`; put in eval mode.
        tokenizer: ``tokenizers.Tokenizer`` adding ``[CLS] … [SEP]``.
        token_budget: maximum ``rows × padded length`` tokens per forward pass.
        device: torch device of ``model``.
        metric: one of :data:`METRICS`.
        precision: ``fp32``, ``bf16`` (torch autocast; log-softmax in fp32) or ``auto``
            (:func:`resolve_precision`).

    Raises:
        LvsearchError: an unknown metric or precision; (at scoring time) a sentence longer
            than the model's ``max_len``.
    """

    def __init__(self, model, tokenizer, *, token_budget: int = 8192, device: str = "cpu",
                 metric: str = DEFAULT_METRIC, precision: str = "fp32"):
        from lvsearch.data.tokenizer import SpecialIds

        if metric not in METRICS:
            raise LvsearchError(f"unknown BLiMP metric {metric!r}", fix=f"use one of {', '.join(METRICS)}")
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.ids = SpecialIds.of(tokenizer)
        self.token_budget = int(token_budget)
        self.device = device
        self.metric = metric
        self.precision = resolve_precision(precision, device)
        self.forward_passes = 0

    def encode(self, sentences: Sequence[str]) -> list[list[int]]:
        """Token ids of each sentence, ``[CLS] … [SEP]`` included (no truncation)."""
        return [e.ids for e in self.tokenizer.encode_batch(list(sentences))]

    def encode_words(self, sentences: Sequence[str]) -> tuple[list[list[int]], list[list[int]]]:
        """``(ids, words)``: :meth:`encode`'s ids and each token's word index (−1 for special tokens)."""
        enc = self.tokenizer.encode_batch(list(sentences))
        return [e.ids for e in enc], [[-1 if w is None else w for w in e.word_ids] for e in enc]

    def score_ids(self, encoded: Sequence[Sequence[int]], *, words: Sequence[Sequence[int]] | None = None,
                  progress: Callable[[int], None] | None = None) -> list[float]:
        """Score (natural log, float64 sum) of each id sequence ``[CLS] w_1..w_n [SEP]``.

        Positions 1..n (everything between the first and last token) are scored, one masked
        copy each; the copies of all sentences are batched together (sorted by length, padded
        with ``[PAD]`` and an attention mask), and the MLM head runs only at the scored
        position of each row. A sequence with no inner token scores 0.0. ``words`` (word index
        per token, as :meth:`encode_words`) is needed for ``pll-word-l2r``; without it every
        token is its own word (= PLL). ``progress(k)`` is called with the number of sequences
        finished after each forward pass.
        """
        import contextlib

        import torch

        max_len = self.model.dims.max_len
        for seq in encoded:
            if len(seq) > max_len:
                raise LvsearchError(f"a sentence has {len(seq)} tokens, more than the model's max_len {max_len}",
                                    fix="shorten the sentence or use a model with a larger max_len")
        n_sent = len(encoded)
        if n_sent == 0:
            return []
        lens = torch.tensor([len(s) for s in encoded], dtype=torch.long)
        scores = torch.zeros(n_sent, dtype=torch.float64)
        order = torch.tensor(sorted(range(n_sent), key=lambda i: (len(encoded[i]), i)), dtype=torch.long)
        width = int(lens.max())
        all_ids = torch.full((n_sent, width), self.ids.pad, dtype=torch.long)
        word_of = torch.full((n_sent, width), -1, dtype=torch.long)
        for i, seq in enumerate(encoded):
            all_ids[i, : len(seq)] = torch.as_tensor(seq, dtype=torch.long)
            if words is not None and self.metric == "pll-word-l2r":
                word_of[i, : len(seq)] = torch.as_tensor(words[i], dtype=torch.long)
        l2r = words is not None and self.metric == "pll-word-l2r"
        # Flat list of (sentence, masked position) items, sentences in ascending length, so the
        # padded length of a chunk is the length of its last item's sentence.
        n_inner = (lens[order] - 2).clamp(min=0)
        item_sent = torch.repeat_interleave(order, n_inner)
        starts = torch.cumsum(n_inner, 0) - n_inner
        item_pos = torch.arange(len(item_sent)) - torch.repeat_interleave(starts, n_inner) + 1
        item_len = lens[item_sent].tolist()
        cum_end = torch.cumsum(n_inner, 0).tolist()  # items done when each sorted sentence is complete
        rows_all = torch.arange(len(item_sent))
        mask_id = self.ids.mask
        autocast = (torch.autocast(device_type=torch.device(self.device).type, dtype=torch.bfloat16)
                    if self.precision == "bf16" else contextlib.nullcontext())
        start = 0
        with torch.inference_mode(), autocast:
            while start < len(item_len):
                # Grow the chunk while rows × (its padded length) fits the token budget.
                end = start + 1
                while end < len(item_len) and (end + 1 - start) * item_len[end] <= self.token_budget:
                    end += 1
                L = item_len[end - 1]
                sent, pos = item_sent[start:end], item_pos[start:end]
                rows = rows_all[: end - start]
                ids = all_ids[sent, :L].clone()  # (R, L)
                attn = torch.arange(L)[None, :] < lens[sent][:, None]  # (R, L) bool
                targets = ids[rows, pos]
                if l2r:  # the rest of the current word, to the right of t
                    w = word_of[sent, :L]
                    wt = w[rows, pos][:, None]
                    ids[(w == wt) & (wt >= 0) & (torch.arange(L)[None, :] > pos[:, None])] = mask_id
                ids[rows, pos] = mask_id
                hidden = self.model(ids.to(self.device), attn.to(self.device))  # (R, L, H)
                at_mask = hidden[rows.to(self.device), pos.to(self.device)]  # (R, H)
                logp = torch.log_softmax(self.model.mlm_logits(at_mask).float(), dim=-1)  # (R, V)
                tok_lp = logp.gather(1, targets.to(self.device)[:, None])[:, 0].double().cpu()
                scores.index_add_(0, sent, tok_lp)
                self.forward_passes += 1
                if progress is not None:
                    progress(bisect.bisect_right(cum_end, end))
                start = end
        return scores.tolist()

    def score(self, sentences: Sequence[str]) -> list[float]:
        """Score of each sentence under :attr:`metric` (see :meth:`score_ids`)."""
        ids, words = self.encode_words(sentences)
        return self.score_ids(ids, words=words)


def evaluate_blimp(
    scorer: PLLScorer,
    paradigms: Sequence[Paradigm],
    *,
    progress: Callable[[int, int], None] | None = None,
) -> dict:
    """Score every pair of ``paradigms`` and aggregate.

    Each distinct sentence is scored once. ``progress(done, total)`` counts distinct sentences.

    Returns:
        JSON-ready dict: ``paradigms`` (per UID: term, field, pairs, correct, ties, accuracy,
        ``per_pair_correct`` — one ``"1"``/``"0"`` per pair in file order, for paired tests),
        ``phenomena`` (per linguistics_term: mean accuracy over its paradigms, pairs, correct,
        ties, paradigms), ``mean_over_paradigms``, ``mean_over_pairs``, ``pairs``, ``ties``,
        ``sentences`` (distinct), ``tokens_scored`` (masked positions), ``seconds`` and
        ``sentences_per_second``.
    """
    unique: dict[str, int] = {}
    for p in paradigms:
        for g, b in p.pairs:
            unique.setdefault(g, len(unique))
            unique.setdefault(b, len(unique))
    sentences = list(unique)
    t0 = time.perf_counter()
    total = len(sentences)
    on = (lambda k: progress(k, total)) if progress else None
    if hasattr(scorer, "encode_words"):
        encoded, words = scorer.encode_words(sentences)
        scores = scorer.score_ids(encoded, words=words, progress=on)
    else:  # a scorer without word boundaries (e.g. a test double)
        encoded = scorer.encode(sentences)
        scores = scorer.score_ids(encoded, progress=on)
    seconds = time.perf_counter() - t0
    out = aggregate_blimp(paradigms, {s: scores[i] for s, i in unique.items()})
    return {
        **out,
        "metric": getattr(scorer, "metric", None),
        "precision": getattr(scorer, "precision", None),
        "sentences": total,
        "tokens_scored": sum(max(len(e) - 2, 0) for e in encoded),
        "seconds": seconds,
        "sentences_per_second": total / seconds if seconds > 0 else None,
    }


def aggregate_blimp(paradigms: Sequence[Paradigm], score: dict[str, float]) -> dict:
    """Per-pair decisions and aggregates from one score per sentence (any scorer: PLL, an
    n-gram LM). A pair is right when ``score[good] > score[bad]`` strictly; ties count as wrong.

    Returns:
        ``paradigms`` (per UID: term, field, pairs, correct, ties, accuracy, ``per_pair_correct``),
        ``phenomena``, ``mean_over_paradigms``, ``mean_over_pairs``, ``pairs``, ``ties`` (see
        :func:`evaluate_blimp`).

    Raises:
        KeyError: a sentence of ``paradigms`` has no score.
    """
    per_paradigm = {}
    by_term: dict[str, list[str]] = defaultdict(list)
    for p in paradigms:
        correct = ties = 0
        outcome = []
        for g, b in p.pairs:
            sg, sb = score[g], score[b]
            correct += sg > sb
            ties += sg == sb
            outcome.append("1" if sg > sb else "0")
        n = len(p.pairs)
        per_paradigm[p.uid] = {
            "linguistics_term": p.linguistics_term, "field": p.field, "pairs": n,
            "correct": int(correct), "ties": int(ties), "accuracy": correct / n,
            "per_pair_correct": "".join(outcome),
        }
        by_term[p.linguistics_term].append(p.uid)
    phenomena = {}
    for term, uids in sorted(by_term.items()):
        rows = [per_paradigm[u] for u in uids]
        phenomena[term] = {
            "accuracy": sum(r["accuracy"] for r in rows) / len(rows),
            "paradigms": len(rows),
            "pairs": sum(r["pairs"] for r in rows),
            "correct": sum(r["correct"] for r in rows),
            "ties": sum(r["ties"] for r in rows),
        }
    n_pairs = sum(r["pairs"] for r in per_paradigm.values())
    return {
        "paradigms": per_paradigm,
        "phenomena": phenomena,
        "mean_over_paradigms": sum(r["accuracy"] for r in per_paradigm.values()) / len(per_paradigm),
        "mean_over_pairs": sum(r["correct"] for r in per_paradigm.values()) / n_pairs,
        "pairs": n_pairs,
        "ties": sum(r["ties"] for r in per_paradigm.values()),
    }


__all__ = ["DEFAULT_METRIC", "METRICS", "PRECISIONS", "Paradigm", "PLLScorer", "resolve_precision", "read_blimp", "evaluate_blimp", "aggregate_blimp"]
