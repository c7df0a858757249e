"""The one training loop: AdamW, warm-up + linear decay, clipping, accumulation, AMP, DDP,
checkpoint/resume, JSON-lines metrics and a progress bar.

What is trained is described by an :class:`Objective`: the module to optimise, the micro-batches
of each step and the evaluation. Everything random in a step is a pure function of
``(seed, step, rank)``: the data (``BatchStream.batch(step)``), the masks and the sampled
architecture come from the objective keyed by step, and the dropout RNG is re-seeded from
``(seed, step, rank)`` at the start of every step. A resumed run therefore needs only the
weights, the AdamW moments and the step number to continue *exactly* as an uninterrupted run
(tested: identical weights on CPU).

Gradient normalisation: the objective returns summed losses and the global number of
prediction targets of the step (over micro-batches and ranks); each micro-batch's loss is
``loss_sum · world_size / N``, so after DDP's averaging the gradient is that of the mean loss
over the global batch, whatever the split into ranks and micro-batches.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import math
import time
from pathlib import Path
from typing import Protocol

import torch
from torch import nn

from lvsearch import tracking
from lvsearch.config import TrainConfig
from lvsearch.device import cpu_has_native_bf16
from lvsearch.errors import LvsearchError
from lvsearch.faults import kill_point
from lvsearch.io import atomic_write_bytes, iter_jsonl, remove_stale_temps, write_error
from lvsearch.train.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint
from lvsearch.train.distributed import DistInfo, all_reduce_sum

METRICS = "metrics.jsonl"
CURVE = "curve.jsonl"
#: What the Ctrl-C message tells the user to do; a job that resumes differently (the
#: quickstart: re-run the same command) sets it for the duration of its run.
RESUME_HINT: contextvars.ContextVar[str] = contextvars.ContextVar("RESUME_HINT", default="continue with --resume")


class Objective(Protocol):
    """What the loop trains.

    ``module.forward(**micro_batch)`` must return a dict with ``loss_sum`` (differentiable,
    summed over prediction targets) and any number of detached scalar tensors (counts,
    correct predictions, partial losses). The loop sums every entry over micro-batches and
    ranks and hands the sums to :meth:`log_metrics` at each log step.
    """

    module: nn.Module

    def micro_batches(self, step: int) -> tuple[list[dict], float]:
        """This rank's micro-batches (keyword arguments of ``module.forward``) of ``step`` and
        the global normaliser N (prediction targets over all micro-batches and ranks)."""
        ...

    def step_info(self, step: int) -> dict:
        """JSON-able facts about ``step`` for the metrics line (e.g. the sampled arch)."""
        ...

    def log_metrics(self, sums: dict[str, float], norm: float) -> dict:
        """Training metrics of one step from the summed ``forward`` outputs and the normaliser."""
        ...

    def evaluate(self, module: nn.Module, step: int) -> dict:
        """Dev metrics (rank 0 only, module in eval mode, no grad). A ``"curve"`` entry (flat
        dict of numbers) is also appended to ``curve.jsonl`` with the step and tokens seen."""
        ...


def step_seed(seed: int, step: int, rank: int, stream: str) -> int:
    """A 63-bit seed derived from ``(seed, step, rank, stream)`` (stable across processes)."""
    digest = hashlib.blake2b(f"{seed}\0{step}\0{rank}\0{stream}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def read_curve(run_dir: Path, *, up_to_step: int, after_step: int) -> tuple[list[float], list[float]]:
    """``(tokens, dev loss)`` of ``run_dir/curve.jsonl`` for ``after_step < step <= up_to_step``.

    Raises:
        LvsearchError: a line is not JSON or lacks ``step``/``tokens``/``loss``.
    """
    path = run_dir / CURVE
    xs, ys = [], []
    if not path.is_file():
        return xs, ys
    fix = "delete the finalist's run folder to retrain it"
    for lineno, rec in iter_jsonl(path, path.read_text(encoding="utf-8"), fix=fix):
        if not all(k in rec for k in ("step", "tokens", "loss")):
            raise LvsearchError(f"{path}, line {lineno}: needs step, tokens and loss", fix=fix)
        if after_step < rec["step"] <= up_to_step:
            xs.append(float(rec["tokens"]))
            ys.append(float(rec["loss"]))
    return xs, ys


def lr_at(step: int, cfg: TrainConfig) -> float:
    """Learning rate for optimizer step ``step`` (0-based): linear warm-up to ``cfg.lr`` over
    ``warmup_steps``, then ``cfg.schedule``: ``linear`` decay to 0 at ``cfg.steps`` (BERT /
    LV-BERT), ``wsd`` (constant, then linear to 0 over the last ``decay_fraction · steps``;
    Hägele et al. 2024) or ``cosine`` (half-cosine to 0 at ``cfg.steps``)."""
    if cfg.warmup_steps and step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    remaining = cfg.steps - step
    if cfg.schedule == "wsd":
        decay = max(1, round(cfg.decay_fraction * cfg.steps))
        return cfg.lr * min(1.0, max(0.0, remaining / decay))
    span = max(1, cfg.steps - cfg.warmup_steps)
    frac = max(0.0, remaining / span)
    if cfg.schedule == "cosine":
        return cfg.lr * 0.5 * (1.0 - math.cos(math.pi * frac))
    return cfg.lr * frac


def make_optimizer(module: nn.Module, cfg: TrainConfig) -> torch.optim.AdamW:
    """AdamW with weight decay on matrices only (not on biases, LayerNorm weights, α logits).

    Parameters that get no gradient in a step (supernet ops off the sampled path) are skipped
    by AdamW: neither their moments nor weight decay change.
    """
    decay, no_decay = [], []
    for name, p in module.named_parameters():
        if not p.requires_grad:
            continue
        (decay if p.ndim >= 2 and "mixing" not in name else no_decay).append(p)
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=cfg.adam_betas, eps=cfg.adam_eps)


def resolved_precision(cfg: TrainConfig, device: torch.device) -> str:
    """``"bf16"`` or ``"fp32"``: what ``cfg.precision`` means on ``device``. ``auto`` is bf16
    on CUDA and on CPUs with native bf16 (:func:`lvsearch.device.cpu_has_native_bf16`), fp32 elsewhere."""
    if cfg.precision != "auto":
        return cfg.precision
    if device.type == "cuda" or (device.type == "cpu" and cpu_has_native_bf16()):
        return "bf16"
    return "fp32"


def autocast_context(cfg: TrainConfig, device: torch.device):
    """bf16 autocast when :func:`resolved_precision` says bf16 (weights, AdamW state and
    losses stay fp32); a null context for fp32."""
    if resolved_precision(cfg, device) != "bf16":
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16)


def _truncate_metrics(path: Path, step: int) -> None:
    """Drop metric lines logged after ``step`` (from the part of a run that is being redone)."""
    if not path.is_file():
        return
    text = path.read_text(encoding="utf-8")
    kept = []
    for line in text.splitlines():
        try:
            if json.loads(line).get("step", 0) <= step:
                kept.append(line)
        except json.JSONDecodeError:
            continue  # a line cut by a crash
    new = "\n".join(kept) + "\n" if kept else ""
    if new != text:  # a finished or cleanly stopped run's files stay untouched
        atomic_write_bytes(path, new.encode("utf-8"))


def _all_finite(tensors) -> bool:
    """Whether every element of every tensor is finite (one device sync)."""
    flags = [torch.isfinite(t).all() for t in tensors]
    return bool(torch.stack(flags).all()) if flags else True


def _diverged(done: int, what: str, last_good: tuple[int, Path] | None) -> LvsearchError:
    """The error of a run that diverged at step ``done``; names the last checkpoint written
    (every checkpoint holds finite weights: they are checked before writing)."""
    if last_good is None:
        where = "no checkpoint was written before it"
    else:
        where = f"the last good checkpoint is {last_good[1]} (step {last_good[0]}; checkpoints/latest.json names it)"
    return LvsearchError(
        f"training diverged at step {done} ({what}); nothing non-finite was saved: {where}",
        fix="lower train.lr or raise train.warmup_steps and start the run again (--overwrite); resuming with the "
        "same settings repeats the divergence",
    )


class MetricsWriter:
    """Appends JSON lines to ``run_dir/metrics.jsonl`` (main process only)."""

    def __init__(self, path: Path, enabled: bool):
        self.path, self.enabled = path, enabled

    def write(self, record: dict) -> None:
        if self.enabled:
            try:
                with open(self.path, "a", encoding="utf-8") as f:
                    f.write(json.dumps(record, sort_keys=True) + "\n")
            except OSError as e:
                raise write_error(self.path, e) from None


class _TrainRun:
    """The state one :func:`train` call works on, with one method per part of a step: the module
    and its DDP wrapper, the optimizer, the metric writers and the newest good checkpoint."""

    def __init__(self, objective: Objective, cfg: TrainConfig, run_dir: Path, info: DistInfo, *,
                 tokens_per_step: int, checkpoint_extra: dict, track: bool):
        self.objective, self.cfg, self.run_dir, self.info = objective, cfg, run_dir, info
        self.tokens_per_step, self.checkpoint_extra, self.track = tokens_per_step, checkpoint_extra, track
        self.module = objective.module.to(info.device)
        self.optimizer = make_optimizer(self.module, cfg)
        self.last_good: tuple[int, Path] | None = None  # (step, folder) of the newest checkpoint written or loaded
        self.final_eval: dict = {}
        self.tokens_done_here = 0
        self.t0 = 0.0

    def resume(self) -> int:
        """Load ``checkpoints/latest.json``'s checkpoint into the module and optimizer and cut the
        metric files back to its step (the steps after it are redone); returns that step."""
        run_dir, info = self.run_dir, self.info
        path = latest_checkpoint(run_dir)
        if path is None:
            raise LvsearchError(f"--resume: {run_dir} has no checkpoint", fix="start the run without --resume")
        ckpt = load_checkpoint(path)
        if info.is_main:
            remove_stale_temps(path.parent, ".step-")  # checkpoint writes killed before their rename
        self.module.load_state_dict(ckpt.model, strict=True)
        self.optimizer.load_state_dict(ckpt.optimizer)
        start = ckpt.step
        self.last_good = (start, path)
        if info.is_main:
            _truncate_metrics(run_dir / METRICS, start)
            _truncate_metrics(run_dir / CURVE, start)
            if self.track:
                tracking.start_at(run_dir, start + 1)  # the steps after the checkpoint are redone
        return start

    def prepare(self) -> None:
        """Open the metric writers and wrap the module for DDP (when distributed)."""
        info = self.info
        self.metrics = MetricsWriter(self.run_dir / METRICS, info.is_main)
        self.curve = MetricsWriter(self.run_dir / CURVE, info.is_main)
        self.model: nn.Module = self.module
        if info.enabled:
            self.model = nn.parallel.DistributedDataParallel(
                self.module,
                device_ids=[info.device.index] if info.device.type == "cuda" else None,
                find_unused_parameters=True,  # a supernet step uses one path of ops
            )
        self.params = [p for p in self.module.parameters() if p.requires_grad]

    def checkpoint(self, done: int) -> None:
        """Save the checkpoint of step ``done``. Every rank checks the weights (identical under
        DDP, so all raise together); rank 0 writes. A non-finite checkpoint is never written."""
        if not _all_finite(p.detach() for p in self.module.parameters()):
            raise _diverged(done, "non-finite weights", self.last_good)
        if self.info.is_main:
            folder = save_checkpoint(self.run_dir, done, self.module, self.optimizer,
                                     {**self.checkpoint_extra, "tokens": done * self.tokens_per_step},
                                     keep=self.cfg.keep_checkpoints)
            self.last_good = (done, folder)
            if self.track:
                tracking.flush(self.run_dir)

    def step(self, step: int) -> tuple[dict[str, torch.Tensor], float, torch.Tensor, float]:
        """One optimizer step (0-based ``step``): forward and backward over the micro-batches,
        clipping, the finiteness check (before anything is written), the update.

        Returns ``(summed forward outputs, normaliser, gradient norm, learning rate)``.
        """
        cfg, info, objective, model = self.cfg, self.info, self.objective, self.model
        torch.manual_seed(step_seed(cfg.seed, step, info.rank, "dropout"))
        lr = lr_at(step, cfg)
        for g in self.optimizer.param_groups:
            g["lr"] = lr
        micro, norm = objective.micro_batches(step)
        sums: dict[str, torch.Tensor] = {}
        for i, kwargs in enumerate(micro):
            last = i == len(micro) - 1
            sync = model.no_sync() if info.enabled and not last else contextlib.nullcontext()
            with sync:
                with autocast_context(cfg, info.device):
                    out = model(**{k: _to(v, info.device) for k, v in kwargs.items()})
                (out["loss_sum"].float() * info.world_size / norm).backward()
            for k, v in out.items():
                if not k.startswith("_"):  # "_name": per-token outputs for evaluation only
                    sums[k] = sums.get(k, 0) + v.detach().float()
        grad_norm = (
            torch.nn.utils.clip_grad_norm_([p for p in self.params if p.grad is not None], cfg.grad_clip)
            if cfg.grad_clip > 0
            else torch.zeros(())
        )
        done = step + 1
        # Every step, before anything is written: the loss is already summed, so this costs
        # one scalar (all-reduced under DDP so every rank stops at the same step).
        loss_sum = sums["loss_sum"]
        ok = torch.isfinite(loss_sum) & torch.isfinite(grad_norm.to(loss_sum.device))
        if float(all_reduce_sum((~ok).float().reshape(1), info)[0]) > 0:
            raise _diverged(done, f"loss_sum {float(sums['loss_sum'])}, grad norm {float(grad_norm)}", self.last_good)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        kill_point(f"step:{done}")
        self.tokens_done_here += self.tokens_per_step
        return sums, norm, grad_norm, lr

    def log(self, step: int, sums: dict[str, torch.Tensor], norm: float, grad_norm: torch.Tensor, lr: float) -> dict:
        """Write (and track) the metrics line of step ``step + 1``, summed over ranks; returns it.
        Raises the divergence error when its loss is not finite."""
        done = step + 1
        keys = sorted(sums)
        totals = all_reduce_sum(torch.stack([sums[k] for k in keys]), self.info).tolist()
        elapsed = time.perf_counter() - self.t0
        record = {
            "step": done,
            "tokens": done * self.tokens_per_step,
            "lr": lr,
            **self.objective.log_metrics(dict(zip(keys, totals)), norm),
            "grad_norm": float(grad_norm),
            "tokens_per_s": self.tokens_done_here / elapsed,
            "elapsed_s": elapsed,
            **self.objective.step_info(step),
        }
        if not math.isfinite(record["loss"]):
            raise _diverged(done, f"loss {record['loss']}", self.last_good)
        self.metrics.write(record)
        if self.track and self.info.is_main:
            tracking.log(self.run_dir, done, {k: v for k, v in record.items() if k != "step"}, "train/")
        return record

    def evaluate(self, done: int, *, write: bool = True) -> None:
        """Evaluate the module at step ``done`` (rank 0) into ``final_eval``; with ``write``, append
        the result to ``metrics.jsonl`` (and its ``curve`` entry to ``curve.jsonl``) and track it."""
        module = self.module
        module.eval()
        with torch.no_grad():
            self.final_eval = self.objective.evaluate(module, done)
        module.train()
        if not write:
            return
        tokens = done * self.tokens_per_step
        self.metrics.write({"step": done, "tokens": tokens, "eval": self.final_eval})
        if self.track:
            tracking.log(self.run_dir, done, self.final_eval, "dev/")
        if "curve" in self.final_eval:
            self.curve.write({"step": done, "tokens": tokens, **self.final_eval["curve"]})

    def summary(self, start: int, end: int) -> dict:
        """What :func:`train` returns."""
        elapsed = time.perf_counter() - self.t0
        reached = max(start, end)
        return {
            "steps": reached,
            "target_steps": self.cfg.steps,
            "precision": resolved_precision(self.cfg, self.info.device),
            "resumed_from": start,
            "tokens": reached * self.tokens_per_step,
            "seconds_this_process": elapsed,
            "tokens_per_s": self.tokens_done_here / elapsed if elapsed > 0 else None,
            "final_eval": self.final_eval,
        }


def _save_and_stop(run: _TrainRun, step: int, start: int) -> None:
    """The first Ctrl-C, honoured before step ``step``: checkpoint what was trained here, then stop."""
    from lvsearch import ui

    if step > start:
        run.checkpoint(step)
        ui.console.print(f"interrupted: checkpoint saved at step {step}; {RESUME_HINT.get()}")
    else:
        ui.console.print("interrupted before the first step completed: nothing to save")
    raise KeyboardInterrupt


def train(
    objective: Objective,
    cfg: TrainConfig,
    run_dir: str | Path,
    info: DistInfo,
    *,
    tokens_per_step: int,
    resume: bool,
    checkpoint_extra: dict,
    label: str = "training",
    show_progress: bool = True,
    stop_at: int | None = None,
    track: bool = True,
) -> dict:
    """Run (or resume) training to ``cfg.steps`` optimizer steps (or to ``stop_at``).

    Args:
        objective: module + micro-batches + evaluation.
        cfg: loop settings.
        run_dir: run folder (``checkpoints/``, ``metrics.jsonl``).
        info: distributed placement; the module is moved to ``info.device``.
        tokens_per_step: tokens in one global batch (for the x axis of learning curves).
        resume: continue from ``checkpoints/latest.json``.
        checkpoint_extra: JSON-able facts stored in every checkpoint (config, tokenizer hash…).
        stop_at: stop after this many optimizer steps (``1 <= stop_at <= cfg.steps``), with an
            evaluation and a checkpoint there, while the learning rate still follows the
            schedule of ``cfg.steps``: the stopped run is an exact prefix of the full one, and
            resuming it continues as if never stopped (finalist pruning relies on this). With
            ``stop_at`` a multiple of ``eval_every`` its ``curve.jsonl`` is a prefix too. None:
            train to ``cfg.steps``. Nothing is trained when the run is already past it; the
            loaded weights are then evaluated again (rank 0), so ``final_eval`` is complete.
        track: mirror the metrics to the enabled trackers (:mod:`lvsearch.tracking`); False for
            a throw-away branch such as a cool-down probe.

    Every step checks the summed loss and the gradient norm, and every checkpoint the weights,
    before anything is written: a non-finite checkpoint is never written.

    Returns:
        Summary: steps reached, target_steps (``cfg.steps``), precision used (``bf16``/``fp32``),
        tokens, seconds, tokens/s,
        final evaluation (rank 0; ``{}`` on other ranks).

    Raises:
        LvsearchError: resume without a valid checkpoint (missing, truncated, modified);
            ``stop_at`` outside ``[1, cfg.steps]``; training diverged (non-finite loss,
            gradient norm or weights; the message names the last good checkpoint or says
            none was written).
    """
    from lvsearch import ui

    run_dir = Path(run_dir)
    end = cfg.steps if stop_at is None else int(stop_at)
    if not 1 <= end <= cfg.steps:
        raise LvsearchError(f"stop_at={stop_at} must be between 1 and train.steps={cfg.steps}")
    run = _TrainRun(objective, cfg, run_dir, info, tokens_per_step=tokens_per_step,
                    checkpoint_extra=checkpoint_extra, track=track)
    start = run.resume() if resume else 0
    run.prepare()

    run.t0 = time.perf_counter()
    stop = _GracefulInterrupt(enabled=not info.enabled)
    with stop, ui.progress(enabled=show_progress and info.is_main) as bar:
        task = bar.add_task(label, total=cfg.steps, completed=start, info="")
        run.module.train()
        for step in range(start, end):
            if stop.requested:
                _save_and_stop(run, step, start)
            sums, norm, grad_norm, lr = run.step(step)
            done = step + 1
            if done % cfg.log_every == 0 or done == end:
                record = run.log(step, sums, norm, grad_norm, lr)
                bar.update(task, info=f"loss {record['loss']:.3f} {record['tokens_per_s']:,.0f} tok/s")
            if ((cfg.eval_every and done % cfg.eval_every == 0) or done == end) and info.is_main:
                run.evaluate(done)
            if (cfg.checkpoint_every and done % cfg.checkpoint_every == 0) or done == end:
                run.checkpoint(done)
                if done == cfg.steps:
                    kill_point("before-summary")
            bar.update(task, completed=done)
        if start >= end and info.is_main:
            # Nothing to train (a run killed between its final checkpoint and its summary, or
            # resumed at its stop): evaluate the loaded weights again so the caller gets a
            # complete final_eval. The metric lines of that evaluation were written before the
            # checkpoint, so none is written again.
            run.evaluate(start, write=False)
    return run.summary(start, end)


class _GracefulInterrupt:
    """Turn the first Ctrl-C (SIGINT) into a request honoured at the next step boundary, where
    the loop saves a checkpoint and stops; a second Ctrl-C interrupts at once. Single-process
    runs only: under torchrun each rank would see the signal at a different step."""

    def __init__(self, enabled: bool):
        self.enabled, self.requested, self._old = enabled, False, None

    def _handler(self, signum, frame):
        import signal

        self.requested = True
        signal.signal(signal.SIGINT, self._old)  # a second Ctrl-C raises immediately

    def __enter__(self):
        import signal
        import threading

        if self.enabled and threading.current_thread() is threading.main_thread():
            self._old = signal.signal(signal.SIGINT, self._handler)
        else:
            self.enabled = False
        return self

    def __exit__(self, *exc):
        import signal

        if self.enabled and signal.getsignal(signal.SIGINT) == self._handler:
            signal.signal(signal.SIGINT, self._old)
        return False


def _to(value, device: torch.device):
    return value.to(device, non_blocking=True) if torch.is_tensor(value) else value
