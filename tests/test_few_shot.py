"""Few-shot sub-supernets: the fixed-op sampler, the warm start, the split's choice rule, bad
settings — on a tiny supernet trained on the real shared corpus."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch
import yaml

from lvsearch.config import SamplingConfig, load_config, SupernetConfig
from lvsearch.data.loader import fixed_dev_set
from lvsearch.data.shards import PreparedData
from lvsearch.errors import LvsearchError
from lvsearch.search.evaluator import SupernetEvaluator
from lvsearch.search.few_shot import FewShotSupernets, sub_supernet_recipe
from lvsearch.space import SearchSpace
from lvsearch.train.supernet import ArchSampler, load_supernet, train_supernet

TINY = [
    "space=lvbert-elc", "num_slots=4", "model.hidden=32", "model.embedding=16", "model.ff_inner=64",
    "model.heads=2", "model.conv_kernel=3", "train.seq_len=32", "train.batch_size=8", "train.steps=8",
    "train.warmup_steps=2", "train.log_every=10", "train.eval_every=0", "train.checkpoint_every=8",
    "eval.dev_sequences=16", "eval.panel=[bert]",
]


@pytest.fixture(scope="module")
def one_shot(prepared_corpus: Path, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("few_shot") / "one_shot"
    train_supernet("quickstart", prepared_corpus, out, overrides=TINY, show_progress=False)
    return out


def _train_part(one_shot: Path, data: Path, out: Path, op: str | None, **train) -> Path:
    recipe = sub_supernet_recipe(one_shot, steps=3, slot=1 if op else None, op=op)
    recipe["train"].update(train)
    path = out.with_suffix(".yaml")
    path.write_text(yaml.safe_dump(recipe), encoding="utf-8")
    train_supernet(str(path), data, out, show_progress=False)
    return out


def test_fixed_op_sampler_runs_the_op_at_its_slot_and_samples_the_rest():
    space = SearchSpace.load("lvbert-elc").with_num_slots(6)
    for strategy in ("uniform", "fair"):
        sampler = ArchSampler(space, SamplingConfig(strategy=strategy, fix_slot=2, fix_op="DC"), seed=0)
        archs = [sampler(step) for step in range(60)]
        assert all(a.ops[1] == "DC" for a in archs)
        assert {a.ops[0] for a in archs} == set(space.ops)  # the other slots still vary over all ops
        assert all(space.validate(a) for a in archs)
        free = ArchSampler(space, SamplingConfig(strategy=strategy), seed=0)
        # the same draw as the unrestricted sampler, except at the fixed slot
        for step in range(10):
            a, b = sampler(step), free(step)
            assert a.inputs == b.inputs and a.ops[:1] + a.ops[2:] == b.ops[:1] + b.ops[2:]


def test_bad_sub_supernet_settings_are_refused():
    for sets, word in ((["sampling.fix_slot=1"], "go together"), (["sampling.fix_op=SA"], "go together"),
                       (["sampling.fix_slot=0", "sampling.fix_op=SA"], "slot number"),
                       (["sampling.fix_slot=1", "sampling.fix_op=SA", "sampling.strategy=sandwich"], "sandwich")):
        with pytest.raises(LvsearchError, match=word):
            load_config(SupernetConfig, "quickstart", sets)


def test_warm_start_copies_the_one_shot_weights(one_shot: Path, prepared_corpus: Path, tmp_path: Path):
    # a vanishing lr (AdamW's decoupled weight decay scales with it too) leaves the warm start as it is
    part = _train_part(one_shot, prepared_corpus, tmp_path / "sa", "SA", lr=1e-30)
    a, b = load_supernet(one_shot).supernet.state_dict(), load_supernet(part).supernet.state_dict()
    assert a.keys() == b.keys() and all(torch.allclose(a[k], b[k], rtol=0, atol=1e-20) for k in a)
    # with a real learning rate the part moves away, and only from the one-shot start
    moved = load_supernet(_train_part(one_shot, prepared_corpus, tmp_path / "sa2", "SA")).supernet.state_dict()
    assert any(not torch.allclose(a[k], moved[k], rtol=0, atol=1e-6) for k in a)


def test_warm_start_from_another_shape_is_refused(one_shot: Path, prepared_corpus: Path, tmp_path: Path):
    recipe = sub_supernet_recipe(one_shot, steps=2, slot=None, op=None)
    recipe["model"] = {**recipe["model"], "hidden": 48, "heads": 2}
    path = tmp_path / "wide.yaml"
    path.write_text(yaml.safe_dump(recipe), encoding="utf-8")
    with pytest.raises(LvsearchError, match="init_from") as err:
        train_supernet(str(path), prepared_corpus, tmp_path / "wide", show_progress=False)
    # the message names only what differs, not both whole settings dictionaries
    assert "model.hidden" in str(err.value) and "48" in str(err.value) and "model.ff_inner" not in str(err.value)
    with pytest.raises(LvsearchError, match="fix_op"):
        bad = sub_supernet_recipe(one_shot, steps=2, slot=1, op="XX")
        (tmp_path / "bad.yaml").write_text(yaml.safe_dump(bad), encoding="utf-8")
        train_supernet(str(tmp_path / "bad.yaml"), prepared_corpus, tmp_path / "bad", show_progress=False)


def test_each_candidate_is_scored_by_the_sub_supernet_of_its_op_at_the_split_slot(one_shot: Path,
                                                                                     prepared_corpus: Path, tmp_path: Path):
    runs = [_train_part(one_shot, prepared_corpus, tmp_path / op.lower(), op) for op in ("SA", "FF", "DC")]
    split = FewShotSupernets.load(runs)
    assert split.slot == 1 and set(split.parts) == {"SA", "FF", "DC"}
    loaded = load_supernet(one_shot)
    dev = fixed_dev_set(PreparedData.open(prepared_corpus), num_sequences=12, seq_len=32, seed=loaded.config.eval.seed)
    rng, archs = random.Random(0), {}
    while len(archs) < 9:
        a = loaded.space.sample(rng)
        archs.setdefault(a.key, a)
    archs = list(archs.values())
    got = split.evaluators(dev, seq_len=32).evaluate_many(archs)
    assert [r.key for r in got] == [a.key for a in archs]
    for a, r in zip(archs, got):
        op = split.choose(a)
        assert op == a.ops[0]
        want = SupernetEvaluator(split.parts[op].supernet, dev, seq_len=32, fitness="loss").evaluate_many([a])[0]
        assert r.loss == want.loss and r.accuracy == want.accuracy
    # the parts differ, so the choice matters
    other = SupernetEvaluator(split.parts["FF" if archs[0].ops[0] != "FF" else "SA"].supernet, dev, seq_len=32,
                              fitness="loss").evaluate_many([archs[0]])[0]
    assert other.loss != got[0].loss
    with pytest.raises(LvsearchError, match="no sub-supernet"):
        FewShotSupernets.load(runs[:2])
    with pytest.raises(LvsearchError, match="not a few-shot"):
        FewShotSupernets.load([one_shot, *runs])
