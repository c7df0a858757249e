"""Dispatch of independent jobs: in this process, as local subprocesses, or as Slurm jobs.

The multi-job verbs (``retrain --finalists``, ``rank-check``) and the benchmark scripts that
run many trainings (``benchmarks/landscape.py``, ``search_arms.py``, ``search_climb.py``) hand
their independent trainings to :func:`run_jobs` as a list of :class:`Job` (a module-level
function and its keyword arguments). ``--executor`` chooses where they run:

``inline`` (default)
    one after another in this process, exactly as before this module existed; the first
    failure stops the command.
``local``
    as subprocesses of this machine through submitit's local executor, at most
    ``--max-parallel`` at a time.
``slurm``
    as one Slurm job array through submitit (``sbatch``), at most ``--max-parallel`` running
    at a time (``slurm_array_parallelism``), each job with ``--slurm-time`` minutes,
    ``--slurm-gpus-per-job`` GPUs and ``--slurm-cpus-per-job`` CPUs on ``--slurm-partition``;
    ``--slurm-extra KEY=VALUE`` passes any other ``sbatch`` option (submitit's
    ``slurm_additional_parameters``, e.g. ``account=abc`` or ``qos=low``).

With ``local`` and ``slurm`` every job runs to its end even when another fails; then every
failure is reported at once with its log path and the command exits 2
(:class:`DispatchError`). submitit's files (submission, logs ``*_log.out``/``*_log.err``,
result) live in the ``folder`` given to :func:`run_jobs` (the verbs use ``OUT/dispatch``); they
are submitit's own (pickles written and read only by submitit); lvsearch's outputs stay JSON.

**Requeue and preemption.** Every job is a :class:`submitit.helpers.Checkpointable`: when
Slurm (or the local executor) signals a timeout or a preemption (``SIGUSR2``), submitit calls
its ``checkpoint()``, which resubmits the same call with ``Job.on_requeue`` merged into its
arguments (e.g. ``{"resume": True}``). The jobs given here are written so that a second call
continues from the job's last checkpoint on disk (a finalist resumes its retrain run, a
landscape run its retrain), and lvsearch's resume is exact, so a requeued job ends with the
same bytes as an uninterrupted one. A job that Slurm requeues from outside (``scontrol
requeue``, a preemption with ``PreemptMode=REQUEUE``: ``SIGTERM``, which submitit ignores, then
``SIGKILL``) restarts from its first submission with ``$SLURM_RESTART_COUNT`` set, which counts
as a retry too. A fault injected with ``LVSEARCH_KILL_AT`` (:mod:`lvsearch.faults`) applies to
a job's first attempt only, so a requeued attempt runs through. A job killed outright
(``SIGKILL``, a node failure) is reported as failed; re-running the same command continues it
from its checkpoint.

Threads: a ``local`` job uses ``max(1, cores // max_parallel)`` torch threads unless
``OMP_NUM_THREADS`` is set (results depend on the thread count: docs/results.md, thread
reproducibility); ``inline`` and ``slurm`` jobs keep torch's default.
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from lvsearch.argtypes import count, positive_count
from lvsearch.errors import LvsearchError

#: ``--executor`` values; ``inline`` is the default (in this process, one after another).
EXECUTORS = ("inline", "local", "slurm")
#: Seconds between two polls of running local/Slurm jobs.
POLL_S = 0.5


@dataclass(frozen=True)
class DispatchOptions:
    """Where and how :func:`run_jobs` runs its jobs (the ``--executor`` options).

    Attributes:
        executor: ``inline``, ``local`` or ``slurm`` (see the module docstring).
        max_parallel: most jobs running at once (None: ``local`` one per CPU core, ``slurm``
            no cap; ignored by ``inline``).
        slurm_partition: Slurm partition (None: the cluster's default).
        slurm_time: time limit per job in minutes.
        slurm_gpus_per_job: GPUs per job (``--gpus-per-node``).
        slurm_cpus_per_job: CPUs per job (``--cpus-per-task``; None: the cluster's default).
        slurm_extra: further ``sbatch`` options (``slurm_additional_parameters``).
    """

    executor: str = "inline"
    max_parallel: int | None = None
    slurm_partition: str | None = None
    slurm_time: int = 24 * 60
    slurm_gpus_per_job: int = 0
    slurm_cpus_per_job: int | None = None
    slurm_extra: dict[str, str] = field(default_factory=dict)

    @property
    def inline(self) -> bool:
        return self.executor == "inline"


@dataclass(frozen=True)
class Job:
    """One independent job: ``fn(**kwargs)``.

    ``fn`` must be a module-level function (submitit pickles it by reference) and ``kwargs``
    plain values; ``name`` labels the job in messages (unique within one :func:`run_jobs`);
    ``on_requeue``: keyword arguments replaced when the job is requeued after a preemption or
    timeout (e.g. ``{"resume": True}``; empty when ``fn`` finds its checkpoint itself).
    """

    name: str
    fn: Callable[..., Any]
    kwargs: dict = field(default_factory=dict)
    on_requeue: dict = field(default_factory=dict)


class DispatchError(LvsearchError):
    """Some dispatched jobs failed; ``failures`` maps each job name to ``(error, log path)``.
    Raised after every job has ended; ``results`` holds the jobs that succeeded."""

    def __init__(self, failures: dict[str, tuple[str, str]], results: dict[str, Any], total: int):
        self.failures, self.results = failures, results
        lines = [f"  {name}: {err}\n    log: {log}" for name, (err, log) in failures.items()]
        others = "; the others finished" if len(failures) < total else ""
        super().__init__(f"{len(failures)} of {total} dispatched job(s) failed{others}:\n" + "\n".join(lines),
                         fix="read the logs named above; re-running the same command continues every job from "
                             "its checkpoint")


# ---------------------------------------------------------------------------------------
# Command-line options
# ---------------------------------------------------------------------------------------


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE (e.g. account=abc)")
    return key.strip().replace("-", "_"), value


def add_dispatch_arguments(p: argparse.ArgumentParser, what: str = "the independent trainings", *,
                           inline: str = "one after another in this process") -> None:
    """Add ``--executor``, ``--max-parallel`` and the ``--slurm-*`` options to ``p``
    (read back with :func:`options_from_args`); ``what`` names the jobs, ``inline`` says how the
    default ``inline`` executor runs them."""
    g = p.add_argument_group(f"job dispatch ({what}; docs/cluster.md)")
    g.add_argument("--executor", choices=EXECUTORS, default="inline",
                   help=f"where {what} run: inline (default: {inline}), local (subprocesses "
                        "through submitit, --max-parallel at a time) or slurm (a Slurm job array through submitit); "
                        "logs under OUT/dispatch")
    g.add_argument("--max-parallel", type=positive_count, default=None, metavar="N",
                   help="most jobs running at once (default: local one per CPU core, slurm no cap)")
    g.add_argument("--slurm-partition", default=None, metavar="NAME", help="Slurm partition (default: the cluster's)")
    g.add_argument("--slurm-time", type=positive_count, default=24 * 60, metavar="MINUTES",
                   help="time limit per Slurm job (default 1440); a job that reaches it is requeued and resumes")
    g.add_argument("--slurm-gpus-per-job", type=count, default=0, metavar="N", help="GPUs per Slurm job (default 0)")
    g.add_argument("--slurm-cpus-per-job", type=positive_count, default=None, metavar="N",
                   help="CPUs per Slurm job (default: the cluster's)")
    g.add_argument("--slurm-extra", type=_key_value, action="append", default=[], metavar="KEY=VALUE",
                   help="another sbatch option, e.g. account=abc or qos=low (repeatable)")


def options_from_args(args: argparse.Namespace) -> DispatchOptions:
    """The :class:`DispatchOptions` of parsed :func:`add_dispatch_arguments` options.

    Raises:
        LvsearchError: a ``--slurm-*`` option given without ``--executor slurm``;
            ``--max-parallel`` with ``--executor inline`` (it would be ignored);
            ``--executor slurm`` where ``sbatch`` is not on ``PATH``.
    """
    opts = DispatchOptions(
        executor=args.executor, max_parallel=args.max_parallel, slurm_partition=args.slurm_partition,
        slurm_time=args.slurm_time, slurm_gpus_per_job=args.slurm_gpus_per_job,
        slurm_cpus_per_job=args.slurm_cpus_per_job, slurm_extra=dict(args.slurm_extra),
    )
    if opts.executor != "slurm":
        given = [flag for flag, v, d in (("--slurm-partition", opts.slurm_partition, None),
                                          ("--slurm-time", opts.slurm_time, 24 * 60),
                                          ("--slurm-gpus-per-job", opts.slurm_gpus_per_job, 0),
                                          ("--slurm-cpus-per-job", opts.slurm_cpus_per_job, None),
                                          ("--slurm-extra", opts.slurm_extra, {})) if v != d]
        if given:
            raise LvsearchError(f"{', '.join(given)} only apply to --executor slurm (got --executor {opts.executor})",
                                fix="add --executor slurm, or drop them")
    if opts.inline and opts.max_parallel is not None:
        raise LvsearchError(f"--max-parallel {opts.max_parallel} only applies to --executor local or slurm (got "
                            "--executor inline, which does not read it)",
                            fix="add --executor local (or slurm), or drop --max-parallel")
    check_available(opts)
    return opts


def check_available(opts: DispatchOptions) -> None:
    """Refuse ``slurm`` on a machine without ``sbatch`` (before anything is written).

    Raises:
        LvsearchError: naming ``--executor slurm`` and the fix.
    """
    import shutil

    if opts.executor == "slurm" and shutil.which("sbatch") is None:
        raise LvsearchError("--executor slurm: sbatch is not on PATH (this is not a Slurm login node)",
                            fix="run the command on the cluster's login node, or use --executor local")


def describe(opts: DispatchOptions) -> str:
    """One line saying where the jobs run (for the verbs' progress output)."""
    if opts.inline:
        return "in this process, one after another"
    cap = f"at most {opts.max_parallel} at a time" if opts.max_parallel else "no cap"
    return f"through submitit ({opts.executor}, {cap})"


# ---------------------------------------------------------------------------------------
# The job wrapper (what submitit pickles and runs)
# ---------------------------------------------------------------------------------------


def _checkpointable_base():
    import submitit

    return submitit.helpers.Checkpointable


def slurm_restarts() -> int:
    """How many times Slurm restarted this job (``$SLURM_RESTART_COUNT``; 0 outside Slurm)."""
    value = os.environ.get("SLURM_RESTART_COUNT", "")
    return int(value) if value.isdigit() else 0


class _Call(_checkpointable_base()):
    """``fn(**kwargs)`` as a submitit checkpointable callable: on a timeout or preemption
    signal, ``checkpoint()`` resubmits it with ``on_requeue`` merged into ``kwargs``."""

    def __init__(self, fn: Callable[..., Any], kwargs: dict, on_requeue: dict, threads: int | None,
                 attempt: int = 0):
        self.fn, self.kwargs, self.on_requeue, self.threads, self.attempt = fn, kwargs, on_requeue, threads, attempt

    def __call__(self) -> Any:
        kwargs = self.kwargs
        # a retry: resubmitted by checkpoint() (attempt > 0), or restarted by Slurm itself from
        # the first submission (``scontrol requeue``, a preemption with PreemptMode=REQUEUE, a
        # node failure), which reruns this object unchanged with SLURM_RESTART_COUNT set
        if self.attempt > 0 or slurm_restarts() > 0:
            from lvsearch.faults import clear

            clear()  # injected faults hit the first attempt only (a requeue runs through)
            kwargs = {**kwargs, **self.on_requeue}
        if self.threads is not None:
            import torch

            torch.set_num_threads(self.threads)
        return self.fn(**kwargs)

    def checkpoint(self, *args: Any, **kwargs: Any):
        import submitit

        again = _Call(self.fn, {**self.kwargs, **self.on_requeue}, self.on_requeue, self.threads, self.attempt + 1)
        return submitit.helpers.DelayedSubmission(again)


def run_cli(argv: list[str], log: str | None = None, threads: int | None = None) -> int:
    """A job that runs ``python -m lvsearch ARGV`` (what a user would type) in a subprocess,
    with ``threads`` torch threads when given, its output appended to ``log`` (else to the
    job's own log). Returns 0.

    Raises:
        RuntimeError: a non-zero exit, naming the command and the log.
    """
    import subprocess
    import sys

    env = dict(os.environ, NO_COLOR="1")
    if threads is not None:
        env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    cmd = [sys.executable, "-m", "lvsearch", *argv]
    if log is None:
        rc = subprocess.call(cmd, env=env)
    else:
        Path(log).parent.mkdir(parents=True, exist_ok=True)
        with open(log, "a") as fh:
            fh.write(f"\n$ lvsearch {' '.join(argv)}\n")
            fh.flush()
            rc = subprocess.call(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env)
    if rc != 0:
        raise RuntimeError(f"lvsearch {argv[0] if argv else ''} failed (exit {rc}); see {log or 'the job log'}")
    return 0


# ---------------------------------------------------------------------------------------
# Running jobs
# ---------------------------------------------------------------------------------------


def local_threads(opts: DispatchOptions) -> int | None:
    """Torch threads of one ``local`` job: ``$OMP_NUM_THREADS`` when set, else the cores
    shared out among ``max_parallel`` jobs (at least 1); None for other executors."""
    if opts.executor != "local":
        return None
    if os.environ.get("OMP_NUM_THREADS", "").isdigit():
        return max(1, int(os.environ["OMP_NUM_THREADS"]))
    return max(1, (os.cpu_count() or 1) // (opts.max_parallel or os.cpu_count() or 1))


def make_executor(opts: DispatchOptions, folder: str | Path):
    """The ``submitit.AutoExecutor`` of ``opts`` writing into ``folder`` (``local`` or
    ``slurm``).

    Raises:
        LvsearchError: ``slurm`` on a machine without ``sbatch``.
    """
    import submitit

    check_available(opts)
    ex = submitit.AutoExecutor(folder=str(folder), cluster=opts.executor)
    params: dict[str, Any] = {"timeout_min": opts.slurm_time if opts.executor == "slurm" else 60 * 24 * 365}
    if opts.executor == "slurm":
        params.update(slurm_gpus_per_node=opts.slurm_gpus_per_job, tasks_per_node=1, nodes=1)
        if opts.slurm_partition:
            params["slurm_partition"] = opts.slurm_partition
        if opts.slurm_cpus_per_job:
            params["cpus_per_task"] = opts.slurm_cpus_per_job
        if opts.max_parallel:
            params["slurm_array_parallelism"] = opts.max_parallel
        if opts.slurm_extra:
            params["slurm_additional_parameters"] = dict(opts.slurm_extra)
    ex.update_parameters(**params)
    return ex


def _failure(job) -> str:
    """What a failed submitit job raised: the exception line(s) of its traceback, or
    submitit's own message (e.g. a job killed without a result)."""
    try:
        exc = job.exception()
    except Exception as e:  # noqa: BLE001 - submitit raises on a job that left no result
        exc = e
    text = str(exc or "no result").strip()
    sep = "----------------------"
    if text.count(sep) >= 2:  # FailedJobError: "... {sep}\nTRACEBACK\n{sep}\nwhere the logs are"
        trace = text.split(sep)[1].strip("\n").splitlines()
        # the exception starts at the last unindented line (frames are indented)
        start = max((i for i, ln in enumerate(trace) if ln and not ln[0].isspace() and not ln.startswith("Traceback")),
                    default=len(trace) - 1)
        return " ".join(ln.strip() for ln in trace[start:] if ln.strip())
    return " ".join(text.split("You can check full logs")[0].split())


def _log_of(job) -> str:
    """The job's log (stderr: submitit's messages and the traceback; stdout beside it)."""
    return f"{job.paths.stderr} (output: {job.paths.stdout.name})"


def run_jobs(jobs: list[Job], opts: DispatchOptions, folder: str | Path, *, ui_label: str = "job") -> dict[str, Any]:
    """Run ``jobs`` where ``opts`` says; returns ``{job name: fn's return value}``.

    ``inline``: one after another in this process, in order; an exception propagates at once
    (the behaviour of the verbs before dispatch existed). ``local``/``slurm``: through submitit
    with its files in ``folder`` (created), at most ``opts.max_parallel`` at a time; every job
    runs to its end.

    Raises:
        DispatchError: (``local``/``slurm``) one or more jobs failed: each with its error and
            log path, after all ended.
        LvsearchError: a duplicate job name; ``slurm`` without ``sbatch``.
    """
    names = [j.name for j in jobs]
    if len(set(names)) != len(names):
        raise LvsearchError(f"duplicate job names in one dispatch: {sorted({n for n in names if names.count(n) > 1})}")
    if opts.inline or not jobs:
        return {j.name: j.fn(**j.kwargs) for j in jobs}
    from lvsearch import ui

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    ex = make_executor(opts, folder)
    threads = local_threads(opts)
    calls = {j.name: _Call(j.fn, dict(j.kwargs), dict(j.on_requeue), threads) for j in jobs}
    submitted: dict[str, Any] = {}
    if opts.executor == "slurm":  # one job array; Slurm caps the running ones
        with ex.batch():
            for name, call in calls.items():
                submitted[name] = ex.submit(call)
        first = str(next(iter(submitted.values())).job_id).split("_")[0]
        kind = "job array" if len(jobs) > 1 else "job"  # submitit submits a batch of one as a plain job
        ui.console.print(f"submitted {len(jobs)} {ui_label}(s) as Slurm {kind} {first}; logs in {folder}")
        running = list(submitted)
    else:  # the local executor starts each job at once: keep at most max_parallel running
        cap = opts.max_parallel or os.cpu_count() or 1
        pending, running = list(calls), []
        while pending or running:
            while pending and len(running) < cap:
                name = pending.pop(0)
                submitted[name] = ex.submit(calls[name])
                running.append(name)
                ui.console.print(f"{ui_label} {name}: started (submitit local job {submitted[name].job_id}, "
                                 f"log {_log_of(submitted[name])})", highlight=False)
            time.sleep(POLL_S)
            running = [n for n in running if not submitted[n].done()]
        running = []
    while any(not submitted[n].done() for n in running):
        # done() looks for the result file and asks sacct at most every few seconds itself
        # (submitit's rate limit), so a short sleep costs nothing on the cluster; a 5 s one
        # added up to 5 s to every round of a Slurm run (measured: docs/cluster.md)
        time.sleep(POLL_S)
    results: dict[str, Any] = {}
    failures: dict[str, tuple[str, str]] = {}
    for name in names:
        job = submitted[name]
        if opts.executor == "local" and not job.paths.result_pickle.exists():
            # no result on a local disk: the process died (SIGKILL, out of memory); submitit
            # would wait 15 s for a late network-file-system write first
            failures[name] = (f"the job ended without a result (state {job.state}: killed, e.g. SIGKILL or out of "
                              "memory)", _log_of(job))
            continue
        try:
            results[name] = job.result()
        except Exception:  # noqa: BLE001 - every failure is reported below, with its log
            failures[name] = (_failure(job), _log_of(job))
    if failures:
        raise DispatchError(failures, results, len(jobs))
    return results
