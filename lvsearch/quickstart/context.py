"""The quickstart's context: what the user asked for (:class:`QuickstartSettings`), the checks of
those settings before any work, and the open run folder ``OUT`` with its plan, state file
(``OUT/quickstart.json``) and stage paths (:class:`Context`, :func:`open_context`)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from lvsearch.errors import LvsearchError
from lvsearch.io import atomic_write_json, check_same_settings, check_writable_folder, guard_output, read_json
from lvsearch.quickstart.files import STATE_FILE, run_names
from lvsearch.quickstart.plan import Plan, make_plan

if TYPE_CHECKING:
    from lvsearch.quickstart.workers import WorkerPool

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
    #: the worker processes of the fixed arms started before the search
    #: (:func:`~lvsearch.quickstart.job.start_fixed_arms`)
    pool: "WorkerPool | None" = None
    #: the run had finished before this call: nothing was run or rewritten
    #: (:func:`~lvsearch.quickstart.job.run_quickstart`)
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
    from lvsearch.eval.tasks import load_task
    from lvsearch.space import SearchSpace

    SearchSpace.load(settings.space)
    if settings.blimp is not None:
        from lvsearch.eval.blimp import read_blimp

        read_blimp(settings.blimp, limit=1)  # no *.jsonl / bad rows: fail now, not after training
    names = [load_task(t).name for t in settings.tasks]  # fails early on a bad task folder
    if len(set(names)) != len(names):
        raise LvsearchError(f"two --task arguments have the same name ({', '.join(names)})", fix="give each task once")


#: The recipes the plan's stage shares (and the speed probe's reference) were calibrated with.
CALIBRATED_RECIPES = ("quickstart", "retrain-quickstart")


def plan_slowdown(settings: QuickstartSettings, device: str, speed: str | float) -> dict:
    """The slowdown a new run is planned with: ``speed`` as a number (``--speed 1``: the
    calibration machine's plan), or with ``"auto"`` measured here
    (:func:`lvsearch.quickstart.speed.measure_slowdown`) on a CPU with the calibrated recipes
    (on CUDA or with other recipes the calibration does not apply: 1.0, with the reason).

    Returns:
        :func:`~lvsearch.quickstart.speed.measure_slowdown`'s record (``"slowdown"``, …,
        ``"reason"``), with ``"speed"``: what was asked.

    Raises:
        LvsearchError: ``speed`` neither ``auto`` nor a finite number > 0."""
    import torch

    from lvsearch.quickstart.speed import measure_slowdown

    record = {"slowdown": 1.0, "ratio": None, "probe": None, "reference_seconds": None, "reason": None}
    if speed != "auto":
        value = _as_float(speed)
        if not (math.isfinite(value) and value > 0):
            raise LvsearchError(f"--speed must be auto or a number > 0, got {speed!r}",
                                fix="e.g. --speed auto (measure this machine, the default) or --speed 1")
        return {**record, "slowdown": value, "reason": "given by --speed", "speed": speed}
    if device != "cpu" and (device != "auto" or torch.cuda.is_available()):
        return {**record, "reason": "the plan is calibrated for CPUs; on a GPU it runs as on the calibration machine",
                "speed": speed}
    if (settings.supernet_recipe, settings.retrain_recipe) != CALIBRATED_RECIPES:
        return {**record, "reason": "other recipes than the calibrated quickstart and retrain-quickstart",
                "speed": speed}
    return {**measure_slowdown("cpu"), "speed": speed}


def open_context(out: str | Path, settings: QuickstartSettings, *, device: str = "auto",
                 show_progress: bool = True, speed: str | float = "auto") -> Context:
    """Create ``OUT`` (or reopen it for resuming) and return the context. A new run is planned
    for this machine's measured slowdown (:func:`plan_slowdown`, recorded in
    ``quickstart.json``'s ``speed``); a resumed run keeps the plan it was started with.

    Raises:
        LvsearchError: bad settings; ``OUT`` is a file, a non-empty folder that holds no
            quickstart, or a quickstart with other settings; a ``--speed`` number other than the
            slowdown a resumed run was planned with.
    """
    from lvsearch.device import check_device

    check_settings(settings)
    check_device(device)
    out = Path(out).expanduser().resolve()
    make_plan(settings.minutes, settings.seeds, settings.finalists)  # bad sizes fail before the probe
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
            state = _new_state(settings, wanted, device, speed)
            atomic_write_json(path, state)
        check_same_settings(out, "a quickstart", state.get("settings") or {}, wanted,
                            fix="re-run with the same arguments to resume it, or choose another --out")
        slowdown = float(state["plan"].get("slowdown", 1.0))  # runs planned before the probe existed: 1.0
        if speed != "auto" and _as_float(speed) != slowdown:
            raise LvsearchError(f"--speed {speed}: the quickstart in {out} was planned with slowdown {slowdown:g}",
                                fix="resume without --speed (the run keeps its plan), or choose another --out")
    else:
        if out.is_dir() and any(out.iterdir()):
            raise LvsearchError(f"--out {out} is not empty and holds no quickstart", fix="choose a new or empty folder")
        state = _new_state(settings, wanted, device, speed)
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_json(path, state)
        slowdown = state["plan"]["slowdown"]
    plan = make_plan(settings.minutes, settings.seeds, settings.finalists, slowdown)
    return Context(out, settings, plan, state, device=device, show_progress=show_progress)


def _as_float(value) -> float:
    """``float(value)``, or NaN where it is not a number."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _new_state(settings: QuickstartSettings, wanted: dict, device: str, speed: str | float) -> dict:
    """The state of a new run: its settings, this machine's speed record and the plan for it."""
    record = plan_slowdown(settings, device, speed)
    plan = make_plan(settings.minutes, settings.seeds, settings.finalists, record["slowdown"])
    return {"format": FORMAT, "settings": wanted, "plan": plan.to_dict(), "speed": record, "stages": {}}
