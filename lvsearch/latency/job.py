"""Job functions of ``lvsearch latency measure``, ``validate`` and ``time``."""

from __future__ import annotations

import json
import os
from pathlib import Path

from lvsearch.errors import LvsearchError
from lvsearch.io import atomic_write_json, guard_output
from lvsearch.latency.predict import TIMES_FORMAT, VALIDATION_FORMAT, calibrate, time_named, validate_predictor
from lvsearch.latency.table import MAX_TABLE_BYTES, TABLE_FORMAT, Bench, LatencyTable, MeasureOptions, load_table, measure_table, save_table
from lvsearch.lock import holds_output


def _has_format(fmt: str):
    """``own`` for :func:`guard_output`: the file is JSON with ``"format": fmt``."""
    def own(path: Path) -> bool:
        from lvsearch.io import read_bytes

        try:  # bounded: an --out of /dev/zero is refused, not read forever
            return json.loads(read_bytes(path, what="--out", max_bytes=MAX_TABLE_BYTES)).get("format") == fmt
        except (OSError, ValueError, AttributeError, LvsearchError):
            return False
    return own


@holds_output(flag="--out")
def measure(run: str | os.PathLike, out: str | os.PathLike, opts: MeasureOptions, *, overwrite: bool = False,
            show_progress: bool = True) -> LatencyTable:
    """Measure the latency table of supernet run ``run`` (:func:`~lvsearch.latency.table.measure_table`),
    fit its calibration on ``opts.calibrate`` sampled architectures
    (:func:`~lvsearch.latency.predict.calibrate`; none when 0) and write it to ``out`` (JSON,
    atomically).

    Raises:
        LvsearchError: ``out`` exists (without ``overwrite``) or is not a previous table, or
            the errors of :func:`~lvsearch.latency.table.measure_table`.
    """
    guard_output(out, inputs=[("--supernet", run)], overwrite=overwrite, is_file=True, own=_has_format(TABLE_FORMAT))
    bench = Bench(run, opts)
    table = measure_table(bench, show_progress=show_progress)
    if opts.calibrate:
        table = calibrate(bench, table, archs=opts.calibrate, seed=opts.calibration_seed, show_progress=show_progress)
    save_table(table, out)
    return table


@holds_output(flag="--out")
def validate(run: str | os.PathLike, table_path: str | os.PathLike, out: str | os.PathLike, *, archs: int = 50,
             seed: int = 0, opts: MeasureOptions | None = None, any_device: bool = False, overwrite: bool = False,
             show_progress: bool = True) -> dict:
    """Validate the predictor of ``table_path`` on ``archs`` sampled architectures of ``run``
    (:func:`~lvsearch.latency.predict.validate_predictor`); write the record to ``out``.

    Raises:
        LvsearchError: ``out`` exists (without ``overwrite``), is an input, or is not a previous
            validation; the table is unreadable or does not fit the run.
    """
    guard_output(out, inputs=[("--supernet", run), ("--table", table_path)], overwrite=overwrite, is_file=True,
                 own=_has_format(VALIDATION_FORMAT))
    table = load_table(table_path)
    record = validate_predictor(run, table, table_path, archs=archs, seed=seed, opts=opts, any_device=any_device,
                                show_progress=show_progress)
    atomic_write_json(out, record)
    return record


@holds_output(flag="--out")
def time_architectures(run: str | os.PathLike, specs: list[str], out: str | os.PathLike | None = None, *,
                       table_path: str | os.PathLike | None = None, opts: MeasureOptions | None = None,
                       requested: dict[str, object] | None = None, any_device: bool = False,
                       overwrite: bool = False, show_progress: bool = True) -> dict:
    """Time the architectures ``specs`` of supernet run ``run`` end to end on this device
    (:func:`~lvsearch.latency.predict.time_named`), with their predicted latency when
    ``table_path`` is given; write the record to ``out`` when given.

    Args:
        requested: the settings the user gave explicitly (``batch``, ``seq_len``, ``dtype``;
            None: not given). With a table the timing runs at the table's settings, so a given
            value other than the table's is refused rather than silently replaced.

    Raises:
        LvsearchError: ``out`` exists (without ``overwrite``), is an input, or is not a previous
            record of this command; the table is unreadable, does not fit the run, or was
            measured at another requested batch, length or dtype; an architecture cannot be
            resolved.
    """
    inputs = [("--supernet", run)] + ([("--table", table_path)] if table_path is not None else [])
    if out is not None:
        guard_output(out, inputs=inputs, overwrite=overwrite, is_file=True, own=_has_format(TIMES_FORMAT))
    table = load_table(table_path) if table_path is not None else None
    for name, value in (requested or {}).items() if table is not None else ():
        flag, fixed = "--" + name.replace("_", "-"), getattr(table, name)
        if value is not None and value != fixed:
            raise LvsearchError(
                f"{flag} {value} conflicts with --table {table_path}, measured at {flag} {fixed}: with a table, "
                "'latency time' times at the table's settings, so that measured and predicted latency compare",
                fix=f"drop {flag} (the table's {fixed} is used), or measure a table at {flag} {value} with "
                    "'lvsearch latency measure' and pass that")
    record = time_named(run, specs, opts=opts or MeasureOptions(), table=table, table_path=table_path,
                        any_device=any_device, show_progress=show_progress)
    if out is not None:
        atomic_write_json(out, record)
    return record
