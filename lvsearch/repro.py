"""What bit-reproducibility depends on, recorded in every run folder (``environment.json``).

Every lvsearch job is a pure function of its command, its input files and its seeds *given the
numerical environment*: two runs of the same command in one environment give byte-identical
weights, metrics and search results (tested). Across environments that is not so, and the
causes are measured, not guessed (docs/results.md "Reliability"):

* **Thread count.** PyTorch's CPU kernels split reductions over threads (a full ``sum``, the
  LayerNorm weight gradient over the batch): with 1 and 2 threads the float32 summation order
  differs, so results differ in the last bits after the first step and drift apart over
  training. Same thread count → same bits; other thread count → equal within the seed noise.
* **Precision.** ``train.precision: auto`` is bf16 on CUDA and on CPUs with native bf16
  (AVX512-BF16 / AMX), fp32 elsewhere: the same command trains differently on other CPUs.
* **The machine.** The same command at the same thread count and versions gave another
  supernet on another machine (bf16 on both; the CPU model was not recorded then), so the CPU
  model and the instruction set torch dispatches to are recorded too.
* **Versions and device.** torch, numpy, tokenizers (and CUDA, cuDNN, the DC kernel) change
  kernels; GPU atomics are not deterministic unless ``torch.use_deterministic_algorithms``.

:func:`environment` collects these facts; :func:`record_environment` writes them into a run
folder when it starts and adds one entry per resume, and warns when a resume runs in an
environment whose results will not be bit-identical to an uninterrupted run.
"""

from __future__ import annotations

import os
import platform
import sys
from importlib import metadata
from pathlib import Path

from lvsearch.schema import FileModel

ENVIRONMENT = "environment.json"
FORMAT = "lvsearch.environment/v1"


class EnvironmentRecord(FileModel):
    """The fields of ``environment.json`` that are read back (others are kept): the environment
    a run started in and the one of each resume (:func:`environment` dicts)."""

    started: dict
    resumes: list[dict] = []

#: Facts that change the numbers a run produces (a resume that differs in one warns).
BIT_RELEVANT = ("torch", "numpy", "tokenizers", "threads", "device", "cuda", "cudnn", "cpu_model", "cpu_capability",
                "cpu_native_bf16", "deterministic_algorithms", "dc_impl")


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``'s first ``model name``; elsewhere
    ``platform.processor()``), or ``"unknown"``."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip() or "unknown"
    except OSError:
        pass
    return platform.processor() or "unknown"


def environment(device: str | None = None) -> dict:
    """The facts bit-reproducibility depends on: library versions, torch intra-/inter-op
    threads, device, CUDA/cuDNN versions, the CPU model and the instruction set torch's CPU
    kernels dispatch to (``torch.backends.cpu.get_cpu_capability()``), whether the CPU has native
    bf16 (what ``precision: auto`` picks), ``torch.are_deterministic_algorithms_enabled()``,
    ``$LVSEARCH_DC_IMPL``, Python and platform."""
    import torch

    from lvsearch import __version__
    from lvsearch.device import cpu_has_native_bf16

    cuda = torch.version.cuda if torch.cuda.is_available() else None
    return {
        "lvsearch": __version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "machine": platform.machine(),
        "torch": torch.__version__,
        "numpy": _version("numpy"),
        "tokenizers": _version("tokenizers"),
        "safetensors": _version("safetensors"),
        "deap": _version("deap"),
        "threads": torch.get_num_threads(),
        "interop_threads": torch.get_num_interop_threads(),
        "device": str(device) if device is not None else "cpu",
        "cuda": cuda,
        "cudnn": torch.backends.cudnn.version() if cuda else None,
        "gpu": torch.cuda.get_device_name(0) if cuda else None,
        "cpu_model": cpu_model(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "cpu_native_bf16": cpu_has_native_bf16(),
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "dc_impl": os.environ.get("LVSEARCH_DC_IMPL", "auto"),
    }


def bit_differences(a: dict, b: dict) -> list[str]:
    """``key: a → b`` for every :data:`BIT_RELEVANT` fact that differs between two environments;
    a fact ``a`` does not hold (recorded by an older version, e.g. ``cpu_model``) is unknown,
    not different."""
    return [f"{k}: {a.get(k)} → {b.get(k)}" for k in BIT_RELEVANT if k in a and a.get(k) != b.get(k)]


def record_environment(folder: str | os.PathLike, device: str | None = None, *, resume: bool,
                       what: str = "run") -> list[str]:
    """Write (new run) or extend (resume) ``folder/environment.json``: ``{"format", "started":
    environment, "resumes": [environment, ...]}``. On resume, warn when a bit-relevant fact
    differs from the start (the resumed result then equals an uninterrupted run only within
    tolerance, not bit for bit). Returns the differences (empty when none)."""
    from lvsearch import ui
    from lvsearch.io import atomic_write_json, check_fields, read_json

    folder = Path(folder)
    path = folder / ENVIRONMENT
    now = environment(device)
    record = None
    if resume and path.is_file():
        try:
            record = read_json(path, what="environment record")
            check_fields(record, EnvironmentRecord, path, what="environment record", fix="")
        except Exception:  # noqa: BLE001 - a damaged record is replaced, it only informs
            record = None
        if record is not None and record.get("format") != FORMAT:
            record = None
    if record is None:
        record = {"format": FORMAT, "started": now, "resumes": []}
        diffs: list[str] = []
    else:
        diffs = bit_differences(record["started"], now)
        record.setdefault("resumes", []).append(now)
        if diffs:
            ui.warn(f"this {what} is resumed in another numerical environment than it started in ({'; '.join(diffs)}): "
                    "from here its numbers equal an uninterrupted run only within tolerance, not bit for bit "
                    f"(see {path}). For bit-identical results resume with the same settings, e.g. "
                    f"OMP_NUM_THREADS={record['started'].get('threads')}")
    atomic_write_json(path, record)
    return diffs
