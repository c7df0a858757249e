"""Which second stage re-ranks architectures truthfully? Measured on the landscape set.

Every architecture of ``benchmarks/results/landscape.json`` (bert's parameter band of the
quickstart space; standalone 2000-step MLM accuracy as the truth, the mean over its seeds) is
scored by each candidate second stage of ``lvsearch evolve --second-stage``
(:mod:`lvsearch.search.second_stage`), with the same code the search runs:

* ``search``: the search's own fitness (inherited weights, the fixed dev set of
  ``--dev-sequences``, 1024 = evolve's default) — the first stage, the reference;
* ``rescore``: inherited weights on the dev sequences the search's fitness does not use;
* ``finetune:S``: inherited weights trained on for ``S`` steps (the supernet's recipe
  shortened), then scored on those fresh sequences.

For each it reports Kendall τ (with a paired-bootstrap 95% interval), Spearman ρ and top-5
precision against the standalone accuracy, once ranking by ``− loss`` (evolve's default fitness)
and once by accuracy, and the seconds per candidate (the compute a search pays for each of its
top-k). Only architectures with a finished standalone run enter the statistics; the scores of
the others are kept for a later ``--report``. Finetune runs are kept under ``--work`` (a re-run
trains only what is missing).

Usage::

    python benchmarks/second_stage.py --supernet SN --data CORPUS --work W [--steps 100 300] [--report]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from _common import RESULTS, machine, write_result

NAME = "second_stage"


def score_all(args, keys: list[str]) -> dict:
    """``{variant: {"rows": {key: {accuracy, loss}}, "seconds_per_candidate"}}`` for every variant."""
    import torch

    from lvsearch.arch import Arch
    from lvsearch.search.evaluator import SupernetEvaluator
    from lvsearch.train.supernet import load_dev
    from lvsearch.search.second_stage import SecondStage, rerank
    from lvsearch.train.distributed import init_distributed
    from lvsearch.train.supernet import load_supernet

    torch.set_num_threads(args.threads)
    info = init_distributed("cpu")
    loaded = load_supernet(args.supernet, device=info.device)
    dev, prepared = load_dev(loaded, args.data, args.dev_sequences)
    archs = [Arch.from_key(k) for k in keys]
    cache = args.work / "scores.json"
    done = json.loads(cache.read_text()) if cache.is_file() else {}
    if done.get("supernet_step") != loaded.step or done.get("dev_sequences") != len(dev):
        done = {"supernet_step": loaded.step, "dev_sequences": len(dev), "variants": {}}
    variants = done["variants"]

    def keep(name: str, rows: dict, seconds: float, extra: dict) -> None:
        variants[name] = {"rows": rows, "seconds_per_candidate": seconds / len(keys), **extra}
        cache.write_text(json.dumps(done, indent=1))

    if "search" not in variants or set(variants["search"]["rows"]) != set(keys):
        t0 = time.perf_counter()
        ev = SupernetEvaluator(loaded.supernet, dev, seq_len=loaded.config.train.seq_len, fitness="loss")
        rows = {r.key: {"accuracy": r.accuracy, "loss": r.loss} for r in ev.evaluate_many(archs)}
        keep("search", rows, time.perf_counter() - t0, {"targets": next(iter(ev.memo.values())).targets})
    stages = [("rescore", SecondStage("rescore"))] + [(f"finetune:{s}", SecondStage("finetune", steps=s)) for s in args.steps]
    for name, stage in stages:
        if name in variants and set(variants[name]["rows"]) == set(keys):
            continue
        print(f"{name}: {len(keys)} architectures …", flush=True)
        t0 = time.perf_counter()
        res = rerank(loaded, archs, stage, search_dev_sequences=len(dev), prepared=prepared, fitness="loss",
                     out=args.work / name.replace(":", "-"), info=info)
        rows = {r["key"]: {"accuracy": r["accuracy"], "loss": r["loss"]} for r in res["rows"]}
        keep(name, rows, time.perf_counter() - t0, {"targets": res["targets"], "dev_sequences": res["dev_sequences"]})
    return done


def statistics(scores: dict, truth: dict[str, float]) -> dict:
    from lvsearch.search.rank_stats import rank_quality

    keys = sorted(truth)
    ys = [truth[k] for k in keys]
    out = {}
    for name, v in scores["variants"].items():
        rows = v["rows"]
        ent = {"seconds_per_candidate": v["seconds_per_candidate"], "targets": v.get("targets")}
        for metric, f in (("loss", lambda r: -r["loss"]), ("accuracy", lambda r: r["accuracy"])):
            ent[metric] = rank_quality([f(rows[k]) for k in keys], ys)
        out[name] = ent
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--supernet", type=Path, required=True, help="the landscape's quickstart supernet")
    p.add_argument("--data", type=Path, required=True, help="its prepared corpus")
    p.add_argument("--work", type=Path, required=True, help="folder for scores and finetune runs (resumable)")
    p.add_argument("--steps", type=int, nargs="*", default=[100], help="finetune steps to measure")
    p.add_argument("--dev-sequences", type=int, default=1024, help="the search's fitness dev set (evolve's default)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--report", action="store_true", help="only aggregate the scores already in --work")
    args = p.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    land = json.loads((RESULTS / "landscape.json").read_text())
    keys = [a["key"] for a in land["plan"]["archs"]]
    if args.report:
        scores = json.loads((args.work / "scores.json").read_text())
    else:
        scores = score_all(args, keys)
    truth = {r["key"]: r["accuracy_mean"] for r in land["archs"] if r.get("accuracy_mean") is not None}
    truth = {k: v for k, v in truth.items() if all(k in v2["rows"] for v2 in scores["variants"].values())}
    result = {
        "what": "τ / ρ / top-5 precision of each second-stage candidate against standalone 2000-step MLM accuracy "
                "(mean over seeds) on the landscape set; seconds per candidate on this machine",
        "machine": machine(), "threads": args.threads, "supernet_step": scores["supernet_step"],
        "search_dev_sequences": scores["dev_sequences"], "num_archs": len(truth),
        "variants": statistics(scores, truth) if len(truth) >= 3 else {},
        "scores": scores["variants"],
    }
    path = write_result(NAME, result)
    print(f"wrote {path} ({len(truth)} architectures with standalone results)")
    for name, v in result["variants"].items():
        print(f"{name:>14}: τ(−loss) {v['loss']['kendall_tau']:+.3f} {v['loss']['kendall_tau_ci95']}, top-5 "
              f"{v['loss']['top5_precision']}, τ(acc) {v['accuracy']['kendall_tau']:+.3f}; "
              f"{v['seconds_per_candidate']:.1f} s/candidate")


if __name__ == "__main__":
    main()
