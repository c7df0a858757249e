"""Model directories and ``lvsearch evaluate`` (BLiMP PLL, fine-tuning, MLM dev metrics) on real data."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from lvsearch.arch import Arch
from lvsearch.cli import main
from lvsearch.errors import LvsearchError
from lvsearch.model import Encoder, ModelDims
from lvsearch.modeldir import load_model, save_model_dir

REPO = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------- fixtures
def _tiny_encoder(vocab_size: int, pad_id: int, ops: str = "sfsf", hidden: int = 64) -> Encoder:
    dims = ModelDims(vocab_size=vocab_size, hidden=hidden, embedding=32, ff_inner=2 * hidden, heads=2,
                     conv_kernel=3, max_len=128, dropout=0.1, pad_id=pad_id)
    return Encoder(Arch(ops), dims)


@pytest.fixture(scope="module")
def trained(small_corpus: Path):
    """(encoder, data): a 4-slot sfsf encoder trained 60 MLM steps so scores are not random."""
    from lvsearch.data.loader import BatchStream
    from lvsearch.data.masking import MaskingConfig, MLMMasker
    from lvsearch.data.shards import PreparedData

    data = PreparedData.open(small_corpus)
    torch.manual_seed(0)
    enc = _tiny_encoder(data.vocab_size, data.special_ids.pad)
    stream = BatchStream(data.sequences("train", 64), batch_size=16, seed=0)
    masker = MLMMasker(MaskingConfig(), data.vocab_size, data.special_ids)
    opt = torch.optim.AdamW(enc.parameters(), lr=3e-3)
    gen = torch.Generator().manual_seed(0)
    enc.train()
    losses = []
    for step in range(60):
        ids, labels = masker(stream.batch(step), gen)
        sel = labels != -100
        loss = torch.nn.functional.cross_entropy(enc.mlm_logits(enc(ids)[sel]), labels[sel])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert sum(losses[-10:]) / 10 < sum(losses[:10]) / 10 - 0.5, "the tiny MLM did not learn"
    return enc.eval(), data


@pytest.fixture(scope="module")
def model_dir(trained, tmp_path_factory) -> Path:
    enc, data = trained
    folder = tmp_path_factory.mktemp("models") / "tiny"
    save_model_dir(folder, enc, arch=enc.arch, dims=enc.dims, tokenizer_path=data.folder / "tokenizer.json",
                   objective="mlm", training_args={"steps": 60, "lr": 3e-3})
    return folder


def _copy_model(model_dir: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "model"
    shutil.copytree(model_dir, dst)
    return dst


def _run_cli(argv: list[str], capsys) -> tuple[int, str]:
    rc = main(argv)
    captured = capsys.readouterr()
    return rc, captured.out + captured.err


# --------------------------------------------------------------------------- model directory
def test_model_dir_round_trip(model_dir: Path, trained):
    enc, _ = trained
    import lvsearch

    assert lvsearch.load_model is load_model
    m = load_model(model_dir)
    assert sorted(p.name for p in model_dir.iterdir()) == ["config.json", "model.safetensors", "tokenizer.json", "training_args.json"]
    assert m.config["format"] == "lvsearch.model/v1" and m.objective == "mlm" and m.generator is None
    assert m.arch == enc.arch and m.dims == enc.dims and m.training_args == {"steps": 60, "lr": 3e-3}
    ids = torch.tensor([m.tokenizer.encode("the cat sat on the mat .").ids, m.tokenizer.encode("a dog sat on the rug .").ids])
    assert not m.encoder.training
    with torch.no_grad():
        h_ref, h = enc(ids), m.encoder(ids)
        assert torch.equal(h_ref, h)
        assert torch.equal(enc.mlm_logits(h_ref), m.encoder.mlm_logits(h))


def test_model_dir_electra_generator_round_trip(trained, tmp_path):
    enc, data = trained
    torch.manual_seed(1)
    gen = _tiny_encoder(data.vocab_size, data.special_ids.pad, ops="sf", hidden=32)
    folder = save_model_dir(tmp_path / "electra", enc, arch=enc.arch, dims=enc.dims, tokenizer_path=data.folder / "tokenizer.json",
                            objective="electra", training_args={}, generator=gen, extra={"note": "test"})
    m = load_model(folder)
    assert m.objective == "electra" and m.generator is not None and m.generator.arch == Arch("sf")
    assert m.config["extra"] == {"note": "test"}
    ids = torch.tensor([m.tokenizer.encode("hello there").ids])
    gen.eval()
    with torch.no_grad():
        assert torch.equal(gen(ids), m.generator(ids))
    # Saving again replaces the folder as a whole (the generator file disappears).
    save_model_dir(folder, enc, arch=enc.arch, dims=enc.dims, tokenizer_path=data.folder / "tokenizer.json",
                   objective="electra", training_args={})
    assert not (folder / "generator.safetensors").exists() and load_model(folder).generator is None
    assert [p.name for p in tmp_path.iterdir()] == ["electra"]  # no temporary folders left behind
    # A folder that is not a model directory is never replaced.
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "keep.txt").write_text("mine")
    with pytest.raises(LvsearchError, match="not a model directory"):
        save_model_dir(tmp_path / "notes", enc, arch=enc.arch, dims=enc.dims, tokenizer_path=data.folder / "tokenizer.json",
                       objective="mlm", training_args={})
    assert (tmp_path / "notes" / "keep.txt").read_text() == "mine"


def _break_format(d: Path):
    cfg = json.loads((d / "config.json").read_text())
    cfg["format"] = "something/v0"
    (d / "config.json").write_text(json.dumps(cfg))


def _break_tokenizer(d: Path):
    tok = json.loads((d / "tokenizer.json").read_text())
    tok["model"]["vocab"]["zzzextra"] = len(tok["model"]["vocab"])
    (d / "tokenizer.json").write_text(json.dumps(tok))


def _break_weights(d: Path):
    from safetensors.torch import save_file

    cfg = json.loads((d / "config.json").read_text())
    other = Encoder(Arch("ssff"), ModelDims.from_dict(cfg["dims"]))
    save_file({k: v.contiguous() for k, v in other.state_dict().items()}, str(d / "model.safetensors"))


def _break_shapes(d: Path):
    from safetensors.torch import save_file

    cfg = json.loads((d / "config.json").read_text())
    dims = ModelDims.from_dict({**cfg["dims"], "ff_inner": 96})
    other = Encoder(Arch("sfsf"), dims)
    save_file({k: v.contiguous() for k, v in other.state_dict().items()}, str(d / "model.safetensors"))


@pytest.mark.parametrize("breaker, expect", [
    (lambda d: shutil.rmtree(d), "model directory not found"),
    (lambda d: (d / "config.json").unlink(), "no config.json"),
    (lambda d: (d / "config.json").write_text("{not json"), "not valid JSON"),
    (_break_format, "format 'something/v0'"),
    (lambda d: (d / "tokenizer.json").unlink(), "tokenizer file missing"),
    (_break_tokenizer, "not the tokenizer this model was trained with"),
    (lambda d: (d / "model.safetensors").unlink(), "weights file not found"),
    (lambda d: (d / "model.safetensors").write_bytes(b"garbage"), "not a readable safetensors"),
    (_break_weights, "does not match the architecture"),
    (_break_shapes, "tensor shapes differ"),
])
def test_model_dir_errors(model_dir, tmp_path, capsys, breaker, expect):
    d = _copy_model(model_dir, tmp_path)
    breaker(d)
    with pytest.raises(LvsearchError, match=expect) as e:
        load_model(d)
    assert "fix:" in str(e.value)
    rc, text = _run_cli(["evaluate", str(d), "--no-blimp", "--data", "x", "--out", str(tmp_path / "r.json")], capsys)
    assert rc == 2 and expect.split()[0] in text and "Traceback" not in text
    assert not (tmp_path / "r.json").exists()


# --------------------------------------------------------------------------- BLiMP / PLL
SENTENCES = ["The cat sat on the mat.", "Dogs bark.", "Who should Derek hug after shocking Richard?",
             "a", "These senators had appreciated that report about the weather in the north."]


def _naive_pll(enc, tok, sentence: str) -> float:
    """Reference: one masked copy at a time, no padding, full log-softmax over the sequence."""
    from lvsearch.data.tokenizer import SpecialIds

    ids = torch.tensor(tok.encode(sentence).ids)
    mask_id = SpecialIds.of(tok).mask
    total = 0.0
    with torch.no_grad():
        for t in range(1, len(ids) - 1):
            x = ids.clone()
            x[t] = mask_id
            logp = torch.log_softmax(enc.mlm_logits(enc(x[None]))[0], dim=-1)
            total += float(logp[t, ids[t]])
    return total


def test_pll_equals_naive_reference(model_dir):
    from lvsearch.eval.blimp import PLLScorer

    m = load_model(model_dir)
    got = PLLScorer(m.encoder, m.tokenizer, metric="pll").score(SENTENCES)
    want = [_naive_pll(m.encoder, m.tokenizer, s) for s in SENTENCES]
    for g, w in zip(got, want):
        assert abs(g - w) < 1e-5, (g, w)
    assert all(g < 0 for g in got)


def test_pll_batching_and_padding_do_not_change_scores(model_dir):
    from lvsearch.eval.blimp import PLLScorer

    m = load_model(model_dir)
    scores, passes = {}, {}
    for budget in (1, 40, 100_000):  # one row per pass, mixed chunks, everything in one pass
        sc = PLLScorer(m.encoder, m.tokenizer, token_budget=budget)
        scores[budget], passes[budget] = sc.score(SENTENCES), sc.forward_passes
    assert passes[1] > passes[40] > passes[100_000] == 1
    for budget in (40, 100_000):
        assert max(abs(a - b) for a, b in zip(scores[1], scores[budget])) < 1e-5
    rev = PLLScorer(m.encoder, m.tokenizer, token_budget=40).score(SENTENCES[::-1])[::-1]
    assert max(abs(a - b) for a, b in zip(scores[1], rev)) < 1e-5
    assert PLLScorer(m.encoder, m.tokenizer).score([]) == []


def _toy_wordpiece():
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "un", "##believ", "##able", "cat"]
    tok = Tokenizer(models.WordPiece({t: i for i, t in enumerate(vocab)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    return tok


class _SpyModel(torch.nn.Module):
    """Records every input row; hidden state = the row's ids, head = uniform logits."""

    def __init__(self):
        super().__init__()
        self.dims = type("D", (), {"max_len": 32})()
        self.rows: list[list[int]] = []

    def forward(self, ids, attn):
        self.rows += [r[m].tolist() for r, m in zip(ids, attn)]
        return torch.zeros(*ids.shape, 4)

    def mlm_logits(self, h):
        return torch.zeros(h.shape[0], 10)


def test_pll_word_l2r_masks_the_rest_of_the_word_to_the_right():
    from lvsearch.eval.blimp import PLLScorer

    tok = _toy_wordpiece()
    assert tok.encode("the unbelievable cat").ids == [2, 5, 6, 7, 8, 9, 3]
    M = 4
    want = {
        "pll-word-l2r": [[2, M, 6, 7, 8, 9, 3],   # "the": one piece
                         [2, 5, M, M, M, 9, 3],   # "un" + the rest of "unbelievable" to its right
                         [2, 5, 6, M, M, 9, 3],   # "##believ" + "##able"; "un" (to the left) stays
                         [2, 5, 6, 7, M, 9, 3],
                         [2, 5, 6, 7, 8, M, 3]],
        "pll": [[2, M, 6, 7, 8, 9, 3], [2, 5, M, 7, 8, 9, 3], [2, 5, 6, M, 8, 9, 3], [2, 5, 6, 7, M, 9, 3],
                [2, 5, 6, 7, 8, M, 3]],
    }
    for metric, rows in want.items():
        spy = _SpyModel()
        score = PLLScorer(spy, tok, metric=metric).score(["the unbelievable cat"])
        assert spy.rows == rows, metric
        assert score[0] == pytest.approx(5 * -math.log(10))  # log P read at the scored position only, once per token


def test_pll_word_l2r_batched_equals_one_row_at_a_time(model_dir):
    from lvsearch.eval.blimp import PLLScorer

    m = load_model(model_dir)
    one = PLLScorer(m.encoder, m.tokenizer, metric="pll-word-l2r", token_budget=1)
    batched = PLLScorer(m.encoder, m.tokenizer, metric="pll-word-l2r", token_budget=100_000)
    a, b = one.score(SENTENCES), batched.score(SENTENCES)
    assert one.forward_passes > batched.forward_passes == 1
    assert max(abs(x - y) for x, y in zip(a, b)) < 1e-5
    _, words = one.encode_words(SENTENCES)
    assert any(len(set(w)) < len(w) - 1 for w in words), "the sentences hold a multi-piece word"
    assert a != PLLScorer(m.encoder, m.tokenizer, metric="pll").score(SENTENCES)


def test_scorer_rejects_unknown_metric_and_precision(model_dir):
    from lvsearch.eval.blimp import PLLScorer, resolve_precision

    m = load_model(model_dir)
    with pytest.raises(LvsearchError, match="metric"):
        PLLScorer(m.encoder, m.tokenizer, metric="mlm")
    with pytest.raises(LvsearchError, match="precision"):
        PLLScorer(m.encoder, m.tokenizer, precision="fp16")
    assert resolve_precision("fp32", "cpu") == "fp32" and resolve_precision("auto", "cuda") == "bf16"


def _write_blimp(folder: Path, rows: list[dict], name: str = "toy.jsonl") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def test_ties_count_as_wrong_and_are_reported(model_dir, tmp_path):
    from lvsearch.eval.blimp import PLLScorer, evaluate_blimp, read_blimp

    base = {"UID": "toy", "linguistics_term": "toy_term", "field": "syntax"}
    _write_blimp(tmp_path / "b", [
        {**base, "sentence_good": "the dog barks .", "sentence_bad": "the dog barks ."},   # identical: tie
        {**base, "sentence_good": "The dog barks.", "sentence_bad": "the dog barks ."},    # same tokens (lower-cased): tie
        {**base, "sentence_good": "the dog barks .", "sentence_bad": "dog the barks ."},
    ])
    m = load_model(model_dir)
    res = evaluate_blimp(PLLScorer(m.encoder, m.tokenizer), read_blimp(tmp_path / "b"))
    p = res["paradigms"]["toy"]
    assert p["ties"] == 2 and res["ties"] == 2 and p["pairs"] == 3
    assert p["correct"] <= 1 and p["accuracy"] == p["correct"] / 3  # a tie never counts as correct

    class ConstantScorer:  # every sentence scores the same: all pairs tie, accuracy 0
        def encode(self, sentences):
            return [[0, 1, 2]] * len(sentences)

        def score_ids(self, encoded, progress=None):
            return [-1.0] * len(encoded)

    res = evaluate_blimp(ConstantScorer(), read_blimp(tmp_path / "b"))
    assert res["mean_over_pairs"] == 0.0 and res["ties"] == 3


def test_blimp_real_files_per_phenomenon(model_dir, shared_data):
    from lvsearch.eval.blimp import PLLScorer, evaluate_blimp, read_blimp

    paradigms = read_blimp(shared_data / "blimp", limit=3)
    assert len(paradigms) == 67 and all(len(p.pairs) == 3 and p.total_pairs == 1000 for p in paradigms)
    first = json.loads((shared_data / "blimp" / "adjunct_island.jsonl").read_text().splitlines()[0])
    assert paradigms[0].uid == "adjunct_island" and paradigms[0].pairs[0] == (first["sentence_good"], first["sentence_bad"])
    m = load_model(model_dir)
    res = evaluate_blimp(PLLScorer(m.encoder, m.tokenizer), paradigms)
    assert res["pairs"] == 201 and len(res["paradigms"]) == 67
    terms = {p.linguistics_term for p in paradigms}
    assert set(res["phenomena"]) == terms and len(terms) >= 12
    for term, r in res["phenomena"].items():
        accs = [v["accuracy"] for v in res["paradigms"].values() if v["linguistics_term"] == term]
        assert r["paradigms"] == len(accs) and math.isclose(r["accuracy"], sum(accs) / len(accs))
    assert math.isclose(res["mean_over_paradigms"], sum(v["accuracy"] for v in res["paradigms"].values()) / 67)
    assert math.isclose(res["mean_over_pairs"], sum(v["correct"] for v in res["paradigms"].values()) / 201)
    assert 0.2 < res["mean_over_pairs"] < 0.95 and res["sentences_per_second"] > 0


@pytest.mark.parametrize("content, expect", [
    (None, "holds no \\*.jsonl"),
    ('{"sentence_good": "a b", "sentence_bad": "b a", "UID": "u", "linguistics_term": "t"}\n{broken\n', "bad.jsonl, line 2: not valid JSON"),
    ('{"sentence_good": "a b", "UID": "u", "linguistics_term": "t"}\n', "bad.jsonl, line 1: missing key\\(s\\) sentence_bad"),
    ("\n", "holds no minimal pairs"),
])
def test_blimp_bad_input_via_cli(model_dir, tmp_path, capsys, content, expect):
    folder = tmp_path / "blimp"
    folder.mkdir()
    if content is not None:
        (folder / "bad.jsonl").write_text(content)
    else:
        (folder / "readme.txt").write_text("no data")
    rc, text = _run_cli(["evaluate", str(model_dir), "--blimp", str(folder), "--out", str(tmp_path / "r.json")], capsys)
    import re

    assert rc == 2 and re.search(expect, text) and "Traceback" not in text, text
    assert not (tmp_path / "r.json").exists()


# --------------------------------------------------------------------------- metrics
def test_metrics_against_scipy_and_hand_values():
    from scipy import stats

    from lvsearch.eval.metrics import classification_metrics, confusion_matrix, regression_metrics

    y = [1, 1, 1, 0, 0, 0, 1, 0, 1, 1]
    p = [1, 0, 1, 0, 1, 0, 1, 0, 0, 1]  # tp 4, fn 2, fp 1, tn 3
    m = classification_metrics(y, p, 2)
    assert math.isclose(m["accuracy"], 0.7)
    assert math.isclose(m["f1"], 2 * 4 / (2 * 4 + 2 + 1))
    assert math.isclose(m["mcc"], stats.pearsonr(y, p)[0])  # binary MCC = phi = Pearson of the 0/1 labels
    assert math.isclose(m["mcc"], (4 * 3 - 1 * 2) / math.sqrt(5 * 6 * 4 * 5))
    # Multi-class: macro F1 by hand; MCC against Gorodkin's formula written out.
    y3 = [0, 0, 1, 1, 2, 2, 2, 0]
    p3 = [0, 1, 1, 1, 2, 0, 2, 2]
    c = confusion_matrix(y3, p3, 3)
    assert c.tolist() == [[1, 1, 1], [0, 2, 0], [1, 0, 2]]
    f1s = [2 * 1 / (3 + 2), 2 * 2 / (2 + 3), 2 * 2 / (3 + 3)]
    m3 = classification_metrics(y3, p3, 3)
    assert math.isclose(m3["f1"], sum(f1s) / 3)
    s, corr = 8, 5
    t, pk = [3, 2, 3], [2, 3, 3]
    want = (corr * s - sum(a * b for a, b in zip(t, pk))) / math.sqrt((s * s - sum(v * v for v in pk)) * (s * s - sum(v * v for v in t)))
    assert math.isclose(m3["mcc"], want)
    assert classification_metrics([0, 1, 0], [0, 0, 0], 2)["mcc"] == 0.0  # constant prediction
    yt, yp = [0.1, 0.5, 2.0, 3.5, 4.0], [0.0, 1.0, 1.5, 4.0, 3.0]
    r = regression_metrics(yt, yp)
    assert math.isclose(r["pearson"], stats.pearsonr(yt, yp)[0]) and math.isclose(r["spearman"], stats.spearmanr(yt, yp)[0])
    assert regression_metrics([1.0, 2.0, 3.0], [1.0, 1.0, 1.0])["pearson"] is None


# --------------------------------------------------------------------------- fine-tuning
def test_rte_pair_columns_detected(shared_data, model_dir):
    from lvsearch.data.tokenizer import SpecialIds
    from lvsearch.eval.finetune import _encode
    from lvsearch.eval.tasks import load_task

    t = load_task(str(shared_data / "tasks" / "rte"))
    assert t.columns == {"text_a": "premise", "text_b": "hypothesis", "label": "label"}
    assert t.kind == "classification" and t.label_names == ["entailment", "not_entailment"] and t.test_labeled
    assert {k: len(v) for k, v in t.splits.items()} == {"train": 3367, "dev": 400, "test": 400}
    assert t.splits["train"][0].label == 1 and t.splits["train"][0].b.startswith("Crude oil prices rose")
    m = load_model(model_dir)
    ids = _encode(m.tokenizer, t.splits["train"][:4], max_len=32)
    sep = SpecialIds.of(m.tokenizer).sep
    assert all(len(s) <= 32 and s.count(sep) == 2 and s[-1] == sep for s in ids)


def test_finetune_sentence_polarity(shared_data, model_dir):
    from lvsearch.eval.finetune import FinetuneConfig, finetune_task
    from lvsearch.eval.tasks import load_task

    t = load_task(str(shared_data / "tasks" / "sentence_polarity"))
    assert t.columns["text_b"] is None and t.label_names == ["0", "1"]
    m = load_model(model_dir)
    before = {k: v.clone() for k, v in m.encoder.state_dict().items()}
    cfg = FinetuneConfig(epochs=2, seeds=(0, 1), train_limit=160, eval_limit=150, max_len=48, batch_size=32, lr=1e-3,
                         min_steps=0)  # the 2-epoch selection contract (the default raises 10 steps to 300)
    r = finetune_task(m.encoder, m.tokenizer, t, cfg)
    assert all(torch.equal(before[k], v) for k, v in m.encoder.state_dict().items())  # the pretrained model is untouched
    assert r["sizes"]["train_used"] == 160 and r["sizes"]["dev_used"] == 150 and r["sizes"]["test_used"] == 150
    assert len(r["per_seed"]) == 2 and [s["seed"] for s in r["per_seed"]] == [0, 1]
    for s in r["per_seed"]:
        assert s["best_epoch"] in (1, 2) and len(s["dev_per_epoch"]) == 2
        assert s["dev"] == s["dev_per_epoch"][s["best_epoch"] - 1]
        assert s["dev"]["accuracy"] == max(e["accuracy"] for e in s["dev_per_epoch"])
        for split in ("dev", "test"):
            assert 0 <= s[split]["accuracy"] <= 1 and 0 <= s[split]["f1"] <= 1 and -1 <= s[split]["mcc"] <= 1
        assert all(math.isfinite(x) for x in s["train_loss_per_epoch"])
    accs = [s["test"]["accuracy"] for s in r["per_seed"]]
    agg = r["aggregate_all_seeds"]["test"]["accuracy"]  # 160 examples, 2 epochs: seeds may fail
    assert math.isclose(agg["mean"], sum(accs) / 2) and math.isclose(agg["median"], sum(accs) / 2)
    assert math.isclose(agg["std"], abs(accs[0] - accs[1]) / math.sqrt(2))
    assert r["per_seed"][0]["train_loss_per_epoch"] != r["per_seed"][1]["train_loss_per_epoch"]  # seeds differ


def test_llrd_param_groups(model_dir):
    from lvsearch.eval.finetune import _make_classifier, layerwise_param_groups

    m = load_model(model_dir)
    model = _make_classifier(m.encoder, 2, 0.1)
    groups = layerwise_param_groups(model, 1e-3, 0.8)
    lr_of = {}
    for g in groups:
        for p in g["params"]:
            lr_of[id(p)] = g["lr"]
    named = dict(model.named_parameters())
    assert math.isclose(lr_of[id(named["encoder.slots.4.FF.fc1.weight"])], 1e-3)
    assert math.isclose(lr_of[id(named["encoder.slots.1.SA.qkv.weight"])], 1e-3 * 0.8**3)
    assert math.isclose(lr_of[id(named["encoder.embeddings.word.weight"])], 1e-3 * 0.8**4)
    assert math.isclose(lr_of[id(named["head.weight"])], 1e-3)
    assert id(named["encoder.mlm_head.dense.weight"]) not in lr_of  # unused head is frozen


def _write_task(folder: Path, header: str, rows: dict[str, list[str]]):
    folder.mkdir(parents=True, exist_ok=True)
    for split, lines in rows.items():
        (folder / f"{split}.tsv").write_text(header + "\n" + "\n".join(lines) + "\n", encoding="utf-8")


def test_regression_and_unlabeled_test(model_dir, tmp_path):
    from lvsearch.eval.finetune import FinetuneConfig, finetune_task
    from lvsearch.eval.tasks import load_task

    words = ["good film", "bad film", "a fine story", "dull and long", "great acting", "weak plot"]
    train = [f"{i}\t{words[i % 6]}\t{words[(i + 1) % 6]}\t{(i % 5) + 0.5}" for i in range(24)]
    _write_task(tmp_path / "sts", "id\tsentence1\tsentence2\tscore", {"train": train, "dev": train[:8]})
    (tmp_path / "sts" / "test.tsv").write_text("id\tsentence1\tsentence2\n1\ta\tb\n2\tc\td\n")
    t = load_task(str(tmp_path / "sts"))
    assert t.kind == "regression" and t.columns["label"] == "score" and not t.test_labeled
    m = load_model(model_dir)
    r = finetune_task(m.encoder, m.tokenizer, t, FinetuneConfig(epochs=1, seeds=(0,), batch_size=8))
    assert set(r["per_seed"][0]["dev"]) == {"pearson", "spearman", "mse"} and r["per_seed"][0]["test"] is None
    assert "test" not in r["aggregate"] and r["select_metric"] == "pearson"


@pytest.mark.parametrize("make, expect", [
    (lambda d: _write_task(d, "sentence\tlabel", {"dev": ["a\t0"]}), "has no train.tsv \\(found: 'dev.tsv'\\)"),
    (lambda d: _write_task(d, "tweet\tlabel", {"train": ["a\t0", "b\t1"], "dev": ["a\t0"]}),
     "no recognisable text column among the columns found: 'tweet', 'label'"),
    (lambda d: _write_task(d, "sentence\tlabel", {"train": ["a\tx", "b\ty"], "dev": ["a\tz"]}),
     "dev.tsv, line 2: label 'z' does not occur in the train split"),
    (lambda d: _write_task(d, "sentence\tlabel", {"train": ["a\t0", "b\t1\textra"], "dev": ["a\t0"]}),
     "train.tsv, line 3: 3 fields, the header has 2"),
])
def test_task_bad_input_via_cli(model_dir, tmp_path, capsys, make, expect):
    import re

    make(tmp_path / "task")
    rc, text = _run_cli(["evaluate", str(model_dir), "--no-blimp", "--task", str(tmp_path / "task"),
                         "--out", str(tmp_path / "r.json")], capsys)
    assert rc == 2 and re.search(expect, text) and "Traceback" not in text, text
    assert not (tmp_path / "r.json").exists()


def test_unknown_hf_dataset(model_dir, tmp_path, capsys, monkeypatch):
    import datasets

    def unreachable(name, config=None, **kw):  # what datasets raises without the hub, without waiting for retries
        raise ConnectionError(f"Couldn't reach '{name}' on the Hub (LocalEntryNotFoundError)")

    monkeypatch.setattr(datasets, "load_dataset", unreachable)
    rc, text = _run_cli(["evaluate", str(model_dir), "--no-blimp", "--task", "no_such_dataset_xyz:cfg",
                         "--out", str(tmp_path / "r.json")], capsys)
    assert rc == 2 and "could not be loaded as a Hugging Face dataset (Couldn't reach" in text and "Traceback" not in text
    assert not (tmp_path / "r.json").exists()


def test_hf_dataset_conversion(monkeypatch):
    """A GLUE-style HF dataset (ClassLabel labels, test labels -1) goes through the same detection."""
    import datasets

    from lvsearch.eval.tasks import load_task

    feats = datasets.Features({"sentence1": datasets.Value("string"), "sentence2": datasets.Value("string"),
                               "label": datasets.ClassLabel(names=["entailment", "not_entailment"]), "idx": datasets.Value("int32")})

    def split(labels):
        n = len(labels)
        return datasets.Dataset.from_dict({"sentence1": [f"a{i}" for i in range(n)], "sentence2": [f"b{i}" for i in range(n)],
                                           "label": labels, "idx": list(range(n))}, features=feats)

    dd = datasets.DatasetDict({"train": split([0, 1, 1, 0]), "validation": split([1, 0]), "test": split([-1, -1])})
    monkeypatch.setattr(datasets, "load_dataset", lambda name, config=None, **kw: dd)
    t = load_task("glue:rte")
    assert t.name == "glue:rte" and t.columns == {"text_a": "sentence1", "text_b": "sentence2", "label": "label"}
    assert t.label_names == ["entailment", "not_entailment"] and [e.label for e in t.splits["train"]] == [0, 1, 1, 0]
    assert not t.test_labeled and t.splits["test"][0].label is None and t.splits["dev"][1].b == "b1"


# --------------------------------------------------------------------------- MLM dev metrics
def test_mlm_dev_metrics(model_dir, small_corpus, trained):
    from lvsearch.data.loader import fixed_dev_set
    from lvsearch.data.shards import PreparedData
    from lvsearch.eval.mlm import mlm_dev_metrics

    data = PreparedData.open(small_corpus)
    m = load_model(model_dir)
    r = mlm_dev_metrics(m.encoder, data, num_sequences=64, batch_size=16)
    r2 = mlm_dev_metrics(m.encoder, data, num_sequences=64, batch_size=64)
    assert math.isclose(r["loss"], r2["loss"], rel_tol=1e-5) and r["accuracy"] == r2["accuracy"]
    # Reference: one pass over the same fixed dev set.
    dev = fixed_dev_set(data, num_sequences=64, seq_len=64, seed=1234)
    with torch.no_grad():
        sel = dev.labels != -100
        logits = m.encoder.mlm_logits(m.encoder(dev.input_ids)[sel])
        want_loss = float(torch.nn.functional.cross_entropy(logits, dev.labels[sel]))
        want_acc = float((logits.argmax(-1) == dev.labels[sel]).float().mean())
    assert math.isclose(r["loss"], want_loss, rel_tol=1e-5) and math.isclose(r["accuracy"], want_acc, rel_tol=1e-6)
    assert r["predicted_tokens"] == int(sel.sum()) and r["sequences"] == 64
    untrained = _tiny_encoder(data.vocab_size, data.special_ids.pad).eval()
    assert r["loss"] < mlm_dev_metrics(untrained, data, num_sequences=64)["loss"] - 0.5


def test_mlm_tokenizer_mismatch(model_dir, small_corpus, trained, tmp_path, capsys):
    enc, _ = trained
    tok = json.loads((small_corpus / "tokenizer.json").read_text())
    tok["normalizer"]["lowercase"] = False  # a different tokenizer with the same vocabulary
    (tmp_path / "tokenizer.json").write_text(json.dumps(tok))
    other = save_model_dir(tmp_path / "other", enc, arch=enc.arch, dims=enc.dims, tokenizer_path=tmp_path / "tokenizer.json",
                           objective="mlm", training_args={})
    rc, text = _run_cli(["evaluate", str(other), "--no-blimp", "--data", str(small_corpus), "--out", str(tmp_path / "r.json")], capsys)
    assert rc == 2 and "different tokenizer" in text and "Traceback" not in text
    assert not (tmp_path / "r.json").exists()


# --------------------------------------------------------------------------- CLI
def test_cli_full_report_and_compare(model_dir, small_corpus, shared_data, tmp_path, capsys):
    out = tmp_path / "report.json"
    argv = ["evaluate", str(model_dir), "--blimp", str(shared_data / "blimp"), "--blimp-limit", "2",
            "--task", str(shared_data / "tasks" / "rte"), "--train-limit", "48", "--eval-limit", "40", "--epochs", "1", "--threads", "1",
            "--seeds", "2", "--max-len", "64", "--data", str(small_corpus), "--dev-sequences", "32", "--out", str(out)]
    rc, text = _run_cli(argv, capsys)
    assert rc == 0, text
    r = json.loads(out.read_text())
    assert r["format"] == "lvsearch.eval-report/v1" and r["model"]["config"]["format"] == "lvsearch.model/v1"
    assert r["blimp"]["status"] == "done" and r["blimp"]["pairs"] == 134 and r["blimp"]["limit"] == 2
    assert "ties" in r["blimp"] and len(r["blimp"]["phenomena"]) >= 12 and "adjunct_island" in r["blimp"]["paradigms"]
    ft = r["finetune"]["rte"]
    assert len(ft["per_seed"]) == 2 and set(ft["aggregate"]) == {"dev", "test"}
    assert 0 < r["mlm"]["accuracy"] < 1 and r["mlm"]["sequences"] == 32
    assert set(r["timings"]) >= {"load_s", "blimp_s", "finetune_s", "mlm_s", "total_s"}
    assert "BLiMP mean over paradigms" in text and "rte test accuracy" in text
    # The report is never overwritten silently.
    before = out.read_bytes()
    rc, text = _run_cli(argv, capsys)
    assert rc == 2 and "already exists" in text and "--overwrite" in text and out.read_bytes() == before
    # Side-by-side comparison.
    rc, text = _run_cli(["evaluate", "--compare", str(out), str(out)], capsys)
    assert rc == 0 and "BLiMP mean over paradigms" in text and "MLM dev accuracy" in text
    rc, text = _run_cli(["evaluate", "--compare", str(model_dir / "config.json")], capsys)
    assert rc == 2 and "not an lvsearch evaluation report" in text


def test_cli_electra_without_generator_reports_not_applicable(trained, small_corpus, tmp_path, capsys):
    enc, data = trained
    folder = save_model_dir(tmp_path / "electra", enc, arch=enc.arch, dims=enc.dims, tokenizer_path=data.folder / "tokenizer.json",
                            objective="electra", training_args={})
    _write_blimp(tmp_path / "b", [{"UID": "u", "linguistics_term": "t", "sentence_good": "a dog .", "sentence_bad": "dog a ."}])
    rc, text = _run_cli(["evaluate", str(folder), "--blimp", str(tmp_path / "b"), "--data", str(small_corpus),
                         "--out", str(tmp_path / "r.json")], capsys)
    assert rc == 0, text
    r = json.loads((tmp_path / "r.json").read_text())
    assert r["blimp"] == {"status": "not applicable",
                          "reason": "RTD discriminator has no MLM head (no generator.safetensors in the model directory)"}
    assert r["mlm"]["status"] == "not applicable" and "not applicable" in text


def test_cli_misc_errors(model_dir, tmp_path, capsys):
    for argv, expect in [
        (["evaluate", str(tmp_path / "nope")], "model directory not found"),
        (["evaluate"], "no model directory given"),
        (["evaluate", str(model_dir), "--no-blimp", "--out", str(tmp_path / "r.json")], "nothing to evaluate"),
        (["evaluate", str(model_dir), "--no-blimp", "--data", str(tmp_path), "--out", str(tmp_path / "r.json")],
         "not a prepared dataset"),
        (["evaluate", str(model_dir), "--blimp", str(tmp_path / "missing"), "--out", str(tmp_path / "r.json")],
         "BLiMP folder not found"),
    ]:
        rc, text = _run_cli(argv, capsys)
        assert rc == 2 and expect in text and "Traceback" not in text, (argv, text)
    assert not (tmp_path / "r.json").exists()


def test_python_m_subprocess(model_dir, tmp_path, shared_data):
    out = tmp_path / "r.json"
    env = {**os.environ, "PYTHONPATH": str(REPO), "LVSEARCH_QUIET": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "lvsearch", "evaluate", str(model_dir), "--blimp", str(shared_data / "blimp"),
         "--blimp-limit", "1", "--task", str(shared_data / "tasks" / "sentence_polarity"), "--train-limit", "32",
         "--eval-limit", "32", "--epochs", "1", "--seeds", "1", "--out", str(out)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    r = json.loads(out.read_text())
    assert r["blimp"]["pairs"] == 67 and r["finetune"]["sentence_polarity"]["sizes"]["train_used"] == 32
    bad = subprocess.run([sys.executable, "-m", "lvsearch", "evaluate", str(tmp_path / "missing")],
                         cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "model directory not found" in bad.stderr and "Traceback" not in bad.stderr


# --------------------------------------------------------------------------- CLI forms, Markdown, lvsearch report
def test_finetune_sentence_polarity_beats_majority(shared_data, model_dir):
    """Fine-tuning sentence_polarity for a short budget beats the majority class on test."""
    from lvsearch.eval.finetune import FinetuneConfig, finetune_task
    from lvsearch.eval.tasks import load_task

    t = load_task(str(shared_data / "tasks" / "sentence_polarity"))
    test_labels = [e.label for e in t.splits["test"]]
    majority = max(test_labels.count(c) for c in set(test_labels)) / len(test_labels)
    m = load_model(model_dir)
    # Measured (torch 2.x, 1 thread, ~15 s): the 60-step MLM encoder learns slowly, 2 epochs on 1500
    # examples stay at the majority class; 5 epochs on 2000 examples reach ~0.63 test accuracy vs 0.51.
    cfg = FinetuneConfig(epochs=5, seeds=(0,), train_limit=2000, max_len=48, batch_size=16, lr=1e-3, layer_decay=1.0)
    r = finetune_task(m.encoder, m.tokenizer, t, cfg)
    assert r["sizes"]["test_used"] == len(test_labels) == 1066
    acc = r["per_seed"][0]["test"]["accuracy"]
    assert acc > majority + 0.03, (acc, majority)


def test_cli_model_flag_mlm_data_blimp_limit_20_and_markdown(model_dir, small_corpus, shared_data, tmp_path, capsys):
    """``--model`` / ``--mlm-data`` forms; BLiMP on ``--blimp-limit 20`` for all 67 paradigms;
    the Markdown table beside the JSON report, refused without --overwrite."""
    out = tmp_path / "r.json"
    rc, text = _run_cli(["evaluate", "--model", str(model_dir), "--blimp", str(shared_data / "blimp"), "--blimp-limit", "20",
                         "--mlm-data", str(small_corpus), "--dev-sequences", "32", "--out", str(out)], capsys)
    assert rc == 0, text
    r = json.loads(out.read_text())
    assert r["blimp"]["pairs"] == 67 * 20 and len(r["blimp"]["paradigms"]) == 67
    assert all(p["pairs"] == 20 for p in r["blimp"]["paradigms"].values())
    assert r["mlm"]["status"] == "done" and r["mlm"]["data"] == str(small_corpus.resolve())
    md = (tmp_path / "r.md").read_text()
    assert md.startswith("# Evaluation of tiny") and "| metric | tiny |" in md
    assert f"| parameters | {r['model']['num_params']:,} |" in md and "| arch | sfsf |" in md
    assert f"| MLM dev accuracy | {r['mlm']['accuracy']:.4f} |" in md
    assert f"| BLiMP pairs / ties | 1340 / {r['blimp']['ties']} |" in md
    for term, v in r["blimp"]["phenomena"].items():
        assert f"| BLiMP · {term} | {v['accuracy']:.4f} |" in md
    # Markdown alone blocks a rerun (nothing written); --overwrite replaces both files.
    out.unlink()
    cheap = ["evaluate", "--model", str(model_dir), "--no-blimp", "--data", str(small_corpus), "--dev-sequences", "16", "--out", str(out)]
    rc, text = _run_cli(cheap, capsys)
    assert rc == 2 and "Markdown report" in text and "already exists" in text and not out.exists()
    rc, text = _run_cli(cheap + ["--overwrite"], capsys)
    assert rc == 0, text
    assert json.loads(out.read_text())["mlm"]["sequences"] == 16 and "BLiMP ·" not in (tmp_path / "r.md").read_text()
    # Positional and --model: the same folder is fine, two different ones are an error.
    rc, text = _run_cli([cheap[0], str(model_dir)] + cheap[1:] + ["--overwrite"], capsys)
    assert rc == 0, text
    rc, text = _run_cli([cheap[0], str(tmp_path)] + cheap[1:] + ["--overwrite"], capsys)
    assert rc == 2 and "two different model directories" in text and "Traceback" not in text
    rc, text = _run_cli(cheap[:-1] + [str(tmp_path / "r.md")], capsys)
    assert rc == 2 and "ends in .md" in text


def test_task_hf_prefix(monkeypatch):
    import datasets

    from lvsearch.eval.tasks import load_task

    calls = []

    def fake(name, config=None, **kw):
        calls.append((name, config))
        raise ConnectionError("offline")

    monkeypatch.setattr(datasets, "load_dataset", fake)
    for spec in ("hf:glue:rte", "glue:rte"):
        with pytest.raises(LvsearchError, match="could not be loaded as a Hugging Face dataset"):
            load_task(spec)
    with pytest.raises(LvsearchError, match="names no dataset"):
        load_task("hf:")
    assert calls == [("glue", "rte"), ("glue", "rte")]


ELC_ARCH = Arch("sfsf", ((0,), (0, 1), (2,), (1, 3)))


@pytest.fixture(scope="module")
def two_evaluated(trained, small_corpus, tmp_path_factory):
    """(run folder of the sequential tiny model, model dir of an ELC variant), both evaluated
    (MLM metrics only, cheap). The ELC model's mixing logits are set so α is far from one-hot."""
    enc, data = trained
    root = tmp_path_factory.mktemp("report_models")
    seq = save_model_dir(root / "seqrun" / "model", enc, arch=enc.arch, dims=enc.dims, tokenizer_path=data.folder / "tokenizer.json",
                         objective="mlm", training_args={})
    torch.manual_seed(3)
    elc = Encoder(ELC_ARCH, enc.dims)
    with torch.no_grad():
        elc.mixing.logits.copy_(torch.tensor([[0.0] * 4, [0.3, -0.4, 0, 0], [0.0] * 4, [0, 1.2, 0, 0.1]]).T)
    elc_dir = save_model_dir(root / "elc", elc, arch=ELC_ARCH, dims=enc.dims, tokenizer_path=data.folder / "tokenizer.json",
                             objective="mlm", training_args={})
    for d in (seq, elc_dir):
        assert main(["evaluate", "--model", str(d), "--no-blimp", "--mlm-data", str(small_corpus), "--dev-sequences", "16"]) == 0
    return root / "seqrun", elc_dir


def test_report_two_models(two_evaluated, tmp_path, capsys):
    import numpy as np
    from matplotlib.image import imread

    run, elc_dir = two_evaluated
    out = tmp_path / "rep"
    rc, text = _run_cli(["report", str(run), str(elc_dir), "--out", str(out)], capsys)
    assert rc == 0, text
    assert sorted(p.name for p in out.iterdir()) == ["alpha_elc.png", "alpha_seqrun.png", "report.md"]
    md = (out / "report.md").read_text()
    assert "| metric | seqrun | elc |" in md and "| arch | sfsf | sfsf +mixing |" in md
    r_seq = json.loads((run / "model" / "results.json").read_text())
    r_elc = json.loads((elc_dir / "results.json").read_text())
    assert f"| MLM dev accuracy | {r_seq['mlm']['accuracy']:.4f} | {r_elc['mlm']['accuracy']:.4f} |" in md
    assert f"| parameters | {r_seq['model']['num_params']:,} | {r_elc['model']['num_params']:,} |" in md
    # α of the multi-input slots: listed in report.md, equal to the model's, strictly inside (0, 1).
    alpha = load_model(elc_dir).encoder.alpha_matrix()
    assert torch.allclose(alpha.sum(1), torch.ones(4))
    for n, inputs in ((2, (0, 1)), (4, (1, 3))):
        vals = [float(alpha[n - 1, i]) for i in inputs]
        assert all(0.05 < v < 0.95 for v in vals), vals
        assert f"- elc, slot {n} (FF): " + ", ".join(f"h{i} {v:.3f}" for i, v in zip(inputs, vals)) in md
    assert "seqrun, slot" not in md
    for name in ("alpha_seqrun.png", "alpha_elc.png"):
        img = imread(out / name)
        assert (out / name).stat().st_size > 1000 and img.ndim == 3 and img.shape[0] > 100
    # The two heatmaps differ (mixed vs one-hot α).
    a, b = imread(out / "alpha_seqrun.png"), imread(out / "alpha_elc.png")
    assert a.shape != b.shape or not np.array_equal(a, b)
    # No silent overwrite; --overwrite replaces.
    before = (out / "report.md").read_bytes()
    rc, text = _run_cli(["report", str(run), str(elc_dir), "--out", str(out)], capsys)
    assert rc == 2 and "already holds" in text and "report.md" in text and "--overwrite" in text
    assert (out / "report.md").read_bytes() == before
    rc, text = _run_cli(["report", str(run), str(elc_dir / "results.json"), "--out", str(out), "--overwrite"], capsys)
    assert rc == 0, text
    assert "| metric | seqrun | elc |" in (out / "report.md").read_text()


def test_report_errors(two_evaluated, model_dir, tmp_path, capsys):
    run, elc_dir = two_evaluated
    bare = _copy_model(model_dir, tmp_path)
    (bare / "results.json").unlink(missing_ok=True)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    partial = tmp_path / "partial.json"
    partial.write_text(json.dumps({"format": "lvsearch.eval-report/v1", "model": {"name": "x"}}))
    (tmp_path / "file_out").write_text("x")
    for argv, expect in [
        (["report", str(bare)], "has no evaluation report"),
        (["report", str(bare)], "lvsearch evaluate"),
        (["report", str(tmp_path / "nope")], "not found"),
        (["report", str(bad)], "not valid JSON"),
        (["report", str(partial)], "is malformed"),
        (["report", str(model_dir / "config.json")], "not an lvsearch evaluation report"),
        (["report", str(run), "--out", str(tmp_path / "file_out")], "is a file"),
    ]:
        rc, text = _run_cli(argv + ([] if "--out" in argv else ["--out", str(tmp_path / "o")]), capsys)
        assert rc == 2 and expect in text and "Traceback" not in text, (argv, text)
    assert not (tmp_path / "o").exists()


def test_a_split_with_another_text_column_names_only_real_columns(tmp_path):
    """A fresh user's pass: a single-sentence task whose dev header renamed the text column
    printed "text columns 'sentence'/'None'"; only real columns are named now."""
    from lvsearch.errors import LvsearchError
    from lvsearch.eval.tasks import load_task_folder

    (tmp_path / "train.tsv").write_text("sentence\tlabel\na b\t0\nc d\t1\n")
    (tmp_path / "dev.tsv").write_text("text\tlabel\na b\t0\nc d\t1\n")
    with pytest.raises(LvsearchError) as err:
        load_task_folder(tmp_path)
    assert "None" not in str(err.value) and "'text'" in str(err.value) and "'sentence'" in str(err.value)


def test_compare_columns_are_named_after_the_runs_not_their_model_folders(tmp_path):
    """`evaluate --compare RUN_A/model/results.json RUN_B/model/results.json` names its columns
    RUN_A and RUN_B, as `lvsearch report` does (both used to read "model")."""
    from lvsearch.eval.report import report_label, unique_labels

    paths = []
    for run in ("best", "bert"):
        model = tmp_path / run / "model"
        model.mkdir(parents=True)
        (model / "config.json").write_text("{}")
        paths.append((model / "results.json", {"model": {"name": "model", "folder": str(model), "config": {}}}))
    assert [report_label(p, r) for p, r in paths] == ["best", "bert"]
    assert report_label(tmp_path / "small.json", paths[0][1]) == "small"
    assert unique_labels(["bert", "bert", "best"]) == ["bert", "bert#2", "best"]


def test_more_dev_sequences_than_the_split_has_are_said(two_evaluated, small_corpus, tmp_path, capsys):
    """--dev-sequences above the dev split's count: all are used, and the console says how many
    (it printed the number asked for)."""
    _, elc_dir = two_evaluated
    out = tmp_path / "r.json"
    rc, text = _run_cli(["evaluate", "--model", str(elc_dir), "--no-blimp", "--mlm-data", str(small_corpus),
                         "--dev-sequences", "100000", "--out", str(out)], capsys)
    assert rc == 0, text
    text = " ".join(text.split())
    n = json.loads(out.read_text())["mlm"]["sequences"]
    assert n < 100000 and f"MLM dev set: {n} sequences" in text
    assert f"100000 dev sequences asked, but the dev split of {small_corpus} has {n}" in text
