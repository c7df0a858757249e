"""Typed job configurations read from ``recipes/*.yaml`` with ``--set key=value`` overrides.

A recipe is a YAML mapping whose sections mirror nested dataclasses (e.g.
:class:`SupernetConfig` has ``train``, ``masking``, ``sampling``, ``eval`` and ``model``).
:func:`load_config` reads the file, applies overrides with dotted keys
(``--set train.lr=3e-4 --set model.hidden=128``; values are parsed as YAML scalars), and
builds the dataclasses. Unknown keys are errors that name the file, the key and the nearest
valid key. The resolved configuration is written into the run folder as ``config.json``.
"""

from __future__ import annotations

import copy
import math
import dataclasses
import difflib
import typing
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Mapping, Sequence
from typing import Any, Union


from lvsearch.data.masking import MaskingConfig
from lvsearch.errors import LvsearchError
from lvsearch.io import parse_yaml, read_yaml

if typing.TYPE_CHECKING:
    from lvsearch.model.dims import ModelSettings

REPO = Path(__file__).resolve().parents[1]
RECIPES = REPO / "recipes"


def check_dev_settings(cfg: Any, source: str) -> None:
    """The dev-set settings every recipe's ``eval`` section shares (``dev_sequences``,
    ``batch_size`` ≥ 1, ``seed`` ≥ 0).

    Raises:
        LvsearchError: naming ``source`` and the key.
    """
    for name in ("dev_sequences", "batch_size"):
        if getattr(cfg, name) < 1:
            raise LvsearchError(f"{source}: eval.{name} must be ≥ 1, got {getattr(cfg, name)}", fix=f"e.g. eval.{name}=64")
    if cfg.seed < 0:
        raise LvsearchError(f"{source}: eval.seed must be ≥ 0, got {cfg.seed}", fix="e.g. eval.seed=1234")


@dataclass
class TrainConfig:
    """The training loop's settings (shared by supernet training and retraining).

    Attributes:
        steps: optimizer steps.
        batch_size: sequences per optimizer step, summed over data-parallel ranks and
            gradient-accumulation micro-batches (the *global* batch).
        seq_len: packed sequence length in tokens (``[CLS]`` and ``[SEP]`` included).
        lr: peak learning rate of AdamW.
        warmup_steps: linear warm-up steps from 0 to ``lr``; then the ``schedule``.
        schedule: after warm-up, ``linear`` (decay to 0 at ``steps``; BERT / LV-BERT),
            ``wsd`` (warmup-stable-decay: constant ``lr``, then a linear cool-down to 0 over
            the last ``decay_fraction`` of the steps; Hägele et al. 2024) or ``cosine``
            (half-cosine to 0 at ``steps``).
        decay_fraction: cool-down share of ``steps`` under ``wsd`` (0 < f ≤ 1).
        weight_decay: AdamW decoupled weight decay (not applied to biases, LayerNorm weights
            and α logits).
        adam_betas, adam_eps: AdamW moments and epsilon.
        grad_clip: max global gradient L2 norm (0 = no clipping).
        grad_accum: micro-batches per optimizer step (per rank).
        precision: ``auto`` (bf16 autocast on CUDA and on CPUs with native bf16 —
            AVX512-BF16 or AMX —, fp32 elsewhere), ``fp32`` or ``bf16``.
        seed: seed of initialisation, data order, masks, architecture sampling and dropout.
        log_every: steps between metric lines.
        eval_every: steps between dev evaluations (0 = only at the end).
        checkpoint_every: steps between checkpoints (0 = only at the end).
        keep_checkpoints: how many recent checkpoints to keep.
    """

    steps: int = 1000
    batch_size: int = 128
    seq_len: int = 128
    lr: float = 2e-4
    warmup_steps: int = 100
    schedule: str = "linear"
    decay_fraction: float = 0.2
    weight_decay: float = 0.01
    adam_betas: tuple[float, float] = (0.9, 0.999)
    adam_eps: float = 1e-6
    grad_clip: float = 1.0
    grad_accum: int = 1
    precision: str = "auto"
    seed: int = 0
    log_every: int = 10
    eval_every: int = 100
    checkpoint_every: int = 100
    keep_checkpoints: int = 2

    def check(self, source: str) -> None:
        positive = ("steps", "batch_size", "seq_len", "grad_accum", "log_every", "keep_checkpoints")
        for name in positive:
            if getattr(self, name) < 1:
                raise LvsearchError(f"{source}: train.{name} must be ≥ 1, got {getattr(self, name)}")
        for name in ("warmup_steps", "eval_every", "checkpoint_every"):
            if getattr(self, name) < 0:
                raise LvsearchError(f"{source}: train.{name} must be ≥ 0")
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise LvsearchError(f"{source}: train.lr must be a finite number > 0, got {self.lr}", fix="e.g. train.lr=3e-4")
        for name in ("weight_decay", "grad_clip", "adam_eps"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise LvsearchError(f"{source}: train.{name} must be a finite number ≥ 0, got {value}",
                                    fix="e.g. train.grad_clip=1.0 (0 turns clipping off)" if name == "grad_clip"
                                    else f"e.g. train.{name}=0.01")
        if not all(math.isfinite(b) and 0 <= b < 1 for b in self.adam_betas) or len(self.adam_betas) != 2:
            raise LvsearchError(f"{source}: train.adam_betas must be two numbers in [0, 1), got {list(self.adam_betas)}",
                                fix="e.g. train.adam_betas=[0.9, 0.999]")
        if self.seed < 0:
            raise LvsearchError(f"{source}: train.seed must be ≥ 0, got {self.seed}", fix="e.g. train.seed=0")
        if self.schedule not in ("linear", "wsd", "cosine"):
            raise LvsearchError(f"{source}: train.schedule {self.schedule!r} unknown", fix="use linear, wsd or cosine")
        if not 0 < self.decay_fraction <= 1:
            raise LvsearchError(f"{source}: train.decay_fraction must be in (0, 1], got {self.decay_fraction}",
                                fix="e.g. 0.2")
        if self.precision not in ("auto", "fp32", "bf16"):
            raise LvsearchError(f"{source}: train.precision {self.precision!r} unknown", fix="use auto, fp32 or bf16")


@dataclass
class SamplingConfig:
    """How the supernet samples one architecture per optimizer step.

    Attributes:
        strategy: ``uniform`` — each slot's op uniform over the allowed ops (LV-BERT eq. 6–7,
            single-path one-shot, Guo et al. 2020); ``fair`` — strict fairness (FairNAS, Chu et
            al. 2021): in each block of ``|ops|`` consecutive steps every op of every slot is
            trained exactly once.
        keep_input_prob: in spaces with searchable connectivity, probability that each optional
            earlier output is mixed (the previous output always is).
        dense_prob: probability of sampling the dense connectivity (every earlier output).
        paths: ``sandwich`` only — paths trained per step (≥ 2).

    ``sandwich`` — the sandwich rule (Yu et al. 2020, BigNAS §3.1; Yu & Huang 2019): every
    step trains ``paths`` architectures on the same batch and averages their losses: the
    largest (the op with the most parameters at every slot, dense connectivity), the smallest
    (fewest parameters, sequential) and ``paths − 2`` uniform ones, so the extremes of the
    space are trained at every step. A step costs ``paths`` forward/backward passes.

    ``fix_slot``, ``fix_op`` — a few-shot sub-supernet (Zhao et al. 2021, "Few-shot Neural
    Architecture Search"): every sampled architecture runs op ``fix_op`` (a name of the space's
    ops, e.g. ``SA``) at slot ``fix_slot`` (1-based); the rest is sampled as the strategy says.
    Both or neither; not with ``sandwich``.
    """

    strategy: str = "uniform"
    keep_input_prob: float = 0.5
    dense_prob: float = 0.1
    paths: int = 3
    fix_slot: int | None = None
    fix_op: str | None = None

    def check(self, source: str) -> None:
        if self.strategy not in ("uniform", "fair", "sandwich"):
            raise LvsearchError(f"{source}: sampling.strategy {self.strategy!r} unknown",
                                fix="use uniform, fair or sandwich")
        if self.strategy == "sandwich" and (not isinstance(self.paths, int) or self.paths < 2):
            raise LvsearchError(f"{source}: sampling.paths must be an integer ≥ 2 for the sandwich rule, got {self.paths!r}",
                                fix="e.g. --set sampling.paths=3 (largest, smallest and one uniform path)")
        for name in ("keep_input_prob", "dense_prob"):
            if not 0 <= getattr(self, name) <= 1:
                raise LvsearchError(f"{source}: sampling.{name} must be in [0, 1]")
        if (self.fix_slot is None) != (self.fix_op is None):
            raise LvsearchError(f"{source}: sampling.fix_slot and sampling.fix_op go together (a few-shot sub-supernet)",
                                fix="set both, e.g. --set sampling.fix_slot=1 --set sampling.fix_op=SA, or neither")
        if self.fix_slot is not None:
            if not isinstance(self.fix_slot, int) or isinstance(self.fix_slot, bool) or self.fix_slot < 1:
                raise LvsearchError(f"{source}: sampling.fix_slot must be a slot number ≥ 1, got {self.fix_slot!r}",
                                    fix="e.g. --set sampling.fix_slot=1 (the first slot)")
            if self.strategy == "sandwich":
                raise LvsearchError(f"{source}: sampling.fix_slot/fix_op (a sub-supernet) cannot be combined with the sandwich rule",
                                    fix="use sampling.strategy=uniform or fair for a sub-supernet")

    def check_given(self, given: dict, source: str) -> None:
        """Refuse keys the recipe or ``--set`` gave that the chosen strategy does not read
        (``given`` is the ``sampling`` mapping as written): ``sampling.paths`` is read by the
        sandwich rule only, and a run would record it while training one path per step.

        Raises:
            LvsearchError: ``paths`` given with ``uniform`` or ``fair`` (names the key and both fixes).
        """
        if "paths" in given and self.strategy != "sandwich":
            raise LvsearchError(
                f"{source}: sampling.paths={given['paths']!r} is read by the sandwich rule only; with "
                f"sampling.strategy={self.strategy} every step trains one path",
                fix="add --set sampling.strategy=sandwich to train several paths per step, or remove sampling.paths",
            )


@dataclass
class EvalConfig:
    """Periodic dev evaluation: MLM loss/accuracy of a fixed panel on the fixed masked dev set.

    Attributes:
        dev_sequences: dev sequences in the fixed masked dev set.
        batch_size: sequences per evaluation forward pass.
        seed: seed of the dev sample and its masks (same in every process and run).
        panel: reference architectures evaluated (names accepted by ``resolve_arch``).
            ``lvbert-paper`` is skipped with a note when the space does not have 24 slots.
    """

    dev_sequences: int = 256
    batch_size: int = 64
    seed: int = 1234

    def check(self, source: str) -> None:
        check_dev_settings(self, source)
    panel: list[str] = field(default_factory=lambda: ["bert", "lvbert-paper", "random:1", "random:2", "random:3"])


@dataclass
class SupernetConfig:
    """``lvsearch train-supernet`` recipe.

    Attributes:
        space: search-space name (``search_spaces/NAME.yaml``) or YAML path.
        num_slots: override of the space's slot count (None keeps it).
        model: :class:`lvsearch.model.ModelDims` fields except ``vocab_size`` and ``pad_id``,
            which come from the prepared data, plus the supernet-only keys of
            :data:`lvsearch.model.dims.SUPERNET_MODEL_KEYS`; checked (names and values) by
            :meth:`model_settings`, the one step that also builds the run's dims:

            ``mixing_per_op`` (bool, default false): with searchable connectivity, every
            candidate op of a slot has its own ELC-BERT α̂ logits (Charpentier & Samuel
            2023): ``mixing.logits`` is ``(num_ops, N, N)`` instead of one ``(N, N)`` shared
            by SA, FF and DC; a path uses, at slot n, the row of the op it runs there, and
            ``Supernet.extract`` copies those rows into the standalone model's ordinary
            ``(N, N)`` α̂ (standalone models, export and evaluation are unchanged). Refused on
            a space without searchable connectivity and by ``retrain``.
        init_from: warm start — a ``train-supernet`` run folder whose newest checkpoint's
            weights initialise this supernet (same space and model dims required; the optimizer
            and schedule start afresh). Few-shot sub-supernets start from the one-shot weights
            this way (:mod:`lvsearch.search.few_shot`).
    """

    space: str = "lvbert"
    num_slots: int | None = None
    model: dict = field(default_factory=dict)
    train: TrainConfig = field(default_factory=TrainConfig)
    masking: MaskingConfig = field(default_factory=MaskingConfig)
    sampling: SamplingConfig = field(default_factory=SamplingConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    init_from: str | None = None

    def check(self, source: str) -> None:
        self.model_settings(source)
        self.train.check(source)
        self.eval.check(source)
        self.masking.check()
        self.sampling.check(source)

    def model_settings(self, source: str = "recipe") -> ModelSettings:
        """The checked ``model`` section; ``.dims(vocab_size, pad_id, seq_len)`` builds the
        supernet's :class:`~lvsearch.model.ModelDims` (``max_len`` at least ``train.seq_len``).

        Raises:
            LvsearchError: a bad key or value (:meth:`lvsearch.model.dims.ModelSettings.from_section`).
        """
        from lvsearch.model.dims import ModelSettings

        return ModelSettings.from_section(self.model, source, supernet=True, seq_len=self.train.seq_len)

    @property
    def mixing_per_op(self) -> bool:
        """``model.mixing_per_op`` (default False: one α̂ matrix shared by every op)."""
        return bool(self.model.get("mixing_per_op", False))


#: Model sizes of LV-BERT (Yu et al. 2021, Table 5); a searched slot sequence is scaled up by
#: changing these widths only. ``generator`` is ELECTRA's generator width as a fraction of the
#: discriminator's (Clark et al. 2020: 1/4 for small, 1/3 for medium and base).
MODEL_SIZES = {
    "small": {"hidden": 256, "embedding": 128, "ff_inner": 1024, "heads": 4, "generator": 0.25},
    "medium": {"hidden": 384, "embedding": 128, "ff_inner": 1536, "heads": 6, "generator": 1 / 3},
    "base": {"hidden": 768, "embedding": 768, "ff_inner": 3072, "heads": 12, "generator": 1 / 3},
}


@dataclass
class RetrainEvalConfig:
    """Dev evaluation during retraining (logged to ``curve.jsonl`` against tokens seen).

    Attributes:
        dev_sequences: sequences in the fixed masked dev set.
        batch_size: sequences per evaluation forward pass.
        seed: seed of the dev sample, its masks and (ELECTRA) the generator's dev samples.
    """

    dev_sequences: int = 256
    batch_size: int = 64
    seed: int = 1234

    def check(self, source: str) -> None:
        check_dev_settings(self, source)


@dataclass
class RetrainConfig:
    """``lvsearch retrain`` recipe: train one architecture from scratch.

    Attributes:
        space: search space used to resolve named architectures and validate JSON ones.
        num_slots: override of the space's slot count (must equal the architecture's).
        size: ``small`` | ``medium`` | ``base`` (LV-BERT Table 5; see :data:`MODEL_SIZES`).
        model: explicit :class:`lvsearch.model.ModelDims` fields; they override ``size``
            (checked, names and values, by :meth:`model_settings`, which also builds the dims).
        objective: ``electra`` (replaced-token detection, Clark et al. 2020) or ``mlm``.
        generator_size: ELECTRA generator width as a fraction of the discriminator's
            (None: the size's default, 1/4 small, 1/3 medium/base).
        disc_weight: λ in loss = generator MLM + λ · discriminator RTD (ELECTRA: 50).
    """

    space: str = "lvbert"
    num_slots: int | None = None
    size: str = "small"
    model: dict = field(default_factory=dict)
    objective: str = "electra"
    generator_size: float | None = None
    disc_weight: float = 50.0
    train: TrainConfig = field(default_factory=lambda: TrainConfig(lr=5e-4))
    masking: MaskingConfig = field(default_factory=MaskingConfig)
    eval: RetrainEvalConfig = field(default_factory=RetrainEvalConfig)

    def check(self, source: str) -> None:
        if self.size not in MODEL_SIZES:
            raise LvsearchError(f"{source}: size {self.size!r} unknown", fix=f"use one of {', '.join(MODEL_SIZES)}")
        if self.objective not in ("electra", "mlm"):
            raise LvsearchError(f"{source}: objective {self.objective!r} unknown", fix="use electra or mlm")
        if self.generator_size is not None and not 0 < self.generator_size <= 1:
            raise LvsearchError(f"{source}: generator_size must be in (0, 1]", fix="e.g. 0.25")
        self.model_settings(source)
        self.train.check(source)
        self.eval.check(source)
        self.masking.check()

    def model_settings(self, source: str = "retrain recipe") -> ModelSettings:
        """The checked ``model`` section over the named ``size``; ``.dims(vocab_size, pad_id,
        seq_len)`` builds the discriminator's / MLM model's :class:`~lvsearch.model.ModelDims`.

        Raises:
            LvsearchError: an unknown ``size``, a bad key or value
                (:meth:`lvsearch.model.dims.ModelSettings.from_section`).
        """
        from lvsearch.model.dims import ModelSettings

        if self.size not in MODEL_SIZES:
            raise LvsearchError(f"{source}: size {self.size!r} unknown", fix=f"use one of {', '.join(MODEL_SIZES)}")
        base = {k: v for k, v in MODEL_SIZES[self.size].items() if k != "generator"}
        return ModelSettings.from_section(self.model, source, base=base, seq_len=self.train.seq_len,
                                          dims_source=f"retrain recipe (size {self.size})")


# ---------------------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------------------


def _unknown_key(source: str, dotted: str, key: str, valid: list[str]) -> LvsearchError:
    close = difflib.get_close_matches(key, valid, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return LvsearchError(f"{source}: unknown config key {dotted!r}", fix=f"{hint}valid keys here: {', '.join(valid)}")


def _coerce(value: Any, tp: Any, dotted: str, source: str) -> Any:
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp):
        return build_dataclass(tp, value, source, prefix=dotted + ".")
    if origin is typing.Union or (origin is not None and str(origin) == "<class 'types.UnionType'>"):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if value is None:
            return None
        return _coerce(value, args[0], dotted, source)
    if tp is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if tp is float and isinstance(value, str):
        try:  # PyYAML (YAML 1.1) reads "3e-4" as a string; accept it as the number it means
            return float(value)
        except ValueError:
            pass
    if tp is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if tp is bool and isinstance(value, bool):
        return value
    if tp is str and isinstance(value, str):
        return value
    if origin is tuple and isinstance(value, (list, tuple)):
        args = typing.get_args(tp)
        if len(value) != len(args):
            raise LvsearchError(f"{source}: {dotted} needs {len(args)} values, got {len(value)}")
        return tuple(_coerce(v, a, dotted, source) for v, a in zip(value, args))
    if origin is list and isinstance(value, list):
        (arg,) = typing.get_args(tp) or (Any,)
        return [v if arg is Any else _coerce(v, arg, dotted, source) for v in value]
    if tp is dict and isinstance(value, dict):
        return dict(value)
    if tp is Any:
        return value
    want = getattr(tp, "__name__", str(tp))
    raise LvsearchError(f"{source}: {dotted} must be {want}, got {value!r}", fix=f"set {dotted} to a {want} value")


def build_dataclass(cls: type, data: Any, source: str, prefix: str = "") -> Any:
    """Build dataclass ``cls`` from a mapping, recursively, rejecting unknown keys.

    Raises:
        LvsearchError: ``data`` is not a mapping, a key is unknown (with the nearest valid
            key), or a value has the wrong type; the message names ``source``.
    """
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise LvsearchError(f"{source}: {prefix.rstrip('.') or 'the recipe'} must be a mapping, got {data!r}")
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    kwargs = {}
    for key, value in data.items():
        if key not in names:
            raise _unknown_key(source, prefix + str(key), str(key), names)
        kwargs[key] = _coerce(value, hints[key], prefix + key, source)
    return cls(**kwargs)


#: Recipe overrides: ``--set`` strings (``"train.lr=3e-4"``) or typed values by dotted key.
Overrides = Union[Sequence[str], Mapping[str, Any]]


def override_map(overrides: Overrides) -> dict[str, Any]:
    """Recipe overrides as one flat mapping of dotted keys to typed values, later ones winning:
    ``["train.lr=3e-4", "model.hidden=128"]`` (``--set`` strings: values parsed as YAML
    scalars), or a mapping such as ``{"train.steps": 1800}`` taken as it is (what the quickstart
    passes its stages: typed values, no YAML round trip).

    Raises:
        LvsearchError: an item is not ``key=value``.
    """
    if isinstance(overrides, Mapping):
        return {str(k): v for k, v in overrides.items()}
    out: dict[str, Any] = {}
    for pair in overrides:
        key, sep, text = pair.partition("=")
        if not sep or not key:
            raise LvsearchError(f"--set {pair!r} is not key=value", fix="e.g. --set train.lr=3e-4")
        # not YAML: the text itself; an alias bomb or a deep nesting is refused (parse_yaml)
        value = parse_yaml(text, f"--set {key}", what="the value of", if_invalid=text) if text else ""
        out[key] = value  # a later --set of the same key wins
    return out


def parse_overrides(overrides: Overrides) -> dict:
    """Overrides (:func:`override_map`'s forms) → the nested mapping merged over a recipe:
    ``{"train.lr": 3e-4}`` → ``{"train": {"lr": 3e-4}}``.

    Raises:
        LvsearchError: an item is not ``key=value``, or two overrides conflict
            (``train=1`` and ``train.lr=…``).
    """
    out: dict = {}
    for key, value in override_map(overrides).items():
        node = out
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise LvsearchError(f"--set {key}={value!r} conflicts with another --set of {part}")
        node[parts[-1]] = value
    return out


def _merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def resolve_recipe(name_or_path: str) -> Path:
    """A recipe path, or ``recipes/NAME.yaml`` for a bare name.

    Raises:
        LvsearchError: no such file (the message lists the bundled recipes).
    """
    path = Path(name_or_path)
    if path.is_file():
        return path
    bundled = RECIPES / f"{name_or_path}.yaml"
    if "/" not in name_or_path and bundled.is_file():
        return bundled
    names = sorted(p.stem for p in RECIPES.glob("*.yaml"))
    raise LvsearchError(f"recipe not found: {name_or_path}", fix=f"pass a YAML path or one of: {', '.join(names)}")


def _check_recipe_kind(cls: type, raw: dict, source: str) -> None:
    """A supernet recipe given to ``retrain`` (or the reverse) gets one message naming the
    right command, instead of an "unknown key" error about its first foreign key."""
    kinds = {SupernetConfig: ("train-supernet", "quickstart, lvbert-small"),
             RetrainConfig: ("retrain", "retrain-quickstart, retrain-small")}
    if cls not in kinds or not raw:
        return
    own = {f.name for f in dataclasses.fields(cls)}
    foreign = [k for k in raw if k not in own]
    for other, (command, names) in kinds.items():
        if other is cls or not foreign:
            continue
        if all(k in {f.name for f in dataclasses.fields(other)} for k in foreign):
            raise LvsearchError(
                f"recipe {source} is a '{command}' recipe (keys {', '.join(foreign)})",
                fix=f"use it with 'lvsearch {command} --config', or pass a '{kinds[cls][0]}' recipe: {kinds[cls][1]}",
            )


def load_config(cls: type, recipe: str | dict | None,
                overrides: Overrides = ()) -> tuple[Any, dict]:  # type: ignore[assignment]
    """Read a recipe (optional: a YAML path or bundled name, or an already built mapping such as
    :func:`lvsearch.train.supernet.sub_supernet_recipe`'s) + ``--set`` overrides into dataclass ``cls``.

    Returns:
        ``(config, raw)`` where ``raw`` is the merged mapping (for the record).

    Raises:
        LvsearchError: missing recipe, invalid YAML, unknown keys, wrong types, bad values.
    """
    raw: dict = {}
    source = "defaults"
    if isinstance(recipe, dict):
        raw, source = copy.deepcopy(recipe), "the recipe mapping"
    elif recipe:
        path = resolve_recipe(recipe)
        source = str(path)
        raw = read_yaml(path, what="recipe") or {}
        if not isinstance(raw, dict):
            raise LvsearchError(f"recipe {path} must be a YAML mapping of sections", fix="see recipes/quickstart.yaml")
    _check_recipe_kind(cls, raw, source)
    over = parse_overrides(overrides)
    merged = _merge(raw, over)
    where = source + (" with --set overrides" if overrides else "")
    config = build_dataclass(cls, merged, where)
    if hasattr(config, "check"):
        config.check(where)
    if isinstance(getattr(config, "sampling", None), SamplingConfig) and isinstance(merged.get("sampling"), dict):
        config.sampling.check_given(merged["sampling"], where)
    return config, merged


def to_jsonable(config: Any) -> Any:
    """A dataclass config as plain JSON-able data (tuples become lists)."""
    return dataclasses.asdict(config)
