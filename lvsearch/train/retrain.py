"""``lvsearch retrain``: train one architecture from scratch with ELECTRA (RTD) or MLM.

The searched slot sequence (or a named baseline: ``bert``, ``sandwich``, ``lvbert-paper``,
``random:SEED``) becomes a standalone :class:`~lvsearch.model.Encoder` at a size from LV-BERT's
Table 5 (small / medium / base; explicit ``model`` dims in the recipe override it) and is
trained with the same loop as the supernet.

ELECTRA (Clark et al. 2020, §2, eq. 1): a generator — the same slot sequence at a fraction of
the width (1/4 small, 1/3 medium/base) — is trained with MLM on the 15% masked positions; its
samples (temperature 1) replace the masked tokens; the discriminator (the architecture being
retrained) predicts for every token whether it was replaced. Loss = generator MLM (mean over
masked tokens) + λ · discriminator binary cross-entropy (mean over tokens), λ = 50. Generator
and discriminator share the token and position embeddings (one parameter each; ELECTRA §3.2).
A sampled token equal to the original counts as "original". After pretraining the
discriminator is the model kept; the generator is saved beside it (its MLM head is what
zero-shot MLM scoring, e.g. BLiMP, can use).

MLM (``objective: mlm``): plain MLM on the same architecture, for LV-BERT's MLM-accuracy
comparison.

Dev metrics (curves and the final evaluation) use the fixed dev set with the standard BERT
masking (:data:`lvsearch.data.loader.DEV_MASKING`), not the recipe's ``masking``, so runs
trained with different masking are compared on the same targets.

Output run folder: ``config.json``, ``tokenizer.json``, ``metrics.jsonl``, ``curve.jsonl``
(dev metrics against tokens seen; ``loss`` is the dev MLM loss — the generator's for ELECTRA —
for scaling-law fits), ``checkpoints/``, ``summary.json`` and ``model/`` (the model directory of
:mod:`lvsearch.modeldir`). ``summary.json`` also holds the reference floors of the run
(:mod:`lvsearch.eval.floors`: unigram and neighbour-count fitted on exactly the training
sequences the run read, scored on the same dev set; ``floors``) and ``beats_floor`` (the dev
MLM accuracy — the generator's for ELECTRA — is above the neighbour-count floor).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from lvsearch import __version__, tracking
from lvsearch.arch import Arch, check_arch_spec, resolve_arch
from lvsearch.config import MODEL_SIZES, Overrides, RetrainConfig, override_map, to_jsonable
from lvsearch.data.loader import fixed_dev_set
from lvsearch.data.masking import IGNORE_INDEX
from lvsearch.data.shards import TOKENIZER, PreparedData
from lvsearch.errors import LvsearchError
from lvsearch.io import atomic_write_json, check_fields, read_checked, read_json
from lvsearch.lock import holds_output
from lvsearch.model import Encoder, ModelDims
from lvsearch.space import SearchSpace
from lvsearch.train.distributed import DistInfo, barrier, init_distributed, shutdown
from lvsearch.train.loop import train
from lvsearch.train.objectives import MaskedBatches, evaluate_mlm, mlm_log_metrics, mlm_sums
from lvsearch.schema import FileModel
from lvsearch.train.run import (CONFIG, begin_run, finished_summary, normalise, read_config_file, report_finished,
                                select_config)

RUN_FORMAT = "lvsearch.retrain-run/v1"
MODEL_DIR = "model"


# ---------------------------------------------------------------------------------------
# Model construction
# ---------------------------------------------------------------------------------------


def generator_dims(dims: ModelDims, fraction: float) -> ModelDims:
    """ELECTRA generator dims: hidden, FF inner size and heads scaled by ``fraction`` (head
    width kept), embeddings unchanged (they are shared with the discriminator).

    Raises:
        LvsearchError: the scaled width is not a positive multiple of the head width.
    """
    head_dim = dims.hidden // dims.heads
    heads = max(1, round(dims.heads * fraction))
    hidden = heads * head_dim
    ff = max(1, round(dims.ff_inner * fraction))
    return ModelDims.from_dict({**dims.to_dict(), "hidden": hidden, "heads": heads, "ff_inner": ff}, source="generator")


class EncoderMLM(nn.Module):
    """One architecture under MLM; ``forward`` returns :func:`mlm_sums`."""

    def __init__(self, encoder: Encoder):
        super().__init__()
        self.encoder = encoder

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor) -> dict[str, torch.Tensor]:
        return mlm_sums(self.encoder, self.encoder(input_ids), labels)


class Electra(nn.Module):
    """ELECTRA generator + discriminator with shared token and position embeddings.

    Args:
        discriminator: the architecture being retrained.
        generator: the same slot sequence at generator width.
        disc_weight: λ of the RTD loss.
    """

    def __init__(self, discriminator: Encoder, generator: Encoder, disc_weight: float):
        super().__init__()
        self.discriminator, self.generator, self.disc_weight = discriminator, generator, disc_weight
        generator.embeddings.word = discriminator.embeddings.word
        if discriminator.embeddings.position is not None:  # absent with relative positions
            generator.embeddings.position = discriminator.embeddings.position
        h = discriminator.dims.hidden
        self.rtd_head = nn.Sequential(nn.Linear(h, h), nn.GELU(), nn.Linear(h, 1))
        for m in self.rtd_head:
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, std=0.02)
                nn.init.zeros_(m.bias)

    def forward(
        self,
        input_ids: torch.Tensor,
        labels: torch.Tensor,
        original_ids: torch.Tensor,
        gen_norm: float = 1.0,
        disc_norm: float = 1.0,
    ) -> dict[str, torch.Tensor]:
        """One ELECTRA step on a masked batch.

        Args:
            input_ids: ``(B, L)`` masked ids (generator input).
            labels: ``(B, L)`` original ids at masked positions, −100 elsewhere.
            original_ids: ``(B, L)`` uncorrupted ids.
            gen_norm, disc_norm: global counts of masked tokens and of tokens in the step, so
                ``loss_sum`` is already the step's mean loss share (the loop's normaliser is 1).

        Returns:
            ``loss_sum`` = gen CE / gen_norm + λ · disc BCE / disc_norm (differentiable) and
            detached sums: ``gen_ce``, ``gen_count``, ``gen_correct``, ``disc_bce``,
            ``disc_count``, ``disc_correct``, ``replaced``.
        """
        targets = labels != IGNORE_INDEX
        gen_logits = self.generator.mlm_logits(self.generator(input_ids)[targets]).float()
        gold = labels[targets]
        gen_ce = F.cross_entropy(gen_logits, gold, reduction="sum")
        with torch.no_grad():
            sampled = torch.multinomial(torch.softmax(gen_logits, dim=-1), 1).squeeze(1)
            disc_input = input_ids.clone()
            disc_input[targets] = sampled
            replaced = (disc_input != original_ids).float()
            real = original_ids != self.discriminator.dims.pad_id
        disc_logits = self.rtd_head(self.discriminator(disc_input)).squeeze(-1).float()
        disc_bce = F.binary_cross_entropy_with_logits(disc_logits[real], replaced[real], reduction="sum")
        loss_sum = gen_ce / gen_norm + self.disc_weight * disc_bce / disc_norm
        with torch.no_grad():
            disc_correct = ((disc_logits[real] > 0).float() == replaced[real]).sum()
        return {
            "loss_sum": loss_sum,
            "gen_ce": gen_ce.detach(),
            "gen_count": targets.sum().detach().float(),
            "gen_correct": (gen_logits.argmax(-1) == gold).sum().detach().float(),
            "disc_bce": disc_bce.detach(),
            "disc_count": real.sum().float(),
            "disc_correct": disc_correct.float(),
            "replaced": replaced[real].sum(),
            "_disc_logits": disc_logits.detach(),
            "_replaced": replaced,
            "_real": real,
        }


def rtd_auc(scores: np.ndarray, replaced: np.ndarray) -> float:
    """ROC AUC of RTD scores, via the Mann–Whitney U statistic (scipy): P(score_replaced >
    score_original), ties counted 1/2. NaN when one class is absent."""
    from scipy.stats import mannwhitneyu

    pos, neg = scores[replaced > 0.5], scores[replaced <= 0.5]
    if len(pos) == 0 or len(neg) == 0:
        return float("nan")
    return float(mannwhitneyu(pos, neg).statistic / (len(pos) * len(neg)))


# ---------------------------------------------------------------------------------------
# Objective
# ---------------------------------------------------------------------------------------


class RetrainObjective:
    """Micro-batches, metrics and dev evaluation of ``retrain`` (MLM or ELECTRA)."""

    def __init__(self, module: nn.Module, data: PreparedData, config: RetrainConfig, info: DistInfo):
        self.module, self.config, self.info = module, config, info
        self.electra = isinstance(module, Electra)
        self.batches = MaskedBatches(data, config.train, config.masking, info)
        # Standard BERT masking (DEV_MASKING), not config.masking: dev accuracies of runs with
        # different training masking stay comparable.
        self.dev = fixed_dev_set(
            data, num_sequences=config.eval.dev_sequences, seq_len=config.train.seq_len, seed=config.eval.seed,
        )


    def micro_batches(self, step: int) -> tuple[list[dict], float]:
        micro, labels = self.batches(step)
        if not self.electra:
            for m in micro:
                del m["original_ids"]
            return micro, float((labels != IGNORE_INDEX).sum())
        gen_norm = float((labels != IGNORE_INDEX).sum())
        disc_norm = float(labels.numel())  # packed pretraining data has no padding
        for m in micro:
            m["gen_norm"], m["disc_norm"] = gen_norm, disc_norm
        return micro, 1.0

    def step_info(self, step: int) -> dict:
        return {}

    def log_metrics(self, sums: dict[str, float], norm: float) -> dict:
        if not self.electra:
            return mlm_log_metrics(sums)
        return {
            "loss": sums["loss_sum"] / self.info.world_size,
            "gen_loss": sums["gen_ce"] / max(sums["gen_count"], 1.0),
            "gen_accuracy": sums["gen_correct"] / max(sums["gen_count"], 1.0),
            "disc_loss": sums["disc_bce"] / max(sums["disc_count"], 1.0),
            "disc_accuracy": sums["disc_correct"] / max(sums["disc_count"], 1.0),
            "replaced_fraction": sums["replaced"] / max(sums["disc_count"], 1.0),
        }

    def evaluate(self, module: nn.Module, step: int) -> dict:
        dev, bs, device = self.dev, self.config.eval.batch_size, self.info.device
        if not self.electra:
            enc = module.encoder
            r = evaluate_mlm(enc, enc, dev, bs, device)
            return {"dev_mlm": r, "curve": {"loss": r["loss"], "dev_mlm_loss": r["loss"], "dev_mlm_accuracy": r["accuracy"]}}
        gen = module.generator
        g = evaluate_mlm(gen, gen, dev, bs, device)
        # RTD on the dev set with generator samples drawn from a fixed seed.
        rng_state = torch.get_rng_state()
        torch.manual_seed(self.config.eval.seed)
        scores, repl, correct, count, bce = [], [], 0.0, 0.0, 0.0
        for i in range(0, len(dev), bs):
            out = module(
                dev.input_ids[i : i + bs].to(device), dev.labels[i : i + bs].to(device),
                dev.original_ids[i : i + bs].to(device),
            )
            real = out["_real"]
            scores.append(out["_disc_logits"][real].cpu().numpy())
            repl.append(out["_replaced"][real].cpu().numpy())
            correct += float(out["disc_correct"])
            count += float(out["disc_count"])
            bce += float(out["disc_bce"])
        torch.set_rng_state(rng_state)
        s, r = np.concatenate(scores), np.concatenate(repl)
        rtd = {
            "loss": bce / max(count, 1.0),
            "accuracy": correct / max(count, 1.0),
            "all_original_accuracy": float(1.0 - r.mean()),
            "auc": rtd_auc(s, r),
        }
        return {
            "generator_mlm": g,
            "rtd": rtd,
            "curve": {
                "loss": g["loss"], "gen_mlm_loss": g["loss"], "gen_mlm_accuracy": g["accuracy"],
                "rtd_accuracy": rtd["accuracy"], "rtd_auc": rtd["auc"], "rtd_loss": rtd["loss"],
            },
        }


# ---------------------------------------------------------------------------------------
# The job
# ---------------------------------------------------------------------------------------


def check_arch_file_provenance(arch_spec: str, data: PreparedData) -> None:
    """When ``arch_spec`` is an architecture JSON file, its ``meta`` (the tokenizer it was
    searched with) must match ``data``: :func:`check_provenance`. Other specs (names,
    ``random:N``, compact strings) pass.

    Raises:
        LvsearchError: the file records another tokenizer, or is not valid JSON.
    """
    path = Path(arch_spec)
    if not (path.is_file() and path.suffix == ".json"):
        return
    Arch.from_json(path)  # a file that is no architecture (a list, a wrong field) is one message first
    check_provenance(read_arch_record(path).get("meta") or {}, path, data)


class ArchFileMeta(FileModel):
    """The provenance an architecture file's ``meta`` may record (``evolve``'s pick, a finalist):
    the tokenizer it was searched with, or the supernet run it was searched on."""

    tokenizer_sha256: Optional[str] = None
    supernet: Optional[str] = None


class ArchFileRecord(FileModel):
    """The fields of an architecture file retrain reads besides the architecture itself
    (checked by :meth:`lvsearch.arch.Arch.from_dict`): the ``space`` it was searched in and
    its ``meta``."""

    space: Optional[str] = None
    meta: Optional[ArchFileMeta] = None


def read_arch_record(path: str | Path) -> dict:
    """The architecture file ``path`` checked against :class:`ArchFileRecord`.

    Raises:
        LvsearchError: missing, not JSON, or ``space``/``meta`` of the wrong type (named)."""
    return read_checked(path, ArchFileRecord, what="architecture file", fix=ARCH_FILE_FIX)


#: The fix for an architecture file whose ``space`` or ``meta`` is malformed.
ARCH_FILE_FIX = "restore the file from a copy (or write it again with the command that wrote it), or drop the field"


def check_provenance(meta: dict, source: str | Path, data: PreparedData) -> None:
    """Architecture ``meta`` that records a tokenizer (``tokenizer_sha256``, or the
    ``supernet`` run it was searched on) must match ``data``'s.

    Raises:
        LvsearchError: the tokenizers differ (the message names ``source``), or the supernet
            run's ``config.json`` is malformed (:func:`lvsearch.train.run.read_config_file`).
    """
    sha = meta.get("tokenizer_sha256")
    if sha is None and meta.get("supernet"):
        sn_config = Path(meta["supernet"]) / CONFIG
        if sn_config.is_file():
            sha = read_config_file(sn_config.parent, "supernet", what="supernet run config")["data"]["tokenizer_sha256"]
    if sha is not None and sha != data.tokenizer_sha256:
        raise LvsearchError(
            f"architecture {source} was searched on data with another tokenizer than {data.folder} "
            f"(sha256 {sha[:12]}… vs {data.tokenizer_sha256[:12]}…)",
            fix="retrain on the data the search used, or prepare this data with that tokenizer (data prepare --tokenizer)",
        )


def build_module(config: RetrainConfig, arch: Arch, dims: ModelDims) -> nn.Module:
    """The module the loop trains: :class:`EncoderMLM` or :class:`Electra`."""
    torch.manual_seed(config.train.seed)
    disc = Encoder(arch, dims)
    if config.objective == "mlm":
        return EncoderMLM(disc)
    fraction = config.generator_size or MODEL_SIZES[config.size]["generator"]
    return Electra(disc, Encoder(arch, generator_dims(dims, fraction)), config.disc_weight)


def _check_arch_spec(arch_spec: str | None) -> None:
    """Check what a new run's ``--arch`` can be checked for without a space or a data folder: it
    is given, and :func:`check_arch_spec` accepts it. The fit to the space is checked later
    (:func:`resolve_arch`).

    Raises:
        LvsearchError: ``--arch`` missing or empty; the file missing, not JSON or not an
            architecture; an unknown name or a ``random:`` seed that is not an integer."""
    if arch_spec is None:
        raise LvsearchError("--arch is required for a new run", fix="e.g. --arch best.json or --arch bert")
    check_arch_spec(arch_spec)


def _resolve_run(arch_spec: str | None, recipe: str | None, out: Path, data: PreparedData, overrides: Overrides,
                 info: DistInfo, *, resume: bool, overwrite: bool, stop_at: int | None,
                 ) -> tuple[RetrainConfig, Arch | None, str | None, dict | None]:
    """The run's config and architecture, new or recorded (checked against ``--arch`` on resume).

    Returns ``(config, arch, arch_source, finished)``: ``finished`` is the recorded summary of a
    resumed run already at its target step (reported; ``arch``/``arch_source`` None then), else None.
    """
    from lvsearch.io import guard_output

    resolved: list[Arch] = []
    overrides = override_map(overrides)
    if not resume:
        overrides = space_from_arch_file(arch_spec, overrides, info)
    elif recipe or overrides:
        # the same command again (+ --resume) must resolve to the recorded config: the space
        # a new run took from its architecture file is the default here too
        overrides = _recorded_space(out, overrides)

    def check_new(config: RetrainConfig) -> None:
        if arch_spec is not None and Path(str(arch_spec)).is_file():
            guard_output(out, overwrite=overwrite, inputs=[("--arch", arch_spec)])
        check_arch_file_provenance(arch_spec, data)
        resolved.append(resolve_arch(arch_spec, recipe_space(config, None, arch_spec)))

    config, recorded = select_config(
        out, RetrainConfig, RUN_FORMAT, recipe, overrides, resume=resume, overwrite=overwrite, data=data,
        info=info, check_new=check_new,
    )
    if resume:
        arch = Arch.from_dict(recorded["arch"], source=out / "config.json")
        if arch_spec is not None and resolve_arch(arch_spec, recipe_space(config, arch.num_slots)) != arch:
            raise LvsearchError(f"--resume with another --arch than the run in {out}", fix="omit --arch on resume")
        finished = finished_summary(out, config.train.steps if stop_at is None else int(stop_at))
        if finished is not None:
            report_finished(out, finished, info)
            return config, None, None, finished
    else:
        arch = resolved[0]
    # what --arch named when the run started (a resume is given no --arch, or the same one)
    arch_source = str(recorded.get("arch_source")) if resume and recorded.get("arch_source") else str(arch_spec)
    return config, arch, arch_source, None


def _save_model(out: Path, module, arch: Arch, dims, config: RetrainConfig, data: PreparedData, objective,
                summary: dict, arch_source: str) -> None:
    """Rank 0, after training: write the model directory, complete ``summary`` (model folder,
    weights hash, parameters, floors), write ``summary.json`` and print the floor verdict."""
    from lvsearch import ui
    from lvsearch.io import sha256_file
    from lvsearch.modeldir import WEIGHTS, save_model_dir

    t = config.train
    disc = module.discriminator if isinstance(module, Electra) else module.encoder
    gen = module.generator if isinstance(module, Electra) else None
    save_model_dir(
        out / MODEL_DIR, disc, arch=arch, dims=dims, tokenizer_path=out / TOKENIZER,
        objective=config.objective, generator=gen,
        training_args=normalise(to_jsonable(config)),
        extra={"run": str(out), "steps": summary["steps"], "tokens": summary["tokens"], "arch_source": arch_source,
               "train_tokens": data.num_tokens("train")},
    )
    summary["model_dir"] = str(out / MODEL_DIR)
    summary["weights_sha256"] = sha256_file(out / MODEL_DIR / WEIGHTS)  # the run's fingerprint
    summary["params"] = disc.num_params()
    summary.update(run_floors(data, objective.dev, t, summary["steps"], summary.get("final_eval") or {}))
    atomic_write_json(out / "summary.json", summary)
    tracking.log(out, summary["steps"], {k: summary[k] for k in ("floors", "beats_floor") if k in summary})
    ui.console.print(f"model directory: {out / MODEL_DIR}")
    key = summary.get("floors_compared_with")
    if key:
        from lvsearch.eval.floors import floor_line

        label = "dev MLM accuracy" if key == "dev_mlm" else "generator dev MLM accuracy"
        ui.console.print(floor_line(label, summary["final_eval"][key]["accuracy"], summary["floors"]),
                         highlight=False)


@holds_output("out")
def retrain(
    arch_spec: str | None,
    recipe: str | None,
    data_dir: str | Path,
    out: str | Path,
    *,
    overrides: Overrides = (),  # type: ignore[assignment]
    resume: bool = False,
    overwrite: bool = False,
    device: str = "auto",
    show_progress: bool = True,
    stop_at: int | None = None,
) -> dict:
    """Retrain an architecture from scratch; returns the summary (also ``summary.json``).

    Args:
        arch_spec: architecture JSON path or reference name (None on resume: the recorded one).
        recipe: retrain recipe (None: defaults, or the recorded one on resume).
        stop_at: stop after this many steps with the learning-rate schedule of
            ``train.steps`` (see :func:`lvsearch.train.loop.train`); the model directory and
            ``summary.json`` describe the stopped model and ``--resume`` continues the run.
        resume: continue the run in ``out``; a run already finished at its target step
            (``stop_at`` or ``train.steps``) is left unchanged and its recorded summary returned
            (:func:`lvsearch.train.run.finished_summary`).

    Raises:
        LvsearchError: bad recipe/overrides/arch (unknown name, wrong slot count, invalid
            inputs, arch searched with another tokenizer), bad data folder, ``out`` holding a
            run (without ``resume``/``overwrite``), resume without a valid checkpoint or with
            other data.
    """
    out = Path(out).expanduser().resolve()
    if not resume:
        _check_arch_spec(arch_spec)  # before the data folder, so a user fixes the inputs in one pass
    info = init_distributed(device)
    try:
        data = PreparedData.open(data_dir)
        config, arch, arch_source, finished = _resolve_run(arch_spec, recipe, out, data, overrides, info,
                                                           resume=resume, overwrite=overwrite, stop_at=stop_at)
        if finished is not None:
            return finished
        dims = config.model_settings().dims(data.vocab_size, data.special_ids.pad, config.train.seq_len)
        module = build_module(config, arch, dims)
        objective = RetrainObjective(module, data, config, info)
        begin_run(out, {
            "format": RUN_FORMAT,
            "lvsearch_version": __version__,
            "config": normalise(to_jsonable(config)),
            "arch": arch.to_dict(),
            "arch_source": arch_source,
            "dims": dims.to_dict(),
            "generator_dims": module.generator.dims.to_dict() if isinstance(module, Electra) else None,
        }, data, info, resume=resume)
        if info.is_main:
            tracking.params(out, normalise(to_jsonable(config)))
        t = config.train
        summary = train(
            objective, t, out, info,
            tokens_per_step=t.batch_size * t.seq_len,
            resume=resume,
            checkpoint_extra={"tokenizer_sha256": data.tokenizer_sha256, "arch": arch.key},
            label=f"retrain {arch.compact} ({config.objective})",
            show_progress=show_progress,
            stop_at=stop_at,
        )
        if info.is_main:
            _save_model(out, module, arch, dims, config, data, objective, summary, arch_source)
        barrier(info)
        return summary
    finally:
        shutdown(info)


def run_floors(data: PreparedData, dev, train_cfg, steps: int, final_eval: dict) -> dict:
    """Summary entries of the reference floors of a run after ``steps`` steps (numpy only: no
    torch RNG is touched, so training and resume are unaffected).

    Args:
        data: the run's prepared data.
        dev: the dev set of the final evaluation (:attr:`RetrainObjective.dev`).
        train_cfg: the run's :class:`~lvsearch.config.TrainConfig` (batch_size, seq_len, seed).
        steps: optimizer steps the model took.
        final_eval: :meth:`RetrainObjective.evaluate`'s result (``dev_mlm`` or ``generator_mlm``);
            may be empty (nothing was evaluated in this process).

    Returns:
        ``{"floors": {name: {accuracy, predicted_tokens, train_tokens, tokens_seen[, backoff]}},
        "floors_compared_with": "dev_mlm" | "generator_mlm" | None, "beats_floor": bool | None}``
        (without the per-target strings), or ``{}`` when ``steps`` is 0.
    """
    from lvsearch.eval.floors import beats_floor, compact_floors, floors_for_train

    floors = floors_for_train(data, dev, train_cfg, steps)
    if floors is None:
        return {}
    key = next((k for k in ("dev_mlm", "generator_mlm") if k in final_eval), None)
    acc = final_eval[key]["accuracy"] if key else None
    return {"floors": compact_floors(floors), "floors_compared_with": key,
            "beats_floor": None if acc is None else beats_floor(acc, floors)}


def space_from_arch_file(arch_spec: str | None, overrides: Overrides, info=None) -> dict[str, Any]:
    """``overrides`` plus ``space=NAME`` when ``arch_spec`` is an architecture file that records
    the search space it was searched in (``best.json``/``topk`` files written by ``evolve``,
    ``finalists``) and no ``--set space=`` was given: the space follows the architecture (an
    ELC architecture from an ``lvbert-elc`` search retrains in ``lvbert-elc`` whatever the
    recipe's default). A recorded name that does not load (a custom space file moved away)
    is ignored, and the recipe's space applies. Returns the overrides as
    :func:`lvsearch.config.override_map` gives them.

    Raises:
        LvsearchError: the file's ``space`` or ``meta`` has the wrong type (:class:`ArchFileRecord`);
            a file that is not JSON or no object is left to the architecture's reader."""
    overrides = override_map(overrides)
    if arch_spec is None or not Path(arch_spec).is_file() or "space" in overrides:
        return overrides
    try:
        record = read_json(arch_spec, what="architecture file")
    except LvsearchError:
        return overrides  # reported by the architecture's own reader
    if not isinstance(record, dict):
        return overrides
    recorded = check_fields(record, ArchFileRecord, arch_spec, what="architecture file", fix=ARCH_FILE_FIX).get("space")
    if not recorded:
        return overrides
    try:
        SearchSpace.load(recorded)
    except LvsearchError:
        return overrides
    if info is None or info.is_main:
        from lvsearch import ui

        ui.console.print(f"search space {recorded} (recorded in {arch_spec}; --set space=NAME to change it)",
                         highlight=False)
    return {**overrides, "space": recorded}


def _recorded_space(out: Path, overrides: dict[str, Any]) -> dict[str, Any]:
    """``overrides`` plus ``space=`` the run in ``out`` recorded, unless one is given (a resume
    that repeats the original ``--config``/``--set`` without the space it took from
    ``best.json``). Unreadable run folders are left to the resume checks."""
    if "space" in overrides:
        return overrides
    try:
        space = read_json(out / "config.json", what="run config")["config"]["space"]
    except (LvsearchError, KeyError, TypeError):
        return overrides
    return {**overrides, "space": space} if isinstance(space, str) and space else overrides


def recipe_space(config: RetrainConfig, num_slots: int | None, arch_spec: str | None = None) -> SearchSpace:
    """The search space of a retrain recipe (``space``, sized to ``num_slots``: the recipe's,
    else the argument's, else that of the architecture JSON ``arch_spec``), against which
    architectures are resolved and validated.

    Raises:
        LvsearchError: an unknown space, or an unreadable architecture file.
    """
    n = config.num_slots or num_slots
    if n is None and arch_spec is not None and Path(arch_spec).is_file():
        n = Arch.from_json(arch_spec).num_slots
    return SearchSpace.resolve(config.space, n)
