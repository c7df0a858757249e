"""Supernet training throughput and memory, on real token batches, CPU.

Throughput — tokens/s of full training steps (forward, backward, AdamW), LV-BERT-small shape
(hidden 256, embedding 128, FF 1024, 4 heads, DC kernel 9, 24 slots, vocab 16384 from the
shared corpus), batch 32 × seq 128, 15% MLM masking, fp32, interleaved in one process:
  * lvsearch supernet, a freshly sampled single path per step (uniform over SA/FF/DC);
  * lvsearch supernet on the ``bert`` path (s,f × 12: the same layers as BERT-12, like for like);
  * peer: HF ``transformers`` ``BertForMaskedLM`` (hidden 256, 12 layers, 4 heads,
    intermediate 1024, same vocabulary, sdpa attention), labels −100 off the masked positions.
Reported: median step time, tokens/s and the ratio lvsearch / HF.

Memory — peak RSS (VmHWM) of a training step, each in a fresh process (so the peak is that
configuration's alone): the supernet training the ``lvbert-paper`` path vs the standalone
``Encoder`` extracted for the same path, both with AdamW, batch 32 × 128. Reported as full
peaks and as peaks above a baseline process that loads torch, lvsearch and the data only.

Usage: python benchmarks/supernet_train.py [--steps 12] [--batch 32]
Writes benchmarks/results/supernet_train.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time

from _common import REPO, REPORT_PEAK_RSS, machine, parse_peak_rss, prepared_data, write_result

import torch  # noqa: E402

SMALL = dict(hidden=256, embedding=128, ff_inner=1024, heads=4, conv_kernel=9, dropout=0.1)


def batches(data_dir: str, batch: int, seq: int, n: int):
    from lvsearch.data.loader import BatchStream
    from lvsearch.data.masking import MaskingConfig, MLMMasker
    from lvsearch.data.shards import PreparedData

    data = PreparedData.open(data_dir)
    stream = BatchStream(data.sequences("train", seq), batch, seed=0)
    masker = MLMMasker(MaskingConfig(), data.vocab_size, data.special_ids)
    g = torch.Generator().manual_seed(0)
    return data, [masker(stream.batch(i), g) for i in range(n)]


def throughput(data_dir: str, steps: int, batch: int, seq: int) -> dict:
    import random

    from transformers import BertConfig, BertForMaskedLM

    from lvsearch.arch import reference_arch
    from lvsearch.model import ModelDims, Supernet
    from lvsearch.space import SearchSpace
    from lvsearch.train.objectives import SupernetMLM

    data, bs = batches(data_dir, batch, seq, steps + 2)
    space = SearchSpace.load("lvbert")
    dims = ModelDims(vocab_size=data.vocab_size, pad_id=data.special_ids.pad, **SMALL)
    torch.manual_seed(0)
    sn = SupernetMLM(Supernet(space, dims)).train()
    sn_opt = torch.optim.AdamW(sn.parameters(), lr=1e-4)
    hf_cfg = BertConfig(
        vocab_size=data.vocab_size, hidden_size=256, num_hidden_layers=12, num_attention_heads=4,
        intermediate_size=1024, max_position_embeddings=512, attn_implementation="sdpa",
    )
    hf = BertForMaskedLM(hf_cfg).train()
    hf_opt = torch.optim.AdamW(hf.parameters(), lr=1e-4)
    rng = random.Random(0)
    bert = reference_arch("bert", space)

    def step_sn(ids, labels, arch):
        out = sn(ids, labels, arch)
        (out["loss_sum"] / out["count"]).backward()
        sn_opt.step()
        sn_opt.zero_grad(set_to_none=True)

    def step_hf(ids, labels):
        hf(input_ids=ids, labels=labels).loss.backward()
        hf_opt.step()
        hf_opt.zero_grad(set_to_none=True)

    contenders = {
        "lvsearch_sampled_path": lambda ids, lab: step_sn(ids, lab, space.sample(rng)),
        "lvsearch_bert_path": lambda ids, lab: step_sn(ids, lab, bert),
        "hf_bert_for_masked_lm": step_hf,
    }
    times: dict[str, list[float]] = {k: [] for k in contenders}
    for i, (ids, labels) in enumerate(bs):
        for name, fn in contenders.items():  # interleaved: load drift hits all alike
            t0 = time.perf_counter()
            fn(ids, labels)
            if i >= 2:  # warm-up
                times[name].append(time.perf_counter() - t0)
    tokens = batch * seq
    med = {k: statistics.median(v) for k, v in times.items()}
    return {
        "median_step_s": med,
        "tokens_per_s": {k: tokens / v for k, v in med.items()},
        "ratio_sampled_path_over_hf": med["hf_bert_for_masked_lm"] / med["lvsearch_sampled_path"],
        "ratio_bert_path_over_hf": med["hf_bert_for_masked_lm"] / med["lvsearch_bert_path"],
        "params": {
            "hf_bert": sum(p.numel() for p in hf.parameters()),
            "lvsearch_bert_path": sn.net.num_params(bert),
            "supernet_total": sum(p.numel() for p in sn.parameters()),
        },
        "step_times_s": times,
    }


MEMORY_CHILD = r"""
import sys, json, torch
sys.path.insert(0, sys.argv[1] + "/benchmarks")
from supernet_train import batches, SMALL
from lvsearch.arch import reference_arch
from lvsearch.model import ModelDims, Supernet
from lvsearch.space import SearchSpace
from lvsearch.train.objectives import SupernetMLM, mlm_sums
mode, data_dir, batch = sys.argv[2], sys.argv[3], int(sys.argv[4])
data, bs = batches(data_dir, batch, 128, 3)
if mode != "baseline":
    space = SearchSpace.load("lvbert")
    dims = ModelDims(vocab_size=data.vocab_size, pad_id=data.special_ids.pad, **SMALL)
    arch = reference_arch("lvbert-paper", space)
    torch.manual_seed(0)
    sn = Supernet(space, dims)
    model = sn if mode == "supernet" else sn.extract(arch)
    del sn
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for ids, labels in bs:
        hidden = model(ids, arch) if mode == "supernet" else model(ids)
        out = mlm_sums(model, hidden, labels)
        (out["loss_sum"] / out["count"]).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
"""


def memory(data_dir: str, batch: int) -> dict:
    out = {}
    for mode in ("baseline", "supernet", "standalone"):
        proc = subprocess.run(
            [sys.executable, "-c", REPORT_PEAK_RSS + MEMORY_CHILD, str(REPO), mode, data_dir, str(batch)],
            capture_output=True, text=True, check=True,
        )
        out[mode] = parse_peak_rss(proc.stderr)
    base = out["baseline"]
    return {
        "peak_rss_mib": out,
        "ratio_supernet_over_standalone": out["supernet"] / out["standalone"],
        "ratio_above_baseline": (out["supernet"] - base) / (out["standalone"] - base) if out["standalone"] > base else None,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--data", help="a prepared dataset (default: prepare the shared corpus into a temp folder)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = prepared_data(args.data, tmp)
        result = {
            "benchmark": "supernet_train",
            "shape": {**SMALL, "slots": 24, "batch": args.batch, "seq": 128},
            "throughput": throughput(data_dir, args.steps, args.batch, 128),
            "memory": memory(data_dir, args.batch),
            "targets": {"throughput_ratio": 1.2, "memory_ratio": 1.25},
            "machine": machine(),
        }
    path = write_result("supernet_train", result)
    t, m = result["throughput"], result["memory"]
    print(json.dumps({"tokens_per_s": t["tokens_per_s"], "ratio_sampled_path_over_hf": t["ratio_sampled_path_over_hf"],
                      "ratio_bert_path_over_hf": t["ratio_bert_path_over_hf"], "memory": m}, indent=2))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
