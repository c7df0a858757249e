"""Why the EA does not climb its own fitness faster than random search: curves and heritability.

The 6-seed EA vs random-search run (``search_arms_6seeds.json``) found the EA's best supernet
fitness *below* random search's in 5 of 6 seeds at 200 evaluations. Two measurements on one
supernet (``--supernet``; the quickstart space inside ``bert``'s parameter band ± 5%, the
search's default fitness: −MLM loss on 1024 dev sequences, raced 64 → 256 → 1024):

* ``--part curves``: best-so-far curves. For every strategy (``evolution``, LV-BERT's EA;
  ``aging``, regularized evolution; ``random``) and search seed, ``lvsearch evolve --strategy S
  --seed s --population P --iterations T`` (a CLI call each, resumable, ``--jobs`` at a time with
  one torch thread; with ``--executor local|slurm`` each an independent submitit job,
  ``--max-parallel`` at a time, logs under ``WORK/dispatch/``; docs/cluster.md). The report reads each search's ``history.jsonl``: the best *complete*
  fitness among its first n evaluations (what the search would pick after n), for n = P, 2P, …;
  each strategy minus random search paired by seed, with a Student-t 95% interval over seeds;
  how many evaluations ended complete (racing stops the rest); how alike the final top-k is.
* ``--part heritability``: does a mutant inherit its parent's fitness? ``--parents`` seeded
  random band architectures, each with one child of each kind below, all scored unraced on the
  same 1024 dev sequences (``SupernetEvaluator``, the full score a raced survivor gets):
  ``mutation`` (``SearchSpace.mutate``, p = 0.1: each op re-drawn and each optional ELC input
  flipped with p), ``ops-only`` (only the op re-draws), ``inputs-only`` (only the input flips),
  ``inputs-resampled`` (the parent's ops, inputs drawn afresh as ``SearchSpace.sample`` does) and
  ``ops-resampled`` (the parent's inputs, ops drawn afresh). Per kind: Pearson r and the
  regression slope of child on parent fitness (the heritability of fitness under that
  operator), the SD of child − parent against the population SD, and for parents in the top
  quartile how often the child is better and by how much. The resampled kinds split the
  population variance into what the ops and what the inputs explain.

``--report`` aggregates what exists into ``benchmarks/results/search_climb.json``, with what a
fitness lead is worth in standalone accuracy when ``tau_steps.json`` scored the landscape with
this same supernet (the slope of standalone accuracy on the fitness over the landscape's
architectures, and the fitness lead a 6-seed t test would need).

Usage::

    python benchmarks/search_climb.py --supernet SN --work W --part heritability
    python benchmarks/search_climb.py --supernet SN --work W --part curves [--seeds 6] [--jobs 2] [--seed-list 0 1]
    python benchmarks/search_climb.py --supernet SN --work W --report

A longer budget continues the same searches (``--iterations`` is raised on resume: the first
evaluations are the shorter run's), e.g. LV-BERT's 1000 evaluations for two strategies::

    python benchmarks/search_climb.py --supernet SN --work W --part curves --iterations 50 \
        --strategies evolution random --seeds 3
    python benchmarks/search_climb.py --supernet SN --work W --report --iterations 50 \
        --strategies evolution random --seeds 3 --name search_climb_1000
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from _common import (RESULTS, add_dispatch, bert_band, best_at_passes, dispatch_options, dispatch_stage,
                     exit_on_failures, machine, paired_rows, run_lvsearch, run_main, write_result)

STRATEGIES = ("evolution", "aging", "random")
KINDS = ("mutation", "ops-only", "inputs-only", "inputs-resampled", "ops-resampled")


# ----------------------------------------------------------------------------------------
# Curves: lvsearch evolve per strategy and seed
# ----------------------------------------------------------------------------------------


def search_dir(args, strategy: str, seed: int) -> Path:
    return args.work / "searches" / f"{strategy}-s{seed}"


def run_search(args, strategy: str, seed: int, lo: int, hi: int) -> Path:
    out = search_dir(args, strategy, seed)
    state = out / "state.json"
    if state.is_file() and finished(args, json.loads(state.read_text())):
        return out  # done (a later call with more --iterations resumes it: the same stream, longer)
    cmd = ["evolve", "--supernet", str(args.supernet), "--out", str(out), "--strategy", strategy,
           "--seed", str(seed), "--population", str(args.population), "--iterations", str(args.iterations),
           "--min-params", str(lo), "--max-params", str(hi)]
    if args.budget is not None:
        cmd += ["--budget", str(args.budget)]
    if state.is_file():
        cmd.append("--resume")
    t0 = time.perf_counter()
    run_lvsearch(cmd, args.work / "logs" / f"{strategy}-s{seed}.log", threads=1)
    print(f"{strategy} seed {seed}: {time.perf_counter() - t0:.0f} s", flush=True)
    return out


def finished(args, state: dict) -> bool:
    """A search's state is done at this benchmark's budget: its iterations, or (``--budget``)
    its dev-sequence passes spent."""
    if args.budget is not None:
        return bool(state.get("done")) and state.get("config", {}).get("budget") == args.budget
    return state["iteration"] >= args.iterations


def curves(args) -> None:
    from lvsearch.train.supernet import load_supernet

    _, lo, hi = bert_band(load_supernet(args.supernet))
    seeds = args.seed_list if args.seed_list is not None else range(args.seeds)
    jobs = [(st, s) for s in seeds for st in args.strategies]
    if not args.dispatch.inline:  # every search an independent submitit job (lvsearch.dispatch)
        from lvsearch.dispatch import Job

        failures: dict = {}
        dispatch_stage(args.dispatch, [Job(f"{st}-s{s}", run_search, {"args": args, "strategy": st, "seed": s,
                                                                       "lo": lo, "hi": hi}) for st, s in jobs],
                       args.work / "dispatch" / "curves", failures)
        exit_on_failures(failures, len(jobs))
        return
    with ThreadPoolExecutor(args.jobs) as pool:
        for f in [pool.submit(run_search, args, st, s, lo, hi) for st, s in jobs]:
            f.result()


def read_history(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "history.jsonl").read_text().splitlines() if line.strip()]


def best_so_far(history: list[dict], marks: list[int]) -> list[float | None]:
    """Best complete fitness among the first n evaluations, for each n in ``marks``."""
    out, best, i = [], -math.inf, 0
    for n in marks:
        for r in history[i:n]:
            if r.get("fitness") is not None and not r.get("partial") and not r.get("rejected"):
                best = max(best, r["fitness"])
        i = n
        out.append(best if best > -math.inf else None)
    return out


def hamming(a: str, b: str) -> tuple[int, int]:
    """(op differences, input differences) of two architecture keys."""
    from lvsearch.arch import Arch

    x, y = Arch.from_key(a), Arch.from_key(b)
    ops = sum(p != q for p, q in zip(x.ops, y.ops))
    ins = sum(len(set(p) ^ set(q)) for p, q in zip(x.inputs, y.inputs))
    return ops, ins


def curves_report(args) -> dict | None:
    from lvsearch.arch import Arch

    found = {}
    for st in args.strategies:
        for s in (args.seed_list if args.seed_list is not None else range(args.seeds)):
            d = search_dir(args, st, s)
            if (d / "state.json").is_file() and finished(args, json.loads((d / "state.json").read_text())):
                found[(st, s)] = d
    if not found:
        return None
    total = args.population * args.iterations
    marks = list(range(args.population, total + 1, args.population))
    pass_marks = [args.budget * i // 10 for i in range(1, 11)] if args.budget is not None else None
    per: dict = {st: {} for st in args.strategies}
    pooled: dict[str, float] = {}  # every complete score seen by any search (same fitness and dev set)
    for (st, s), d in found.items():
        hist = read_history(d)[:total]  # a search run on for longer is read at this budget
        complete = [r for r in hist if r.get("fitness") is not None and not r.get("partial")]
        for r in complete:
            pooled[r["key"]] = r["fitness"]
        # the top-k the search held after `total` evaluations: best complete first, ties keep the earlier
        keys = [r["key"] for r in sorted(complete, key=lambda r: -r["fitness"])[:10]]
        dist = [hamming(a, b) for i, a in enumerate(keys) for b in keys[i + 1:]]
        per[st][str(s)] = {
            "evaluations": len(hist),
            "complete": len(complete),
            "best_so_far": best_so_far(hist, marks),
            **({"passes": sum(r["sequences"] for r in hist),
                "best_at_passes": best_at_passes(hist, pass_marks)} if pass_marks else {}),
            "best_key": keys[0] if keys else None,
            "best_ops": Arch.from_key(keys[0]).compact if keys else None,
            "topk_mean_op_differences": float(np.mean([x for x, _ in dist])) if dist else None,
            "topk_mean_input_differences": float(np.mean([y for _, y in dist])) if dist else None,
        }
    out: dict = {"marks": marks, "per_search": per, "paired": {}, "mean_curve": {}}
    if pass_marks:
        out["pass_marks"], out["paired_at_passes"] = pass_marks, {}
    ranked = sorted(pooled.values(), reverse=True)
    for st in args.strategies:
        seeds = sorted(per[st], key=int)
        out["mean_curve"][st] = [float(np.mean([per[st][s]["best_so_far"][i] for s in seeds
                                                if per[st][s]["best_so_far"][i] is not None] or [np.nan]))
                                 for i in range(len(marks))]
        for s in seeds:  # where the final pick sits among every complete score of every search
            b = per[st][s]["best_so_far"][-1]
            per[st][s]["final_rank_among_pooled"] = ranked.index(b) if b in ranked else None
    # every pair of strategies, paired by seed (the same first population), e.g. "aging - random"
    for a, b in [(a, b) for a in args.strategies for b in args.strategies
                 if a != b and (b == "random" or (a, b) == ("aging", "evolution"))]:
        seeds = sorted(set(per[a]) & set(per[b]), key=int)
        out["paired"][f"{a} - {b}"] = paired_rows(per[a], per[b], seeds, "best_so_far", "evaluations", marks)
        if pass_marks:  # the same at equal compute: best within the first n dev-sequence passes
            out["paired_at_passes"][f"{a} - {b}"] = paired_rows(per[a], per[b], seeds, "best_at_passes", "passes",
                                                                pass_marks)
    out["pooled_complete_scores"] = len(pooled)
    return out


def standalone_translation(args, curves: dict | None) -> dict | None:
    """What a fitness lead is worth in standalone accuracy: the least-squares slope of the
    landscape's standalone accuracy (mean over seeds) on this supernet's −loss fitness of the
    same architectures (``tau_steps.json``'s ranker of this supernet at its last step), applied
    to each paired fitness difference at the final budget, and the fitness lead a 6-seed paired
    t test would need (``landscape.json``'s detectable difference / slope)."""
    try:
        tau = json.loads((RESULTS / "tau_steps.json").read_text())
        land = json.loads((RESULTS / "landscape.json").read_text())
    except (OSError, ValueError):
        return None
    if Path(tau.get("supernet", "")).resolve() != args.supernet.resolve():
        return None
    ranker = tau["rankers"].get(tau["reference"])
    truth = {r["key"]: r["accuracy_mean"] for r in land["archs"] if r.get("accuracy_mean") is not None}
    keys = sorted(set(truth) & set(ranker["scores"]))
    x = np.array([-ranker["scores"][k]["loss"] for k in keys])
    y = np.array([truth[k] for k in keys])
    slope = float(np.polyfit(x, y, 1)[0])
    mde = land["summary"]["power"]["minimum_detectable_difference"]["training_noise_only"]["6"]
    out = {"ranker": tau["reference"], "archs": len(keys), "slope_accuracy_per_nat": slope,
           "pearson_r": float(np.corrcoef(x, y)[0, 1]), "mde_6_seeds_accuracy": mde,
           "fitness_lead_needed_for_mde_nats": mde / slope, "predicted_accuracy_difference": {}}
    for pair, rows in ((curves or {}).get("paired") or {}).items():
        d = rows[-1]["mean_difference"]
        out["predicted_accuracy_difference"][pair] = None if d is None else d * slope
    return out


# ----------------------------------------------------------------------------------------
# Heritability: parents and their children, scored unraced on the full fitness set
# ----------------------------------------------------------------------------------------


def child(space, parent, kind: str, rng: random.Random, p: float):
    """One child of ``parent`` by operator ``kind`` (see the module docstring)."""
    from lvsearch.arch import Arch

    if kind == "mutation":
        return space.mutate(parent, rng, p)
    ops, inputs = list(parent.ops), [tuple(i) for i in parent.inputs]
    if kind in ("ops-only", "ops-resampled"):
        q = p if kind == "ops-only" else 1.0
        ops = [rng.choice(space.ops) if rng.random() < q else o for o in ops]
    else:
        new = []
        for n, inp in enumerate(inputs, start=1):
            if kind == "inputs-only":
                s = set(inp)
                for i in space.optional_inputs(n):
                    if rng.random() < p:
                        s ^= {i}
            else:
                s = {i for i in space.optional_inputs(n) if rng.random() < 0.5}
            s.add(n - 1)
            new.append(tuple(sorted(s)))
        inputs = new
    return Arch(tuple(ops), tuple(inputs))


def heritability(args) -> None:
    import torch

    from lvsearch.io import atomic_write_json
    from lvsearch.search.evaluator import SupernetEvaluator
    from lvsearch.train.supernet import load_dev
    from lvsearch.train.supernet import load_supernet

    torch.set_num_threads(1)
    loaded = load_supernet(args.supernet)
    count = loaded.supernet.num_params
    _, lo, hi = bert_band(loaded)
    space = loaded.space
    rng = random.Random(args.parent_seed)
    parents: dict[str, object] = {}
    while len(parents) < args.parents:
        a = space.sample(rng)
        if lo <= count(a) <= hi:
            parents.setdefault(a.key, a)
    fams = []
    for a in parents.values():
        kids = {}
        for kind in KINDS:
            for _ in range(1000):
                c = child(space, a, kind, rng, args.mutation_prob)
                if c.key != a.key and lo <= count(c) <= hi:
                    kids[kind] = c
                    break
        fams.append((a, kids))
    dev, _ = load_dev(loaded, None, 1024)
    ev = SupernetEvaluator(loaded.supernet, dev, seq_len=loaded.config.train.seq_len, fitness="loss")
    todo = [a for a, kids in fams for a in (a, *kids.values())]
    t0 = time.perf_counter()
    scores = {}
    for i in range(0, len(todo), 24):  # a family's members share prefixes: score them together
        for r in ev.evaluate_many(todo[i:i + 24]):
            scores[r.key] = {"fitness": r.fitness, "accuracy": r.accuracy, "params": r.params}
        print(f"heritability: {min(i + 24, len(todo))}/{len(todo)} scored, {time.perf_counter() - t0:.0f} s", flush=True)
    atomic_write_json(args.work / "heritability.json", {
        "supernet": str(args.supernet), "supernet_step": loaded.step, "dev_sequences": int(dev.input_ids.shape[0]),
        "fitness": "loss", "mutation_prob": args.mutation_prob, "parent_seed": args.parent_seed,
        "seconds": time.perf_counter() - t0,
        "families": [{"parent": a.key, "children": {k: c.key for k, c in kids.items()}} for a, kids in fams],
        "scores": scores})


def by_op_changes(rows: list) -> dict:
    """Children grouped by how many ops they changed: n, Pearson r with the parent (≥ 3
    children) and the SD of child − parent (≥ 2)."""
    out: dict = {}
    for ops in sorted({r[2][0] for r in rows}):
        g = np.array([(a, b) for a, b, (o, _) in rows if o == ops])
        out[str(ops)] = {"n": len(g),
                         "pearson_r": float(np.corrcoef(g[:, 0], g[:, 1])[0, 1]) if len(g) >= 3 else None,
                         "sd_child_minus_parent": float(np.std(g[:, 1] - g[:, 0], ddof=1)) if len(g) >= 2 else None}
    return out


def heritability_report(args) -> dict | None:
    from lvsearch.arch import Arch

    path = args.work / "heritability.json"
    if not path.is_file():
        return None
    h = json.loads(path.read_text())
    sc = {k: v["fitness"] for k, v in h["scores"].items()}
    fams = h["families"]
    pf = np.array([sc[f["parent"]] for f in fams])
    sd_pop = float(pf.std(ddof=1))
    q75 = float(np.quantile(pf, 0.75))
    out = {"parents": len(fams), "dev_sequences": h["dev_sequences"], "fitness": h["fitness"],
           "mutation_prob": h["mutation_prob"], "population_sd": sd_pop, "seconds": h["seconds"], "kinds": {}}
    for kind in KINDS:
        rows = [(sc[f["parent"]], sc[f["children"][kind]], hamming(f["parent"], f["children"][kind]))
                for f in fams if kind in f["children"]]
        p, c = np.array([r[0] for r in rows]), np.array([r[1] for r in rows])
        d = c - p
        top = [(a, b) for a, b, _ in rows if a >= q75]
        r = float(np.corrcoef(p, c)[0, 1])
        slope = float(np.polyfit(p, c, 1)[0])
        out["kinds"][kind] = {
            "n": len(rows), "pearson_r": r, "slope": slope,
            "mean_op_differences": float(np.mean([x[2][0] for x in rows])),
            "mean_input_differences": float(np.mean([x[2][1] for x in rows])),
            "sd_child_minus_parent": float(d.std(ddof=1)),
            "sd_child_minus_parent_over_population_sd": float(d.std(ddof=1)) / sd_pop,
            "mean_child_minus_parent": float(d.mean()),
            "top_quartile_parents": len(top),
            "top_quartile_child_better": sum(b > a for a, b in top),
            "top_quartile_mean_child_minus_parent": float(np.mean([b - a for a, b in top])) if top else None,
            "by_op_changes": by_op_changes(rows),
        }
    # variance split: half the mean squared parent-child difference of a resampled kind is the
    # variance the resampled part explains with the other part held fixed
    for kind, part in (("inputs-resampled", "inputs"), ("ops-resampled", "ops")):
        k = out["kinds"][kind]
        d = np.array([sc[f["children"][kind]] - sc[f["parent"]] for f in fams if kind in f["children"]])
        k["variance_within_other_part_fixed"] = float(np.mean(d ** 2) / 2)
        k["share_of_population_variance"] = float(np.mean(d ** 2) / 2) / sd_pop ** 2
    out["genes"] = {"ops": len(Arch.from_key(fams[0]["parent"]).ops),
                    "optional_inputs": sum(max(0, n - 1) for n in range(1, len(Arch.from_key(fams[0]["parent"]).ops) + 1))}
    return out


# ----------------------------------------------------------------------------------------


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--supernet", type=Path, required=True, help="train-supernet run folder")
    p.add_argument("--work", type=Path, required=True, help="folder for the searches, logs and heritability.json")
    p.add_argument("--part", choices=("curves", "heritability"), default=None, help="what to compute")
    p.add_argument("--report", action="store_true",
                   help="aggregate what exists in --work into benchmarks/results/NAME.json")
    p.add_argument("--strategies", nargs="+", default=list(STRATEGIES), choices=STRATEGIES, help="search strategies")
    p.add_argument("--seeds", type=int, default=6, help="search seeds 0..N-1 (the report reads these)")
    p.add_argument("--seed-list", type=int, nargs="+", default=None,
                   help="run and report these seeds instead of 0..--seeds-1 (e.g. the 10-seed test's strategy "
                        "choice on seeds 100 101 102)")
    p.add_argument("--population", type=int, default=20, help="population P of every search")
    p.add_argument("--iterations", type=int, default=10, help="iterations T (P × T evaluations)")
    p.add_argument("--jobs", type=int, default=2, help="searches at once (one torch thread each)")
    add_dispatch(p, "the searches of --part curves")
    p.add_argument("--budget", type=int, default=None, metavar="PASSES",
                   help="give every search this many dev-sequence passes (evolve --budget: equal compute; raise "
                        "--iterations so the budget binds); the report adds curves at equal passes")
    p.add_argument("--parents", type=int, default=40, help="heritability: random band parents")
    p.add_argument("--parent-seed", type=int, default=7, help="heritability: seed of the parents and children")
    p.add_argument("--mutation-prob", type=float, default=0.1, help="heritability: p of the operators")
    p.add_argument("--name", default="search_climb",
                   help="result file name (e.g. search_climb_1000 for a report at a longer budget)")
    args = p.parse_args()
    args.dispatch = dispatch_options(args)
    if args.part is None and not args.report:
        p.error("nothing to do: pass --part curves|heritability and/or --report")
    if not (args.supernet / "config.json").is_file():
        p.error(f"--supernet {args.supernet} is not a train-supernet run folder (no config.json)")
    args.work.mkdir(parents=True, exist_ok=True)
    if args.part == "curves":
        curves(args)
    elif args.part == "heritability":
        heritability(args)
    if args.report:
        if not any((args.work / x).exists() for x in ("searches", "heritability.json")):
            p.error(f"--report: {args.work} holds no searches and no heritability.json yet (run --part first)")
        result = {"what": "does the EA climb its fitness faster than random search? (benchmarks/search_climb.py)",
                  "settings": {"supernet": str(args.supernet), "population": args.population,
                               "iterations": args.iterations, "seeds": args.seed_list or args.seeds,
                               "budget_passes": args.budget, "strategies": args.strategies,
                               "fitness": "evolve's default (−loss on 1024 dev sequences, racing 64,256)",
                               "threads_per_run": 1, "jobs": args.jobs},
                  "machine": machine(), "curves": curves_report(args), "heritability": heritability_report(args)}
        result["standalone_translation"] = standalone_translation(args, result["curves"])
        print(write_result(args.name, result))


if __name__ == "__main__":
    run_main(main)
