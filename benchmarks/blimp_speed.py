"""Benchmark: BLiMP scoring time, today's code (main) against this tree's, same model and pairs.

Scores the first ``--limit`` pairs of every ``--every``-th paradigm with one model through its
model directory (native) and through its ``lvsearch export`` folder (``hf:``), one torch thread:

* ``old``: ``lvsearch/eval/blimp.py`` and ``lvsearch/eval/hf.py`` of git ``--base`` (default
  ``main``), loaded as separate modules: PLL, fp32, and on ``hf:`` the MLM head at every position;
* ``new``: this tree's scorer under each metric and precision (bf16 = ``precision: auto`` on a
  CPU with native bf16), the ``hf:`` head at the scored positions only.

Runs are interleaved (old, new, old, new, ...) ``--repeats`` times and the fastest of each is
kept, because the machine is shared; per-pair decisions of native and ``hf:`` are compared per
configuration. Writes ``benchmarks/results/blimp_speed.json``. Not a test.

Usage: ``python benchmarks/blimp_speed.py --model RUN/model --export EXPORT_DIR [--every 4 --limit 100]``
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import machine, shared_data_dir, write_result

REPO = Path(__file__).resolve().parents[1]


def _old_module(base: str, path: str, name: str):
    text = subprocess.run(["git", "-C", str(REPO), "show", f"{base}:{path}"], check=True, capture_output=True,
                          text=True).stdout
    f = Path(tempfile.mkdtemp()) / f"{name}.py"
    f.write_text(text)
    spec = importlib.util.spec_from_file_location(name, f)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--export", required=True, help="an 'lvsearch export' folder of --model")
    ap.add_argument("--base", default="main")
    ap.add_argument("--limit", type=int, default=100)
    ap.add_argument("--every", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()

    import torch

    torch.set_num_threads(1)
    from lvsearch.eval import blimp as new_blimp
    from lvsearch.eval import hf as new_hf
    from lvsearch.modeldir import load_model

    old_blimp = _old_module(args.base, "lvsearch/eval/blimp.py", "blimp_old")
    old_hf = _old_module(args.base, "lvsearch/eval/hf.py", "hf_old")
    paradigms = new_blimp.read_blimp(shared_data_dir() / "blimp", limit=args.limit)[::args.every]
    native = load_model(args.model, device="cpu")
    hf_new = new_hf.load_hf_model(f"hf:{args.export}")
    hf_old = old_hf.load_hf_model(f"hf:{args.export}")
    configs = {
        "old native (pll, fp32)": lambda: old_blimp.PLLScorer(native.encoder, native.tokenizer),
        "old hf (pll, fp32, all-position logits)": lambda: old_blimp.PLLScorer(hf_old.scorer, hf_old.tokenizer),
    }
    combos = [("pll", "fp32"), ("pll", "bf16"), ("pll-word-l2r", "bf16")]
    for metric, prec in combos:
        configs[f"new native ({metric}, {prec})"] = (lambda m=metric, p=prec: new_blimp.PLLScorer(
            native.encoder, native.tokenizer, metric=m, precision=p))
        configs[f"new hf ({metric}, {prec})"] = (lambda m=metric, p=prec: new_blimp.PLLScorer(
            hf_new.scorer, hf_new.tokenizer, metric=m, precision=p))
    runs: dict[str, dict] = {}
    for rep in range(args.repeats):
        for name, make in configs.items():
            mod = old_blimp if name.startswith("old") else new_blimp
            res = mod.evaluate_blimp(make(), paradigms)
            r = runs.setdefault(name, {"seconds": [], "mean_over_paradigms": res["mean_over_paradigms"],
                                       "decisions": "".join(p["per_pair_correct"] for p in res["paradigms"].values())})
            r["seconds"].append(res["seconds"])
            print(rep, name, f"{res['seconds']:.1f}s", f"{res['mean_over_paradigms']:.4f}", flush=True)
    base = min(runs["old native (pll, fp32)"]["seconds"])
    base_hf = min(runs["old hf (pll, fp32, all-position logits)"]["seconds"])
    table = {}
    for name, r in runs.items():
        best = min(r["seconds"])
        ref = base_hf if " hf " in f" {name} " else base
        table[name] = {"best_seconds": best, "seconds": r["seconds"], "speedup_vs_old_same_path": ref / best,
                       "mean_over_paradigms": r["mean_over_paradigms"]}
    agree = {}
    for metric, prec in combos:
        a, b = runs[f"new native ({metric}, {prec})"]["decisions"], runs[f"new hf ({metric}, {prec})"]["decisions"]
        agree[f"{metric}, {prec}"] = {"identical": a == b, "differing_pairs": sum(x != y for x, y in zip(a, b))}
    a, b = runs["old native (pll, fp32)"]["decisions"], runs["new native (pll, fp32)"]["decisions"]
    out = {"what": "BLiMP scoring time, main's code vs this tree's, same model and pairs (benchmarks/blimp_speed.py)",
           "machine": machine(),
           "settings": {"model": str(Path(args.model).resolve()), "export": str(Path(args.export).resolve()),
                        "base": args.base, "limit": args.limit, "every": args.every, "paradigms": len(paradigms),
                        "pairs": sum(len(p.pairs) for p in paradigms), "repeats": args.repeats, "threads": 1},
           "runs": table, "native_vs_hf_decisions": agree,
           "old_vs_new_pll_fp32_identical_decisions": a == b}
    print(write_result("blimp_speed", out))


if __name__ == "__main__":
    main()
