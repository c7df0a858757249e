"""The quickstart's stages, one function each (``stage_NAME(ctx) -> result``), and
:data:`STAGES`, the order :func:`lvsearch.quickstart.job.run_quickstart` runs them in (the
table of stages is in :mod:`lvsearch.quickstart.job`). Each stage skips what is already
complete in ``OUT`` and resumes what is partial."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Callable

from lvsearch.errors import LvsearchError
from lvsearch.io import atomic_write_json
from lvsearch.quickstart.arms import (evaluate_job, evaluate_options, retrain_arm, retrain_job, retrain_overrides,
                                      same_as, supernet_overrides, use_workers)
from lvsearch.quickstart.context import Context
from lvsearch.quickstart.files import QUICKSTART_AGAIN, RetrainRunConfig, RetrainSummary, read_stage_file
from lvsearch.search.folder import SearchFolder
from lvsearch.train.run import train_state


def stage_data(ctx: Context) -> dict:
    """Prepare ``--data`` into ``OUT/data`` (skipped when its manifest exists).

    Raises:
        LvsearchError: prepare's errors, phrased with quickstart's options.
    """
    from lvsearch.data.prepare import PrepareSettings, prepare
    from lvsearch.data.shards import PreparedData

    if (ctx.data_dir / "manifest.json").exists():
        data = PreparedData.open(ctx.data_dir)
        return {"skipped": "already prepared", "train_tokens": data.manifest["splits"]["train"]["tokens"]}
    try:
        res = prepare([ctx.settings.data], ctx.data_dir, PrepareSettings(vocab_size=ctx.plan.vocab_size),
                      skip_bad_files=ctx.settings.skip_bad_files, show_progress=ctx.show_progress)
    except LvsearchError as e:  # prepare's messages name data-prepare's options
        msg, _, fix = str(e).partition("\n  fix: ")
        raise LvsearchError(msg.replace("--input", "--data"),
                            fix=(fix or None) and fix.replace("--input", "--data")) from None
    data = PreparedData.open(ctx.data_dir)
    return {"train_tokens": data.manifest["splits"]["train"]["tokens"], "dev_tokens": data.manifest["splits"]["dev"]["tokens"],
            "vocab_size": data.vocab_size, "seconds_prepare": res.seconds}



def stage_supernet(ctx: Context) -> dict:
    """Train (new), resume (checkpoint present) or skip (summary at the planned steps) ``OUT/supernet``."""
    from lvsearch.train.supernet import train_supernet

    run = ctx.supernet_dir
    status = train_state(run, ctx.plan.supernet_steps)
    if status == "done":
        return {"skipped": "already trained"}
    summary = train_supernet(ctx.settings.supernet_recipe, ctx.data_dir, run, overrides=supernet_overrides(ctx),
                             resume=status == "partial", overwrite=status == "new" and run.exists(),
                             device=ctx.device, show_progress=ctx.show_progress)
    return {"resumed_from": summary.get("resumed_from"), "tokens_per_s": summary.get("tokens_per_s"),
            "unigram_accuracy": summary.get("unigram_accuracy"),
            "neighbour_count_floor": ((summary.get("floors") or {}).get("neighbour-count") or {}).get("accuracy"),
            "beats_floor": summary.get("beats_floor")}



def _mlm_accuracy(path: Path) -> float:
    """The MLM dev accuracy of the evaluation report ``path`` (checked by ``read_report``).

    Raises:
        LvsearchError: the report is damaged, or holds no MLM accuracy (names the file)."""
    from lvsearch.eval.report import read_report

    mlm = read_report(path).get("mlm") or {}
    if mlm.get("accuracy") is None:
        raise LvsearchError(f"evaluation report {path} holds no MLM dev accuracy (mlm.status {mlm.get('status')!r})",
                            fix="restore the file, or run the same quickstart command again with another --out")
    return mlm["accuracy"]



def _search_done(folder: Path) -> bool:
    return SearchFolder(folder, regenerate=QUICKSTART_AGAIN).finished()



def stage_search(ctx: Context) -> dict:
    """Evolution and random search (``evolve --compare-random``) into ``OUT/search``; resumes a partial search."""
    from lvsearch.search.evolution import STATE as SEARCH_STATE
    from lvsearch.search.evolution import SearchConfig
    from lvsearch.search.job import RANDOM_DIR, EvolveOptions, evolve

    folder = ctx.search_dir
    if _search_done(folder) and _search_done(folder / RANDOM_DIR):
        return {"skipped": "already searched"}
    p = ctx.plan
    # evolve's own defaults (fitness −loss, racing over up to 1024 dev sequences), so the
    # quickstart searches as a user's `lvsearch evolve` does
    opts = EvolveOptions(supernet=ctx.supernet_dir, out=folder, dev_sequences=p.search_dev_sequences,
                         compare_random=True, resume=(folder / SEARCH_STATE).exists(), device=ctx.device,
                         racing=p.racing)
    cfg = SearchConfig(population=p.population, iterations=p.iterations, topk=min(p.topk, p.population), seed=0)
    results = evolve(opts, cfg, show_progress=ctx.show_progress)
    return {k: {"best": r.best.key, "fitness": r.best.fitness} for k, r in results.items()}



def stage_finalists(ctx: Context) -> dict:
    """Successive halving over the EA's top-k (``retrain --finalists``, ranked by current dev loss) with
    the same recipe, overrides and seed 0 as every other arm: its pick, trained to the full
    budget, is the EA arm."""
    from lvsearch.scaling.finalists import BEST, FinalistOptions, run_finalists

    p = ctx.plan
    if not p.finalists:
        return {"skipped": "not in the plan (--finalists K adds it)"}
    entries = SearchFolder(ctx.search_dir, regenerate=QUICKSTART_AGAIN).topk()
    k = min(p.finalists, len(entries))
    if k < p.finalists:
        from lvsearch import ui

        ui.warn(f"--finalists {p.finalists}: the search's top-k holds {len(entries)} architectures, so {k} enter "
                f"the finalist stage")
    if k < 2:
        return {"skipped": f"the search's top-k holds {len(entries)} architecture(s); pruning needs 2"}
    folder = ctx.out / "finalists"
    state = run_finalists(str(ctx.search_dir / "topk.json"), ctx.settings.retrain_recipe, ctx.data_dir, folder,
                          FinalistOptions(finalists=k, budget=p.retrain_steps, eta=2, compare_full=p.finalists_compare_full),
                          overrides=retrain_overrides(ctx, 0), device=ctx.device, show_progress=ctx.show_progress)
    return {"pick": state["final"]["pick"], "run": state["best"]["run"], "arch_json": str(folder / BEST),
            "compute_fraction": state["final"]["compute_fraction"]}



def _link_finalist_pick(ctx: Context, run: Path) -> bool:
    """Make ``retrain/ea`` the finalist job's pick (a relative symlink): it was trained with the
    same recipe, overrides and seed to the full budget, so it is not trained again."""
    pick = ctx.state.get("stages", {}).get("finalists", {}).get("result", {}).get("run")
    if not pick:
        return False
    if run.exists() and not run.is_symlink():
        return False  # trained here before the finalist stage existed: keep it
    _link_run(run, Path(pick))
    return True



def _link_run(run: Path, target: Path) -> None:
    """Make ``run`` a relative symlink to ``target`` (replacing a stale link, never a folder)."""
    import os

    run.parent.mkdir(parents=True, exist_ok=True)
    if run.is_symlink():
        if run.resolve() == target.resolve():
            return
        run.unlink()
    os.symlink(os.path.relpath(target, run.parent), run)



def stage_retrain(ctx: Context) -> dict:
    """Retrain every arm × seed into ``OUT/retrain/NAME`` (with finalists, the EA arm's seed 0 is
    the finalist pick; an arm whose architecture an earlier arm has links to that arm's runs).
    On a CPU the arms train at once in single-threaded worker processes
    (:func:`~lvsearch.quickstart.arms.use_workers`); runs already training in the background
    (``ctx.pool``, :func:`~lvsearch.quickstart.job.start_fixed_arms`) are waited for, not started again."""
    from lvsearch.quickstart.workers import WorkerPool

    out, jobs = {}, []
    started = set(ctx.pool.names) if ctx.pool is not None else set()
    for arm in ctx.plan.arms:
        twin = same_as(ctx, arm)
        for seed, name in enumerate(ctx.run_names(arm)):
            run = ctx.out / "retrain" / name
            if twin is not None and not (run.exists() and not run.is_symlink()):
                target = ctx.out / "retrain" / ctx.run_names(twin)[seed]
                _link_run(run, target)
                out[name] = {"from": f"same architecture as {twin}", "run": str(target.resolve())}
                continue
            if arm == "ea" and seed == 0 and _link_finalist_pick(ctx, run):
                out[name] = {"from": "finalist pick", "run": str(run.resolve())}
                continue
            if not use_workers(ctx):
                s = retrain_arm(ctx, arm, seed, run)
                out[name] = {"tokens_per_s": s.get("tokens_per_s"), "params": s.get("params")}
                continue
            if name in started:
                continue  # training in the background since the supernet stage
            job = retrain_job(ctx, arm, seed, name)
            if job is None:
                s = read_stage_file(run / "summary.json", RetrainSummary, what="retrain summary")
                out[name] = {"tokens_per_s": s.get("tokens_per_s"), "params": s.get("params")}
            else:
                jobs.append(job)
    pool = ctx.pool if ctx.pool is not None else WorkerPool(ctx.out / "logs")
    pool.start(jobs)
    for job in pool.wait(show_progress=ctx.show_progress, label="retrain"):
        # an evaluate job's run was trained before: its numbers are in the run's summary
        s = (read_stage_file(ctx.out / "retrain" / job.name / "summary.json", RetrainSummary, what="retrain summary")
             if job.kind == "evaluate" else job.result)
        out[job.name] = {"tokens_per_s": s.get("tokens_per_s"), "params": s.get("params"), "worker": "1 thread"}
        if job.name in started:
            out[job.name]["background"] = "started before the search, while the supernet trained"
        if job.result.get("report"):
            out[job.name]["evaluated"] = "in the background, once trained"
    ctx.pool = None
    return out



def stage_evaluate(ctx: Context) -> dict:
    """:func:`lvsearch.eval.job.evaluate` of every retrained run into ``OUT/eval/NAME.json``
    (existing reports kept; an arm that duplicates an earlier one gets a copy of its report). On a
    CPU the arms are evaluated at once in single-threaded worker processes
    (:func:`~lvsearch.quickstart.arms.use_workers`); a fixed arm's report is usually there already
    (:func:`~lvsearch.quickstart.job.start_fixed_arms`)."""
    import shutil

    from lvsearch.eval.job import evaluate
    from lvsearch.quickstart.workers import run_jobs

    retrained = ctx.state.get("stages", {}).get("retrain", {}).get("result") or {}
    done, jobs, copies = {}, [], []
    for arm in ctx.plan.arms:
        twin = same_as(ctx, arm)
        for seed, name in enumerate(ctx.run_names(arm)):
            report = ctx.out / "eval" / f"{name}.json"
            if report.exists():
                early = isinstance(retrained.get(name), dict) and retrained[name].get("evaluated")
                done[name] = f"evaluated {early}" if early else "skipped (exists)"
                continue
            report.parent.mkdir(parents=True, exist_ok=True)
            if twin is not None:
                copies.append((name, ctx.out / "eval" / f"{ctx.run_names(twin)[seed]}.json", report))
                continue
            if use_workers(ctx):
                jobs.append(evaluate_job(ctx, name))
            else:
                evaluate(evaluate_options(ctx, ctx.out / "retrain" / name / "model", report))
                done[name] = "evaluated"
    for job in run_jobs(jobs, ctx.out / "logs", show_progress=ctx.show_progress, label="evaluate"):
        done[job.name] = "evaluated (1-thread worker)"
    for name, src, report in copies:
        tmp = report.with_name(report.name + ".tmp")
        shutil.copyfile(src, tmp)
        tmp.replace(report)
        done[name] = f"copied from {src.name} (same architecture)"
    return done



def stage_rank(ctx: Context) -> dict:
    """Supernet fitness (the search's own dev set) of every arm's architecture, vs the
    standalone MLM dev accuracy of the retrained arm: Kendall τ and Spearman ρ (scipy)."""
    import numpy as np
    from scipy import stats

    from lvsearch.arch import Arch
    from lvsearch.search.evaluator import SupernetEvaluator
    from lvsearch.train.supernet import load_dev
    from lvsearch.train.supernet import load_supernet

    loaded = load_supernet(ctx.supernet_dir)
    dev, _ = load_dev(loaded, ctx.data_dir, ctx.plan.search_dev_sequences)
    # the search's own fitness (evolve's default −loss, or what the search recorded)
    fitness = SearchFolder(ctx.search_dir, regenerate=QUICKSTART_AGAIN).fitness().metric
    ev = SupernetEvaluator(loaded.supernet, dev, seq_len=loaded.config.train.seq_len, fitness=fitness)
    rows = []
    for arm in ctx.plan.arms:
        arch = Arch.from_dict(read_stage_file(ctx.out / "retrain" / arm / "config.json", RetrainRunConfig,
                                              what="retrain run config")["arch"], source=ctx.out / "retrain" / arm / "config.json")
        fit = ev.evaluate(arch)
        accs = [_mlm_accuracy(ctx.out / "eval" / f"{n}.json") for n in ctx.run_names(arm)]
        rows.append({"arm": arm, "arch": arch.key, "supernet_fitness": fit.fitness, "supernet_loss": fit.loss,
                     "standalone_accuracy": float(np.mean(accs)), "standalone_seeds": len(accs)})
    x = [r["supernet_fitness"] for r in rows]
    y = [r["standalone_accuracy"] for r in rows]
    with warnings.catch_warnings():  # constant inputs (e.g. every arm on the unigram plateau) give NaN
        warnings.simplefilter("ignore")
        tau = stats.kendalltau(x, y)
        rho = stats.spearmanr(x, y)
    result = {"rows": rows, "n": len(rows), "fitness": fitness, "kendall_tau": _finite(tau.statistic), "kendall_p": _finite(tau.pvalue),
              "spearman_rho": _finite(rho.statistic), "spearman_p": _finite(rho.pvalue),
              "dev_sequences": int(dev.input_ids.shape[0]), "supernet_step": loaded.step}
    from lvsearch.stats import bootstrap_interval

    result["kendall_tau_ci95"] = list(bootstrap_interval(x, y, "kendall"))
    atomic_write_json(ctx.out / "rank.json", result)
    return {"kendall_tau": result["kendall_tau"], "n": len(rows)}



def _finite(v) -> float | None:
    import math

    v = float(v)
    return v if math.isfinite(v) else None



def stage_report(ctx: Context) -> dict:
    """Write ``OUT/report.md`` and its figures (always regenerated: cheap)."""
    from lvsearch.quickstart.report import write_quickstart_report

    path = write_quickstart_report(ctx)
    return {"report": str(path)}



STAGES: list[tuple[str, Callable[[Context], dict]]] = [
    ("data", stage_data),
    ("supernet", stage_supernet),
    ("search", stage_search),
    ("finalists", stage_finalists),
    ("retrain", stage_retrain),
    ("evaluate", stage_evaluate),
    ("rank", stage_rank),
    ("report", stage_report),
]
