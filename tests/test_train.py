"""Supernet training on the real corpus: learning, exact resume, torchrun equality, bad input."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import torch
from _shared import run_cli
from safetensors.torch import load_file

from lvsearch.config import SamplingConfig, SupernetConfig, load_config, parse_overrides
from lvsearch.data.prepare import PrepareSettings, prepare
from lvsearch.data.shards import PreparedData
from lvsearch.errors import LvsearchError
from lvsearch.model import Supernet
from lvsearch.space import SearchSpace
from lvsearch.train.distributed import DistInfo
from lvsearch.train.loop import lr_at
from lvsearch.train.objectives import evaluate_mlm
from lvsearch.train.supernet import (
    ArchSampler,
    SupernetObjective,
    build_space,
    load_supernet,
    train_supernet,
)

TINY = [
    "num_slots=6",
    "model.hidden=64",
    "model.embedding=32",
    "model.ff_inner=128",
    "model.heads=2",
    "train.seq_len=32",
    "train.batch_size=16",
    "train.log_every=5",
    "eval.dev_sequences=64",
    "eval.batch_size=64",
]


def tiny(*extra: str) -> list[str]:
    return TINY + list(extra)


def weights(run: Path, step: int) -> dict[str, torch.Tensor]:
    return load_file(str(run / "checkpoints" / f"step-{step:07d}" / "model.safetensors"))


# ----------------------------------------------------------------------------------------
# Config
# ----------------------------------------------------------------------------------------


def test_recipe_unknown_key_names_nearest(tmp_path: Path):
    with pytest.raises(LvsearchError, match=r"(?s)unknown config key 'train.lrr'.*did you mean 'lr'"):
        load_config(SupernetConfig, "quickstart", ["train.lrr=1e-3"])
    with pytest.raises(LvsearchError, match=r"model.hiden"):
        load_config(SupernetConfig, "quickstart", ["model.hiden=64"])
    bad = tmp_path / "r.yaml"
    bad.write_text("trian:\n  steps: 3\n")
    with pytest.raises(LvsearchError, match=rf"(?s){bad}.*unknown config key 'trian'.*did you mean 'train'"):
        load_config(SupernetConfig, str(bad))
    with pytest.raises(LvsearchError, match="train.steps must be int"):
        load_config(SupernetConfig, "quickstart", ["train.steps=many"])
    with pytest.raises(LvsearchError, match="recipe not found"):
        load_config(SupernetConfig, "no-such-recipe")
    assert parse_overrides(["train.steps=7", "eval.panel=[bert]"]) == {"train": {"steps": 7}, "eval": {"panel": ["bert"]}}
    cfg, _ = load_config(SupernetConfig, "quickstart", ["train.lr=3e-4"])  # YAML 1.1 reads 3e-4 as a string
    assert cfg.train.lr == 3e-4


def test_lvbert_small_recipe_is_the_paper_setting():
    cfg, _ = load_config(SupernetConfig, "lvbert-small")
    assert (cfg.model["hidden"], cfg.model["embedding"], cfg.model["ff_inner"], cfg.model["heads"]) == (256, 128, 1024, 4)
    assert (cfg.train.lr, cfg.train.warmup_steps, cfg.train.batch_size, cfg.train.seq_len) == (2e-4, 10000, 128, 128)
    assert build_space(cfg).num_slots == 24


def test_model_settings_are_checked_when_the_recipe_loads():
    """One step checks a recipe's model section, names and values, before any data is read,
    and the same step builds the run's dims (supernet and retrain alike)."""
    from lvsearch.config import RetrainConfig

    with pytest.raises(LvsearchError, match=r"with --set overrides: model dims: hidden 250 is not divisible by heads 4"):
        load_config(SupernetConfig, "lvbert-small", ["model.hidden=250"])
    with pytest.raises(LvsearchError, match="not divisible"):  # the named size's heads (6) with an explicit hidden
        load_config(RetrainConfig, "retrain-small", ["size=medium", "model.hidden=256"])
    with pytest.raises(LvsearchError, match="conv_kernel must be odd"):
        load_config(RetrainConfig, "retrain-small", ["model.conv_kernel=4"])
    with pytest.raises(LvsearchError, match=r"(?s)unknown config key 'model.hiden'.*did you mean 'hidden'"):
        load_config(SupernetConfig, "quickstart", ["model.hiden=8"])
    with pytest.raises(LvsearchError, match="model.vocab_size"):  # from the data, never the recipe
        load_config(SupernetConfig, "quickstart", ["model.vocab_size=8"])
    cfg, _ = load_config(SupernetConfig, "quickstart", ["model.hidden=96", "model.heads=3", "train.seq_len=1024"])
    dims = cfg.model_settings().dims(500, 3, cfg.train.seq_len)
    assert (dims.hidden, dims.heads, dims.vocab_size, dims.pad_id, dims.max_len) == (96, 3, 500, 3, 1024)
    rc, _ = load_config(RetrainConfig, "retrain-small", ["size=medium", "model.heads=3"])
    d = rc.model_settings().dims(500, 0, 128)
    assert (d.hidden, d.heads, d.ff_inner, d.max_len) == (384, 3, 1536, 512)  # size, then explicit keys


def test_lr_schedule_warmup_then_linear_decay():
    cfg, _ = load_config(SupernetConfig, "quickstart", ["train.steps=100", "train.warmup_steps=10", "train.lr=1.0"])
    lrs = [lr_at(s, cfg.train) for s in range(100)]
    assert lrs[0] == pytest.approx(0.1) and lrs[9] == pytest.approx(1.0)
    assert all(a >= b for a, b in zip(lrs[9:], lrs[10:])) and lrs[-1] == pytest.approx(1 / 90)


# ----------------------------------------------------------------------------------------
# Sampling
# ----------------------------------------------------------------------------------------


def test_fair_sampling_trains_every_op_once_per_block():
    space = SearchSpace.load("lvbert").with_num_slots(8)
    sampler = ArchSampler(space, SamplingConfig(strategy="fair"), seed=3)
    for block in range(4):
        archs = [sampler(block * 3 + i) for i in range(3)]
        for slot in range(8):
            assert sorted(a.ops[slot] for a in archs) == sorted(space.ops)
    uniform = ArchSampler(space, SamplingConfig(), seed=3)
    assert [uniform(s) for s in range(20)] == [uniform(s) for s in range(20)]
    counts = Counter(op for s in range(300) for op in uniform(s).ops)
    assert min(counts.values()) > 0.25 * sum(counts.values())


def test_elc_sampling_keeps_previous_output():
    space = SearchSpace.load("lvbert-elc").with_num_slots(6)
    sampler = ArchSampler(space, SamplingConfig(keep_input_prob=0.5, dense_prob=0.2), seed=0)
    archs = [sampler(s) for s in range(50)]
    assert all(n - 1 in a.inputs[n - 1] for a in archs for n in range(1, 7))
    assert any(not a.is_sequential for a in archs)


# ----------------------------------------------------------------------------------------
# Training on the shared corpus
# ----------------------------------------------------------------------------------------


def test_supernet_learns_and_resumes_exactly(prepared_corpus: Path, tmp_path: Path):
    run = tmp_path / "run"
    sets = tiny("train.steps=50", "train.warmup_steps=5", "train.eval_every=50", "train.checkpoint_every=25", "train.lr=2e-3")
    summary = train_supernet("quickstart", prepared_corpus, run, overrides=sets, show_progress=False)

    # dev MLM loss of the panel fell compared with the same supernet untrained
    data = PreparedData.open(prepared_corpus)
    cfg, _ = load_config(SupernetConfig, "quickstart", sets)
    torch.manual_seed(cfg.train.seed)
    untrained = Supernet(build_space(cfg), cfg.model_settings().dims(data.vocab_size, data.special_ids.pad, cfg.train.seq_len)).eval()
    objective = SupernetObjective(untrained, data, cfg, DistInfo(0, 1, 0, torch.device("cpu")))
    before = objective.evaluate(objective.module, 0)["panel"]
    after = summary["final_eval"]["panel"]
    assert set(after) == {"bert", "sandwich", "random:1", "random:2", "random:3"}
    for name in after:
        assert after[name]["loss"] < before[name]["loss"] - 1.0, (name, before[name], after[name])
    lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in lines if "loss" in r] == list(range(5, 55, 5))
    assert all(len(r["arch"]) == 6 for r in lines if "arch" in r)

    # "kill" after the step-25 checkpoint: keep only what was on disk then, and resume
    killed = tmp_path / "killed"
    shutil.copytree(run, killed)
    shutil.rmtree(killed / "checkpoints" / "step-0000050")
    (killed / "checkpoints" / "latest.json").write_text(json.dumps({"step": 25, "dir": "step-0000025"}))
    (killed / "summary.json").unlink()
    train_supernet(None, prepared_corpus, killed, resume=True, show_progress=False)
    a, b = weights(run, 50), weights(killed, 50)
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    assert set(summary["floors"]) == {"unigram", "neighbour-count"}
    assert summary["floors"]["unigram"]["tokens_seen"] == summary["tokens"]
    assert set(summary["beats_floor"]) == set(after)
    assert json.loads((killed / "summary.json").read_text())["floors"] == summary["floors"]
    resumed_lines = [json.loads(x) for x in (killed / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in resumed_lines if "loss" in r] == list(range(5, 55, 5))  # no duplicates

    # the run loads back as a supernet whose extracted encoder matches it
    loaded = load_supernet(run)
    assert loaded.step == 50 and loaded.space.num_slots == 6
    arch = loaded.space.sample(__import__("random").Random(0))
    ids = torch.from_numpy(data.sequences("dev", 32)[torch.arange(4).numpy()])
    with torch.no_grad():
        assert torch.equal(loaded.supernet(ids, arch), loaded.supernet.extract(arch).eval()(ids))
    dev = objective.dev
    r = evaluate_mlm(lambda x: loaded.supernet(x, objective.panel["bert"]), loaded.supernet, dev, 64, torch.device("cpu"))
    assert r["loss"] == pytest.approx(after["bert"]["loss"], rel=1e-6)


def test_resume_errors(prepared_corpus: Path, tmp_path: Path, real_lines: list[str], capsys):
    run = tmp_path / "run"
    base = ["train-supernet", "--config", "quickstart", "--data", str(prepared_corpus), "--out", str(run)]
    sets = [x for s in tiny("train.steps=4", "train.checkpoint_every=2", "train.eval_every=0") for x in ("--set", s)]
    assert run_cli(capsys, *base, *sets)[0] == 0

    code, out = run_cli(capsys, *base, *sets)  # same --out again without --resume
    assert code == 2 and "already holds a training run" in out and "--resume" in out and "--overwrite" in out

    code, out = run_cli(capsys, *base, *sets, "--set", "train.lr=0.5", "--resume")
    assert code == 2 and "different configuration" in out and "train.lr: " in out
    # --set alone (no --config): the recorded config with that pair, so only it is named
    code, out = run_cli(capsys, "train-supernet", "--data", str(prepared_corpus), "--out", str(run), "--resume",
                        "--set", "train.steps=8")
    assert code == 2 and "(train.steps: 4 → 8)" in out, out

    # a data folder prepared with another tokenizer
    corpus = tmp_path / "c" / "a.txt"
    corpus.parent.mkdir()
    corpus.write_text("\n\n".join("\n".join(real_lines[i : i + 20]) for i in range(0, 2000, 20)))
    other = tmp_path / "other"
    prepare([str(corpus)], other, PrepareSettings(vocab_size=1000, min_frequency=1, dev_fraction=0.1), show_progress=False)
    code, out = run_cli(capsys, "train-supernet", "--data", str(other), "--out", str(run), "--resume")
    assert code == 2 and "another tokenizer" in out and str(prepared_corpus) in out

    # truncated checkpoint: detected, never loaded silently
    ckpt = run / "checkpoints" / "step-0000004" / "model.safetensors"
    ckpt.write_bytes(ckpt.read_bytes()[:-100])
    before = sorted(p.name for p in (run / "checkpoints").iterdir())
    code, out = run_cli(capsys, "train-supernet", "--data", str(prepared_corpus), "--out", str(run), "--resume")
    assert code == 2 and "truncated or modified" in out and str(ckpt) in out and "Traceback" not in out
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == before

    # missing checkpoint folder
    shutil.rmtree(run / "checkpoints" / "step-0000004")
    code, out = run_cli(capsys, "train-supernet", "--data", str(prepared_corpus), "--out", str(run), "--resume")
    assert code == 2 and "checkpoint not found" in out

    code, out = run_cli(capsys, "train-supernet", "--data", str(prepared_corpus), "--out", str(tmp_path / "none"), "--resume")
    assert code == 2 and "holds no run" in out

    code, out = run_cli(capsys, *base[:-1], str(tmp_path / "n2"), "--set", "model.hiden=3")
    assert code == 2 and "did you mean 'hidden'" in out and not (tmp_path / "n2").exists()

    code, out = run_cli(capsys, "train-supernet", "--config", "quickstart", "--data", str(tmp_path / "nodata"), "--out", str(tmp_path / "n3"))
    assert code == 2 and "data folder not found" in out


TORCHRUN_TIMEOUT = 300


def test_two_process_gloo_equals_single_process(prepared_corpus: Path, tmp_path: Path):
    # fp32: the claim is that only the reduction order differs; bf16 autocast (what precision
    # auto picks on CPUs with native bf16) would round those differences up to bf16 precision.
    sets = tiny("train.steps=6", "train.checkpoint_every=6", "train.eval_every=0", "model.dropout=0.0", "train.lr=2e-3",
                "train.precision=fp32")
    single = tmp_path / "single"
    train_supernet("quickstart", prepared_corpus, single, overrides=sets, show_progress=False)
    ddp = tmp_path / "ddp"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", "29731",
           "-m", "lvsearch", "train-supernet", "--config", "quickstart", "--data", str(prepared_corpus), "--out", str(ddp)]
    for s in sets:
        cmd += ["--set", s]
    env = {**os.environ, "LVSEARCH_QUIET": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TORCHRUN_TIMEOUT, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads((ddp / "config.json").read_text())["world_size"] == 2
    a, b = weights(single, 6), weights(ddp, 6)
    worst = max((a[k] - b[k]).abs().max().item() for k in a)
    assert worst < 1e-4, f"max weight difference {worst}"  # only reduction order differs
    # ... a tolerance far below how far training moved the weights
    data = PreparedData.open(prepared_corpus)
    cfg, _ = load_config(SupernetConfig, "quickstart", sets)
    torch.manual_seed(cfg.train.seed)
    init = Supernet(build_space(cfg), cfg.model_settings().dims(data.vocab_size, data.special_ids.pad, cfg.train.seq_len)).state_dict()
    moved = max((a[k] - init[k.removeprefix("net.")]).abs().max().item() for k in a)
    assert moved > 100 * worst


def test_ctrl_c_saves_a_checkpoint_and_resume_is_exact(prepared_corpus: Path, tmp_path: Path):
    import signal
    import time

    sets = tiny("train.steps=30", "train.checkpoint_every=1000", "train.eval_every=0", "train.log_every=1")
    flags = [x for s in sets for x in ("--set", s)]
    run = tmp_path / "run"
    cmd = [sys.executable, "-m", "lvsearch", "train-supernet", "--config", "quickstart", "--data", str(prepared_corpus),
           "--out", str(run), *flags]
    env = {**os.environ, "LVSEARCH_QUIET": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline:
        metrics = run / "metrics.jsonl"
        if metrics.is_file() and len(metrics.read_text().splitlines()) >= 3:
            break
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "checkpoint saved at step" in err and "Traceback" not in err
    saved = json.loads((run / "checkpoints" / "latest.json").read_text())["step"]
    assert 3 <= saved < 30
    train_supernet(None, prepared_corpus, run, resume=True, show_progress=False)
    straight = tmp_path / "straight"
    train_supernet("quickstart", prepared_corpus, straight, overrides=sets, show_progress=False)
    a, b = weights(run, 30), weights(straight, 30)
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_recipe_of_the_other_command_named_clearly(prepared_corpus, tmp_path, capsys):
    from lvsearch.cli import main

    data = str(prepared_corpus)
    assert main(["train-supernet", "--config", "retrain-quickstart", "--data", data, "--out",
                 str(tmp_path / "a")]) == 2
    err = capsys.readouterr().err
    assert "is a 'retrain' recipe" in err and "lvsearch retrain --config" in err and "Traceback" not in err
    assert main(["retrain", "--config", "quickstart", "--arch", "bert", "--data", data, "--out",
                 str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert "is a 'train-supernet' recipe" in err and not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
