"""Latency prediction from a table, and its validation against end-to-end measurements.

The predictor is the table sum (HAT, Wang et al. 2020, section 3.3 uses a learned predictor;
once-for-all, Cai et al. 2020, a per-layer lookup table, which is what this is)::

    latency(arch) = overhead + Σ_n ops[choice_n] + Σ_{n: |inputs_n| > 1} mixing[|inputs_n|]

in milliseconds per batch at the table's batch size and sequence length.
:func:`validate_predictor` measures the end-to-end forward of sampled architectures (each
extracted from the supernet as a standalone :class:`~lvsearch.model.encoder.Encoder`, timed as
the table is) and reports the median absolute percentage error and the worst case.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lvsearch.arch import Arch
from lvsearch.latency.table import Bench, LatencyTable, MeasureOptions, check_table, choice_key, device_name

VALIDATION_FORMAT = "lvsearch.latency-validation/v1"


def predict_ms(arch: Arch, table: LatencyTable) -> float:
    """Predicted forward latency of ``arch`` in milliseconds per batch (module docstring).

    Raises:
        KeyError: the table has no entry for one of ``arch``'s choices or mixing widths
            (:func:`~lvsearch.latency.table.check_table` refuses such a table up front).
    """
    total = table.overhead_ms
    for n, inputs in enumerate(arch.inputs, start=1):
        total += table.ops_ms[choice_key(arch, n)]
        if len(inputs) > 1:
            total += table.mixing_ms[str(len(inputs))]
    return float(total)


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


def validate_predictor(run: str | os.PathLike, table: LatencyTable, table_path: str | os.PathLike, *,
                       archs: int = 50, seed: int = 0, opts: MeasureOptions | None = None,
                       any_device: bool = False, show_progress: bool = True) -> dict:
    """Measure ``archs`` sampled architectures of the supernet run ``run`` end to end and
    compare with :func:`predict_ms` from ``table``.

    Args:
        opts: timing settings; batch, seq_len, threads and dtype default to the table's.

    Returns:
        The validation record (``lvsearch.latency-validation/v1``): settings, the summary of
        :meth:`Validation.summary` and one row per architecture.

    Raises:
        LvsearchError: the table does not fit the run (:func:`check_table`), or the errors of
            :class:`~lvsearch.latency.table.Bench`.
    """
    from lvsearch.ui import progress

    base = opts or MeasureOptions()
    opts = MeasureOptions(device=base.device, batch=table.batch, seq_len=table.seq_len,
                          threads=base.threads or table.threads, warmup=base.warmup, repeats=base.repeats,
                          dtype=table.dtype)
    bench = Bench(run, opts)
    loaded = bench.loaded
    check_table(table, table_path, space=loaded.space, dims=loaded.dims, device=bench.device, any_device=any_device)
    sample = sample_archs(loaded.space, archs, seed)
    measured = []
    with progress(enabled=show_progress) as bar:
        task = bar.add_task("end-to-end latency", total=len(sample), info="")
        for arch in sample:
            enc = loaded.supernet.extract(arch).eval()
            measured.append(bench.time(lambda enc=enc: enc(bench.ids, bench.mask)).median_ms)
            del enc
            bar.advance(task)
    val = Validation([a.key for a in sample], [predict_ms(a, table) for a in sample], measured)
    return {
        "format": VALIDATION_FORMAT,
        "table": str(Path(table_path).resolve()),
        "device": bench.device.type, "device_name": device_name(bench.device), "threads": bench.threads,
        "table_device": table.where, "batch": table.batch, "seq_len": table.seq_len, "dtype": table.dtype,
        "seed": seed, "warmup": opts.warmup, "repeats": opts.repeats,
        "summary": val.summary(),
        "rows": [{"arch": k, "mixing_slots": sum(len(i) > 1 for i in a.inputs), "predicted_ms": p, "measured_ms": m}
                 for k, a, p, m in zip(val.keys, sample, val.predicted, val.measured)],
    }
