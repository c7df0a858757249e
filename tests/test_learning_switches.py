"""The learning-efficiency switches do what they claim: dropout 0, relative
positions, scaled init, schedules, and exact resume with the new switches on real data."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from lvsearch.arch import Arch, reference_arch
from lvsearch.cli import main
from lvsearch.config import RetrainConfig, SupernetConfig, TrainConfig, load_config
from lvsearch.errors import LvsearchError
from lvsearch.model import Encoder, ModelDims, Supernet
from lvsearch.ops.sa import SelfAttention, relative_buckets
from lvsearch.space import SearchSpace
from lvsearch.device import cpu_has_native_bf16
from lvsearch.train.loop import lr_at

V = 60


def dims(**kw) -> ModelDims:
    base = dict(vocab_size=V, hidden=16, embedding=8, ff_inner=32, heads=2, conv_kernel=5, max_len=64)
    base.update(kw)
    return ModelDims(**base)


ARCH = Arch(("SA", "DC", "FF", "SA"), inputs=((0,), (0, 1), (1, 2), (0, 2, 3)))


def test_dropout_zero_makes_train_mode_deterministic():
    ids = torch.randint(5, V, (2, 12), generator=torch.Generator().manual_seed(0))
    torch.manual_seed(0)
    with_dropout = Encoder(ARCH, dims(dropout=0.3)).train()
    torch.manual_seed(0)
    without = Encoder(ARCH, dims(dropout=0.0)).train()
    torch.manual_seed(1)
    a = with_dropout(ids)
    torch.manual_seed(2)
    b = with_dropout(ids)
    assert not torch.equal(a, b)  # the control: dropout 0.3 differs between calls
    torch.manual_seed(1)
    c = without(ids)
    torch.manual_seed(2)
    d = without(ids)
    assert torch.equal(c, d)
    without.eval()
    assert torch.allclose(without(ids), c, atol=1e-6)  # train mode equals eval mode


def test_relative_bias_is_invariant_to_shifting_all_positions():
    torch.manual_seed(0)
    sa = SelfAttention(16, 2, dropout=0.0, relative_buckets=16, relative_max_distance=32)
    with torch.no_grad():
        sa.relative_bias.normal_()
    for offset in (1, 7, 100):
        assert torch.equal(sa.position_bias(10, torch.device("cpu")),
                           sa.position_bias(10, torch.device("cpu"), offset=offset))
    # ... and it is a real position signal: not symmetric, not constant.
    bias = sa.position_bias(10, torch.device("cpu"))
    assert not torch.allclose(bias, bias.transpose(1, 2))


def test_relative_buckets_exact_near_log_far():
    d = torch.arange(-200, 201)
    b = relative_buckets(d, 32, 128)
    assert b.min() >= 0 and b.max() < 32
    near = torch.arange(-7, 8)
    assert len(set(relative_buckets(near, 32, 128).tolist())) == len(near)  # each its own bucket
    assert relative_buckets(torch.tensor([128, 500]), 32, 128).unique().numel() == 1  # saturate
    assert relative_buckets(torch.tensor([3]), 32, 128) != relative_buckets(torch.tensor([-3]), 32, 128)


def test_relative_encoder_has_no_absolute_positions_and_sees_order():
    enc = Encoder(ARCH, dims(position="relative", dropout=0.0)).eval()
    assert enc.embeddings.position is None
    assert all(k.endswith("relative_bias") for k in enc.state_dict() if "relative" in k)
    sa_keys = [k for k in enc.state_dict() if k.endswith("relative_bias")]
    assert len(sa_keys) == 2  # one per SA slot
    with torch.no_grad():
        for k in sa_keys:
            enc.state_dict()[k].normal_()
    ids = torch.tensor([[5, 6, 7, 8, 9, 10]])
    rev = ids.flip(1)
    out, out_rev = enc(ids), enc(rev)
    # A bag-of-words model would give the reversed sequence the reversed outputs.
    assert not torch.allclose(out, out_rev.flip(1), atol=1e-5)
    # Padding is still masked: appending pads does not change the real positions' outputs.
    padded = torch.cat([ids, torch.zeros(1, 3, dtype=torch.long)], dim=1)
    mask = padded != 0
    assert torch.allclose(enc(padded, mask)[:, :6], enc(ids), atol=1e-5)


def test_supernet_path_equals_encoder_with_relative_positions():
    space = SearchSpace.load("lvbert-elc").with_num_slots(4)
    d = dims(position="relative", init="scaled", dropout=0.0)
    torch.manual_seed(0)
    sn = Supernet(space, d).eval()
    enc = Encoder(ARCH, d).eval()
    enc.load_state_dict({k: v for k, v in sn.state_dict().items() if k in enc.state_dict()}, strict=True)
    ids = torch.randint(5, V, (2, 9), generator=torch.Generator().manual_seed(3))
    assert torch.allclose(sn(ids, ARCH), enc(ids), atol=1e-6)


def test_scaled_init_shrinks_residual_projections_only():
    torch.manual_seed(0)
    n = 12
    arch = reference_arch("bert", SearchSpace.load("lvbert").with_num_slots(n))
    big = dims(hidden=64, ff_inner=256, heads=2)
    plain = Encoder(arch, big)
    torch.manual_seed(0)
    scaled = Encoder(arch, ModelDims(**{**big.to_dict(), "init": "scaled"}))
    want = 0.02 / (2 * n) ** 0.5
    assert abs(float(scaled.slots["1"]["SA"].out.weight.detach().std()) - want) < 0.2 * want
    assert abs(float(scaled.slots["2"]["FF"].fc2.weight.detach().std()) - want) < 0.2 * want
    assert abs(float(plain.slots["1"]["SA"].out.weight.detach().std()) - 0.02) < 0.004
    assert torch.equal(plain.slots["1"]["SA"].qkv.weight, scaled.slots["1"]["SA"].qkv.weight)


def test_bad_switch_values_are_clear_errors():
    with pytest.raises(LvsearchError, match="position"):
        dims(position="rotary")
    with pytest.raises(LvsearchError, match="init"):
        dims(init="xavier")
    with pytest.raises(LvsearchError, match="relative_buckets"):
        dims(relative_buckets=5)
    with pytest.raises(LvsearchError, match="schedule"):
        load_config(RetrainConfig, "retrain-quickstart", ["train.schedule=step"])
    with pytest.raises(LvsearchError, match="decay_fraction"):
        load_config(RetrainConfig, "retrain-quickstart", ["train.decay_fraction=0"])


def test_schedules():
    lin = TrainConfig(steps=100, warmup_steps=10, lr=1.0)
    wsd = TrainConfig(steps=100, warmup_steps=10, lr=1.0, schedule="wsd", decay_fraction=0.2)
    cos = TrainConfig(steps=100, warmup_steps=10, lr=1.0, schedule="cosine")
    for cfg in (lin, wsd, cos):
        assert lr_at(0, cfg) == pytest.approx(0.1) and lr_at(9, cfg) == pytest.approx(1.0)
        assert lr_at(99, cfg) < 0.06 and lr_at(100, cfg) == 0.0
    assert lr_at(50, wsd) == 1.0 and lr_at(79, wsd) == 1.0  # stable phase
    assert lr_at(90, wsd) == pytest.approx(0.5)  # half-way through the 20-step cool-down
    # the phase boundaries, exactly: warm-up ends at step 9; stable from 9 up to and including
    # step 80 (the cool-down's first step still has the full rate); then (100 - step) / 20
    assert [lr_at(k, wsd) for k in (8, 9, 10, 79, 80, 81, 99)] == [0.9, 1.0, 1.0, 1.0, 1.0, 0.95, 0.05]
    assert lr_at(55, lin) == pytest.approx(0.5)
    assert lr_at(55, cos) == pytest.approx(0.5)
    assert lr_at(30, cos) > lr_at(30, lin)


def test_recipes_load_with_switches():
    for recipe in ("quickstart", "lvbert-small"):
        cfg, _ = load_config(SupernetConfig, recipe)
        ModelDims.from_dict({**cfg.model, "vocab_size": 100})
    for recipe in ("retrain-quickstart", "retrain-small"):
        cfg, _ = load_config(RetrainConfig, recipe)
        ModelDims.from_dict({**cfg.model, "vocab_size": 100})


TINY = ["num_slots=4", "model.hidden=32", "model.embedding=16", "model.ff_inner=64", "model.heads=2",
        "train.seq_len=32", "train.batch_size=8", "train.log_every=5", "eval.dev_sequences=32",
        "eval.batch_size=32", "objective=mlm", "model.position=relative", "model.init=scaled",
        "model.dropout=0.0", "masking.probability=0.4", "train.schedule=wsd",
        "train.adam_betas=[0.9,0.98]", "train.steps=20", "train.checkpoint_every=10", "train.eval_every=10"]


def test_resume_is_exact_with_the_new_switches(prepared_corpus: Path, tmp_path: Path, capsys):
    run = tmp_path / "run"
    args = ["retrain", "--arch", "random:3", "--config", "retrain-quickstart", "--data", str(prepared_corpus)]
    extra = [x for s in TINY for x in ("--set", s)]
    assert main([*args, "--out", str(run), *extra]) == 0, capsys.readouterr()
    cfg = json.loads((run / "config.json").read_text())
    assert cfg["dims"]["position"] == "relative" and cfg["config"]["train"]["schedule"] == "wsd"
    # precision auto is recorded as what it resolved to on this machine
    want = "bf16" if cpu_has_native_bf16() else "fp32"
    assert json.loads((run / "summary.json").read_text())["precision"] == want
    killed = tmp_path / "killed"
    shutil.copytree(run, killed)
    shutil.rmtree(killed / "checkpoints" / "step-0000020")
    shutil.rmtree(killed / "model")
    (killed / "checkpoints" / "latest.json").write_text(json.dumps({"step": 10, "dir": "step-0000010"}))
    for f in ("summary.json",):
        (killed / f).unlink(missing_ok=True)
    assert main(["retrain", "--data", str(prepared_corpus), "--out", str(killed), "--resume"]) == 0, capsys.readouterr()
    a = load_file(str(run / "model" / "model.safetensors"))
    b = load_file(str(killed / "model" / "model.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert not any(k.startswith("embeddings.position") for k in a)
    assert (run / "curve.jsonl").read_text() == (killed / "curve.jsonl").read_text()
