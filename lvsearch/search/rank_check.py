"""``lvsearch rank-check``: does supernet fitness rank architectures like standalone training?

Procedure: score a random pool of ``M`` architectures on the supernet (inherited weights, the
search's fitness), pick ``N`` of them at evenly spaced quantiles of that fitness (so they span
its range), train each from scratch for ``S`` steps with the supernet run's recipe (same data,
batch, sequence length, masking, learning-rate schedule shortened to ``S`` steps, seed), score
it on the same fixed masked dev set, and report Kendall τ and Spearman ρ
(``scipy.stats.kendalltau`` / ``spearmanr``) between the two accuracies and the overlap of the
top-k sets (``k = max(1, N // 4)``). One-shot NAS reference: τ ≈ 0.50–0.54 on NAS-Bench-201
(published anchor; not reproduced here).

Outputs in ``--out``: ``rank_check.json`` and ``rank_check.png`` (scatter), plus one training
run per architecture under ``standalone/NN/``.
"""

from __future__ import annotations

import random
import shutil
from dataclasses import replace
from pathlib import Path

import torch
from torch import nn

from lvsearch.arch import Arch
from lvsearch.errors import LvsearchError


class FixedArchObjective:
    """The training-loop objective of one architecture trained from scratch under MLM with the
    supernet run's data stream and masking (the same masked batches the supernet saw at each
    step), scored on the search's fixed dev set."""

    def __init__(self, arch: Arch, dims, data, config, dev, info):
        from lvsearch.model import Encoder
        from lvsearch.train.objectives import MaskedBatches
        from lvsearch.train.retrain import EncoderMLM

        self.config, self.info, self.dev = config, info, dev
        torch.manual_seed(config.train.seed)
        self.module = EncoderMLM(Encoder(arch, dims))
        self.batches = MaskedBatches(data, config.train, config.masking, info)

    def micro_batches(self, step: int):
        from lvsearch.data.masking import IGNORE_INDEX

        micro, labels = self.batches(step)
        for m in micro:
            del m["original_ids"]
        return micro, float((labels != IGNORE_INDEX).sum())

    def step_info(self, step: int) -> dict:
        return {}

    def log_metrics(self, sums: dict[str, float], norm: float) -> dict:
        from lvsearch.train.objectives import mlm_log_metrics

        return mlm_log_metrics(sums)

    def evaluate(self, module: nn.Module, step: int) -> dict:
        from lvsearch.train.objectives import evaluate_mlm

        enc = module.encoder
        return evaluate_mlm(enc, enc, self.dev, self.config.eval.batch_size, self.info.device)


def quantile_pick(results: list, n: int) -> list:
    """``n`` items of ``results`` (sorted by ``.fitness``) at evenly spaced quantiles, distinct."""
    s = sorted(results, key=lambda r: (r.fitness, r.key))
    if n >= len(s):
        return s
    idx = sorted({round(i * (len(s) - 1) / (n - 1)) for i in range(n)}) if n > 1 else [len(s) - 1]
    return [s[i] for i in idx]


def rank_check(supernet: str | Path, *, num_archs: int = 8, steps: int = 200, pool: int | None = None,
               out: str | Path | None = None, data: str | Path | None = None, dev_sequences: int | None = None,
               seed: int = 0, overwrite: bool = False, device: str = "auto", show_progress: bool = False) -> dict:
    """Run the rank check; returns (and writes) the report dict.

    Returns keys: ``kendall_tau, kendall_p, spearman_rho, spearman_p`` (accuracies),
    ``kendall_tau_loss, kendall_p_loss`` (dev MLM losses), ``topk, topk_overlap,
    archs`` (per arch: key, supernet fitness/loss, standalone accuracy/loss, params),
    ``num_archs, steps, pool, supernet_step, seconds, out``.

    Raises:
        LvsearchError: N < 3 (no meaningful correlation), steps < 1, an ``out`` folder that
            already holds a rank check (without ``overwrite``), and the errors of
            :func:`lvsearch.search.job.load_dev` / ``load_supernet``.
    """
    import time

    import warnings

    from scipy.stats import kendalltau, spearmanr

    from lvsearch.io import atomic_write_json
    from lvsearch.search.evaluator import SupernetEvaluator
    from lvsearch.search.job import load_dev
    from lvsearch.train.distributed import init_distributed
    from lvsearch.train.loop import train
    from lvsearch.train.supernet import load_supernet

    if num_archs < 3:
        raise LvsearchError(f"--archs must be ≥ 3 for a rank correlation, got {num_archs}")
    if steps < 1:
        raise LvsearchError(f"--steps must be ≥ 1, got {steps}")
    t0 = time.perf_counter()
    info = init_distributed(device)
    if info.enabled:
        raise LvsearchError("rank-check runs on one process", fix="run it without torchrun")
    loaded = load_supernet(supernet, device=info.device)
    out = Path(out) if out is not None else Path(supernet) / "rank_check"
    if (out / "rank_check.json").exists() and not overwrite:
        raise LvsearchError(f"{out} already holds a rank check", fix="pass --overwrite or another --out")
    if out.is_dir() and overwrite:
        shutil.rmtree(out / "standalone", ignore_errors=True)
    dev, prepared = load_dev(loaded, data, dev_sequences)
    m = pool if pool is not None else max(50, 5 * num_archs)
    if m < num_archs:
        raise LvsearchError(f"--pool {m} is smaller than --archs {num_archs}")
    rng = random.Random(seed)
    archs: dict[str, Arch] = {}
    for _ in range(100 * m):
        a = loaded.space.sample(rng)
        archs.setdefault(a.key, a)
        if len(archs) >= m:
            break
    evaluator = SupernetEvaluator(loaded.supernet, dev, seq_len=loaded.config.train.seq_len, device=info.device)
    scored = evaluator.evaluate_many(list(archs.values()))
    picked = quantile_pick(scored, num_archs)
    cfg = loaded.config
    tcfg = replace(cfg.train, steps=steps, warmup_steps=min(cfg.train.warmup_steps, max(0, steps // 10)),
                   eval_every=0, checkpoint_every=0, keep_checkpoints=1, log_every=max(1, steps // 5))
    rows = []
    for i, r in enumerate(picked):
        arch = archs[r.key]
        run = out / "standalone" / f"{i:02d}"
        if run.exists():
            shutil.rmtree(run)
        run.mkdir(parents=True)
        obj = FixedArchObjective(arch, loaded.dims, prepared, replace(cfg, train=tcfg), dev, info)
        summary = train(obj, tcfg, run, info, tokens_per_step=tcfg.batch_size * tcfg.seq_len, resume=False,
                        checkpoint_extra={"arch": arch.key}, label=f"standalone {i + 1}/{len(picked)}",
                        show_progress=show_progress)
        final = summary.get("final_eval") or {}
        rows.append({"key": r.key, "supernet_fitness": r.fitness, "supernet_loss": r.loss, "params": r.params,
                     "standalone_accuracy": final.get("accuracy"), "standalone_loss": final.get("loss")})
    xs = [row["supernet_fitness"] for row in rows]
    ys = [row["standalone_accuracy"] for row in rows]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # constant input: reported as undefined (None)
        tau = kendalltau(xs, ys)
        rho = spearmanr(xs, ys)
        # secondary: dev MLM loss (lower is better on both sides); informative when short
        # standalone runs leave accuracies tied (every model predicting the same frequent token)
        tau_loss = kendalltau([r["supernet_loss"] for r in rows], [r["standalone_loss"] for r in rows])
    k = max(1, len(rows) // 4)
    top_sn = {row["key"] for row in sorted(rows, key=lambda r: -r["supernet_fitness"])[:k]}
    top_sa = {row["key"] for row in sorted(rows, key=lambda r: -r["standalone_accuracy"])[:k]}
    import math

    def num(x) -> float | None:  # undefined (constant input, e.g. after too few steps) -> None
        return None if x is None or math.isnan(float(x)) else float(x)

    report = {
        "kendall_tau": num(tau.statistic), "kendall_p": num(tau.pvalue),
        "spearman_rho": num(rho.statistic), "spearman_p": num(rho.pvalue),
        "kendall_tau_loss": num(tau_loss.statistic), "kendall_p_loss": num(tau_loss.pvalue),
        "topk": k, "topk_overlap": len(top_sn & top_sa), "archs": rows, "num_archs": len(rows), "steps": steps,
        "pool": m, "supernet": str(Path(supernet).resolve()), "supernet_step": loaded.step,
        "dev_sequences": int(dev.input_ids.shape[0]), "seconds": time.perf_counter() - t0, "out": str(out),
    }
    atomic_write_json(out / "rank_check.json", report)
    _scatter(xs, ys, report, out / "rank_check.png")
    return report


def _scatter(xs, ys, report: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from lvsearch.io import save_figure

    fig, ax = plt.subplots(figsize=(5, 4), dpi=120)
    ax.scatter(xs, ys)
    ax.set_xlabel("supernet fitness (dev MLM accuracy, inherited weights)")
    ax.set_ylabel(f"standalone dev MLM accuracy ({report['steps']} steps)")
    fmt = lambda v: "undefined" if v is None else f"{v:.2f}"  # noqa: E731
    ax.set_title(f"Kendall τ {fmt(report['kendall_tau'])}, Spearman ρ {fmt(report['spearman_rho'])}")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    save_figure(fig, path)
