"""Why a run differs with 1 and 2 torch threads (docs/results.md, "Reliability", item 10),
measured at two levels.

1. Ops: each op lvsearch's training step uses, computed with 1 and with 2 intra-op threads on
   the same inputs; ``equal`` means bitwise equal. The ones that differ are the cause.
2. Runs: the same ``lvsearch retrain`` (quickstart recipe, ``--steps``, bert and random:1) in
   subprocesses with ``OMP_NUM_THREADS=1`` and ``=2``, twice each: same thread count must give
   byte-identical weights; the 1-vs-2 gap (max |Δweight|, dev MLM accuracy and loss) is the
   tolerance to expect across thread counts.

Writes ``benchmarks/results/thread_reproducibility.json``. Usage::

    python benchmarks/thread_reproducibility.py [--steps 200] [--data PREPARED]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import REPO, machine, shared_data_dir, write_result


def op_table() -> dict[str, dict]:
    import torch

    torch.manual_seed(0)
    a, b = torch.randn(512, 128), torch.randn(128, 4096)
    x = torch.randn(64, 64, 128)
    ln = torch.nn.LayerNorm(128)
    idx = torch.randint(0, 4096, (64, 64))
    w0 = torch.randn(128, 128)

    def ops() -> dict:
        out = {"matmul": a @ b, "sum (all elements)": b.sum(), "sum over dim 0": b.sum(0),
               "softmax": torch.softmax(b, -1), "layernorm forward": ln(x)}
        xx = x.clone().requires_grad_()
        ln(xx).pow(2).sum().backward()
        out["layernorm weight gradient"] = ln.weight.grad.clone()
        out["layernorm input gradient"] = xx.grad.clone()
        ln.weight.grad = None
        ln.bias.grad = None
        emb = torch.nn.Embedding(4096, 128)
        with torch.no_grad():
            emb.weight.copy_(torch.arange(4096 * 128, dtype=torch.float32).reshape(4096, 128) / 1e5)
        emb(idx).pow(2).sum().backward()
        out["embedding gradient"] = emb.weight.grad.clone()
        w = w0.clone().requires_grad_()
        (x @ w).sum().backward()
        out["matmul weight gradient"] = w.grad.clone()
        out["cross-entropy (mean)"] = torch.nn.functional.cross_entropy(a @ b, idx.flatten()[:512] % 4096)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out["bf16 autocast matmul"] = (a @ b).float()
        return out

    old = torch.get_num_threads()
    res = {}
    for t in (1, 2):
        torch.set_num_threads(t)
        res[t] = ops()
    torch.set_num_threads(old)
    table = {}
    for k in res[1]:
        d = float((res[1][k].detach().double() - res[2][k].detach().double()).abs().max())
        table[k] = {"equal": bool(torch.equal(res[1][k].detach(), res[2][k].detach())), "max_abs_diff": d}
    return table


def run_retrain(arch: str, threads: int, data: Path, out: Path, steps: int) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "LVSEARCH_QUIET": "1", "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "lvsearch", "retrain", "--arch", arch, "--config", "retrain-quickstart",
           "--data", str(data), "--out", str(out), "--set", f"train.steps={steps}", "--set", "objective=mlm"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(proc.stderr[-3000:])
    summary = json.loads((out / "summary.json").read_text())
    weights = out / "model" / "model.safetensors"
    return {"threads": threads, "weights_sha256": hashlib.sha256(weights.read_bytes()).hexdigest(),
            "dev_mlm_accuracy": summary["final_eval"]["dev_mlm"]["accuracy"],
            "dev_mlm_loss": summary["final_eval"]["dev_mlm"]["loss"], "precision": summary.get("precision"),
            "weights": str(weights)}


def max_weight_diff(a: str, b: str) -> float:
    from safetensors.torch import load_file

    ta, tb = load_file(a), load_file(b)
    return max(float((ta[k].double() - tb[k].double()).abs().max()) for k in ta)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--data", default=None, help="prepared dataset (default: prepare the shared corpus in a temp dir)")
    args = ap.parse_args()
    result = {"machine": machine(), "ops_1_vs_2_threads": op_table(), "steps": args.steps, "runs": {}}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        data = Path(args.data) if args.data else tmp / "corpus"
        if not args.data:
            subprocess.run([sys.executable, "-m", "lvsearch", "data", "prepare", "--input",
                            str(shared_data_dir() / "corpora"), "--out", str(data), "--vocab-size", "4096"],
                           check=True, capture_output=True, env={**os.environ, "PYTHONPATH": str(REPO)})
        for arch in ("bert", "random:1"):
            runs = [run_retrain(arch, t, data, tmp / f"{arch}-{t}-{rep}", args.steps)
                    for t in (1, 2) for rep in (0, 1)]
            r1a, r1b, r2a, r2b = runs
            result["runs"][arch] = {
                "same_threads_identical": {"1": r1a["weights_sha256"] == r1b["weights_sha256"],
                                           "2": r2a["weights_sha256"] == r2b["weights_sha256"]},
                "threads_1_vs_2_identical": r1a["weights_sha256"] == r2a["weights_sha256"],
                "max_abs_weight_diff_1_vs_2": max_weight_diff(r1a["weights"], r2a["weights"]),
                "dev_mlm_accuracy": {"1": r1a["dev_mlm_accuracy"], "2": r2a["dev_mlm_accuracy"]},
                "dev_mlm_loss": {"1": r1a["dev_mlm_loss"], "2": r2a["dev_mlm_loss"]},
                "precision": r1a["precision"],
            }
            print(arch, json.dumps(result["runs"][arch]), flush=True)
    for k, v in result["ops_1_vs_2_threads"].items():
        print(f"{k:28s} {'equal' if v['equal'] else 'DIFFERS'} {v['max_abs_diff']:.3g}")
    print(write_result("thread_reproducibility", result))


if __name__ == "__main__":
    main()
