"""The ``lvsearch retrain --finalists K`` job (:func:`run_finalists`; its arguments are parsed by
:mod:`lvsearch.scaling.cli`): retrain the K best architectures of a search with successive
halving, pruned by the current dev loss or by learning-curve extrapolation.

Successive halving (Jamieson & Talwalkar 2016; Li et al. 2018, Hyperband's inner loop): train
every finalist for a short budget, keep the best ``ceil(n / eta)``, multiply the budget by
``eta``, repeat until one is left, and train that one to the full budget. With ``K`` finalists
there are ``R = ceil(log_eta K)`` pruning rounds at ``budget / eta**R``, ``budget /
eta**(R-1)``, …, ``budget / eta`` steps.

Ranking (``--pruning``):

* ``current-loss`` (default): plain successive halving, ranked by the current dev loss (why it
  is the default, measured: docs/results.md, "Finalist pruning that predicts").
* ``extrapolate``: fit M4 (Alabdulmohsin, Neyshabur & Zhai 2022, Eq. 4; see
  :mod:`lvsearch.scaling`) to each finalist's dev-loss curve — x = tokens seen, warm-up
  evaluations (step <= ``train.warmup_steps``) dropped, ``eps_0 = ln(vocabulary size)``
  fixed (the random-guess loss of the raw MLM loss in nats; the curve's ``loss`` is the dev
  MLM loss, the generator's under ELECTRA) — and rank by the loss predicted at the full
  budget; a finalist below the cut is still kept when the lower end of its bootstrap
  prediction interval (:func:`lvsearch.scaling.prediction_interval`, residual bootstrap,
  90%) reaches the cut-off (:func:`lvsearch.scaling.halving_step`). **Fallback**: when a
  round's curves are too short to fit (M4 with fixed ``eps_0`` needs 4 points after the
  warm-up) or one fit fails, that round ranks every finalist by its current dev loss; the
  round's ``decision.fallback`` says why and the table marks it.

**Warmup-stable-decay** (``--set train.schedule=wsd``; Hägele et al. 2024): the learning rate
is constant after the warm-up until the cool-down, the last ``train.decay_fraction`` of the
budget. Every rung must then lie in the stable phase, so finalists are compared on
constant-learning-rate curves (under a linear decay to the budget the schedule itself bends
every curve). With ``extrapolate``, at each rung every finalist also gets a
**cool-down probe** (:func:`lvsearch.train.cooldown.cooldown_probe`): a throw-away branch
from its rung checkpoint, cooled down over ``decay_fraction / (1 - decay_fraction)`` × the
rung's steps (the full run's cool-down share), whose dev-loss drop is measured. M4 then
extrapolates the stable-phase curve to the cool-down's start at the full budget, and the
predicted final loss is that minus the finalist's measured drop (its interval shifted by the
same amount: the drop is treated as known). The probes' steps are counted in the compute
(``probe_steps``); the finalist runs themselves are unchanged by them.

Every finalist is trained with ``train.steps = budget``, so its learning-rate schedule is the
full budget's and a run stopped at a rung is an exact prefix of the full run
(:func:`lvsearch.train.loop.train` ``stop_at``): a survivor continues from its checkpoint and
nothing is retrained. For the same reason a pruning decision depends only on curve prefixes,
so ``--compare-full`` — train the cut finalists to the end as well — can replay both rules on
the complete curves (:func:`lvsearch.scaling.successive_halving`) and say whether each rule's
pick agrees with training everything, at what fraction of the compute.

Job folder (``--out``)::

    finalists.json      the job's state and decision log (lvsearch.finalists/v1, written
                        atomically after every round): settings, rungs, per round the
                        predictions, intervals, who was cut and why, compute spent; the final
                        pick; with --compare-full the comparison
    best.json           the pick as an architecture JSON (lvsearch.arch/v1) whose meta names
                        its run and model directory
    archs/NAME.json     each finalist's architecture (with its search meta)
    finalists/NAME/     each finalist: an ordinary retrain run folder (config.json,
                        curve.jsonl, checkpoints/, model/ — the model at the step it reached)
    dispatch/to-step-N/ with --executor local or slurm: submitit's files and logs of the
                        trainings to step N (lvsearch.dispatch)

The ``--arch`` list is read by :mod:`lvsearch.scaling.finalist_list`, ``--compare-full`` is
:mod:`lvsearch.scaling.finalist_compare`, the terminal tables are
:mod:`lvsearch.scaling.finalist_tables`, the halving decisions :mod:`lvsearch.scaling.halving`.

Re-running the same command continues the job: recorded rounds are not redone, and each
finalist resumes from its own checkpoint. Compute is counted in optimizer steps × finalists
(every finalist has the same batch, so this is proportional to tokens).
"""

from __future__ import annotations

import math
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from lvsearch import __version__
from lvsearch.config import Overrides, RetrainConfig, load_config, override_map, to_jsonable
from lvsearch.errors import LvsearchError
from lvsearch.faults import kill_point
from lvsearch.io import (atomic_write_json, check_fields, check_same_settings, check_writable_folder, guard_output,
                         read_json)
from lvsearch.lock import holds_output
from lvsearch.scaling.finalist_compare import compare
from lvsearch.scaling.finalist_list import Finalist, resolve_finalists
from lvsearch.scaling.finalist_tables import comparison_table, round_table, summary_table
from lvsearch.scaling.halving import PRUNING, halving_rounds, halving_rungs
from lvsearch.schema import Count, FileModel, Finite, needs_when_done
from lvsearch.train.loop import read_curve

FORMAT = "lvsearch.finalists/v1"
STATE = "finalists.json"
BEST = "best.json"
RUNS = "finalists"
ARCHS = "archs"
DISPATCH = "dispatch"  # submitit's files of --executor local/slurm (lvsearch.dispatch)
PROBES = "cooldown_probes.json"  # in a finalist's run folder: {rung step: cooldown_probe result}


class _Candidate(FileModel):
    last_loss: float
    score: float
    lo: float
    hi: float
    scored_by: str
    decision: str
    reason: str


class _Decision(FileModel):
    """One round's decision log (:func:`lvsearch.scaling.halving.halving_step`)."""

    kept: list[str]
    ranking: list[str]
    candidates: dict[str, _Candidate]
    n_keep_by_rank: Optional[Count] = None


class _Round(FileModel):
    round: Count
    alive: list[str]
    budget_steps: Count
    decision: _Decision


class _Final(FileModel):
    pick: str
    survivors: list[str]
    final_loss: dict[str, Finite]
    steps_trained: dict[str, Count]
    compute_steps: Count
    compute_all_steps: Count
    compute_fraction: Finite
    reason: str


class _Settings(FileModel):
    finalists: list[dict]
    eta: Optional[Finite] = None


class _Best(FileModel):
    model_dir: str


class FinalistState(FileModel):
    """The fields of ``finalists.json`` a re-run reads to continue the job and the quickstart
    report reads (others are kept; ``format`` is checked first, with its own message)."""

    settings: _Settings
    rungs_steps: list[Count]
    eps0: Optional[Finite] = None
    rule: Optional[str] = None
    rounds: list[_Round]
    final: Optional[_Final] = None
    best: Optional[_Best] = None
    comparison: Optional[dict] = None
    status: Optional[str] = None

    done_check = needs_when_done("final", "best")


@dataclass
class FinalistOptions:
    """Settings of a finalist-pruning job.

    Attributes:
        finalists: K, how many architectures (the first K of the list) compete; >= 2.
        budget: full training budget per finalist in optimizer steps (None: the recipe's
            ``train.steps``); must be divisible by ``eta**R`` (R pruning rounds).
        eta: halving rate, an integer >= 2 (keep the best 1/eta, multiply the budget by eta).
        pruning: ``current-loss`` (default) or ``extrapolate`` (M4).
        compare_full: also train the cut finalists to the full budget and compare.
        n_boot: bootstrap refits per prediction interval.
        level: central coverage of the interval.
        seed: seed of the bootstrap.
    """

    finalists: int
    budget: int | None = None
    eta: int = 2
    pruning: str = "current-loss"
    compare_full: bool = False
    n_boot: int = 50
    level: float = 0.9
    seed: int = 0


# ---------------------------------------------------------------------------------------
# Curves and training
# ---------------------------------------------------------------------------------------


class FinalistJob:
    """One finalist-pruning job in ``out`` (see the module docstring)."""

    def __init__(self, out: Path, finalists: list[Finalist], config: RetrainConfig, recipe, overrides, data_dir,
                 data, opts: FinalistOptions, device: str, show_progress: bool, dispatch=None):
        self.out, self.finalists, self.config, self.opts = out, finalists, config, opts
        self.recipe, self.overrides, self.data_dir, self.data = recipe, override_map(overrides), data_dir, data
        self.device, self.show_progress = device, show_progress
        from lvsearch.dispatch import DispatchOptions

        self.dispatch = dispatch if dispatch is not None else DispatchOptions()
        self.budget = config.train.steps
        self.rungs = halving_rungs(self.budget, len(finalists), opts.eta)
        self.tokens_per_step = config.train.batch_size * config.train.seq_len
        self.eps0 = math.log(data.vocab_size)
        self.by_name = {f.name: f for f in finalists}
        t = config.train
        self.wsd = t.schedule == "wsd"
        #: steps at the cool-down's start (wsd) — what M4 extrapolates to; else the budget
        self.predict_steps = self.budget - max(1, round(t.decay_fraction * self.budget)) if self.wsd else self.budget

    def probe_steps(self, rung: int) -> int:
        """Cool-down length of the probe at ``rung``: the full run's cool-down share
        (``decay_fraction``) of the probe's own ``rung + d`` steps."""
        f = self.config.train.decay_fraction
        return max(1, round(f * rung / (1.0 - f)))

    def probe(self, name: str, rung: int) -> dict:
        """The cool-down probe of finalist ``name`` at ``rung`` (cached in its run folder, so a
        re-run job does not probe again)."""
        from lvsearch.train.cooldown import cooldown_probe

        path = self.run_dir(name) / PROBES
        cache = read_json(path, what="cool-down probes") if path.is_file() else {}
        if not isinstance(cache, dict):
            raise LvsearchError(f"{path} is malformed", fix="delete it: the probes are re-measured")
        key = str(rung)
        if key not in cache:
            cache[key] = cooldown_probe(self.run_dir(name), rung, self.probe_steps(rung), data_dir=self.data_dir,
                                        device=self.device)
            atomic_write_json(path, cache)
        return cache[key]

    # -- state -------------------------------------------------------------------------------
    def settings(self) -> dict:
        from lvsearch.train.run import normalise

        o = self.opts
        return normalise({
            "finalists": [{"name": f.name, "arch": f.arch.to_dict(), "source": f.source} for f in self.finalists],
            "config": to_jsonable(self.config),
            "budget_steps": self.budget, "eta": o.eta, "pruning": o.pruning,
            "n_boot": o.n_boot, "level": o.level, "seed": o.seed,
            "tokenizer_sha256": self.data.tokenizer_sha256,
        })

    def run_dir(self, name: str) -> Path:
        return self.out / RUNS / name

    def arch_file(self, name: str) -> Path:
        return self.out / ARCHS / f"{name}.json"

    def save(self, state: dict) -> None:
        atomic_write_json(self.out / STATE, state)

    # -- training ----------------------------------------------------------------------------
    def advance_all(self, names: list[str], target: int) -> None:
        """Train the finalists ``names`` to ``target`` steps, each an independent job
        (:func:`advance_finalist`) run where ``--executor`` says (:mod:`lvsearch.dispatch`;
        inline: one after another in this process). A failed job is reported with its log
        after the others have ended (:class:`~lvsearch.dispatch.DispatchError`)."""
        from lvsearch.dispatch import Job, run_jobs

        inline = self.dispatch.inline
        jobs = [Job(name, advance_finalist, {
            "run": str(self.run_dir(name)), "arch_file": str(self.arch_file(name)), "recipe": self.recipe,
            "overrides": dict(self.overrides), "data_dir": str(self.data_dir), "budget": self.budget,
            "target": target, "device": self.device, "show_progress": self.show_progress and inline,
        }) for name in names]
        run_jobs(jobs, self.dispatch, self.out / DISPATCH / f"to-step-{target}", ui_label="finalist")

    def curve(self, name: str, up_to: int) -> tuple[list[float], list[float]]:
        """Dev-loss curve up to ``up_to`` with the warm-up evaluations dropped; when the rung
        ends inside the warm-up, the last evaluation alone (enough for current-loss ranking,
        the documented fallback)."""
        xs, ys = read_curve(self.run_dir(name), up_to_step=up_to, after_step=self.config.train.warmup_steps)
        if not xs:
            xs, ys = read_curve(self.run_dir(name), up_to_step=up_to, after_step=0)
            xs, ys = xs[-1:], ys[-1:]
        return xs, ys

    def final_loss(self, name: str) -> float:
        _, ys = read_curve(self.run_dir(name), up_to_step=self.budget, after_step=self.budget - 1)
        if not ys:
            raise LvsearchError(f"{self.run_dir(name)}: no dev evaluation at step {self.budget}",
                                fix="delete the finalist's run folder and re-run the job")
        return ys[-1]

    def step_kwargs(self) -> dict:
        from lvsearch.scaling import M4

        eps0 = self.eps0
        return {"model_factory": lambda: M4(eps0=eps0, fit_eps0=False), "n_boot": self.opts.n_boot,
                "level": self.opts.level, "seed": self.opts.seed}


def advance_finalist(run: str, arch_file: str, recipe: str | None, overrides: Overrides, data_dir: str, budget: int,
                     target: int, device: str = "auto", show_progress: bool = False) -> int:
    """Train the finalist run ``run`` to ``target`` of ``budget`` steps: a new retrain run of
    ``arch_file`` (``train.steps = budget``, stopped at ``target``), or the resumption of its
    checkpoint; nothing when it is already there. Calling it again after an interruption
    continues exactly (what a requeued dispatch job does). Returns the step reached.

    Raises:
        LvsearchError: the errors of :func:`lvsearch.train.retrain.retrain`.
    """
    from lvsearch.train.checkpoint import latest_step
    from lvsearch.train.retrain import retrain
    from lvsearch.train.run import finished_summary

    run_path = Path(run)
    reached = latest_step(run_path)
    if reached >= target and (target < budget or finished_summary(run_path, budget) is not None):
        return reached  # a rung is read from the curve; the full budget also needs its summary
    stop = None if target == budget else target
    if reached == 0:  # new, or started without reaching a checkpoint: start over
        retrain(arch_file, recipe, data_dir, run_path, overrides={**override_map(overrides), "train.steps": budget},
                overwrite=True, device=device, show_progress=show_progress, stop_at=stop)
    else:
        retrain(None, None, data_dir, run_path, resume=True, device=device, show_progress=show_progress, stop_at=stop)
    return target


def _open_state(out: Path, job: FinalistJob, overwrite: bool) -> dict:
    """The recorded state when ``out`` holds this job, else a fresh one (``out`` new or empty,
    or a finalist job replaced with ``overwrite``).

    Raises:
        LvsearchError: ``out`` is a file, holds something else, or holds a finalist job with
            other settings (without ``overwrite``).
    """
    settings = job.settings()
    if out.exists() and not out.is_dir():
        raise LvsearchError(f"--out {out} is a file", fix="choose a folder path")
    if (out / STATE).is_file():
        state = read_json(out / STATE, what="finalist job state")
        if not isinstance(state, dict) or state.get("format") != FORMAT:
            raise LvsearchError(f"{out / STATE} is not a finalist job state ({FORMAT})", fix="choose another --out")
        if not overwrite:
            check_fields(state, FinalistState, out / STATE, what="finalist job state",
                         fix="restore it, or pass --overwrite to start the job again")
        if overwrite:
            shutil.rmtree(out)
        else:
            check_same_settings(out, "a finalist job", state.get("settings") or {}, settings,
                                fix="re-run it with its own settings to continue, pass --overwrite to restart, "
                                    "or choose another --out")
            return state
    elif out.is_dir() and any(out.iterdir()):
        raise LvsearchError(f"--out {out} is not empty and holds no finalist job", fix="choose a new or empty folder")
    return {
        "format": FORMAT, "lvsearch_version": __version__, "settings": settings,
        "data": str(Path(job.data.folder).resolve()), "rungs_steps": job.rungs,
        "tokens_per_step": job.tokens_per_step, "budget_tokens": job.budget * job.tokens_per_step,
        "eps0": job.eps0, "warmup_steps_dropped": job.config.train.warmup_steps,
        "rule": PRUNING[job.opts.pruning], "rounds": [], "final": None, "comparison": None, "status": "running",
    }


# ---------------------------------------------------------------------------------------
# The job
# ---------------------------------------------------------------------------------------


@holds_output("out")
def run_finalists(
    arch_spec: str,
    recipe: str | None,
    data_dir: str | Path,
    out: str | Path,
    options: FinalistOptions,
    *,
    overrides: Overrides = (),  # type: ignore[assignment]
    overwrite: bool = False,
    device: str = "auto",
    show_progress: bool = True,
    dispatch=None,
) -> dict:
    """Successive halving over the first ``options.finalists`` architectures of ``arch_spec``;
    returns the state written to ``out/finalists.json`` (see the module docstring).

    Args:
        arch_spec: ``topk.json`` of ``lvsearch evolve``, a JSON list of architecture specs, or
            comma-separated names/paths.
        recipe, overrides: the retrain recipe of every finalist (``train.steps`` is set to the
            budget).
        out: job folder; re-running with the same arguments continues the job there.
        dispatch: where each round's trainings run (:class:`lvsearch.dispatch.DispatchOptions`;
            None: in this process, one after another). Not part of the job's settings: a job
            started with one executor continues with another. submitit's files go to
            ``out/dispatch``.

    Raises:
        LvsearchError: K < 2 or more than the list holds, eta < 2, a budget not divisible by
            eta^rounds or whose first rung is not a multiple of ``train.eval_every`` (0 is
            refused: the curves need evaluations), an unknown ``pruning``, invalid or duplicate
            architectures, bad data, ``out`` holding something else or a job with other
            settings, multi-process launch (torchrun);
            :class:`~lvsearch.dispatch.DispatchError` when dispatched trainings failed (each
            named with its log; the round is not recorded, re-running continues it).
    """
    from lvsearch import ui

    _check_options(options)
    out = Path(out).expanduser().resolve()
    job = _build_job(arch_spec, recipe, data_dir, out, options, overrides=overrides, overwrite=overwrite,
                     device=device, show_progress=show_progress, dispatch=dispatch)
    state = _open_state(out, job, overwrite)
    out.mkdir(parents=True, exist_ok=True)
    for f in job.finalists:
        if not job.arch_file(f.name).is_file():
            f.arch.to_json(job.arch_file(f.name), space=job.config.space, meta={**f.meta, "finalist_source": f.source})
    job.save(state)
    _announce(job, state)

    alive, reached = _run_rounds(job, state)
    if state["final"] is None:
        _run_final(job, state, alive, reached)
    if options.compare_full and state["comparison"] is None:
        ui.console.print(f"[bold]--compare-full[/bold]: training the cut finalists to {job.budget} steps too")
        job.advance_all([f.name for f in job.finalists], job.budget)
        state["comparison"] = compare(job, state)
        job.save(state)
    ui.console.print(summary_table(state))
    if state.get("comparison"):
        ui.console.print(comparison_table(state))
    ui.console.print(f"pick: {state['final']['pick']} — model directory {state['best']['model_dir']} "
                     f"(also named in {out / BEST})")
    return state


def _check_options(o: FinalistOptions) -> None:
    """Refuse a multi-process launch and out-of-range pruning settings (LvsearchError)."""
    import os

    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise LvsearchError("--finalists runs as one process", fix="run it without torchrun")
    if o.pruning not in PRUNING:
        raise LvsearchError(f"--pruning {o.pruning!r} unknown", fix=f"use {' or '.join(PRUNING)}")
    if o.n_boot < 0 or not 0 < o.level < 1:
        raise LvsearchError("--n-boot must be >= 0 and the interval level in (0, 1)")


def _build_job(arch_spec: str, recipe: str | None, data_dir: str | Path, out: Path, o: FinalistOptions, *,
               overrides: Overrides, overwrite: bool, device: str, show_progress: bool, dispatch) -> FinalistJob:
    """Check ``out``, open the data, load the recipe (budget and the space of a top-k file
    applied), resolve the finalists and check that the rungs fit the evaluations and schedule.

    Raises:
        LvsearchError: see :func:`run_finalists` (everything but the recorded state).
    """
    from lvsearch.data.shards import PreparedData
    from lvsearch.train.retrain import space_from_arch_file

    if out.exists() and not out.is_dir():
        raise LvsearchError(f"--out {out} is a file", fix="choose a folder path")
    guard_output(out, overwrite=overwrite, inputs=[("--data", data_dir), ("--arch", arch_spec if Path(str(arch_spec)).exists()
                                                                          else None)])
    check_writable_folder(out)
    data = PreparedData.open(data_dir)
    # the space follows a top-k file that records it (as a single arch file in retrain does)
    overrides = space_from_arch_file(arch_spec, overrides)
    extra = {"train.steps": o.budget} if o.budget is not None else {}
    config, _ = load_config(RetrainConfig, recipe, {**overrides, **extra})
    budget = config.train.steps
    halving_rounds(o.finalists, o.eta)
    finalists = resolve_finalists(arch_spec, o.finalists, config, data)
    rungs = halving_rungs(budget, o.finalists, o.eta)
    t = config.train
    if t.eval_every < 1 or rungs[0] % t.eval_every:
        raise LvsearchError(
            f"the first rung ({rungs[0]} steps = budget {budget} / {budget // rungs[0]}) is not a multiple of "
            f"train.eval_every ({t.eval_every}): the curves would not be prefixes of the full runs",
            fix=f"set train.eval_every to a divisor of {rungs[0]} (e.g. --set train.eval_every={_divisor(rungs[0], t.eval_every)}) "
                f"or make --budget a multiple of {budget // rungs[0] * max(t.eval_every, 1)}",
        )
    job = FinalistJob(out, finalists, config, recipe, {**overrides, **extra}, data_dir, data, o, device, show_progress, dispatch)
    if job.wsd and (rungs[-1] > job.predict_steps or rungs[0] < t.warmup_steps):
        raise LvsearchError(
            f"train.schedule wsd: the rungs ({', '.join(map(str, rungs))} steps) must lie in the stable phase, "
            f"between the warm-up ({t.warmup_steps} steps) and the cool-down's start (step {job.predict_steps} of "
            f"{budget}, decay_fraction {t.decay_fraction})",
            fix=(f"lower train.decay_fraction to at most {1 - rungs[-1] / budget:.3g}" if rungs[-1] > job.predict_steps
                 else f"lower train.warmup_steps to at most {rungs[0]}"),
        )
    return job


def _m4_points(job: FinalistJob) -> int:
    """Dev evaluations M4 needs after the warm-up to fit a curve (its free parameters)."""
    return job.step_kwargs()["model_factory"]().n_params


def _announce(job: FinalistJob, state: dict) -> None:
    """Print the job's plan, with a warning when round 1 is too short for M4 (it falls back)."""
    from lvsearch import ui

    t, rungs, rule = job.config.train, job.rungs, PRUNING[job.opts.pruning]
    n_first = max(0, rungs[0] // t.eval_every - t.warmup_steps // t.eval_every)
    need = _m4_points(job)
    if rule == "m4" and not state["rounds"] and n_first < need:
        ui.warn(f"round 1 curves have {n_first} dev evaluation(s) after the warm-up; M4 needs {need}: "
                "that round is ranked by current dev loss (raise the budget or lower train.eval_every)")
    ui.console.print(
        f"finalist pruning: {len(job.finalists)} finalists, budget {job.budget} steps, eta {job.opts.eta}, rungs "
        f"{', '.join(map(str, rungs))} steps, ranked by {'M4 extrapolation' if rule == 'm4' else 'current dev loss'}"
    )


def _run_rounds(job: FinalistJob, state: dict) -> tuple[list[str], dict[str, int]]:
    """Run the pruning rounds not yet in ``state["rounds"]`` (each recorded and saved as it
    ends). Returns the finalists still alive and the step each finalist reached."""
    from lvsearch import ui
    from lvsearch.scaling import halving_step

    rule, need = PRUNING[job.opts.pruning], _m4_points(job)
    alive = [f.name for f in job.finalists]
    reached = dict.fromkeys(alive, 0)
    for r in state["rounds"]:
        for n in r["alive"]:
            reached[n] = r["budget_steps"]
        alive = [n for n in alive if n in r["decision"]["kept"]]
    for i, rung in enumerate(job.rungs):
        if i < len(state["rounds"]) or len(alive) <= 1 or state["final"] is not None:
            continue
        t0 = time.perf_counter()
        ui.console.print(f"[bold]round {i + 1}/{len(job.rungs)}[/bold]: {len(alive)} finalists to step {rung}")
        job.advance_all(alive, rung)
        for n in alive:
            reached[n] = rung
        kill_point(f"finalists-round:{i + 1}")
        curves = {n: job.curve(n, rung) for n in alive}
        fittable = all(len(x) >= need for x, _ in curves.values())  # else the round falls back anyway
        probes = {n: job.probe(n, rung) for n in alive} if job.wsd and rule == "m4" and fittable else None
        decision = halving_step(curves, full_budget=job.predict_steps * job.tokens_per_step, eta=job.opts.eta,
                                rule=rule, offsets=None if probes is None else {n: -p["drop"] for n, p in probes.items()},
                                **job.step_kwargs())
        state["rounds"].append({
            "round": i + 1, "budget_steps": rung, "budget_tokens": rung * job.tokens_per_step, "alive": alive,
            "decision": decision, "compute_steps": sum(reached.values()), "seconds": time.perf_counter() - t0,
            "predicted_at_steps": job.predict_steps, "probes": probes,
            "probe_steps": sum(p["decay_steps"] for p in (probes or {}).values()),
        })
        job.save(state)
        ui.console.print(round_table(state["rounds"][-1], job.budget))
        alive = [n for n in alive if n in decision["kept"]]
    return alive, reached


def _run_final(job: FinalistJob, state: dict, alive: list[str], reached: dict[str, int]) -> None:
    """Train the survivors ``alive`` to the full budget, pick the lowest final dev loss, write
    ``best.json`` and record ``state["final"]`` (``reached`` is updated and recorded)."""
    from lvsearch import ui

    budget = job.budget
    ui.console.print(f"[bold]final[/bold]: {len(alive)} finalist(s) to the full budget ({budget} steps)")
    job.advance_all(alive, budget)
    for n in alive:
        reached[n] = budget
    losses = {n: job.final_loss(n) for n in alive}
    pick = min(alive, key=lambda n: (losses[n], n))
    probe_steps = sum(r.get("probe_steps", 0) for r in state["rounds"])
    state["final"] = {
        "survivors": alive, "final_loss": losses, "pick": pick,
        "reason": "the last survivor" if len(alive) == 1 else
        f"{len(alive)} finalists left after the last rung (overlapping intervals kept more than 1/eta "
        "in some round): the lowest dev loss at the full budget",
        "steps_trained": reached, "compute_steps": sum(reached.values()),
        "probe_steps": probe_steps,
        "compute_all_steps": len(job.finalists) * budget,
        # training plus cool-down probes (wsd) over training every finalist to the budget
        "compute_fraction": (sum(reached.values()) + probe_steps) / (len(job.finalists) * budget),
    }
    state["best"] = _write_best(job, pick, losses[pick])
    state["status"] = "done"
    job.save(state)


def _divisor(n: int, near: int) -> int:
    """The divisor of ``n`` closest to ``near`` (for an error message's suggestion)."""
    divs = [d for d in range(1, n + 1) if n % d == 0]
    return min(divs, key=lambda d: (abs(d - near), -d))


def _write_best(job: FinalistJob, name: str, loss: float) -> dict:
    from lvsearch.train.retrain import MODEL_DIR

    f = job.by_name[name]
    run = job.run_dir(name)
    best = {"name": name, "arch": f.arch.key, "run": str(run), "model_dir": str(run / MODEL_DIR), "dev_loss": loss}
    f.arch.to_json(job.out / BEST, space=job.config.space, meta={
        **f.meta, "finalist": name, "finalist_source": f.source, "run": best["run"], "model_dir": best["model_dir"],
        "dev_loss": loss, "steps": job.budget, "finalist_job": str(job.out / STATE), "pruning": job.opts.pruning,
    })
    return best
