"""Finalists through submitit's local executor against the sequential default, on this machine.

``lvsearch retrain --finalists 4`` (successive halving, eta 2: 4 finalists to a quarter of the
budget, the best 2 to half, the pick to the end) on the shared corpus, ``retrain-quickstart``'s
model (12 slots, hidden 128) with a short budget, run three times as CLI calls:

* ``sequential_1thread``: the default ``--executor inline`` with ``OMP_NUM_THREADS=1``;
* ``sequential_2threads``: the default with 2 torch threads (what a user gets on 2 cores);
* ``local_2x1``: ``--executor local --max-parallel 2`` with ``OMP_NUM_THREADS=1`` (each job
  one thread, two jobs at a time).

It records each wall time, the ratio of ``local_2x1`` to both sequential runs, and whether
``local_2x1`` made the same picks with byte-identical weights as ``sequential_1thread`` (the
same thread count: results depend on it, docs/results.md), plus the load average before and
after each run: other jobs on the machine change the timings, so a figure measured on a
loaded machine is provisional.

About 2.5 minutes on an idle 2-core machine (6.5 measured under load). Usage::

    python benchmarks/dispatch.py [--data PREPARED] [--budget 64]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import REPO, machine, prepared_data, write_result


def run(name: str, argv: list[str], threads: int, log: Path) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads), LVSEARCH_QUIET="1",
               NO_COLOR="1", PYTHONPATH=os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]))
    load_before = os.getloadavg()
    t0 = time.perf_counter()
    with open(log, "w") as fh:
        rc = subprocess.call([sys.executable, "-m", "lvsearch", *argv], stdout=fh, stderr=subprocess.STDOUT, env=env)
    seconds = time.perf_counter() - t0
    if rc != 0:
        raise SystemExit(f"{name} failed (exit {rc}); see {log}")
    print(f"{name}: {seconds:.1f} s", flush=True)
    return {"seconds": seconds, "torch_threads_per_process": threads,
            "load_average_before": list(load_before), "load_average_after": list(os.getloadavg())}


def outcome(out: Path) -> dict:
    state = json.loads((out / "finalists.json").read_text())
    return {"rounds": [(r["alive"], r["decision"]["kept"]) for r in state["rounds"]], "pick": state["final"]["pick"],
            "weights": {p.name: hashlib.sha256((p / "model" / "model.safetensors").read_bytes()).hexdigest()
                        for p in sorted((out / "finalists").iterdir())}}


def reading(result: dict) -> str:
    """One sentence on what the ratio says (computed from the result, so it cannot disagree)."""
    r = result["wall_ratio_local_2x1_over_sequential_1thread"]
    jobs = result["settings"]["finalists"] + result["settings"]["finalists"] // 2 + 1
    if r >= 1:
        return (f"local x2 took {r:.2f}x the sequential 1-thread wall time: at {result['settings']['budget_steps']} "
                f"steps per finalist each of the {jobs} jobs' own start (a Python process, torch import, data and "
                "dev set loading) outweighs the overlap of two trainings, and on a loaded machine the second core "
                "is not free (a larger budget per job was not measured here)")
    return f"local x2 took {r:.2f}x the sequential 1-thread wall time"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default=None, help="prepared corpus (default: the shared corpus, prepared here)")
    p.add_argument("--budget", type=int, default=64, help="steps per finalist (rungs at budget/4 and budget/2)")
    p.add_argument("--finalists", type=int, default=4)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="lvsearch-dispatch-") as tmp:
        data = prepared_data(args.data, tmp, vocab_size=4096)
        rung = args.budget // 4
        sets = ["train.eval_every=" + str(rung), "train.checkpoint_every=" + str(rung), "train.warmup_steps=4",
                "eval.dev_sequences=128"]
        base = ["retrain", "--arch", "bert,sandwich,random:1,random:2", "--finalists", str(args.finalists),
                "--budget", str(args.budget), "--config", "retrain-quickstart", "--data", data,
                "--set", "space=lvbert-elc", *[x for s in sets for x in ("--set", s)]]
        runs = {
            "sequential_1thread": run("sequential_1thread", [*base, "--out", f"{tmp}/seq1"], 1, Path(tmp, "seq1.log")),
            "local_2x1": run("local_2x1", [*base, "--out", f"{tmp}/local", "--executor", "local", "--max-parallel", "2"],
                             1, Path(tmp, "local.log")),
            "sequential_2threads": run("sequential_2threads", [*base, "--out", f"{tmp}/seq2"], 2,
                                       Path(tmp, "seq2.log")),
        }
        seq1, local, seq2 = outcome(Path(tmp, "seq1")), outcome(Path(tmp, "local")), outcome(Path(tmp, "seq2"))
    result = {
        "what": "retrain --finalists with --executor local --max-parallel 2 vs the sequential default "
                "(benchmarks/dispatch.py)",
        "settings": {"finalists": args.finalists, "eta": 2, "budget_steps": args.budget,
                     "rungs_steps": [args.budget // 4, args.budget // 2], "recipe": "retrain-quickstart",
                     "space": "lvbert-elc", "overrides": sets, "vocab_size": 4096,
                     "archs": "bert,sandwich,random:1,random:2",
                     "data": "shared corpus" if args.data is None else args.data},
        "machine": machine(),
        "runs": runs,
        "wall_ratio_local_2x1_over_sequential_1thread": runs["local_2x1"]["seconds"] / runs["sequential_1thread"]["seconds"],
        "wall_ratio_local_2x1_over_sequential_2threads": runs["local_2x1"]["seconds"] / runs["sequential_2threads"]["seconds"],
        "local_equals_sequential_1thread": local == seq1,
        "same_pick_as_sequential_2threads": local["pick"] == seq2["pick"],
        "provisional": "measured while another long job ran on the same 2 cores (load averages above): the wall "
                       "times and their ratios will differ on an idle machine",
    }
    result["reading"] = reading(result)
    print(write_result("dispatch", result))
    print(json.dumps({k: v for k, v in result.items() if k.startswith(("wall", "local", "same"))}, indent=1))


if __name__ == "__main__":
    main()
