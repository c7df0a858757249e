"""Benchmark ``lvsearch data prepare`` on the whole shared corpus.

Measures, each in a fresh child process so peak RSS is that run's alone:
  * lvsearch: ``lvsearch data prepare --input ../shared/data/corpora`` (tokenizer training on the
    train split + tokenising both splits into shards + manifest with sha256 of every file);
  * peer: bare Hugging Face ``tokenizers`` doing the same core work on the same files
    (``BertWordPieceTokenizer.train`` on the train files, then ``encode_batch`` of every line),
    with none of lvsearch's checks, hashing, splitting or shard writing.
Reports wall time, peak memory and the ratio lvsearch / peer, and its targets
(< 90 s, < 2 GB on 2 cores). Writes benchmarks/results/data_prepare.json.

Usage: python benchmarks/data_prepare.py [--repeats 2]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time

from _common import REPORT_PEAK_RSS, machine, parse_peak_rss, shared_data_dir, write_result

PEER = r"""
import glob, sys, time
from tokenizers import BertWordPieceTokenizer
root = sys.argv[1]
train = sorted(glob.glob(root + "/train/*.train"))
files = train + sorted(glob.glob(root + "/dev/*.dev"))
tok = BertWordPieceTokenizer(lowercase=True)
tok.train(train, vocab_size=16384, min_frequency=2, show_progress=False,
          special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
n = 0
for f in files:
    lines = [l.strip() for l in open(f, encoding="utf-8") if l.strip()]
    n += sum(len(e.ids) for e in tok.encode_batch(lines, add_special_tokens=False))
print(n)
"""

LVSEARCH = r"""
import sys
from lvsearch.cli import main
sys.exit(main(sys.argv[1:]))
"""



def run_child(code: str, *argv: str) -> dict:
    """Run ``python -c code argv…`` in a fresh process; return wall seconds and its peak RSS (MiB)."""
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", REPORT_PEAK_RSS + code, *argv], capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"benchmark child failed:\n{proc.stderr}")
    return {"seconds": wall, "peak_rss_mib": parse_peak_rss(proc.stderr)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    corpora = shared_data_dir() / "corpora"
    runs = {"lvsearch": [], "peer_hf_tokenizers": []}
    for _ in range(args.repeats):  # interleaved, so drift in machine load hits both alike
        with tempfile.TemporaryDirectory() as tmp:
            runs["lvsearch"].append(run_child(LVSEARCH, "data", "prepare", "--input", str(corpora), "--out", f"{tmp}/out"))
            manifest = json.load(open(f"{tmp}/out/manifest.json"))
        runs["peer_hf_tokenizers"].append(run_child(PEER, str(corpora)))
    best = {k: min(r["seconds"] for r in v) for k, v in runs.items()}
    lv_peak = max(r["peak_rss_mib"] for r in runs["lvsearch"])
    result = {
        "benchmark": "data_prepare",
        "corpus": str(corpora),
        "train_words": manifest["splits"]["train"]["words"],
        "train_tokens": manifest["splits"]["train"]["tokens"],
        "dev_tokens": manifest["splits"]["dev"]["tokens"],
        "lvsearch_seconds_best": best["lvsearch"],
        "peer_seconds_best": best["peer_hf_tokenizers"],
        "ratio_lvsearch_over_peer": best["lvsearch"] / best["peer_hf_tokenizers"],
        "lvsearch_peak_rss_mib": lv_peak,
        "peer_peak_rss_mib": max(r["peak_rss_mib"] for r in runs["peer_hf_tokenizers"]),
        "targets": {"seconds": 90, "peak_rss_mib": 2048},
        "meets_targets": best["lvsearch"] < 90 and lv_peak < 2048,
        "runs": runs,
        "machine": machine(),
    }
    path = write_result("data_prepare", result)
    print(json.dumps({k: v for k, v in result.items() if k not in ("runs", "machine")}, indent=2))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
