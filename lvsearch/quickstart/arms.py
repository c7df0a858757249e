"""The quickstart's arms as the stages train and evaluate them: each arm's architecture
(``retrain --arch``) and duplicate detection, the typed recipe overrides of the supernet and of
every retrained arm, the ``retrain`` arguments of one arm × seed, in this process or as a
worker job, and the evaluation settings shared by every arm."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from lvsearch.eval.job import EvaluateOptions
from lvsearch.quickstart.context import Context
from lvsearch.quickstart.files import RetrainSummary, read_stage_file
from lvsearch.train.run import train_state

if TYPE_CHECKING:
    from lvsearch.quickstart.workers import WorkerJob


def _warmup(recipe: str, cls: type, steps: int) -> int:
    """The recipe's warm-up (optimizer steps), shortened to at most 1/8 of ``steps``: on short
    budgets a warm-up longer than the run would leave no learning curve after it."""
    from lvsearch.config import load_config

    cfg, _ = load_config(cls, recipe)
    return max(1, min(cfg.train.warmup_steps, steps // 8))



def supernet_overrides(ctx: Context) -> dict:
    """Typed overrides of the supernet recipe (dotted keys, :func:`lvsearch.config.override_map`):
    space, steps, warm-up, eval/checkpoint cadence."""
    from lvsearch.config import SupernetConfig

    p = ctx.plan
    return {"space": ctx.settings.space, "train.steps": p.supernet_steps,
            "train.warmup_steps": _warmup(ctx.settings.supernet_recipe, SupernetConfig, p.supernet_steps),
            "train.eval_every": max(10, p.supernet_steps // 4), "train.checkpoint_every": max(10, p.supernet_steps // 10),
            "eval.dev_sequences": p.supernet_dev_sequences}



def arm_arch_spec(ctx: Context, arm: str) -> str:
    """The ``retrain --arch`` value of ``arm``."""
    from lvsearch.search.job import RANDOM_DIR

    if arm == "ea":
        survivor = ctx.state.get("stages", {}).get("finalists", {}).get("result", {}).get("arch_json")
        return survivor or str(ctx.search_dir / "best.json")
    if arm == "random-search":
        return str(ctx.search_dir / RANDOM_DIR / "best.json")
    if arm == "bert":
        return "bert"
    if arm == "random-arch":
        return f"random:{ctx.plan.random_arch_seed}"
    raise ValueError(arm)



def supernet_slots(ctx: Context) -> int:
    """Slots of the supernet's space: from ``OUT/supernet/config.json`` once it is trained, before
    that from its recipe and :func:`supernet_overrides` (the same value: what the run will record)."""
    from lvsearch.config import SupernetConfig, load_config
    from lvsearch.train.supernet import build_space

    path = ctx.supernet_dir / "config.json"
    if path.exists():
        from lvsearch.train.run import SupernetRunConfig, read_config_file

        return read_config_file(ctx.supernet_dir, "supernet", SupernetRunConfig, what="supernet run config")["space"]["num_slots"]
    cfg, _ = load_config(SupernetConfig, ctx.settings.supernet_recipe, supernet_overrides(ctx))
    return build_space(cfg).num_slots



def retrain_overrides(ctx: Context, seed: int) -> dict:
    """Typed recipe overrides shared by every retrained arm (only ``train.seed`` differs by seed)."""
    from lvsearch.config import RetrainConfig

    p = ctx.plan
    slots = supernet_slots(ctx)
    # The recipe's 40% masking is measured for MLM only; ELECTRA keeps its paper rate (15%).
    electra = {"masking.probability": 0.15} if ctx.settings.objective == "electra" else {}
    return {"space": ctx.settings.space, "num_slots": slots, "objective": ctx.settings.objective, **electra,
            "train.steps": p.retrain_steps, "train.eval_every": p.curve_every, "train.seed": seed,
            "train.warmup_steps": _warmup(ctx.settings.retrain_recipe, RetrainConfig, p.retrain_steps),
            "train.checkpoint_every": max(p.curve_every, p.retrain_steps // 6), "eval.dev_sequences": p.curve_sequences}



def retrain_kwargs(ctx: Context, arm: str, seed: int, run: Path) -> dict | None:
    """The :func:`lvsearch.train.retrain.retrain` arguments that train (or resume) ``arm`` × ``seed``
    into ``run``; None when the run is already done."""
    status = train_state(run, ctx.plan.retrain_steps)
    if status == "done":
        return None
    partial = status == "partial"
    return {"arch_spec": None if partial else arm_arch_spec(ctx, arm),
            "recipe": None if partial else ctx.settings.retrain_recipe, "data_dir": str(ctx.data_dir), "out": str(run),
            "overrides": {} if partial else retrain_overrides(ctx, seed), "resume": partial,
            "overwrite": status == "new" and run.exists(), "device": ctx.device}



def retrain_arm(ctx: Context, arm: str, seed: int, run: Path) -> dict:
    """Train (or resume) one arm × seed in this process; returns its summary."""
    from lvsearch.train.retrain import retrain

    kwargs = retrain_kwargs(ctx, arm, seed, run)
    if kwargs is None:
        return read_stage_file(run / "summary.json", RetrainSummary, what="retrain summary")
    return retrain(**kwargs, show_progress=ctx.show_progress)



def use_workers(ctx: Context) -> bool:
    """Whether the arms run in worker processes: the plan asks for them and training is on a CPU."""
    if ctx.plan.arm_processes < 1:
        return False
    if ctx.device == "auto":
        import torch

        return not torch.cuda.is_available()
    return ctx.device == "cpu"



def arm_arch_key(ctx: Context, arm: str) -> str | None:
    """The architecture key of a searched arm (from its ``best.json``), None for the fixed arms."""
    from lvsearch.arch import Arch

    if arm not in ("ea", "random-search"):
        return None
    return Arch.from_json(Path(arm_arch_spec(ctx, arm))).key



def same_as(ctx: Context, arm: str) -> str | None:
    """The earlier arm of the plan that ``arm`` duplicates (both searches picked the same
    architecture), or None. Such an arm is trained and evaluated once: same recipe, seed and
    architecture give byte-identical runs."""
    key = arm_arch_key(ctx, arm)
    if key is None:
        return None
    for other in ctx.plan.arms[:ctx.plan.arms.index(arm)]:
        if arm_arch_key(ctx, other) == key:
            return other
    return None



def retrain_job(ctx: Context, arm: str, seed: int, name: str) -> "WorkerJob | None":
    """The worker job that trains (or resumes) ``arm`` × ``seed`` into ``OUT/retrain/NAME``; None
    when that run is already done."""
    from lvsearch.quickstart.workers import WorkerJob

    run = ctx.out / "retrain" / name
    kwargs = retrain_kwargs(ctx, arm, seed, run)
    return None if kwargs is None else WorkerJob(name, "retrain", kwargs, steps=ctx.plan.retrain_steps, run=str(run))


def evaluate_options(ctx: Context, model: Path, report: Path) -> EvaluateOptions:
    """:func:`lvsearch.eval.job.evaluate` settings of one arm (the same for every arm)."""
    p = ctx.plan
    opts = EvaluateOptions(model=str(model), out=report, mlm_data=ctx.data_dir, dev_sequences=p.mlm_dev_sequences,
                           device=ctx.device, tasks=tuple(ctx.settings.tasks))
    if ctx.settings.blimp is None:
        opts.no_blimp = True
        from lvsearch.eval.job import default_blimp_dir

        if not default_blimp_dir().is_dir():  # else the user passed --no-blimp
            opts.no_blimp_reason = f"BLiMP folder not found at {default_blimp_dir()} (pass --blimp DIR)"
    else:
        opts.blimp, opts.blimp_limit = ctx.settings.blimp, p.blimp_limit
    if ctx.settings.tasks:
        opts.train_limit, opts.eval_limit = p.finetune_train_limit, p.finetune_eval_limit
        opts.epochs, opts.seeds = p.finetune_epochs, p.finetune_seeds
        opts.min_steps = 0  # the plan sizes fine-tuning (examples × epochs × seeds) to the budget
    return opts


def evaluate_job(ctx: Context, name: str) -> "WorkerJob":
    """The single-threaded worker job that evaluates the run ``OUT/retrain/NAME`` into
    ``OUT/eval/NAME.json`` (:func:`evaluate_options`)."""
    from lvsearch.quickstart.workers import WorkerJob

    report = ctx.out / "eval" / f"{name}.json"
    report.parent.mkdir(parents=True, exist_ok=True)
    opts = evaluate_options(ctx, ctx.out / "retrain" / name / "model", report)
    kwargs = {k: (str(v) if isinstance(v, Path) else list(v) if isinstance(v, tuple) else v)
              for k, v in asdict(opts).items()}
    kwargs["threads"] = 1
    return WorkerJob(name, "evaluate", kwargs)

