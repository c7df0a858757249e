"""Kendall τ against supernet training steps, on the landscape set: where does the ranking peak?

A supernet trained longer is not always a better ranker: an earlier rank check saw τ peak and
fall. This benchmark scores every architecture of ``benchmarks/results/landscape.json`` (the
standalone 2000-step MLM accuracy, mean over seeds, is the truth) with

* each kept checkpoint of one supernet run (``--supernet``, trained with
  ``--set train.keep_checkpoints=K`` so that its intermediate checkpoints survive): the same
  run stopped early, on its own learning-rate schedule's way down;
* every whole run given with ``--also`` (e.g. a supernet trained for fewer steps on its own
  schedule, such as the quickstart's), at its last checkpoint;

on the search's fitness dev set (1024 dev sequences, ``SupernetEvaluator``), ranking by −loss
(the search's default) and by accuracy: Kendall τ with its bootstrap 95% interval, top-5
precision, and the paired-bootstrap difference of τ against the run's last checkpoint
(``rank_stats.paired_tau_difference``: the same architectures and truth for both).

Writes ``benchmarks/results/tau_steps.json`` (``--name`` for another file).

Usage::

    python benchmarks/tau_steps.py --supernet SN [--steps 200 400 ...] [--also QS/supernet]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from _common import RESULTS, machine, write_result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--supernet", type=Path, required=True, help="supernet run with kept checkpoints")
    p.add_argument("--steps", type=int, nargs="*", default=None,
                   help="checkpoint steps to score (default: every kept one)")
    p.add_argument("--also", type=Path, nargs="*", default=[], help="other supernet runs, at their last checkpoint")
    p.add_argument("--dev-sequences", type=int, default=1024, help="dev sequences of the fitness (the search's)")
    p.add_argument("--threads", type=int, default=1, help="torch threads")
    p.add_argument("--name", default="tau_steps",
                   help="result file benchmarks/results/NAME.json (the default one is committed: pick another "
                        "name for your own supernet)")
    args = p.parse_args()
    if not (args.supernet / "checkpoints").is_dir():
        p.error(f"--supernet {args.supernet} is not a train-supernet run folder (no checkpoints/)")

    import torch

    from lvsearch.arch import Arch
    from lvsearch.search.evaluator import SupernetEvaluator
    from lvsearch.train.supernet import load_dev
    from lvsearch.search.rank_stats import paired_tau_difference, rank_quality
    from lvsearch.train.supernet import load_supernet

    torch.set_num_threads(args.threads)
    land = json.loads((RESULTS / "landscape.json").read_text())
    truth = {r["key"]: r["accuracy_mean"] for r in land["archs"] if r.get("accuracy_mean") is not None}
    keys = sorted(truth)
    archs = [Arch.from_key(k) for k in keys]
    ys = [truth[k] for k in keys]
    last = load_supernet(args.supernet)
    kept = sorted(int(d.name.split("-")[1]) for d in (args.supernet / "checkpoints").glob("step-*") if d.is_dir())
    steps = sorted(set(args.steps or kept) | {last.step})
    missing = [s for s in steps if s not in kept]
    if missing:
        raise SystemExit(f"{args.supernet} keeps no checkpoint of step(s) {missing} (kept: {kept})")
    dev, _ = load_dev(last, None, args.dev_sequences)
    rankers = [(f"{args.supernet.name}@{s}", args.supernet, s) for s in steps]
    rankers += [(f"{r.parent.name}/{r.name}@last", r, None) for r in args.also]  # 'run' holds the full path
    rows = {}
    for name, run, step in rankers:
        t0 = time.perf_counter()
        loaded = load_supernet(run, step=step)
        ev = SupernetEvaluator(loaded.supernet, dev, seq_len=loaded.config.train.seq_len, fitness="loss")
        res = {r.key: r for r in ev.evaluate_many(archs)}
        ent = {"run": str(run), "step": loaded.step, "run_steps": loaded.config.train.steps,
               "scores": {k: {"loss": res[k].loss, "accuracy": res[k].accuracy} for k in keys},
               "seconds": time.perf_counter() - t0}
        for metric, f in (("loss", lambda r: -r.loss), ("accuracy", lambda r: r.accuracy)):
            ent[metric] = rank_quality([f(res[k]) for k in keys], ys)
        rows[name] = ent
        print(f"{name}: τ(−loss) {ent['loss']['kendall_tau']:+.3f} {ent['loss']['kendall_tau_ci95']}, top-5 "
              f"{ent['loss']['top5_precision']}; τ(acc) {ent['accuracy']['kendall_tau']:+.3f}, top-5 "
              f"{ent['accuracy']['top5_precision']} ({ent['seconds']:.0f} s)", flush=True)
    ref = f"{args.supernet.name}@{last.step}"
    for name, ent in rows.items():
        if name == ref:
            continue
        ent["paired_vs_last"] = {}
        for metric, sign in (("loss", -1.0), ("accuracy", 1.0)):
            sa = [sign * ent["scores"][k][metric] for k in keys]
            sb = [sign * rows[ref]["scores"][k][metric] for k in keys]
            ent["paired_vs_last"][metric] = paired_tau_difference(sa, sb, ys)
    result = {"what": "Kendall τ of the supernet fitness against the landscape's standalone accuracy, by supernet "
                      "training steps (benchmarks/tau_steps.py)", "machine": machine(),
              "supernet": str(args.supernet), "dev_sequences": int(dev.input_ids.shape[0]), "num_archs": len(keys),
              "truth": "landscape.json accuracy_mean (2000-step standalone MLM dev accuracy, mean over seeds)",
              "reference": ref, "rankers": rows}
    print(write_result(args.name, result))


if __name__ == "__main__":
    main()
