"""NSGA-II's accuracy–latency front against random search's at equal evaluations (target:
NSGA-II's hypervolume ≥ random search's in every seed).

For every seed s, two ``lvsearch evolve`` calls on the same supernet, latency table and dev set:

* ``nsga2``: ``--strategy nsga2 --nsga2-cost latency`` (fitness ↑, predicted latency ↓);
* ``random``: ``--strategy random --racing off`` with the same population and iterations, so it
  scores the same number of candidates on the same dev sequences (NSGA-II does not race).

Each search's front is the non-dominated set of everything it scored (``history.jsonl``:
fitness and ``latency_ms`` per candidate). The hypervolume (``moocore``, DEAP's dependency) of
both fronts of a seed is taken against one reference point, the worst fitness and the worst
latency over both searches' candidates, so the two numbers compare. Every run is a CLI call,
resumable (a finished search is kept; an unfinished one continues with ``--resume``).

Usage::

    python benchmarks/pareto_fronts.py --supernet SN --table TABLE.json --work W [--seeds 0 1 2]
        [--population 20] [--iterations 10] [--dev-sequences 256] [--name pareto_fronts]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from _common import history_points, machine, pareto_front, run_lvsearch, write_result


def hypervolume(p: np.ndarray, ref: tuple[float, float]) -> float:
    """Area dominated by ``p`` up to ``ref`` (worst fitness, worst latency)."""
    import moocore

    return float(moocore.hypervolume(p, ref=np.asarray(ref), maximise=[True, False]))


def search(args, seed: int, arm: str, out: Path) -> None:
    state = out / "state.json"
    if state.is_file() and json.loads(state.read_text()).get("done"):
        return
    argv = ["evolve", "--supernet", str(args.supernet), "--out", str(out), "--seed", str(seed),
            "--population", str(args.population), "--iterations", str(args.iterations),
            "--dev-sequences", str(args.dev_sequences), "--latency-table", str(args.table), "--device", "cpu"]
    argv += (["--strategy", "nsga2", "--nsga2-cost", "latency"] if arm == "nsga2"
             else ["--strategy", "random", "--racing", "off"])
    if args.any_device:
        argv.append("--latency-any-device")
    if state.is_file():
        argv.append("--resume")
    run_lvsearch(argv, out.parent / f"{out.name}.log", args.threads)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--supernet", type=Path, required=True)
    ap.add_argument("--table", type=Path, required=True, help="a table of 'lvsearch latency measure' for --supernet")
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--population", type=int, default=20)
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--dev-sequences", type=int, default=256)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--any-device", action="store_true", help="pass --latency-any-device to evolve")
    ap.add_argument("--name", default="pareto_fronts")
    args = ap.parse_args()

    rows = []
    for seed in args.seeds:
        folders = {arm: args.work / f"{arm}-{seed}" for arm in ("nsga2", "random")}
        for arm, out in folders.items():
            search(args, seed, arm, out)
        pts = {arm: history_points(out) for arm, out in folders.items()}
        both = np.vstack(list(pts.values()))
        ref = (float(both[:, 0].min()), float(both[:, 1].max()))
        fronts = {arm: pareto_front(p) for arm, p in pts.items()}
        hv = {arm: hypervolume(f, ref) for arm, f in fronts.items()}
        rows.append({
            "seed": seed, "reference": {"fitness": ref[0], "latency_ms": ref[1]},
            "evaluated": {arm: int(len(p)) for arm, p in pts.items()},
            "hypervolume": hv, "nsga2_minus_random": hv["nsga2"] - hv["random"],
            "fronts": {arm: [{"fitness": float(f), "latency_ms": float(t)} for f, t in fr] for arm, fr in fronts.items()},
        })
        print(f"seed {seed}: hypervolume NSGA-II {hv['nsga2']:.5f} vs random {hv['random']:.5f} "
              f"({len(pts['nsga2'])} vs {len(pts['random'])} candidates)", flush=True)
    table = json.loads(args.table.read_text())
    write_result(args.name, {
        "supernet": str(args.supernet.resolve()), "table_device": f"{table['device']} ({table['device_name']}, "
        f"{table['threads']} threads)", "batch": table["batch"], "seq_len": table["seq_len"],
        "population": args.population, "iterations": args.iterations, "dev_sequences": args.dev_sequences,
        "machine": machine(), "seeds": rows,
        "nsga2_at_least_random_every_seed": all(r["nsga2_minus_random"] >= 0 for r in rows),
    })


if __name__ == "__main__":
    main()
