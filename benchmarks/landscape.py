"""The landscape benchmark: how much a search can gain in a space, and which fitness sees it.

A search can only beat random search by as much as the space's standalone accuracies spread
beyond the noise of one training run. This benchmark measures that spread on the space of its
``--supernet`` (a quickstart-recipe supernet, hidden 128; the recipe's own space is ``lvbert``, so
the committed landscapes trained theirs with ``--set space=lvbert-elc`` (``landscape.json``:
``lvbert-elc@12``) or ``--set space=lvbert-elastic --set num_slots=24``
(``landscape_elastic.json``)) inside ``bert``'s parameter band (± 5%):

* **architectures** (``plan.json``, fixed on the first run): ``bert``, ``sandwich``,
  ``random:1`` (the arms benchmark's random architecture), ``--random`` seeded draws of
  ``SearchSpace.sample`` that fall inside the band, and every architecture file given with
  ``--picks`` (the searched picks; appended to the plan when first given);
* **training**: every one standalone from scratch with ``retrain-quickstart`` (MLM) for
  ``--steps`` steps (2000 = 4.10M tokens: past the neighbour-count floor for searched
  architectures), pretraining seed 0; the first ``--seeded`` of them (``bert``, ``sandwich``,
  ``random:1`` and the first random draws) also with seeds 1..``--seeds``-1. A seed that
  ``benchmarks/results/search_arms.json`` already measured with the same command is taken from
  there, but only when this benchmark's seed-0 run of that architecture reproduces the arms'
  seed-0 accuracy exactly (the same code, data and recipe); otherwise it is trained here;
* **evaluation**: ``lvsearch evaluate --no-blimp --mlm-data`` on 512 dev sequences (4,752
  targets) with the neighbour-count floor on the same targets.

``--report`` aggregates what exists into ``benchmarks/results/landscape.json``: the
distribution of standalone MLM accuracy (median, top decile, best) over the random draws
inside the band (``random:1`` included when its parameter count is in the band: it is a draw of
the space too),
σ over seeds (pooled), headroom = (best − median) / σ_seed, the exact best-of-k-random curve
(expected best standalone accuracy among k distinct random draws, from the order statistics),
Kendall τ of the parameter count (a zero-cost control, Ning et al. 2021), and a
``rank_check.json``-format file (``landscape_rank_check.json``) that ``lvsearch rank-check
--reuse`` scores any supernet fitness variant against. With ``--supernet`` the report also runs
those fitness variants (``--fitness-variants``), each τ with its paired bootstrap difference
against the search's default fitness (−loss on 1024 dev sequences; the same architectures
resampled for both, since two overlapping marginal intervals of correlated τ say little).

Every step is a CLI call, resumable: re-running the same command trains only what is missing
(retrains resume from their checkpoints). The committed ``landscape.json`` carries the plan and
every finished result, so on another machine (no ``WORK`` folder) the same command continues
the same plan and trains only what it lacks; ``--picks`` and ``--supernet`` must then be a
supernet trained with the same command (the picks' keys are in the plan). Runs go ``--jobs`` at a time with
``OMP_NUM_THREADS=--threads`` each, in ``--order`` (:func:`run_order`): ``plan`` (the default)
starts seed 0 of every architecture, then the later seeds; ``gate`` starts what the room rule
(``summary.gate``) needs first — seed 0 of the seeded architectures and of the picks, then the
seeded architectures' later seeds (σ_seed), then the other random draws — so that a partial run
can already be read by the rule. In both, a later seed is trained only after its seed 0 has
finished: its seed-0 result decides whether ``search_arms.json``'s seed is taken instead. With
``--executor local|slurm`` (lvsearch.dispatch; docs/cluster.md) each run is an independent
submitit job instead, ``--max-parallel`` at a time, stage by stage in the same order
(:func:`run_stages`), logs under ``WORK/dispatch/``.

Usage::

    python benchmarks/landscape.py --supernet SN --data CORPUS --work W [--random 18]
        [--picks best.json ...] [--seeded 6] [--seeds 3] [--jobs 2] [--order plan|gate] [--report]
        [--executor slurm --max-parallel 24 --slurm-partition P --slurm-cpus-per-job 2]
"""

from __future__ import annotations

import argparse
import json
import math
import re
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from _common import (RESULTS, add_dispatch, bert_band, dispatch_options, dispatch_stage, draw_in_band, exit_on_failures,
                     machine, result_path, run_lvsearch, run_main, write_result)

#: The space of a plan with no supernet to say otherwise; a plan records its own (``plan["space"]``).
SPACE = "lvbert-elc"
#: Slots of ``retrain-quickstart``; a plan with another count passes ``--set num_slots``.
RECIPE_SLOTS = 12
REFERENCES = ["bert", "sandwich", "random:1"]
#: The arms benchmark's names of the reference architectures (benchmarks/search_arms.py).
ARMS_NAMES = {"bert": "bert", "sandwich": "sandwich", "random:1": "random-arch"}


# ----------------------------------------------------------------------------------------
# The plan: which architectures, fixed on the first run
# ----------------------------------------------------------------------------------------


#: How every run of a plan is trained and evaluated (``--steps``, ``--eval-every``,
#: ``--dev-sequences``, ``--threads``; the thread count changes a retrain's floats): fixed when the
#: plan is made, so runs of one plan stay comparable; these defaults apply to a new plan.
RUN_SETTINGS = {"steps": 2000, "eval_every": 400, "dev_sequences": 512, "threads": 1}
#: Which runs a plan makes (``--seeds``, ``--seeded``): recorded with the plan like
#: :data:`RUN_SETTINGS`, but an explicit value on a later call changes it (more seeds).
RUN_SET = {"seeds": 3, "seeded": 6}


def plan_training(args, plan: dict, source: Path) -> None:
    """Fill ``plan["training"]`` (:data:`RUN_SETTINGS` and :data:`RUN_SET`) and set ``args`` to
    it, so every run and the report use what the plan was trained with, not the command-line
    defaults. A value not given on the command line (None) is the plan's. A plan from before
    this record has none to hold to: an explicit value is taken as given, and a missing one is
    the committed result's setting when that result is of the same plan (those settings were
    the command line's, so they are a guess, printed as such), else the default.

    Raises:
        LvsearchError: against the plan's own ``training`` record (``source`` names the plan
            file): an explicit :data:`RUN_SETTINGS` value other than the recorded one, or a
            :data:`RUN_SET` value below it (its trained seeds would drop out of every report);
            nothing is written then.
    """
    from lvsearch.errors import LvsearchError

    rec = plan.setdefault("training", {})
    recorded = dict(rec)
    guess = {}
    old = committed()
    if not recorded and old.get("plan", {}).get("space") == plan["space"] and old["plan"].get("band") == plan["band"]:
        st = old.get("settings", {})
        guess = {k: st[v] for k, v in (("steps", "steps"), ("dev_sequences", "dev_sequences"), ("seeds", "seeds"),
                                       ("seeded", "seeded"), ("threads", "threads_per_run")) if v in st}
    guessed = []
    for k, default in {**RUN_SETTINGS, **RUN_SET}.items():
        given, flag = getattr(args, k, None), "--" + k.replace("_", "-")
        if given is not None and k in recorded and (given != recorded[k] if k in RUN_SETTINGS else given < recorded[k]):
            what = ("runs of one plan must be trained alike to be compared" if k in RUN_SETTINGS else
                    f"a smaller {flag} would drop the trained ones from every report")
            raise LvsearchError(f"{flag} {given}: the plan in {source} records {flag} {recorded[k]}; {what}",
                                fix=f"drop {flag} (the plan's value is used), or pass another --work and --name for a "
                                    f"landscape at {flag} {given}")
        if given is None and k not in recorded and k in guess:
            guessed.append(f"{flag} {guess[k]}")
        rec[k] = given if given is not None else recorded.get(k, guess.get(k, default))
        setattr(args, k, rec[k])
    if guessed:
        print(f"the plan in {source} records no run settings: taking {', '.join(guessed)} from the committed "
              f"{NAME}.json (what its report was run with); pass them explicitly if the runs were trained otherwise",
              flush=True)


def make_plan(args) -> dict:
    """Load ``WORK/plan.json``, or create it; ``--picks`` files not yet in it are appended, and
    the plan's run settings are set on ``args`` (:func:`plan_training`).

    Raises:
        LvsearchError: no plan to report (no ``--supernet``, no plan file), ``--picks`` without
            ``--supernet``, a plan of another space than the supernet's or of other widths (its
            ``bert`` parameter count and band differ from the supernet's), a pick of another
            space, or a band holding fewer than ``--random``
            distinct architectures (:func:`_common.draw_in_band`), a run setting other than
            the plan's (:func:`plan_training`), or ``--report`` with no plan to report; nothing
            is written then.
    """
    from lvsearch.arch import Arch, resolve_arch
    from lvsearch.errors import LvsearchError
    from lvsearch.io import atomic_write_json
    from lvsearch.train.supernet import load_supernet

    path = args.work / "plan.json"
    if args.supernet is None:  # --report on another machine: the committed plan as it is
        plan, source = (json.loads(path.read_text()), path) if path.exists() else (committed().get("plan"),
                                                                                   RESULTS / f"{NAME}.json")
        if not plan:
            raise LvsearchError(f"--report without --supernet: no plan in {path} or in {RESULTS / NAME}.json",
                                fix="pass --supernet (the plan is made from its space and band), or the --work or "
                                    "--name of an existing landscape")
        if args.picks:
            raise LvsearchError("--picks needs --supernet: the band and the space the picks are checked against "
                                "come from it", fix="pass --supernet with --picks")
        plan_training(args, plan, source)
        if plan.get("model"):
            set_counter(plan["model"], plan["band"])
        else:
            print(f"the plan in {source} does not record its supernet's model: the additive fit's band draws "
                  "(and the room rule's fit estimate) need --supernet", flush=True)
        return plan
    loaded = load_supernet(args.supernet)
    space = loaded.space
    count = loaded.supernet.num_params
    ref, lo, hi = bert_band(loaded)
    model = {"space": loaded.run_config["space"], "dims": loaded.run_config["dims"],
             "mixing_per_op": bool(loaded.config.mixing_per_op)}
    fill_counter(count, (lo, hi), space, loaded.dims)
    plan = None
    if path.exists():
        plan, source = json.loads(path.read_text()), path
    elif committed().get("plan"):  # another machine: continue the committed plan
        plan, source = committed()["plan"], RESULTS / f"{NAME}.json"
    if plan is not None and plan["space"] != plan_space_of(space):
        raise LvsearchError(f"--supernet {args.supernet} is of {plan_space_of(space)}, but the plan in {source} is of "
                            f"{plan['space']}", fix="pass the supernet the plan was made with, or another --name and "
                                                    "--work for a landscape of this space")
    if plan is not None and (plan["band"] != [lo, hi] or plan["bert_params"] != ref):
        raise LvsearchError(f"--supernet {args.supernet} has other widths than the plan in {source}: bert has "
                            f"{ref:,} parameters on it (band [{lo:,}, {hi:,}]), {plan['bert_params']:,} in the plan "
                            f"(band [{plan['band'][0]:,}, {plan['band'][1]:,}])",
                            fix="pass a supernet trained with the plan's command (its widths), or another --name and "
                                "--work for a landscape of these widths")
    if plan is None and args.report:
        raise LvsearchError(f"--report: no plan in {path} or in {RESULTS / NAME}.json, so nothing was trained to report",
                            fix="drop --report to make the plan and train it, or pass the --work or --name of an "
                                "existing landscape")
    if plan is None:
        rows = [{"name": n, "source": "reference", "arch": resolve_arch(n, space)} for n in REFERENCES]
        rows += [{"name": f"random:{seed}", "source": "random", "arch": a} for seed, a in
                 draw_in_band(space, count, lo, hi, args.random, first_seed=1000, seen=[r["arch"].key for r in rows])]
        plan = {"space": plan_space_of(space), "band": [lo, hi], "bert_params": ref, "archs": [
            {"id": f"{i:02d}", "name": r["name"], "source": r["source"], "key": r["arch"].key,
             "ops": r["arch"].compact, "params": count(r["arch"])} for i, r in enumerate(rows)], "training": {}}
        source = path
    plan_training(args, plan, source)
    plan.setdefault("model", model)  # what a report without the supernet counts parameters with
    known = {r["key"]: r for r in plan["archs"]}
    for f in args.picks or []:
        a = Arch.from_json(f)
        space.validate(a, source=f)
        if a.key in known:
            row = known[a.key]
            if row["name"] != str(f) and str(f) not in row.get("also_picks", []):  # its runs stand for the pick
                row.setdefault("also_picks", []).append(str(f))
                print(f"{f}: the same architecture as plan row {row['id']} ({row['name']}); not trained again, that "
                      "row's results count for this pick too", flush=True)
            continue
        if not lo <= count(a) <= hi:
            print(f"{f}: {count(a):,} parameters, outside the band [{lo:,}, {hi:,}]; left out", flush=True)
            continue
        plan["archs"].append({"id": f"{len(plan['archs']):02d}", "name": str(f), "source": "pick", "key": a.key,
                              "ops": a.compact, "params": count(a)})
        known[a.key] = plan["archs"][-1]
    if PARAM_COUNTER["space_has_variants"]:  # the fit's labels, kept for a report without the supernet
        for r in plan["archs"]:
            r.setdefault("choices", arch_choices(Arch.from_key(r["key"])))
    args.work.mkdir(parents=True, exist_ok=True)
    (args.work / "archs").mkdir(exist_ok=True)
    for r in plan["archs"]:
        arch_file = args.work / "archs" / f"{r['id']}.json"
        if not arch_file.exists():
            Arch.from_key(r["key"]).to_json(arch_file, space=plan_space_name(plan["space"]))
    atomic_write_json(path, plan)
    return plan


# ----------------------------------------------------------------------------------------
# Training and evaluation
# ----------------------------------------------------------------------------------------


#: The result's name (``--name``): ``benchmarks/results/<NAME>.json`` and the docs block's markers.
NAME = "landscape"


def committed() -> dict:
    """``benchmarks/results/<NAME>.json`` as committed (empty when absent): its plan and the
    per-seed results let the benchmark continue on a machine without the earlier run folders."""
    try:
        return json.loads((RESULTS / f"{NAME}.json").read_text())
    except (OSError, ValueError):
        return {}


def committed_seed(row: dict, seed: int) -> dict | None:
    """A result of ``row`` (same key) at ``seed`` measured by this benchmark and committed."""
    for r in committed().get("archs", []):
        if r.get("key") == row["key"] and r.get("id") == row["id"]:
            m = (r.get("seeds") or {}).get(str(seed))
            if m and m.get("source") == "this benchmark":
                return m
    return None


def arch_args(args, row: dict) -> list[str]:
    """The ``--arch`` of a run: references by name (the arms benchmark's exact command), the
    rest by file; ``--set num_slots=N`` when the plan's space is not the recipe's 12 slots."""
    name, _, slots = args.plan_space.rpartition("@")
    slots = int(slots)
    resize = ["--set", f"num_slots={slots}"] if slots != RECIPE_SLOTS else []
    if row["source"] == "reference":
        extra = ["--set", f"space={name}"] if row["name"].startswith("random:") else []
        return ["--arch", row["name"], *extra, *resize]
    return ["--arch", str(args.work / "archs" / f"{row['id']}.json"), *resize]


def run_one(args, row: dict, seed: int) -> str:
    run = args.work / "runs" / f"{row['id']}-s{seed}"
    log = args.work / "logs" / f"{row['id']}-s{seed}.log"
    if (run / "mlm.json").exists():
        return f"{row['id']} {row['ops']} s{seed}: done"
    if committed_seed(row, seed) is not None:
        return f"{row['id']} {row['ops']} s{seed}: in the committed {NAME}.json"
    t0 = time.time()
    if not (run / "summary.json").exists():
        if (run / "checkpoints" / "latest.json").exists():
            cmd = ["retrain", "--data", str(args.data), "--out", str(run), "--resume"]
        else:
            cmd = ["retrain", *arch_args(args, row), "--config", "retrain-quickstart", "--data", str(args.data),
                   "--out", str(run), "--set", f"train.seed={seed}", "--set", f"train.steps={args.steps}",
                   "--set", f"train.eval_every={args.eval_every}", "--set", f"train.checkpoint_every={args.eval_every}",
                   "--set", f"eval.dev_sequences={args.dev_sequences}", "--overwrite"]
        run_lvsearch(cmd, log, args.threads)
    run_lvsearch(["evaluate", "--model", str(run / "model"), "--out", str(run / "mlm.json"), "--no-blimp",
                  "--mlm-data", str(args.data), "--dev-sequences", str(args.dev_sequences),
                  "--threads", str(args.threads)], log, args.threads)
    return f"{row['id']} {row['ops']} s{seed}: {time.time() - t0:.0f} s"


def _mlm(run: Path) -> dict | None:
    try:
        m = json.loads((run / "mlm.json").read_text())["mlm"]
    except (OSError, ValueError, KeyError):
        return None
    return {"accuracy": m["accuracy"], "loss": m["loss"], "targets": m["predicted_tokens"],
            "floor": m["floors"]["neighbour-count"]["accuracy"], "beats_floor": m["floors"]["beats_floor"],
            "source": "this benchmark"}


def arms_seed(row: dict, seed: int) -> dict | None:
    """Seed ``seed`` of a reference architecture from search_arms.json (same command), or None."""
    arm = ARMS_NAMES.get(row["name"]) if row["source"] == "reference" else None
    try:
        per_seed = json.loads((RESULTS / "search_arms.json").read_text())["arms"][arm]["per_seed"]
        m = per_seed[str(seed)]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return {"accuracy": m["mlm_accuracy"], "loss": m["mlm_loss"], "targets": m["mlm_targets"], "floor": m["floor"],
            "beats_floor": m["beats_floor"], "source": "benchmarks/results/search_arms.json"}


def reproduces_arms(args, row: dict) -> bool:
    """True when this benchmark's seed-0 run of ``row`` has the arms' seed-0 accuracy and loss."""
    mine = _mlm(args.work / "runs" / f"{row['id']}-s0") or committed_seed(row, 0)
    theirs = arms_seed(row, 0)
    return bool(mine and theirs and mine["accuracy"] == theirs["accuracy"]
                and abs(mine["loss"] - theirs["loss"]) < 1e-9)


def run_order(rows: list[dict], seeded: int, seeds: int, order: str = "plan") -> list[tuple[dict, int]]:
    """The (architecture, pretraining seed) runs of a plan's ``rows`` in the order they start;
    every run once.

    ``plan``: every seed-0 run in plan order, then seeds 1..``seeds``-1 of the first ``seeded``.
    ``gate``: what the room rule (:func:`gate`) needs first: seed 0 of the first ``seeded``
    architectures and of the picks (``source == "pick"``), then the seeded architectures' later
    seeds (σ_seed), then seed 0 of the remaining random draws (the prior the best is shrunk
    toward). In both a later seed comes after its seed 0. With no picks ``gate`` is ``plan``
    with the later seeds moved before the unseeded draws; a pick among the first ``seeded`` is
    trained once, as a seeded architecture.

    Raises ValueError on another ``order``."""
    later = [(r, s) for s in range(1, seeds) for r in rows[:seeded]]
    if order == "plan":
        return [(r, 0) for r in rows] + later
    if order != "gate":
        raise ValueError(f"unknown run order {order!r}: plan or gate")
    early = {r["id"] for i, r in enumerate(rows) if i < seeded or r["source"] == "pick"}
    return ([(r, 0) for r in rows if r["id"] in early] + later
            + [(r, 0) for r in rows if r["id"] not in early])


def run_stages(rows: list[dict], seeded: int, seeds: int, order: str = "plan") -> list[list[tuple[dict, int]]]:
    """:func:`run_order` cut into stages for ``--executor local|slurm``, where a stage's jobs
    all run before the next stage starts: a new stage wherever the order switches between seed
    0 and later seeds (a later seed needs its seed-0 result), so ``plan`` is [seed 0 of every
    architecture, the later seeds] and ``gate`` [seed 0 of the seeded architectures and the
    picks, their later seeds, seed 0 of the other draws]."""
    stages: list[list[tuple[dict, int]]] = []
    for r, s in run_order(rows, seeded, seeds, order):
        if not stages or (s == 0) != (stages[-1][-1][1] == 0):
            stages.append([])
        stages[-1].append((r, s))
    return stages


def train_all(args, plan: dict) -> None:
    """Every run of the plan (:func:`run_order`), ``--jobs`` at a time in a thread pool, or as
    dispatched jobs (:func:`train_dispatched`). The pool takes jobs first in, first out, so a
    later seed, submitted after its seed 0, starts only after that seed 0 has started; it then
    waits for its result (which decides whether search_arms.json's seed can be taken) and is
    not run when its seed 0 failed. Every run's line is printed in :func:`run_order`; failed runs
    (their error names the log) are listed after every run has ended, with a non-zero exit
    (``SystemExit``), and the same command again continues them."""
    rows = plan["archs"]
    if not args.dispatch.inline:
        return train_dispatched(args, rows)
    with ThreadPoolExecutor(args.jobs) as pool:
        first, futures = {}, []
        for r, s in run_order(rows, args.seeded, args.seeds, args.order):
            if s == 0:
                first[r["id"]] = pool.submit(run_one, args, r, 0)
                futures.append(first[r["id"]])
                continue

            def job(r=r, s=s):
                if first[r["id"]].exception() is not None:
                    return f"{r['id']} {r['ops']} s{s}: not run (its seed 0 failed)"
                if arms_seed(r, s) is not None and reproduces_arms(args, r):
                    return f"{r['id']} {r['ops']} s{s}: from search_arms.json (seed 0 reproduced)"
                return run_one(args, r, s)
            futures.append(pool.submit(job))
        failed = []
        for f in futures:
            try:
                print(f.result(), flush=True)
            except Exception as e:  # noqa: BLE001 - listed below; the other runs go on
                failed.append(str(e))
                print(f"failed: {e}", flush=True)
    if failed:
        raise SystemExit(f"{len(failed)} of {len(futures)} runs failed (the same command again continues them):\n"
                         + "\n".join(f"  {e}" for e in failed))


def train_dispatched(args, rows: list[dict]) -> None:
    """``--executor local|slurm``: the runs as independent jobs, stage by stage in ``--order``
    (:func:`run_stages`); a later seed is submitted only after its seed-0 stage has ended (the
    seed-0 result decides whether search_arms.json's seeds can be reused) and not at all when
    its seed 0 failed. A failed job is reported with its log after all others ran (exit
    non-zero), and the same command again continues it from its checkpoint (run_one resumes)."""
    from lvsearch.dispatch import Job

    failures: dict = {}
    total = 0
    stages = run_stages(rows, args.seeded, args.seeds, args.order)
    for i, stage in enumerate(stages):
        jobs = []
        for r, s in stage:
            if s > 0 and f"{r['id']}-s0" in failures:
                continue
            if s > 0 and arms_seed(r, s) is not None and reproduces_arms(args, r):
                print(f"{r['id']} {r['ops']} s{s}: from search_arms.json (seed 0 reproduced)", flush=True)
                continue
            jobs.append(Job(f"{r['id']}-s{s}", run_one, {"args": args, "row": r, "seed": s}))
        # the plan order's two stages keep their folder names (seed-0, later-seeds)
        name = ("seed-0" if stage[0][1] == 0 else "later-seeds") + (f"-{i}" if len(stages) > 2 else "")
        dispatch_stage(args.dispatch, jobs, args.work / "dispatch" / name, failures)
        total += len(jobs)
    exit_on_failures(failures, total)


# ----------------------------------------------------------------------------------------
# Aggregation
# ----------------------------------------------------------------------------------------


def best_of_k(values: list[float]) -> list[dict]:
    """Expected maximum of ``k`` draws without replacement from ``values``, k = 1..n (exact:
    the i-th smallest is the maximum of a k-subset with probability C(i−1, k−1) / C(n, k))."""
    xs = sorted(values)
    n = len(xs)
    out = []
    for k in range(1, n + 1):
        total = math.comb(n, k)
        out.append({"k": k, "expected_best": sum(xs[i] * math.comb(i, k - 1) for i in range(k - 1, n)) / total})
    return out


def collect(args, plan: dict) -> list[dict]:
    rows = []
    for r in plan["archs"]:
        seeds = {}
        for s in range(args.seeds):
            m = _mlm(args.work / "runs" / f"{r['id']}-s{s}") or committed_seed(r, s)
            if m is None and s > 0 and reproduces_arms(args, r):
                m = arms_seed(r, s)
            if m is not None:
                seeds[str(s)] = m
        if not seeds:
            continue
        accs = [m["accuracy"] for m in seeds.values()]
        rows.append({**r, "seeds": seeds, "accuracy_seed0": seeds.get("0", {}).get("accuracy"),
                     "accuracy_mean": sum(accs) / len(accs),
                     "loss_mean": sum(m["loss"] for m in seeds.values()) / len(seeds),
                     "beats_floor_all": all(m["beats_floor"] for m in seeds.values())})
    return rows


def is_random_draw(row: dict, band: list[int] | tuple[int, int]) -> bool:
    """A uniform draw of the space inside the plan's parameter ``band`` ([lo, hi]): the seeded
    draws (drawn in the band) and the reference ``random:1`` when its parameter count is in the
    band (it is an unconditioned draw: on ``lvbert-elastic@24`` it has 3.2M parameters, outside
    ``bert``'s ±5%, and is no sample of the band's distribution there)."""
    lo, hi = band
    return (row["source"] == "random" or row["name"].startswith("random:")) and lo <= row["params"] <= hi


def is_fixed_reference(row: dict) -> bool:
    """A reference order (``bert``, ``sandwich``), not a draw of the space (``random:1`` is a draw,
    in the band or not)."""
    return row["source"] == "reference" and not row["name"].startswith("random:")


def summarize(rows: list[dict], band: list[int]) -> dict:
    """The landscape's summary (``summary`` of the result) from its :func:`collect` rows; the
    random draws are those inside ``band`` (:func:`is_random_draw`)."""
    import numpy as np
    from scipy import stats

    from lvsearch.stats import bootstrap_interval

    one = [r for r in rows if r["accuracy_seed0"] is not None]
    rand = [r["accuracy_seed0"] for r in one if is_random_draw(r, band)]
    multi = [[m["accuracy"] for m in r["seeds"].values()] for r in rows if len(r["seeds"]) >= 2]
    dof = sum(len(v) - 1 for v in multi)
    sigma = math.sqrt(sum(((np.asarray(v) - np.mean(v)) ** 2).sum() for v in multi) / dof) if dof else None
    out: dict = {"archs_trained": len(one), "random_draws": len(rand),
                 "all_past_floor": all(r["beats_floor_all"] for r in one),
                 "past_floor": sum(r["beats_floor_all"] for r in one)}
    for label, vals in (("random", rand), ("all", [r["accuracy_seed0"] for r in one])):
        if len(vals) >= 2:
            v = np.asarray(vals)
            out[f"distribution_{label}"] = {
                "n": len(vals), "min": float(v.min()), "median": float(np.median(v)),
                "top_decile_threshold": float(np.quantile(v, 0.9)), "best": float(v.max()),
                "top_decile_spread": float(v.max() - np.quantile(v, 0.9)), "std": float(v.std(ddof=1))}
    out["sigma_seed"] = {"pooled_std": sigma, "dof": dof, "archs": len(multi),
                         "per_arch_std": [float(np.std(v, ddof=1)) for v in multi]}
    if sigma and "distribution_random" in out:
        d = out["distribution_random"]
        out["headroom"] = {"best_minus_median_over_sigma_seed": (d["best"] - d["median"]) / sigma,
                           "top_decile_minus_median_over_sigma_seed": (d["top_decile_threshold"] - d["median"]) / sigma}
    if len(rand) >= 2:
        out["best_of_k_random"] = best_of_k(rand)
    if len(rand) >= 2:
        ranked = sorted(rand)
        out["picks"] = [{"id": r["id"], "name": r["name"], "ops": r["ops"], "accuracy_seed0": r["accuracy_seed0"],
                         "percentile_among_random": sum(v < r["accuracy_seed0"] for v in ranked) / len(ranked),
                         "in_top_decile": r["accuracy_seed0"] >= float(np.quantile(ranked, 0.9))}
                        for r in one if r["source"] == "pick"]
    if sigma:
        out["power"] = power(sigma)
    paired = pick_pairs(rows)
    if paired:
        out["pick_pairs"] = paired
    additive = additive_fit(rows)
    if additive:
        out["additive"] = additive
    if sigma and additive and out.get("power") and len(rand) >= 2:  # the shrinkage needs the draws' variance
        out["gate"] = gate(rows, band, sigma, additive, out["power"])
        past = [[m["accuracy"] for m in r["seeds"].values()] for r in rows
                if len(r["seeds"]) >= 2 and r["beats_floor_all"]]
        dof_past = sum(len(v) - 1 for v in past)
        if dof_past and len(past) < len(multi):  # sensitivity: σ_seed of the architectures a test compares
            s_past = math.sqrt(sum(((np.asarray(v) - np.mean(v)) ** 2).sum() for v in past) / dof_past)
            out["gate"]["past_floor_sigma"] = {"sigma_seed": s_past, "archs": len(past), "dof": dof_past,
                                               **gate(rows, band, s_past, additive, power(s_past))}
        fixed = [r for r in rows if not is_fixed_reference(r)]
        refit = additive_fit(fixed) if len(fixed) < len(rows) else None
        if refit:  # sensitivity: the fit without the fixed reference orders (far below the band's draws)
            out["gate"]["without_references"] = {"left_out": [r["name"] for r in rows if is_fixed_reference(r)],
                                                 "additive_n": refit["n"], "additive_loo_r2": refit["loo_r2"],
                                                 **gate(rows, band, sigma, refit, out["power"])}
    if len(one) >= 3:
        x, y = [r["params"] for r in one], [r["accuracy_seed0"] for r in one]
        t = stats.kendalltau(x, y)
        out["params_control"] = {"kendall_tau": float(t.statistic), "p": float(t.pvalue),
                                 "kendall_tau_ci95": list(bootstrap_interval(x, y, "kendall")),
                                 "what": "Kendall τ of the parameter count vs standalone accuracy (zero-cost control)"}
    return out


def pick_pairs(rows: list[dict], seeds: int = 10) -> dict | None:
    """The EA − random-search difference of the landscape's own searched picks, paired by
    search folder (``OUT/best.json`` with ``OUT/random/best.json`` of one ``evolve
    --compare-random``), seed-0 standalone accuracy: per search seed, their mean and SD, and
    the difference a paired t test over ``seeds`` seeds would detect were that SD the
    test's (reported beside the pre-registered rule of :func:`gate`, not used by it: a few
    seeds estimate an SD poorly). None with fewer than 2 pairs."""
    from lvsearch.stats import detectable_difference

    by_name = {n: r for r in rows if r["accuracy_seed0"] is not None for n in pick_names(r)}
    diffs = []
    for name, r in sorted(by_name.items()):
        if Path(name).parent.name == "random":
            continue
        twin = by_name.get(str(Path(name).parent / "random" / Path(name).name))
        if twin is not None:
            diffs.append({"ea": name, "random_search": str(Path(name).parent / "random" / Path(name).name),
                          "difference": r["accuracy_seed0"] - twin["accuracy_seed0"]})
    if len(diffs) < 2:
        return None
    d = np.array([x["difference"] for x in diffs])
    sd = float(d.std(ddof=1))
    return {"pairs": diffs, "n": len(d), "mean": float(d.mean()), "sd": sd,
            "detectable_at": {str(seeds): detectable_difference(sd, seeds) if sd > 0 else None}}


def pick_names(row: dict) -> list[str]:
    """The ``--picks`` files a plan row stands for: its own name when it is a pick, and every
    later pick of the same architecture (``also_picks``, a draw or reference included)."""
    return ([row["name"]] if row["source"] == "pick" else []) + list(row.get("also_picks", []))


def is_random_search_pick(row: dict) -> bool:
    """A pick of random search: ``evolve --compare-random`` writes it to ``OUT/random/best.json``."""
    return any(Path(n).parent.name == "random" for n in pick_names(row))


def gate(rows: list[dict], band: list[int], sigma_seed: float, additive: dict, power_: dict, seeds: int = 10) -> dict:
    """The pre-registered room test of the 10-seed search test (docs/results.md, "The 10-seed
    test"): the space shows room when (the better of the additive fit's best in-band
    prediction, counted only where the fit predicts at all (leave-one-out R² > 0), and the best
    trained non-reference architecture shrunk for selection) − (the mean standalone accuracy
    of random search's picks) ≥ the difference a paired t test over ``seeds`` seeds detects.

    The shrinkage is empirical Bayes over the random draws inside ``band`` (seed 0): an architecture's mean over
    n seeds x moves to m + B (x − m), B = τ² / (τ² + σ_seed² / n), with m and τ² + σ_seed² the
    draws' mean and variance (τ² clipped at 0): the best of many noisy runs is biased up by
    its selection. Every candidate is shrunk with its own n and the best is the highest shrunk
    mean (ties: the higher raw mean), so a 1-seed lucky run does not outrank a 10-seed mean
    that shrinks less. Random search's picks are not shrunk: they were selected on supernet
    fitness, whose noise is independent of their standalone retrains, so their measured mean is
    not biased up by that selection. Accuracy is a fraction (0.01 = 1 pp).

    Raises:
        ValueError: fewer than 2 trained random draws inside ``band`` (:func:`summarize` then
            leaves ``gate`` out).
    """
    rand = np.array([r["accuracy_seed0"] for r in rows if is_random_draw(r, band) and r["accuracy_seed0"] is not None])
    if len(rand) < 2:
        raise ValueError(f"gate: {len(rand)} trained random draw(s) in the band; the shrinkage needs 2 or more")
    m, total = float(rand.mean()), float(rand.var(ddof=1))
    tau2 = max(0.0, total - sigma_seed ** 2)
    cands = [r for r in rows if r["source"] != "reference" or is_random_draw(r, band)]

    def shrinkage(r: dict) -> float:
        return tau2 / (tau2 + sigma_seed ** 2 / len(r["seeds"])) if tau2 > 0 else 0.0

    def shrunk_mean(r: dict) -> float:
        return m + shrinkage(r) * (r["accuracy_mean"] - m)

    best = max(cands, key=lambda r: (shrunk_mean(r), r["accuracy_mean"]))
    n, shrink, shrunk = len(best["seeds"]), shrinkage(best), shrunk_mean(best)
    fit = additive.get("band_best_predicted") if additive["loo_r2"] > 0 else None
    estimate = max(v for v in (shrunk, fit) if v is not None)
    rs = [r["accuracy_mean"] for r in rows if is_random_search_pick(r)]
    detect = {k: v[str(seeds)] for k, v in power_["minimum_detectable_difference"].items()}
    out = {"seeds": seeds, "random_draws_mean": m, "true_spread_sd": math.sqrt(tau2), "best_ops": best["ops"],
           "best_mean": best["accuracy_mean"], "best_seeds": n, "shrinkage": shrink, "best_shrunk": shrunk,
           "fit_band_best": fit, "estimate": estimate, "random_search_picks": len(rs),
           "random_search_mean": float(np.mean(rs)) if rs else None, "detectable": detect}
    if rs:
        out["room"] = estimate - out["random_search_mean"]
        out["room_at_least_detectable"] = {k: out["room"] >= v for k, v in detect.items()}
    return out


def plan_space_of(space) -> str:
    """A plan's ``space``: the space's base name and slot count (``"lvbert-elc@12"``), also for a
    supernet's resized space, already named ``"lvbert-elc@12"`` (:meth:`SearchSpace.with_num_slots`)."""
    base = space.name.rpartition("@")[0] if "@" in space.name else space.name
    return f"{base}@{space.num_slots}"


def plan_space_name(plan_space: str) -> str:
    """The search space's name in a plan's ``space`` (``"lvbert-elastic@24"`` → ``"lvbert-elastic"``)."""
    return plan_space.rpartition("@")[0]


def slot_choices(ops: str) -> list[str]:
    """A compact architecture string split into one choice per slot, variant suffix included
    (``"c(k3)sf(i2)"`` → ``["c(k3)", "s", "f(i2)"]``; :attr:`lvsearch.arch.Arch.compact`)."""
    return re.findall(r"[a-z](?:\([^)]*\))?", ops)


def arch_choices(arch, counter: dict | None = None) -> list[str]:
    """One label per slot of ``arch`` for the additive fit: its compact choice, or, with the
    model ``dims`` of ``counter`` (:data:`PARAM_COUNTER`'s layout; the module's own when None,
    filled when a supernet is loaded), the op letter with its layer sizes (``OpSpec.sizes``:
    ``"f(inner=512)"``), so a default variant and its explicit spelling (``f`` and ``f(i1)`` in
    ``lvbert-elastic``) are the same feature."""
    from lvsearch.ops import specs

    counter = PARAM_COUNTER if counter is None else counter
    dims = counter.get("dims")
    if dims is None or not any(arch.variants) and not counter.get("space_has_variants"):
        return slot_choices(arch.compact)
    table = specs()
    out = []
    for op, variant in zip(arch.ops, arch.variants):
        sizes = table[op].sizes(dims, variant)
        out.append(table[op].letter + ("(" + ",".join(f"{k}={v}" for k, v in sorted(sizes.items())) + ")"
                                       if sizes else ""))
    return out


def row_choices(row: dict, counter: dict | None = None) -> list[str]:
    """:func:`arch_choices` of a plan row: its recorded ``choices`` (written by :func:`make_plan`
    for a space with variants), else computed from its key (with ``counter``'s dims, as there)."""
    if row.get("choices"):
        return list(row["choices"])
    counter = PARAM_COUNTER if counter is None else counter
    if counter.get("dims") is None:
        return slot_choices(row["ops"])
    from lvsearch.arch import Arch

    return arch_choices(Arch.from_key(row["key"]), counter)


def additive_fit(rows: list[dict], draws: int = 2000, predict: dict[str, list[str]] | None = None,
                 counter: dict | None = None) -> dict | None:
    """The additive per-slot model of a landscape: standalone accuracy (mean over seeds) ≈
    intercept + Σ_slots effect(slot, op), fitted by ridge regression (``sklearn.linear_model.RidgeCV``,
    leave-one-out choice of the penalty) on one indicator per (slot, op); leave-one-out R²
    (``cross_val_predict``) says how much of the landscape it explains. Its optimum (the best
    op per slot; connectivity does not enter) is where a search that climbs per-slot effects
    goes; ``band_best`` is the best of ``draws`` seeded uniform draws of the space inside the
    plan's band by the fit, ``random_median_predicted`` and ``random_p90_predicted`` the fit's
    median and 90th percentile over those draws (what a random architecture gets; above the
    90th percentile is the fit's top decile of the band). ``predict`` (name → the architecture's
    :func:`arch_choices`) adds the fit's accuracy for each under ``predicted``. A choice the
    landscape never trained at a slot adds nothing there (the ridge coefficient of an indicator
    that is never on is 0), in the band draws as in ``predict``. ``counter`` (:data:`PARAM_COUNTER`'s
    layout; the module's own when None) gives the labels' dims and the band to draw; without its
    ``count`` there are no band draws. None with fewer than 8 architectures."""
    import random as pyrandom

    from sklearn.linear_model import RidgeCV
    from sklearn.model_selection import LeaveOneOut, cross_val_predict

    done = [r for r in rows if r.get("accuracy_mean") is not None]
    if len(done) < 8:
        return None
    counter = PARAM_COUNTER if counter is None else counter
    labels = [row_choices(r, counter) for r in done]
    slots = len(labels[0])
    letters = sorted({c for one in labels for c in one})
    spelled = {c: t for r, one in zip(done, labels) for c, t in zip(one, slot_choices(r["ops"]))}

    def x(choices: list[str]) -> list[float]:
        return [float(o == c) for o in choices for c in letters]

    X = np.array([x(one) for one in labels])
    y = np.array([r["accuracy_mean"] for r in done])
    alphas = np.logspace(-3, 3, 25)
    model = RidgeCV(alphas=alphas).fit(X, y)
    loo = cross_val_predict(RidgeCV(alphas=alphas), X, y, cv=LeaveOneOut())
    r2 = 1 - float(((loo - y) ** 2).sum() / ((y - y.mean()) ** 2).sum())
    coef = model.coef_.reshape(slots, len(letters))
    centred = coef - coef.mean(axis=1, keepdims=True)
    best = [letters[i] for i in coef.argmax(axis=1)]
    best_ops = "".join(spelled[c] for c in best)
    out = {"n": len(done), "features": f"{slots} slots × choices {' '.join(letters)}", "alpha": float(model.alpha_),
           "loo_r2": r2, "slot_effect_sd": float(centred.std()), "optimum_ops": best_ops,
           "optimum_predicted": float(model.predict(np.array([x(best)]))[0]),
           "best_trained": float(y.max()), "best_trained_ops": done[int(y.argmax())]["ops"],
           "effects": {str(i + 1): {c: float(v) for c, v in zip(letters, centred[i])} for i in range(slots)}}
    if predict:
        out["predicted"] = {name: float(model.predict(np.array([x(choices)]))[0]) for name, choices in predict.items()}
    counts = counter.get("count")
    if counts is not None:  # the band needs a supernet's dims
        from lvsearch.arch import Arch

        space = counter["space"].with_num_slots(slots)  # the supernet's own space
        rng, preds, band_best = pyrandom.Random(0), [], None
        lo, hi = counter["band"]
        for _ in range(draws):
            a = space.sample(rng)
            if not lo <= counts(a) <= hi:
                continue
            p = float(model.predict(np.array([x(arch_choices(a, counter))]))[0])
            preds.append(p)
            if band_best is None or p > band_best[1]:
                band_best = (a.compact, p)
        opt = Arch.sequential(best_ops)
        out.update(optimum_params=int(counts(opt)), optimum_in_band=bool(lo <= counts(opt) <= hi),
                   band_best_ops=band_best[0] if band_best else None,
                   band_best_predicted=band_best[1] if band_best else None,
                   random_median_predicted=float(np.median(preds)) if preds else None,
                   random_p90_predicted=float(np.percentile(preds, 90)) if preds else None, band_draws=len(preds))
    return out


#: ``count`` (parameters of an Arch on the supernet's dims), ``band``, ``space`` (the supernet's
#: SearchSpace), ``dims`` and ``space_has_variants``, set when a supernet is loaded or from the
#: plan's ``model`` (:func:`set_counter`), so :func:`additive_fit` can place its optimum against
#: the band and draw the band.
PARAM_COUNTER: dict = {}


def set_counter(model: dict, band: list[int]) -> None:
    """Fill :data:`PARAM_COUNTER` from a plan's ``model`` record (the supernet's run-config
    ``space`` and ``dims`` and its ``mixing_per_op``), without its weights: an untrained
    ``Supernet`` of the same space and dims has the same parameter count per architecture, so a
    report on a machine without the supernet draws the band as the one that made the plan."""
    from lvsearch.model.dims import ModelDims
    from lvsearch.model.supernet import Supernet
    from lvsearch.space import SearchSpace

    space = SearchSpace.from_dict(model["space"], source="the plan's model record")
    dims = ModelDims.from_dict(model["dims"], source="the plan's model record")
    net = Supernet(space, dims, mixing_per_op=bool(model.get("mixing_per_op")))
    fill_counter(net.num_params, band, space, dims)


def fill_counter(count, band, space, dims) -> None:
    """Set :data:`PARAM_COUNTER`: ``count`` (an Arch → its parameter count), the ``band``
    (lo, hi) in parameters, the supernet's ``space`` and model ``dims``."""
    PARAM_COUNTER.update(count=count, band=tuple(band), space=space, dims=dims,
                         space_has_variants=any(v for _, v in space.choices()))


def power(sigma_seed: float, seeds=(3, 6, 10), alpha: float = 0.05, beta: float = 0.2) -> dict:
    """Smallest paired mean difference a two-sided t test over n seeds detects with power
    1 − beta, exact (noncentral t, :func:`lvsearch.stats.detectable_difference`), for two noise
    models of σ_d, the SD of one seed's paired difference: (a) training noise only,
    √2 · σ_seed (both arms' picks fixed); (b) the arms benchmark's observed EA − random-search
    differences (search seed and pretraining seed both vary)."""
    from lvsearch.stats import detectable_difference

    sd = {"training_noise_only": math.sqrt(2) * sigma_seed}
    try:
        pairs = json.loads((RESULTS / "search_arms.json").read_text())["pairs"]["ea - random-search"]["mlm_accuracy"]
        sd["arms_ea_minus_random_search"] = float(np.std(pairs["per_seed"], ddof=1))
    except (OSError, ValueError, KeyError):
        pass
    out = {"alpha": alpha, "power": 1 - beta, "method": "exact: noncentral t (scipy.stats.nct)",
           "sd_of_one_seed_difference": sd, "minimum_detectable_difference": {}}
    for name, s_d in sd.items():
        out["minimum_detectable_difference"][name] = {
            str(n): detectable_difference(s_d, n, alpha, 1 - beta) for n in seeds}
    return out


def rank_check_file(args, rows: list[dict]) -> Path:
    """The seed-0 standalone results in ``rank_check.json`` format (for ``rank-check --reuse``)."""
    from lvsearch.search.rank_check import write_reuse_file

    done = [r for r in rows if r["accuracy_seed0"] is not None]
    archs = [{"key": r["key"], "standalone_accuracy": r["seeds"]["0"]["accuracy"],
              "standalone_loss": r["seeds"]["0"]["loss"], "params": r["params"]} for r in done]
    return write_reuse_file(args.work / "landscape_rank_check.json", archs, steps=args.steps,
                            what="standalone results of benchmarks/landscape.py (seed 0), for lvsearch rank-check --reuse")


def report(args, plan: dict) -> Path:
    """Aggregate the plan's finished runs (in ``--work``, else committed) into
    ``benchmarks/results/<NAME>.json`` (and ``--docs``); returns its path.

    Raises:
        LvsearchError: no finished run of the plan (nothing is written).
    """
    from lvsearch.errors import LvsearchError

    rows = collect(args, plan)
    if not rows:
        raise LvsearchError(f"no finished run of the plan's {len(plan['archs'])} architectures in {args.work} or in "
                            f"{RESULTS / NAME}.json: nothing to report",
                            fix="train them first: the same command without --report (with --supernet and --data)")
    result = {
        "what": f"the landscape of {plan['space']} at the quickstart width: standalone accuracy of band architectures "
                "(benchmarks/landscape.py)",
        "settings": {"space": plan["space"], "band": plan["band"], "bert_params": plan["bert_params"],
                     "steps": args.steps, "tokens_per_run": args.steps * 32 * 64, "seeds": args.seeds,
                     "seeded": args.seeded, "dev_sequences": args.dev_sequences, "recipe": "retrain-quickstart",
                     "threads_per_run": args.threads,
                     "supernet": str(args.supernet) if args.supernet else committed().get("settings", {}).get("supernet")},
        "machine": machine(), "summary": summarize(rows, plan["band"]), "archs": rows, "plan": plan,
    }
    reuse = rank_check_file(args, rows) if len(rows) >= 3 else None  # a rank check needs 3 architectures
    result["rank_check_file"] = str(reuse) if reuse else None
    if args.fitness_variants and len(rows) >= 8:
        result["fitness_variants"] = fitness_variants(args, reuse)
    elif args.supernet is None and committed().get("fitness_variants"):  # the committed supernet's scores
        result["fitness_variants"] = refreshed_variants(committed()["fitness_variants"], rows)
    if args.docs is not None:
        write_docs(args.docs, result)
    return write_result(NAME, result)


def markers() -> tuple[str, str]:
    """The docs block's BEGIN and END markers of this ``--name``."""
    return f"<!-- {NAME}:begin (benchmarks/landscape.py --docs) -->", f"<!-- {NAME}:end -->"


def markdown(result: dict) -> str:
    """The landscape's table and reading, as docs/results.md shows them (between BEGIN/END)."""
    s, rows = result["summary"], result["archs"]
    out = ["| id | architecture | ops | params | MLM acc per seed (s0[, s1, s2]) | floor | past floor |",
           "|---|---|---|---:|---|---:|---|"]
    for r in rows:
        seeds = ", ".join(f"{v['accuracy']:.4f}" for _, v in sorted(r["seeds"].items()))
        name = r["name"] if r["source"] != "pick" else "pick: " + "/".join(Path(r["name"]).parts[-3:])
        out.append(f"| {r['id']} | {name} | `{r['ops']}` | {r['params']:,} | {seeds} | {r['seeds']['0']['floor']:.4f} | "
                   + ("**yes**" if r["beats_floor_all"] else "no") + " |")
    borrowed = [r["name"] for r in rows if any(m.get("source") == "benchmarks/results/search_arms.json"
                                               for m in r["seeds"].values())]
    out.append("")
    if borrowed:
        out += [f"Seeds 1–2 of {', '.join(f'`{b}`' for b in borrowed)}: from `benchmarks/results/search_arms.json` "
                "(their seed 0 reproduced exactly here).", ""]
    sg, dr = s["sigma_seed"], s.get("distribution_random")
    out.append(f"What the {s['archs_trained']} of {len(result['plan']['archs'])} architectures trained so far say:")
    out.append("")
    if sg.get("pooled_std"):
        out.append(f"* **Seed noise.** σ over pretraining seeds, pooled over {sg['archs']} architectures "
                   f"({sg['dof']} degrees of freedom): {sg['pooled_std'] * 100:.2f} pp (per architecture "
                   + ", ".join(f"{x * 100:.2f}" for x in sg["per_arch_std"]) + " pp).")
    if dr and s.get("headroom"):
        out.append(f"* **Headroom.** Among the {dr['n']} random draws in the band: median {dr['median']:.4f}, "
                   f"top decile from {dr['top_decile_threshold']:.4f}, best {dr['best']:.4f}; (best − median) / σ_seed = "
                   f"{s['headroom']['best_minus_median_over_sigma_seed']:.2f}: what the random draws show of the space "
                   "above a median architecture (a lower bound on the space's headroom: a pick above the best draw, "
                   "below, shows more); random search with 200 evaluations does not pick a median one.")
    below = [r["name"] for r in rows if r["source"] == "reference" and not r["beats_floor_all"]]
    out.append(f"* **Floor.** {s['past_floor']} of the {s['archs_trained']} beat the neighbour-count floor on every "
               "seed" + (f"; {' and '.join(f'`{b}`' for b in below)} do{'es' if len(below) == 1 else ''} not" if below
                         else "") + ("." if s["all_past_floor"] else
                                     ". \"All standalone runs past the floor\" does not hold for this space at "
                                     f"{result['settings']['tokens_per_run'] / 1e6:.1f}M tokens."))
    if s.get("power"):
        m = s["power"]["minimum_detectable_difference"]
        sd = s["power"]["sd_of_one_seed_difference"]
        arms = (f", and {m['arms_ea_minus_random_search']['6'] * 100:.1f} pp with the arms benchmark's observed SD of "
                f"one seed's EA − random-search difference ({sd['arms_ea_minus_random_search'] * 100:.2f} pp; search "
                "and pretraining seed both vary)") if "arms_ea_minus_random_search" in m else ""
        exact = " (exact: noncentral t)" if s["power"].get("method", "").startswith("exact") else ""
        ten = (f"; over 10 seeds {m['training_noise_only']['10'] * 100:.1f} pp" if "10" in m["training_noise_only"]
               else "")
        out.append(f"* **Power**{exact}. The smallest EA − random-search difference a paired t test over 6 seeds detects "
                   f"(α 0.05, power 0.8): {m['training_noise_only']['6'] * 100:.1f} pp if only training noise differs "
                   f"(σ_d = √2 σ_seed){arms}{ten} (training noise only).")
    if s.get("additive"):
        a = s["additive"]
        placed = ""
        if a.get("band_best_ops"):
            placed = (f" ({a['optimum_params']:,} parameters, {'inside' if a['optimum_in_band'] else 'outside'} the "
                      f"band); the best of {a['band_draws']:,} in-band random draws by the fit `{a['band_best_ops']}` "
                      f"predicted {a['band_best_predicted']:.4f}, their median {a['random_median_predicted']:.4f}")
        out.append(f"* **Additive per-slot model** (ridge on one op indicator per slot, {a['n']} architectures, mean "
                   f"over seeds): leave-one-out R² {a['loo_r2']:.2f}; per-slot effects SD {a['slot_effect_sd'] * 100:.2f} pp; "
                   f"fitted optimum `{a['optimum_ops']}` predicted {a['optimum_predicted']:.4f}{placed}; best trained "
                   f"{a['best_trained']:.4f} (`{a['best_trained_ops']}`).")
    if s.get("picks"):
        out.append("* **Searched picks**: "
                   + "; ".join(f"`{p['ops']}` {p['accuracy_seed0']:.4f} (above {p['percentile_among_random'] * 100:.0f}% "
                               f"of the random draws{', top decile' if p['in_top_decile'] else ''})" for p in s["picks"])
                   + ".")
    if s.get("pick_pairs"):
        q = s["pick_pairs"]
        (n10, det), = q["detectable_at"].items()
        at = f"{det * 100:.2f} pp" if det is not None else "undefined"
        out.append("* **EA − random-search picks** (paired by search seed, seed 0 standalone): "
                   + ", ".join(f"{x['difference'] * 100:+.2f}" for x in q["pairs"])
                   + f" pp; mean {q['mean'] * 100:+.2f} pp, SD {q['sd'] * 100:.2f} pp over {q['n']} seeds. Were that SD "
                   f"the test's, {n10} seeds would detect {at} (reported only: {q['n']} seeds estimate an SD poorly; "
                   "the room rule below uses σ_seed).")
    if s.get("gate", {}).get("room") is not None:
        g = s["gate"]
        fit = (f"the fit's best in-band prediction {g['fit_band_best']:.4f}" if g["fit_band_best"] is not None
               else "the additive fit left out (it does not predict: leave-one-out R² ≤ 0)")
        verdict = ", ".join(f"{'≥' if g['room_at_least_detectable'][k] else '<'} {v * 100:.2f} pp ({k.replace('_', ' ')})"
                            for k, v in g["detectable"].items())
        out.append(f"* **Room for the {g['seeds']}-seed test** (pre-registered rule): best trained `{g['best_ops']}` "
                   f"{g['best_mean']:.4f} over {g['best_seeds']} seed(s), shrunk for selection (B {g['shrinkage']:.2f}, "
                   f"true spread of the draws {g['true_spread_sd'] * 100:.2f} pp) to {g['best_shrunk']:.4f}; {fit}; "
                   f"random search's {g['random_search_picks']} picks {g['random_search_mean']:.4f}: room "
                   f"{g['room'] * 100:+.2f} pp, {verdict}.")
        if g.get("past_floor_sigma", {}).get("room") is not None:
            q = g["past_floor_sigma"]
            verdict = ", ".join(f"{'≥' if q['room_at_least_detectable'][k] else '<'} {v * 100:.2f} pp "
                                f"({k.replace('_', ' ')})" for k, v in q["detectable"].items())
            out.append(f"  With σ_seed from the {q['archs']} multi-seed architectures past the floor only "
                       f"({q['sigma_seed'] * 100:.2f} pp, {q['dof']} df; the picks a test compares are all past it): "
                       f"B {q['shrinkage']:.2f}, shrunk best {q['best_shrunk']:.4f}, room {q['room'] * 100:+.2f} pp, "
                       f"{verdict}.")
        if g.get("without_references", {}).get("room") is not None:
            q = g["without_references"]
            verdict = ", ".join(f"{'≥' if q['room_at_least_detectable'][k] else '<'} {v * 100:.2f} pp "
                                f"({k.replace('_', ' ')})" for k, v in q["detectable"].items())
            fit = (f"its best in-band prediction {q['fit_band_best']:.4f}" if q["fit_band_best"] is not None
                   else "then left out")
            out.append(f"  With the additive fit refitted without {' and '.join(f'`{n}`' for n in q['left_out'])} "
                       f"(the reference orders; {q['additive_n']} architectures): leave-one-out "
                       f"R² {q['additive_loo_r2']:.2f}, {fit}, room {q['room'] * 100:+.2f} pp, {verdict}.")
    if s.get("params_control"):
        pc = s["params_control"]
        lo, hi = pc["kendall_tau_ci95"]
        ci = f" (95% [{lo:.2f}, {hi:.2f}])" if lo is not None else ""
        out.append(f"* **Parameter count** as a zero-cost predictor: τ {pc['kendall_tau']:.2f}{ci} over the "
                   f"{s['archs_trained']} (the band is narrow: ±5%).")
    for n, v in (result.get("fitness_variants") or {}).items():
        for metric, b in v["by_fitness"].items():
            lo, hi = b["kendall_tau_ci95"]
            ci = f" [{lo:.2f}, {hi:.2f}]" if lo is not None else ""
            region = b.get("top_region") or {}
            top = ""
            if region.get("kendall_tau") is not None:
                rlo, rhi = region["kendall_tau_ci95"]
                rci = f" [{rlo:.2f}, {rhi:.2f}]" if rlo is not None else ""
                top = f", top-region τ {region['kendall_tau']:.2f}{rci} (best {region['n']} by standalone accuracy)"
            out.append(f"* **Supernet fitness** {metric} on {n} dev sequences: τ {b['kendall_tau']:.2f}{ci}{top}, "
                       f"top-5 precision {b['top5_precision']:.2f}{paired_text(b.get('vs_default'))}.")
    return "\n".join(out)


def paired_text(d: dict | None) -> str:
    """``"; the search's default fitness"`` or ``"; τ − τ(loss on 1024) +0.12 [−0.03, +0.27]
    paired over the 23 architectures: within noise"`` for a :func:`vs_default` entry (empty
    without one)."""
    if not d:
        return ""
    if d["is_default"]:
        return "; the search's default fitness"
    verdict = {"a better": "ranks better than the default", "b better": "ranks worse than the default",
               "within noise": "within noise", "undetermined": "no interval"}[d["verdict"]]
    lo, hi = d["ci95"]
    diff = "undefined" if d["difference"] is None else f"{d['difference']:+.2f}"
    ci = f" [{lo:+.2f}, {hi:+.2f}]" if lo is not None else ""
    return (f"; τ − τ({d['default']['fitness']} on {d['default']['dev_sequences']}) {diff}{ci} paired over the "
            f"{d['n']} architectures: {verdict}")


def docs_parts(path: Path) -> tuple[str, str]:
    """The text of ``path`` (``--docs``) before its BEGIN and after its END :func:`markers`.

    Raises:
        LvsearchError: ``path`` unreadable, or without this ``--name``'s markers.
    """
    from lvsearch.errors import LvsearchError
    from lvsearch.io import read_text

    BEGIN, END = markers()
    try:
        text = read_text(path, what="--docs file")
    except OSError as e:
        raise LvsearchError(f"--docs {path} cannot be read ({e.strerror or e})",
                            fix=f"pass the markdown file that holds the {NAME} block (docs/results.md)") from None
    if BEGIN not in text or END not in text.split(BEGIN, 1)[1]:
        raise LvsearchError(f"--docs {path} has no {NAME} block (the markers {BEGIN} ... {END})",
                            fix="add the two marker lines where the table goes, or pass the file that has them")
    head, rest = text.split(BEGIN, 1)
    return head, rest.split(END, 1)[1]


def write_docs(path: Path, result: dict) -> None:
    """Replace the text between the :func:`markers` in ``path`` by :func:`markdown`, atomically
    (raises as :func:`docs_parts`)."""
    from lvsearch.io import atomic_write_bytes

    BEGIN, END = markers()
    head, tail = docs_parts(path)
    atomic_write_bytes(path, (head + BEGIN + "\n" + markdown(result) + "\n" + END + tail).encode("utf-8"))


def fitness_variants(args, reuse: Path) -> dict:
    """``rank-check --reuse`` on the landscape for each ``--fitness-variants`` dev size, each
    variant's τ also as a paired difference against the search's default (:func:`vs_default`)."""
    from lvsearch.search.rank_check import rank_check

    reports = {}
    for n in args.fitness_variants:
        size = n if n == "all" else int(n)
        reports[str(n)] = rank_check(args.supernet, reuse=reuse, out=args.work / f"rank_check_{n}",
                                     dev_sequences=size, overwrite=True)
    return vs_default(reports)


#: The search's default fitness: −(dev MLM loss) on this many dev sequences (``evolve``'s default).
DEFAULT_FITNESS = ("1024", "loss")
#: How each ``by_fitness`` metric is read off a rank-check row (higher is better).
FITNESS_SCORE = {"accuracy": lambda r: r["supernet_accuracy"], "loss": lambda r: -r["supernet_loss"]}


def refreshed_variants(variants: dict, rows: list[dict]) -> dict:
    """Committed fitness variants with their rank statistics recomputed from the per-architecture
    supernet scores they hold (no supernet needed): each ``by_fitness`` entry gets today's
    :func:`lvsearch.search.rank_stats.rank_quality` fields (the top-region τ, the tie-averaged
    top-5 precision) against the seed-0 standalone accuracy, as rank-check scores them; the
    paired differences against the default are kept."""
    from lvsearch.search.rank_stats import rank_quality

    truth_of = {r["key"]: r["seeds"]["0"]["accuracy"] for r in rows if "0" in r["seeds"]}
    out = {}
    for n, v in variants.items():
        archs = [a for a in v["archs"] if a["key"] in truth_of]
        truth = [truth_of[a["key"]] for a in archs]
        ent = dict(v, by_fitness={})
        for metric, b in v["by_fitness"].items():
            scores = [FITNESS_SCORE[metric](a) for a in archs]
            ent["by_fitness"][metric] = {**b, **rank_quality(scores, truth)}
        out[n] = ent
    return out


def vs_default(reports: dict[str, dict]) -> dict:
    """The ``fitness_variants`` entry from rank-check reports of the same architectures
    (``{dev size: rank_check.json}``, in ``--fitness-variants`` order): per variant its
    ``by_fitness``, top-k and strata, the per-architecture supernet scores (``archs``, in the
    first report's order), and under ``by_fitness[metric]["vs_default"]`` the paired
    difference τ(variant) − τ(default) (:func:`lvsearch.search.rank_stats.paired_tau_difference`,
    the same architectures resampled for both) against :data:`DEFAULT_FITNESS`, or the first
    variant's loss when 1024 is not among the variants. Raises ``SystemExit`` (naming the
    variant) when the reports do not hold the same architectures with the same standalone
    accuracies."""
    from lvsearch.search.rank_stats import paired_tau_difference

    if not reports:
        return {}
    base_n = DEFAULT_FITNESS[0] if DEFAULT_FITNESS[0] in reports else next(iter(reports))
    base_metric = DEFAULT_FITNESS[1]
    first = next(iter(reports.values()))
    keys = [r["key"] for r in first["archs"]]
    truth_of = {r["key"]: r["standalone_accuracy"] for r in first["archs"]}
    rows_of = {}
    for n, rep in reports.items():
        by_key = {r["key"]: r for r in rep["archs"]}
        if len(by_key) != len(rep["archs"]) or set(by_key) != set(keys):
            raise SystemExit(f"fitness variant {n}: its rank check holds other architectures than variant "
                             f"{next(iter(reports))}'s ({len(by_key)} vs {len(keys)})")
        if any(by_key[k]["standalone_accuracy"] != truth_of[k] for k in keys):
            raise SystemExit(f"fitness variant {n}: its standalone accuracies differ from variant "
                             f"{next(iter(reports))}'s (not the same --reuse file)")
        rows_of[n] = [by_key[k] for k in keys]
    truth = [truth_of[k] for k in keys]
    base = [FITNESS_SCORE[base_metric](r) for r in rows_of[base_n]]
    out = {}
    for n, rep in reports.items():
        ent = {k: rep.get(k) for k in ("by_fitness", "topk", "topk_overlap", "topk_chance", "strata",
                                        "dev_sequences")}
        ent["by_fitness"] = {m: dict(b) for m, b in (ent["by_fitness"] or {}).items()}
        for metric, b in ent["by_fitness"].items():
            res = paired_tau_difference([FITNESS_SCORE[metric](r) for r in rows_of[n]], base, truth)
            b["vs_default"] = {**res, "default": {"dev_sequences": base_n, "fitness": base_metric},
                               "is_default": (n, metric) == (base_n, base_metric)}
        ent["archs"] = [{"key": r["key"], "supernet_accuracy": r["supernet_accuracy"],
                         "supernet_loss": r["supernet_loss"]} for r in rows_of[n]]
        out[n] = ent
    return out


def fitness_size(text: str) -> str:
    """``--fitness-variants``: ``all`` or a number of dev sequences ≥ 1 (as text, the way the
    result keys the variants)."""
    from lvsearch.argtypes import positive_count

    return "all" if text.strip() == "all" else str(positive_count(text))


def main() -> None:
    from lvsearch.argtypes import count as count_arg, positive_count
    from lvsearch.errors import LvsearchError
    from lvsearch.io import check_writable_folder

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--supernet", type=Path, default=None,
                   help="the quickstart supernet (space and band); --report without it re-reports the committed "
                        "plan and results (the fitness variants' statistics recomputed from their committed scores)")
    p.add_argument("--data", type=Path, default=None, help="prepared corpus (lvsearch data prepare --vocab-size 4096); needed to train")
    p.add_argument("--work", type=Path, required=True, help="folder for the plan, runs and logs (resumable)")
    p.add_argument("--random", type=count_arg, default=18, help="random draws inside the band (on the first run)")
    p.add_argument("--picks", type=Path, nargs="*", help="architecture files of searched picks to add")
    kept = "kept in the plan: a later call uses the plan's value"
    p.add_argument("--seeded", type=count_arg, default=None,
                   help=f"the first N architectures of the plan get every seed (default {RUN_SET['seeded']}; {kept}, "
                        "or changes it when given)")
    p.add_argument("--seeds", type=positive_count, default=None,
                   help=f"pretraining seeds 0..N-1 of the seeded architectures (default {RUN_SET['seeds']}; {kept}, "
                        "or changes it when given)")
    fixed = "fixed by the plan: a later call uses it and refuses another"
    p.add_argument("--steps", type=positive_count, default=None,
                   help=f"training steps of each run (default {RUN_SETTINGS['steps']}; {fixed})")
    p.add_argument("--eval-every", type=positive_count, default=None,
                   help=f"evaluation and checkpoint interval in steps (default {RUN_SETTINGS['eval_every']}; {fixed})")
    p.add_argument("--dev-sequences", type=positive_count, default=None,
                   help=f"dev sequences of the MLM evaluation (default {RUN_SETTINGS['dev_sequences']}; {fixed})")
    p.add_argument("--jobs", type=positive_count, default=2, help="runs at a time (the inline thread pool)")
    p.add_argument("--threads", type=positive_count, default=None,
                   help=f"OMP_NUM_THREADS of each run (default {RUN_SETTINGS['threads']}; {fixed}: the thread count "
                        "changes a retrain's floats)")
    p.add_argument("--order", choices=["plan", "gate"], default="plan",
                   help="which runs start first. plan: seed 0 of every architecture in plan order, then seeds "
                        "1..SEEDS-1 of the seeded ones. gate: what the room rule (summary.gate) needs first: seed 0 of "
                        "the seeded architectures and of the picks, then the seeded ones' later seeds (σ_seed), "
                        "then seed 0 of the other random draws (the prior the best is shrunk toward), so a partial "
                        "run can already be read by the rule. In both a later seed is trained only after its seed 0 "
                        "has finished (its result decides whether search_arms.json's seed can be reused)")
    add_dispatch(p, "the retrain + evaluate of every architecture and seed")
    p.add_argument("--fitness-variants", nargs="*", default=[], type=fitness_size,
                   help="dev sizes (or 'all') to rank-check in --report")
    p.add_argument("--report", action="store_true", help="only aggregate what exists")
    p.add_argument("--docs", type=Path, default=None, help="rewrite the landscape block of this file (docs/results.md)")
    p.add_argument("--name", default="landscape",
                   help="result name: benchmarks/results/NAME.json and the docs block <!-- NAME:begin ... -->; "
                        "one per space (e.g. landscape_24 for the 24-slot space)")
    args = p.parse_args()
    args.dispatch = dispatch_options(args)
    global NAME
    NAME = args.name
    result_path(NAME, own=lambda d: "plan" in d and str(d.get("what", "")).startswith("the landscape of"))
    if args.docs is not None:
        docs_parts(args.docs)  # checked before anything is trained or written
    if (args.supernet is None or args.data is None) and not args.report:
        missing = " and ".join(f for f, v in (("--supernet", args.supernet), ("--data", args.data)) if v is None)
        raise LvsearchError(f"{missing} missing: --supernet and --data are needed to train",
                            fix="pass --supernet SN --data CORPUS, or --report to only aggregate what exists")
    check_writable_folder(args.work, "--work")
    if not args.report and not args.data.is_dir():
        raise LvsearchError(f"--data {args.data} is not a folder", fix="pass the prepared corpus folder "
                                                                       "(lvsearch data prepare)")
    plan = make_plan(args)
    args.plan_space = plan["space"]
    print(f"{len(plan['archs'])} architectures; band {plan['band']}", flush=True)
    if not args.report:
        train_all(args, plan)
    print(report(args, plan))


if __name__ == "__main__":
    run_main(main)
