"""How fast this machine runs the quickstart, measured before the plan is made, so that
``--minutes`` holds on machines slower or faster than the calibration machine.

The probe (:func:`probe_step_seconds`) times the work most of a quickstart is: training steps
of the ``retrain-quickstart`` model (``bert`` at the recipe's dims, batch × seq of the recipe,
MLM, AdamW) in one thread, with the precision ``train.precision: auto`` resolves to here (bf16 on
CPUs with native bf16, fp32 elsewhere: the difference that makes an AVX2 machine take 2–3× the
plan). Its median step time over :data:`PROBE_STEPS` steps against
:data:`REFERENCE_STEP_SECONDS` (the same probe on the calibration machine's kind, see below) is
the machine's *slowdown*. :func:`quantized_slowdown` rounds it to eighth octaves and keeps 1.0
within :data:`TOLERANCE`, so a machine like the calibration machine gets the calibrated plan —
with its byte-identical results — and small timing noise does not change a plan.
:func:`lvsearch.quickstart.plan.make_plan` then sizes every stage as it would for
``minutes / slowdown`` on the calibration machine, and budgets ``slowdown ×`` that time.
"""

from __future__ import annotations

import math
import statistics
import time

#: Training steps timed by the probe (after :data:`PROBE_WARMUP` untimed ones).
PROBE_STEPS = 12
PROBE_WARMUP = 1

#: The probe's median step time (seconds) on the calibration machine's kind (the 2-core bf16
#: machine of :data:`lvsearch.quickstart.plan.STAGE_SHARES`). Measured indirectly, as no such
#: machine is at hand: on an idle 2-core AMD EPYC (AVX2, fp32) the probe ran
#: :data:`FP32_PROBE_SECONDS` per step while the uncalibrated default quickstart took
#: :data:`FP32_RUN_SECONDS` over its stages against the calibration run's 1,251 s; the reference
#: is the fp32 probe scaled by that ratio (the probe is assumed to slow down as the whole run
#: does). ``None`` until measured: the quickstart then plans at slowdown 1 and says so.
FP32_PROBE_SECONDS: float | None = 0.385  # median of 6 idle probes, 0.351-0.420 s (commit 43655a7)
FP32_RUN_SECONDS: float | None = 1825.6  # benchmarks/results/quickstart_fp32_default.json (--speed 1)
CALIBRATION_RUN_SECONDS = 1251.0
REFERENCE_STEP_SECONDS: float | None = (None if FP32_PROBE_SECONDS is None or FP32_RUN_SECONDS is None
                                        else FP32_PROBE_SECONDS * CALIBRATION_RUN_SECONDS / FP32_RUN_SECONDS)

#: A measured slowdown within [1 / TOLERANCE, TOLERANCE] plans as the calibration machine (1.0).
TOLERANCE = 1.2
#: Slowdowns are rounded to powers of 2^(1/STEPS_PER_OCTAVE) (a step of 9%).
STEPS_PER_OCTAVE = 8
#: Slowdowns are clamped to [1 / MAX_SLOWDOWN, MAX_SLOWDOWN].
MAX_SLOWDOWN = 16.0


def quantized_slowdown(ratio: float) -> float:
    """``ratio`` (probe seconds / reference seconds) as the plan uses it: 1.0 within
    :data:`TOLERANCE`, else the nearest power of 2^(1/:data:`STEPS_PER_OCTAVE`) (1.30, 1.41,
    1.54, 1.68, 1.83, 2, …: at most 4.5% from the ratio, so the budget holds within that),
    clamped to [1/:data:`MAX_SLOWDOWN`, :data:`MAX_SLOWDOWN`].

    Raises:
        ValueError: ``ratio`` not finite and positive."""
    if not (math.isfinite(ratio) and ratio > 0):
        raise ValueError(f"a slowdown must be finite and > 0, got {ratio}")
    if 1 / TOLERANCE <= ratio <= TOLERANCE:
        return 1.0
    q = 2.0 ** (round(STEPS_PER_OCTAVE * math.log2(ratio)) / STEPS_PER_OCTAVE)
    return min(MAX_SLOWDOWN, max(1 / MAX_SLOWDOWN, q))


def probe_step_seconds(recipe: str = "retrain-quickstart", device: str = "cpu", vocab_size: int = 4096,
                       steps: int = PROBE_STEPS, warmup: int = PROBE_WARMUP) -> dict:
    """Time ``steps`` MLM training steps of ``bert`` at ``recipe``'s dims, batch and sequence
    length on random token ids (15% masked), one torch thread, with the precision the recipe's
    ``train.precision`` resolves to on ``device`` (bf16 autocast or fp32). Nothing is written;
    torch's global RNG and thread count are restored.

    Returns:
        ``{"seconds": median seconds per step, "steps", "precision": "bf16" | "fp32",
        "threads": 1, "recipe"}``.

    Raises:
        LvsearchError: a recipe that cannot be read.
    """
    import torch

    from lvsearch.arch import resolve_arch
    from lvsearch.config import RetrainConfig, load_config
    from lvsearch.train.loop import autocast_context, resolved_precision
    from lvsearch.train.retrain import build_module, recipe_space

    config, _ = load_config(RetrainConfig, recipe)
    t = config.train
    dims = config.model_settings().dims(vocab_size, 0, t.seq_len)
    dev = torch.device(device)
    threads, rng = torch.get_num_threads(), torch.random.get_rng_state()
    torch.set_num_threads(1)
    try:
        arch = resolve_arch("bert", recipe_space(config, config.num_slots))
        module = build_module(config, arch, dims).to(dev)
        opt = torch.optim.AdamW(module.parameters(), lr=t.lr, weight_decay=t.weight_decay)
        gen = torch.Generator().manual_seed(0)
        ids = torch.randint(5, vocab_size, (t.batch_size, t.seq_len), generator=gen)
        labels = torch.where(torch.rand(ids.shape, generator=gen) < 0.15, ids, torch.full_like(ids, -100))
        ids, labels = ids.to(dev), labels.to(dev)
        times = []
        for i in range(warmup + steps):
            t0 = time.perf_counter()
            with autocast_context(t, dev):
                out = module(ids, labels)
            (out["loss_sum"] / out["count"].clamp(min=1)).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            if dev.type == "cuda":
                torch.cuda.synchronize()
            if i >= warmup:
                times.append(time.perf_counter() - t0)
        return {"seconds": statistics.median(times), "steps": steps, "precision": resolved_precision(t, dev),
                "threads": 1, "recipe": recipe}
    finally:
        torch.set_num_threads(threads)
        torch.random.set_rng_state(rng)


def measure_slowdown(device: str = "cpu") -> dict:
    """This machine's slowdown against the calibration machine: the probe
    (:func:`probe_step_seconds`) over :data:`REFERENCE_STEP_SECONDS`, quantized
    (:func:`quantized_slowdown`).

    Returns:
        ``{"slowdown": the factor the plan uses, "ratio": unquantized or None, "probe": the
        probe's record or None, "reference_seconds", "reason": why the plan is not calibrated,
        or None}``."""
    if REFERENCE_STEP_SECONDS is None:
        return {"slowdown": 1.0, "ratio": None, "probe": None, "reference_seconds": None,
                "reason": "the reference probe time is unmeasured (lvsearch.quickstart.speed)"}
    t0 = time.perf_counter()
    probe = probe_step_seconds(device=device)
    probe["wall_seconds"] = time.perf_counter() - t0
    ratio = probe["seconds"] / REFERENCE_STEP_SECONDS
    return {"slowdown": quantized_slowdown(ratio), "ratio": ratio, "probe": probe,
            "reference_seconds": REFERENCE_STEP_SECONDS, "reason": None}


def speed_sentence(record: dict | None, minutes: float, sized_minutes: float) -> str:
    """One sentence on how the plan was sized for this machine (console and report), from
    ``quickstart.json``'s ``speed`` record (None: a run planned before the probe existed)."""
    if not record:
        return "Planned as on the calibration machine (this run predates the speed probe)."
    slowdown = record["slowdown"]
    probe = record.get("probe")
    if probe is not None:
        measured = (f"A {probe['steps']}-step probe ran {probe['seconds']:.3f} s per training step ({probe['precision']}, "
                    f"{probe['threads']} thread) against {record['reference_seconds']:.3f} s on the calibration machine "
                    f"({record['ratio']:.2f}× slower)")
        if slowdown == 1.0:
            return f"{measured}: within {TOLERANCE:g}× of it, so the calibrated plan runs unchanged."
        return (f"{measured}: every stage is sized as --minutes {sized_minutes:.3g} would be there "
                f"(slowdown {slowdown:.3g}), so that the run takes about {minutes:g} min here.")
    if slowdown == 1.0:
        return f"Planned as on the calibration machine: {record.get('reason') or 'slowdown 1'}."
    return (f"Planned with slowdown {slowdown:g} ({record.get('reason')}): every stage is sized as --minutes "
            f"{sized_minutes:.3g} would be on the calibration machine.")
