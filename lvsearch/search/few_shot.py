"""Few-shot supernets: K sub-supernets split on one structural choice, each scoring its own part.

One supernet shares every op's weights among all architectures, so each architecture's score
mixes in the interference of the others. Few-shot NAS (Zhao et al. 2021, "Few-shot Neural
Architecture Search", ICML) splits the space on one choice into K parts, copies the one-shot
weights into one sub-supernet per part (a warm start), trains each only on the architectures of
its part, and scores every candidate with the sub-supernet of its part.

Split rule here: **the op at slot ``slot``** (1-based; the first slot by default), so K = the
space's number of ops. Sub-supernet ``o`` is a ``train-supernet`` run with
``init_from = ONE_SHOT`` and ``sampling.fix_slot = slot``, ``sampling.fix_op = o``
(:class:`lvsearch.config.SamplingConfig`): every architecture it trains runs ``o`` there. A
candidate ``a`` is scored by the sub-supernet of ``a.ops[slot - 1]`` (:meth:`FewShotSupernets.choose`).
Equal compute against the one-shot supernet: K sub-supernets of S steps each cost K·S steps,
the one-shot continued for K·S steps (``init_from`` without a fixed op) is the control
(``benchmarks/few_shot.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lvsearch.arch import Arch
from lvsearch.errors import LvsearchError


def sub_supernet_recipe(one_shot: str | Path, *, steps: int, slot: int | None, op: str | None,
                        warmup_steps: int | None = None) -> dict:
    """The recipe (a ``train-supernet`` YAML mapping) of one sub-supernet of ``one_shot``: the
    one-shot run's recorded recipe with ``train.steps = steps`` (warm-up ``steps // 10`` unless
    given), ``init_from = one_shot`` and ``sampling.fix_slot/fix_op = slot/op`` (both None: the
    equal-compute control, the one-shot supernet trained on uniformly).

    Raises:
        LvsearchError: ``one_shot`` is not a supernet run (see :func:`lvsearch.train.run.read_run_config`).
    """
    from lvsearch.config import SupernetConfig
    from lvsearch.train.run import read_run_config
    from lvsearch.train.supernet import RUN_FORMAT

    _, rec = read_run_config(Path(one_shot), RUN_FORMAT, SupernetConfig,
                             missing_fix="pass the train-supernet run folder of the one-shot supernet")
    cfg = dict(rec["config"])
    cfg["train"] = {**cfg["train"], "steps": int(steps),
                    "warmup_steps": int(steps // 10 if warmup_steps is None else warmup_steps),
                    "checkpoint_every": int(steps), "eval_every": 0}
    sampling = {**cfg["sampling"], "fix_slot": slot, "fix_op": op}
    if sampling.get("strategy") != "sandwich":
        sampling.pop("paths", None)  # recorded with every run, but read (and accepted) by the sandwich rule only
    cfg["sampling"] = sampling
    cfg["init_from"] = str(Path(one_shot).resolve())
    return cfg


@dataclass
class FewShotSupernets:
    """Loaded sub-supernets of one split.

    Attributes:
        slot: the split's slot (1-based).
        parts: ``{op: LoadedSupernet}``, one per op of the space.
    """

    slot: int
    parts: dict

    @classmethod
    def load(cls, runs: list[str | Path], device: str = "cpu") -> "FewShotSupernets":
        """Load the sub-supernet runs of one split.

        Raises:
            LvsearchError: a run without ``sampling.fix_slot``, runs split on different slots,
                two runs for one op, a missing op, or runs of different spaces.
        """
        from lvsearch.train.supernet import load_supernet

        parts: dict = {}
        slots = set()
        space = None
        for run in runs:
            loaded = load_supernet(run, device=device)
            s = loaded.config.sampling
            if s.fix_slot is None:
                raise LvsearchError(f"{run} is not a few-shot sub-supernet (its sampling.fix_slot is unset)",
                                    fix="pass the runs trained with --set sampling.fix_slot=N --set sampling.fix_op=OP")
            if space is not None and loaded.space.to_dict() != space.to_dict():
                raise LvsearchError(f"{run} was trained on another space than {runs[0]}", fix="pass the sub-supernets of one split")
            if s.fix_op in parts:
                raise LvsearchError(f"{run} and another run are both the sub-supernet of {s.fix_op} at slot {s.fix_slot}",
                                    fix="pass one run per op")
            space = loaded.space
            slots.add(s.fix_slot)
            parts[s.fix_op] = loaded
        if len(slots) != 1:
            raise LvsearchError(f"the sub-supernets are split on different slots ({sorted(slots)})", fix="pass the runs of one split")
        missing = [o for o in space.ops if o not in parts]
        if missing:
            raise LvsearchError(f"no sub-supernet for op {', '.join(missing)} at slot {next(iter(slots))}",
                                fix="train one per op of the space")
        return cls(next(iter(slots)), parts)

    def choose(self, arch: Arch) -> str:
        """The op whose sub-supernet scores ``arch``: the op it runs at :attr:`slot`."""
        return arch.ops[self.slot - 1]

    def evaluators(self, dev, *, seq_len: int, fitness: str = "loss", device="cpu", **kwargs) -> "FewShotEvaluator":
        """A :class:`FewShotEvaluator` on dev set ``dev`` (each part its own :class:`SupernetEvaluator`)."""
        from lvsearch.search.evaluator import SupernetEvaluator

        return FewShotEvaluator(self, {op: SupernetEvaluator(ld.supernet, dev, seq_len=seq_len, fitness=fitness,
                                                             device=device, **kwargs)
                                       for op, ld in self.parts.items()})


class FewShotEvaluator:
    """Score each architecture with the sub-supernet :meth:`FewShotSupernets.choose` names."""

    def __init__(self, split: FewShotSupernets, evaluators: dict):
        self.split, self.evaluators = split, evaluators

    def evaluate_many(self, archs: list[Arch]) -> list:
        """``EvalResult`` per architecture, in the order given."""
        groups: dict[str, list[Arch]] = {}
        for a in archs:
            groups.setdefault(self.split.choose(a), []).append(a)
        out = {}
        for op, group in groups.items():
            for r in self.evaluators[op].evaluate_many(group):
                out[r.key] = r
        return [out[a.key] for a in archs]
