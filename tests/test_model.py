"""Layers, dynamic convolution, ELC mixing, Encoder and Supernet (CPU, tiny shapes)."""

from __future__ import annotations

import math
import random

import pytest
import torch

from lvsearch.arch import Arch
from lvsearch.errors import LvsearchError
from lvsearch.kernels.dynamic_conv import dynamic_conv
from lvsearch.model import Encoder, ModelDims, Supernet, flops_per_token
from lvsearch.ops.dc import DynamicConv
from lvsearch.ops.sa import SelfAttention
from lvsearch.space import SearchSpace

V = 50


def dims(**kw) -> ModelDims:
    base = dict(vocab_size=V, hidden=16, embedding=8, ff_inner=32, heads=2, conv_kernel=5, max_len=32)
    base.update(kw)
    return ModelDims(**base)


def batch(b=3, l=9, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, V, (b, l), generator=g)
    mask = torch.ones(b, l, dtype=torch.bool)
    mask[1, 6:] = False
    mask[2, 3:] = False
    ids[~mask] = 0
    return ids, mask


def randomise(module: torch.nn.Module, seed: int = 0) -> None:
    """Perturb every parameter (incl. α logits, LayerNorms) so equalities are not trivial."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(torch.randn(p.shape, generator=g) * 0.1)


@pytest.fixture(scope="module")
def elc6():
    return SearchSpace.load("lvbert-elc").with_num_slots(6)


# ------------------------------------------------------------------ dynamic convolution
def naive_dynamic_conv(value, kernels, mask):
    b, l, h = value.shape
    heads, k = kernels.shape[2:]
    d = h // heads
    if mask is not None:
        value = value * mask.unsqueeze(-1).to(value.dtype)
    out = torch.zeros_like(value)
    left = (k - 1) // 2
    for t in range(l):
        for tap in range(k):
            s = t + tap - left
            if 0 <= s < l:
                for hh in range(heads):
                    sl = slice(hh * d, (hh + 1) * d)
                    out[:, t, sl] = out[:, t, sl] + kernels[:, t, hh, tap : tap + 1] * value[:, s, sl]
    return out


@pytest.mark.parametrize("k", [1, 3, 5])
def test_dynamic_conv_matches_naive(k):
    torch.manual_seed(0)
    value = torch.randn(2, 7, 6, dtype=torch.float64)
    kernels = torch.softmax(torch.randn(2, 7, 3, k, dtype=torch.float64), -1)
    mask = torch.tensor([[1] * 7, [1] * 4 + [0] * 3], dtype=torch.bool)
    for m in (None, mask):
        torch.testing.assert_close(dynamic_conv(value, kernels, m), naive_dynamic_conv(value, kernels, m),
                                   rtol=1e-12, atol=1e-12)


def test_dynamic_conv_gradients():
    torch.manual_seed(1)
    value = torch.randn(2, 6, 4, dtype=torch.float64, requires_grad=True)
    kernels = torch.softmax(torch.randn(2, 6, 2, 3, dtype=torch.float64), -1).requires_grad_()
    mask = torch.tensor([[1] * 6, [1] * 4 + [0] * 2], dtype=torch.bool)
    assert torch.autograd.gradcheck(lambda v, kk: dynamic_conv(v, kk, mask), (value, kernels))
    g = torch.randn(2, 6, 4, dtype=torch.float64)
    ours = torch.autograd.grad(dynamic_conv(value, kernels, mask), (value, kernels), g)
    ref = torch.autograd.grad(naive_dynamic_conv(value, kernels, mask), (value, kernels), g)
    for a, b in zip(ours, ref):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_dynamic_conv_shape_errors():
    with pytest.raises(ValueError, match="not divisible"):
        dynamic_conv(torch.randn(1, 4, 5), torch.randn(1, 4, 2, 3))
    with pytest.raises(ValueError, match="padding_mask"):
        dynamic_conv(torch.randn(1, 4, 4), torch.randn(1, 4, 2, 3), torch.ones(1, 5, dtype=torch.bool))


# ------------------------------------------------------------------ layers
@pytest.mark.parametrize("layer_cls", [DynamicConv, SelfAttention])
def test_padding_does_not_leak(layer_cls):
    torch.manual_seed(0)
    layer = layer_cls(16, 2, dropout=0.1) if layer_cls is SelfAttention else layer_cls(16, 2, 5, dropout=0.1)
    randomise(layer)
    layer.eval()
    x = torch.randn(2, 8, 16)
    mask = torch.ones(2, 8, dtype=torch.bool)
    mask[0, 5:] = False
    y1 = layer(x, mask)
    x2 = x.clone()
    x2[0, 5:] = torch.randn(3, 16) * 10  # change only padding contents
    y2 = layer(x2, mask)
    torch.testing.assert_close(y1[mask], y2[mask], rtol=0, atol=1e-6)
    # the test can fail: without the mask, padding contents do reach real tokens
    assert not torch.allclose(layer(x, None)[0, :5], layer(x2, None)[0, :5], atol=1e-3)


def test_dc_layer_structure():
    layer = DynamicConv(16, 4, 9)
    names = {n for n, _ in layer.named_parameters()}
    assert names == {"norm.weight", "norm.bias", "value.weight", "value.bias", "depthwise.weight",
                     "pointwise.weight", "pointwise.bias", "kernel.weight", "kernel.bias",
                     "out.weight", "out.bias"}
    assert layer.depthwise.weight.shape == (16, 1, 9)
    assert layer.kernel.out_features == 4 * 9


def test_padded_batch_matches_unpadded_sequence(elc6):
    d = dims(dropout=0.0)
    enc = Encoder(Arch.sequential("csfcsf"), d).eval()
    randomise(enc, 3)
    ids, mask = batch()
    full = enc(ids, mask)
    alone = enc(ids[2:3, :3], None)  # sequence 2 has 3 real tokens
    torch.testing.assert_close(full[2, :3], alone[0], rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------ supernet
@pytest.mark.parametrize(
    "kw",
    [dict(), dict(pre_ln=True, ff_activation="geglu"), dict(weighted_output=True, mixing_normalized=True),
     dict(mixing_init="zero", embedding=16)],
)
@pytest.mark.parametrize("per_op", [False, True], ids=["shared-alpha", "per-op-alpha"])
def test_supernet_path_equals_extracted_encoder(elc6, kw, per_op):
    torch.manual_seed(0)
    sn = Supernet(elc6, dims(**kw), mixing_per_op=per_op)
    assert sn.mixing.logits.shape == ((3, 6, 6) if per_op else (6, 6))
    randomise(sn, 1)  # per-op: every op's α̂ matrix perturbed differently
    sn.eval()
    ids, mask = batch()
    for seed in range(4):
        arch = elc6.sample(random.Random(seed), dense_prob=0.25)
        enc = sn.extract(arch)
        assert not enc.training
        h_sn, h_enc = sn(ids, arch, mask), enc(ids, mask)
        assert torch.equal(h_sn, h_enc)
        assert torch.equal(sn.mlm_logits(h_sn[mask]), enc.mlm_logits(h_enc[mask]))
        assert sn.num_params(arch) == enc.num_params()
        assert torch.equal(sn.alpha_matrix(arch), enc.alpha_matrix())
        for k, v in enc.state_dict().items():
            if k == "mixing.logits" and per_op:  # row n-1 of the matrix of slot n's op
                ops = sn.mixing.ops
                want = torch.stack([sn.mixing.logits[ops.index(op), r] for r, op in enumerate(arch.ops)])
                assert v.shape == (6, 6) and torch.equal(v, want.detach())
                assert torch.equal(v, sn.path_mixing_logits(arch))
                continue
            assert torch.equal(v, sn.state_dict()[k]), k
        assert set(enc.state_dict()) <= set(sn.state_dict()) and enc.dims == sn.dims


@pytest.mark.parametrize("per_op", [False, True], ids=["shared-alpha", "per-op-alpha"])
def test_supernet_trains_only_the_path(elc6, per_op):
    sn = Supernet(elc6, dims(), mixing_per_op=per_op)
    arch = Arch("sfcsfc", [[0], [1], [0, 2], [3], [1, 4], [5]])
    ids, mask = batch()
    sn(ids, arch, mask).sum().backward()
    for name, p in sn.named_parameters():
        parts = name.split(".")
        if parts[0] == "slots":
            on_path = arch.ops[int(parts[1]) - 1] == parts[2]
            assert (p.grad is not None) == on_path, name
    g = sn.mixing.logits.grad
    used = {(2, 0), (2, 2), (4, 1), (4, 4)}  # slot 3 (C) reads 0, 2; slot 5 (F) reads 1, 4
    if per_op:
        ops = sn.mixing.ops
        used = {(ops.index(arch.ops[r]), r, c) for r, c in used}
        assert g.shape == (3, 6, 6)
        for idx in ((k, r, c) for k in range(3) for r in range(6) for c in range(6)):
            assert (g[idx] != 0) == (idx in used), idx
        return
    for r in range(6):
        for c in range(6):
            assert (g[r, c] != 0) == ((r, c) in used), (r, c)


def test_per_op_alpha_rows_follow_the_op_and_start_as_the_shared_matrix(elc6):
    """``mixing_per_op``: at init every op's α̂ matrix is the shared one (the init draws no
    random numbers, so the same seed gives the same supernet outputs); once the matrices
    differ, the α of a slot depends on the op at that slot only."""
    ids, mask = batch()
    torch.manual_seed(0)
    shared = Supernet(elc6, dims(dropout=0.0)).eval()
    torch.manual_seed(0)
    per_op = Supernet(elc6, dims(dropout=0.0), mixing_per_op=True).eval()
    dense = Arch("sfcsfc", [list(range(n)) for n in range(1, 7)])
    assert torch.equal(shared(ids, dense, mask), per_op(ids, dense, mask))
    assert torch.equal(per_op.mixing.logits[1], shared.mixing.logits.detach())
    with torch.no_grad():
        per_op.mixing.logits.copy_(torch.randn(3, 6, 6))
    other = Arch("sfcsss", dense.inputs)  # slots 5 and 6 changed
    a, b = per_op.alpha_matrix(dense), per_op.alpha_matrix(other)
    assert torch.equal(a[:4], b[:4]) and not torch.equal(a[4], b[4]) and not torch.equal(a[5], b[5])
    assert torch.allclose(a.sum(1), torch.ones(6))
    # the optimizer's rule: mixing logits (here 3-D) never get weight decay
    from lvsearch.config import TrainConfig
    from lvsearch.train.loop import make_optimizer

    opt = make_optimizer(per_op, TrainConfig(weight_decay=0.1))
    no_decay = {id(p) for g in opt.param_groups if g["weight_decay"] == 0.0 for p in g["params"]}
    assert id(per_op.mixing.logits) in no_decay
    with pytest.raises(LvsearchError, match="searchable connectivity"):
        Supernet(SearchSpace.load("lvbert").with_num_slots(4), dims(), mixing_per_op=True)


def test_supernet_rejects_arch_outside_space():
    sn = Supernet(SearchSpace.load("dc-ff").with_num_slots(4), dims())
    ids, mask = batch()
    with pytest.raises(LvsearchError, match="does not allow"):
        sn(ids, Arch.sequential("sfsf"), mask)
    with pytest.raises(LvsearchError, match="has 3 slots"):
        sn(ids, Arch.sequential("cfc"), mask)


def test_state_dict_names_are_readable(elc6):
    sn = Supernet(elc6, dims(pre_ln=True, weighted_output=True))
    keys = set(sn.state_dict())
    assert {"embeddings.word.weight", "embeddings.project.weight", "slots.1.SA.qkv.weight",
            "slots.6.DC.kernel.weight", "slots.3.FF.fc2.bias", "mixing.logits",
            "output_mixing.logits", "final_norm.weight", "mlm_head.bias"} <= keys
    assert not any("decoder" in k for k in keys)  # tied: stored once as embeddings.word.weight
    assert sn.mixing.logits.shape == (6, 6) and sn.output_mixing.logits.shape == (7,)


# ------------------------------------------------------------------ mixing
@pytest.mark.parametrize("kw", [dict(), dict(mixing_init="zero", mixing_normalized=True)])
def test_sequential_inputs_equal_plain_stack(elc6, kw):
    sn = Supernet(elc6, dims(**kw))
    randomise(sn, 2)
    sn.eval()
    arch = Arch.sequential("csffsc")
    ids, mask = batch()
    h = sn.embeddings(ids)
    for n, op in enumerate(arch.ops, start=1):
        h = sn.slots[str(n)][op](h, mask)
    assert torch.equal(sn(ids, arch, mask), h)


def test_mixing_is_convex_combination(elc6):
    sn = Supernet(elc6, dims(mixing_normalized=False))
    randomise(sn, 4)
    sn.eval()
    arch = Arch("ssssss", [[0], [0, 1], [2], [0, 1, 3], [4], [5]])
    ids, mask = batch()
    states = [sn.embed(ids)]
    for n in range(1, 4):
        states.append(sn.run_slot(n, arch, states, mask))
    logits = sn.mixing.logits[3, [0, 1, 3]]
    w = torch.softmax(logits, 0)
    x = w[0] * states[0] + w[1] * states[1] + w[2] * states[3]
    expected = sn.slots["4"]["SA"](x, mask)
    torch.testing.assert_close(sn.run_slot(4, arch, states, mask), expected, rtol=1e-6, atol=1e-6)
    alpha = sn.alpha_matrix(arch)
    torch.testing.assert_close(alpha.sum(1), torch.ones(6))
    torch.testing.assert_close(alpha[3, [0, 1, 3]], w.detach())
    assert alpha[0, 0] == 1 and alpha[2, 2] == 1 and alpha[3, 2] == 0


def test_biased_init():
    sn = Supernet(SearchSpace.load("lvbert-elc").with_num_slots(4), dims())
    arch = Arch("ssss", [[0], [0, 1], [0, 1, 2], [3]])
    alpha = sn.alpha_matrix(arch)
    e = math.e
    torch.testing.assert_close(alpha[1, :2], torch.tensor([1 / (1 + e), e / (1 + e)]))
    torch.testing.assert_close(alpha[2, :3], torch.tensor([1, 1, e]) / (2 + e))
    zero = Supernet(SearchSpace.load("lvbert-elc").with_num_slots(4), dims(mixing_init="zero"))
    torch.testing.assert_close(zero.alpha_matrix(arch)[2, :3], torch.full((3,), 1 / 3))


def test_weighted_output(elc6):
    sn = Supernet(elc6, dims(weighted_output=True, dropout=0.0))
    randomise(sn, 5)
    arch = Arch.sequential("sfcsfc")
    ids, mask = batch()
    states = [sn.embed(ids)]
    for n in range(1, 7):
        states.append(sn.run_slot(n, arch, states, mask))
    w = torch.softmax(sn.output_mixing.logits, 0)
    expected = sum(w[i] * s for i, s in enumerate(states))
    torch.testing.assert_close(sn(ids, arch, mask), expected, rtol=1e-6, atol=1e-6)


# ------------------------------------------------------------------ encoder API
def test_encoder_outputs_and_mlm_logits():
    enc = Encoder(Arch.sequential("csf"), dims())
    ids, mask = batch()
    h = enc(ids, mask)
    assert h.shape == (3, 9, 16)
    assert enc.mlm_logits(h).shape == (3, 9, V)
    labels = torch.full((3, 9), -100)
    labels[0, 2] = 5
    labels[1, 1] = 7
    assert enc.mlm_logits(h[labels != -100]).shape == (2, V)
    assert enc.mixing is None  # no multi-input slot -> no α parameters
    assert enc.num_params() == sum(p.numel() for p in enc.parameters())
    with pytest.raises(LvsearchError, match="exceeds the model's max_len"):
        enc(torch.zeros(1, 40, dtype=torch.long))
    # integer masks are accepted
    torch.testing.assert_close(enc.eval()(ids, mask.long()), enc(ids, mask))


def test_flops_per_token():
    d = dims(hidden=4, embedding=4, ff_inner=8, heads=2, conv_kernel=3)
    H, I, K, h = 4, 8, 3, 2
    assert flops_per_token(Arch.sequential("s"), d, 10) == 8 * H * H + 4 * 10 * H
    assert flops_per_token(Arch.sequential("f"), d, 10) == 4 * H * I
    assert flops_per_token(Arch.sequential("c"), d, 10) == 8 * H * H + 2 * H * h * K + 4 * K * H
    mixed = Arch("ff", [[0], [0, 1]])
    assert flops_per_token(mixed, d, 10) == 2 * 4 * H * I + 2 * H * 2
    d2 = dims()  # E=8 != H=16 adds the projection
    assert flops_per_token(Arch.sequential("f"), d2, 10) == 2 * 8 * 16 + 4 * 16 * 32
    assert flops_per_token(Arch.sequential("s"), d, 20) > flops_per_token(Arch.sequential("s"), d, 10)


def test_model_dims_dict_roundtrip_and_errors():
    d = dims(pre_ln=True)
    assert ModelDims.from_dict(d.to_dict()) == d
    with pytest.raises(LvsearchError, match="did you mean 'hidden'"):
        ModelDims.from_dict({"vocab_size": 10, "hiden": 8}, source="recipe.yaml")
    with pytest.raises(LvsearchError, match="not divisible"):
        ModelDims(vocab_size=10, hidden=10, heads=4)
    with pytest.raises(LvsearchError, match="must be odd"):
        ModelDims(vocab_size=10, conv_kernel=4)
    with pytest.raises(LvsearchError, match="ff_activation"):
        ModelDims(vocab_size=10, ff_activation="relu")


def test_lvbert_small_param_count():
    # LV-BERT-small shapes; the paper's small model has ~13-14M parameters (with a 30522 vocab)
    sp = SearchSpace.load("lvbert")
    sn = Supernet(sp.with_num_slots(2), ModelDims(vocab_size=30522))
    assert sn.num_params(Arch.sequential("sf")) > 0
    from lvsearch.arch import reference_arch

    enc = Encoder(reference_arch("lvbert-paper", sp), ModelDims(vocab_size=30522))
    assert 10e6 < enc.num_params() < 20e6


@pytest.mark.parametrize("per_op", [False, True], ids=["shared-alpha", "per-op-alpha"])
def test_slot_by_slot_prefix_reuse(elc6, per_op):
    """States of a shared slot prefix can be cached and reused (the search's prefix cache)."""
    sn = Supernet(elc6, dims(weighted_output=True), mixing_per_op=per_op)
    randomise(sn, 6)
    sn.eval()
    a = Arch("csfsfc", [[0], [0, 1], [2], [3], [4], [5]])
    b = Arch("csfcsf", [[0], [0, 1], [2], [0, 3], [4], [2, 5]])
    assert a.prefix(3).key == b.prefix(3).key
    ids, mask = batch()
    with torch.no_grad():
        states = [sn.embed(ids)]
        for n in range(1, 4):
            states.append(sn.run_slot(n, a, states, mask))
        cached = list(states)
        for n in range(4, 7):
            cached.append(sn.run_slot(n, b, cached, mask))
        assert torch.equal(sn.finish(cached), sn(ids, b, mask))


def test_fully_padded_sequence_stays_finite():
    enc = Encoder(Arch.sequential("scf"), dims()).eval()
    ids = torch.zeros(2, 5, dtype=torch.long)
    ids[0, :3] = torch.tensor([4, 5, 6])
    mask = enc.padding_mask(ids)
    assert mask.tolist() == [[True] * 3 + [False] * 2, [False] * 5]
    h = enc(ids, mask)
    assert torch.isfinite(h).all()
    torch.testing.assert_close(h[0, :3], enc(ids[:1, :3])[0], rtol=1e-5, atol=1e-5)
