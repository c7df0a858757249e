"""Retraining on the real corpus: ELECTRA learns, sharing, model directory, resume, bad input."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import torch
from _shared import run_cli
from safetensors.torch import load_file

from lvsearch.arch import Arch
from lvsearch.config import RetrainConfig, load_config
from lvsearch.data.shards import PreparedData
from lvsearch.model import ModelDims
from lvsearch.modeldir import load_model
from lvsearch.train.retrain import Electra, build_module, generator_dims, retrain

TINY = [
    "num_slots=4",
    "model.hidden=64",
    "model.embedding=32",
    "model.ff_inner=128",
    "model.heads=2",
    "generator_size=0.5",
    "train.seq_len=32",
    "train.batch_size=16",
    "train.log_every=5",
    "eval.dev_sequences=64",
    "eval.batch_size=64",
]


def sets(*extra: str) -> list[str]:
    return [x for s in [*TINY, *extra] for x in ("--set", s)]


def test_generator_sizes_follow_electra():
    small = load_config(RetrainConfig, "retrain-small")[0].model_settings().dims(16384, 0, 128)
    assert (small.hidden, small.embedding, small.ff_inner, small.heads) == (256, 128, 1024, 4)
    g = generator_dims(small, 0.25)
    assert (g.hidden, g.heads, g.ff_inner, g.embedding) == (64, 1, 256, 128)
    base_cfg, _ = load_config(RetrainConfig, "retrain-small", ["size=base"])
    base = base_cfg.model_settings().dims(16384, 0, 128)
    assert (base.hidden, base.embedding, base.heads) == (768, 768, 12)
    assert generator_dims(base, 1 / 3).hidden == 256
    over, _ = load_config(RetrainConfig, "retrain-small", ["size=medium", "model.hidden=192", "model.heads=3"])
    assert over.model_settings().dims(100, 0, 128).hidden == 192  # explicit dims override the named size


def test_electra_shares_embeddings():
    cfg, _ = load_config(RetrainConfig, "retrain-quickstart", TINY + ["objective=electra"])
    dims = ModelDims(vocab_size=500, hidden=64, embedding=32, ff_inner=128, heads=2)
    module = build_module(cfg, Arch.sequential("sfsf"), dims)
    assert isinstance(module, Electra)
    d, g = module.discriminator.embeddings, module.generator.embeddings
    assert d.word.weight is g.word.weight and d.position.weight is g.position.weight
    params = list(module.parameters())
    assert sum(p is d.word.weight for p in params) == 1  # one parameter, trained by both losses
    assert module.generator.dims.hidden == 32


def test_electra_learns_and_model_dir_round_trips(prepared_corpus: Path, tmp_path: Path):
    run = tmp_path / "run"
    summary = retrain(
        "bert", "retrain-quickstart", prepared_corpus, run,
        overrides=TINY + ["objective=electra", "masking.probability=0.15", "train.steps=120", "train.warmup_steps=10", "train.eval_every=60", "train.lr=2e-3"],
        show_progress=False,
    )
    lines = [r for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if "lr" in r]
    first, last = lines[0], lines[-1]
    assert last["loss"] < first["loss"] - 2.0
    assert last["gen_loss"] < first["gen_loss"]
    rtd = summary["final_eval"]["rtd"]
    # The discriminator beats the "nothing replaced" base rate in log-loss (the binary entropy
    # of the replaced fraction) and ranks replaced tokens above originals. Accuracy at the 0.5
    # threshold stays at the all-original baseline this early (measured: still equal after 400
    # steps of this tiny model), so it is checked not to fall below it.
    p = 1.0 - rtd["all_original_accuracy"]
    base_rate_loss = -(p * math.log(p) + (1 - p) * math.log(1 - p))
    assert rtd["loss"] < base_rate_loss - 0.01, rtd
    assert rtd["auc"] > 0.6, rtd
    assert rtd["accuracy"] >= rtd["all_original_accuracy"] - 0.01, rtd
    curve = [json.loads(x) for x in (run / "curve.jsonl").read_text().splitlines()]
    assert [c["tokens"] for c in curve] == [60 * 16 * 32, 120 * 16 * 32]
    assert curve[-1]["loss"] == summary["final_eval"]["generator_mlm"]["loss"]

    loaded = load_model(run / "model")
    assert loaded.objective == "electra" and loaded.generator is not None
    assert loaded.arch == Arch.sequential("sfsf")
    data = PreparedData.open(prepared_corpus)
    ids = torch.from_numpy(data.sequences("dev", 32)[torch.arange(3).numpy()])
    ckpt = load_file(str(run / "checkpoints" / "step-0000120" / "model.safetensors"))
    cfg, _ = load_config(RetrainConfig, "retrain-quickstart", TINY + ["objective=electra"])
    module = build_module(cfg, loaded.arch, loaded.dims)
    module.load_state_dict(ckpt)
    module.eval()
    with torch.no_grad():
        assert torch.equal(loaded.encoder(ids), module.discriminator(ids))
        assert torch.equal(loaded.generator(ids), module.generator(ids))


def test_mlm_resume_equality_and_best_json(prepared_corpus: Path, tmp_path: Path, capsys):
    arch_file = tmp_path / "best.json"
    Arch(("DC", "SA", "FF", "DC")).to_json(arch_file, space="lvbert@4")
    run = tmp_path / "run"
    args = ["retrain", "--arch", str(arch_file), "--config", "retrain-quickstart", "--data", str(prepared_corpus), "--out", str(run)]
    extra = sets("train.steps=20", "train.checkpoint_every=10", "train.eval_every=10", "objective=mlm")
    code, out = run_cli(capsys, *args, *extra)
    assert code == 0, out
    cfg = json.loads((run / "config.json").read_text())
    assert cfg["arch"]["ops"] == "csfc" and cfg["config"]["objective"] == "mlm"

    killed = tmp_path / "killed"
    shutil.copytree(run, killed)
    shutil.rmtree(killed / "checkpoints" / "step-0000020")
    shutil.rmtree(killed / "model")
    (killed / "checkpoints" / "latest.json").write_text(json.dumps({"step": 10, "dir": "step-0000010"}))
    code, out = run_cli(capsys, "retrain", "--data", str(prepared_corpus), "--out", str(killed), "--resume")
    assert code == 0, out
    a = load_file(str(run / "model" / "model.safetensors"))
    b = load_file(str(killed / "model" / "model.safetensors"))
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert (run / "curve.jsonl").read_text() == (killed / "curve.jsonl").read_text()
    # the original command again with --resume: the space it took from best.json is the default
    # (it was refused: "sections differ: space")
    again = tmp_path / "again"
    shutil.copytree(killed, again)
    shutil.rmtree(again / "checkpoints" / "step-0000020")
    (again / "checkpoints" / "latest.json").write_text(json.dumps({"step": 10, "dir": "step-0000010"}))
    code, text = run_cli(capsys, *[a if a != str(run) else str(again) for a in args], *extra, "--resume")
    assert code == 0, text
    c = load_file(str(again / "model" / "model.safetensors"))
    assert all(torch.equal(a[k], c[k]) for k in a)
    code, text = run_cli(capsys, *[a if a != str(run) else str(again) for a in args], *extra, "--resume",
                         "--set", "train.lr=1e-2")
    assert code == 2 and "train.lr: " in text and "→ 0.01" in text  # a real change is still refused
    # --set alone applies to the recorded config: the message names that one setting, not every section
    code, text = run_cli(capsys, "retrain", "--data", str(prepared_corpus), "--out", str(again), "--resume",
                         "--set", "train.steps=40")
    assert code == 2 and "(train.steps: 20 → 40)" in text and "learning-rate schedule" in text, text

    # reference floors: in summary.json (without per-target strings), same after the resume
    s, k = (json.loads((d / "summary.json").read_text()) for d in (run, killed))
    assert set(s["floors"]) == {"unigram", "neighbour-count"} and "per_target_correct" not in json.dumps(s)
    assert s["floors"]["neighbour-count"]["tokens_seen"] == 20 * 16 * 32 == s["tokens"]
    assert s["floors"] == k["floors"] and s["floors_compared_with"] == "dev_mlm"
    assert s["beats_floor"] == (s["final_eval"]["dev_mlm"]["accuracy"] > s["floors"]["neighbour-count"]["accuracy"])
    assert "vs floors: unigram" in " ".join(out.split())


def test_retrain_bad_inputs(prepared_corpus: Path, tmp_path: Path, capsys):
    base = ["retrain", "--config", "retrain-quickstart", "--data", str(prepared_corpus)]
    code, out = run_cli(capsys, *base, "--arch", "bertt", "--out", str(tmp_path / "a"))
    assert code == 2 and "unknown reference architecture" in out and "did you mean 'bert'" in out

    wrong_slots = tmp_path / "w.json"
    Arch.sequential("sfsfsf").to_json(wrong_slots)
    code, out = run_cli(capsys, *base, "--arch", str(wrong_slots), "--out", str(tmp_path / "b"), *sets())
    assert code == 2 and str(wrong_slots) in out and "slot" in out and not (tmp_path / "b").exists()

    elc = tmp_path / "elc.json"
    Arch(("SA", "FF", "SA", "FF"), ((0,), (0, 1), (2,), (3,))).to_json(elc)
    code, out = run_cli(capsys, *base, "--arch", str(elc), "--out", str(tmp_path / "c"), *sets())
    assert code == 2 and str(elc) in out and "Traceback" not in out  # lvbert is sequential-only

    foreign = tmp_path / "foreign.json"
    Arch.sequential("sfsf").to_json(foreign, meta={"tokenizer_sha256": "0" * 64})
    code, out = run_cli(capsys, *base, "--arch", str(foreign), "--out", str(tmp_path / "d"), *sets())
    assert code == 2 and "another tokenizer" in out

    code, out = run_cli(capsys, *base, "--out", str(tmp_path / "e"))
    assert code == 2 and "--arch is required" in out

    run = tmp_path / "run"
    ok = [*base, "--arch", "bert", "--out", str(run), *sets("train.steps=2", "train.eval_every=0")]
    assert run_cli(capsys, *ok)[0] == 0
    code, out = run_cli(capsys, *ok)
    assert code == 2 and "already holds a training run" in out
    assert run_cli(capsys, *ok, "--overwrite")[0] == 0
    assert (run / "model" / "config.json").is_file()
