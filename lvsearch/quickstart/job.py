"""The ``lvsearch quickstart`` job: the whole pipeline on real text in one command.

Stages, each writing into its own folder of ``OUT`` through the same job functions as the
single verbs, each skipped when its output is complete and resumed when it is partial:

=============  ==================================================  =========================
stage          what                                                output
=============  ==================================================  =========================
data           ``data prepare`` (WordPiece, 4096 pieces)           ``data/``
supernet       ``train-supernet`` with ``recipes/quickstart.yaml``  ``supernet/``
search         ``evolve --compare-random`` (EA and random search,  ``search/``,
               same first population and compute)                  ``search/random/``
finalists      only with ``--finalists K``: successive halving over    ``finalists/``
               the EA top-k (``retrain --finalists``); its pick is
               the EA arm
retrain        every arm from scratch, same objective/steps/data   ``retrain/ARM[-seedK]/``
evaluate       MLM dev accuracy, BLiMP, fine-tuning                ``eval/ARM[-seedK].json``
rank           supernet fitness of every arm's architecture        ``rank.json``
report         ``report.md`` and figures                           ``report.md``, ``*.png``
=============  ==================================================  =========================

The arms (:attr:`Plan.arms <lvsearch.quickstart.plan.Plan>`) are the EA's pick, the random search's
best and ``bert`` (SA/FF interleaved); all are retrained with the same recipe, objective, steps, data
and seeds, so the only difference between them is the architecture. When both searches pick the
same architecture it is trained and evaluated once (the runs would be byte-identical) and the
random-search arm's folder links to the EA arm's.

``OUT/quickstart.json`` records the settings, the plan (:mod:`lvsearch.quickstart.plan`) and the
wall time and outcome of every stage; re-running the same command resumes, and a command
with other settings on the same ``OUT`` is refused (nothing is overwritten).

This module is the runner: :func:`run_quickstart` and its stage loop, and the fixed arms that
train in worker processes while the supernet trains and the search runs. The settings and
``OUT`` are :mod:`lvsearch.quickstart.context`, the stages :mod:`lvsearch.quickstart.stages`,
the arms' overrides and worker jobs :mod:`lvsearch.quickstart.arms`.
"""

from __future__ import annotations

import time
from pathlib import Path

from lvsearch.faults import kill_point
from lvsearch.lock import holds_output
from lvsearch.quickstart.arms import evaluate_job, retrain_job, use_workers
from lvsearch.quickstart.context import Context, QuickstartSettings, open_context
from lvsearch.quickstart.plan import OVERRUN_WARN, pace_line
from lvsearch.quickstart.stages import STAGES


#: Arms whose architecture does not depend on the search: on a CPU they can train while it runs.
FIXED_ARMS = ("bert", "random-arch")


def cpu_cores() -> int:
    """Cores this process may run on (the affinity mask where the OS has one)."""
    import os

    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1



def fixed_runs(ctx: Context) -> list[tuple[str, int, str]]:
    """``(arm, seed, name)`` of the fixed-arm runs that train in the background while this process
    trains the supernet and searches (:func:`start_fixed_arms`): on a CPU with workers, up to
    ``cores − 1`` of them, so one core stays with this process. A pure function of the plan and
    the machine (not of what is already done), so a resumed run uses the same thread counts."""
    if not use_workers(ctx):
        return []
    runs = [(arm, seed, name) for arm in ctx.plan.arms if arm in FIXED_ARMS
            for seed, name in enumerate(ctx.run_names(arm))]
    return runs[:max(0, cpu_cores() - 1)]



def search_threads(ctx: Context, threads: int) -> int:
    """Torch threads of this process while :func:`fixed_runs` train beside it: ``threads`` less
    one per background worker (at least 1)."""
    return max(1, threads - len(fixed_runs(ctx)))



def start_fixed_arms(ctx: Context) -> None:
    """Start :func:`fixed_runs` not yet done in single-threaded worker processes (``ctx.pool``);
    ``stage_retrain`` waits for them. Each worker evaluates its run as soon as it is trained
    (``then_evaluate``): that uses the core the run leaves idle while the search still runs, and
    the evaluate stage finds the report. Weights and reports are those of the retrain and
    evaluate stages, bit for bit: the same calls in the same kind of worker, only earlier."""
    from lvsearch.quickstart.workers import WorkerPool

    jobs = []
    for arm, seed, name in fixed_runs(ctx):
        job = retrain_job(ctx, arm, seed, name)
        report = ctx.out / "eval" / f"{name}.json"
        if not report.exists():
            evaluation = evaluate_job(ctx, name)
            if job is None:
                job = evaluation
            else:
                job.then_evaluate = evaluation.kwargs
        if job is not None:
            jobs.append(job)
    if not jobs:
        return
    ctx.pool = WorkerPool(ctx.out / "logs")
    ctx.pool.start(jobs)
    from lvsearch import ui

    names = ", ".join(j.name for j in jobs)
    what = "retraining and evaluating" if any(j.kind == "retrain" for j in jobs) else "evaluating"
    ui.console.print(f"{what} {names} in the background meanwhile (its architecture does not depend on the "
                     f"search; log: {ctx.out / 'logs'}/{jobs[0].name}.{jobs[0].kind}.log)", highlight=False, soft_wrap=True)


@holds_output("out")
def run_quickstart(out: str | Path, settings: QuickstartSettings, *, device: str = "auto",
                   show_progress: bool = True, stop_after: str | None = None, speed: str | float = "auto") -> Context:
    """Run (or resume) every stage; returns the context (``ctx.state`` has the outcomes).
    ``speed``: ``auto`` (measure this machine before planning a new run) or its slowdown
    (:func:`lvsearch.quickstart.context.plan_slowdown`).

    Each stage's wall time is added to ``quickstart.json`` (over resumed sessions), so the
    report's per-stage times are the real cost. ``stop_after`` ends after the named stage.

    Raises:
        LvsearchError: bad settings or a stage's own errors (bad data, ...).
    """
    from lvsearch.train.loop import RESUME_HINT

    ctx = open_context(out, settings, device=device, show_progress=show_progress, speed=speed)
    stages = ctx.state.get("stages") or {}
    if all(isinstance(stages.get(n), dict) and stages[n].get("status") == "done" for n, _ in STAGES) \
            and (ctx.out / "report.md").is_file() and stop_after is None:
        ctx.finished_before = True  # a finished run: print where its report is, rewrite nothing
        return ctx
    from lvsearch.repro import record_environment

    record_environment(ctx.out, ctx.device, resume=bool(ctx.state.get("stages")), what="quickstart")
    from lvsearch import ui
    from lvsearch.quickstart.speed import speed_sentence

    ui.console.print(speed_sentence(ctx.state.get("speed"), ctx.plan.minutes, ctx.plan.sized_minutes),
                     highlight=False, soft_wrap=True)
    token = RESUME_HINT.set("re-run the same 'lvsearch quickstart' command to continue")
    try:
        return _run_stages(ctx, stop_after)
    finally:
        RESUME_HINT.reset(token)



#: Stages that run while the fixed arms train in the background (:func:`start_fixed_arms`).
SEARCH_STAGES = ("supernet", "search", "finalists")


def _run_stages(ctx: Context, stop_after: str | None) -> Context:
    import torch

    threads = torch.get_num_threads()
    try:
        return _run_stage_loop(ctx, stop_after, threads)
    finally:
        torch.set_num_threads(threads)
        if ctx.pool is not None:  # an error, Ctrl-C or stop_after: the workers save a checkpoint and stop
            ctx.pool.stop()
            ctx.pool = None


def _run_stage_loop(ctx: Context, stop_after: str | None, threads: int) -> Context:
    import torch

    from lvsearch import ui

    total = len(STAGES)
    t_run = time.perf_counter()
    for i, (name, fn) in enumerate(STAGES, start=1):
        rec = ctx.state["stages"].setdefault(name, {"seconds": 0.0})
        if rec.get("status") == "done" and name != "report":
            skipped = (rec.get("result") or {}).get("skipped")
            how = f"skipped: {skipped}" if skipped and rec["seconds"] < 1 else f"done earlier ({rec['seconds']:.0f} s)"
            ui.console.rule(f"[bold]stage {i}/{total}: {name}[/bold] — {how}")
            continue
        elapsed = sum(s.get("seconds", 0.0) for s in ctx.state["stages"].values())
        done_names = [n for n, r in ctx.state["stages"].items() if r.get("status") == "done"]
        budgets = ctx.plan.stage_budgets()
        text, pace = pace_line(elapsed, done_names, budgets)
        ui.console.rule(f"[bold]stage {i}/{total}: {name}[/bold]")
        ui.console.print(text, highlight=False, soft_wrap=True)  # a rule would cut it at the console width
        if pace is not None and pace > OVERRUN_WARN and not ctx.state.get("overrun_warned"):
            ctx.state["overrun_warned"] = True
            ui.warn(f"the quickstart is running {pace:.1f}× slower than its plan (other jobs on these cores, fewer "
                    f"cores, or a slower machine): expect ~{ctx.plan.total_minutes() * pace:.0f} min instead of "
                    f"~{ctx.plan.total_minutes():.0f}. The results do not depend on speed; to finish sooner, stop it and "
                    f"start again with a smaller --minutes in a new --out")
        if name in SEARCH_STAGES:
            if ctx.pool is None:
                start_fixed_arms(ctx)
            # the same count whether or not the fixed arms are still training: a resumed run
            # trains the supernet and searches with the thread count of an uninterrupted one
            torch.set_num_threads(search_threads(ctx, threads))
        else:
            torch.set_num_threads(threads)
        rec["status"] = "running"
        ctx.save()
        t0 = time.perf_counter()
        try:
            result = fn(ctx)
            kill_point(f"quickstart-stage:{name}")
        finally:
            rec["seconds"] = rec.get("seconds", 0.0) + (time.perf_counter() - t0)
            ctx.save()
        rec.update(status="done", result=result)
        ctx.save()
        if ctx.pool is not None:
            ctx.pool.check()  # a background arm that failed stops the run now, not after the search
        if stop_after == name:
            break
    ctx.state["wall_seconds_this_process"] = time.perf_counter() - t_run
    ctx.save()
    return ctx
