"""Benchmark: memory of the elastic supernet (lvbert-elastic) against today's (lvbert-elc).

Target: a supernet over lvbert-elastic holds ≤ 1.5x the parameters of the
lvbert-elc supernet at the same model dims. Measured here:

* ``params``: every parameter of each supernet (``Supernet(space, dims).parameters()``), and
  the slot layers alone (the part the elastic space changes; embeddings and MLM head are shared);
* ``peak_rss_mib``: peak resident memory (VmHWM) of a fresh process that builds the supernet
  and runs ``--steps`` AdamW training steps of single-path MLM on random tokens (batch
  ``--batch`` x ``--seq-len``), each step a path drawn by the run's sampler (uniform; the elastic
  space also draws heads, FF width and DC kernel); ``import_rss_mib`` is the same process's
  baseline with torch imported and nothing built.

Model dims: LV-BERT-small (``ModelDims`` defaults: hidden 256, embedding 128, ff_inner 1024,
4 heads, kernel 9) with a ``--vocab`` vocabulary. Writes
``benchmarks/results/elastic_memory.json``. Not a test.

Usage: ``python benchmarks/elastic_memory.py [--steps 5] [--batch 8] [--seq-len 128] [--vocab 16384]``
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from _common import REPO, REPORT_PEAK_RSS, machine, parse_peak_rss, write_result

SPACES = ("lvbert-elc", "lvbert-elastic")
TARGET = 1.5


def child(space_name: str, steps: int, batch: int, seq_len: int, vocab: int) -> dict:
    """Build the supernet over ``space_name`` and train ``steps`` steps; returns its counts."""
    import torch

    from lvsearch.config import SamplingConfig
    from lvsearch.model import ModelDims, Supernet
    from lvsearch.space import SearchSpace
    from lvsearch.train.supernet import ArchSampler

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    rss0 = _rss_mib()
    space = SearchSpace.load(space_name)
    dims = ModelDims(vocab_size=vocab)
    torch.manual_seed(0)
    net = Supernet(space, dims)
    total = sum(p.numel() for p in net.parameters())
    slots = sum(p.numel() for p in net.slots.parameters())
    opt = torch.optim.AdamW(net.parameters(), lr=1e-4)
    sampler = ArchSampler(space, SamplingConfig(strategy="uniform"), seed=0)
    ids = torch.randint(5, vocab, (batch, seq_len))
    labels = torch.randint(5, vocab, (batch, seq_len))
    t0 = time.perf_counter()
    for step in range(steps):
        arch = sampler(step)
        hidden = net(ids, arch)
        loss = torch.nn.functional.cross_entropy(net.mlm_logits(hidden).flatten(0, 1), labels.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return {"params": total, "slot_params": slots, "import_rss_mib": rss0,
            "seconds_per_step": (time.perf_counter() - t0) / max(steps, 1)}


def _rss_mib() -> float:
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--vocab", type=int, default=16384)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.steps, args.batch, args.seq_len, args.vocab)))
        return
    rows = {}
    for name in SPACES:
        argv = [__file__, "--child", name, "--steps", str(args.steps), "--batch", str(args.batch),
                "--seq-len", str(args.seq_len), "--vocab", str(args.vocab)]
        code = (REPORT_PEAK_RSS + f"import sys\nsys.argv = {argv!r}\n"
                f"sys.path.insert(0, {str(REPO / 'benchmarks')!r})\nimport elastic_memory\nelastic_memory.main()\n")
        env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "PYTHONPATH": str(REPO)}
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
        rows[name] = {**json.loads(proc.stdout.strip().splitlines()[-1]), "peak_rss_mib": parse_peak_rss(proc.stderr)}
        print(name, rows[name], flush=True)
    base, elastic = rows["lvbert-elc"], rows["lvbert-elastic"]
    ratio = elastic["params"] / base["params"]
    result = {
        "what": "supernet memory, lvbert-elastic vs lvbert-elc (target: params ratio <= 1.5)",
        "dims": {"vocab_size": args.vocab, "hidden": 256, "embedding": 128, "ff_inner": 1024, "heads": 4,
                 "conv_kernel": 9},
        "train": {"steps": args.steps, "batch": args.batch, "seq_len": args.seq_len, "optimizer": "AdamW",
                  "threads": args.threads},
        "spaces": rows,
        "params_ratio": ratio,
        "slot_params_ratio": elastic["slot_params"] / base["slot_params"],
        "peak_rss_ratio": elastic["peak_rss_mib"] / base["peak_rss_mib"],
        "peak_rss_above_import_ratio": (elastic["peak_rss_mib"] - elastic["import_rss_mib"])
        / (base["peak_rss_mib"] - base["import_rss_mib"]),
        "target": TARGET,
        "meets_target": ratio <= TARGET,
        "why": "FF is held at its largest width (2x ff_inner: twice today's FF weights), DC at kernel 15 plus a 9x9 "
               "and a 3x3 kernel transform; SA at 4 heads is today's layer; embeddings and the MLM head are shared",
        "machine": machine(),
    }
    print(json.dumps({k: result[k] for k in ("params_ratio", "slot_params_ratio", "peak_rss_ratio", "meets_target")}))
    write_result("elastic_memory", result)


if __name__ == "__main__":
    main()
