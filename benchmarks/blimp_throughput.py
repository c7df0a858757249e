"""Benchmark: BLiMP pseudo-log-likelihood scoring throughput (sentences per second) on CPU.

Scores the first ``--limit`` pairs of every real BLiMP paradigm (distinct sentences, the way
``lvsearch evaluate`` does) with randomly initialised models (throughput does not depend on the
weights): ``tiny`` (4 slots ``sfsf``, hidden 64 — the test model) and ``lvbert-small`` (the
LV-BERT-small layer order, 24 slots, hidden 256, embedding 128, FF 1024, 4 heads, DC kernel 9).
The tokenizer is trained on the shared corpus' train split (WordPiece, 16384 pieces) unless
``--tokenizer`` is given. Each configuration runs for every ``--threads`` value; the load
average is recorded because the machine may be shared. Writes
``benchmarks/results/blimp_throughput.json``. Not a test.

Usage: ``python benchmarks/blimp_throughput.py [--limit 10] [--threads 1 2] [--token-budget 8192]``
"""

from __future__ import annotations

import argparse
import os
import time

from _common import machine, shared_data_dir, write_result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=int, default=10, help="pairs per paradigm (first N)")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--token-budget", type=int, default=8192)
    ap.add_argument("--tokenizer", help="tokenizer.json (default: train one on the shared corpus)")
    ap.add_argument("--models", nargs="+", default=["tiny", "lvbert-small"])
    args = ap.parse_args()

    import torch

    from lvsearch.arch import Arch, reference_arch
    from lvsearch.data.tokenizer import SpecialIds, load_tokenizer, train_wordpiece
    from lvsearch.eval.blimp import PLLScorer, evaluate_blimp, read_blimp
    from lvsearch.model import Encoder, ModelDims
    from lvsearch.space import SearchSpace

    data = shared_data_dir()
    if args.tokenizer:
        tok = load_tokenizer(args.tokenizer)
    else:
        def lines():
            for f in sorted((data / "corpora" / "train").glob("*.train")):
                yield from f.read_text(encoding="utf-8").splitlines()

        tok = train_wordpiece(lines(), vocab_size=16384)
    ids = SpecialIds.of(tok)
    V = tok.get_vocab_size()
    paradigms = read_blimp(data / "blimp", limit=args.limit)
    configs = {
        "tiny": (Arch("sfsf"), ModelDims(vocab_size=V, hidden=64, embedding=32, ff_inner=128, heads=2, conv_kernel=3,
                                         max_len=128, pad_id=ids.pad)),
        "lvbert-small": (reference_arch("lvbert-paper", SearchSpace.load("lvbert")), ModelDims(vocab_size=V, pad_id=ids.pad)),
    }
    runs = []
    for name in args.models:
        arch, dims = configs[name]
        torch.manual_seed(0)
        enc = Encoder(arch, dims).eval()
        for threads in args.threads:
            torch.set_num_threads(threads)
            load_before = os.getloadavg()
            scorer = PLLScorer(enc, tok, token_budget=args.token_budget)
            t0 = time.perf_counter()
            res = evaluate_blimp(scorer, paradigms)
            wall = time.perf_counter() - t0
            run = {
                "model": name, "arch": arch.compact, "dims": dims.to_dict(), "num_params": enc.num_params(),
                "threads": threads, "token_budget": args.token_budget, "sentences": res["sentences"],
                "masked_positions": res["tokens_scored"], "forward_passes": scorer.forward_passes, "seconds": wall,
                "sentences_per_second": res["sentences"] / wall, "masked_positions_per_second": res["tokens_scored"] / wall,
                "loadavg_before": load_before, "loadavg_after": os.getloadavg(),
            }
            runs.append(run)
            print(f"{name:13s} threads={threads}: {run['sentences_per_second']:8.1f} sentences/s "
                  f"({res['sentences']} sentences, {wall:.1f} s, load {load_before[0]:.1f})", flush=True)
    path = write_result("blimp_throughput", {
        "benchmark": "blimp_throughput", "limit_pairs_per_paradigm": args.limit, "vocab_size": V,
        "machine": machine(), "runs": runs,
    })
    print(f"written to {path}")


if __name__ == "__main__":
    main()
