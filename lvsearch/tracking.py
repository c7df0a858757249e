"""Experiment tracking: the run's JSON-lines metrics mirrored to TensorBoard, wandb or MLflow.

``--log-to tensorboard[,wandb,mlflow]`` on ``train-supernet``, ``retrain``, ``evolve``,
``evaluate`` and ``quickstart``. The JSON-lines files in the run folder (``metrics.jsonl``,
``curve.jsonl``, ``history.jsonl``, the reports) stay the source of truth; a tracker only
mirrors their numbers, so a run with and without ``--log-to`` writes the same files and the
same weights. Nothing leaves the machine unless the user names a service: TensorBoard writes
event files under ``RUN/tracking/tensorboard``; MLflow writes to ``RUN/tracking/mlruns`` unless
``MLFLOW_TRACKING_URI`` names a server; wandb follows its own settings (``WANDB_MODE=offline``
keeps it local, under ``RUN/tracking/wandb``).

What is logged (one series per number, ``/`` separating groups):

* training: ``train/loss``, ``train/lr``, ``train/tokens_per_s``, … every log step;
  ``dev/…`` at every evaluation; ``floors/…`` and ``beats_floor/…`` (1 or 0) at the end;
* the search: per iteration ``search/best``, ``search/topk_mean``, ``search/median``,
  ``search/evaluated``, ``search/passes`` (the racing cost in dev-sequence passes), and the
  noise verdict at the end;
* evaluation: ``blimp/…`` per paradigm, ``task/…`` metrics, floors and verdicts;
* hyperparameters: the resolved config (TensorBoard's HParams tab, wandb's config, MLflow's
  params).

Resume: a resumed run continues its series without duplicate steps. TensorBoard's writer is
opened with ``purge_step`` at the resumed step, so points a killed run wrote after its last
checkpoint are dropped by every reader; wandb and MLflow resume the same run (its id is kept in
``RUN/tracking/``) and skip the steps they already hold, which are identical because a resume
is exact.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import math
import os
import uuid
from pathlib import Path
from typing import Any, Iterator, Mapping

from lvsearch.errors import LvsearchError

BACKENDS = ("tensorboard", "wandb", "mlflow")
TRACKING_DIR = "tracking"  # inside the run folder
INSTALL = {"tensorboard": "tensorboard", "wandb": "wandb", "mlflow": "mlflow-skinny"}


def parse_log_to(text: str) -> tuple[str, ...]:
    """``"tensorboard,wandb"`` → ``("tensorboard", "wandb")``; ``"none"`` or ``""`` → ``()``.

    Raises:
        LvsearchError: an unknown name (the message lists the known ones).
    """
    names = [t.strip().lower() for t in str(text).split(",") if t.strip()]
    if names in ([], ["none"]):
        return ()
    unknown = [n for n in names if n not in BACKENDS]
    if unknown:
        raise LvsearchError(f"unknown tracker {unknown[0]!r}",
                            fix=f"use one or more of {', '.join(BACKENDS)}, comma-separated (or none)")
    return tuple(dict.fromkeys(names))


def check_available(backends: tuple[str, ...]) -> None:
    """Fail before any work when a named tracker's library is not installed.

    Raises:
        LvsearchError: naming the tracker and the ``pip install`` that adds (or repairs) it.
    """
    import importlib.util

    import importlib

    modules = {"tensorboard": "tensorboard", "wandb": "wandb", "mlflow": "mlflow"}
    for b in backends:
        if importlib.util.find_spec(modules[b]) is None:
            raise LvsearchError(f"--log-to {b}: the {INSTALL[b]} package is not installed",
                                fix=f"pip install {INSTALL[b]} (or pip install 'lvsearch[track]'), or drop {b} from --log-to")
        try:  # installed but broken (a stray wandb.py on the path, a missing dependency): say so now
            importlib.import_module(modules[b])
        except Exception as e:  # noqa: BLE001 - any import failure is the same message
            raise LvsearchError(f"--log-to {b}: the {INSTALL[b]} package is installed but does not import "
                                f"({type(e).__name__}: {e})",
                                fix=f"pip install --force-reinstall {INSTALL[b]}, or drop {b} from --log-to") from None


def flatten(record: Mapping[str, Any], prefix: str = "") -> dict[str, float]:
    """The finite numbers of a (nested) metrics record as ``{"a/b": value}``; booleans become
    1.0 / 0.0 (verdicts), strings, lists and non-finite values are left out."""
    out: dict[str, float] = {}
    for key, value in record.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, f"{name}/"))
        elif isinstance(value, bool):
            out[name] = float(value)
        elif isinstance(value, (int, float)) and math.isfinite(float(value)):
            out[name] = float(value)
    return out


def _flat_params(config: Mapping[str, Any]) -> dict[str, Any]:
    """Hyperparameters as flat ``{"train.lr": 0.001}``: numbers, strings and booleans as they are,
    anything else (lists, None) as its JSON text."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, Mapping):
            out.update({f"{key}.{k}": v for k, v in _flat_params(value).items()})
        elif isinstance(value, (bool, int, float, str)):
            out[str(key)] = value
        else:
            out[str(key)] = json.dumps(value, sort_keys=True, default=str)
    return out


class _TensorBoard:
    def __init__(self, folder: Path, name: str):
        self.folder, self.writer, self.purge_step = folder / "tensorboard", None, None

    def start_at(self, step: int) -> None:
        if self.writer is not None:  # reopen: the purge marker is written when the writer opens
            self.writer.close()
            self.writer = None
        self.purge_step = step

    def _open(self):
        if self.writer is None:
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(log_dir=str(self.folder), purge_step=self.purge_step)
        return self.writer

    def scalars(self, step: int, values: dict[str, float]) -> None:
        w = self._open()
        for tag, value in values.items():
            w.add_scalar(tag, value, global_step=step)

    def params(self, params: dict[str, Any]) -> None:
        from torch.utils.tensorboard.summary import hparams

        w = self._open()
        for summary in hparams(params, {}):
            w.file_writer.add_summary(summary)
        w.add_text("config", "```\n" + json.dumps(params, indent=1, sort_keys=True, default=str) + "\n```")

    def flush(self) -> None:
        if self.writer is not None:
            self.writer.flush()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


class _Wandb:
    def __init__(self, folder: Path, name: str):
        import wandb

        folder.mkdir(parents=True, exist_ok=True)
        id_file = folder / "wandb_id"
        run_id = id_file.read_text().strip() if id_file.is_file() else uuid.uuid4().hex[:8]
        self.run = wandb.init(project=os.environ.get("WANDB_PROJECT", "lvsearch"), name=name, id=run_id,
                              resume="allow", dir=str(folder), reinit="create_new")
        if not id_file.is_file():
            from lvsearch.io import atomic_write_bytes

            atomic_write_bytes(id_file, run_id.encode())
        self.floor = int(self.run.step or 0)  # steps below it were logged before a resume

    def start_at(self, step: int) -> None:
        pass  # wandb keeps the run's own step; duplicates are skipped by ``floor``

    def scalars(self, step: int, values: dict[str, float]) -> None:
        if step >= self.floor:
            self.run.log(values, step=step)
            self.floor = step

    def params(self, params: dict[str, Any]) -> None:
        self.run.config.update(params, allow_val_change=True)

    def flush(self) -> None:
        pass  # wandb's service process writes as it receives

    def close(self) -> None:
        self.run.finish()


class _MLflow:
    def __init__(self, folder: Path, name: str):
        from mlflow.tracking import MlflowClient

        folder.mkdir(parents=True, exist_ok=True)
        uri = os.environ.get("MLFLOW_TRACKING_URI")
        if not uri:  # the local file store, which MLflow 3 keeps in maintenance mode behind a switch
            uri = (folder / "mlruns").resolve().as_uri()
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        self.client = MlflowClient(tracking_uri=uri)
        exp_name = os.environ.get("MLFLOW_EXPERIMENT_NAME", "lvsearch")
        exp = self.client.get_experiment_by_name(exp_name)
        exp_id = exp.experiment_id if exp is not None else self.client.create_experiment(exp_name)
        id_file = folder / "mlflow_run_id"
        if id_file.is_file():
            self.run_id = id_file.read_text().strip()
            self.client.update_run(self.run_id, status="RUNNING")
        else:
            from lvsearch.io import atomic_write_bytes

            self.run_id = self.client.create_run(exp_id, run_name=name).info.run_id
            atomic_write_bytes(id_file, self.run_id.encode())
        self.last: dict[str, int] = {}

    def start_at(self, step: int) -> None:
        pass  # per series, the steps already held are skipped (see scalars)

    def _last_step(self, key: str) -> int:
        if key not in self.last:
            history = self.client.get_metric_history(self.run_id, key)
            self.last[key] = max((m.step for m in history), default=-1)
        return self.last[key]

    def scalars(self, step: int, values: dict[str, float]) -> None:
        from mlflow.entities import Metric

        metrics = [Metric(key.replace("/", "."), value, 0, step) for key, value in values.items()
                   if step > self._last_step(key.replace("/", "."))]
        if metrics:
            self.client.log_batch(self.run_id, metrics=metrics)
            for m in metrics:
                self.last[m.key] = step

    def params(self, params: dict[str, Any]) -> None:
        from mlflow.entities import Param

        have = self.client.get_run(self.run_id).data.params
        new = [Param(k[:250], str(v)[:6000]) for k, v in params.items() if k[:250] not in have]
        for i in range(0, len(new), 100):
            self.client.log_batch(self.run_id, params=new[i:i + 100])

    def flush(self) -> None:
        pass  # every batch is written when logged

    def close(self) -> None:
        self.client.set_terminated(self.run_id)


_SINKS = {"tensorboard": _TensorBoard, "wandb": _Wandb, "mlflow": _MLflow}


class Tracker:
    """The trackers of one run folder (use :func:`for_run`, or the module-level :func:`log`,
    :func:`start_at` and :func:`params`, which do nothing when no tracker is enabled)."""

    def __init__(self, backends: tuple[str, ...], run_dir: str | Path, *, name: str | None = None):
        self.backends, self.run_dir = tuple(backends), Path(run_dir)
        folder = self.run_dir / TRACKING_DIR
        self.sinks = [_SINKS[b](folder, name or self.run_dir.name) for b in self.backends]

    def start_at(self, step: int) -> None:
        """A resumed run continues from ``step``: points at or after it that a killed run wrote
        are not shown twice."""
        for s in self.sinks:
            s.start_at(int(step))

    def log(self, step: int, record: Mapping[str, Any], prefix: str = "") -> None:
        """Log the finite numbers of ``record`` (nested mappings flattened with ``/``) at ``step``
        (an optimizer step, a search iteration, or 0 for a one-off evaluation)."""
        values = flatten(record, prefix)
        if values:
            for s in self.sinks:
                s.scalars(int(step), values)

    def params(self, config: Mapping[str, Any]) -> None:
        """Record the resolved config as hyperparameters (flattened with ``.``)."""
        flat = _flat_params(config)
        for s in self.sinks:
            s.params(flat)

    def flush(self) -> None:
        """Write out what is buffered: called at every checkpoint, so a kill loses nothing that
        the resumed run will not redo."""
        for s in self.sinks:
            s.flush()

    def close(self) -> None:
        for s in self.sinks:
            s.close()


ENV = "LVSEARCH_LOG_TO"  # the backends, inherited by worker processes (the quickstart's arms)
_OPEN: dict[Path, Tracker] = {}


def add_argument(parser) -> None:
    """``--log-to`` on a verb's parser (the same flag and help on every verb)."""
    parser.add_argument("--log-to", type=_log_to_type, default=(), metavar="TRACKERS",
                        help="also log metrics to tensorboard, wandb and/or mlflow (comma-separated; default none). "
                        "Event files go under RUN/tracking/; nothing leaves the machine unless wandb or mlflow is "
                        "configured to send it")


def _log_to_type(text: str) -> tuple[str, ...]:
    import argparse

    try:
        return parse_log_to(text)
    except LvsearchError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def backends() -> tuple[str, ...]:
    """The trackers this process logs to (set by :func:`enabled`, inherited through the
    environment); none on a distributed rank other than 0."""
    if int(os.environ.get("RANK", "0") or 0) != 0:
        return ()
    return parse_log_to(os.environ.get(ENV, ""))


@contextlib.contextmanager
def enabled(names: tuple[str, ...]) -> Iterator[None]:
    """Log every run this block (and the worker processes it starts) trains, searches or
    evaluates to ``names``; the trackers are closed when it ends.

    Raises:
        LvsearchError: a tracker whose library is missing (before anything runs).
    """
    names = tuple(names)
    if not names:  # nothing asked here: what a parent process enabled stays enabled
        yield
        return
    check_available(names)
    old = os.environ.get(ENV)
    os.environ[ENV] = ",".join(names)
    try:
        yield
    finally:
        close_all()
        if old is None:
            os.environ.pop(ENV, None)
        else:
            os.environ[ENV] = old


def for_run(run_dir: str | Path, *, name: str | None = None) -> Tracker | None:
    """The tracker of run folder ``run_dir`` (opened on first use, kept until :func:`enabled`
    ends or the process exits), or None when no tracker is enabled."""
    names = backends()
    if not names:
        return None
    key = Path(run_dir).resolve()
    if key not in _OPEN:
        if not _OPEN:
            atexit.register(close_all)
        _OPEN[key] = Tracker(names, key, name=name)
    return _OPEN[key]


def flush(run_dir: str | Path) -> None:
    """:meth:`Tracker.flush` for ``run_dir`` when it has an open tracker."""
    tracker = _OPEN.get(Path(run_dir).resolve())
    if tracker is not None:
        tracker.flush()


def close_all() -> None:
    """Close every open tracker (flushes the event files)."""
    while _OPEN:
        _OPEN.popitem()[1].close()


def log(run_dir: str | Path, step: int, record: Mapping[str, Any], prefix: str = "") -> None:
    """:meth:`Tracker.log` for ``run_dir``; nothing when no tracker is enabled."""
    tracker = for_run(run_dir)
    if tracker is not None:
        tracker.log(step, record, prefix)


def start_at(run_dir: str | Path, step: int) -> None:
    """:meth:`Tracker.start_at` for ``run_dir``; nothing when no tracker is enabled."""
    tracker = for_run(run_dir)
    if tracker is not None:
        tracker.start_at(step)


def params(run_dir: str | Path, config: Mapping[str, Any]) -> None:
    """:meth:`Tracker.params` for ``run_dir``; nothing when no tracker is enabled."""
    tracker = for_run(run_dir)
    if tracker is not None:
        tracker.params(config)
