"""The op registry (lvsearch/ops): every registered op honours the contract, the registry
refuses an incomplete op module by name, and the new op (LA, local attention) goes the whole
way: supernet training, extraction, retraining, export with HF parity, evaluation."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from _shared import REPO

from lvsearch import ops
from lvsearch.arch import Arch
from lvsearch.cli import main
from lvsearch.errors import LvsearchError
from lvsearch.model import Encoder, ModelDims, flops_per_token
from lvsearch.ops.base import SlotLayer

TOL = 1e-5
CODES = ops.codes()
DIMS = ModelDims(vocab_size=60, hidden=32, embedding=16, ff_inner=64, heads=2, conv_kernel=5, max_len=64,
                 dropout=0.1, relative_buckets=8, relative_max_distance=16)
SUPERNET_TINY = ["num_slots=4", "model.hidden=32", "model.embedding=16", "model.ff_inner=64", "model.heads=2",
                 "train.seq_len=32", "train.batch_size=8", "train.log_every=5", "eval.dev_sequences=32",
                 "eval.batch_size=32"]


def _sets(values: list[str]) -> list[str]:
    return [x for v in values for x in ("--set", v)]


def _batch(b: int = 3, length: int = 32, vocab: int = 60):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, vocab, (b, length), generator=g)
    mask = torch.ones(b, length, dtype=torch.bool)
    mask[1, 20:] = False
    mask[2, 7:] = False
    return ids, mask


# ----------------------------------------------------------------------------------------- contract
def test_the_registry_holds_the_ops_in_canonical_order_without_importing_torch_early():
    assert CODES[:3] == ("SA", "FF", "DC") and "LA" in CODES
    assert ops.letters() == {s.letter: c for c, s in ops.specs().items()}
    probe = "import sys, lvsearch.arch, lvsearch.ops, lvsearch.space; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("code", CODES)
def test_every_op_meets_the_contract(code):
    """Spec fields, a layer that maps (B, L, H) -> (B, L, H) with and without a padding mask,
    whose padding content never reaches real tokens, FLOPs that agree with torch's count, a
    module that imports nothing from lvsearch outside lvsearch.ops, and an export that ships it."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    from lvsearch.export import export_code, ops_index_source

    spec = ops.get(code)
    ops.check_spec(spec, code)
    assert spec.code == code and len(spec.letter) == 1 and spec.title and spec.paper and spec.colour.startswith("#")
    torch.manual_seed(0)
    layer = spec.build(DIMS).eval()
    assert isinstance(layer, spec.layer) and isinstance(layer, SlotLayer)
    proj = getattr(layer, spec.residual)
    assert isinstance(proj, torch.nn.Linear) and proj.out_features == DIMS.hidden
    assert spec.num_params(DIMS) == sum(p.numel() for p in layer.parameters()) > 0
    assert set(spec.path_weights(layer)) == set(layer.state_dict())

    ids, mask = _batch()
    x = torch.randn(3, 32, DIMS.hidden)
    with torch.no_grad():
        y = layer(x, mask)
        assert y.shape == x.shape and torch.isfinite(y).all()
        assert layer(x, None).shape == x.shape
        noisy = x.clone()
        noisy[~mask] = 100 * torch.randn(int((~mask).sum()), DIMS.hidden)
        assert float((layer(noisy, mask) - y)[mask].abs().max()) < 1e-5  # padding never reaches real tokens
        all_pad = torch.zeros_like(mask)
        assert torch.isfinite(layer(x, all_pad)).all()

    # FLOPs: > 0, what the encoder sums, and within 25% of the matmul FLOPs torch counts in one
    # forward (math attention; L = 32 inside LA's window, so its dense path does the banded work).
    # The formulas count the unfused math: DC folds `pointwise` into `kernel` and its dynamic
    # convolution is elementwise on CPU, so torch counts ~20% less there.
    f = spec.flops(DIMS, 32)
    assert f > 0
    assert flops_per_token(Arch.sequential(spec.letter), DIMS, 32) == f + 2 * DIMS.embedding * DIMS.hidden
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter, torch.no_grad():
        layer(x, None)
    counted = counter.get_total_flops() / x.shape[0] / x.shape[1]
    assert abs(counted - f) <= 0.25 * f, (code, counted, f)

    # the module: torch/stdlib and .base only (an lvsearch import only inside try/except, with a fallback)
    name = ops.module_of(code)
    path = REPO / "lvsearch" / "ops" / f"{name}.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    guarded = {id(n) for t in ast.walk(tree) if isinstance(t, ast.Try) for b in t.body for n in ast.walk(b)}
    for node in ast.walk(tree):
        if id(node) in guarded:
            continue
        if isinstance(node, ast.Import):
            assert all(a.name.split(".")[0] in {"torch", "math"} for a in node.names), (name, ast.unparse(node))
        elif isinstance(node, ast.ImportFrom):
            ok = (node.level == 1 and node.module == "base") or \
                (node.level == 0 and node.module.split(".")[0] in {"torch", "math", "__future__", "dataclasses"})
            assert ok, (name, ast.unparse(node))
    code_files = export_code()
    assert code_files[f"{name}.py"] == path.read_bytes()
    assert f"from .{name} import SPEC" in ops_index_source()


def _write_module(folder: Path, name: str, text: str) -> None:
    (folder / f"{name}.py").write_text(text, encoding="utf-8")


@pytest.mark.parametrize("text,message", [
    ("X = 1\n", "defines no SPEC"),
    ("from .base import OpSpec\nSPEC = OpSpec(code='ZZ', letter='z')\n", "cannot be imported: TypeError"),
    ("SPEC = {'code': 'ZZ'}\n", "SPEC is a dict, not an OpSpec"),
])
def test_an_incomplete_op_module_is_an_error_naming_it(tmp_path, monkeypatch, text, message):
    """A copy of lvsearch/ops with one broken module: loading the registry names that module."""
    import shutil

    pkg = tmp_path / "lvsearch_ops_copy"
    shutil.copytree(REPO / "lvsearch" / "ops", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    _write_module(pkg, "broken", text)
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    copy = importlib.import_module("lvsearch_ops_copy")
    try:
        with pytest.raises(LvsearchError, match=f"op module lvsearch_ops_copy.broken.*{message}"):
            copy.specs()
        (pkg / "broken.py").unlink()
        copy._load.cache_clear()
        assert copy.codes() == CODES  # without it the copy registers the same ops
    finally:
        for k in [k for k in sys.modules if k.startswith("lvsearch_ops_copy")]:
            del sys.modules[k]


def test_unknown_ops_list_the_registered_ones(tmp_path):
    from lvsearch.space import SearchSpace

    with pytest.raises(LvsearchError) as e:
        Arch.from_dict({"format": "lvsearch.arch/v1", "ops": ["SA", "XX"]}, source="a.json")
    assert "unknown op 'XX'" in str(e.value) and "LA (l, local self-attention)" in str(e.value)
    with pytest.raises(LvsearchError) as e:
        Arch.sequential("sfq")
    assert "'q'" in str(e.value) and "l = LA" in str(e.value)
    bad = tmp_path / "s.yaml"
    bad.write_text("num_slots: 4\nops: [SA, GLOBAL]\n")
    with pytest.raises(LvsearchError) as e:
        SearchSpace.load(bad)
    assert str(bad) in str(e.value) and "unknown op 'GLOBAL'" in str(e.value) and "DC (c, dynamic convolution)" in str(e.value)
    assert SearchSpace.load("lvbert-local").ops == CODES


def test_local_attention_sees_only_its_window():
    """Output i of LA depends on input j only for |i - j| <= WINDOW (SA sees everything)."""
    from lvsearch.ops import local

    length = 2 * local.WINDOW + 12
    w = torch.randn(DIMS.hidden)  # (a plain sum of a LayerNorm output has no gradient)
    for code, want in (("LA", local.WINDOW + 1), ("SA", length)):
        layer = ops.build(code, DIMS).eval()
        x = torch.randn(1, length, DIMS.hidden, requires_grad=True)
        (layer(x, None)[0, 0] * w).sum().backward()
        reach = x.grad[0].abs().sum(-1) > 0
        assert reach[:want].all() and not reach[want:].any(), code


# ----------------------------------------------------------------------------------------- export parity
@pytest.fixture(scope="module")
def tok_path(small_corpus) -> Path:
    return small_corpus / "tokenizer.json"


@pytest.fixture(scope="module")
def real_batch(shared_data, small_corpus):
    """16 sentence_polarity dev sentences tokenised with the corpus tokenizer, padded (B, L)."""
    from lvsearch.data.shards import PreparedData

    data = PreparedData.open(small_corpus)
    lines = (shared_data / "tasks" / "sentence_polarity" / "dev.tsv").read_text(encoding="utf-8").splitlines()[1:17]
    seqs = [e.ids[:60] for e in data.tokenizer.encode_batch([ln.split("\t")[0] for ln in lines])]
    pad = data.special_ids.pad
    ids = torch.full((len(seqs), max(len(s) for s in seqs)), pad, dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s)
    assert (ids == pad).any()
    return data, ids, ids != pad


def _parity(enc: Encoder, folder: Path, ids, mask) -> float:
    from transformers import AutoModelForMaskedLM

    hf = AutoModelForMaskedLM.from_pretrained(folder, trust_remote_code=True).eval()
    with torch.no_grad():
        states = [enc.embed(ids)]
        for n in range(1, enc.num_slots + 1):
            states.append(enc.run_slot(n, states, mask))
        logits = enc.mlm_logits(enc.finish(states))
        out = hf(input_ids=ids, attention_mask=mask.long(), output_hidden_states=True)
    d_states = max(float((a - b).abs().max()) for a, b in zip(states, out.hidden_states))
    return max(d_states, float((out.logits - logits).abs().max()))


@pytest.mark.parametrize("code", CODES)
def test_every_op_exports_with_hf_parity(code, real_batch, tok_path, tmp_path):
    from lvsearch.export import export_model
    from lvsearch.modeldir import save_model_dir

    data, ids, mask = real_batch
    letter = ops.get(code).letter
    arch = Arch(letter + "f" + letter, [[0], [0, 1], [1, 2]])
    dims = ModelDims(vocab_size=data.vocab_size, hidden=32, embedding=16, ff_inner=64, heads=2, conv_kernel=5,
                     max_len=128, pad_id=data.special_ids.pad, pre_ln=True, position="relative",
                     relative_buckets=8, relative_max_distance=16)
    torch.manual_seed(1)
    enc = Encoder(arch, dims)
    with torch.no_grad():
        for p in enc.parameters():
            p.add_(0.05 * torch.randn_like(p))
    enc.eval()
    model_dir = save_model_dir(tmp_path / "model", enc, arch=arch, dims=dims, tokenizer_path=tok_path,
                               objective="mlm", training_args={})
    folder = export_model(model_dir, tmp_path / "hf")["out"]
    assert (folder / f"{ops.module_of(code)}.py").is_file()
    assert _parity(enc, folder, ids, mask) <= TOL


# ----------------------------------------------------------------------------------------- end to end
def test_local_attention_trains_extracts_retrains_exports_and_evaluates(prepared_corpus, real_batch, tmp_path, capsys):
    from lvsearch.export import export_model
    from lvsearch.modeldir import load_model
    from lvsearch.train.supernet import load_supernet

    sn, rt, hf = tmp_path / "sn", tmp_path / "rt", tmp_path / "hf"
    assert main(["train-supernet", "--config", "quickstart", "--data", str(prepared_corpus), "--out", str(sn),
                 *_sets([*SUPERNET_TINY, "space=lvbert-local", "train.steps=6", "train.checkpoint_every=6",
                         "train.warmup_steps=2", "train.eval_every=0", "eval.panel=[bert]"])]) == 0
    loaded = load_supernet(sn)
    supernet = loaded.supernet
    assert supernet.space.ops == CODES and "LA" in supernet.slots["1"]
    # LA layers were trained: a LayerNorm starts at weight 1, and a sampled LA slot moved off it
    assert any(not torch.all(supernet.slots[str(n)]["LA"].norm.weight == 1) for n in range(1, 5))

    arch = Arch("lsfl")
    supernet.space.validate(arch)
    enc = supernet.extract(arch).eval()
    ids, mask = torch.randint(5, 200, (2, 24)), torch.ones(2, 24, dtype=torch.bool)
    mask[1, 15:] = False
    with torch.no_grad():
        assert torch.equal(enc(ids, mask), supernet.eval()(ids, arch, mask))

    arch_file = tmp_path / "lsfl.json"
    arch.to_json(arch_file, space="lvbert-local@4")
    assert main(["retrain", "--arch", str(arch_file), "--config", "retrain-quickstart", "--data", str(prepared_corpus),
                 "--out", str(rt), *_sets([*SUPERNET_TINY, "objective=mlm", "space=lvbert-local", "train.steps=4",
                                            "train.checkpoint_every=4", "train.warmup_steps=1", "train.eval_every=0"])]) == 0
    model = load_model(rt / "model")
    assert model.encoder.arch == arch

    export_model(rt / "model", hf)
    _, ids, mask = real_batch
    assert _parity(model.encoder.eval(), hf, ids.clamp(max=model.encoder.dims.vocab_size - 1), mask) <= TOL

    report = tmp_path / "eval.json"
    capsys.readouterr()
    assert main(["evaluate", "--model", f"hf:{hf}", "--no-blimp", "--mlm-data", str(prepared_corpus),
                 "--dev-sequences", "8", "--out", str(report)]) == 0
    rec = json.loads(report.read_text())
    assert rec["model"]["config"]["arch"]["ops"] == "lsfl"
    assert "verified" in rec["model"]["config"]["hf"]["code"]  # the installed op modules ran, none of the folder's
    assert 0 < rec["mlm"]["loss"] < 20, rec["mlm"]


def test_counting_parameters_does_not_draw_from_torchs_random_stream():
    """A search counts parameters of candidates as it meets them (``slot_params``, cached per
    process); a count that built a real layer drew from torch's generator, so a resumed search
    (a fresh cache) ended with another torch random state than the uninterrupted one."""
    from lvsearch.space import SearchSpace

    dims = ModelDims(vocab_size=100, hidden=32, embedding=16, ff_inner=64, heads=2)
    space = SearchSpace.load("lvbert-elastic")
    torch.manual_seed(0)
    before = torch.get_rng_state()
    for code in ops.codes():
        for variant in [(), *(v for c, v in space.choices() if c == code and v)]:
            n = ops.get(code).num_params(dims, variant)
            assert n == sum(p.numel() for p in ops.get(code).make(dims, variant).parameters())
            torch.set_rng_state(before)  # building the real layer above drew; the count must not
            ops.get(code).num_params(dims, variant)
            assert torch.equal(torch.get_rng_state(), before)
