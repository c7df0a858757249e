"""Fine-tuning defaults scaled to width, and runs whose training loss did not
fall reported as failed (not as a score)."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest
import torch

from lvsearch.arch import Arch
from lvsearch.errors import LvsearchError
from lvsearch.eval.finetune import (FAILED_TEXT, LOSS_FELL_FRACTION, FinetuneConfig, constant_loss, default_lr,
                                    finetune_task, loss_did_not_fall)
from lvsearch.eval.tasks import Example, TaskData
from lvsearch.model import Encoder, ModelDims


def test_default_lr_scales_inversely_with_width():
    assert math.isclose(default_lr(128), 1e-3)
    assert math.isclose(default_lr(256), 5e-4)
    assert math.isclose(default_lr(768), 1e-3 * 128 / 768)
    with pytest.raises(LvsearchError, match="hidden width"):
        default_lr(0)
    FinetuneConfig().check()  # lr None (= width rule) is valid
    with pytest.raises(LvsearchError, match="--lr must be positive"):
        FinetuneConfig(lr=0.0).check()


def test_constant_loss_and_failure_rule():
    assert math.isclose(constant_loss("classification", [0, 1, 0, 1], 2), math.log(2))
    assert math.isclose(constant_loss("classification", [0, 0, 0, 1], 3), -(0.75 * math.log(0.75) + 0.25 * math.log(0.25)))
    assert math.isclose(constant_loss("regression", [1.0, 3.0], 1), 1.0)
    with pytest.raises(LvsearchError):
        constant_loss("classification", [], 2)
    ln2 = math.log(2)
    assert "did not fall" in loss_did_not_fall([0.6931, 0.6932], ln2)  # the stuck run
    assert "did not fall" in loss_did_not_fall([0.70, LOSS_FELL_FRACTION * ln2 + 1e-6], ln2)
    assert loss_did_not_fall([0.69, 0.60], ln2) is None
    assert "did not fall" in loss_did_not_fall([float("nan")], ln2)
    with pytest.raises(LvsearchError):
        loss_did_not_fall([], ln2)


@pytest.fixture(scope="module")
def tokenizer(small_corpus: Path):
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(small_corpus / "tokenizer.json"))


def _keyword_task() -> TaskData:
    """A binary task any encoder can learn: the label is which of two words fills the sentence."""
    rng = random.Random(0)
    fill = "the a of and to in was it he she that with on for at by".split()

    def ex(label: int) -> Example:
        words = [rng.choice(fill) for _ in range(8)]
        for i in rng.sample(range(8), 3):
            words[i] = "good" if label else "bad"
        return Example(" ".join(words), None, label)

    splits = {s: [ex(i % 2) for i in range(n)] for s, n in (("train", 192), ("dev", 64), ("test", 64))}
    return TaskData("keyword", "(synthetic)", "classification", ["0", "1"],
                    {"text_a": "sentence", "text_b": None, "label": "label"}, splits, test_labeled=True)


def test_run_that_cannot_learn_is_failed_and_one_that_can_is_scored(tokenizer):
    from lvsearch.data.tokenizer import SpecialIds

    torch.manual_seed(0)
    dims = ModelDims(vocab_size=tokenizer.get_vocab_size(), hidden=64, embedding=32, ff_inner=128, heads=2,
                     conv_kernel=3, max_len=32, dropout=0.0, pad_id=SpecialIds.of(tokenizer).pad)
    enc = Encoder(Arch("sfsf"), dims).eval()
    task = _keyword_task()
    base = dict(epochs=3, seeds=(0,), batch_size=16, max_len=32, layer_decay=1.0)
    stuck = finetune_task(enc, tokenizer, task, FinetuneConfig(lr=1e-8, **base))
    learns = finetune_task(enc, tokenizer, task, FinetuneConfig(**base))  # default lr: 1e-3 × 128 / 64

    assert stuck["status"] == "failed" and stuck["failed_seeds"] == [0]
    assert stuck["per_seed"][0]["status"] == "failed" and "did not fall" in stuck["per_seed"][0]["failure"]
    assert stuck["aggregate"]["test"]["accuracy"]["n"] == 0 and stuck["aggregate_all_seeds"]["test"]["accuracy"]["n"] == 1
    assert math.isclose(stuck["constant_loss"], math.log(2))
    assert stuck["settings"]["lr_rule"] == "--lr"

    assert learns["status"] == "done" and learns["failed_seeds"] == []
    assert learns["settings"]["lr"] == pytest.approx(2e-3) and learns["settings"]["lr_rule"].startswith("default")
    loss = learns["per_seed"][0]["train_loss_per_epoch"]
    assert loss[-1] < LOSS_FELL_FRACTION * math.log(2)
    assert learns["aggregate"]["test"]["accuracy"]["mean"] > 0.75

    # evaluate's table: the failed task is shown as failed, not as a score
    from lvsearch.eval.report import summary_rows

    report = {"finetune": {"stuck": stuck, "learns": learns}}
    rows = dict(summary_rows(report))
    assert rows["stuck test accuracy"] == FAILED_TEXT
    assert rows["learns test accuracy"].startswith(f"{learns['aggregate']['test']['accuracy']['mean']:.4f}")
    # one of two seeds failed: the score is over the other and says so
    partial = dict(learns, per_seed=[learns["per_seed"][0], stuck["per_seed"][0]], failed_seeds=[1])
    assert "n=1; 1 of 2 seeds failed (loss did not fall)" in dict(summary_rows({"finetune": {"p": partial}}))["p test accuracy"]

    # the quickstart report leaves failed seeds out of the pooled task scores
    from lvsearch.quickstart.outcomes import task_scores

    assert task_scores(report)["stuck"] == ("test accuracy", [])
    assert task_scores(report)["learns"][1] == [learns["per_seed"][0]["test"]["accuracy"]]
