"""``lvsearch export`` (Hugging Face folder) and ``lvsearch evaluate --model hf:...``.

Parity: an exported model's hidden states and MLM logits equal lvsearch's own Encoder to 1e-5
(float32, eval mode) on real sentences with padding, for every op and switch. Then: transformers'
``Trainer`` fine-tunes the export; the folder loads in a fresh interpreter where lvsearch cannot
be imported; ``save_pretrained`` round-trips; native and ``hf:`` evaluation give the same
BLiMP and MLM numbers; bad inputs fail with one message.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

transformers = pytest.importorskip("transformers")

from _shared import REPO  # noqa: E402

from lvsearch.arch import Arch  # noqa: E402
from lvsearch.cli import main  # noqa: E402
from lvsearch.export import export_model, hf_name, hf_state_dict  # noqa: E402
from lvsearch.model import Encoder, ModelDims  # noqa: E402
from lvsearch.modeldir import save_model_dir  # noqa: E402

TOL = 1e-5
ELC_SPARSE = [[0], [0, 1], [1, 2], [0, 3], [2, 4], [1, 3, 5]]

# Every op (LA in the variant loaded without lvsearch; tests/test_ops.py checks every registered op), ELC mixing sparse and dense, pre-/post-LN, weighted output, embedding projection on/off,
# absolute and relative positions (both relative_init values), geglu, normalised mixing, init variants.
VARIANTS = {
    "sparse-postln-absolute-proj": ("sfcsfc", ELC_SPARSE,
                                    dict(position="absolute", embedding=32)),
    "dense-preln-relative-local-weighted": ("csfcsf", "dense",
                                            dict(pre_ln=True, weighted_output=True, position="relative",
                                                 relative_init="local", mixing_normalized=True, ff_activation="geglu",
                                                 embedding=32, mixing_init="zero")),
    "sequential-postln-relative-zero-noproj": ("sfc", None,
                                               dict(position="relative", relative_init="zero", embedding=64,
                                                    init="scaled")),
    "sparse-preln-absolute-weighted-noproj": ("fcslcs", ELC_SPARSE,
                                              dict(pre_ln=True, weighted_output=True, embedding=64)),
}


def _encoder(ops: str, inputs, vocab_size: int, pad_id: int, **kw) -> Encoder:
    if inputs == "dense":
        inputs = [list(range(n)) for n in range(1, len(ops) + 1)]
    arch = Arch(ops, inputs)
    dims = ModelDims(vocab_size=vocab_size, hidden=64, ff_inner=96, heads=2, conv_kernel=5, max_len=128,
                     dropout=0.1, pad_id=pad_id, relative_buckets=16, relative_max_distance=32,
                     **{"embedding": 32, **kw})
    torch.manual_seed(len(ops) + len(kw))
    enc = Encoder(arch, dims)
    with torch.no_grad():  # move every parameter off its init (LayerNorm ones, zero biases, biased α̂)
        for p in enc.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return enc.eval()


@pytest.fixture(scope="module")
def tok_path(small_corpus) -> Path:
    return small_corpus / "tokenizer.json"


@pytest.fixture(scope="module")
def real_batch(shared_data, small_corpus):
    """24 sentence_polarity dev sentences tokenised with the corpus tokenizer, padded (B, L)."""
    from lvsearch.data.shards import PreparedData

    data = PreparedData.open(small_corpus)
    tok = data.tokenizer
    lines = (shared_data / "tasks" / "sentence_polarity" / "dev.tsv").read_text(encoding="utf-8").splitlines()[1:25]
    seqs = [e.ids[:60] for e in tok.encode_batch([ln.split("\t")[0] for ln in lines])]
    pad = data.special_ids.pad
    L = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), L), pad, dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s)
    mask = ids != pad
    assert (~mask).any(), "the batch must contain padding"
    return data, ids, mask


def _native(enc: Encoder, ids, mask):
    states = [enc.embed(ids)]
    for n in range(1, enc.num_slots + 1):
        states.append(enc.run_slot(n, states, mask))
    hidden = enc.finish(states)
    return states, hidden, enc.mlm_logits(hidden)


def _export(enc: Encoder, tok_path: Path, root: Path, name: str, **kw) -> Path:
    model_dir = save_model_dir(root / name / "model", enc, arch=enc.arch, dims=enc.dims, tokenizer_path=tok_path,
                               objective=kw.pop("objective", "mlm"), training_args={}, **kw)
    return export_model(model_dir, root / name / "hf")["out"]


@pytest.fixture(scope="module")
def exported(real_batch, tok_path, tmp_path_factory):
    data, _, _ = real_batch
    root = tmp_path_factory.mktemp("export")
    out = {}
    for name, (ops, inputs, kw) in VARIANTS.items():
        enc = _encoder(ops, inputs, data.vocab_size, data.special_ids.pad, **kw)
        out[name] = (enc, _export(enc, tok_path, root, name))
    return out


# ----------------------------------------------------------------------------------------- names
def test_hf_name_mapping_covers_every_parameter_once():
    enc = _encoder("sfcsfc", ELC_SPARSE, 100, 0, pre_ln=True, weighted_output=True, position="relative")
    enc2 = _encoder("sfc", None, 100, 0, position="absolute", embedding=32)
    for e in (enc, enc2):
        sd = hf_state_dict(e.state_dict())
        assert len(sd) == len(e.state_dict())
    assert hf_name("embeddings.word.weight") == "lvsearch.embeddings.word_embeddings.weight"
    # a slot's layer is lvsearch's op module, so its parameter names are kept
    assert hf_name("slots.1.SA.out.weight") == "lvsearch.layers.0.out.weight"
    assert hf_name("slots.3.FF.fc1.bias") == "lvsearch.layers.2.fc1.bias"
    assert hf_name("slots.2.DC.kernel.weight") == "lvsearch.layers.1.kernel.weight"
    assert hf_name("slots.4.SA.relative_bias") == "lvsearch.layers.3.relative_bias"
    assert hf_name("slots.5.LA.norm.weight") == "lvsearch.layers.4.norm.weight"
    assert hf_name("mixing.logits") == "lvsearch.mixing_logits"
    assert hf_name("mlm_head.norm.weight") == "lm_head.LayerNorm.weight"
    assert hf_name("rtd_head.2.bias") == "discriminator_predictions.dense_prediction.bias"
    for bad in ("slots.1.SA", "encoder.x", "slots.1.XX.qkv.weight", "slots.x.SA.qkv.weight"):
        with pytest.raises(ValueError):
            hf_name(bad)


def test_template_is_self_contained():
    """Every shipped .py file (template, op index, op modules) imports only torch, transformers,
    the standard library and its siblings, outside ``try/except ImportError`` (DC's fused kernel,
    with a fallback); a relative import names a shipped file."""
    from lvsearch.export import export_code

    code = export_code()
    assert {"modeling_lvsearch.py", "configuration_lvsearch.py", "ops_index.py", "base.py", "sa.py", "ff.py",
            "dc.py", "local.py"} <= set(code)
    for name, data in code.items():
        tree = ast.parse(data.decode("utf-8"))
        guarded = {id(n) for t in ast.walk(tree) if isinstance(t, ast.Try) for b in t.body for n in ast.walk(b)}
        roots = set()
        for node in ast.walk(tree):
            if id(node) in guarded:
                continue
            if isinstance(node, ast.Import):
                roots |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                roots.add(node.module.split(".")[0])
            elif isinstance(node, ast.ImportFrom):
                assert node.level == 1 and f"{node.module}.py" in code, (name, node.module)
        assert roots <= {"torch", "transformers", "math", "dataclasses", "types", "typing", "__future__"}, (name, roots)


# ----------------------------------------------------------------------------------------- parity
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_parity_hidden_states_and_mlm_logits(exported, real_batch, variant, capsys):
    from transformers import AutoModel, AutoModelForMaskedLM

    enc, folder = exported[variant]
    _, ids, mask = real_batch
    hf = AutoModelForMaskedLM.from_pretrained(folder, trust_remote_code=True).eval()
    base = AutoModel.from_pretrained(folder, trust_remote_code=True).eval()
    assert not hf.training and hf.config.model_type == "lvsearch"
    with torch.no_grad():
        states, hidden, logits = _native(enc, ids, mask)
        out = hf(input_ids=ids, attention_mask=mask.long(), output_hidden_states=True)
        base_out = base(input_ids=ids, attention_mask=mask.long())
    assert len(out.hidden_states) == enc.num_slots + 1
    d_states = max(float((a - b).abs().max()) for a, b in zip(states, out.hidden_states))
    d_hidden = float((base_out.last_hidden_state - hidden).abs().max())
    d_logits = float((out.logits - logits).abs().max())
    with capsys.disabled():
        print(f"\n[parity {variant}] max|Δ| states {d_states:.2e} last_hidden {d_hidden:.2e} logits {d_logits:.2e}")
    assert d_states < TOL and d_hidden < TOL and d_logits < TOL
    # no mask = no padding, as in lvsearch
    with torch.no_grad():
        full = hf(input_ids=ids[:2, :9]).logits
        assert float((full - enc.mlm_logits(enc(ids[:2, :9]))).abs().max()) < TOL


def test_electra_discriminator_and_generator_export(real_batch, tok_path, tmp_path):
    from transformers import AutoModel, AutoModelForMaskedLM, AutoModelForPreTraining

    data, ids, mask = real_batch
    disc = _encoder("sfc", None, data.vocab_size, data.special_ids.pad, embedding=32)
    gen = _encoder("sfc", None, data.vocab_size, data.special_ids.pad, embedding=32, position="relative")
    model_dir = save_model_dir(tmp_path / "electra", disc, arch=disc.arch, dims=disc.dims, tokenizer_path=tok_path,
                               objective="electra", training_args={}, generator=gen)
    d = export_model(model_dir, tmp_path / "disc")
    assert d["which"] == "discriminator" and d["architectures"] == ["LvsearchForPreTraining"] and not d["mlm_head"]
    assert "no checkpoint" in d["rtd_head"]
    g = export_model(model_dir, tmp_path / "gen", generator=True)
    assert g["which"] == "generator" and g["mlm_head"]
    with torch.no_grad():
        base = AutoModel.from_pretrained(tmp_path / "disc", trust_remote_code=True).eval()
        assert float((base(ids, mask.long()).last_hidden_state - disc(ids, mask)).abs().max()) < TOL
        rtd = AutoModelForPreTraining.from_pretrained(tmp_path / "disc", trust_remote_code=True).eval()
        assert rtd(ids, mask.long()).logits.shape == ids.shape
        glm = AutoModelForMaskedLM.from_pretrained(tmp_path / "gen", trust_remote_code=True).eval()
        assert float((glm(ids, mask.long()).logits - gen.mlm_logits(gen(ids, mask))).abs().max()) < TOL


def test_export_of_a_path_extracted_from_a_per_op_alpha_supernet(real_batch, tok_path, tmp_path):
    """``model.mixing_per_op``: the extracted Encoder is an ordinary one ((N, N) α̂, the same
    dims), so its model directory and HF export match the supernet's path."""
    from transformers import AutoModelForMaskedLM

    from lvsearch.model import Supernet
    from lvsearch.space import SearchSpace

    data, ids, mask = real_batch
    space = SearchSpace.load("lvbert-elc").with_num_slots(6)
    dims = ModelDims(vocab_size=data.vocab_size, hidden=64, embedding=32, ff_inner=96, heads=2, conv_kernel=5,
                     max_len=128, pad_id=data.special_ids.pad)
    torch.manual_seed(0)
    sn = Supernet(space, dims, mixing_per_op=True)
    with torch.no_grad():
        for p in sn.parameters():
            p.add_(0.05 * torch.randn_like(p))
    sn.eval()
    arch = Arch("sfcsfc", ELC_SPARSE)
    enc = sn.extract(arch)
    assert enc.mixing.logits.shape == (6, 6) and enc.dims == dims
    folder = _export(enc, tok_path, tmp_path, "per-op")
    hf = AutoModelForMaskedLM.from_pretrained(folder, trust_remote_code=True).eval()
    with torch.no_grad():
        want = sn.mlm_logits(sn(ids, arch, mask))
        assert float((hf(input_ids=ids, attention_mask=mask.long()).logits - want).abs().max()) < TOL


# ----------------------------------------------------------------------------------------- transformers API
def test_trainer_fine_tunes_the_export(exported, shared_data, tmp_path):
    """transformers' Trainer, unchanged, on sentence_polarity: the training loss falls."""
    from transformers import (AutoModelForSequenceClassification, AutoTokenizer, DataCollatorWithPadding, Trainer,
                              TrainingArguments)

    _, folder = exported["sparse-postln-absolute-proj"]
    tok = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
    model = AutoModelForSequenceClassification.from_pretrained(folder, num_labels=2, trust_remote_code=True)
    rows = (shared_data / "tasks" / "sentence_polarity" / "train.tsv").read_text(encoding="utf-8").splitlines()[1:65]
    train = []
    for r in rows:
        text, label = r.split("\t")
        train.append({**tok(text, truncation=True, max_length=64), "labels": int(label)})
    args = TrainingArguments(output_dir=str(tmp_path / "trainer"), max_steps=60, per_device_train_batch_size=16,
                             learning_rate=2e-3, warmup_steps=0, logging_steps=4, save_strategy="no", report_to=[],
                             use_cpu=True, seed=0, disable_tqdm=True, dataloader_num_workers=0)
    trainer = Trainer(model=model, args=args, train_dataset=train, data_collator=DataCollatorWithPadding(tok))
    trainer.train()
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    # measured (torch 2.13 CPU, 1 thread): 0.72 at the first log, 0.017 after 60 steps (64 examples learnt)
    assert len(losses) >= 10 and sum(losses[-3:]) / 3 < 0.5 * sum(losses[:2]) / 2, losses


def test_fill_mask_and_save_pretrained_round_trip(exported, real_batch, tmp_path):
    from transformers import AutoConfig, AutoModelForMaskedLM, AutoTokenizer, pipeline

    _, folder = exported["dense-preln-relative-local-weighted"]
    _, ids, mask = real_batch
    cfg = AutoConfig.from_pretrained(folder, trust_remote_code=True)
    assert cfg.ops == ["DC", "SA", "FF", "DC", "SA", "FF"] and cfg.num_hidden_layers == 6
    tok = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
    assert (tok.pad_token, tok.mask_token, tok.cls_token, tok.sep_token) == ("[PAD]", "[MASK]", "[CLS]", "[SEP]")
    assert tok("a film")["input_ids"][0] == tok.cls_token_id and "token_type_ids" not in tok("a film")
    fill = pipeline("fill-mask", model=str(folder), trust_remote_code=True)
    res = fill("the film is [MASK] .")
    assert len(res) == 5 and all("token_str" in r for r in res)
    model = AutoModelForMaskedLM.from_pretrained(folder, trust_remote_code=True).eval()
    assert model.get_output_embeddings().weight is model.get_input_embeddings().weight  # tied
    model.save_pretrained(tmp_path / "again")
    again = AutoModelForMaskedLM.from_pretrained(tmp_path / "again", trust_remote_code=True).eval()
    with torch.no_grad():
        assert torch.equal(model(ids, mask.long()).logits, again(ids, mask.long()).logits)


FRESH = r"""
import json, sys
sys.modules["lvsearch"] = None  # any 'import lvsearch' now raises ImportError
import torch
from transformers import (AutoConfig, AutoModel, AutoModelForMaskedLM, AutoModelForSequenceClassification,
                          AutoTokenizer, pipeline)
d = sys.argv[1]
AutoConfig.from_pretrained(d, trust_remote_code=True)
tok = AutoTokenizer.from_pretrained(d, trust_remote_code=True)
AutoModel.from_pretrained(d, trust_remote_code=True)
AutoModelForSequenceClassification.from_pretrained(d, num_labels=3, trust_remote_code=True)
m = AutoModelForMaskedLM.from_pretrained(d, trust_remote_code=True).eval()
ids = torch.tensor(json.loads(sys.argv[2]))
with torch.no_grad():
    logits = m(input_ids=ids, attention_mask=(ids != tok.pad_token_id).long()).logits
pipeline("fill-mask", model=d, trust_remote_code=True)("a [MASK] film .")
bad = [k for k, v in sys.modules.items() if k.startswith("lvsearch") and v is not None]
print(json.dumps({"logits": logits[:, :4, :6].tolist(), "lvsearch_modules": bad}))
"""


def test_loads_in_fresh_process_without_lvsearch(exported, real_batch, tmp_path):
    enc, folder = exported["sparse-preln-absolute-weighted-noproj"]
    _, ids, mask = real_batch
    ids = ids[:3]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update({"OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error"})
    proc = subprocess.run([sys.executable, "-I", "-c", FRESH, str(folder), json.dumps(ids.tolist())], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    assert res["lvsearch_modules"] == []
    with torch.no_grad():
        want = enc.mlm_logits(enc(ids, ids != enc.dims.pad_id))[:, :4, :6]
    assert float((torch.tensor(res["logits"]) - want).abs().max()) < TOL


# ----------------------------------------------------------------------------------------- evaluate hf:
def test_hf_scorer_gives_native_decisions_under_each_metric(exported, shared_data):
    """hf:EXPORT and its model directory: the same per-pair BLiMP decisions under PLL and
    PLL-word-l2r, and the hf: scorer runs the MLM head only at the scored positions."""
    from lvsearch.eval.blimp import METRICS, PLLScorer, evaluate_blimp, read_blimp
    from lvsearch.eval.hf import load_hf_model
    from lvsearch.modeldir import load_model

    _, folder = exported["sparse-postln-absolute-proj"]
    native = load_model(folder.parent / "model")
    hf = load_hf_model(f"hf:{folder}")
    assert hf.scorer.head is not None  # base model + head split, checked against the model's own logits
    paradigms = read_blimp(shared_data / "blimp", limit=2)[::4]
    for metric in METRICS:
        n = evaluate_blimp(PLLScorer(native.encoder, native.tokenizer, metric=metric), paradigms)
        h = evaluate_blimp(PLLScorer(hf.scorer, hf.tokenizer, metric=metric), paradigms)
        assert n["metric"] == h["metric"] == metric
        for uid, p in n["paradigms"].items():
            assert h["paradigms"][uid]["per_pair_correct"] == p["per_pair_correct"], (metric, uid)


def test_evaluate_hf_reproduces_native_numbers(exported, small_corpus, shared_data, tmp_path, capsys):
    """The same model through its model directory and through hf:EXPORT: identical per-pair BLiMP
    outcomes, per-target MLM outcomes, MLM loss to 1e-5; then both side by side in one report."""
    _, folder = exported["sparse-postln-absolute-proj"]
    model_dir = folder.parent / "model"
    common = ["--blimp", str(shared_data / "blimp"), "--blimp-limit", "2", "--mlm-data", str(small_corpus),
              "--dev-sequences", "16", "--task", str(shared_data / "tasks" / "sentence_polarity"), "--train-limit", "32",
              "--eval-limit", "32", "--epochs", "1", "--seeds", "1", "--threads", "1"]
    reports = {}
    for name, spec in (("native", str(model_dir)), ("hf", f"hf:{folder}")):
        out = tmp_path / f"{name}.json"
        assert main(["evaluate", "--model", spec, *common, "--out", str(out)]) == 0
        reports[name] = json.loads(out.read_text())
    capsys.readouterr()
    n, h = reports["native"], reports["hf"]
    assert h["model"]["config"]["source"] == "hf" and h["model"]["num_params"] == n["model"]["num_params"]
    assert h["mlm"]["tokenizer_match"] == "same tokenizer.json"
    for uid, p in n["blimp"]["paradigms"].items():
        assert h["blimp"]["paradigms"][uid]["per_pair_correct"] == p["per_pair_correct"], uid
    assert h["blimp"]["mean_over_pairs"] == n["blimp"]["mean_over_pairs"]
    assert h["mlm"]["per_target_correct"] == n["mlm"]["per_target_correct"]
    assert abs(h["mlm"]["loss"] - n["mlm"]["loss"]) < TOL
    assert h["finetune"]["sentence_polarity"]["per_seed"][0]["status"] in ("ok", "failed")
    # a standard-looking HF column next to the lvsearch column in one report
    assert main(["report", str(tmp_path / "native.json"), str(tmp_path / "hf.json"), "--out", str(tmp_path / "rep")]) == 0
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "| metric | native | hf |" in md and "no α heatmap" in md


def test_evaluate_hf_standard_bert(real_batch, tok_path, small_corpus, shared_data, tmp_path, capsys):
    """A stock transformers BertForMaskedLM (tiny, random) through evaluate hf: and next to an
    lvsearch-free folder in a report: token_type_ids, its own head, vocabulary-equal tokenizer."""
    from transformers import BertConfig, BertForMaskedLM, PreTrainedTokenizerFast

    data, _, _ = real_batch
    torch.manual_seed(0)
    bert = BertForMaskedLM(BertConfig(vocab_size=data.vocab_size, hidden_size=32, num_hidden_layers=1,
                                      num_attention_heads=2, intermediate_size=64, max_position_embeddings=128))
    bert.save_pretrained(tmp_path / "bert")
    PreTrainedTokenizerFast(tokenizer_file=str(tok_path), pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]",
                            sep_token="[SEP]", mask_token="[MASK]").save_pretrained(tmp_path / "bert")
    out = tmp_path / "bert.json"
    assert main(["evaluate", "--model", f"hf:{tmp_path / 'bert'}", "--blimp", str(shared_data / "blimp"),
                 "--blimp-limit", "1", "--mlm-data", str(small_corpus), "--dev-sequences", "8", "--out", str(out)]) == 0
    capsys.readouterr()
    r = json.loads(out.read_text())
    assert r["blimp"]["pairs"] == 67 and r["model"]["config"]["hf"]["model_type"] == "bert"
    assert r["mlm"]["status"] == "done" and 0 <= r["mlm"]["accuracy"] <= 1
    assert r["model"]["num_params"] == sum(p.numel() for p in bert.parameters())
    assert main(["report", str(out), "--out", str(tmp_path / "rep")]) == 0
    assert "hf bert" in (tmp_path / "rep" / "report.md").read_text()


# ----------------------------------------------------------------------------------------- bad input
def test_bad_inputs(exported, tmp_path, capsys):
    enc, folder = exported["sequential-postln-relative-zero-noproj"]
    model_dir = folder.parent / "model"
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "notes.txt").write_text("x")
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep.txt").write_text("keep")
    gpt = tmp_path / "gpt2"
    transformers.GPT2Config(n_layer=1, n_embd=8, n_head=2, vocab_size=10).save_pretrained(gpt)
    cases = [
        (["export", "--model", str(tmp_path / "plain"), "--out", str(tmp_path / "o1")], "is not a model directory"),
        (["export", "--model", str(tmp_path / "nowhere"), "--out", str(tmp_path / "o2")], "model directory not found"),
        (["export", "--model", str(model_dir), "--out", str(full)], "exists and is not empty"),
        (["export", "--model", str(model_dir), "--generator", "--out", str(tmp_path / "o3")], "has no ELECTRA generator"),
        (["export", "--model", str(model_dir.parent), "--out", str(tmp_path / "o4")], "pass --model"),
        (["evaluate", "--model", f"hf:{gpt}", "--no-blimp", "--task", "x", "--out", str(tmp_path / "r.json")],
         "is not a masked language model"),
        (["evaluate", "--model", f"hf:{tmp_path / 'plain'}", "--no-blimp", "--out", str(tmp_path / "r.json")],
         "no config.json"),
        (["evaluate", "--model", f"hf:{tmp_path / 'missing'}", "--no-blimp", "--out", str(tmp_path / "r.json")],
         "folder not found"),
    ]
    for argv, expect in cases:
        rc = main(argv)
        err = capsys.readouterr().err
        assert rc == 2 and expect in err and "Traceback" not in err, (argv, err)
        assert "fix:" in err
    assert sorted(p.name for p in full.iterdir()) == ["keep.txt"]
    for name in ("o1", "o2", "o3", "o4", "r.json"):
        assert not (tmp_path / name).exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")], "temporary export folders left behind"
    # --overwrite never replaces a folder that holds something other than an earlier export
    assert main(["export", "--model", str(model_dir), "--out", str(full), "--overwrite"]) == 2
    assert (full / "keep.txt").read_text() == "keep"
    # an earlier export is replaced as a whole
    again = tmp_path / "again"
    assert main(["export", "--model", str(model_dir), "--out", str(again)]) == 0
    (again / "keep.txt").write_text("stale")
    assert main(["export", "--model", str(model_dir), "--out", str(again), "--overwrite"]) == 0
    assert not (again / "keep.txt").exists() and (again / "modeling_lvsearch.py").is_file()


# ----------------------------------------------------------------------------------------- consent
# No code from a model folder runs without --trust-remote-code; pickle weights only with --allow-pickle.
from _hf_folders import bert_folder, flip_byte, remote_code_folder  # noqa: E402


def _lvsearch_cli(*argv: str, env: dict | None = None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "LVSEARCH_QUIET": "1", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO), **(env or {})}
    full_env.pop("LVSEARCH_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "lvsearch", *argv], capture_output=True, text=True, timeout=300,
                          env=full_env, cwd=REPO)


def test_remote_code_runs_only_with_the_flag(real_batch, tok_path, small_corpus, tmp_path):
    """A folder whose config.json auto_map names its own .py files, which write a marker when
    imported: without --trust-remote-code, exit 2 before anything is imported (also when there
    would be nothing to evaluate), the marker never appears; with the flag it loads and runs."""
    data, _, _ = real_batch
    marker = tmp_path / "remote-code-ran"
    folder = remote_code_folder(tmp_path / "remote", tok_path, vocab_size=data.vocab_size, marker=marker)
    env = {"HF_MODULES_CACHE": str(tmp_path / "hf-modules")}  # transformers copies trusted remote code there
    report = tmp_path / "r.json"
    base = ["evaluate", "--model", f"hf:{folder}", "--no-blimp", "--out", str(report), "--threads", "1"]
    work = ["--mlm-data", str(small_corpus), "--dev-sequences", "8"]
    for extra in (work, []):  # [] = nothing to evaluate: the consent refusal still comes first
        proc = _lvsearch_cli(*base, *extra, env=env)
        err = " ".join(proc.stderr.split())
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
        assert err.count("lvsearch: error:") == 1 and "--trust-remote-code" in err and "fix:" in err
        assert str(folder / "marker_config.py") in err and str(folder / "marker_model.py") in err
        assert "nothing to evaluate" not in err
        assert not marker.exists() and not report.exists()
    proc = _lvsearch_cli(*base, *work, "--trust-remote-code", env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert marker.exists()
    r = json.loads(report.read_text())
    assert r["model"]["config"]["hf"]["class"] == "MarkerForMaskedLM" and "--trust-remote-code" in r["model"]["config"]["hf"]["code"]
    assert r["mlm"]["status"] == "done"


def test_tokenizer_remote_code_is_refused_too(real_batch, tok_path, tmp_path, capsys):
    data, _, _ = real_batch
    marker = tmp_path / "tokenizer-code-ran"
    folder = remote_code_folder(tmp_path / "tok-remote", tok_path, vocab_size=data.vocab_size, marker=marker,
                                in_tokenizer=True)
    assert main(["evaluate", "--model", f"hf:{folder}", "--no-blimp", "--out", str(tmp_path / "r.json")]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert str(folder / "marker_tokenizer.py") in err and "tokenizer_config.json" in err and "--trust-remote-code" in err
    assert not marker.exists()


def test_an_export_loads_without_the_flag_and_an_edited_one_is_refused(exported, tmp_path, capsys):
    """A verified export runs the installed template's classes (none of its files is imported);
    one byte changed in either .py file, or an export that records no sha256, needs the flag."""
    import shutil

    from lvsearch.errors import LvsearchError
    from lvsearch.eval.hf import load_hf_model
    from lvsearch.export import TEMPLATE_FILES, template_sha256

    _, folder = exported["sequential-postln-relative-zero-noproj"]
    assert json.loads((folder / "lvsearch_export.json").read_text())["code_sha256"] == template_sha256()
    before = set(sys.modules)
    m = load_hf_model(f"hf:{folder}")
    assert not [k for k in set(sys.modules) - before if k.startswith("transformers_modules")]
    assert type(m.scorer.model).__module__ == "lvsearch.export.hf_template.modeling_lvsearch"
    assert m.config["hf"]["code"].startswith("lvsearch export (verified") and m.config["hf"]["weights"] == "safetensors"
    for name in (*TEMPLATE_FILES, "local.py"):  # the op modules are checked as the template is
        edited = tmp_path / f"edited-{name}"
        shutil.copytree(folder, edited)
        flip_byte(edited / name)
        with pytest.raises(LvsearchError) as err:
            load_hf_model(f"hf:{edited}")
        msg = str(err.value)
        assert f"{edited / name} was changed after the export" in msg and "--trust-remote-code" in msg
        assert main(["evaluate", "--model", f"hf:{edited}", "--no-blimp", "--out", str(tmp_path / "r.json")]) == 2
        assert "was changed after the export" in capsys.readouterr().err
    # with consent, the edited folder's own (still valid) code is what runs
    trusted = load_hf_model(f"hf:{tmp_path / 'edited-modeling_lvsearch.py'}", trust_remote_code=True)
    assert type(trusted.scorer.model).__module__.startswith("transformers_modules")
    old = tmp_path / "old-export"  # written before exports recorded code_sha256
    shutil.copytree(folder, old)
    prov = json.loads((old / "lvsearch_export.json").read_text())
    del prov["code_sha256"]
    (old / "lvsearch_export.json").write_text(json.dumps(prov))
    with pytest.raises(LvsearchError, match="records no code_sha256"):
        load_hf_model(f"hf:{old}")
    assert not (tmp_path / "r.json").exists()


def test_pickle_weights_need_allow_pickle_and_load_under_weights_only(real_batch, tok_path, tmp_path, monkeypatch):
    from safetensors.torch import load_file

    from lvsearch.errors import LvsearchError
    from lvsearch.eval.hf import load_hf_model

    data, ids, mask = real_batch
    ref = bert_folder(tmp_path / "ref", tok_path, vocab_size=data.vocab_size, seed=3)
    pkl = bert_folder(tmp_path / "pkl", tok_path, vocab_size=data.vocab_size, weights="pickle", seed=3)
    assert sorted(p.name for p in pkl.iterdir() if "model" in p.name) == ["pytorch_model.bin"]
    with pytest.raises(LvsearchError) as err:
        load_hf_model(f"hf:{pkl}")
    msg = str(err.value)
    assert str(pkl / "pytorch_model.bin") in msg and "--allow-pickle" in msg and "save_pretrained" in msg
    calls = []
    real_load = torch.load

    def spy(*args, **kwargs):
        calls.append(kwargs.get("weights_only"))
        return real_load(*args, **kwargs)

    monkeypatch.setattr(torch, "load", spy)
    m = load_hf_model(f"hf:{pkl}", allow_pickle=True)
    assert calls and all(w is True for w in calls), calls
    assert m.config["hf"]["weights"].startswith("pickle, --allow-pickle (weights_only=True)")
    want = load_file(str(ref / "model.safetensors"))
    got = m.scorer.model.state_dict()
    assert all(torch.equal(got[k], v) for k, v in want.items())
    # a pickle that runs code when unpickled: weights_only refuses it, the payload never runs
    marker = tmp_path / "payload-ran"
    poison = bert_folder(tmp_path / "poison", tok_path, vocab_size=data.vocab_size, weights="poison", marker=marker)
    with pytest.raises(LvsearchError, match="weights_only unpickler refused"):
        load_hf_model(f"hf:{poison}", allow_pickle=True)
    assert not marker.exists()


def test_hf_models_that_would_be_scored_wrongly_are_refused(real_batch, tok_path, tmp_path):
    """A BertModel (no MLM head: it would be scored through a random head), a tokenizer with ids
    beyond the embedding (IndexError), no tokenizer files (transformers' 5-token vocabulary)."""
    from lvsearch.errors import LvsearchError
    from lvsearch.eval.hf import load_hf_model

    data, _, _ = real_batch
    cases = [
        (bert_folder(tmp_path / "base", tok_path, vocab_size=data.vocab_size, head=False), "is not a masked-LM checkpoint"),
        (bert_folder(tmp_path / "small", tok_path, vocab_size=100), "has only 100 rows"),
        (bert_folder(tmp_path / "notok", None, vocab_size=data.vocab_size), "no tokenizer files"),
    ]
    for folder, expect in cases:
        with pytest.raises(LvsearchError) as err:
            load_hf_model(f"hf:{folder}")
        assert expect in str(err.value) and str(folder) in str(err.value) and err.value.fix, str(err.value)


def test_export_out_is_never_the_source_or_above_it(exported, tmp_path, capsys):
    import shutil

    _, folder = exported["sequential-postln-relative-zero-noproj"]
    run = tmp_path / "run"
    shutil.copytree(folder.parent / "model", run / "model")
    model_dir = run / "model"
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    for out in (model_dir, run, model_dir / ".."):
        for extra in ([], ["--overwrite"]):
            assert main(["export", "--model", str(model_dir), "--out", str(out), *extra]) == 2
            err = capsys.readouterr().err
            assert "would delete the model it is exported from" in err and "Traceback" not in err
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before
    assert not [p for p in tmp_path.rglob(".*") if p.name.endswith((".tmp", ".old"))]
