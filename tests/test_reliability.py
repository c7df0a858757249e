"""Issue 14 regressions: no non-finite checkpoint, finished runs stay finished, the parameter
count equals what is saved, bad --max-params, one-seed spreads, file permissions."""

from __future__ import annotations

import math
import os
import random
import re
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from lvsearch.cli import main
from lvsearch.errors import LvsearchError
from lvsearch.io import umask
from lvsearch.model import Encoder, ModelDims, Supernet
from lvsearch.space import SearchSpace
from lvsearch.train.retrain import retrain
from lvsearch.train.supernet import train_supernet

SUPERNET_TINY = [
    "num_slots=4", "model.hidden=32", "model.embedding=16", "model.ff_inner=64", "model.heads=2",
    "train.seq_len=32", "train.batch_size=8", "train.log_every=5", "eval.dev_sequences=32", "eval.batch_size=32",
]
RETRAIN_TINY = [
    "num_slots=4", "model.hidden=32", "model.embedding=16", "model.ff_inner=64", "model.heads=2",
    "train.seq_len=32", "train.batch_size=8", "train.log_every=5", "eval.dev_sequences=32", "eval.batch_size=32",
    "objective=mlm",
]


def printed(capsys) -> str:
    """What the console printed (stdout + stderr), line wrapping undone."""
    out, err = capsys.readouterr()
    return " ".join((out + err).split())


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``folder``: bytes and modification time (ns)."""
    return {str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}


# ------------------------------------------------------------------ 1. divergence
@pytest.mark.parametrize("every", [5, 1])  # the repro (diverges at step 3), and checkpoints before it
def test_diverging_run_never_writes_a_nonfinite_checkpoint(prepared_corpus: Path, tmp_path: Path, every: int):
    run = tmp_path / "run"
    sets = SUPERNET_TINY + ["train.steps=60", "train.lr=1e9", "train.warmup_steps=0", f"train.checkpoint_every={every}",
                            "train.log_every=10", "train.eval_every=0"]
    with pytest.raises(LvsearchError, match="training diverged at step") as err:
        train_supernet("quickstart", prepared_corpus, run, overrides=sets, show_progress=False)
    msg = str(err.value)
    folders = sorted((run / "checkpoints").glob("step-*"))
    for folder in folders:
        for name in ("model.safetensors", "optimizer.safetensors"):
            tensors = load_file(str(folder / name))
            assert all(torch.isfinite(t).all() for t in tensors.values()), f"{folder / name} holds non-finite values"
    if every == 1:
        assert folders
    if folders:
        assert str(folders[-1]) in msg and "last good checkpoint" in msg
    else:
        assert "no checkpoint was written" in msg
    assert "lower train.lr" in msg


# ------------------------------------------------------------------ 2. finished runs
def test_resume_of_finished_supernet_changes_nothing_and_kill_before_summary_recovers(
        prepared_corpus: Path, tmp_path: Path, capsys):
    run = tmp_path / "sn"
    sets = SUPERNET_TINY + ["train.steps=4", "train.checkpoint_every=2", "train.eval_every=0"]
    first = train_supernet("quickstart", prepared_corpus, run, overrides=sets, show_progress=False)
    assert first["final_eval"]
    before = snapshot(run)
    capsys.readouterr()
    again = train_supernet(None, prepared_corpus, run, resume=True, show_progress=False)
    assert "already finished" in printed(capsys)
    assert snapshot(run) == before
    assert again["final_eval"] == first["final_eval"]

    # killed between the final checkpoint and the summary write
    (run / "summary.json").unlink()
    recovered = train_supernet(None, prepared_corpus, run, resume=True, show_progress=False)
    assert recovered["final_eval"] == first["final_eval"] and recovered["steps"] == 4
    from lvsearch.io import read_json

    assert read_json(run / "summary.json")["final_eval"] == first["final_eval"]


def test_resume_of_finished_retrain_changes_nothing_and_kill_before_summary_recovers(
        prepared_corpus: Path, tmp_path: Path, capsys):
    from lvsearch.io import read_json

    run = tmp_path / "rt"
    sets = RETRAIN_TINY + ["train.steps=6", "train.checkpoint_every=2", "train.eval_every=0"]
    stopped = retrain("bert", "retrain-quickstart", prepared_corpus, run, overrides=sets, show_progress=False, stop_at=4)
    assert stopped["final_eval"] and stopped["steps"] == 4
    before = snapshot(run)
    capsys.readouterr()
    # resumed at its stop: finished there (what finalist pruning does)
    again = retrain(None, None, prepared_corpus, run, resume=True, show_progress=False, stop_at=4)
    assert "already finished" in printed(capsys)
    assert snapshot(run) == before and again["final_eval"] == stopped["final_eval"]

    full = retrain(None, None, prepared_corpus, run, resume=True, show_progress=False)
    assert full["steps"] == 6 and full["final_eval"]
    before = snapshot(run)
    retrain(None, None, prepared_corpus, run, resume=True, show_progress=False)
    assert "already finished" in printed(capsys)
    assert snapshot(run) == before

    # killed between the final checkpoint and the summary write: the old (stop_at) summary is left
    (run / "summary.json").write_bytes(before["summary.json"][0].replace(b'"steps": 6', b'"steps": 4'))
    recovered = retrain(None, None, prepared_corpus, run, resume=True, show_progress=False)
    assert recovered["steps"] == 6 and recovered["final_eval"] == full["final_eval"]
    assert read_json(run / "summary.json")["final_eval"] == full["final_eval"]
    assert read_json(run / "model" / "config.json")["extra"]["steps"] == 6


# ------------------------------------------------------------------ 3. parameter count
def test_elc_num_params_equals_saved_size(tmp_path: Path):
    from lvsearch.modeldir import save_model_dir

    space = SearchSpace.load("lvbert-elc").with_num_slots(6)
    d = ModelDims(vocab_size=50, hidden=16, embedding=8, ff_inner=32, heads=2, conv_kernel=5, max_len=32)
    sn = Supernet(space, d)
    tok = tmp_path / "tokenizer.json"
    tok.write_text("{}")
    checked = 0
    for seed in range(6):
        arch = space.sample(random.Random(seed), dense_prob=0.5)
        enc = sn.extract(arch)
        folder = save_model_dir(tmp_path / f"m{seed}", enc, arch=arch, dims=d, tokenizer_path=tok,
                                objective="mlm", training_args={})
        saved = sum(t.numel() for t in load_file(str(folder / "model.safetensors")).values())
        assert enc.num_params() == saved == sn.num_params(arch)
        checked += enc.mixing is not None
    assert checked  # some sampled arch mixes several inputs (holds the α matrix)


# ------------------------------------------------------------------ 4. smaller ones
@pytest.mark.parametrize("flag,value", [("--max-params", "-1"), ("--max-params", "0"), ("--max-flops", "-5")])
def test_nonpositive_resource_bounds_are_refused(tmp_path: Path, capsys, flag: str, value: str):
    code = main(["evolve", "--supernet", str(tmp_path / "sn"), "--out", str(tmp_path / "s"), flag, value])
    out = "".join(capsys.readouterr())
    assert code == 2 and f"{flag} must be a positive number" in out and "Traceback" not in out
    assert not (tmp_path / "s").exists()


def test_one_seed_reports_no_spread():
    from lvsearch.eval.finetune import _summary
    from lvsearch.eval.report import summary_rows

    one = _summary([0.75])
    assert one["std"] is None and one["n"] == 1
    assert math.isclose(_summary([0.5, 0.7])["std"], 0.2 / math.sqrt(2))
    report = {"finetune": {"rte": {"aggregate": {"dev": {"accuracy": one}}, "per_seed": [{}], "failed_seeds": []}}}
    text = " ".join(v for _, v in summary_rows(report))
    assert "± 0.0000" not in text and "0.7500 ± unmeasured (1 seed)" in text


def test_weight_files_have_the_usual_permissions(tmp_path: Path):
    from lvsearch.modeldir import save_model_dir
    from lvsearch.train.checkpoint import save_checkpoint
    from lvsearch.arch import Arch

    want = 0o666 & ~umask()
    d = ModelDims(vocab_size=50, hidden=16, embedding=8, ff_inner=32, heads=2, conv_kernel=5, max_len=32)
    enc = Encoder(Arch.sequential("sf"), d)
    opt = torch.optim.AdamW(enc.parameters())
    enc(torch.ones(1, 4, dtype=torch.long)).sum().backward()
    opt.step()
    ckpt = save_checkpoint(tmp_path / "run", 1, enc, opt, {})
    tok = tmp_path / "tokenizer.json"
    tok.write_text("{}")
    model = save_model_dir(tmp_path / "model", enc, arch=enc.arch, dims=d, tokenizer_path=tok, objective="mlm",
                           training_args={})
    files = [p for p in [*ckpt.iterdir(), *model.iterdir()] if p.is_file()]
    assert {p.name for p in files} >= {"model.safetensors", "optimizer.safetensors", "state.json", "config.json"}
    modes = {p.name: oct(os.stat(p).st_mode & 0o777) for p in files}
    assert set(modes.values()) == {oct(want)}, modes
    assert re.fullmatch(r"step-0000001", ckpt.name)
