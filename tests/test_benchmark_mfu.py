"""benchmarks/mfu.py at tiny sizes: the FLOP count against a hand count and torch's counter, the
HF peer's count, and a short run's JSON."""

from __future__ import annotations

import json
import random
import sys

import pytest
import torch

from _shared import benchmark_script


@pytest.fixture
def mfu(monkeypatch, tmp_path):
    return benchmark_script(monkeypatch, tmp_path, "mfu")


def test_flop_count_equals_a_hand_count_and_torchs_counter(mfu):
    """``sf`` at hidden 8, embedding 4, FF 16, 2 heads, vocab 32, L = 8: per token the embedding
    projection 2·4·8 = 64, SA 8·8·8 + 4·8·8 = 768, FF 4·8·16 = 512; the head 2·8·4 + 2·4·32 = 320
    at each target only. torch's FlopCounterMode over forward + backward gives 3 × that."""
    from torch.utils.flop_counter import FlopCounterMode

    from lvsearch.arch import Arch
    from lvsearch.model import Encoder, ModelDims
    from lvsearch.train.retrain import EncoderMLM

    dims = ModelDims(vocab_size=32, hidden=8, embedding=4, ff_inner=16, heads=2, max_len=8, dropout=0.0,
                     pre_ln=True, position="relative")
    arch = Arch.sequential("sf")
    tokens, targets = 16, 5
    assert mfu.lvsearch_forward_flops(arch, dims, 8, tokens, targets) == 16 * (64 + 768 + 512) + 5 * 320

    torch.manual_seed(0)
    module = EncoderMLM(Encoder(arch, dims))
    ids = torch.randint(5, 32, (2, 8))
    labels = torch.full((2, 8), -100)
    labels.view(-1)[[1, 4, 7, 9, 14]] = ids.view(-1)[[1, 4, 7, 9, 14]]
    with FlopCounterMode(display=False) as fc:
        module(input_ids=ids, labels=labels)["loss_sum"].backward()
    assert fc.get_total_flops() == 3 * (16 * (64 + 768 + 512) + 5 * 320)


def test_hf_peer_count_is_its_layers_and_a_head_at_every_position(mfu):
    import _common

    # one layer: 8·8·8 + 4·8·8 + 4·8·16 = 1280; head 2·8·8 + 2·8·32 = 640
    assert _common.hf_bert_flops_per_token(8, 16, 1, 32, 8) == 1280 + 640


def test_short_run_writes_well_formed_json(mfu, tmp_path, monkeypatch):
    from lvsearch.data.prepare import PrepareSettings, prepare

    rng = random.Random(0)
    words = [f"w{i}" for i in range(300)]
    src = tmp_path / "text"
    for split, n in (("train", 2000), ("dev", 50)):
        (src / split).mkdir(parents=True)
        (src / split / f"toy.{split}").write_text(
            "\n".join(" ".join(rng.choice(words) for _ in range(12)) for _ in range(n)) + "\n", encoding="utf-8")
    data = tmp_path / "corpus"
    prepare([str(src)], data, PrepareSettings(vocab_size=400), show_progress=False)
    monkeypatch.setattr(sys, "argv", ["mfu.py", "--data", str(data), "--threads", "1", "--rounds", "1", "--steps", "1",
                                      "--gemm-size", "64", "--gemm-reps", "2", "--only",
                                      "supernet-quickstart,retrain-quickstart/bert,hf-bert@quickstart", "--name", "t"])
    mfu.main()
    out = json.loads((tmp_path / "results" / "t.json").read_text())
    assert out["benchmark"] == "mfu" and out["machine"]["cpu_model"] and "native_bf16" in out["machine"]
    fp32 = out["precision"]["fp32"]
    assert fp32["gemm"]["median_flops_per_s"] > 0
    assert set(fp32["configs"]) == {"supernet-quickstart", "retrain-quickstart/bert", "hf-bert@quickstart"}
    for key, c in fp32["configs"].items():
        assert c["median_tokens_per_s"] > 0 and c["mfu"] == pytest.approx(c["median_flops_per_s"] / fp32["gemm"]["median_flops_per_s"])
        assert out["configs"][key]["train_flops_per_token"] > 0
    assert out["configs"]["retrain-quickstart/bert"]["counted_over_analytic"] == pytest.approx(1.0)
    assert fp32["configs"]["retrain-quickstart/bert"]["vs_hf_peer"]["peer"] == "hf-bert@quickstart"
    if not out["machine"]["native_bf16"]:
        assert out["precision"]["bf16"].startswith("unmeasured")


def test_blimp_mode_counts_every_scored_row(mfu, tmp_path, monkeypatch):
    """``--blimp`` on one paradigm × 3 pairs: one counted row per scored position (every
    forward pass is seen), padding a share, MFU = achieved / peak."""
    import _common

    if not (_common.shared_data_dir() / "blimp").is_dir():
        pytest.skip("../shared/data/blimp is absent: the BLiMP MFU needs the BLiMP files")
    from lvsearch.data.prepare import PrepareSettings, prepare

    src = tmp_path / "text"
    for split, n in (("train", 300), ("dev", 20)):
        (src / split).mkdir(parents=True)
        (src / split / f"toy.{split}").write_text("the cat sat on the mat and the dogs ran .\n" * n, encoding="utf-8")
    data = tmp_path / "corpus"
    prepare([str(src)], data, PrepareSettings(vocab_size=200), show_progress=False)
    monkeypatch.setattr(sys, "argv", ["mfu.py", "--blimp", "--data", str(data), "--threads", "1", "--blimp-every", "67",
                                      "--blimp-limit", "3", "--gemm-size", "64", "--gemm-reps", "2", "--name", "b"])
    mfu.main()
    out = json.loads((tmp_path / "results" / "b.json").read_text())
    b = out["blimp"]
    assert out["benchmark"] == "mfu_blimp" and b["paradigms"] == 1 and b["pairs"] == 3
    assert b["forward_rows"] == b["tokens_scored"] > 0 and b["forward_passes"] >= 1
    assert 0 <= b["padding_share"] < 1 and b["forward_tokens"] >= b["forward_rows"]
    assert b["mfu"] == pytest.approx(b["achieved_flops_per_s"] / b["gemm"]["median_flops_per_s"])
