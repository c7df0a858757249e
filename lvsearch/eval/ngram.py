"""Interpolated Kneser-Ney n-gram language model counted with numpy (the BLiMP floor's LM).

Definitions (Chen & Goodman 1999, "An empirical study of smoothing techniques for language
modeling", §3 eq. 17–18: interpolated Kneser-Ney with one absolute discount ``D``). For order
``N`` and a history ``h`` of ``k−1`` tokens (``h'`` = ``h`` without its first token):

    P_k(w | h) = max(c_k(h w) − D, 0) / C_k(h)  +  D · T_k(h) / C_k(h) · P_{k−1}(w | h')
                 when C_k(h) > 0, else P_{k−1}(w | h');
    P_0(w)     = 1 / V

* ``c_N`` are the raw (row-weighted) counts of the N-grams; for ``k < N``, ``c_k(g)`` is the
  continuation count of the k-gram ``g``: the number of distinct tokens ``x`` with ``x g`` seen
  as a (k+1)-gram (Kneser & Ney 1995).
* ``C_k(h) = Σ_w c_k(h w)`` and ``T_k(h) = |{w : c_k(h w) > 0}|``.
* A query with a history shorter than ``N − 1`` (the sentence start) uses the highest order
  its history allows.

Counting: n-grams lie inside a training row's body (columns ``1 … L−2`` of a packed
``[CLS] … [SEP]`` window: the window's own ``[CLS]`` and final ``[SEP]`` cut the text at an
arbitrary point, so they are not text); ``[SEP]`` tokens inside the body end documents and are
counted like words; ``[PAD]`` never is. Keys are base-``V`` int64 numbers of the n-gram's ids,
so ``V^N`` must be below ``2^63`` (``N ≤ 5`` at ``V = 4096``). Counting and scoring are numpy
``unique`` / ``searchsorted``: seconds for millions of tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from lvsearch.errors import LvsearchError

#: The absolute discount of the BLiMP floor (Chen & Goodman's usual single-D value).
DEFAULT_DISCOUNT = 0.75


def _keys(cols: list[np.ndarray], V: int) -> np.ndarray:
    k = np.zeros_like(cols[0])
    for c in cols:
        k = k * V + c
    return k


def _find(keys: np.ndarray, values: np.ndarray, query: np.ndarray) -> np.ndarray:
    """``values`` at ``query`` in sorted ``keys``; 0 where absent."""
    if keys.size == 0 or query.size == 0:
        return np.zeros(query.shape, dtype=values.dtype if values.size else np.float64)
    pos = np.clip(np.searchsorted(keys, query), 0, len(keys) - 1)
    return np.where(keys[pos] == query, values[pos], 0)


@dataclass
class _Level:
    """Tables of one order ``k``: counts of k-grams and totals of their (k−1)-token histories."""

    gram_keys: np.ndarray  # sorted int64 keys of k-grams with c_k > 0
    gram_counts: np.ndarray  # float64 c_k
    hist_keys: np.ndarray  # sorted keys of histories (k−1 tokens; [0] for k = 1)
    hist_total: np.ndarray  # float64 C_k(h)
    hist_types: np.ndarray  # float64 T_k(h)


@dataclass
class KneserNeyLM:
    """Interpolated Kneser-Ney LM of order ``order`` over ids ``[0, vocab_size)`` (module docstring).

    Build with :meth:`fit`; score with :meth:`log_prob` / :meth:`sentence_log_prob`.
    """

    order: int
    vocab_size: int
    discount: float
    tokens: int  # tokens counted (row-weighted)
    levels: list[_Level] = field(repr=False)

    @classmethod
    def fit(cls, rows: np.ndarray, vocab_size: int, *, order: int = 3, discount: float = DEFAULT_DISCOUNT,
            weights: np.ndarray | None = None, valid: np.ndarray | None = None) -> KneserNeyLM:
        """Count the n-grams of ``rows``.

        Args:
            rows: ``(n, L)`` integer ids; n-grams never cross rows.
            vocab_size: ``V``; ids must lie in ``[0, V)``.
            order: ``N ≥ 1``.
            discount: ``D`` in ``(0, 1)``.
            weights: optional ``(n,)`` non-negative integer multiplicity of each row (raw counts
                are weighted by it; continuation counts count distinct left tokens, so a
                repeated row adds none). None = every row once.
            valid: optional ``(n, L)`` bool: tokens that may be part of an n-gram (default all).

        Raises:
            LvsearchError: bad order/discount, ``V^N ≥ 2^63``, ids outside ``[0, V)``, bad
                weights, or nothing to count.
        """
        N, V, D = int(order), int(vocab_size), float(discount)
        if N < 1:
            raise LvsearchError(f"n-gram order must be ≥ 1, got {N}")
        if not 0 < D < 1:
            raise LvsearchError(f"Kneser-Ney discount must lie in (0, 1), got {D}")
        if N * math.log2(V) >= 63:
            raise LvsearchError(f"an order-{N} n-gram over {V} ids does not fit an int64 key", fix="use a lower order")
        x = np.asarray(rows, dtype=np.int64)
        if x.ndim != 2:
            raise LvsearchError(f"expected (n, L) rows, got shape {x.shape}")
        if x.size and (x.min() < 0 or x.max() >= V):
            raise LvsearchError(f"token ids outside [0, {V})", fix="pass the vocabulary size of the tokenizer that made the data")
        ok = np.ones(x.shape, dtype=bool) if valid is None else np.asarray(valid, dtype=bool)
        w = np.ones(x.shape[0], dtype=np.int64) if weights is None else np.asarray(weights, dtype=np.int64)
        if w.shape != (x.shape[0],) or (w.size and w.min() < 0):
            raise LvsearchError(f"row weights must be {x.shape[0]} non-negative integers, got shape {w.shape}")
        keep = w > 0
        x, ok, w = x[keep], ok[keep], w[keep]
        n, L = x.shape
        tokens = int((ok * w[:, None]).sum())
        if tokens == 0:
            raise LvsearchError("no token to count", fix="count over more training steps")

        def grams(k: int) -> tuple[np.ndarray, np.ndarray]:
            """Keys of all valid k-grams (k ≥ 1) and their row weights."""
            if L < k:
                return np.empty(0, np.int64), np.empty(0, np.int64)
            span = np.ones((n, L - k + 1), dtype=bool)
            for j in range(k):
                span &= ok[:, j:L - k + 1 + j]
            keys = _keys([x[:, j:L - k + 1 + j] for j in range(k)], V)
            return keys[span], np.broadcast_to(w[:, None], span.shape)[span]

        levels = []
        for k in range(1, N + 1):
            if k == N:
                g, gw = grams(k)
                gk, inv = np.unique(g, return_inverse=True)
                gc = np.bincount(inv.ravel(), weights=gw, minlength=len(gk)).astype(np.float64)
            else:  # continuation counts: distinct left tokens of each k-gram
                ext, _ = grams(k + 1)
                ext = np.unique(ext)
                gk, gc = np.unique(ext % V**k, return_counts=True)
                gc = gc.astype(np.float64)
            hist = gk // V if k > 1 else np.zeros_like(gk)
            hk, hinv = np.unique(hist, return_inverse=True)
            levels.append(_Level(gk, gc, hk, np.bincount(hinv, weights=gc, minlength=len(hk)),
                                 np.bincount(hinv, minlength=len(hk)).astype(np.float64)))
        return cls(N, V, D, tokens, levels)

    def log_prob(self, tokens: np.ndarray, history: np.ndarray) -> np.ndarray:
        """Natural-log ``P(tokens[i] | history[i])`` for a batch of queries.

        Args:
            tokens: ``(m,)`` ids.
            history: ``(m, N−1)`` ids, left-padded with −1 where the history is shorter (the
                sentence start); only the last ``N−1`` are used.

        Returns:
            float64 ``(m,)``.
        """
        N, V, D = self.order, self.vocab_size, self.discount
        w = np.asarray(tokens, dtype=np.int64)
        h = np.asarray(history, dtype=np.int64).reshape(len(w), -1)[:, -(N - 1):] if N > 1 else np.empty((len(w), 0), np.int64)
        p = np.full(len(w), 1.0 / V)
        for k in range(1, N + 1):
            lv = self.levels[k - 1]
            hk = h[:, N - k:] if k > 1 else np.empty((len(w), 0), np.int64)  # last k−1 history tokens
            usable = (hk >= 0).all(axis=1)
            hkey = _keys([hk[:, j] for j in range(k - 1)], V) if k > 1 else np.zeros(len(w), np.int64)
            gkey = hkey * V + w
            hkey, gkey = np.where(usable, hkey, -1), np.where(usable, gkey, -1)
            total = _find(lv.hist_keys, lv.hist_total, hkey)
            types = _find(lv.hist_keys, lv.hist_types, hkey)
            count = _find(lv.gram_keys, lv.gram_counts, gkey)
            seen = usable & (total > 0)
            safe = np.where(seen, total, 1.0)
            p = np.where(seen, (np.maximum(count - D, 0.0) + D * types * p) / safe, p)
        return np.log(p)

    def sentence_log_prob(self, sequences: list[list[int]]) -> np.ndarray:
        """``Σ_{t ≥ 1} log P(x_t | x_{<t})`` of each id sequence ``x_0 x_1 … x_n`` (``x_0`` is
        context only, e.g. the document-start token), as float64 ``(len(sequences),)``."""
        N = self.order
        toks, hists, owner = [], [], []
        for i, s in enumerate(sequences):
            s = list(s)
            for t in range(1, len(s)):
                ctx = s[max(0, t - (N - 1)):t]
                hists.append([-1] * (N - 1 - len(ctx)) + ctx)
                toks.append(s[t])
                owner.append(i)
        out = np.zeros(len(sequences))
        if toks:
            lp = self.log_prob(np.array(toks), np.array(hists, dtype=np.int64).reshape(len(toks), max(N - 1, 0)))
            np.add.at(out, np.array(owner), lp)
        return out


__all__ = ["DEFAULT_DISCOUNT", "KneserNeyLM"]
