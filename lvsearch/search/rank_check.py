"""``lvsearch rank-check``: does supernet fitness rank architectures like standalone training?

Procedure: score a random pool of ``M`` architectures on the supernet (inherited weights, the
search's fitness), pick ``N`` of them at evenly spaced quantiles of that fitness (so they span
its range), train each from scratch for ``S`` steps with the supernet run's recipe (same data,
batch, sequence length, masking, learning-rate schedule shortened to ``S`` steps, seed), score
it on the same fixed masked dev set, and report Kendall τ and Spearman ρ
(``scipy.stats.kendalltau`` / ``spearmanr``) between the two accuracies, with paired
percentile-bootstrap 95% intervals (:func:`~lvsearch.stats.bootstrap_interval`), the overlap of the top-k sets
(``k = max(1, N // 4)``) next to its chance level (:func:`~lvsearch.search.rank_stats.topk_chance`), and τ within strata of
DC count and connectivity density (:func:`~lvsearch.search.rank_stats.strata`, :func:`~lvsearch.search.rank_stats.stratified_tau`), since a τ that only
separates "has DC" from "has none" is not a search signal. One-shot NAS reference: τ ≈
0.50–0.54 on NAS-Bench-201 (published anchor; not reproduced here). Finished standalone runs
are kept (``standalone/NN/summary.json``): re-running after an interruption trains only the
rest.

Outputs in ``--out``: ``rank_check.json`` and ``rank_check.png`` (scatter), plus one training
run per architecture under ``standalone/NN/``; with ``--executor local|slurm`` the standalone
runs are independent jobs (:mod:`lvsearch.dispatch`) whose submitit files and logs are in
``dispatch/``.
"""

from __future__ import annotations

import random
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Optional

import torch
from torch import nn

from lvsearch.arch import Arch
from lvsearch.errors import LvsearchError
from lvsearch.stats import bootstrap_interval
from lvsearch.train.run import RunSummary, summary_fix
from lvsearch.search.fitness import DEFAULT, METRICS, Fitness
from lvsearch.lock import holds_output
from lvsearch.schema import Count
from lvsearch.search.rank_stats import density, rank_quality, strata, stratified_tau, topk_chance


class FixedArchObjective:
    """The training-loop objective of one architecture trained from scratch under MLM with the
    supernet run's data stream and masking (the same masked batches the supernet saw at each
    step), scored on the search's fixed dev set.

    ``init``: start from these weights (an :class:`~lvsearch.model.Encoder` of ``arch``, e.g.
    ``supernet.extract(arch)``: the second stage's fine-tune of inherited weights) instead of a
    fresh initialisation.
    """

    def __init__(self, arch: Arch, dims, data, config, dev, info, init=None):
        from lvsearch.model import Encoder
        from lvsearch.train.objectives import MaskedBatches
        from lvsearch.train.retrain import EncoderMLM

        self.config, self.info, self.dev = config, info, dev
        torch.manual_seed(config.train.seed)
        if init is not None and init.arch.key != arch.key:
            raise ValueError(f"init weights are of {init.arch.key}, not {arch.key}")
        self.module = EncoderMLM(init if init is not None else Encoder(arch, dims))
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


#: The command that writes a ``rank_check.json`` (named by the fixes for a damaged ``--reuse`` file).
RANK_CHECK_COMMAND = "lvsearch rank-check --supernet SUPERNET --out FOLDER (writes FOLDER/rank_check.json)"


def standalone_digest(rows: list[dict]) -> str:
    """sha256 over the standalone side of a rank check (key, accuracy, loss per row, in order):
    recorded in ``rank_check.json`` so that ``--reuse`` notices a hand-edited result."""
    import hashlib
    import json

    side = [[r["key"], r["standalone_accuracy"], r.get("standalone_loss")] for r in rows]
    return hashlib.sha256(json.dumps(side, sort_keys=True).encode("utf-8")).hexdigest()


def write_reuse_file(path: str | Path, archs: list[dict], *, steps: int, what: str) -> Path:
    """Write standalone results in the ``rank_check.json`` format ``rank-check --reuse`` reads
    (atomically), with their ``standalone_sha256`` digest.

    ``archs``: rows ``{"key", "standalone_accuracy", "standalone_loss", "params"}`` in rank-check
    order; ``steps``: the standalone runs' training steps (one count: runs trained for different
    steps are not comparable); ``what``: where the results come from. Returns ``path``. Raises
    LvsearchError where ``check_reuse`` would refuse the file (fewer than 3 rows, a repeated key),
    so a bad pool fails here rather than at the rank check."""
    from lvsearch.io import atomic_write_json

    if len(archs) < 3 or len({r["key"] for r in archs}) != len(archs):
        raise LvsearchError(f"{path}: a rank check needs at least 3 distinct architectures, got {len(archs)} rows "
                            f"with {len({r['key'] for r in archs})} distinct", fix="pool more standalone runs")
    atomic_write_json(path, {"what": what, "steps": int(steps), "pool": len(archs), "archs": archs,
                             "standalone_sha256": standalone_digest(archs)})
    return Path(path)


def check_reuse(d, source, space) -> dict:
    """Validate a ``rank_check.json`` given to ``--reuse`` against the supernet's ``space``.

    Returns ``{"archs": rows, "steps": int, "pool": int}``.

    Raises:
        LvsearchError: not an object; ``archs`` not a list of ≥ 3 rows with a string ``key``
            and a finite ``standalone_accuracy`` in [0, 1] (``standalone_loss`` finite or
            null); repeated architectures; ``steps`` not an integer ≥ 1; ``pool`` not an
            integer ≥ the rows (null: the rows) or more than the space holds
            (``space.size()``); a recorded ``space`` other than the supernet's; no
            ``standalone_sha256``, or one that the rows no longer match (an edited file). Every
            message names ``source`` and the field.
    """
    import math

    def bad(what: str) -> LvsearchError:
        return LvsearchError(f"{source}: {what}", fix="pass a rank_check.json as 'lvsearch rank-check' wrote it "
                                                       "(or benchmarks/landscape.py's landscape_rank_check.json)")

    def finite(v) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)

    if not isinstance(d, dict):
        raise bad("not a JSON object")
    rows = d.get("archs")
    if not isinstance(rows, list) or len(rows) < 3:
        raise bad("'archs' must be a list of at least 3 architectures")
    for i, r in enumerate(rows):
        if not isinstance(r, dict) or not isinstance(r.get("key"), str):
            raise bad(f"archs[{i}] is not an object with a 'key' string")
        acc = r.get("standalone_accuracy")
        if not finite(acc) or not 0.0 <= acc <= 1.0:
            raise bad(f"archs[{i}] ({r['key']!r}): standalone_accuracy {acc!r} is not a number in [0, 1]")
        if r.get("standalone_loss") is not None and not finite(r["standalone_loss"]):
            raise bad(f"archs[{i}] ({r['key']!r}): standalone_loss {r['standalone_loss']!r} is not a finite number")
    keys = [r["key"] for r in rows]
    if len(set(keys)) != len(keys):
        dup = next(k for k in keys if keys.count(k) > 1)
        raise bad(f"architecture {dup!r} appears {keys.count(dup)} times (each must be one distinct architecture)")
    steps, pool = d.get("steps"), d.get("pool", len(rows))
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
        raise bad(f"'steps' must be an integer ≥ 1, got {steps!r}")
    pool = len(rows) if pool is None else pool
    if not isinstance(pool, int) or isinstance(pool, bool) or pool < len(rows):
        raise bad(f"'pool' must be an integer ≥ the {len(rows)} architectures, got {pool!r}")
    if pool > space.size():
        raise bad(f"'pool' {pool:,} is more architectures than the search space {space.name!r} holds "
                  f"({space.size():,}); no rank check scored that many")
    recorded = d.get("space")
    if recorded is not None and recorded != space.to_dict():
        name = recorded.get("name") if isinstance(recorded, dict) else recorded
        raise LvsearchError(f"{source} was made on another search space ({name!r}) than this supernet's "
                            f"({space.name!r})", fix="pass a supernet of that space, or a rank check made on this one")
    digest = d.get("standalone_sha256")
    if not isinstance(digest, str):
        raise LvsearchError(f"{source}: 'standalone_sha256' is {'missing' if digest is None else 'not a string'}, so "
                            "its standalone results cannot be told from hand-edited ones (every rank_check.json "
                            "lvsearch writes records it)",
                            fix=f"restore the file from a copy, or write it again: {RANK_CHECK_COMMAND}")
    if digest != standalone_digest(rows):
        raise LvsearchError(f"{source}: the standalone results do not match their recorded sha256 (the file was "
                            "edited after it was written)", fix="restore the file, or re-run the rank check")
    return {"archs": rows, "steps": steps, "pool": pool}


def standalone_train_config(train_config, steps: int):
    """The supernet run's training settings shortened to a standalone run of ``steps`` steps
    (warm-up at most a tenth, no evaluations or checkpoints during the run)."""
    t = train_config
    return replace(t, steps=steps, warmup_steps=min(t.warmup_steps, max(0, steps // 10)), eval_every=0,
                   checkpoint_every=0, keep_checkpoints=1, log_every=max(1, steps // 5))


class FixedArchSummary(RunSummary):
    """The ``summary.json`` of a fixed-architecture run (a rank check's standalone run, a second
    stage's fine-tune): the training summary (``final_eval``: ``loss``, ``accuracy``) plus the
    ``arch`` key and the ``supernet_step`` it started from, which decide whether it is reused."""

    arch: Optional[str] = None
    supernet_step: Optional[Count] = None


def read_fixed_arch_summary(path: Path, *, what: str, rerun: str) -> dict:
    """The :class:`FixedArchSummary` at ``path``, checked.

    Raises:
        LvsearchError: not JSON, or a field of the wrong type (named; the fix: delete the
            file and ``rerun``, which trains that run again)."""
    from lvsearch.io import read_checked

    fix = summary_fix(path, rerun)
    return read_checked(path, FixedArchSummary, what=what, fix=fix, regenerate=f"delete it and {rerun}")


def finished_standalone(run: Path, arch_key: str, steps: int, supernet_step: int) -> dict | None:
    """The ``summary.json`` of a finished standalone run of ``arch_key`` (``steps`` steps, from
    the supernet checkpoint of ``supernet_step``) in ``run``, else None.

    Raises:
        LvsearchError: the summary is not JSON or has a field of the wrong type."""
    done = Path(run) / "summary.json"
    if done.is_file():
        rec = read_fixed_arch_summary(done, what="standalone summary", rerun="run the same rank-check command again "
                                      "(only that standalone run is trained again)")
        if rec.get("arch") == arch_key and rec.get("steps") == steps \
                and rec.get("supernet_step") == supernet_step:
            return rec
    return None


def train_standalone(run: str, arch_key: str, steps: int, label: str, supernet: str, step: int | None,
                     data: str | None, dev_sequences: int | None, device: str = "auto", show_progress: bool = False,
                     loaded=None, dev=None, prepared=None, info=None) -> dict:
    """One standalone run of a rank check: ``arch_key`` trained from scratch for ``steps``
    steps with the supernet run's recipe into ``run`` (replaced), its summary written to
    ``run/summary.json`` and returned. ``loaded``/``dev``/``prepared``/``info``: the caller's
    supernet, dev set, data and device (in-process); None: loaded here from ``supernet`` at
    ``step`` (a dispatched job). A second call (a requeued job) trains the run again from
    scratch: standalone runs keep no checkpoints, and the same run gives the same bytes.

    Raises:
        LvsearchError: the errors of ``load_supernet`` / ``load_dev``.
    """
    from lvsearch.io import atomic_write_json
    from lvsearch.train.loop import train

    if loaded is None:
        from lvsearch.train.distributed import init_distributed
        from lvsearch.train.supernet import load_dev, load_supernet

        info = init_distributed(device)
        loaded = load_supernet(supernet, device=info.device, step=step)
        dev, prepared = load_dev(loaded, data, dev_sequences)
    run_path = Path(run)
    arch = Arch.from_key(arch_key)
    cfg = loaded.config
    tcfg = standalone_train_config(cfg.train, steps)
    if run_path.exists():
        shutil.rmtree(run_path)
    run_path.mkdir(parents=True)
    obj = FixedArchObjective(arch, loaded.dims, prepared, replace(cfg, train=tcfg), dev, info)
    summary = train(obj, tcfg, run_path, info, tokens_per_step=tcfg.batch_size * tcfg.seq_len, resume=False,
                    checkpoint_extra={"arch": arch.key}, label=label, show_progress=show_progress)
    summary = {**summary, "arch": arch.key, "steps": steps, "supernet_step": loaded.step}
    atomic_write_json(run_path / "summary.json", summary)
    return summary


def rank_check_out(supernet: str | Path, out: str | Path | None) -> Path:
    """The rank check's output folder: ``out``, or ``SUPERNET/rank_check`` when None."""
    return Path(out) if out is not None else Path(supernet) / "rank_check"


@holds_output(lambda a: rank_check_out(a["supernet"], a["out"]))
def rank_check(supernet: str | Path, *, num_archs: int = 8, steps: int = 200, pool: int | None = None,
               out: str | Path | None = None, data: str | Path | None = None, dev_sequences: int | None = None,
               seed: int = 0, overwrite: bool = False, device: str = "auto", show_progress: bool = False,
               reuse: str | Path | None = None, step: int | None = None, fitness: str = DEFAULT.metric,
               dispatch=None) -> dict:
    """Run the rank check; returns (and writes) the report dict.

    Returns keys: ``kendall_tau, kendall_p, spearman_rho, spearman_p`` (accuracies),
    ``kendall_tau_loss, kendall_p_loss`` (dev MLM losses), ``topk, topk_overlap,
    archs`` (per arch: key, supernet fitness/loss, standalone accuracy/loss, params),
    ``num_archs, steps, pool, supernet_step, seconds, out``.

    ``fitness``: the supernet score ranked against the standalone accuracy in the headline τ
    (``accuracy`` or ``loss``, see :class:`~lvsearch.search.evaluator.SupernetEvaluator`); both
    are always reported under ``by_fitness`` (τ with interval, ρ, top-5 precision).

    ``reuse``: the ``rank_check.json`` of an earlier check; its architectures and their
    standalone accuracies are taken as they are and only the supernet side is scored (on this
    ``supernet``, at ``step``, on ``dev_sequences``), so supernet variants (more steps, another
    sampling rule, more dev targets) are compared on the same architectures without retraining
    them. ``num_archs``, ``steps``, ``pool`` then come from that file.

    ``dispatch``: where the standalone runs train (:class:`lvsearch.dispatch.DispatchOptions`;
    None: in this process, one after another); submitit's files go to ``out/dispatch``.

    Raises:
        LvsearchError: N < 3 (no meaningful correlation), steps < 1, an ``out`` folder that
            already holds a rank check (without ``overwrite``), a ``reuse`` file that is not a
            rank check or names architectures outside this supernet's space, and the errors of
            :func:`lvsearch.train.supernet.load_dev` / ``load_supernet``;
            :class:`~lvsearch.dispatch.DispatchError` when dispatched standalone runs failed
            (each named with its log; re-running trains only the unfinished ones).
    """
    import time

    from lvsearch.io import atomic_write_json, guard_output
    from lvsearch.search.evaluator import SupernetEvaluator
    from lvsearch.train.distributed import init_distributed
    from lvsearch.train.supernet import load_dev, load_supernet

    if num_archs < 3:
        raise LvsearchError(f"--archs must be ≥ 3 for a rank correlation, got {num_archs}")
    if steps < 1:
        raise LvsearchError(f"--steps must be ≥ 1, got {steps}")
    out = rank_check_out(supernet, out)
    guard_output(out, overwrite=overwrite, inputs=[("--supernet", supernet), ("--data", data), ("--reuse", reuse)])
    if out.is_dir() and any(out.iterdir()) and not any((out / n).exists() for n in ("rank_check.json", "standalone", "dispatch")):
        raise LvsearchError(f"--out {out} is not empty and holds no rank check", fix="choose a new or empty folder")
    t0 = time.perf_counter()
    info = init_distributed(device)
    if info.enabled:
        raise LvsearchError("rank-check runs on one process", fix="run it without torchrun")
    loaded = load_supernet(supernet, device=info.device, step=step)
    reused = None
    if reuse is not None:
        from lvsearch.io import read_json

        reused = check_reuse(read_json(reuse, what="rank check", regenerate=RANK_CHECK_COMMAND), reuse, loaded.space)
        num_archs, steps, pool = len(reused["archs"]), reused["steps"], reused["pool"]
    if (out / "rank_check.json").exists() and not overwrite:
        raise LvsearchError(f"{out} already holds a rank check", fix="pass --overwrite or another --out")
    if out.is_dir() and overwrite:
        shutil.rmtree(out / "standalone", ignore_errors=True)
    dev, prepared = load_dev(loaded, data, dev_sequences)
    m = pool if pool is not None else max(50, 5 * num_archs)
    if m < num_archs:
        raise LvsearchError(f"--pool {m} is smaller than --archs {num_archs}")
    evaluator = SupernetEvaluator(loaded.supernet, dev, seq_len=loaded.config.train.seq_len, device=info.device,
                                  fitness=fitness)
    archs, picked = _pick(loaded, evaluator, reused, reuse, m, num_archs, seed)
    if reused is not None:
        rows = _reused_rows(picked, reused)
    else:
        _train_picked(picked, archs, out, supernet, loaded, steps, data=data, dev_sequences=dev_sequences,
                      device=device, show_progress=show_progress, dispatch=dispatch,
                      inline_state={"loaded": loaded, "dev": dev, "prepared": prepared, "info": info})
        rows = _standalone_rows(picked, out, steps, loaded.step)
    report = {
        "fitness": fitness, **_rank_statistics(rows, [archs[row["key"]] for row in rows], seed),
        "archs": rows, "num_archs": len(rows), "steps": steps,
        "pool": m if reused is not None else len(archs), "supernet": str(Path(supernet).resolve()), "supernet_step": loaded.step,
        "standalone_from": str(Path(reuse).resolve()) if reuse is not None else None,
        "dev_sequences": int(dev.input_ids.shape[0]), "seconds": time.perf_counter() - t0, "out": str(out),
        "space": loaded.space.to_dict(), "standalone_sha256": standalone_digest(rows),
    }
    atomic_write_json(out / "rank_check.json", report)
    _scatter([row["supernet_fitness"] for row in rows], [row["standalone_accuracy"] for row in rows], report,
             out / "rank_check.png")
    return report


def _pick(loaded, evaluator, reused: dict | None, reuse, m: int, num_archs: int, seed: int) -> tuple[dict[str, Arch], list]:
    """The architectures of the check and their supernet results (``EvalResult``), in order:
    ``reused``'s (validated against the supernet's space), or ``num_archs`` picked at evenly
    spaced fitness quantiles (:func:`quantile_pick`) of a pool of ``m`` sampled with ``seed``.
    Returns ``({key: Arch} of every scored architecture, picked results)``."""
    archs: dict[str, Arch] = {}
    if reused is not None:
        for row in reused["archs"]:
            a = Arch.from_key(row["key"])
            loaded.space.validate(a, source=str(reuse))
            archs[a.key] = a
        by_key = {r.key: r for r in evaluator.evaluate_many(list(archs.values()))}
        return archs, [by_key[row["key"]] for row in reused["archs"]]
    rng = random.Random(seed)
    for _ in range(100 * m):
        a = loaded.space.sample(rng)
        archs.setdefault(a.key, a)
        if len(archs) >= m:
            break
    return archs, quantile_pick(evaluator.evaluate_many(list(archs.values())), num_archs)


def _train_picked(picked: list, archs: dict[str, Arch], out: Path, supernet, loaded, steps: int, *, data,
                  dev_sequences: int | None, device: str, show_progress: bool, dispatch, inline_state: dict) -> None:
    """Train every picked architecture without a finished standalone run under
    ``out/standalone/NN``, each an independent job (:func:`train_standalone`) run where
    ``dispatch`` says; inline jobs share ``inline_state`` (this process's supernet, data, dev set)."""
    from lvsearch.dispatch import DispatchOptions, Job, run_jobs

    dispatch = dispatch if dispatch is not None else DispatchOptions()
    shared = inline_state if dispatch.inline else {}
    jobs = []
    for i, r in enumerate(picked):
        run = out / "standalone" / f"{i:02d}"
        if finished_standalone(run, r.key, steps, loaded.step) is None:
            jobs.append(Job(f"{i:02d}-{archs[r.key].compact}", train_standalone, {
                "run": str(run), "arch_key": r.key, "steps": steps, "label": f"standalone {i + 1}/{len(picked)}",
                "supernet": str(supernet), "step": loaded.step, "data": None if data is None else str(data),
                "dev_sequences": dev_sequences, "device": device, "show_progress": show_progress and dispatch.inline,
                **shared}))
    run_jobs(jobs, dispatch, out / "dispatch", ui_label="standalone run")


def _row(r, standalone_accuracy, standalone_loss) -> dict:
    return {"key": r.key, "supernet_fitness": r.fitness, "supernet_accuracy": r.accuracy, "supernet_loss": r.loss,
            "params": r.params, "standalone_accuracy": standalone_accuracy, "standalone_loss": standalone_loss}


def _reused_rows(picked: list, reused: dict) -> list[dict]:
    """One row per picked result with the standalone side taken from ``reused``."""
    return [_row(r, old["standalone_accuracy"], old["standalone_loss"]) for r, old in zip(picked, reused["archs"])]


def _standalone_rows(picked: list, out: Path, steps: int, supernet_step: int) -> list[dict]:
    """One row per picked result with the final dev evaluation of its standalone run."""
    rows = []
    for i, r in enumerate(picked):
        summary = finished_standalone(out / "standalone" / f"{i:02d}", r.key, steps, supernet_step)
        final = (summary or {}).get("final_eval") or {}
        rows.append(_row(r, final.get("accuracy"), final.get("loss")))
    return rows


def _rank_statistics(rows: list[dict], picked_archs: list[Arch], seed: int) -> dict:
    """The report's statistics of ``rows`` (supernet fitness against standalone accuracy):
    τ and ρ with p-values and bootstrap intervals, τ of the losses, the top-k overlap and its
    chance level, τ within strata, and :func:`rank_quality` for every fitness metric. Adds
    each row's ``dc_count``, ``density`` and strata labels."""
    import math
    import warnings

    from scipy.stats import kendalltau, spearmanr

    def num(x) -> float | None:  # undefined (constant input, e.g. after too few steps) -> None
        return None if x is None or math.isnan(float(x)) else float(x)

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
    tau_ci = bootstrap_interval(xs, ys, "kendall", seed=seed)
    rho_ci = bootstrap_interval(xs, ys, "spearman", seed=seed)
    labels = strata(picked_archs)
    for row, a, dcl, dl in zip(rows, picked_archs, labels["dc_count"], labels["density"]):
        row.update(dc_count=a.ops.count("DC"), density=density(a), stratum_dc=dcl, stratum_density=dl)
    by_fitness = {}
    for name in METRICS:
        by_fitness[name] = rank_quality([Fitness(name).of_row(r, accuracy="supernet_accuracy", loss="supernet_loss")
                                         for r in rows], ys, seed=seed)
    return {
        "by_fitness": by_fitness,
        "kendall_tau": num(tau.statistic), "kendall_p": num(tau.pvalue), "kendall_tau_ci95": list(tau_ci),
        "spearman_rho": num(rho.statistic), "spearman_p": num(rho.pvalue), "spearman_rho_ci95": list(rho_ci),
        "ci_method": "percentile bootstrap over architectures (paired), 2000 resamples, seeded",
        "topk_chance": topk_chance(len(rows), k, len(top_sn & top_sa)),
        "strata": {"dc_count": stratified_tau(xs, ys, labels["dc_count"]),
                   "density": stratified_tau(xs, ys, labels["density"])},
        "kendall_tau_loss": num(tau_loss.statistic), "kendall_p_loss": num(tau_loss.pvalue),
        "topk": k, "topk_overlap": len(top_sn & top_sa),
    }


def _scatter(xs, ys, report: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from lvsearch.io import save_figure

    fig, ax = plt.subplots(figsize=(5, 4), dpi=120)
    ax.scatter(xs, ys)
    ax.set_xlabel(f"supernet fitness: {Fitness.of_record(report).axis_label}, inherited weights")
    ax.set_ylabel(f"standalone dev MLM accuracy ({report['steps']} steps)")
    fmt = lambda v: "undefined" if v is None else f"{v:.2f}"  # noqa: E731
    ax.set_title(f"Kendall τ {fmt(report['kendall_tau'])}, Spearman ρ {fmt(report['spearman_rho'])}")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    save_figure(fig, path)
