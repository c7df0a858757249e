"""Elastic per-slot variants: SA heads, FF inner width, DC kernel, weight-shared
in the supernet (once-for-all, Cai et al. 2020; HAT, Wang et al. 2020)."""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest
import torch

from lvsearch import ops
from lvsearch.arch import ARCH_FORMAT, ARCH_FORMAT_V2, Arch
from lvsearch.cli import main
from lvsearch.config import SamplingConfig
from lvsearch.errors import LvsearchError
from lvsearch.model import Encoder, ModelDims, Supernet
from lvsearch.space import SearchSpace

TOL = 1e-5
#: A 3-slot space whose variants fit DIMS (heads 2, ff_inner 64, conv_kernel 5).
SPACE = SearchSpace.from_dict({"name": "tiny-elastic", "num_slots": 3, "connectivity": "elc",
                               "ops": {"SA": {"heads": [1, 2]}, "FF": {"inner": [0.5, 1, 2]},
                                       "DC": {"kernel": [3, 5, 7]}, "LA": None}})
DIMS = ModelDims(vocab_size=60, hidden=32, embedding=16, ff_inner=64, heads=2, conv_kernel=5, max_len=64,
                 dropout=0.0, relative_buckets=8, relative_max_distance=16)
VARIANT_DIMS = [DIMS, ModelDims(**{**DIMS.to_dict(), "ff_activation": "geglu", "position": "relative", "pre_ln": True})]
SUPERNET_TINY = ["num_slots=4", "model.hidden=32", "model.embedding=16", "model.ff_inner=64", "model.heads=4",
                 "train.seq_len=32", "train.batch_size=8", "train.log_every=5", "eval.dev_sequences=32",
                 "eval.batch_size=32"]


def _sets(values: list[str]) -> list[str]:
    return [x for v in values for x in ("--set", v)]


def _batch(b: int = 3, length: int = 24):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 60, (b, length), generator=g)
    mask = torch.ones(b, length, dtype=torch.bool)
    mask[1, 15:] = False
    mask[2, 6:] = False
    return ids, mask


def _supernet(dims: ModelDims) -> Supernet:
    torch.manual_seed(0)
    sn = Supernet(SPACE, dims).eval()
    with torch.no_grad():  # kernel transforms off the identity, so a wrong transform shows
        for name, p in sn.named_parameters():
            p.add_(0.05 * torch.randn_like(p)) if "kernel_transforms" in name else None
    return sn


# ----------------------------------------------------------------------------------------- supernet
@pytest.mark.parametrize("dims", VARIANT_DIMS, ids=["gelu-absolute", "geglu-relative-preln"])
def test_the_supernet_path_equals_the_extracted_encoder_for_every_variant_of_every_op(dims):
    sn = _supernet(dims)
    assert sn.slots["1"]["FF"].fc2.in_features == 128 and sn.slots["1"]["DC"].kernel_size == 7
    assert sorted(sn.slots["1"]["DC"].kernel_transforms) == ["3", "5"]
    ids, mask = _batch()
    for op, variant in SPACE.choices():
        arch = Arch((op,) * 3, ((0,), (0, 1), (1, 2)), (variant,) * 3)
        enc = sn.extract(arch)
        layer = enc.slots["2"][op]
        sizes = ops.get(op).sizes(dims, variant)
        assert {k: getattr(layer, {"heads": "heads", "inner": "inner", "kernel": "kernel_size"}[k])
                for k in sizes} == sizes  # built at the variant's size
        assert not any("kernel_transforms" in k for k in enc.state_dict())
        with torch.no_grad():
            d = float((sn(ids, arch, mask) - enc(ids, mask)).abs().max())
        assert d <= TOL, (arch.key, d)
        assert sn.num_params(arch) == enc.num_params() == sum(p.numel() for p in enc.parameters())


def test_a_variant_runs_on_slices_and_trains_the_shared_weights():
    sn = _supernet(DIMS).train()
    ids, mask = _batch()
    arch = Arch("f(i0.5)c(k3)s(h1)")
    sn(ids, arch, mask).sum().backward()
    ff, dc, sa = sn.slots["1"]["FF"], sn.slots["2"]["DC"], sn.slots["3"]["SA"]
    assert ff.fc1.weight.grad[:32].abs().sum() > 0 and ff.fc1.weight.grad[32:].abs().sum() == 0
    assert ff.fc2.weight.grad[:, 32:].abs().sum() == 0
    assert dc.kernel_transforms["3"].grad.abs().sum() > 0 and dc.kernel_transforms["5"].grad.abs().sum() > 0
    assert dc.depthwise.weight.grad[..., [0, 6]].abs().sum() == 0  # outside the centre 5 taps
    assert sa.qkv.weight.grad.view(3, 2, 16, 32)[:, 1].abs().sum() == 0  # the second head is off


def test_a_default_slot_in_an_elastic_supernet_is_todays_layer():
    sn = _supernet(DIMS)
    arch = Arch("sfc")
    enc = sn.extract(arch)
    assert enc.slots["2"]["FF"].inner == 64 and enc.slots["3"]["DC"].kernel_size == 5
    ids, mask = _batch()
    with torch.no_grad():
        assert float((sn(ids, arch, mask) - enc(ids, mask)).abs().max()) <= TOL


def test_supernet_without_variants_is_unchanged():
    space = SearchSpace.load("lvbert-elc").with_num_slots(2)
    sd = Supernet(space, DIMS).state_dict()
    assert not any("kernel_transforms" in k for k in sd)
    assert sd["slots.1.FF.fc1.weight"].shape == (64, 32) and sd["slots.1.DC.depthwise.weight"].shape == (32, 1, 5)


# ----------------------------------------------------------------------------------------- accounting
@pytest.mark.parametrize("op,variant", SPACE.choices(), ids=lambda c: str(c))
def test_flops_and_params_of_a_variant_equal_its_built_layer(op, variant):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    spec = ops.get(op)
    layer = spec.make(DIMS, variant).eval()
    assert spec.num_params(DIMS, variant) == sum(p.numel() for p in layer.parameters())
    # the variant's FLOPs are those of today's layer at a model with that size
    name, value = variant[0] if variant else (None, None)
    as_dims = {"heads": None, "inner": ("ff_inner", int(value * 64) if name == "inner" else None),
               "kernel": ("conv_kernel", value)}.get(name)
    f = spec.count_flops(DIMS, 24, variant)
    if as_dims:
        assert f == spec.flops(ModelDims(**{**DIMS.to_dict(), as_dims[0]: as_dims[1]}), 24)
    if name == "heads":
        assert f == value / DIMS.heads * spec.flops(DIMS, 24)
    x = torch.randn(2, 24, DIMS.hidden)
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter, torch.no_grad():
        layer(x, None)
    counted = counter.get_total_flops() / 48
    assert abs(counted - f) <= 0.25 * f, (op, variant, counted, f)


# ----------------------------------------------------------------------------------------- Arch
def test_v1_files_load_v2_round_trips_and_keys_tell_variants_apart(tmp_path):
    v1 = tmp_path / "v1.json"
    v1.write_text(json.dumps({"format": ARCH_FORMAT, "ops": "sfc", "inputs": [[0], [1], [0, 2]], "num_slots": 3}))
    old = Arch.from_json(v1)
    assert old.variants == ((), (), ()) and old.key == "sfc|0;1;0,2" and not old.has_variants
    assert old.to_dict() == {"format": ARCH_FORMAT, "ops": "sfc", "inputs": [[0], [1], [0, 2]], "num_slots": 3}

    arch = Arch("s(h1)f(i0.5)c(k3)", ((0,), (1,), (0, 2)))
    assert arch.key == "s(h1)f(i0.5)c(k3)|0;1;0,2" and arch.ops == old.ops
    d = arch.to_dict(space="tiny")
    assert d["format"] == ARCH_FORMAT_V2 and d["ops"] == "sfc"
    assert d["variants"] == [{"heads": 1}, {"inner": 0.5}, {"kernel": 3}]
    arch.to_json(tmp_path / "v2.json")
    assert Arch.from_json(tmp_path / "v2.json") == arch == Arch.from_key(arch.key)
    assert Arch("f(i1.0)").key == "f(i1)" == Arch(("FF",), None, [{"inner": 1}]).key
    keys = {Arch((op,), None, (v,)).key for op, v in SPACE.choices()} | {Arch(("SA",)).key}
    assert len(keys) == len(SPACE.choices()) + 1  # s, s(h1), s(h2), f(i0.5), ... all distinct
    assert arch.prefix(2).key == "s(h1)f(i0.5)" and arch.label(2) == "FF inner=0.5"
    SPACE.validate(arch)
    with pytest.raises(LvsearchError, match="does not allow"):
        SPACE.validate(Arch("c(k9)ff"))


def test_search_space_variant_syntax_round_trips():
    space = SearchSpace.load("lvbert-elastic")
    assert space.num_slots == 24 and space.connectivity == "elc" and space.ops == ("SA", "FF", "DC")
    assert space.variant_values("FF") == {"inner": (0.5, 1, 2)} and space.variant_values("DC") == {"kernel": (3, 9, 15)}
    assert SearchSpace.from_dict(space.to_dict()) == space
    assert len(space.choices()) == 8 and space.with_num_slots(2).size() == 8 ** 2 * 2
    assert SearchSpace.load("lvbert-elc").to_dict()["ops"] == ["SA", "FF", "DC"]  # the list form stays


# ----------------------------------------------------------------------------------------- sampling
def test_sandwich_extremes_take_the_largest_and_smallest_variants():
    from lvsearch.train.supernet import sandwich_extremes

    big, small = sandwich_extremes(_supernet(DIMS))
    assert set(zip(big.ops, big.variants)) == {("FF", (("inner", 2),))}
    assert set(zip(small.ops, small.variants)) == {("FF", (("inner", 0.5),))}
    assert big.inputs[2] == (0, 1, 2) and small.is_sequential


@pytest.mark.parametrize("strategy", ["uniform", "fair"])
def test_sampling_covers_every_variant(strategy):
    from lvsearch.train.supernet import ArchSampler

    sampler = ArchSampler(SPACE, SamplingConfig(strategy=strategy), seed=3)
    seen = Counter((a.ops[n], a.variants[n]) for a in map(sampler, range(200)) for n in range(3))
    assert set(seen) == set(SPACE.choices())
    for a in map(sampler, range(20)):
        SPACE.validate(a)


def test_mutation_redraws_a_slots_whole_choice():
    rng = random.Random(0)
    arch = SPACE.sample(rng)
    for _ in range(30):
        child = SPACE.mutate_one_op(arch, rng)
        changed = [n for n in range(3) if child.choice(n + 1) != arch.choice(n + 1)]
        assert len(changed) == 1 and child.inputs == arch.inputs
        SPACE.validate(child)
    seen = {SPACE.mutate(arch, rng, p=1.0).choice(1) for _ in range(200)}
    assert seen == set(SPACE.choices())


def test_latency_keys_are_one_per_op_and_variant():
    from lvsearch.latency.table import choice_key, choice_keys

    arch = Arch("s(h1)sf(i2)c")
    assert [choice_key(arch, n) for n in range(1, 5)] == ["SA(h1)", "SA", "FF(i2)", "DC"]
    keys = choice_keys(SPACE)
    assert keys[:4] == ["SA", "FF", "DC", "LA"] and len(keys) == len(set(keys)) == 4 + 8
    assert choice_keys(SearchSpace.load("lvbert-elc")) == ["SA", "FF", "DC"]  # unchanged without variants


# ----------------------------------------------------------------------------------------- export
def test_every_variant_exports_with_hf_parity(small_corpus, tmp_path):
    from test_ops import _parity

    from lvsearch.export import export_model
    from lvsearch.modeldir import save_model_dir

    dims = ModelDims(**{**VARIANT_DIMS[1].to_dict(), "vocab_size": 2000, "max_len": 128})
    arch = Arch("s(h1)f(i0.5)c(k3)f(i2)c(k7)l", [[0], [0, 1], [1, 2], [3], [4], [5]])
    torch.manual_seed(1)
    enc = Encoder(arch, dims)
    with torch.no_grad():
        for p in enc.parameters():
            p.add_(0.05 * torch.randn_like(p))
    enc.eval()
    model_dir = save_model_dir(tmp_path / "model", enc, arch=arch, dims=dims,
                               tokenizer_path=small_corpus / "tokenizer.json", objective="mlm", training_args={})
    folder = export_model(model_dir, tmp_path / "hf")["out"]
    config = json.loads((folder / "config.json").read_text())
    assert config["op_sizes"][:3] == [{"heads": 1}, {"inner": 32}, {"kernel": 3}] and config["op_sizes"][5] == {}
    ids, mask = _batch(3, 30)
    assert _parity(enc, folder, ids, mask) <= TOL


def test_a_variant_arch_trains_retrains_exports_and_evaluates(prepared_corpus, tmp_path, capsys):
    from test_ops import _parity

    from lvsearch.export import export_model
    from lvsearch.modeldir import load_model
    from lvsearch.train.supernet import load_supernet

    sn, rt, hf = tmp_path / "sn", tmp_path / "rt", tmp_path / "hf"
    assert main(["train-supernet", "--config", "quickstart", "--data", str(prepared_corpus), "--out", str(sn),
                 *_sets([*SUPERNET_TINY, "space=lvbert-elastic", "train.steps=6", "train.checkpoint_every=6",
                         "train.warmup_steps=2", "train.eval_every=0", "eval.panel=[bert]"])]) == 0
    supernet = load_supernet(sn).supernet.eval()
    assert supernet.space.name == "lvbert-elastic@4" and supernet.slots["1"]["FF"].inner == 128
    arch = Arch("s(h2)f(i0.5)c(k3)f(i2)", [[0], [1], [0, 2], [3]])
    supernet.space.validate(arch)
    enc = supernet.extract(arch).eval()
    ids, mask = torch.randint(5, 200, (2, 24)), torch.ones(2, 24, dtype=torch.bool)
    mask[1, 15:] = False
    with torch.no_grad():
        assert float((enc(ids, mask) - supernet(ids, arch, mask)).abs().max()) <= TOL

    # the latency table measures every variant as a standalone layer, and predicts the variant arch
    from lvsearch.latency.predict import predict_ms
    from lvsearch.latency.table import Bench, MeasureOptions, check_table, choice_keys, measure_table

    table = measure_table(Bench(sn, MeasureOptions(batch=2, seq_len=16, warmup=0, repeats=1)), show_progress=False)
    assert list(table.ops_ms) == choice_keys(supernet.space) and "DC(k3)" in table.ops_ms
    check_table(table, "t.json", space=supernet.space, dims=supernet.dims)
    assert predict_ms(arch, table) > 0

    arch_file = tmp_path / "variant.json"
    arch.to_json(arch_file, space="lvbert-elastic@4")
    assert main(["retrain", "--arch", str(arch_file), "--config", "retrain-quickstart", "--data", str(prepared_corpus),
                 "--out", str(rt), *_sets([*SUPERNET_TINY, "objective=mlm", "space=lvbert-elastic", "train.steps=4",
                                            "train.checkpoint_every=4", "train.warmup_steps=1", "train.eval_every=0"])]) == 0
    model = load_model(rt / "model")
    assert model.encoder.arch == arch and model.encoder.slots["3"]["DC"].kernel_size == 3

    export_model(rt / "model", hf)
    assert _parity(model.encoder.eval(), hf, ids, mask) <= TOL
    report = tmp_path / "eval.json"
    capsys.readouterr()
    assert main(["evaluate", "--model", f"hf:{hf}", "--no-blimp", "--mlm-data", str(prepared_corpus),
                 "--dev-sequences", "8", "--out", str(report)]) == 0
    rec = json.loads(report.read_text())
    assert rec["model"]["config"]["arch"]["variants"][2] == {"kernel": 3}
    assert 0 < rec["mlm"]["loss"] < 20, rec["mlm"]
    capsys.readouterr()
    assert main(["arch", "show", str(arch_file)]) == 0
    assert "c(k3)" in capsys.readouterr().out
