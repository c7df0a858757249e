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
from lvsearch.search.evaluator import SupernetEvaluator


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
    def load(cls, runs: list[str | Path], device: str = "cpu", *, like=None) -> "FewShotSupernets":
        """Load the sub-supernet runs of one split.

        Args:
            runs: ``train-supernet`` run folders, one per op of the space.
            device: where to load them.
            like: optional :class:`~lvsearch.train.supernet.LoadedSupernet` (the one-shot
                supernet ``evolve --supernet`` names) every part must match: the same space,
                model dims (incl. ``mixing_per_op``) and tokenizer, so the parts score its dev
                set and its parameter counts hold for them.

        Raises:
            LvsearchError: no run, a run that is not a supernet run, a run without
                ``sampling.fix_slot``, runs split on different slots, two runs for one op, a
                missing op, runs of different spaces, or a part unlike ``like`` (each names the
                run and the fix).
        """
        from lvsearch.train.supernet import load_supernet

        if not runs:
            raise LvsearchError("no few-shot sub-supernet given", fix="pass one train-supernet run per op of the space")
        parts: dict = {}
        slots = set()
        space = None
        for run in runs:
            loaded = load_supernet(run, device=device)
            s = loaded.config.sampling
            if s.fix_slot is None:
                raise LvsearchError(f"{run} is not a few-shot sub-supernet (its sampling.fix_slot is unset)",
                                    fix="pass the runs trained with train-supernet --few-shot-from SUPERNET --slot N --op OP --steps S")
            if like is not None:
                _check_like(run, loaded, like)
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

    def record(self) -> dict:
        """What a search records of the split (state.json's ``extra``, best.json's meta):
        ``{"slot", "parts": {op: {"run": absolute path, "step", "sha256": weights}}}``."""
        return {"slot": self.slot,
                "parts": {op: {"run": str(Path(ld.run_dir).resolve()), "step": ld.step, "sha256": ld.weights_sha256}
                          for op, ld in sorted(self.parts.items())}}

    def evaluator(self, dev, *, supernet=None, **kwargs) -> "FewShotEvaluator":
        """A :class:`FewShotEvaluator` on dev set ``dev``; ``supernet`` (default: a part's)
        gives the parameter/FLOP counts; ``kwargs`` go to :class:`SupernetEvaluator`."""
        return FewShotEvaluator(self, next(iter(self.parts.values())).supernet if supernet is None else supernet,
                                dev, **kwargs)


def _check_like(run, loaded, like) -> None:
    """Refuse a part that cannot score ``like``'s dev set with ``like``'s counts."""
    import dataclasses

    fix = (f"pass the sub-supernets trained from --supernet {like.run_dir} (train-supernet --few-shot-from "
           f"{like.run_dir} --slot N --op OP --steps S, docs/architecture.md)")
    if loaded.space.to_dict() != like.space.to_dict():
        raise LvsearchError(f"few-shot part {run} was trained on space {loaded.space.name} ({loaded.space.num_slots} slots, "
                            f"ops {','.join(loaded.space.ops)}, {loaded.space.connectivity}), not on the space of "
                            f"supernet {like.run_dir} ({like.space.name}, {like.space.num_slots} slots, ops "
                            f"{','.join(like.space.ops)}, {like.space.connectivity})", fix=fix)
    a, b = dataclasses.asdict(loaded.dims), dataclasses.asdict(like.dims)
    a["mixing_per_op"], b["mixing_per_op"] = loaded.config.mixing_per_op, like.config.mixing_per_op
    diff = [f"{k} {a[k]} vs {b[k]}" for k in sorted(a) if a[k] != b.get(k)]
    if diff:
        raise LvsearchError(f"few-shot part {run} has other model dims than supernet {like.run_dir} ({'; '.join(diff)})",
                            fix=fix)
    mine, theirs = loaded.run_config["data"]["tokenizer_sha256"], like.run_config["data"]["tokenizer_sha256"]
    if mine != theirs:
        raise LvsearchError(f"few-shot part {run} was trained with another tokenizer than supernet {like.run_dir} "
                            f"(sha256 {mine[:12]}… vs {theirs[:12]}…)", fix=fix)


class FewShotEvaluator(SupernetEvaluator):
    """Score each architecture with the sub-supernet :meth:`FewShotSupernets.choose` names.

    A drop-in :class:`SupernetEvaluator` (memo, constraints, racing, prefix cache, per-target
    noise, sharding over ranks): the dev chunks, racing order and counts are the ones of
    ``supernet`` (the one-shot supernet whose space and dims the parts share), and only the
    weights differ per candidate (:meth:`net_for`). Every candidate's loss and accuracy equal
    its part's own :class:`SupernetEvaluator` on the same dev set and settings, as floats
    (each part runs its own prefix trie; tested). Racing ranks a batch across parts, so the
    parts compete as one population.

    Args:
        split: the loaded parts.
        supernet: the :class:`lvsearch.model.Supernet` giving the parameter and FLOP counts.
        dev, kwargs: as :class:`SupernetEvaluator`.

    Raises:
        LvsearchError: as :class:`SupernetEvaluator`.
    """

    def __init__(self, split: FewShotSupernets, supernet, dev, **kwargs):
        super().__init__(supernet, dev, **kwargs)
        self.split = split
        self.nets = {op: ld.supernet.to(self.device).eval() for op, ld in split.parts.items()}

    def net_for(self, arch: Arch):
        """The sub-supernet of ``arch``'s op at the split slot."""
        return self.nets[self.split.choose(arch)]
