"""The quickstart's per-arm work (retraining, evaluation) in parallel worker processes.

On a CPU the arms' small models use two cores better as separate single-threaded processes than
as one two-threaded process (``benchmarks/arm_parallelism.py``; docs/results.md "Quickstart"):
intra-op parallelism over a 128-wide model leaves cores waiting at every op. So each arm's
``retrain`` / ``evaluate`` runs in its own process (``python -c`` :func:`_worker_main`, importing
lvsearch from where this process did, whatever the current folder holds) with one torch thread, all arms at once; the results are those of the same call with
one thread in this process, bit for bit (the thread count is recorded in each run's
``environment.json``).

A worker writes its result (or its error message) to a JSON file and its console output to
``OUT/logs/NAME.log``. Workers die with the parent (``PR_SET_PDEATHSIG`` on Linux), so a killed
quickstart leaves no orphan writing into its folders; a Ctrl-C reaches them as well and each
saves its checkpoint, as a single ``retrain`` does. Re-running the quickstart resumes every arm.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Optional, get_args

from lvsearch.errors import LvsearchError
from lvsearch.io import atomic_write_json, read_checked
from lvsearch.schema import FileModel

#: What a worker runs: :func:`lvsearch.train.retrain.retrain` or :func:`lvsearch.eval.job.evaluate`.
WorkerKind = Literal["retrain", "evaluate"]
#: How a damaged worker file is written again (named by the fix).
_WORKER_AGAIN = "run the same quickstart command again: it resumes, and the job writes its files anew"


class WorkerSpec(FileModel):
    """A worker's job file, written by :class:`WorkerPool` and read by the child."""

    kind: WorkerKind
    result: str
    kwargs: dict
    then_evaluate: Optional[dict] = None


class WorkerResult(FileModel):
    """A worker's result file: ``{"result": {...}}``, or ``{"error": message}`` when it failed."""

    result: Optional[dict] = None
    error: Optional[str] = None

KINDS = get_args(WorkerKind)


@dataclass
class WorkerJob:
    """One arm's unit of work.

    Attributes:
        name: the run name (``ea``, ``bert-seed1``, ...), used for the log and the progress bar.
        kind: ``retrain`` (:func:`lvsearch.train.retrain.retrain`) or ``evaluate``
            (:func:`lvsearch.eval.job.evaluate` with :class:`~lvsearch.eval.job.EvaluateOptions`).
        kwargs: JSON-serialisable keyword arguments of that call (``show_progress`` / ``show``
            are set by the worker).
        steps: total training steps, for the progress bar (retrain only).
        run: the training run folder whose ``metrics.jsonl`` shows progress (retrain only).
        then_evaluate: keyword arguments of an ``evaluate`` call that the same process runs once
            the retrain has finished (a background arm evaluated while the search still runs), or
            None; its result then also has ``report``.
    """

    name: str
    kind: str
    kwargs: dict
    steps: int = 0
    run: str | None = None
    then_evaluate: dict | None = None
    result: dict = field(default_factory=dict)


def _set_pdeathsig() -> None:  # pragma: no cover - runs in the child between fork and exec
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _boot_code() -> str:
    """The ``python -c`` program of a worker: it imports lvsearch from where this process
    imported it. ``python -m`` (and ``-c``) would put the current folder first on ``sys.path``,
    so a folder there named ``lvsearch`` (e.g. a checkout, seen from its parent) would load as a
    namespace package in place of an editable install; here that first entry is replaced by the
    folder that holds this process's ``lvsearch`` package."""
    import lvsearch

    root = str(Path(lvsearch.__file__).resolve().parents[1])
    return (f"import sys; sys.path[0] = {root!r}; "
            "from lvsearch.quickstart.workers import _worker_main; sys.exit(_worker_main(sys.argv[1]))")


def _last_line(log: Path) -> str:
    """The last non-blank line of a worker's log (at most 300 characters), or ""."""
    try:
        with open(log, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 4096))
            tail = f.read().decode("utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    lines = [t.strip() for t in tail if t.strip() and not t.startswith("[progress] ")]
    return lines[-1][:300] if lines else ""


def _last_progress(log: Path) -> str:
    """What a worker's log says it is doing now: its newest ``[progress]`` line without the
    prefix and the elapsed time (e.g. ``BLiMP: 3,093/3,350 (92%) · sentences``), or ""."""
    try:
        with open(log, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 4096))
            tail = f.read().decode("utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    for line in reversed(tail):
        if line.startswith("[progress] "):
            parts = [p for p in line[len("[progress] "):].split(" · ") if "elapsed" not in p and "ETA" not in p]
            return " · ".join(parts)[:60]
    return ""


def _last_step(run: str | None) -> int:
    """The newest ``step`` in ``RUN/metrics.jsonl`` (0 when there is none yet); cheap: reads the tail."""
    if not run:
        return 0
    path = Path(run) / "metrics.jsonl"
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 4096))
            tail = f.read().decode("utf-8", errors="replace").splitlines()
    except OSError:
        return 0
    for line in reversed(tail):
        try:
            return int(json.loads(line).get("step", 0))
        except (ValueError, AttributeError):
            continue
    return 0


class WorkerPool:
    """Worker processes started now and waited for later, e.g. an arm that trains in the background
    while this process trains the supernet (:func:`run_jobs` is start + wait).

    Args:
        folder: where the workers' spec/result files and logs go (``OUT/logs``).
    """

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.procs: list[tuple[WorkerJob, subprocess.Popen, Path, Path]] = []

    @property
    def names(self) -> list[str]:
        """Run names of the jobs started so far."""
        return [job.name for job, *_ in self.procs]

    def start(self, jobs: list[WorkerJob]) -> None:
        """Start one single-threaded worker process per job (``OMP_NUM_THREADS=1``, one torch thread).

        Raises:
            ValueError: a job of an unknown kind.
        """
        if not jobs:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
        for job in jobs:
            if job.kind not in KINDS:
                raise ValueError(f"unknown worker kind {job.kind!r}")
            spec, result, log = (self.folder / f"{job.name}.{job.kind}.{ext}" for ext in ("spec.json", "result.json", "log"))
            result.unlink(missing_ok=True)
            atomic_write_json(spec, {"kind": job.kind, "kwargs": job.kwargs, "then_evaluate": job.then_evaluate,
                                     "result": str(result)})
            with open(log, "ab") as out:
                p = subprocess.Popen([sys.executable, "-c", _boot_code(), str(spec)], env=env,
                                     stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                     preexec_fn=_set_pdeathsig if sys.platform.startswith("linux") else None)
            self.procs.append((job, p, result, log))

    def running(self) -> int:
        """How many workers have not exited yet."""
        return sum(p.poll() is None for _, p, _, _ in self.procs)

    def check(self) -> None:
        """Raise now if a worker has already failed (the others are stopped first).

        Raises:
            LvsearchError: as :meth:`wait`.
        """
        if any(p.poll() not in (None, 0) for _, p, _, _ in self.procs):
            self._raise_failed()

    def wait(self, *, show_progress: bool = True, label: str = "arms") -> list[WorkerJob]:
        """Wait for every started worker, with a progress bar per job; returns the jobs with
        ``result`` set. A failing worker stops the others at once.

        Raises:
            LvsearchError: a worker's own error (its message, e.g. a bad recipe), or a worker that
                crashed or was killed (naming its log; re-running resumes). The other workers are
                stopped with SIGINT first, so they save their checkpoints.
            KeyboardInterrupt: Ctrl-C, after the workers saved their checkpoints and stopped.
        """
        from lvsearch import ui

        if not self.procs:
            return []
        try:
            with ui.progress(enabled=show_progress) as bar:
                tasks = {job.name: bar.add_task(f"{job.kind} {job.name}" if label == job.kind else f"{label}: {job.kind} {job.name}",
                                                total=max(1, job.steps), info="")
                         for job, *_ in self.procs}
                while True:
                    for job, p, _, log in self.procs:
                        done = p.poll() is not None
                        step = job.steps if done else _last_step(job.run) if job.kind == "retrain" else 0
                        # an evaluation (or a retrain's then_evaluate) shows its log's current phase
                        info = "" if done or (job.kind == "retrain" and step < job.steps) else _last_progress(log)
                        bar.update(tasks[job.name], completed=min(step, max(1, job.steps)), info=info)
                    if any(p.poll() not in (None, 0) for _, p, _, _ in self.procs) or not self.running():
                        break
                    time.sleep(0.5)
        except KeyboardInterrupt:
            self.stop()
            from lvsearch.train.loop import RESUME_HINT

            ui.console.print(f"interrupted: {', '.join(self.names)} saved a checkpoint; {RESUME_HINT.get()}",
                             highlight=False, soft_wrap=True)
            raise
        if any(p.returncode != 0 for _, p, _, _ in self.procs):
            self._raise_failed()
        jobs = []
        for job, _, result, _ in self.procs:
            job.result = read_checked(result, WorkerResult, what="worker result", fix=_WORKER_AGAIN,
                                      regenerate=_WORKER_AGAIN).get("result") or {}
            jobs.append(job)
        self.procs = []
        return jobs

    def _raise_failed(self) -> None:
        from lvsearch.faults import ENV as KILL_ENV

        failed = [x for x in self.procs if x[1].poll() not in (None, 0)]
        self.stop()
        job, p, result, log = failed[0]
        if p.returncode == -signal.SIGKILL and os.environ.get(KILL_ENV):
            os.kill(os.getpid(), signal.SIGKILL)  # fault injection: a killed worker is a crash of the whole run
        msg = _read_error(result)
        if msg:
            raise LvsearchError(f"{job.kind} of {job.name}: {msg}")
        how = f"was killed by signal {-p.returncode}" if p.returncode < 0 else f"failed (exit {p.returncode})"
        last = _last_line(log)
        said = f"; its log {log} ends: {last}" if last else f"; its output is in {log}"
        # a SIGKILL nobody asked for is most often the kernel's out-of-memory killer
        oom = " (killed by SIGKILL: out of memory?)" if p.returncode == -signal.SIGKILL else ""
        raise LvsearchError(f"the {job.kind} worker of {job.name} {how}{said}",
                            fix=f"fix what the log says{oom} and re-run the same command to resume")

    def stop(self) -> None:
        """SIGINT every running worker (each saves its checkpoint at the next step) and wait for
        them (SIGKILL after 120 s)."""
        for _, p, _, _ in self.procs:
            if p.poll() is None:
                try:
                    p.send_signal(signal.SIGINT)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + 120
        for _, p, _, _ in self.procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def run_jobs(jobs: list[WorkerJob], folder: Path, *, show_progress: bool = True, label: str = "arms") -> list[WorkerJob]:
    """Run ``jobs`` at once, one single-threaded worker process each; returns them with ``result``
    set (:class:`WorkerPool` ``start`` then ``wait``).

    Args:
        folder: where the workers' spec/result files and logs go (``OUT/logs``).

    Raises:
        LvsearchError: a worker's own error (its message, e.g. a bad recipe), or a worker that
            crashed or was killed (naming its log; re-running resumes). The other workers are
            stopped with SIGINT first, so they save their checkpoints.
        KeyboardInterrupt: Ctrl-C, after the workers saved their checkpoints and stopped.
    """
    pool = WorkerPool(folder)
    pool.start(jobs)
    return pool.wait(show_progress=show_progress, label=label)


def _read_error(path: Path) -> str | None:
    try:
        return json.loads(path.read_text(encoding="utf-8")).get("error")
    except (OSError, ValueError, AttributeError):
        return None


def _worker_main(spec_path: str) -> int:
    """Child side: run one job from ``spec_path`` with one torch thread (a retrain, then its
    ``then_evaluate`` if the spec has one); write the result file."""
    try:
        spec = read_checked(spec_path, WorkerSpec, what="worker job file", fix=_WORKER_AGAIN, regenerate=_WORKER_AGAIN)
    except LvsearchError as e:
        print(f"lvsearch: {e}", file=sys.stderr)
        return 2
    result_path = Path(spec["result"])
    result: dict = {}
    try:
        import torch

        torch.set_num_threads(1)
        if spec["kind"] == "retrain":
            from lvsearch.train.retrain import retrain

            summary = retrain(**spec["kwargs"], show_progress=False)
            result = {k: summary.get(k) for k in ("tokens_per_s", "params", "steps", "weights_sha256")}
        evaluate_kwargs = spec["kwargs"] if spec["kind"] == "evaluate" else spec.get("then_evaluate")
        if evaluate_kwargs:
            from lvsearch.eval.job import EvaluateOptions, evaluate

            evaluate(EvaluateOptions(**evaluate_kwargs), show=False)
            result["report"] = evaluate_kwargs.get("out")
    except LvsearchError as e:
        atomic_write_json(result_path, {"error": str(e)})
        print(f"lvsearch: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    atomic_write_json(result_path, {"result": result})
    return 0


if __name__ == "__main__":  # pragma: no cover - the worker process
    sys.exit(_worker_main(sys.argv[1]))
