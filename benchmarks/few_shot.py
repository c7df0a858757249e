"""Few-shot sub-supernets against the one-shot supernet at equal compute, on the landscape set.

From the landscape's one-shot supernet ``SN`` (the quickstart supernet), this trains, each
warm-started from ``SN``'s weights (:mod:`lvsearch.search.few_shot`):

* ``few-shot``: one sub-supernet per op of the space, split on the op of slot ``--slot``
  (``sampling.fix_slot/fix_op``), ``--steps`` S steps each (K·S in all);
* ``one-shot+``: the control, ``SN`` trained on uniformly for K·S steps (the same compute);

and scores every architecture of ``benchmarks/results/landscape.json`` with ``SN`` as it is, with
the control and with the few-shot split (each candidate by the sub-supernet of its op at the
slot), on the search's fitness dev set (1024 sequences), reporting Kendall τ (paired-bootstrap
95% interval) and top-5 precision against the standalone 2000-step MLM accuracy (mean over
seeds), ranking by − loss and by accuracy. Training goes through the CLI (``lvsearch
train-supernet --config RECIPE.yaml``), resumable: a re-run trains only what is missing.

Usage::

    python benchmarks/few_shot.py --supernet SN --data CORPUS --work W [--steps 300] [--slot 1]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from _common import RESULTS, machine, run_lvsearch, write_result


def train_part(args, name: str, slot: int | None, op: str | None, steps: int) -> Path:
    import yaml

    from lvsearch.train.supernet import sub_supernet_recipe

    out = args.work / name
    if (out / "summary.json").is_file():
        return out
    recipe = args.work / f"{name}.yaml"
    recipe.write_text(yaml.safe_dump(sub_supernet_recipe(args.supernet, steps=steps, slot=slot, op=op)), encoding="utf-8")
    resume = ["--resume"] if (out / "checkpoints").is_dir() else []
    run_lvsearch(["train-supernet", "--config", str(recipe), "--data", str(args.data), "--out", str(out), *resume],
                 args.work / "logs" / f"{name}.log", args.threads)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--supernet", type=Path, required=True)
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--work", type=Path, required=True)
    p.add_argument("--steps", type=int, default=300, help="steps per sub-supernet (the control gets K×)")
    p.add_argument("--slot", type=int, default=1)
    p.add_argument("--dev-sequences", type=int, default=1024)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)

    import torch
    from lvsearch.arch import Arch
    from lvsearch.search.evaluator import SupernetEvaluator
    from lvsearch.search.few_shot import FewShotSupernets
    from lvsearch.train.supernet import load_dev
    from lvsearch.search.rank_stats import paired_tau_difference, rank_quality
    from lvsearch.train.supernet import load_supernet

    torch.set_num_threads(args.threads)
    base = load_supernet(args.supernet)
    ops = list(base.space.ops)
    parts = [train_part(args, f"part-{op}", args.slot, op, args.steps) for op in ops]
    control = train_part(args, "one-shot-plus", None, None, args.steps * len(ops))
    land = json.loads((RESULTS / "landscape.json").read_text())
    truth = {r["key"]: r["accuracy_mean"] for r in land["archs"] if r.get("accuracy_mean") is not None}
    keys = sorted(truth)
    archs = [Arch.from_key(k) for k in keys]
    dev, _ = load_dev(base, args.data, args.dev_sequences)
    seq_len = base.config.train.seq_len
    scorers = {
        "one-shot": SupernetEvaluator(base.supernet, dev, seq_len=seq_len, fitness="loss"),
        "one-shot+": SupernetEvaluator(load_supernet(control).supernet, dev, seq_len=seq_len, fitness="loss"),
        "few-shot": FewShotSupernets.load(parts).evaluator(dev, seq_len=seq_len),
    }
    ys = [truth[k] for k in keys]
    variants = {}
    for name, ev in scorers.items():
        res = {r.key: r for r in ev.evaluate_many(archs)}
        ent = {"rows": {k: {"loss": res[k].loss, "accuracy": res[k].accuracy} for k in keys}}
        for metric, f in (("loss", lambda r: -r.loss), ("accuracy", lambda r: r.accuracy)):
            ent[metric] = rank_quality([f(res[k]) for k in keys], ys)
        variants[name] = ent
    # the rankers share the architectures and the truth: their τ difference gets a paired interval
    paired = {}
    for a, b in (("few-shot", "one-shot+"), ("few-shot", "one-shot"), ("one-shot+", "one-shot")):
        for metric, sign in (("loss", -1.0), ("accuracy", 1.0)):
            sa = [sign * variants[a]["rows"][k][metric] for k in keys]
            sb = [sign * variants[b]["rows"][k][metric] for k in keys]
            paired[f"{a} − {b}, {metric}"] = paired_tau_difference(sa, sb, ys)
    steps = {"one-shot": base.step, "one-shot+": base.step + args.steps * len(ops),
             "few-shot": f"{base.step} + {len(ops)} × {args.steps}"}
    result = {"what": "few-shot sub-supernets vs the one-shot supernet at equal extra compute, ranked against the "
                      "landscape's standalone accuracies", "machine": machine(), "slot": args.slot,
              "steps_per_part": args.steps, "supernet_steps": steps, "dev_sequences": len(dev),
              "num_archs": len(keys), "variants": variants, "paired_tau_differences": paired}
    path = write_result("few_shot", result)
    print(f"wrote {path} ({len(keys)} architectures)")
    for name, v in variants.items():
        print(f"{name:>10}: τ(−loss) {v['loss']['kendall_tau']:+.3f} {v['loss']['kendall_tau_ci95']}, top-5 "
              f"{v['loss']['top5_precision']}; τ(acc) {v['accuracy']['kendall_tau']:+.3f}, top-5 "
              f"{v['accuracy']['top5_precision']}")
    for name, d in paired.items():
        lo, hi = d["ci95"]
        ci = "no interval" if lo is None else f"[{lo:+.3f}, {hi:+.3f}]"
        print(f"τ({name}): {d['difference']:+.3f} {ci} paired over {d['n']}: {d['verdict']}")


if __name__ == "__main__":
    main()
