"""Do finalist-pruning predictions hit the loss reached? Bias and coverage of M4 under the
linear schedule and under warmup-stable-decay.

Runs ``lvsearch retrain --finalists 4 --compare-full`` (every finalist ends up trained to the
budget, so every live prediction can be scored) for each finalist list and schedule, then pools
``comparison.predictions`` of every job: the error (predicted − reached dev loss at the budget,
nats), its median, and the share of 90% intervals that cover the loss reached. Jobs are CLI
calls in ``--work`` (resumable: re-running continues them); ``--report`` only aggregates.
Writes ``benchmarks/results/finalist_bias.json``.

Usage::

    python benchmarks/finalist_bias.py --data CORPUS --work /tmp/fb [--schedules wsd linear] [--report]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from _common import machine, write_result

LISTS = {
    "A": "bert,sandwich,random:1,random:4",
    "B": "random:8,random:18,random:25,random:34",
    "C": "random:5,random:6,random:7,random:9",
}


def run_job(args, schedule: str, name: str) -> Path:
    out = args.work / f"{schedule}-{name}"
    cmd = [sys.executable, "-m", "lvsearch", "retrain", "--arch", LISTS[name], "--finalists", "4", "--budget",
           str(args.budget), "--config", "retrain-quickstart", "--data", str(args.data), "--out", str(out),
           "--compare-full", "--set", f"train.eval_every={args.eval_every}", "--set", f"train.schedule={schedule}",
           "--set", f"train.decay_fraction={args.decay_fraction}"]
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), NO_COLOR="1")
    args.work.mkdir(parents=True, exist_ok=True)
    with open(args.work / f"{schedule}-{name}.log", "a") as log:
        rc = subprocess.call(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    if rc != 0:
        raise SystemExit(f"job {schedule}-{name} failed (exit {rc}); see {args.work}/{schedule}-{name}.log")
    return out


def report(args) -> Path:
    by_schedule: dict[str, dict] = {}
    for schedule in args.schedules:
        cases, jobs = [], {}
        for name in LISTS:
            path = args.work / f"{schedule}-{name}" / "finalists.json"
            if not path.is_file():
                continue
            state = json.loads(path.read_text())
            comp = state.get("comparison") or {}
            pred = comp.get("predictions")
            if not pred:
                continue
            cases += [{**c, "job": name} for c in pred["cases"]]
            jobs[name] = {
                "finalists": LISTS[name], "n": pred["n"], "median_error": pred["median_error"],
                "coverage": pred["coverage"], "pick": state["final"]["pick"],
                "train_all_pick": comp["train_all"]["pick"],
                "rules": {k: {"agrees": r["agrees"], "regret": r["regret"], "compute_fraction": r["compute_fraction"]}
                          for k, r in comp["rules"].items()},
                "fallback_rounds": [r["round"] for r in state["rounds"] if r["decision"].get("fallback")],
                "drops": {f"round {r['round']}": {n: p["drop"] for n, p in (r.get("probes") or {}).items()}
                          for r in state["rounds"]} if schedule == "wsd" else None,
                "final_losses": comp["train_all"]["final_losses"],
            }
        errs = [c["error"] for c in cases]
        by_schedule[schedule] = {
            "jobs": jobs, "n": len(cases),
            "median_error": statistics.median(errs) if errs else None,
            "low_share": sum(e < 0 for e in errs) / len(errs) if errs else None,
            "coverage": sum(c["covered"] for c in cases) / len(cases) if cases else None,
            "mean_abs_error": sum(map(abs, errs)) / len(errs) if errs else None,
            "cases": cases,
        }
    return write_result("finalist_bias", {
        "what": "M4 finalist predictions vs the loss reached (benchmarks/finalist_bias.py)",
        "settings": {"budget": args.budget, "eval_every": args.eval_every, "decay_fraction": args.decay_fraction,
                     "recipe": "retrain-quickstart", "finalists": 4, "eta": 2, "level": 0.9, "n_boot": 50,
                     "threads": args.threads},
        "machine": machine(), "schedules": by_schedule,
    })


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--work", type=Path, required=True)
    p.add_argument("--schedules", nargs="+", default=["wsd", "linear"], choices=["wsd", "linear"])
    p.add_argument("--budget", type=int, default=240)
    p.add_argument("--eval-every", type=int, default=6)
    p.add_argument("--decay-fraction", type=float, default=0.2)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--report", action="store_true")
    args = p.parse_args()
    args.data, args.work = args.data.resolve(), args.work.resolve()
    if not args.report:
        for name in LISTS:  # paired: each list under every schedule before the next list
            for schedule in args.schedules:
                run_job(args, schedule, name)
                print(report(args), flush=True)
    print(report(args))


if __name__ == "__main__":
    main()
