"""The pre-registered test of a latency search: is NSGA-II's pick faster than random search's
at non-inferior accuracy? (docs/results.md, "The latency test"; the protocol is written there
before any of its results.)

Per search seed ``s``:

* ``--part search``: ``lvsearch evolve --strategy nsga2 --nsga2-cost latency --latency-table T
  --sparse-init SHARE --racing off --compare-random --seed s`` (P × T candidates; random search
  from the same first population, to the same dev-sequence passes, uniform after it, no latency
  cap); each search's ``pick.json`` (the fastest candidate at the first population's median
  fitness, :mod:`lvsearch.search.pick`) and its front's predicted-latency range are committed.
  ``--no-seeding-seeds`` adds NSGA-II searches with ``--sparse-init 0`` (the range without the
  seeding; no retrains).
* ``--part retrain``: each pick retrained with ``retrain-quickstart`` (``--steps``, pretraining
  seed = ``s``), then ``lvsearch evaluate``: MLM dev accuracy on ``--dev-sequences`` (primary),
  the loss on every dev sequence and BLiMP (secondary); ``bert`` for ``--bert-seeds``.
* ``--part latency``: every pick and ``bert`` timed end to end (the retrained graph, extracted
  from the supernet: :func:`lvsearch.latency.predict.time_named`), ``--rounds`` whole rounds over
  all architectures, the median per architecture kept (the front-points protocol).
* ``--part report`` (also after every other part): the co-primary outcomes (paired relative
  latency reduction, t 95% lower end > 0; accuracy difference, t 95% lower end > −``--margin``
  pp) from the committed JSON alone (:func:`outcomes`).

Everything a part finishes is written to ``benchmarks/results/NAME.json`` at once, and a part
run again skips what that file holds, so the test continues on a new machine from the
committed file (searches must use the supernet and table recorded there: their sha256 are
checked). Usage::

    python benchmarks/faster_test.py --supernet SNE --table T.json --data CORPUS --work W \\
        --part search --seed-list 0 1 2 3 4 5 6 7 8 9 [--jobs 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from _common import history_points, machine, pareto_front, result_path, run_lvsearch, run_main, write_result

ARMS = ("nsga2", "random")
KIND = "lvsearch.faster-test/v1"
ALL_DEV = 10**9  # more than any dev split holds: evaluate then scores every dev sequence


def settings(args) -> dict:
    """What must match for a committed result to be continued."""
    return {"population": args.population, "iterations": args.iterations, "dev_sequences": args.search_dev_sequences,
            "sparse_init": args.sparse_init, "steps": args.steps, "num_slots": args.num_slots,
            "eval_dev_sequences": args.dev_sequences, "blimp_limit": args.blimp_limit, "margin_pp": args.margin}


def supernet_sha256(run: Path) -> str:
    """sha256 of the supernet's latest checkpointed weights (``checkpoints/latest.json``'s folder).

    Raises:
        LvsearchError: no finished checkpoint in ``run``.
    """
    from lvsearch.errors import LvsearchError
    from lvsearch.io import sha256_file

    try:
        latest = json.loads((run / "checkpoints" / "latest.json").read_text())
        return sha256_file(run / "checkpoints" / latest["dir"] / "model.safetensors")
    except (OSError, ValueError, KeyError, TypeError):
        raise LvsearchError(f"--supernet {run} holds no checkpoint", fix="pass a train-supernet run folder") from None


def load_result(args) -> dict:
    """The committed result (or a new one), checked against this call's settings and inputs.

    Raises:
        LvsearchError: other settings, or searches to run on another supernet or table than the
            committed ones.
    """
    from lvsearch.errors import LvsearchError
    from lvsearch.io import sha256_file

    path = result_path(args.name, own=lambda r: r.get("kind") == KIND)
    res = json.loads(path.read_text()) if path.exists() else {"kind": KIND, "settings": settings(args), "seeds": {}}
    if res["settings"] != settings(args):
        diff = sorted(k for k in settings(args) if res["settings"].get(k) != settings(args)[k])
        raise LvsearchError(f"{path.name} was run with other settings ({', '.join(diff)})",
                            fix="pass the recorded settings, or another --name")
    if args.part == "search":
        have = {"supernet_sha256": supernet_sha256(args.supernet), "table_sha256": sha256_file(args.table)}
        for k, v in have.items():
            if res.get(k) not in (None, v):
                raise LvsearchError(f"{path.name}'s searches used another {k.split('_')[0]} ({res[k][:12]}…, this one "
                                    f"{str(v)[:12]}…)", fix="search with the recorded supernet and table, or another --name")
            res[k] = v
    return res


def save(args, res: dict) -> None:
    res["machine_last"] = machine()
    res["outcomes"] = outcomes(res, args.margin)
    write_result(args.name, res)


# ----------------------------------------------------------------------------- search
def front_range(folder: Path) -> list[float] | None:
    """``[fastest, slowest]`` predicted latency (ms) on ``pareto.json``'s front, or None."""
    p = folder / "pareto.json"
    if not p.exists():
        return None
    lat = [r["latency_ms"] for r in json.loads(p.read_text())["front"]]
    return [min(lat), max(lat)] if lat else None


def fronts_of(folder: Path) -> dict:
    """The predicted-latency range (ms) of the non-dominated set of a search's history (any
    strategy) and of all its complete candidates."""
    p = history_points(folder)
    front = pareto_front(p)
    return {"front_size": len(front), "front_latency_ms": [float(front[0, 1]), float(front[-1, 1])],
            "candidates": len(p), "all_latency_ms": [float(p[:, 1].min()), float(p[:, 1].max())]}


def search(args, seed: int, sparse: float, tag: str) -> dict:
    out = args.work / f"{tag}-s{seed}"
    cmd = ["evolve", "--supernet", str(args.supernet), "--out", str(out), "--strategy", "nsga2", "--nsga2-cost",
           "latency", "--latency-table", str(args.table), "--sparse-init", str(sparse), "--racing", "off",
           "--population", str(args.population), "--iterations", str(args.iterations), "--dev-sequences",
           str(args.search_dev_sequences), "--seed", str(seed), "--device", "cpu"]
    if tag == "search":
        cmd.append("--compare-random")
    done = (out / ("random" if tag == "search" else ".") / "noise.json").exists()
    t0 = time.time()
    if not done:
        resume = ["--resume"] if (out / "state.json").exists() else []
        run_lvsearch(cmd + resume, args.work / "logs" / f"{tag}-s{seed}.log", 1)
    entry = {"seconds": None if done else round(time.time() - t0, 1)}
    for arm, folder in (("nsga2", out), ("random", out / "random")):
        if arm == "random" and tag != "search":
            continue
        pick = json.loads((folder / "pick.json").read_text()) if (folder / "pick.json").exists() else None
        entry[arm] = {**fronts_of(folder), "pick": pick}
    return entry


def part_search(args, res: dict) -> None:
    jobs = [(s, args.sparse_init, "search") for s in args.seed_list if "search" not in res["seeds"].get(str(s), {})]
    jobs += [(s, 0.0, "noseed") for s in args.no_seeding_seeds if "noseed" not in res["seeds"].get(str(s), {})]

    def one(job):
        s, sparse, tag = job
        return job, search(args, s, sparse, tag)

    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        for (s, _, tag), entry in pool.map(one, jobs):
            res["seeds"].setdefault(str(s), {})[tag] = entry
            save(args, res)
            print(f"seed {s} {tag}: " + ", ".join(
                f"{a} pick {e['pick']['meta']['latency_ms']:.2f} ms" if e.get("pick") else f"{a} no pick"
                for a, e in entry.items() if a in ARMS), flush=True)


# ----------------------------------------------------------------------------- retrain
def retrain(args, seed: int, arm: str, spec: str) -> dict:
    run = args.work / "runs" / f"{arm}-s{seed}"
    log = args.work / "logs" / f"{arm}-s{seed}.log"
    t0 = time.time()
    if not (run / "summary.json").exists():
        if (run / "checkpoints" / "latest.json").exists():
            cmd = ["retrain", "--data", str(args.data), "--out", str(run), "--resume"]
        else:
            cmd = ["retrain", "--arch", spec, "--config", "retrain-quickstart", "--data", str(args.data), "--out", str(run),
                   "--set", f"num_slots={args.num_slots}", "--set", f"train.seed={seed}",
                   "--set", f"train.steps={args.steps}", "--set", f"train.eval_every={max(1, args.steps // 8)}",
                   "--set", f"train.checkpoint_every={max(1, args.steps // 8)}",
                   "--set", f"eval.dev_sequences={args.dev_sequences}", "--overwrite"]
        run_lvsearch(cmd, log, 1)
    common = ["evaluate", "--model", str(run / "model"), "--mlm-data", str(args.data), "--threads", "1"]
    if not (run / "mlm.json").exists():
        run_lvsearch(common + ["--out", str(run / "mlm.json"), "--no-blimp", "--dev-sequences", str(args.dev_sequences)],
                     log, 1)
    if not (run / "all.json").exists():
        blimp = ["--blimp", str(args.blimp), "--blimp-limit", str(args.blimp_limit)] if args.blimp else ["--no-blimp"]
        run_lvsearch(common + ["--out", str(run / "all.json"), *blimp, "--dev-sequences", str(ALL_DEV)], log, 1)
    m = json.loads((run / "mlm.json").read_text())["mlm"]
    full = json.loads((run / "all.json").read_text())
    from lvsearch.arch import Arch

    arch = Arch.from_dict(json.loads((run / "model" / "config.json").read_text())["arch"])
    return {"arch": arch.key,
            "mlm_accuracy": m["accuracy"], "mlm_loss": m["loss"], "per_target_correct": m["per_target_correct"],
            "floor": m["floors"]["neighbour-count"]["accuracy"], "beats_floor": m["floors"]["beats_floor"],
            "all_dev_loss": full["mlm"]["loss"], "all_dev_accuracy": full["mlm"]["accuracy"],
            "all_dev_sequences": full["mlm"].get("sequences"),
            "blimp": (full.get("blimp") or {}).get("mean_over_paradigms"),
            "seconds": round(time.time() - t0, 1)}


def part_retrain(args, res: dict) -> None:
    todo = []
    for s in args.seed_list:
        entry = res["seeds"].get(str(s), {})
        runs = entry.setdefault("runs", {})
        if "search" not in entry:
            continue
        for arm in ARMS:
            if arm not in runs and entry["search"][arm]["pick"] is not None:
                todo.append((s, arm))
        if s in args.bert_seeds and "bert" not in runs:
            todo.append((s, "bert"))

    def one(job):
        s, arm = job
        entry = res["seeds"][str(s)]
        spec = "bert" if arm == "bert" else str(args.work / ("search-s%d" % s) / ("random" if arm == "random" else ".")
                                                / "pick.json")
        if arm != "bert" and not Path(spec).exists():  # a new machine: the committed pick
            Path(spec).parent.mkdir(parents=True, exist_ok=True)
            Path(spec).write_text(json.dumps(entry["search"][arm]["pick"]))
        return job, retrain(args, s, arm, spec)

    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        for (s, arm), row in pool.map(one, todo):
            res["seeds"][str(s)]["runs"][arm] = row
            save(args, res)
            print(f"seed {s} {arm}: MLM {row['mlm_accuracy']:.4f} ({row['seconds']:.0f} s)", flush=True)


# ----------------------------------------------------------------------------- latency
def part_latency(args, res: dict) -> None:
    import numpy as np

    from lvsearch.latency.predict import time_named
    from lvsearch.latency.table import MeasureOptions, load_table

    table = load_table(args.table)
    specs, names = ["bert"], ["bert"]
    tmp = args.work / "timed"
    tmp.mkdir(parents=True, exist_ok=True)
    for s, entry in sorted(res["seeds"].items(), key=lambda kv: int(kv[0])):
        for arm in ARMS:
            pick = entry.get("search", {}).get(arm, {}).get("pick")
            if pick is not None:
                f = tmp / f"{arm}-s{s}.json"
                f.write_text(json.dumps(pick))
                specs.append(str(f))
                names.append(f"{arm}-s{s}")
    opts = MeasureOptions(device="cpu", batch=table.batch, seq_len=table.seq_len, threads=1, repeats=args.repeats,
                          dtype=table.dtype)
    load = os.getloadavg()
    rounds = []
    for _ in range(args.rounds):
        rec = time_named(args.supernet, specs, opts=opts, show_progress=False)
        rounds.append([r["measured_ms"] for r in rec["rows"]])
    res["latency"] = {
        "protocol": f"end to end, batch {table.batch} x {table.seq_len} tokens, {table.dtype}, 1 thread, median of "
                    f"{args.repeats} blocks, {args.rounds} rounds over all architectures, median kept",
        "load_average_before": list(load), "machine": machine(),
        "measured_ms": {n: float(np.median([rd[i] for rd in rounds])) for i, n in enumerate(names)},
        "rounds_ms": {n: [rd[i] for rd in rounds] for i, n in enumerate(names)},
    }
    save(args, res)


# ----------------------------------------------------------------------------- outcomes
def outcomes(res: dict, margin_pp: float) -> dict:
    """The co-primary outcomes from a result's seeds alone: per seed the relative latency
    reduction ``1 − t(NSGA-II pick) / t(random pick)`` (measured end to end) and the accuracy
    difference in pp (NSGA-II − random search, retrained); the paired t 95% interval of each
    mean (:func:`lvsearch.stats.t_interval`); a claim only if both lower ends pass (> 0 and
    > −``margin_pp``) over every seed that has both numbers, and only with 10 seeds."""
    from lvsearch.stats import t_interval

    lat = (res.get("latency") or {}).get("measured_ms", {})
    red, acc, rows = [], [], []
    for s, entry in sorted(res["seeds"].items(), key=lambda kv: int(kv[0])):
        runs = entry.get("runs", {})
        row = {"seed": int(s)}
        picks = [((entry.get("search", {}).get(a) or {}).get("pick") or {}).get("meta", {}).get("pick", {})
                 .get("pick", {}).get("key") for a in ARMS]
        same = picks[0] is not None and picks[0] == picks[1]  # the same architecture: 0 and 0
        if same:
            row["same_pick"] = True
        if same or all(f"{a}-s{s}" in lat for a in ARMS):
            row["latency_reduction"] = 0.0 if same else 1 - lat[f"nsga2-s{s}"] / lat[f"random-s{s}"]
            red.append(row["latency_reduction"])
        if same or all(a in runs for a in ARMS):
            row["accuracy_pp"] = 0.0 if same else 100 * (runs["nsga2"]["mlm_accuracy"] - runs["random"]["mlm_accuracy"])
            acc.append(row["accuracy_pp"])
        if "latency_reduction" in row or "accuracy_pp" in row:
            rows.append(row)

    def interval(xs):
        if len(xs) < 2:
            return None
        lo, hi = t_interval(xs)
        return {"mean": statistics.fmean(xs), "t95": [lo, hi], "n": len(xs)}

    a, b = interval(red), interval(acc)
    complete = a is not None and b is not None and a["n"] == b["n"] == 10
    return {"per_seed": rows, "latency_reduction": a, "accuracy_pp": b, "margin_pp": margin_pp,
            "faster": None if a is None else a["t95"][0] > 0,
            "non_inferior": None if b is None else b["t95"][0] > -margin_pp,
            "claim": (a["t95"][0] > 0 and b["t95"][0] > -margin_pp) if complete else None,
            "complete": complete}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--supernet", type=Path, required=True)
    p.add_argument("--table", type=Path, required=True, help="latency table of the supernet (lvsearch latency measure)")
    p.add_argument("--data", type=Path, required=True, help="prepared corpus (lvsearch data prepare)")
    p.add_argument("--work", type=Path, required=True, help="folder for the searches, runs and logs")
    p.add_argument("--part", choices=["search", "retrain", "latency", "report"], required=True)
    p.add_argument("--seed-list", type=int, nargs="+", default=list(range(10)))
    p.add_argument("--no-seeding-seeds", type=int, nargs="*", default=[0, 1, 2])
    p.add_argument("--bert-seeds", type=int, nargs="*", default=[0, 1, 2])
    p.add_argument("--population", type=int, default=20)
    p.add_argument("--iterations", type=int, default=10)
    p.add_argument("--search-dev-sequences", type=int, default=256)
    p.add_argument("--sparse-init", type=float, default=0.5)
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--num-slots", type=int, default=24)
    p.add_argument("--dev-sequences", type=int, default=512)
    p.add_argument("--blimp", type=Path, default=None, help="BLiMP folder (secondary); default: none")
    p.add_argument("--blimp-limit", type=int, default=100)
    p.add_argument("--margin", type=float, default=1.0, help="non-inferiority margin, pp of MLM accuracy")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--repeats", type=int, default=15)
    p.add_argument("--jobs", type=int, default=1, help="searches or retrains side by side (1 thread each)")
    p.add_argument("--name", default="faster_test")
    args = p.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    res = load_result(args)
    {"search": part_search, "retrain": part_retrain, "latency": part_latency, "report": lambda a, r: None}[args.part](
        args, res)
    save(args, res)
    print(json.dumps(res["outcomes"], indent=1)[:3000])


if __name__ == "__main__":
    run_main(main)
