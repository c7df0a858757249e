"""The cool-down probe of a warmup-stable-decay retrain: the dev loss a run in its stable phase
would reach if its cool-down started now (Hägele et al. 2024, §3); the finalists' pruning
(:mod:`lvsearch.scaling.finalists`, ``--pruning extrapolate``) reads it at each rung."""

from __future__ import annotations

from pathlib import Path

from lvsearch.arch import Arch
from lvsearch.config import RetrainConfig
from lvsearch.data.shards import PreparedData
from lvsearch.errors import LvsearchError
from lvsearch.train.distributed import init_distributed, shutdown
from lvsearch.train.loop import train
from lvsearch.train.retrain import RUN_FORMAT, RetrainObjective, build_module


def cooldown_probe(run_dir: str | Path, at_step: int, decay_steps: int, *, data_dir: str | Path | None = None,
                   device: str = "cpu", show_progress: bool = False) -> dict:
    """The dev loss a stable-phase (constant learning rate) run would reach with a cool-down
    started now: a throw-away branch of the run in ``run_dir`` from its checkpoint at
    ``at_step``, trained ``decay_steps`` more steps with the learning rate falling linearly
    from ``train.lr`` to 0 — the cool-down of a warmup-stable-decay schedule (Hägele et al.
    2024, "Scaling Laws and Compute-Optimal Training Beyond Fixed Training Durations", §3)
    of ``at_step + decay_steps`` steps. The branch sees the batches the run itself would see
    at those steps (same seed, same step-indexed data order), so it equals, bit for bit, a
    fresh run of ``train.steps = at_step + decay_steps`` with ``train.schedule = wsd`` and
    that cool-down length (tested). Nothing in ``run_dir`` changes: the branch lives in a
    temporary folder beside it and is deleted.

    Args:
        run_dir: a retrain run with ``train.schedule = wsd`` whose latest checkpoint is at
            ``at_step``, inside its stable phase (``linear``/``cosine`` runs are refused: their
            learning rate is not constant there, so no cool-down branch starts from it).
        at_step: the step the cool-down starts from (optimizer steps).
        decay_steps: cool-down length in optimizer steps (≥ 1).
        data_dir: the prepared data (default: the folder recorded in the run).

    Returns:
        ``{"at_step", "decay_steps", "end_step", "stable_loss"`` (dev loss at ``at_step`` from
        the run's curve, nats), ``"cooled_loss"`` (dev loss after the cool-down, nats),
        ``"drop"`` (stable − cooled, nats; positive when the cool-down helps), ``"seconds"}``.
        The dev loss is the curve's ``loss``: the dev MLM loss (the generator's under ELECTRA).

    Raises:
        LvsearchError: no run, a schedule other than ``wsd``, ``at_step`` not the latest
            checkpoint or not in the stable phase, ``decay_steps < 1``.
    """
    import shutil
    import tempfile
    import time
    from dataclasses import replace

    from lvsearch.train.checkpoint import LATEST, latest_checkpoint, latest_step
    from lvsearch.train.loop import read_curve
    from lvsearch.train.run import read_run_config

    run_dir = Path(run_dir).expanduser().resolve()
    config, recorded = read_run_config(run_dir, RUN_FORMAT, RetrainConfig, missing_fix="pass a retrain run folder")
    t = config.train
    if t.schedule != "wsd":
        raise LvsearchError(f"{run_dir}: a cool-down probe needs train.schedule wsd (the run has {t.schedule})",
                            fix="train with --set train.schedule=wsd")
    stable_end = t.steps - max(1, round(t.decay_fraction * t.steps))
    if decay_steps < 1 or not t.warmup_steps <= at_step <= stable_end:
        raise LvsearchError(f"{run_dir}: a cool-down probe needs decay_steps ≥ 1 and warm-up ({t.warmup_steps}) ≤ "
                            f"at_step ≤ the stable phase's end ({stable_end}); got at_step {at_step}, "
                            f"decay_steps {decay_steps}", fix="probe at a rung inside the stable phase")
    ckpt = latest_checkpoint(run_dir)
    if ckpt is None or latest_step(run_dir) != at_step:
        raise LvsearchError(f"{run_dir}: the latest checkpoint is not at step {at_step}",
                            fix="probe right after the run stopped at that step")
    _, stable = read_curve(run_dir, up_to_step=at_step, after_step=at_step - 1)
    if not stable:
        raise LvsearchError(f"{run_dir}: no dev evaluation at step {at_step}", fix="stop the run at a multiple of train.eval_every")
    data = PreparedData.open(data_dir or recorded["data"]["folder"])
    arch = Arch.from_dict(recorded["arch"], source=run_dir / "config.json")
    end = at_step + decay_steps
    # A wsd run of `end` steps whose cool-down is exactly `decay_steps` long: identical learning
    # rates up to at_step (warm-up, then constant), then linear to 0.
    branch_cfg = replace(config, train=replace(t, steps=end, decay_fraction=decay_steps / end, eval_every=end,
                                               checkpoint_every=0, keep_checkpoints=1))
    if max(1, round(branch_cfg.train.decay_fraction * end)) != decay_steps:  # float rounding guard
        raise LvsearchError(f"internal: cool-down of {decay_steps} steps not representable at {end} steps")
    info = init_distributed(device)
    t0 = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix=f".cooldown-{run_dir.name}-", dir=run_dir.parent))
    try:
        (tmp / "checkpoints").mkdir()
        shutil.copytree(ckpt, tmp / "checkpoints" / ckpt.name)
        shutil.copy2(ckpt.parent / LATEST, tmp / "checkpoints" / LATEST)
        dims = branch_cfg.model_settings().dims(data.vocab_size, data.special_ids.pad, branch_cfg.train.seq_len)
        module = build_module(branch_cfg, arch, dims)
        objective = RetrainObjective(module, data, branch_cfg, info)
        summary = train(objective, branch_cfg.train, tmp, info, tokens_per_step=t.batch_size * t.seq_len, resume=True,
                        checkpoint_extra={"tokenizer_sha256": data.tokenizer_sha256, "arch": arch.key},
                        label=f"cool-down probe {arch.compact} @{at_step}+{decay_steps}", show_progress=show_progress,
                        track=False)
        cooled = float(summary["final_eval"]["curve"]["loss"])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        shutdown(info)
    return {"at_step": at_step, "decay_steps": decay_steps, "end_step": end, "stable_loss": stable[-1],
            "cooled_loss": cooled, "drop": stable[-1] - cooled, "seconds": time.perf_counter() - t0}
