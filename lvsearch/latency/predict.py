"""Latency prediction from a table, its calibration, and its validation against end-to-end
measurements.

The predictor is the table sum (once-for-all, Cai et al. 2020, uses a per-layer lookup table;
HAT, Wang et al. 2020, section 3.3, a learned predictor)::

    sum(arch) = overhead + Σ_n ops[choice_n] + Σ_{n: |inputs_n| > 1} mixing[|inputs_n|]

in milliseconds per batch at the table's batch size and sequence length, corrected by a linear
fit when the table carries one: ``latency(arch) = intercept + slope · sum(arch)``. Layers timed
alone run on a cache-warm input; inside a model each slot reads a fresh tensor, so the sum
misses a share of the time that grows with it (measured: docs/results.md, "Latency").
:func:`calibrate` fits the correction on end-to-end timings of sampled architectures (each
extracted from the supernet as a standalone :class:`~lvsearch.model.encoder.Encoder`, timed as
the table is); :func:`validate_predictor` measures other sampled architectures and reports
the median absolute percentage error and the worst case of the prediction and of the raw sum.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lvsearch.arch import Arch
from lvsearch.errors import LvsearchError
from lvsearch.latency.table import (
    Bench,
    Calibration,
    LatencyTable,
    MeasureOptions,
    check_table,
    choice_key,
    device_name,
)

VALIDATION_FORMAT = "lvsearch.latency-validation/v1"
#: The ``format`` of a ``lvsearch latency time`` record.
TIMES_FORMAT = "lvsearch.latency-times/v1"


def table_parts(arch: Arch, table: LatencyTable) -> dict[str, float]:
    """The table sum of ``arch`` split into its terms, in milliseconds per batch:
    ``{"ops_ms": Σ slot ops, "mixing_ms": Σ ELC mixing of the slots with > 1 input,
    "overhead_ms": embeddings and head}``.

    Raises:
        KeyError: the table has no entry for one of ``arch``'s choices or mixing widths
            (:func:`~lvsearch.latency.table.check_table` refuses such a table up front).
    """
    ops = sum(table.ops_ms[choice_key(arch, n)] for n in range(1, arch.num_slots + 1))
    mixing = sum(table.mixing_ms[str(len(i))] for i in arch.inputs if len(i) > 1)
    return {"ops_ms": float(ops), "mixing_ms": float(mixing), "overhead_ms": float(table.overhead_ms)}


def table_sum_ms(arch: Arch, table: LatencyTable) -> float:
    """The table sum of ``arch`` in milliseconds per batch (module docstring), uncorrected:
    the sum of :func:`table_parts`.

    Raises:
        KeyError: as :func:`table_parts`.
    """
    p = table_parts(arch, table)
    return p["overhead_ms"] + p["ops_ms"] + p["mixing_ms"]


def predict_ms(arch: Arch, table: LatencyTable) -> float:
    """Predicted forward latency of ``arch`` in milliseconds per batch: the table sum, with the
    table's calibration applied when it has one (module docstring).

    Raises:
        KeyError: as :func:`table_sum_ms`.
    """
    raw = table_sum_ms(arch, table)
    c = table.calibration
    return float(raw if c is None else c.intercept_ms + c.slope * raw)


def fastest_arch(table: LatencyTable, space) -> Arch:
    """The architecture of ``space`` with the lowest predicted latency: sequential (no mixing
    term) with every slot at its cheapest choice by the table. The calibration is increasing
    (slope > 0), so it is also the fastest by :func:`predict_ms`, the value a search's
    ``--max-latency`` is compared with.

    Raises:
        KeyError: the table lacks an entry of the space (:func:`check_table` refuses such tables).
    """
    from lvsearch.arch import variant_suffix

    op, variant = min(space.choices(), key=lambda c: table.ops_ms[c[0] + variant_suffix(*c)])
    return Arch((op,) * space.num_slots, None, (variant,) * space.num_slots)


def within_latency(arch: Arch, table: LatencyTable, space, limit_ms: float, rng: random.Random) -> Arch | None:
    """``arch`` moved by random cost-lowering steps until its predicted latency
    (:func:`predict_ms`) is at most ``limit_ms``; None when no step is left above it.

    A uniform draw of a space rarely meets a tight limit: on the 24-slot elastic space the
    uniform draws' table sums centre near 40 ms, so 1000 draws find none under ``bert``'s
    29 ms although all-cheapest choices take 15 ms. Each step picks a slot uniformly among
    those that can get cheaper, then, uniformly, either re-draws its choice among the
    space's cheaper choices (:meth:`SearchSpace.choices`) or drops one of its optional
    inputs (the previous output stays); only steps that lower the table sum are taken (the
    measured mixing costs are not monotone in the width), so it ends. The result is close to
    the draw and just under the limit, where a latency-limited search looks (HAT and
    once-for-all sample under the limit and evolve from there).

    Raises:
        KeyError: the table lacks an entry of the space (:func:`check_table` refuses such tables).
    """
    from lvsearch.arch import variant_suffix

    cost = {c: table.ops_ms[c[0] + variant_suffix(*c)] for c in space.choices()}
    ops, variants, inputs = list(arch.ops), list(arch.variants), [list(i) for i in arch.inputs]

    def mix(k: int) -> float:
        return table.mixing_ms[str(k)] if k > 1 else 0.0

    def current() -> Arch:
        return Arch(tuple(ops), tuple(tuple(i) for i in inputs), tuple(variants))

    now = current()
    while predict_ms(now, table) > limit_ms:
        moves: dict[int, list[tuple]] = {}
        for n in range(len(ops)):
            here = table.ops_ms[choice_key(now, n + 1)]
            cheaper = [("choice", c) for c, t in cost.items() if t < here]
            k = len(inputs[n])
            drops = [("drop", i) for i in inputs[n] if i != n] if mix(k - 1) < mix(k) else []
            kinds = [m for m in (cheaper, drops) if m]
            if kinds:
                moves[n] = kinds
        if not moves:
            return None
        n = rng.choice(sorted(moves))
        kind, what = rng.choice(rng.choice(moves[n]))
        if kind == "choice":
            ops[n], variants[n] = what
        else:
            inputs[n].remove(what)
        now = current()
    return now


def time_arch(bench: Bench, arch: Arch) -> float:
    """End-to-end forward latency of ``arch`` (extracted from ``bench``'s supernet as a
    standalone Encoder), ms per batch, timed as the table's entries are."""
    enc = bench.loaded.supernet.extract(arch).eval()
    return bench.time(lambda: enc(bench.ids, bench.mask)).median_ms


def time_archs(bench: Bench, sample: list[Arch], label: str, *, show_progress: bool = True) -> list[float]:
    """:func:`time_arch` of every architecture of ``sample`` (ms per batch, in order), with a
    progress bar named ``label``."""
    from lvsearch.ui import progress

    measured = []
    with progress(enabled=show_progress) as bar:
        task = bar.add_task(label, total=len(sample), info="")
        for arch in sample:
            measured.append(time_arch(bench, arch))
            bar.advance(task)
    return measured


def calibrate(bench: Bench, table: LatencyTable, *, archs: int, seed: int, show_progress: bool = True) -> LatencyTable:
    """``table`` with a :class:`~lvsearch.latency.table.Calibration` fitted (least squares,
    ``numpy.polyfit``) on the end-to-end latency of ``archs`` architectures of ``bench``'s
    space drawn with ``seed``.

    Raises:
        LvsearchError: the fit has a slope ≤ 0 (latency does not grow with the table sum: the
            machine was busy while timing), predicts ≤ 0 ms for the space's fastest
            architecture (:func:`fastest_arch`), or has fewer than 2 architectures.
    """
    sample = sample_archs(bench.loaded.space, archs, seed)
    if len(sample) < 2:
        raise LvsearchError(f"--calibrate {archs}: a calibration needs at least 2 architectures",
                            fix="pass --calibrate 2 or more, or --calibrate 0 for the raw table sum")
    measured = time_archs(bench, sample, "calibration", show_progress=show_progress)
    raw = np.array([table_sum_ms(a, table) for a in sample])
    m = np.array(measured)
    slope, intercept = np.polyfit(raw, m, 1)
    if not slope > 0:
        raise LvsearchError(f"the calibration's end-to-end timings do not grow with the table sum (slope {slope:.3g} "
                            f"over {len(sample)} architectures): the machine was probably busy while timing",
                            fix="measure again on an idle machine, or pass --calibrate 0 for the raw table sum")
    fastest = intercept + slope * table_sum_ms(fastest_arch(table, bench.loaded.space), table)
    if not fastest > 0:
        raise LvsearchError(f"the calibration ({intercept:+.3f} ms + {slope:.3f} × table sum, fitted on {len(sample)} "
                            f"architectures) predicts {fastest:.3f} ms for the space's fastest architecture: the "
                            "end-to-end timings were too noisy for a fit (the machine was probably busy)",
                            fix="measure again on an idle machine, or pass --calibrate 0 for the raw table sum")
    fitted = intercept + slope * raw
    return table.model_copy(update={"calibration": Calibration(
        intercept_ms=float(intercept), slope=float(slope), archs=len(sample), seed=seed,
        raw_median_ape=float(np.median(np.abs(raw - m) / m)), median_ape=float(np.median(np.abs(fitted - m) / m)))})


def sample_archs(space, count: int, seed: int) -> list[Arch]:
    """``count`` distinct architectures drawn uniformly from ``space`` (each slot's op uniform,
    each optional input kept with a probability drawn per architecture from [0, 1], so sparse
    and dense connectivity are both covered). Fewer when the space is smaller."""
    rng = random.Random(seed)
    seen: dict[str, Arch] = {}
    tries = 0
    while len(seen) < count and tries < 50 * count:
        tries += 1
        arch = space.sample(rng, keep_input_prob=rng.random())
        seen.setdefault(arch.key, arch)
    return list(seen.values())


@dataclass
class Validation:
    """Predicted and measured latency of sampled architectures (ms per batch)."""

    keys: list[str]
    predicted: list[float]
    measured: list[float]

    @property
    def ape(self) -> np.ndarray:
        """Absolute percentage error of each prediction, ``|pred - meas| / meas`` (a fraction)."""
        m = np.asarray(self.measured)
        return np.abs(np.asarray(self.predicted) - m) / m

    def summary(self) -> dict:
        """Median and worst absolute percentage error, mean signed error (fraction; > 0 means
        the predictor overestimates), the Pearson r, and the measured range."""
        from scipy.stats import pearsonr, spearmanr

        p, m = np.asarray(self.predicted), np.asarray(self.measured)
        return {
            "archs": len(self.keys),
            "median_ape": float(np.median(self.ape)),
            "worst_ape": float(self.ape.max()),
            "mean_signed_error": float(np.mean((p - m) / m)),
            "pearson_r": float(pearsonr(p, m).statistic) if len(p) > 2 else None,
            "spearman_rho": float(spearmanr(p, m).statistic) if len(p) > 2 else None,
            "measured_ms": [float(m.min()), float(np.median(m)), float(m.max())],
        }


#: Below this Spearman ρ between predicted and measured latency the table does not rank
#: architectures well enough to steer a latency search (a validation says so).
MIN_RANK_RHO = 0.5


def rank_warning(summary: dict) -> str | None:
    """What to say about a validation :meth:`LatencyCheck.summary` whose Spearman ρ is below
    :data:`MIN_RANK_RHO` (None when it is not, or undefined): the table then orders
    architectures against, or unrelated to, their measured latency — usually a machine busy
    while timing (the table or the validation), or architectures too alike in latency to rank."""
    rho = summary.get("spearman_rho")
    if rho is None or rho != rho or rho >= MIN_RANK_RHO:
        return None
    lo, _, hi = summary["measured_ms"]
    alike = hi < 1.05 * lo
    why = (f"the measured latencies span only {lo:.2f}–{hi:.2f} ms, too close to rank" if alike else
           "the timings were likely disturbed (another process on this machine during the table or this check)")
    return (f"Spearman ρ {rho:.3f} is below {MIN_RANK_RHO}: the table does not rank these architectures by their "
            f"measured latency; {why}. Re-measure the table and re-run this check on an otherwise idle machine "
            "(more --repeats) before a latency search relies on it")


def validate_predictor(run: str | os.PathLike, table: LatencyTable, table_path: str | os.PathLike, *,
                       archs: int = 50, seed: int = 0, opts: MeasureOptions | None = None,
                       any_device: bool = False, show_progress: bool = True) -> dict:
    """Measure ``archs`` sampled architectures of the supernet run ``run`` end to end and
    compare with :func:`predict_ms` from ``table`` (and with the raw table sum). Use a
    ``seed`` other than the calibration's, so the architectures are new to the fit.

    Args:
        opts: timing settings; batch, seq_len, threads and dtype default to the table's.

    Returns:
        The validation record (``lvsearch.latency-validation/v1``): settings, the summary of
        :meth:`Validation.summary` and one row per architecture.

    Raises:
        LvsearchError: the table does not fit the run (:func:`check_table`), or the errors of
            :class:`~lvsearch.latency.table.Bench`.
    """
    base = opts or MeasureOptions()
    opts = MeasureOptions(device=base.device, batch=table.batch, seq_len=table.seq_len,
                          threads=base.threads or table.threads, warmup=base.warmup, repeats=base.repeats,
                          dtype=table.dtype)
    bench = Bench(run, opts)
    loaded = bench.loaded
    check_table(table, table_path, space=loaded.space, dims=loaded.dims, device=bench.device, any_device=any_device)
    sample = sample_archs(loaded.space, archs, seed)
    measured = time_archs(bench, sample, "end-to-end latency", show_progress=show_progress)
    val = Validation([a.key for a in sample], [predict_ms(a, table) for a in sample], measured)
    raw = Validation(val.keys, [table_sum_ms(a, table) for a in sample], measured)
    return {
        "format": VALIDATION_FORMAT,
        "table": str(Path(table_path).resolve()),
        "device": bench.device.type, "device_name": device_name(bench.device), "threads": bench.threads,
        "table_device": table.where, "batch": table.batch, "seq_len": table.seq_len, "dtype": table.dtype,
        "seed": seed, "warmup": opts.warmup, "repeats": opts.repeats,
        "calibration": table.calibration.model_dump() if table.calibration is not None else None,
        "summary": val.summary(),
        "table_sum_summary": raw.summary(),
        "rows": [{"arch": k, "mixing_slots": sum(len(i) > 1 for i in a.inputs), "predicted_ms": p, "table_sum_ms": r,
                  "measured_ms": m}
                 for k, a, p, r, m in zip(val.keys, sample, val.predicted, raw.predicted, val.measured)],
    }


def time_named(run: str | os.PathLike, specs: list[str], *, opts: MeasureOptions, table: LatencyTable | None = None,
               table_path: str | os.PathLike | None = None, any_device: bool = False,
               show_progress: bool = True) -> dict:
    """Time architectures of the supernet run ``run`` end to end (:func:`time_arch`: each is
    extracted as the standalone Encoder a retrain builds, so its latency is the retrained
    model's; the weights do not change the time), each with its predicted latency when a
    ``table`` is given (measured on the same settings as the table: batch, length, threads and
    dtype default to it).

    Args:
        specs: architecture JSON files or reference names (``bert``, ``sandwich``, ``random:SEED``).

    Returns:
        The record (``lvsearch.latency-times/v1``): device, threads (and the table's: an
        explicit ``opts.threads`` may differ from them), batch, length, dtype, warm-up
        and repeats, and one row per architecture (``spec``, ``arch`` key, ``compact``,
        ``params``, ``measured_ms``, ``predicted_ms`` or None), ms per batch.

    Raises:
        LvsearchError: an architecture cannot be resolved or is outside the supernet's space,
            the table does not fit the run (:func:`check_table`), or the errors of
            :class:`~lvsearch.latency.table.Bench`.
    """
    from lvsearch.arch import resolve_arch

    if table is not None:
        opts = MeasureOptions(device=opts.device, batch=table.batch, seq_len=table.seq_len,
                              threads=opts.threads or table.threads, warmup=opts.warmup, repeats=opts.repeats,
                              dtype=table.dtype)
    bench = Bench(run, opts)
    loaded = bench.loaded
    if table is not None:
        check_table(table, table_path, space=loaded.space, dims=loaded.dims, device=bench.device, any_device=any_device)
    archs = [resolve_arch(spec, loaded.space) for spec in specs]
    measured = time_archs(bench, archs, "end-to-end latency", show_progress=show_progress)
    return {
        "format": TIMES_FORMAT, "supernet": str(Path(run).resolve()),
        "table": str(Path(table_path).resolve()) if table_path is not None else None,
        "table_threads": table.threads if table is not None else None,
        "device": bench.device.type, "device_name": device_name(bench.device), "threads": bench.threads,
        "batch": opts.batch, "seq_len": bench.seq_len, "dtype": opts.dtype, "warmup": opts.warmup,
        "repeats": opts.repeats,
        "rows": [{"spec": str(spec), "arch": a.key, "compact": a.compact, "params": loaded.supernet.num_params(a),
                  "measured_ms": m, "predicted_ms": predict_ms(a, table) if table is not None else None}
                 for spec, a, m in zip(specs, archs, measured)],
    }
