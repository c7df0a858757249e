"""Fine-tuning defaults scaled to width, runs whose training loss did not fall reported as
failed (not as a score), and imbalanced classes (issue 60): a 3-class task whose smallest class
holds 6 of 200 training rows. The defaults before issue 60 (unweighted loss, 3 epochs = 21 steps)
never predicted that class; today's (class-weighted loss on imbalanced labels, at least
MIN_STEPS steps, epoch picked on dev macro F1) must predict it in every seed. Macro F1 and
per-class precision / recall / F1 are reported, and the floor verdict uses macro F1."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest
import torch

from lvsearch.arch import Arch
from lvsearch.errors import LvsearchError
from lvsearch.eval.finetune import (FAILED_TEXT, LOSS_FELL_FRACTION, FinetuneConfig, balanced_class_weights,
                                    constant_loss, default_lr, finetune_task, loss_did_not_fall)
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


FILL = "the a of and to in was it he she that with on for at by".split()


def _keyword_sentence(rng: random.Random, keyword: str) -> str:
    """Eight filler words, three of them replaced by ``keyword``."""
    words = [rng.choice(FILL) for _ in range(8)]
    for i in rng.sample(range(8), 3):
        words[i] = keyword
    return " ".join(words)


def _keyword_task() -> TaskData:
    """A binary task any encoder can learn: the label is which of two words fills the sentence."""
    rng = random.Random(0)

    def ex(label: int) -> Example:
        return Example(_keyword_sentence(rng, "good" if label else "bad"), None, label)

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
    base = dict(epochs=3, seeds=(0,), batch_size=16, max_len=32, layer_decay=1.0, min_steps=0)  # 3 epochs, as measured
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


# --------------------------------------------------------------------------- imbalanced classes (issue 60)
KEYWORDS = ("bad", "good", "king")  # class k has KEYWORDS[k] three times in its sentence
SHARES = (0.72, 0.25, 0.03)  # class 2 is the rare one: 6 of 200 training rows


def _rare_task() -> TaskData:
    """3 classes in the shares :data:`SHARES` in every split; the label is the keyword."""
    rng = random.Random(0)

    def ex(label: int) -> Example:
        return Example(_keyword_sentence(rng, KEYWORDS[label]), None, label)

    def split(n: int) -> list[Example]:
        counts = [round(s * n) for s in SHARES]
        rows = [ex(k) for k, c in enumerate(counts) for _ in range(c)]
        rng.shuffle(rows)
        return rows

    return TaskData("rare3", "(synthetic)", "classification", list(KEYWORDS),
                    {"text_a": "sentence", "text_b": None, "label": "label"},
                    {"train": split(200), "dev": split(100), "test": split(100)}, test_labeled=True)


@pytest.fixture(scope="module")
def encoder(tokenizer):
    from lvsearch.data.tokenizer import SpecialIds

    torch.manual_seed(0)
    dims = ModelDims(vocab_size=tokenizer.get_vocab_size(), hidden=32, embedding=32, ff_inner=64, heads=2,
                     conv_kernel=3, max_len=16, dropout=0.0, pad_id=SpecialIds.of(tokenizer).pad)
    return Encoder(Arch("sf"), dims).eval()


@pytest.fixture(scope="module")
def trained(encoder, tokenizer) -> dict:
    """Today's defaults, 3 seeds (10 epochs of 7 steps each: a few seconds on one core)."""
    return finetune_task(encoder, tokenizer, _rare_task(), FinetuneConfig(max_len=16, batch_size=32))


def test_defaults_predict_the_rare_class_in_every_seed(trained):
    res = trained
    assert res["select_metric"] == "macro_f1" and "macro F1" in res["select_rule"]
    assert res["settings"]["class_weight"] == "auto" and res["settings"]["class_weights"][2] > 10
    assert res["settings"]["epochs_run"] == 10 and res["settings"]["steps"] == 70  # min_steps: up to 10 epochs, not 3
    for r in res["per_seed"]:
        assert r["status"] == "ok"
        assert r["test_per_class"]["predicted"][2] > 0 and r["never_predicted"] == [], r["test_per_class"]
        assert r["test_per_class"]["f1"][2] > 0
        assert r["dev"] == r["dev_per_epoch"][(r.get("dev_epochs") or list(range(1, 99))).index(r["best_epoch"])]
        assert r["dev"]["macro_f1"] == max(d["macro_f1"] for d in r["dev_per_epoch"])  # picked on dev macro F1
    pc = res["per_class"]["test"]["king"]
    assert pc["support"] == 3 and pc["never_predicted_seeds"] == 0 and pc["f1"]["n"] == 3
    assert res["aggregate"]["test"]["macro_f1"]["mean"] > 0.6


def test_the_old_defaults_never_predict_it(encoder, tokenizer):
    """The failure of issue 60, kept reproducible: unweighted loss and 3 epochs only."""
    old = FinetuneConfig(max_len=16, batch_size=32, seeds=(0,), class_weight="none", min_steps=0)
    res = finetune_task(encoder, tokenizer, _rare_task(), old)
    assert res["settings"]["steps"] == 21 and res["settings"]["class_weights"] is None
    assert "king" in res["per_seed"][0]["never_predicted"]
    assert res["per_class"]["test"]["king"]["never_predicted_seeds"] == 1


def test_rule_weights_baseline_and_table(encoder, tokenizer, trained):
    from lvsearch.eval.finetune_metrics import metric_label, primary_metric
    from lvsearch.eval.metrics import classification_metrics, per_class_metrics

    # the rule: accuracy on balanced labels, macro F1 on imbalanced ones (binary included)
    assert primary_metric("classification", [0, 1] * 50, 2) == "accuracy"
    assert primary_metric("classification", [0] * 80 + [1] * 20, 2) == "macro_f1"
    assert primary_metric("classification", [0] * 60 + [1] * 20 + [2] * 20, 3) == "macro_f1"
    assert metric_label("macro_f1", 3) == "macro F1 (mean over 3 classes)"
    m = classification_metrics([0, 0, 0, 1], [0, 0, 0, 0], 2)
    assert m["f1"] == 0.0 and math.isclose(m["macro_f1"], (6 / 7) / 2)
    pc = per_class_metrics([0, 0, 1, 2], [0, 1, 1, 1], 3)
    assert pc["predicted"] == [1, 3, 0] and pc["support"] == [2, 1, 1] and pc["f1"][2] == 0.0
    assert math.isclose(pc["precision"][1], 1 / 3) and pc["recall"][0] == 0.5
    # balanced weights n / (K n_k) make the constant-prediction loss ln K (the failure rule's level)
    w = balanced_class_weights([0] * 6 + [1] * 3 + [2], 3)
    assert [round(x, 4) for x in w] == [round(10 / 18, 4), round(10 / 9, 4), round(10 / 3, 4)]
    assert math.isclose(constant_loss("classification", [0] * 6 + [1] * 3 + [2], 3, w), math.log(3))
    assert math.isclose(constant_loss("classification", [0] * 6 + [1] * 4, 2, None, True), math.log(2))
    # a balanced task trains as before: no weights
    from lvsearch.eval.finetune import _prepare

    balanced = _rare_task()
    balanced.splits["train"] = [Example(e.a, e.b, i % 3) for i, e in enumerate(balanced.splits["train"])]
    assert _prepare(encoder, tokenizer, balanced, FinetuneConfig(max_len=16)).class_weights is None
    # the table: macro F1 and one F1 row per class of a multi-class task
    from lvsearch.eval.report import summary_rows

    rows = dict(summary_rows({"finetune": {"rare3": trained}}))
    assert "rare3 test macro F1 (mean over 3 classes)" in rows and "rare3 test f1 (macro over 3 classes)" not in rows
    assert rows["rare3 test F1 of class king (n=3)"].startswith(f"{trained['per_class']['test']['king']['f1']['mean']:.4f}")
    assert "precision" in rows["rare3 test F1 of class bad (n=72)"]
    # the floor is weighted as the model is, and judged on macro F1
    from lvsearch.eval.finetune_floor import finetune_floor, finetune_vs_floor

    floor = finetune_floor(_rare_task(), FinetuneConfig())
    assert floor["class_weight"] == "balanced" and floor["select_metric"] == "macro_f1"
    assert floor["test_per_class"]["support"] == [72, 25, 3]
    assert finetune_vs_floor(_rare_task(), trained, floor, n_resamples=50)["metric"] == "macro_f1"
