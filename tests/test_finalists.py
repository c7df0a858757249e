"""Finalist pruning in retrain on the real corpus: the prefix property it relies on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from lvsearch.arch import Arch
from lvsearch.errors import LvsearchError
from lvsearch.modeldir import load_model
from lvsearch.train.retrain import retrain

TINY = [
    "num_slots=4", "model.hidden=64", "model.embedding=32", "model.ff_inner=128", "model.heads=2",
    "train.seq_len=32", "train.batch_size=16", "train.log_every=1", "train.lr=3e-3", "train.warmup_steps=2",
    "train.eval_every=2", "train.checkpoint_every=0", "objective=mlm", "eval.dev_sequences=64", "eval.batch_size=64",
]


def test_stop_at_is_an_exact_prefix_of_the_full_run(prepared_corpus: Path, tmp_path: Path):
    over = TINY + ["train.steps=12"]
    full = retrain("bert", "retrain-quickstart", prepared_corpus, tmp_path / "full", overrides=over, show_progress=False)
    part = tmp_path / "part"
    s = retrain("bert", "retrain-quickstart", prepared_corpus, part, overrides=over, show_progress=False, stop_at=4)
    assert (s["steps"], s["target_steps"], s["tokens"]) == (4, 12, 4 * 16 * 32)
    assert load_model(part / "model").arch == Arch.sequential("sfsf")  # a usable model dir at the stop
    lr = {r["step"]: r["lr"] for r in map(json.loads, (tmp_path / "full" / "metrics.jsonl").read_text().splitlines()) if "lr" in r}
    part_lr = {r["step"]: r["lr"] for r in map(json.loads, (part / "metrics.jsonl").read_text().splitlines()) if "lr" in r}
    assert part_lr == {k: lr[k] for k in (1, 2, 3, 4)}  # the full budget's schedule, not one ending at 4
    assert retrain(None, None, prepared_corpus, part, resume=True, show_progress=False, stop_at=8)["steps"] == 8
    assert retrain(None, None, prepared_corpus, part, resume=True, show_progress=False)["steps"] == 12
    a = load_file(str(tmp_path / "full" / "model" / "model.safetensors"))
    b = load_file(str(part / "model" / "model.safetensors"))
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert (tmp_path / "full" / "curve.jsonl").read_text() == (part / "curve.jsonl").read_text()
    assert full["final_eval"]["dev_mlm"] == json.loads((part / "summary.json").read_text())["final_eval"]["dev_mlm"]
    with pytest.raises(LvsearchError, match="stop_at"):
        retrain(None, None, prepared_corpus, part, resume=True, show_progress=False, stop_at=13)
