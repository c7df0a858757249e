"""The fine-tuning floor (lvsearch.eval.finetune_floor.finetune_floor): fitted on the training examples
only, C picked on dev only, test scored once; the paired bootstrap against a model's seeds."""

from __future__ import annotations

import random

import pytest

from lvsearch.eval.finetune import FinetuneConfig, training_examples
from lvsearch.eval.tasks import Example, TaskData
from lvsearch.eval.finetune_floor import finetune_floor, finetune_vs_floor

pytest.importorskip("sklearn")

POS, NEG = ["good", "great", "fine", "nice"], ["bad", "awful", "poor", "dull"]


def _task(seed: int = 0, dev_flip: bool = False, test_flip: bool = False, n: int = 200) -> TaskData:
    rng = random.Random(seed)

    def ex(flip: bool) -> Example:
        y = rng.randrange(2)
        words = rng.sample(POS if y else NEG, 2) + rng.sample(["the", "film", "was", "a", "plot"], 3)
        return Example(" ".join(words), None, (1 - y) if flip else y)

    splits = {"train": [ex(False) for _ in range(n)], "dev": [ex(dev_flip) for _ in range(60)],
              "test": [ex(test_flip) for _ in range(60)]}
    return TaskData("toy", "toy", "classification", ["0", "1"], {"text_a": "sentence", "text_b": None, "label": "label"},
                    splits, test_labeled=True)


def test_fit_uses_training_examples_only_and_dev_only_picks_c():
    cfg = FinetuneConfig(train_limit=120)
    base = finetune_floor(_task(), cfg)
    assert base["train_used"] == len(training_examples(_task(), cfg)) == 120
    assert base["test"]["accuracy"] > 0.95 and base["dev"]["accuracy"] > 0.95
    # C is the best dev score of the grid (ties: the first, smallest C)
    best = max(base["dev_per_c"].values(), key=lambda m: m["accuracy"])["accuracy"]
    first = next(c for c, m in base["dev_per_c"].items() if m["accuracy"] == best)
    assert f"{base['C']:g}" == first
    # Dev labels flipped: the fit is unchanged (same test predictions at one fixed C), only dev scores move.
    one = finetune_floor(_task(), cfg, c_grid=(1.0,))
    flipped_dev = finetune_floor(_task(dev_flip=True), cfg, c_grid=(1.0,))
    assert flipped_dev["test_predictions"] == one["test_predictions"]
    assert flipped_dev["dev"]["accuracy"] == pytest.approx(1 - one["dev"]["accuracy"])
    # Test labels flipped: C and dev are unchanged (test never selects), the test score mirrors.
    flipped_test = finetune_floor(_task(test_flip=True), cfg)
    assert flipped_test["C"] == base["C"] and flipped_test["dev_per_c"] == base["dev_per_c"]
    assert flipped_test["test"]["accuracy"] == pytest.approx(1 - base["test"]["accuracy"])


def test_bootstrap_against_model_seeds():
    task = _task()
    cfg = FinetuneConfig()
    floor = finetune_floor(task, cfg)
    y = [e.label for e in task.splits["test"]]
    chance = [i % 2 for i in range(len(y))]
    result = {"select_metric": "accuracy", "settings": {"eval_limit": None},
              "per_seed": [{"status": "ok", "test_predictions": chance}, {"status": "failed", "test_predictions": y}]}
    cmp = finetune_vs_floor(task, result, floor)
    assert cmp["model"] == pytest.approx(sum(a == b for a, b in zip(chance, y)) / len(y))  # the failed seed is left out
    assert cmp["ci"][1] < 0 and not cmp["beats"] and cmp["excludes_zero"]
    perfect = {**result, "per_seed": [{"status": "ok", "test_predictions": y}]}
    assert finetune_vs_floor(task, perfect, floor)["difference"] >= 0
    mcc = finetune_vs_floor(task, {**perfect, "select_metric": "mcc"}, floor, n_resamples=50)
    assert mcc["metric"] == "mcc" and mcc["model"] == pytest.approx(1.0)
    assert finetune_vs_floor(task, {**result, "per_seed": [{"status": "ok", "test_predictions": None}]}, floor) is None


def test_mean_pooling_reads_every_real_token_and_nothing_else():
    import torch

    from lvsearch.eval.finetune import _make_classifier

    class Enc(torch.nn.Module):  # hidden state = the token id, broadcast over 2 features
        def __init__(self):
            super().__init__()
            self.dims = type("D", (), {"hidden": 2})()
            self.mlm_head = torch.nn.Linear(1, 1)

        def forward(self, ids, mask):
            return ids[:, :, None].float().expand(-1, -1, 2)

    ids = torch.tensor([[2, 4, 6, 0], [8, 0, 0, 0]])
    mask = ids != 0
    for pooling, want in (("mean", [[4.0, 4.0], [8.0, 8.0]]), ("cls", [[2.0, 2.0], [8.0, 8.0]])):
        clf = _make_classifier(Enc(), 2, 0.0, pooling).eval()
        with torch.no_grad():
            clf.head.weight.copy_(torch.eye(2))
            clf.head.bias.zero_()
            assert clf(ids, mask).tolist() == want, pooling
    from lvsearch.errors import LvsearchError

    with pytest.raises(LvsearchError, match="pooling"):
        FinetuneConfig(pooling="max").check()
