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
"""

from __future__ import annotations

import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from lvsearch.errors import LvsearchError
from lvsearch.eval.job import EvaluateOptions
from lvsearch.faults import kill_point
from lvsearch.io import atomic_write_json, check_same_settings, check_writable_folder, guard_output, read_json
from lvsearch.lock import holds_output
from lvsearch.quickstart.plan import ARM_TITLES, ARMS, Plan, make_plan, pace_line  # noqa: F401 (re-exported)
from lvsearch.quickstart.files import QUICKSTART_AGAIN, STATE_FILE, RetrainRunConfig, RetrainSummary, read_stage_file, run_names
from lvsearch.search.folder import SearchFolder

if TYPE_CHECKING:
    from lvsearch.quickstart.workers import WorkerJob, WorkerPool

#: Warn once when the run is this many times slower than its plan.
OVERRUN_WARN = 1.5

FORMAT = "lvsearch.quickstart/v1"
STATE = STATE_FILE
DEFAULT_DATA = "builtin:python-docs"


@dataclass
class QuickstartSettings:
    """What the user asked for; a resumed run must ask for the same.

    Attributes:
        data: any ``data prepare`` input (folder, text files, ``builtin:python-docs``, ``hf:...``
            is not accepted here: use a local copy or ``data prepare`` first).
        minutes: the budget (see :func:`~lvsearch.quickstart.plan.make_plan`).
        seeds: pretraining seeds per arm.
        objective: ``mlm`` (default; MLM accuracy and BLiMP compare across arms) or ``electra``.
        space: search space family (``lvbert-elc``: order and ELC connectivity; ``lvbert``: order).
        tasks: fine-tuning task folders / HF specs (``lvsearch evaluate --task``).
        blimp: BLiMP folder, or None to skip BLiMP.
        supernet_recipe, retrain_recipe: recipes (bundled names or YAML paths).
        skip_bad_files: skip binary / non-UTF-8 files of ``data`` with a warning.
        finalists: EA finalists pruned by successive halving before the EA arm is chosen
            (0 = no finalist stage, the default; else ≥ 2).
    """

    data: str = DEFAULT_DATA
    minutes: float = 20.0
    seeds: int = 1
    objective: str = "mlm"
    space: str = "lvbert-elc"
    tasks: list[str] = field(default_factory=list)
    blimp: str | None = None
    supernet_recipe: str = "quickstart"
    retrain_recipe: str = "retrain-quickstart"
    skip_bad_files: bool = False
    finalists: int = 0

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Context:
    out: Path
    settings: QuickstartSettings
    plan: Plan
    state: dict
    device: str = "auto"
    show_progress: bool = True
    #: the worker processes of the fixed arms started before the search (:func:`start_fixed_arms`)
    pool: "WorkerPool | None" = None
    #: the run had finished before this call: nothing was run or rewritten (:func:`run_quickstart`)
    finished_before: bool = False

    @property
    def data_dir(self) -> Path:
        return self.out / "data"

    @property
    def supernet_dir(self) -> Path:
        return self.out / "supernet"

    @property
    def search_dir(self) -> Path:
        return self.out / "search"

    def run_names(self, arm: str) -> list[str]:
        """Run/report names of ``arm``: ``ARM`` for seed 0, ``ARM-seedK`` for the others."""
        return run_names(arm, self.plan.seeds)

    def save(self) -> None:
        atomic_write_json(self.out / STATE, self.state)


def _normalise_settings(s: QuickstartSettings) -> dict:
    d = s.to_dict()
    d["minutes"] = float(d["minutes"])
    for key in ("blimp",):
        if d[key] is not None:
            d[key] = str(Path(d[key]).expanduser().resolve())
    d["tasks"] = [str(Path(t).expanduser().resolve()) if Path(t).exists() else t for t in d["tasks"]]
    if not str(d["data"]).startswith(("builtin:", "hf:")) and Path(d["data"]).exists():
        d["data"] = str(Path(d["data"]).expanduser().resolve())
    return d


def check_settings(settings: QuickstartSettings) -> None:
    """Check the settings before any work (data, recipes' space, BLiMP folder, tasks).

    Raises:
        LvsearchError: the first bad setting, naming its option.
    """
    if settings.objective not in ("mlm", "electra"):
        raise LvsearchError(f"--objective must be mlm or electra, got {settings.objective!r}")
    if str(settings.data).startswith("hf:"):
        raise LvsearchError(f"--data {settings.data}: hub datasets are not read by quickstart",
                            fix="run 'lvsearch data prepare --hf-dataset NAME --out DIR' yourself, or pass a local folder")
    if not str(settings.data).startswith("builtin:") and not Path(settings.data).exists():
        raise LvsearchError(f"--data {settings.data} does not exist",
                            fix="pass a folder or text file, or omit --data to use the embedded builtin:python-docs corpus")
    if settings.blimp is not None and not Path(settings.blimp).is_dir():
        raise LvsearchError(f"--blimp {settings.blimp} is not a folder", fix="pass a folder of BLiMP *.jsonl files, or --no-blimp")
    from lvsearch.eval.finetune import load_task
    from lvsearch.space import SearchSpace

    SearchSpace.load(settings.space)
    if settings.blimp is not None:
        from lvsearch.eval.blimp import read_blimp

        read_blimp(settings.blimp, limit=1)  # no *.jsonl / bad rows: fail now, not after training
    names = [load_task(t).name for t in settings.tasks]  # fails early on a bad task folder
    if len(set(names)) != len(names):
        raise LvsearchError(f"two --task arguments have the same name ({', '.join(names)})", fix="give each task once")


def open_context(out: str | Path, settings: QuickstartSettings, *, device: str = "auto",
                 show_progress: bool = True) -> Context:
    """Create ``OUT`` (or reopen it for resuming) and return the context.

    Raises:
        LvsearchError: bad settings; ``OUT`` is a file, a non-empty folder that holds no
            quickstart, or a quickstart with other settings.
    """
    from lvsearch.device import check_device

    check_settings(settings)
    check_device(device)
    out = Path(out).expanduser().resolve()
    plan = make_plan(settings.minutes, settings.seeds, settings.finalists)
    wanted = _normalise_settings(settings)
    path = out / STATE
    if out.exists() and not out.is_dir():
        raise LvsearchError(f"--out {out} is a file", fix="choose a folder path")
    local = [p for p in (settings.data, *settings.tasks, settings.blimp)
             if p is not None and not str(p).startswith(("builtin:", "hf:"))]
    guard_output(out, inputs=[("input", Path(p).expanduser()) for p in local])
    check_writable_folder(out)
    if path.exists():
        state = read_json(path, what="quickstart state")
        if not isinstance(state, dict) or state.get("format") != FORMAT:
            raise LvsearchError(f"{path} is not a quickstart state file ({FORMAT})",
                                fix="choose another --out, or delete the folder to start again")
        from lvsearch.io import check_fields
        from lvsearch.quickstart.files import QuickstartState

        check_fields(state, QuickstartState, path, what="quickstart state",
                     fix="restore it, or choose another --out (the stage folders in it can be reused by hand)")
        if state["settings"] != wanted and not any(st.get("status") == "done" for st in state["stages"].values()):
            # nothing was produced (e.g. the first try failed on bad --data): start afresh
            state = {"format": FORMAT, "settings": wanted, "plan": plan.to_dict(), "stages": {}}
            atomic_write_json(path, state)
        check_same_settings(out, "a quickstart", state.get("settings") or {}, wanted,
                            fix="re-run with the same arguments to resume it, or choose another --out")
    else:
        if out.is_dir() and any(out.iterdir()):
            raise LvsearchError(f"--out {out} is not empty and holds no quickstart", fix="choose a new or empty folder")
        out.mkdir(parents=True, exist_ok=True)
        state = {"format": FORMAT, "settings": wanted, "plan": plan.to_dict(), "stages": {}}
        atomic_write_json(path, state)
    return Context(out, settings, plan, state, device=device, show_progress=show_progress)


# ------------------------------------------------------------------------------- stages
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


def _train_state(run: Path, steps: int) -> str:
    """``done`` (a finished run: summary with its final evaluation at ``steps``), ``partial`` (a
    checkpoint to resume, which also completes a run killed before its summary) or ``new``."""
    from lvsearch.train.checkpoint import latest_checkpoint
    from lvsearch.train.run import finished_summary

    if finished_summary(run, steps) is not None:  # summary at ``steps`` with its final evaluation
        return "done"
    if (run / "config.json").exists() and latest_checkpoint(run) is not None:
        return "partial"
    return "new"


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


def stage_supernet(ctx: Context) -> dict:
    """Train (new), resume (checkpoint present) or skip (summary at the planned steps) ``OUT/supernet``."""
    from lvsearch.train.supernet import train_supernet

    run = ctx.supernet_dir
    status = _train_state(run, ctx.plan.supernet_steps)
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
        return int(read_json(path, what="supernet run config")["space"]["num_slots"])
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
    status = _train_state(run, ctx.plan.retrain_steps)
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


def arm_arch_key(ctx: Context, arm: str) -> str | None:
    """The architecture key of a searched arm (from its ``best.json``), None for the fixed arms."""
    from lvsearch.arch import Arch

    if arm not in ("ea", "random-search"):
        return None
    return Arch.from_dict(read_json(Path(arm_arch_spec(ctx, arm)), what="search pick")).key


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
    On a CPU the arms train at once in single-threaded worker processes (:func:`use_workers`);
    runs already training in the background (``ctx.pool``, :func:`start_fixed_arms`) are waited
    for, not started again."""
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


def retrain_job(ctx: Context, arm: str, seed: int, name: str) -> "WorkerJob | None":
    """The worker job that trains (or resumes) ``arm`` × ``seed`` into ``OUT/retrain/NAME``; None
    when that run is already done."""
    from lvsearch.quickstart.workers import WorkerJob

    run = ctx.out / "retrain" / name
    kwargs = retrain_kwargs(ctx, arm, seed, run)
    return None if kwargs is None else WorkerJob(name, "retrain", kwargs, steps=ctx.plan.retrain_steps, run=str(run))


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


def stage_evaluate(ctx: Context) -> dict:
    """:func:`lvsearch.eval.job.evaluate` of every retrained run into ``OUT/eval/NAME.json``
    (existing reports kept; an arm that duplicates an earlier one gets a copy of its report). On a
    CPU the arms are evaluated at once in single-threaded worker processes (:func:`use_workers`);
    a fixed arm's report is usually there already (:func:`start_fixed_arms`)."""
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


@holds_output("out")
def run_quickstart(out: str | Path, settings: QuickstartSettings, *, device: str = "auto",
                   show_progress: bool = True, stop_after: str | None = None) -> Context:
    """Run (or resume) every stage; returns the context (``ctx.state`` has the outcomes).

    Each stage's wall time is added to ``quickstart.json`` (over resumed sessions), so the
    report's per-stage times are the real cost. ``stop_after`` ends after the named stage.

    Raises:
        LvsearchError: bad settings or a stage's own errors (bad data, ...).
    """
    from lvsearch.train.loop import RESUME_HINT

    ctx = open_context(out, settings, device=device, show_progress=show_progress)
    stages = ctx.state.get("stages") or {}
    if all(isinstance(stages.get(n), dict) and stages[n].get("status") == "done" for n, _ in STAGES) \
            and (ctx.out / "report.md").is_file() and stop_after is None:
        ctx.finished_before = True  # a finished run: print where its report is, rewrite nothing
        return ctx
    from lvsearch.repro import record_environment

    record_environment(ctx.out, ctx.device, resume=bool(ctx.state.get("stages")), what="quickstart")
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
        text, pace = pace_line(ctx.plan.minutes, elapsed, done_names, budgets)
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
