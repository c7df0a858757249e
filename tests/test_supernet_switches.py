"""Supernet-training switches: the sandwich rule and per-op ELC α̂ logits."""

from __future__ import annotations

import json
import random
import signal
from pathlib import Path

import pytest
import torch

from lvsearch.arch import Arch
from lvsearch.config import SamplingConfig, load_config, SupernetConfig
from lvsearch.errors import LvsearchError
from lvsearch.model import ModelDims, Supernet
from lvsearch.space import SearchSpace
from lvsearch.train.supernet import ArchSampler, sandwich_extremes
from test_reliability import SN_SETS, _sets, cli


def _supernet(space: str = "lvbert-elc@4") -> Supernet:
    dims = ModelDims(vocab_size=100, hidden=32, embedding=16, ff_inner=64, heads=2, max_len=32, pad_id=0)
    return Supernet(SearchSpace.load(space), dims)


def test_sandwich_extremes_are_the_largest_and_smallest_paths():
    sn = _supernet()
    big, small = sandwich_extremes(sn)
    space = sn.space
    sizes = [sn.num_params(space.sample(random.Random(i))) for i in range(50)]
    assert sn.num_params(big) >= max(sizes) and sn.num_params(small) <= min(sizes)
    # every other uniform-op stack, dense or sequential, lies between the two
    n = space.num_slots
    for op in space.ops:
        for inputs in (tuple((i,) for i in range(n)), tuple(tuple(range(i + 1)) for i in range(n))):
            assert sn.num_params(small) <= sn.num_params(Arch((op,) * n, inputs)) <= sn.num_params(big)
    assert big.inputs[-1] == tuple(range(space.num_slots)) and small.is_sequential
    assert sn.num_params(big) > sn.num_params(small)
    seq_big, _ = sandwich_extremes(_supernet("lvbert@4"))
    assert seq_big.is_sequential


def test_sandwich_sampler_trains_the_extremes_then_uniform_paths_that_vary():
    """Each step's paths are (largest, smallest, then ``paths − 2`` uniform draws); the uniform
    draws differ across steps (and within a step), and are the uniform sampler's draw of that
    step first; without the sandwich rule a step trains one path, the sampler's."""
    sn = _supernet()
    cfg = SamplingConfig(strategy="sandwich", paths=4)
    ext = sandwich_extremes(sn)
    sampler = ArchSampler(sn.space, cfg, seed=0, extremes=ext)
    uniform = ArchSampler(sn.space, SamplingConfig(), seed=0)
    rests = []
    for step in range(8):
        paths = sampler.paths(step)
        assert len(paths) == 4 and tuple(paths[:2]) == ext
        assert paths[2] == uniform(step)  # the same seeded draw as the uniform rule's
        for a in paths[2:]:
            sn.space.validate(a)
        rests.append(tuple(a.key for a in paths[2:]))
    assert len(set(rests)) == 8  # no two steps train the same uniform paths
    assert any(r[0] != r[1] for r in rests)
    assert ArchSampler(sn.space, cfg, seed=1, extremes=ext).paths(0)[2:] != sampler.paths(0)[2:]
    assert [uniform.paths(s) for s in range(5)] == [[uniform(s)] for s in range(5)]
    assert len({uniform(s).key for s in range(8)}) > 1
    with pytest.raises(ValueError, match="extremes"):
        ArchSampler(sn.space, cfg, seed=0).paths(0)


def test_sandwich_step_loss_is_the_mean_over_its_paths(prepared_corpus: Path):
    """The training step's loss, as the loop forms it (summed micro-batch ``loss_sum`` over
    the normaliser of ``micro_batches``), equals the mean over the step's paths of each path's
    mean MLM loss on the step's batch: every path sees the whole batch once."""
    from lvsearch.data.shards import PreparedData
    from lvsearch.train.distributed import DistInfo
    from lvsearch.train.supernet import SupernetObjective, build_space

    data = PreparedData.open(prepared_corpus)
    cfg, _ = load_config(SupernetConfig, "quickstart", [*SN_SETS, "sampling.strategy=sandwich", "sampling.paths=3",
                                                        "train.grad_accum=2"])
    torch.manual_seed(0)
    net = Supernet(build_space(cfg), cfg.model_settings().dims(data.vocab_size, data.special_ids.pad, cfg.train.seq_len))
    objective = SupernetObjective(net.eval(), data, cfg, DistInfo(0, 1, 0, torch.device("cpu")))
    step = 3
    micro, norm = objective.micro_batches(step)
    paths = objective.sampler.paths(step)
    assert len(micro) == 3 * 2 and [m["arch"] for m in micro] == [a for a in paths for _ in range(2)]
    with torch.no_grad():
        outs = [objective.module(**m) for m in micro]
        step_loss = float(sum(o["loss_sum"] for o in outs)) / norm
        batch, labels = objective.batches(step)
        per_path = []
        for a in paths:
            sums = [objective.module(m["input_ids"], m["labels"], a) for m in batch]
            per_path.append(float(sum(x["loss_sum"] for x in sums)) / float(sum(x["count"] for x in sums)))
    assert float((labels != -100).sum()) * 3 == norm
    assert len(set(per_path)) == 3  # the paths differ, so a sum or a single path would not match
    assert step_loss == pytest.approx(sum(per_path) / 3, rel=1e-5)


def test_sandwich_config_is_checked_and_round_trips():
    cfg, _ = load_config(SupernetConfig, "quickstart", ["sampling.strategy=sandwich", "sampling.paths=3"])
    assert cfg.sampling.strategy == "sandwich" and cfg.sampling.paths == 3
    with pytest.raises(LvsearchError, match="sampling.paths must be an integer ≥ 2"):
        load_config(SupernetConfig, "quickstart", ["sampling.strategy=sandwich", "sampling.paths=1"])


def _killed_run_resumes_exactly(base: list[str], prepared_corpus: Path, tmp_path: Path) -> Path:
    """Train ``base`` uninterrupted and once SIGKILLed at step 6 then resumed: the step-12
    weights and optimizer state must be byte-identical. Returns the uninterrupted run."""
    ref, cut = tmp_path / "ref", tmp_path / "cut"
    assert cli(*base, "--out", str(ref)).returncode == 0
    assert cli(*base, "--out", str(cut), kill_at="step:6").returncode == -signal.SIGKILL
    proc = cli("train-supernet", "--data", str(prepared_corpus), "--out", str(cut), "--resume")
    assert proc.returncode == 0, proc.stderr[-2000:]
    for name in ("model.safetensors", "optimizer.safetensors"):
        assert (ref / "checkpoints" / "step-0000012" / name).read_bytes() == (cut / "checkpoints" / "step-0000012" / name).read_bytes()
    return ref


def test_sandwich_supernet_trains_and_resumes_exactly(prepared_corpus: Path, tmp_path: Path):
    base = ["train-supernet", "--config", "quickstart", "--data", str(prepared_corpus),
            *_sets([*SN_SETS, "sampling.strategy=sandwich", "sampling.paths=3"])]
    ref = _killed_run_resumes_exactly(base, prepared_corpus, tmp_path)
    logged = [json.loads(line) for line in (ref / "metrics.jsonl").read_text().splitlines()]
    arch_lines = [r["arch"] for r in logged if "arch" in r]
    assert arch_lines and all(len(a.split(" + ")) == 3 for a in arch_lines)
    assert json.loads((ref / "config.json").read_text())["config"]["sampling"]["strategy"] == "sandwich"


# ----------------------------------------------------------------- per-op ELC α̂ (model.mixing_per_op)
def test_mixing_per_op_config_round_trips_and_is_supernet_only():
    from lvsearch.config import RetrainConfig, build_dataclass, to_jsonable

    cfg, _ = load_config(SupernetConfig, "quickstart", ["space=lvbert-elc", "model.mixing_per_op=true"])
    assert cfg.mixing_per_op is True and cfg.model["mixing_per_op"] is True
    back = build_dataclass(SupernetConfig, json.loads(json.dumps(to_jsonable(cfg))), "test")
    assert back == cfg and back.mixing_per_op
    dims = cfg.model_settings().dims(100, 0, 64)  # the key shapes the supernet, not ModelDims
    assert "mixing_per_op" not in dims.to_dict()
    assert load_config(SupernetConfig, "quickstart", [])[0].mixing_per_op is False  # default: shared
    with pytest.raises(LvsearchError, match="must be true or false"):
        load_config(SupernetConfig, "quickstart", ["model.mixing_per_op=sometimes"])
    with pytest.raises(LvsearchError, match="supernet-only"):
        load_config(RetrainConfig, "retrain-quickstart", ["model.mixing_per_op=true"])


def test_per_op_alpha_supernet_resumes_exactly_and_searches(prepared_corpus: Path, tmp_path: Path, capsys):
    """A ``model.mixing_per_op`` run: resume after SIGKILL is bit-exact, ``config.json`` keeps
    the key, ``load_supernet`` rebuilds the per-op parameter, ``evolve`` and ``rank-check`` run."""
    from lvsearch.cli import main
    from lvsearch.train.supernet import load_supernet

    base = ["train-supernet", "--config", "quickstart", "--data", str(prepared_corpus),
            *_sets([*SN_SETS, "model.mixing_per_op=true"])]
    ref = _killed_run_resumes_exactly(base, prepared_corpus, tmp_path)
    rc = json.loads((ref / "config.json").read_text())
    assert rc["config"]["model"]["mixing_per_op"] is True and "mixing_per_op" not in rc["dims"]
    loaded = load_supernet(ref)
    sn = loaded.supernet
    assert sn.mixing_per_op and sn.mixing.logits.shape == (3, 4, 4)
    assert not torch.equal(sn.mixing.logits[0], sn.mixing.logits[1])  # the ops' rows were trained apart

    code = main(["evolve", "--supernet", str(ref), "--out", str(tmp_path / "ea"), "--population", "6",
                 "--iterations", "2", "--topk", "2", "--dev-sequences", "16"])
    assert code == 0, capsys.readouterr().err[-2000:]
    best = json.loads((tmp_path / "ea" / "best.json").read_text())
    assert best["meta"]["params"] == sn.extract(Arch.from_json(tmp_path / "ea" / "best.json")).num_params()
    code = main(["rank-check", "--supernet", str(ref), "--archs", "3", "--steps", "2", "--pool", "6",
                 "--dev-sequences", "16", "--out", str(tmp_path / "rc")])
    assert code == 0, capsys.readouterr().err[-2000:]
    assert "95% [" in capsys.readouterr().err  # the intervals print (rich markup once ate '[undefined, …]')
    rep = json.loads((tmp_path / "rc" / "rank_check.json").read_text())
    assert rep["num_archs"] == 3 and rep["fitness"] == "loss"  # rank-check defaults to evolve's fitness
    assert all(a["supernet_fitness"] == -a["supernet_loss"] and 0 <= a["supernet_accuracy"] <= 1 for a in rep["archs"])
