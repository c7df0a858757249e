"""``lvsearch train-supernet``: weight-sharing supernet training by single-path sampling.

Each optimizer step trains one architecture of the search space, sampled uniformly (LV-BERT,
Yu et al. 2021, §3.2 eq. 6–7; single-path one-shot, Guo et al. 2020) or with strict fairness
(FairNAS, Chu et al. 2021). The architecture of step ``s`` is a pure function of
``(seed, s)``, so every rank of a distributed run trains the same path at the same step and a
resumed run samples the same sequence. Periodically, a fixed panel of reference
architectures (bert, lvbert-paper, random:1..3 by default) is scored on the fixed masked dev
set (standard BERT masking, :data:`lvsearch.data.loader.DEV_MASKING`, whatever the recipe's
training ``masking``); the unigram baseline (always predicting the most frequent token of the
whole training split) is logged next to it. At the end of the run the reference floors of
:mod:`lvsearch.eval.floors` (unigram and neighbour-count, fitted on exactly the training
sequences the supernet read) are scored on the same dev set and stored in ``summary.json``
with, per panel architecture, whether it beats the neighbour-count floor.

Run folder::

    config.json      format tag, resolved recipe, search space, model dims, data facts
    tokenizer.json   copy of the data's tokenizer (later stages need no data folder to decode)
    metrics.jsonl    one line per log step (loss, lr, tokens/s, arch) and per evaluation
    checkpoints/     see lvsearch.train.checkpoint
    summary.json     written at the end: final panel evaluation, tokens, time, ``floors``
                     (without per-target outcomes) and ``beats_floor`` ({panel name: bool})
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from lvsearch import __version__, tracking
from lvsearch.arch import Arch, resolve_arch
from lvsearch.config import Overrides, SamplingConfig, SupernetConfig, override_map, to_jsonable
from lvsearch.data.loader import DevSet, fixed_dev_set
from lvsearch.data.masking import IGNORE_INDEX
from lvsearch.data.shards import PreparedData
from lvsearch.errors import LvsearchError
from lvsearch.io import atomic_write_json, read_json
from lvsearch.lock import holds_output
from lvsearch.model import ModelDims, Supernet
from lvsearch.space import SearchSpace
from lvsearch.train.checkpoint import latest_checkpoint, load_checkpoint
from lvsearch.train.distributed import DistInfo, barrier, init_distributed, shutdown
from lvsearch.train.loop import step_seed, train
from lvsearch.train.objectives import MaskedBatches, SupernetMLM, evaluate_mlm, mlm_log_metrics
from lvsearch.train.run import CONFIG, begin_run, finished_summary, normalise, read_run_config, report_finished, select_config

RUN_FORMAT = "lvsearch.supernet-run/v1"


class ArchSampler:
    """The architecture trained at each step: a pure function of ``(seed, step)``.

    ``uniform``: every slot's op uniform over the space's ops, then each of its listed variant
    dimensions uniform over its values, connectivity per :meth:`SearchSpace.sample`. ``fair``
    (strict fairness, FairNAS): steps are grouped in blocks of ``k = |ops|``; within a block
    each slot walks through a seeded permutation of the ops, so every op of every slot is
    trained exactly once per block; its variant is drawn uniformly (from its own seeded
    generator); connectivity as in ``uniform``.
    """

    def __init__(self, space: SearchSpace, cfg: SamplingConfig, seed: int, extremes: tuple[Arch, Arch] | None = None):
        self.space, self.cfg, self.seed = space, cfg, seed
        self.extremes = extremes

    def paths(self, step: int) -> list[Arch]:
        """Every architecture trained at ``step``: one (uniform, fair), or for ``sandwich`` the
        largest and smallest (``extremes``) then ``paths − 2`` uniform ones."""
        if self.cfg.strategy != "sandwich":
            return [self(step)]
        if self.extremes is None:
            raise ValueError("the sandwich rule needs the largest and smallest architectures (extremes)")
        rng = random.Random(step_seed(self.seed, step, 0, "arch"))
        rest = [self.space.sample(rng, keep_input_prob=self.cfg.keep_input_prob, dense_prob=self.cfg.dense_prob)
                for _ in range(self.cfg.paths - 2)]
        return [*self.extremes, *rest]

    def __call__(self, step: int) -> Arch:
        rng = random.Random(step_seed(self.seed, step, 0, "arch"))
        arch = self.space.sample(rng, keep_input_prob=self.cfg.keep_input_prob, dense_prob=self.cfg.dense_prob)
        if self.cfg.strategy in ("uniform", "sandwich"):
            return self._fixed(arch)
        k = len(self.space.ops)
        block, pos = divmod(step, k)
        ops, variants = [], []
        for n in range(self.space.num_slots):
            perm = list(self.space.ops)
            random.Random(step_seed(self.seed, block, n, "fair")).shuffle(perm)
            ops.append(perm[pos])
            listed = self.space.variant_values(perm[pos])
            vrng = random.Random(step_seed(self.seed, step, n, "variant")) if listed else None
            variants.append(tuple((name, vrng.choice(vals)) for name, vals in sorted(listed.items())))
        return self._fixed(Arch(tuple(ops), arch.inputs, tuple(variants)))

    def _fixed(self, arch: Arch) -> Arch:
        """A sub-supernet's architecture: ``fix_op`` at ``fix_slot`` (unchanged without them)."""
        if self.cfg.fix_slot is None:
            return arch
        ops, variants = list(arch.ops), list(arch.variants)
        if ops[self.cfg.fix_slot - 1] != self.cfg.fix_op:
            ops[self.cfg.fix_slot - 1] = self.cfg.fix_op
            variants[self.cfg.fix_slot - 1] = ()  # the fixed op at its default size
        return Arch(tuple(ops), arch.inputs, tuple(variants))


def unigram_accuracy(data: PreparedData, dev: DevSet) -> float:
    """MLM accuracy of always predicting the most frequent non-special training token."""
    counts = np.zeros(data.vocab_size, dtype=np.int64)
    for shard in data.shards("train"):
        counts += np.bincount(np.asarray(shard), minlength=data.vocab_size)
    counts[list(data.special_ids.all())] = 0
    top = int(counts.argmax())
    gold = dev.labels[dev.labels != IGNORE_INDEX]
    return float((gold == top).float().mean())


def check_fixed_op(cfg: SamplingConfig, space: SearchSpace) -> None:
    """``sampling.fix_slot`` / ``fix_op`` name a slot and an op of ``space``.

    Raises:
        LvsearchError: a slot beyond ``space.num_slots`` or an op outside ``space.ops``.
    """
    if cfg.fix_slot > space.num_slots:
        raise LvsearchError(f"--slot (sampling.fix_slot) {cfg.fix_slot} is beyond the space's {space.num_slots} slots",
                            fix=f"pass a slot in 1..{space.num_slots}")
    if cfg.fix_op not in space.ops:
        raise LvsearchError(f"--op (sampling.fix_op) {cfg.fix_op!r} is not an op of space {space.name} ({', '.join(space.ops)})",
                            fix=f"pass one of {', '.join(space.ops)}")


def warm_start(supernet: Supernet, run: str | Path, space: SearchSpace, dims) -> None:
    """Load the weights of supernet run ``run``'s newest checkpoint into ``supernet``.

    Raises:
        LvsearchError: ``run`` is not a supernet run with a checkpoint, or its space, dims or
            α̂ layout differ from this run's.
    """
    src = load_supernet(run, device="cpu")
    diffs = []
    if src.space.to_dict() != space.to_dict():
        diffs.append(f"space {src.space.name} with {src.space.num_slots} slots vs {space.name} with {space.num_slots}")
    theirs, ours = src.dims.to_dict(), dims.to_dict()
    diffs += [f"model.{k} {theirs.get(k)} vs {ours.get(k)}" for k in sorted(set(theirs) | set(ours))
              if theirs.get(k) != ours.get(k)]
    if src.supernet.mixing_per_op != supernet.mixing_per_op:
        diffs.append(f"model.mixing_per_op {src.supernet.mixing_per_op} vs {supernet.mixing_per_op}")
    if diffs:
        raise LvsearchError(f"--few-shot-from (init_from) {run}: its supernet differs from this run's ({'; '.join(diffs)}; "
                            "theirs vs this run's)",
                            fix="warm-start from a supernet trained with the same space and model settings")
    supernet.load_state_dict(src.supernet.state_dict(), strict=True)


def build_space(config: SupernetConfig, source: str = "recipe") -> SearchSpace:
    """The search space of a recipe, sized to ``num_slots`` when set (:meth:`SearchSpace.resolve`)."""
    return SearchSpace.resolve(config.space, config.num_slots, source=source)


def resolve_panel(names: list[str], space: SearchSpace) -> tuple[dict[str, Arch], list[str]]:
    """Panel architectures by name; ``lvbert-paper`` is skipped (with a note) off 24 slots."""
    panel, notes = {}, []
    for name in names:
        if name == "lvbert-paper" and space.num_slots != 24:
            notes.append(f"panel: skipped lvbert-paper (24 slots; this space has {space.num_slots})")
            continue
        panel[name] = resolve_arch(name, space)
    return panel, notes


def sandwich_extremes(supernet: Supernet) -> tuple[Arch, Arch]:
    """``(largest, smallest)`` architectures of the supernet's space for the sandwich rule: the
    choice (op and variant, :meth:`SearchSpace.choices`) with the most (fewest) parameters at
    every slot, so the largest and smallest variants (once-for-all / HAT), with the dense
    (sequential) connectivity where the space searches it. Parameters are counted by
    :meth:`Supernet.num_params` on the uniform-choice stacks (ties: the later choice in
    canonical order for the largest, the earlier for the smallest)."""
    space = supernet.space
    n = space.num_slots
    seq = tuple((i,) for i in range(n))
    dense = tuple(tuple(range(i + 1)) for i in range(n)) if space.searchable_inputs else seq
    choices = space.choices()
    size = [supernet.num_params(Arch((op,) * n, seq, (var,) * n)) for op, var in choices]
    if not space.elastic:  # ops only: the tie-break of before variants (the op code)
        big = max(range(len(choices)), key=lambda i: (size[i], choices[i][0]))
        small = min(range(len(choices)), key=lambda i: (size[i], choices[i][0]))
    else:
        big = max(range(len(choices)), key=lambda i: (size[i], i))
        small = min(range(len(choices)), key=lambda i: (size[i], i))
    (bo, bv), (so, sv) = choices[big], choices[small]
    return Arch((bo,) * n, dense, (bv,) * n), Arch((so,) * n, seq, (sv,) * n)


class SupernetObjective:
    """MLM on sampled paths: micro-batches, per-step architecture and panel evaluation."""

    def __init__(self, supernet: Supernet, data: PreparedData, config: SupernetConfig, info: DistInfo):
        self.config, self.info = config, info
        self.batches = MaskedBatches(data, config.train, config.masking, info)
        self.module = SupernetMLM(supernet)
        extremes = sandwich_extremes(supernet) if config.sampling.strategy == "sandwich" else None
        self.sampler = ArchSampler(supernet.space, config.sampling, config.train.seed, extremes)
        # Standard BERT masking (DEV_MASKING), not config.masking: the panel's accuracies (and the
        # search fitness, same dev set) stay comparable across runs with other training masking.
        self.dev = fixed_dev_set(
            data, num_sequences=config.eval.dev_sequences, seq_len=config.train.seq_len, seed=config.eval.seed,
        )
        self.panel, self.notes = resolve_panel(config.eval.panel, supernet.space)
        self.unigram = unigram_accuracy(data, self.dev)

    def micro_batches(self, step: int) -> tuple[list[dict], float]:
        paths = self.sampler.paths(step)
        micro, labels_global = self.batches(step)
        for m in micro:
            del m["original_ids"]  # MLM needs only the corrupted ids and the labels
        # one pass over the batch per path; the loss is averaged over paths (norm × paths)
        out = [{**m, "arch": arch} for arch in paths for m in micro]
        return out, float((labels_global != IGNORE_INDEX).sum()) * len(paths)

    def step_info(self, step: int) -> dict:
        paths = self.sampler.paths(step)
        return {"arch": paths[0].key} if len(paths) == 1 else {"arch": " + ".join(a.key for a in paths)}

    def log_metrics(self, sums: dict[str, float], norm: float) -> dict:
        return mlm_log_metrics(sums)

    def evaluate(self, module: SupernetMLM, step: int) -> dict:
        net = module.net
        results = {
            name: evaluate_mlm(lambda ids, a=arch: net(ids, a), net, self.dev, self.config.eval.batch_size, self.info.device)
            for name, arch in self.panel.items()
        }
        return {"panel": results, "unigram_accuracy": self.unigram}


@holds_output("out")
def train_supernet(
    recipe: str | dict | None,
    data_dir: str | Path,
    out: str | Path,
    *,
    overrides: Overrides = (),  # type: ignore[assignment]
    resume: bool = False,
    overwrite: bool = False,
    device: str = "auto",
    show_progress: bool = True,
) -> dict:
    """Train (or resume) a supernet; returns the summary also written to ``summary.json``.
    ``recipe`` is a YAML path, a bundled name or a recipe mapping (e.g. a few-shot part's,
    :func:`lvsearch.train.supernet.sub_supernet_recipe`). ``resume`` of a run already finished at ``train.steps`` changes no file and returns the
    recorded summary (:func:`lvsearch.train.run.finished_summary`).

    Raises:
        LvsearchError: bad recipe / overrides, bad data folder, ``out`` already holding a run
            (without ``resume``), resume without a valid checkpoint, or a data folder whose
            tokenizer differs from the run's.
    """
    from lvsearch import ui

    out = Path(out).expanduser().resolve()
    info = init_distributed(device)
    try:
        data = PreparedData.open(data_dir)
        config, _ = select_config(
            out, SupernetConfig, RUN_FORMAT, recipe, override_map(overrides), resume=resume, overwrite=overwrite, data=data, info=info
        )
        finished = finished_summary(out, config.train.steps) if resume else None
        if finished is not None:
            report_finished(out, finished, info)
            return finished
        space = build_space(config)
        dims = config.model_settings().dims(data.vocab_size, data.special_ids.pad, config.train.seq_len)
        torch.manual_seed(config.train.seed)
        supernet = Supernet(space, dims, mixing_per_op=config.mixing_per_op)
        if config.init_from is not None and not resume:  # on resume the checkpoint holds the weights
            warm_start(supernet, config.init_from, space, dims)
        if config.sampling.fix_op is not None:
            check_fixed_op(config.sampling, space)
        objective = SupernetObjective(supernet, data, config, info)
        if info.is_main:
            for note in objective.notes:
                ui.console.print(note)
        record = {
            "format": RUN_FORMAT,
            "lvsearch_version": __version__,
            "config": normalise(to_jsonable(config)),
            "space": space.to_dict(),
            "dims": dims.to_dict(),
            "panel": {name: arch.key for name, arch in objective.panel.items()},
        }
        begin_run(out, record, data, info, resume=resume)
        if info.is_main:
            tracking.params(out, record["config"])
        t = config.train
        summary = train(
            objective,
            t,
            out,
            info,
            tokens_per_step=t.batch_size * t.seq_len,
            resume=resume,
            checkpoint_extra={"tokenizer_sha256": data.tokenizer_sha256, "space": space.name},
            label="supernet",
            show_progress=show_progress,
        )
        summary["unigram_accuracy"] = objective.unigram
        if info.is_main:
            summary.update(panel_floors(data, objective.dev, t, summary["steps"], summary.get("final_eval") or {}))
            final = latest_checkpoint(out)  # the run's fingerprint: the final weights' sha256
            summary["weights_sha256"] = read_json(final / "state.json", what="checkpoint state")["files"]["model.safetensors"]
            atomic_write_json(out / "summary.json", summary)
            tracking.log(out, summary["steps"], {k: summary[k] for k in ("floors", "beats_floor") if k in summary})
            if summary.get("floors"):
                from lvsearch.eval.floors import floor_line

                if summary.get("beats_floor"):
                    ui.console.print(PANEL_NOTE, highlight=False, soft_wrap=True)
                for name, verdict in (summary.get("beats_floor") or {}).items():
                    acc = summary["final_eval"]["panel"][name]["accuracy"]
                    ui.console.print(floor_line(f"panel {name}: dev MLM accuracy", acc, summary["floors"]), highlight=False)
        barrier(info)
        return summary
    finally:
        shutdown(info)


#: What the console's "panel" lines are (printed once before them).
PANEL_NOTE = ("panel: the recipe's fixed reference architectures (eval.panel), scored with the supernet's "
              "inherited weights on its dev set; a check that the shared weights learned, not a search result")


def panel_floors(data: PreparedData, dev: DevSet, train_cfg, steps: int, final_eval: dict) -> dict:
    """Summary entries of the reference floors of a supernet run after ``steps`` steps (numpy
    only: the torch RNG is untouched, so resume stays exact).

    Returns:
        ``{"floors": {name: {accuracy, predicted_tokens, train_tokens, tokens_seen[, backoff]}},
        "beats_floor": {panel name: bool}}`` (``beats_floor`` empty when ``final_eval`` has no
        panel), or ``{}`` when ``steps`` is 0.
    """
    from lvsearch.eval.floors import beats_floor, compact_floors, floors_for_train

    floors = floors_for_train(data, dev, train_cfg, steps)
    if floors is None:
        return {}
    panel = final_eval.get("panel") or {}
    return {"floors": compact_floors(floors),
            "beats_floor": {name: beats_floor(r["accuracy"], floors) for name, r in panel.items()}}


@dataclass
class LoadedSupernet:
    """A trained supernet with what is needed to use it."""

    supernet: Supernet
    space: SearchSpace
    dims: ModelDims
    config: SupernetConfig
    run_config: dict
    step: int
    run_dir: Path
    weights_sha256: str = ""  # sha256 of the checkpoint's model.safetensors (verified at load)


def load_supernet(run_dir: str | Path, *, device: str | torch.device = "cpu", step: int | None = None) -> LoadedSupernet:
    """Load the latest checkpoint (or the kept checkpoint of ``step``) of a ``train-supernet``
    run folder, in eval mode.

    Raises:
        LvsearchError: not a run folder, no checkpoint (of that step), or a truncated/modified
            checkpoint.
    """
    run_dir = Path(run_dir)
    config, rc = read_run_config(run_dir, RUN_FORMAT, SupernetConfig, missing_fix="pass the --out folder of 'lvsearch train-supernet'")
    for key in ("space", "dims"):
        if not isinstance(rc.get(key), dict):
            raise LvsearchError(f"supernet run config {run_dir / CONFIG} is malformed: field {key} must be an object "
                                f"(found {type(rc.get(key)).__name__})",
                                fix="restore it from a copy, or train the supernet again with --overwrite")
    space = SearchSpace.from_dict(rc["space"], source=run_dir / CONFIG)
    dims = ModelDims.from_dict(rc["dims"], source=str(run_dir / CONFIG))
    path = latest_checkpoint(run_dir)
    if path is None:
        raise LvsearchError(f"supernet run {run_dir} has no checkpoint", fix="train it first (or wait for its first checkpoint)")
    if step is not None:
        path = path.parent / f"step-{step:07d}"
        if not path.is_dir():
            kept = sorted(p.name for p in path.parent.glob("step-*") if p.is_dir())
            raise LvsearchError(f"supernet run {run_dir} has no checkpoint of step {step} (kept: {', '.join(kept)})",
                                fix="pass one of the kept steps (train with a larger train.keep_checkpoints to keep more)")
    ckpt = load_checkpoint(path, with_optimizer=False)
    supernet = Supernet(space, dims, mixing_per_op=config.mixing_per_op)  # runs before the key existed: shared
    state = {k.removeprefix("net."): v for k, v in ckpt.model.items()}
    own = supernet.state_dict()
    shapes = [k for k, v in state.items() if k in own and own[k].shape != v.shape]
    if shapes:  # e.g. mixing.logits (N, N) against (num_ops, N, N) after an edited config.json
        raise LvsearchError(
            f"checkpoint {path} does not match the run's supernet (shape of {', '.join(shapes[:3])}: "
            f"{tuple(state[shapes[0]].shape)} in the checkpoint, {tuple(own[shapes[0]].shape)} from {CONFIG})",
            fix="the run folder was modified; retrain or restore it",
        )
    missing, unexpected = supernet.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise LvsearchError(
            f"checkpoint {path} does not match the run's supernet (missing {len(missing)}, unexpected {len(unexpected)} tensors)",
            fix="the run folder was modified; retrain or restore it",
        )
    supernet.to(device).eval()
    return LoadedSupernet(supernet, space, dims, config, rc, ckpt.step, run_dir,
                          weights_sha256=ckpt.state["files"]["model.safetensors"])


def load_dev(loaded, data_dir: str | Path | None, dev_sequences: int | None):
    """The fixed masked dev set of a supernet run: the run's seq_len and eval seed, the standard
    BERT dev masking (:data:`lvsearch.data.loader.DEV_MASKING`, whatever masking the supernet
    trained with, so fitness is comparable across runs); ``dev_sequences`` sequences (default:
    the run's). Returns ``(DevSet, PreparedData)``.

    Raises:
        LvsearchError: missing data folder or a tokenizer whose sha256 differs from the run's.
    """
    rc = loaded.run_config
    folder = data_dir or rc["data"]["folder"]
    if not Path(folder).is_dir():
        if data_dir:
            raise LvsearchError(f"data folder {folder} not found",
                                fix=f"pass the prepared folder the supernet was trained on (its run recorded "
                                    f"{rc['data']['folder']})")
        raise LvsearchError(f"data folder {folder} (recorded in {loaded.run_dir / 'config.json'}) not found",
                            fix="pass --data DIR, the folder the supernet was trained on")
    data = PreparedData.open(folder)
    if data.tokenizer_sha256 != rc["data"]["tokenizer_sha256"]:
        raise LvsearchError(
            f"data folder {data.folder} was prepared with another tokenizer than supernet run {loaded.run_dir} "
            f"(sha256 {data.tokenizer_sha256[:12]}… vs {rc['data']['tokenizer_sha256'][:12]}…)",
            fix=f"pass the --data folder the supernet was trained on ({rc['data']['folder']})",
        )
    cfg = loaded.config
    n = dev_sequences if dev_sequences is not None else cfg.eval.dev_sequences
    if n == "all":
        n = None
    elif not isinstance(n, int) or n < 1:
        raise LvsearchError(f"--dev-sequences must be ≥ 1 or 'all', got {n}",
                            fix="e.g. --dev-sequences 1024, or omit it for the default")
    dev = fixed_dev_set(data, num_sequences=n, seq_len=cfg.train.seq_len, seed=cfg.eval.seed)
    if n is not None and dev.input_ids.shape[0] < n:
        from lvsearch import ui

        asked = f"--dev-sequences {n}" if dev_sequences is not None else f"the run's eval.dev_sequences {n}"
        ui.warn(f"{asked}: the dev split of {data.folder} has {dev.input_ids.shape[0]} sequences of "
                f"{cfg.train.seq_len} tokens: all of them are used")
    return dev, data


def sub_supernet_recipe(one_shot: str | Path, *, steps: int, slot: int | None, op: str | None,
                        warmup_steps: int | None = None) -> dict:
    """The recipe (a ``train-supernet`` YAML mapping) of one sub-supernet of ``one_shot``: the
    one-shot run's recorded recipe (its ``train.checkpoint_every`` included, so a killed part
    resumes like any supernet run) with ``train.steps = steps`` (warm-up ``steps // 10`` unless
    given), no evaluation during training, ``init_from = one_shot`` and ``sampling.fix_slot/fix_op = slot/op`` (both None: the
    equal-compute control, the one-shot supernet trained on uniformly).

    Raises:
        LvsearchError: ``one_shot`` is not a supernet run (see :func:`lvsearch.train.run.read_run_config`).
    """
    _, rec = read_run_config(Path(one_shot), RUN_FORMAT, SupernetConfig,
                             missing_fix="pass the train-supernet run folder of the one-shot supernet")
    cfg = dict(rec["config"])
    # checkpoints on the one-shot's schedule (train.checkpoint_every), so a killed part resumes
    cfg["train"] = {**cfg["train"], "steps": int(steps),
                    "warmup_steps": int(steps // 10 if warmup_steps is None else warmup_steps), "eval_every": 0}
    sampling = {**cfg["sampling"], "fix_slot": slot, "fix_op": op}
    if sampling.get("strategy") != "sandwich":
        sampling.pop("paths", None)  # recorded with every run, but read (and accepted) by the sandwich rule only
    cfg["sampling"] = sampling
    cfg["init_from"] = str(Path(one_shot).resolve())
    return cfg
