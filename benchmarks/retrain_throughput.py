"""Retrain throughput: ``lvbert-paper`` vs ``bert`` at LV-BERT-small size, CPU.

Both architectures are built exactly as ``lvsearch retrain`` builds them (24 slots, hidden 256,
embedding 128, FF 1024, 4 heads, DC kernel 9; ELECTRA with a 1/4-width generator sharing the
embeddings, and MLM), fed the same real masked batches of the shared corpus (batch 16 × seq
128), and timed step by step (forward, backward, AdamW) interleaved in one process. Reports the
median step time, tokens/s and the ratio lvbert-paper / bert for each objective.

Usage: python benchmarks/retrain_throughput.py [--steps 8] [--batch 16] [--data DIR]
Writes benchmarks/results/retrain_throughput.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time

from _common import machine, prepared_data, write_result

import torch  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--data", help="a prepared dataset (default: prepare the shared corpus into a temp folder)")
    args = ap.parse_args()

    from lvsearch.arch import reference_arch
    from lvsearch.config import RetrainConfig, load_config
    from lvsearch.data.shards import PreparedData
    from lvsearch.space import SearchSpace
    from lvsearch.train.distributed import DistInfo
    from lvsearch.train.objectives import MaskedBatches
    from lvsearch.train.retrain import build_module

    with tempfile.TemporaryDirectory() as tmp:
        data_dir = prepared_data(args.data, tmp)
        data = PreparedData.open(data_dir)
        space = SearchSpace.load("lvbert")
        archs = {name: reference_arch(name, space) for name in ("bert", "lvbert-paper")}
        result = {"benchmark": "retrain_throughput", "batch": args.batch, "seq": 128, "objectives": {}}
        info = DistInfo(0, 1, 0, torch.device("cpu"))
        for objective in ("electra", "mlm"):
            cfg, _ = load_config(RetrainConfig, "retrain-small", [f"objective={objective}", f"train.batch_size={args.batch}"])
            dims = cfg.model_settings().dims(data.vocab_size, data.special_ids.pad, 128)
            batches = MaskedBatches(data, cfg.train, cfg.masking, info)
            modules = {n: build_module(cfg, a, dims).train() for n, a in archs.items()}
            opts = {n: torch.optim.AdamW(m.parameters(), lr=1e-4) for n, m in modules.items()}
            times: dict[str, list[float]] = {n: [] for n in archs}
            for step in range(args.steps + 2):
                (micro,), labels = batches(step)
                n_masked = float((labels != -100).sum())
                for name, module in modules.items():
                    kwargs = dict(micro)
                    if objective == "electra":
                        kwargs.update(gen_norm=n_masked, disc_norm=float(labels.numel()))
                        norm = 1.0
                    else:
                        del kwargs["original_ids"]
                        norm = n_masked
                    t0 = time.perf_counter()
                    (module(**kwargs)["loss_sum"] / norm).backward()
                    opts[name].step()
                    opts[name].zero_grad(set_to_none=True)
                    if step >= 2:
                        times[name].append(time.perf_counter() - t0)
            med = {n: statistics.median(v) for n, v in times.items()}
            tokens = args.batch * 128
            result["objectives"][objective] = {
                "median_step_s": med,
                "tokens_per_s": {n: tokens / v for n, v in med.items()},
                "ratio_lvbert_paper_over_bert": med["bert"] / med["lvbert-paper"],
                "params": {n: (m.discriminator if objective == "electra" else m.encoder).num_params() for n, m in modules.items()},
                "step_times_s": times,
            }
        result["machine"] = machine()
    path = write_result("retrain_throughput", result)
    print(json.dumps({o: {k: v for k, v in r.items() if k != "step_times_s"} for o, r in result["objectives"].items()}, indent=2))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
