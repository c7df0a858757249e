"""Reference floors (lvsearch.eval.floors): hand counts, same targets as the model metrics,
the exact training sample, weighted counting, and the floor rows of evaluate / report."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from lvsearch.arch import Arch
from lvsearch.cli import main
from lvsearch.data.loader import BatchStream, DevSet, fixed_dev_set
from lvsearch.data.tokenizer import SpecialIds
from lvsearch.errors import LvsearchError
from lvsearch.eval.floors import (
    NOT_PAST_FLOOR,
    NeighbourCountModel,
    floors_for_model,
    floors_for_run,
    score_floors,
)
from lvsearch.eval.replay import run_settings, seen_row_counts, seen_sequences
from lvsearch.model import Encoder, ModelDims
from lvsearch.modeldir import save_model_dir

X = -100
SPECIAL = SpecialIds(pad=0, unk=1, cls=2, sep=3, mask=4)


# --------------------------------------------------------------------------- (a) hand counts
# Vocabulary 0..11: 0-4 special ([PAD] [UNK] [CLS] [SEP] [MASK]), 5..11 words.
TRAIN = np.array([
    [2, 5, 6, 7, 3, 5],
    [2, 5, 6, 7, 3, 8],
    [2, 5, 8, 7, 3, 6],
    [2, 9, 6, 9, 3, 3],
])
# Hand counts over TRAIN (middle tokens only non-special, specials are context):
#   unigram: 5×4, 6×4, 7×3, 8×2, 9×2 (3 = [SEP] ×5 and 2 = [CLS] ×4 are special) → tie 5/6 → 5
#   pairs (l, r) → best m: (2,6)→5 (5×2 vs 9×1), (5,7)→6, (6,3)→7, (2,8)→5, (8,3)→7, (9,9)→6
#   left l → best m: 2→5, 5→6, 6→7, 8→7, 9→6, 3→5 (5, 8, 6 once each: tie → 5); 7 never has a
#       non-special successor
#   right r → best m: 6→5, 7→6, 3→7, 8→5, 9→6; nothing non-special precedes 5
DEV_ORIG = [
    [2, 5, 6, 7, 3, 9],
    [2, 5, 8, 7, 10, 3],
    [2, 11, 11, 5, 6, 7],
]
DEV_INPUT = [
    [2, 5, 4, 11, 3, 4],   # targets 2, 3 adjacent ([MASK], random 11), 5 last position
    [2, 4, 8, 7, 4, 3],    # target 1 next to [CLS], target 4
    [2, 11, 4, 5, 4, 7],   # target 2 (nothing known around it), target 4 (pair)
]
DEV_LABELS = [
    [X, X, 6, 7, X, 9],
    [X, 5, X, X, 10, X],
    [X, X, 11, X, 6, X],
]
# Row-major targets and the expected neighbour-count prediction, by hand:
#   r0 t2: left 5 usable, right is a target → left-only 5→6 (level 1), gold 6 ✓
#   r0 t3: left is a target, right [SEP] 3 → right-only 3→7 (level 2), gold 7 ✓
#   r0 t5: last position, left [SEP] 3 → left-only 3→5 (tie → smallest id; level 1), gold 9 ✗
#   r1 t1: pair ([CLS] 2, 8) → 5 (level 0), gold 5 ✓
#   r1 t4: pair (7, 3) unseen; left 7 unseen → right-only 3→7 (level 2), gold 10 ✗
#   r2 t2: pair (11, 5), left 11, right 5 all unseen → unigram 5 (level 3), gold 11 ✗
#   r2 t4: pair (5, 7) → 6 (level 0), gold 6 ✓
EXPECTED_PRED = [6, 7, 5, 5, 7, 5, 6]
EXPECTED_LEVEL = [1, 2, 1, 0, 2, 3, 0]
EXPECTED_NC = "1101001"
EXPECTED_UNIGRAM = "0001000"  # unigram always 5, right only at r1 t1


def _hand_dev() -> DevSet:
    return DevSet(torch.tensor(DEV_INPUT), torch.tensor(DEV_LABELS), torch.tensor(DEV_ORIG))


def test_floor_equals_hand_count():
    model = NeighbourCountModel.fit(TRAIN, 12, SPECIAL)
    assert model.unigram == 5  # not [SEP] (3, the most frequent id) and 5 over 6 on a tie
    assert model.tokens == 15
    out = model.predict(np.array(DEV_INPUT), np.array(DEV_LABELS))
    assert out["neighbour-count"].tolist() == EXPECTED_PRED
    assert out["level"].tolist() == EXPECTED_LEVEL
    assert out["unigram"].tolist() == [5] * 7

    floors = score_floors(model, _hand_dev())
    nc, uni = floors["neighbour-count"], floors["unigram"]
    assert nc["per_target_correct"] == EXPECTED_NC and nc["accuracy"] == pytest.approx(4 / 7)
    assert uni["per_target_correct"] == EXPECTED_UNIGRAM and uni["accuracy"] == pytest.approx(1 / 7)
    assert nc["predicted_tokens"] == uni["predicted_tokens"] == 7
    assert nc["backoff"] == pytest.approx({"pair": 2 / 7, "left": 2 / 7, "right": 2 / 7, "unigram": 1 / 7})
    assert nc["train_tokens"] == 15


def test_special_tokens_are_never_predicted():
    # every middle of a pair is [SEP] or [MASK] except one word: the counts must skip them
    train = np.array([[2, 3, 3, 3, 3, 3], [2, 4, 4, 4, 4, 3], [2, 7, 3, 5, 5, 3]])
    model = NeighbourCountModel.fit(train, 12, SPECIAL)
    special = set(SPECIAL.all())
    for table in (model.pair_best, model.left_best, model.right_best):
        assert not special & set(table.tolist())
    assert model.unigram == 5
    dev_in = np.array([[2, 4, 3, 4, 4, 3]])
    dev_lab = np.array([[X, 5, X, 5, 5, X]])
    assert not special & set(model.predict(dev_in, dev_lab)["neighbour-count"].tolist())


def test_weighted_fit_equals_repeated_rows():
    weights = np.array([3, 0, 2, 1])
    repeated = np.repeat(TRAIN, weights, axis=0)
    a = NeighbourCountModel.fit(repeated, 12, SPECIAL)
    b = NeighbourCountModel.fit(TRAIN, 12, SPECIAL, weights=weights)
    assert a.unigram == b.unigram and a.tokens == b.tokens
    for f in ("pair_keys", "pair_best", "left_keys", "left_best", "right_keys", "right_best"):
        assert np.array_equal(getattr(a, f), getattr(b, f)), f


def test_bad_input_is_one_clear_error():
    with pytest.raises(LvsearchError, match=r"outside \[0, 12\)"):
        NeighbourCountModel.fit(np.array([[2, 5, 40]]), 12, SPECIAL)
    with pytest.raises(LvsearchError, match="no non-special"):
        NeighbourCountModel.fit(np.array([[2, 3, 3]]), 12, SPECIAL)
    with pytest.raises(LvsearchError, match="row weights"):
        NeighbourCountModel.fit(TRAIN, 12, SPECIAL, weights=np.array([1, 2]))
    model = NeighbourCountModel.fit(TRAIN, 12, SPECIAL)
    empty = DevSet(torch.tensor(DEV_INPUT), torch.full((3, 6), X), torch.tensor(DEV_ORIG))
    with pytest.raises(LvsearchError, match="no masked targets"):
        score_floors(model, empty)


def test_run_settings_from_model_directory_records():
    args = {"train": {"batch_size": 16, "seq_len": 64, "seed": 3}}
    assert run_settings(args, {"steps": 20}) == ({"batch_size": 16, "seq_len": 64, "seed": 3, "steps": 20}, None)
    assert run_settings(args, {"tokens": 16 * 64 * 7})[0]["steps"] == 7
    assert "no 'train' section" in run_settings({"steps": 60, "lr": 3e-3}, {})[1]
    assert "train.seed" in run_settings({"train": {"batch_size": 16, "seq_len": 64}}, {"steps": 2})[1]
    assert "how many steps" in run_settings(args, {})[1]


# --------------------------------------------------------------------------- real data
@pytest.fixture(scope="module")
def data(small_corpus: Path):
    from lvsearch.data.shards import PreparedData

    return PreparedData.open(small_corpus)


def test_seen_sequences_are_the_batch_stream_rows_across_epochs(data):
    L, batch, seed = 64, 512, 7
    stream = BatchStream(data.sequences("train", L), batch, seed)
    steps = 2 * stream.steps_per_epoch + 3  # two epoch boundaries, a partial third epoch
    assert len(stream.sequences) % batch != 0, "choose a batch that leaves a dropped remainder"
    expected = torch.cat([stream.batch(s) for s in range(steps)]).numpy()
    got = seen_sequences(data, batch_size=batch, seq_len=L, seed=seed, steps=steps)
    assert got.dtype == np.int64 and got.shape == (steps * batch, L)
    assert np.array_equal(got, expected)
    assert seen_sequences(data, batch_size=batch, seq_len=L, seed=seed, steps=0).shape == (0, L)

    rows, counts = seen_row_counts(data, batch_size=batch, seq_len=L, seed=seed, steps=steps)
    assert counts.sum() == steps * batch and np.all(np.diff(rows) > 0)
    assert np.array_equal(_sorted_rows(np.repeat(stream.sequences[rows], counts, axis=0)), _sorted_rows(expected))


def _sorted_rows(a: np.ndarray) -> np.ndarray:
    return a[np.lexsort(a.T[::-1])]


def test_weighted_counting_equals_counting_every_seen_row(data):
    L, batch, seed = 64, 512, 0
    steps = 2 * (len(data.sequences("train", L)) // batch) + 1
    dev = fixed_dev_set(data, num_sequences=32, seq_len=L, seed=1234)
    plain = score_floors(NeighbourCountModel.fit(seen_sequences(data, batch_size=batch, seq_len=L, seed=seed, steps=steps),
                                                 data.vocab_size, data.special_ids), dev)
    fast = floors_for_run(data, dev, batch_size=batch, seq_len=L, seed=seed, steps=steps)
    for name in ("unigram", "neighbour-count"):
        assert fast[name]["per_target_correct"] == plain[name]["per_target_correct"]
        assert fast[name]["train_tokens"] == plain[name]["train_tokens"]
        assert fast[name]["tokens_seen"] == steps * batch * L


class _OracleMLM(torch.nn.Module):
    """A stand-in model for mlm_dev_metrics whose arg-max at the k-th target of the dev set (in
    the order mlm_dev_metrics visits them) is ``predictions[k]``: its per-target outcomes equal
    the floor's exactly when both walk the same targets in the same order."""

    def __init__(self, predictions: np.ndarray, vocab: int):
        super().__init__()
        self.dims = ModelDims(vocab_size=vocab, hidden=8, embedding=8, ff_inner=8, heads=1, conv_kernel=3,
                              max_len=512, dropout=0.0, pad_id=0)
        self.predictions, self.vocab, self.seen = torch.as_tensor(predictions), vocab, 0

    def padding_mask(self, ids):
        return ids != 0

    def forward(self, ids, mask=None):
        return torch.zeros(*ids.shape, 1)

    def mlm_logits(self, hidden):
        n = hidden.shape[0]
        pred = self.predictions[self.seen : self.seen + n]
        self.seen += n
        return torch.nn.functional.one_hot(pred, self.vocab).float()


def test_floor_targets_are_the_model_metrics_targets(data):
    from lvsearch.eval.mlm import mlm_dev_metrics

    settings = dict(num_sequences=48, seq_len=64, seed=99)
    dev = fixed_dev_set(data, **settings)
    train = dict(batch_size=16, seq_len=64, seed=0, steps=20)
    floors = floors_for_run(data, dev, **train)
    nc = NeighbourCountModel.fit(seen_sequences(data, **train), data.vocab_size, data.special_ids)
    pred = nc.predict(dev.input_ids.numpy(), dev.labels.numpy(), data.special_ids.pad)["neighbour-count"]

    oracle = _OracleMLM(pred, data.vocab_size)
    m = mlm_dev_metrics(oracle, data, **settings, batch_size=5)  # its own dev set, odd chunking
    assert m["predicted_tokens"] == floors["neighbour-count"]["predicted_tokens"] == len(m["per_target_correct"])
    assert m["per_target_correct"] == floors["neighbour-count"]["per_target_correct"]

    # a real (untrained) encoder scores the same number of targets
    torch.manual_seed(0)
    enc = Encoder(Arch("sf"), ModelDims(vocab_size=data.vocab_size, hidden=32, embedding=16, ff_inner=64, heads=2,
                                        conv_kernel=3, max_len=128, dropout=0.0, pad_id=data.special_ids.pad))
    r = mlm_dev_metrics(enc, data, **settings)
    assert len(r["per_target_correct"]) == len(floors["unigram"]["per_target_correct"])


def test_dev_set_masking_does_not_follow_training_masking(data):
    """Runs with 15% and 40% training masking are scored on the same dev targets."""
    from lvsearch.config import RetrainConfig, load_config
    from lvsearch.train.distributed import DistInfo
    from lvsearch.train.retrain import RetrainObjective

    devs = []
    for p in (0.15, 0.40):
        cfg, _ = load_config(RetrainConfig, "retrain-quickstart",
                             [f"masking.probability={p}", "train.seq_len=64", "train.batch_size=16", "eval.dev_sequences=16"])
        devs.append(RetrainObjective(torch.nn.Module(), data, cfg, DistInfo(0, 1, 0, torch.device("cpu"))).dev)
    assert torch.equal(devs[0].labels, devs[1].labels) and torch.equal(devs[0].input_ids, devs[1].input_ids)
    rate = float((devs[0].labels != X).sum()) / float((devs[0].original_ids > 4).sum())
    assert 0.12 < rate < 0.18


# --------------------------------------------------------------------------- (d) evaluate / report
def _model_dir(folder: Path, data, training_args: dict, extra: dict) -> Path:
    torch.manual_seed(0)
    dims = ModelDims(vocab_size=data.vocab_size, hidden=32, embedding=16, ff_inner=64, heads=2, conv_kernel=3,
                     max_len=128, dropout=0.0, pad_id=data.special_ids.pad)
    enc = Encoder(Arch("sf"), dims).eval()  # untrained: below any floor
    return save_model_dir(folder, enc, arch=enc.arch, dims=dims, tokenizer_path=data.folder / "tokenizer.json",
                          objective="mlm", training_args=training_args, extra=extra)


def _cli(argv: list[str], capsys) -> tuple[int, str]:
    rc = main(argv)
    cap = capsys.readouterr()
    return rc, cap.out + cap.err


def test_evaluate_and_report_show_floor_rows(data, tmp_path, capsys):
    train = {"batch_size": 16, "seq_len": 64, "seed": 0}
    ours = _model_dir(tmp_path / "ours", data, {"train": train}, {"steps": 20, "train_tokens": data.num_tokens("train")})
    foreign = _model_dir(tmp_path / "foreign", data, {"lr": 3e-3}, {})
    other_corpus = _model_dir(tmp_path / "other", data, {"train": train}, {"steps": 20, "train_tokens": 12345})
    common = ["--no-blimp", "--mlm-data", str(data.folder), "--dev-sequences", "32", "--dev-seed", "5", "--device", "cpu"]

    rc, out = _cli(["evaluate", "--model", str(ours), "--out", str(tmp_path / "ours.json"), *common], capsys)
    assert rc == 0, out
    report = json.loads((tmp_path / "ours.json").read_text())
    floors = report["mlm"]["floors"]
    assert floors["status"] == "done" and floors["run"] == {**train, "steps": 20}
    assert floors["tokens_seen"] == 20 * 16 * 64
    dev = fixed_dev_set(data, num_sequences=32, seq_len=64, seed=5)
    expected = floors_for_run(data, dev, **train, steps=20)
    for name in ("unigram", "neighbour-count"):
        assert floors[name]["per_target_correct"] == expected[name]["per_target_correct"]
        assert len(floors[name]["per_target_correct"]) == len(report["mlm"]["per_target_correct"])
    assert floors["beats_floor"] is False  # untrained model
    md = (tmp_path / "ours.md").read_text()
    assert "| MLM floor · unigram |" in md
    assert f"| MLM floor · neighbour-count ({20 * 16 * 64:,} tokens) |" in md
    assert f"| MLM beats neighbour-count floor | no: {NOT_PAST_FLOOR} |" in md
    assert "not to be read as architecture effects" in md
    assert "not to be read as architecture effects" in " ".join(out.split())  # the terminal may wrap lines

    rc, out = _cli(["evaluate", "--model", str(foreign), "--out", str(tmp_path / "foreign.json"), *common], capsys)
    assert rc == 0, out
    f = json.loads((tmp_path / "foreign.json").read_text())["mlm"]["floors"]
    assert f["status"] == "unavailable" and "training_args.json has no 'train' section" in f["reason"]
    assert "| MLM floors | unavailable: the model directory records no training settings" in (tmp_path / "foreign.md").read_text()

    rc, out = _cli(["evaluate", "--model", str(other_corpus), "--out", str(tmp_path / "other.json"), *common], capsys)
    assert rc == 0, out
    f = json.loads((tmp_path / "other.json").read_text())["mlm"]["floors"]
    assert f["status"] == "unavailable" and "not the training corpus" in f["reason"]

    rc, out = _cli(["report", str(tmp_path / "ours.json"), str(tmp_path / "foreign.json"), "--out", str(tmp_path / "rep")], capsys)
    assert rc == 0, out
    rep = (tmp_path / "rep" / "report.md").read_text()
    assert "| MLM floor · unigram |" in rep and "MLM floors" in rep
    assert f"ours {NOT_PAST_FLOOR}" in rep

    rc, out = _cli(["evaluate", "--compare", str(tmp_path / "ours.json"), str(tmp_path / "foreign.json")], capsys)
    flat = " ".join(out.split())
    assert rc == 0 and "MLM floor · unigram" in flat and NOT_PAST_FLOOR in flat


def test_floors_for_model_never_raises_for_a_run_it_cannot_rebuild(data):
    dev = fixed_dev_set(data, num_sequences=8, seq_len=64, seed=1)
    huge = floors_for_model({"train": {"batch_size": 10**7, "seq_len": 64, "seed": 0}}, {"steps": 1}, data, dev)
    assert huge["status"] == "unavailable" and "fewer than one global batch" in huge["reason"]
    assumed = floors_for_model({"train": {"batch_size": 8, "seq_len": 64, "seed": 0}}, {"steps": 2}, data, dev)
    assert assumed["status"] == "done" and "assumed" in assumed["note"]


def test_evaluate_and_report_lead_with_the_three_floors(data, tmp_path, capsys, shared_data):
    from lvsearch.eval.blimp import read_blimp
    from lvsearch.eval.blimp_floor import fit_blimp_floor, score_blimp_floor

    train = {"batch_size": 16, "seq_len": 64, "seed": 0}
    ours = _model_dir(tmp_path / "ours", data, {"train": train}, {"steps": 20, "train_tokens": data.num_tokens("train")})
    argv = ["evaluate", "--model", str(ours), "--out", str(tmp_path / "ours.json"), "--mlm-data", str(data.folder),
            "--dev-sequences", "16", "--blimp", str(shared_data / "blimp"), "--blimp-limit", "2",
            "--task", str(shared_data / "tasks" / "sentence_polarity"), "--train-limit", "64", "--eval-limit", "64",
            "--epochs", "1", "--min-steps", "0", "--seeds", "1", "--device", "cpu", "--threads", "1"]  # 2 steps: at chance
    rc, out = _cli(argv, capsys)
    assert rc == 0, out
    flat = " ".join(out.split())
    assert flat.index("Verdict against the floors") < flat.index("evaluation of ours")  # the terminal leads with it
    assert "95% CI [" in flat
    report = json.loads((tmp_path / "ours.json").read_text())
    bf = report["blimp"]["floor"]
    assert bf["status"] == "done" and bf["order"] == 3 and bf["tokens_seen"] == 20 * 16 * 64
    want = score_blimp_floor(fit_blimp_floor(data, **train, steps=20), data.tokenizer,
                             read_blimp(shared_data / "blimp", limit=2))
    assert {u: p["per_pair_correct"] for u, p in bf["paradigms"].items()} == \
        {u: p["per_pair_correct"] for u, p in want["paradigms"].items()}
    assert set(bf["vs_floor"]) >= {"difference", "ci", "beats"} and report["blimp"]["metric"] == "pll-word-l2r"
    ft = report["finetune"]["sentence_polarity"]
    assert ft["floor"]["train_used"] == 64 and ft["floor"]["status"] == "done"
    assert len(ft["per_seed"][0]["test_predictions"]) == 64
    assert report["mlm"]["floors"]["vs_floor"]["beats"] is False  # untrained model
    md = (tmp_path / "ours.md").read_text()
    assert md.index("## Verdict against the floors") < md.index("| metric |")
    verdict = md.split("## Verdict against the floors")[1].split("| metric |")[0]
    assert "MLM (neighbour-count floor) is below its floor" in verdict  # an untrained model is clearly below
    assert "BLiMP (3-gram Kneser-Ney floor)" in verdict and "sentence_polarity test accuracy (bag-of-words floor)" in verdict
    assert "| BLiMP − floor |" in md and "| sentence_polarity test accuracy floor · bag of words (C=" in md
    assert "does not beat its floor: failed (loss did not fall)" in verdict  # a model at chance still says so
    rc, out = _cli(["evaluate", "--compare", str(tmp_path / "ours.json")], capsys)
    assert rc == 0 and " ".join(out.split()).index("Verdict against the floors") < " ".join(out.split()).index("evaluation reports")
    rc, out = _cli(["report", str(tmp_path / "ours.json"), "--out", str(tmp_path / "rep")], capsys)
    rep = (tmp_path / "rep" / "report.md").read_text()
    assert rc == 0 and rep.index("## Verdict against the floors") < rep.index("## Differences between models") < rep.index("| metric |")


def test_verdict_tells_below_the_floor_from_within_noise():
    """−0.062 [−0.112, −0.014] read "does not beat its floor", as a difference within
    noise does; below and within noise now read differently."""
    from lvsearch.eval.report import verdicts

    def report(diff, lo, hi):
        return {"mlm": {"floors": {"status": "done", "vs_floor": {"difference": diff, "ci": [lo, hi], "beats": lo > 0}}}}

    [(_, below)] = verdicts(report(-0.062, -0.112, -0.014))
    [(_, noise)] = verdicts(report(-0.01, -0.05, 0.03))
    [(_, beats)] = verdicts(report(0.05, 0.01, 0.09))
    assert below.startswith("is below its floor, -0.0620")
    assert noise.startswith("does not beat its floor (within noise of it)")
    assert beats.startswith("beats its floor")
