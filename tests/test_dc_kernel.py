"""Fused dynamic-convolution CUDA kernel: dispatch, folded projection, parity.

* CPU tests (always run): the ``LVSEARCH_DC_IMPL`` dispatch, errors, the kernel-size list,
  the folded ``W_dyn @ W_pw`` projection of the DC layer against the unfolded formula.
* CUDA parity tests: forward and both gradients of the extension against
  :func:`dynamic_conv_torch`; skipped with a reason where torch sees no CUDA device. On a
  CUDA machine a build failure fails them (it is what they exist to catch).
* Host emulation (needs only a C++ compiler): the ``.cu`` compiled as host C++ and its
  kernels run on the CPU against the torch reference; a quick set by default.
* ``cuda_build`` (deselected by default; ``python -m pytest -m cuda_build tests/test_dc_kernel.py``,
  ~3 min on 2 cores): compile-only check of ``kernels/csrc`` with ``nvcc`` and the host
  compiler against torch's headers (no GPU, CPU torch is enough), and the full emulation matrix.

Imports only torch, pytest and lvsearch's kernels/model layers, so it runs on a GPU machine
without the project's data dependencies (deap, datasets).
"""

from __future__ import annotations

import ctypes
import importlib
import logging
import os
import re
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from lvsearch.errors import LvsearchError
from lvsearch.kernels import _extension
from lvsearch.kernels.dynamic_conv import (
    IMPL_ENV,
    SUPPORTED_KERNEL_SIZES,
    dynamic_conv,
    dynamic_conv_cuda,
    dynamic_conv_softmax,
    dynamic_conv_torch,
)
from lvsearch.ops.dc import DynamicConv

# the module (the package attribute of the same name is the function)
dc = importlib.import_module("lvsearch.kernels.dynamic_conv")

HAS_CUDA = torch.cuda.is_available()
NO_CUDA_REASON = (f"no CUDA device visible to torch {torch.__version__} "
                  f"({'CPU-only build' if torch.version.cuda is None else 'CUDA ' + torch.version.cuda}); "
                  "the fused kernel's GPU parity is checked by benchmarks/gpu_check.sh on a GPU machine")
cuda_only = pytest.mark.skipif(not HAS_CUDA, reason=NO_CUDA_REASON)


@pytest.fixture(autouse=True)
def _fresh_dispatch(monkeypatch):
    """Each test sees LVSEARCH_DC_IMPL unset and an empty log-once memory."""
    monkeypatch.delenv(IMPL_ENV, raising=False)
    monkeypatch.setattr(dc, "_logged", set())


def fake_cuda_value():
    """Stands in for a CUDA tensor in _select_impl (which reads .is_cuda and .device)."""
    return SimpleNamespace(is_cuda=True, device=torch.device("cuda", 0))


# ------------------------------------------------------------------ dispatch (CPU)


def test_cpu_tensors_use_torch_in_auto_and_torch_modes(monkeypatch):
    v = torch.zeros(1, 3, 4)
    assert dc._select_impl(v, 9) == "torch"
    monkeypatch.setenv(IMPL_ENV, "torch")
    assert dc._select_impl(v, 9) == "torch"
    monkeypatch.setenv(IMPL_ENV, " AUTO ")
    assert dc._select_impl(v, 9) == "torch"


def test_forcing_cuda_on_cpu_tensors_raises(monkeypatch):
    monkeypatch.setenv(IMPL_ENV, "cuda")
    v, k = torch.randn(1, 5, 4), torch.softmax(torch.randn(1, 5, 2, 3), -1)
    with pytest.raises(LvsearchError, match="LVSEARCH_DC_IMPL=cuda.*cpu"):
        dynamic_conv(v, k)
    with pytest.raises(LvsearchError, match="fix:.*LVSEARCH_DC_IMPL=auto or torch"):
        dynamic_conv_softmax(v, k)


def test_bad_setting_raises(monkeypatch):
    monkeypatch.setenv(IMPL_ENV, "triton")
    with pytest.raises(LvsearchError, match="not one of auto, torch, cuda"):
        dynamic_conv(torch.randn(1, 5, 4), torch.softmax(torch.randn(1, 5, 2, 3), -1))


def test_auto_on_cuda_uses_extension_when_it_loads(monkeypatch):
    monkeypatch.setattr(dc, "load_extension", lambda: object())
    assert dc._select_impl(fake_cuda_value(), 9) == "cuda"
    # a size the kernel does not instantiate falls back to torch in auto mode ...
    assert dc._select_impl(fake_cuda_value(), 11) == "torch"
    # ... and raises when cuda is forced
    monkeypatch.setenv(IMPL_ENV, "cuda")
    with pytest.raises(LvsearchError, match="no kernel size 11.*3, 5, 7, 9, 15, 31"):
        dc._select_impl(fake_cuda_value(), 11)
    assert dc._select_impl(fake_cuda_value(), 31) == "cuda"


def test_auto_falls_back_with_one_warning_when_build_fails(monkeypatch, caplog):
    def broken():
        raise LvsearchError("cannot build the fused dynamic-conv CUDA extension: no nvcc")

    monkeypatch.setattr(dc, "load_extension", broken)
    warned = []
    monkeypatch.setattr("lvsearch.ui.warn", warned.append)
    with caplog.at_level(logging.INFO, logger="lvsearch.kernels"):
        assert dc._select_impl(fake_cuda_value(), 9) == "torch"
        assert dc._select_impl(fake_cuda_value(), 9) == "torch"
    assert len(warned) == 1 and "using the PyTorch path" in warned[0] and "no nvcc" in warned[0]
    monkeypatch.setenv(IMPL_ENV, "cuda")
    with pytest.raises(LvsearchError, match="no nvcc"):
        dc._select_impl(fake_cuda_value(), 9)


def test_chosen_path_logged_once(caplog):
    v = torch.zeros(1, 3, 4)
    with caplog.at_level(logging.INFO, logger="lvsearch.kernels"):
        for _ in range(3):
            dc._select_impl(v, 9)
    msgs = [r.getMessage() for r in caplog.records if r.name == "lvsearch.kernels"]
    assert msgs == ["dynamic_conv: torch implementation (cpu tensors)"]


def test_dynamic_conv_cuda_rejects_unsupported_kernel_size_and_cpu_tensors():
    v = torch.randn(1, 6, 4)
    with pytest.raises(LvsearchError, match="no kernel size 11 .*instantiated: 3, 5, 7, 9, 15, 31"):
        dynamic_conv_cuda(v, torch.randn(1, 6, 2, 11))
    with pytest.raises(LvsearchError, match="needs CUDA tensors"):
        dynamic_conv_cuda(v, torch.randn(1, 6, 2, 9))


@pytest.mark.skipif(torch.version.cuda is not None, reason="torch is a CUDA build")
def test_load_extension_on_cpu_torch_names_the_reason_and_fix(monkeypatch):
    monkeypatch.setattr(_extension, "_loaded", None)
    monkeypatch.setattr(_extension, "_load_error", None)
    with pytest.raises(LvsearchError, match="CPU-only build.*\n  fix: .*LVSEARCH_DC_IMPL=torch"):
        _extension.load_extension()
    with pytest.raises(LvsearchError, match="CPU-only build"):  # cached, not retried
        _extension.load_extension()


def test_kernel_sizes_match_the_cuda_source():
    src = (_extension.CSRC / _extension.KERNELS_CU).read_text()
    header = (_extension.CSRC / _extension.LAUNCH_H).read_text()
    cases = tuple(int(a) for a, b in re.findall(r"case (\d+): return FN<T, (\d+)>", src))
    assert cases == SUPPORTED_KERNEL_SIZES
    supported = re.search(r"int lvdc_supported_kernel_size\(int k\) \{\s*return ([^;]+);", src).group(1)
    assert tuple(int(x) for x in re.findall(r"k == (\d+)", supported)) == SUPPORTED_KERNEL_SIZES
    listed = re.search(r'LVDC_KERNEL_SIZES_STR "([^"]+)"', header).group(1)
    assert listed == ", ".join(map(str, SUPPORTED_KERNEL_SIZES))


def test_build_directory_is_cached_by_sources_and_env(monkeypatch, tmp_path):
    monkeypatch.setenv("LVSEARCH_KERNEL_CACHE", str(tmp_path))
    d = _extension.build_directory()
    assert d.parent == tmp_path and _extension.sources_hash() in d.name and "torch" in d.name


def test_arch_flags():
    assert _extension.arch_flags("8.0;9.0+PTX") == [
        "-gencode=arch=compute_80,code=sm_80",
        "-gencode=arch=compute_90,code=sm_90",
        "-gencode=arch=compute_90,code=compute_90",
    ]
    assert _extension.arch_flags("9.0a") == ["-gencode=arch=compute_90a,code=sm_90a"]
    with pytest.raises(LvsearchError, match="TORCH_CUDA_ARCH_LIST"):
        _extension.arch_flags("Hopper")


# ------------------------------------------------------------------ torch path, folded projection (CPU)


def test_dynamic_conv_softmax_is_softmax_then_dynamic_conv():
    g = torch.Generator().manual_seed(0)
    v = torch.randn(2, 9, 12, generator=g)
    logits = torch.randn(2, 9, 3, 5, generator=g)
    mask = torch.ones(2, 9, dtype=torch.bool)
    mask[1, 6:] = False
    torch.testing.assert_close(dynamic_conv_softmax(v, logits, mask),
                               dynamic_conv_torch(v, torch.softmax(logits, -1), mask), rtol=0, atol=0)


def unfolded_transform(layer: DynamicConv, x, mask):
    """The DC layer before the fold: pointwise output formed, then the kernel projection."""
    b, l, _ = x.shape
    v = F.glu(layer.value(x), dim=-1)
    if mask is not None:
        v = v.masked_fill(~mask.unsqueeze(-1), 0.0)
    s = layer.pointwise(layer.depthwise(v.transpose(1, 2)).transpose(1, 2))
    d = torch.softmax(layer.kernel(s).view(b, l, layer.heads, layer.kernel_size), dim=-1)
    return layer.out(dynamic_conv_torch(v, d, mask))


@pytest.mark.parametrize("kernel_size", [3, 9])
def test_folded_projection_same_function_and_gradients(kernel_size):
    torch.manual_seed(0)
    layer = DynamicConv(24, 4, kernel_size, dropout=0.0).double()
    x = torch.randn(3, 11, 24, dtype=torch.float64)
    mask = torch.ones(3, 11, dtype=torch.bool)
    mask[0, 8:] = False
    mask[2, 3:] = False
    g = torch.randn(3, 11, 24, dtype=torch.float64)
    params = [p for _, p in layer.named_parameters()]
    for m in (None, mask):
        xs = [x.clone().requires_grad_(), x.clone().requires_grad_()]
        y_new = layer.transform(xs[0], m)
        y_old = unfolded_transform(layer, xs[1], m)
        torch.testing.assert_close(y_new, y_old, rtol=1e-12, atol=1e-12)
        g_new = torch.autograd.grad(y_new, [xs[0], *params], g, allow_unused=True)
        g_old = torch.autograd.grad(y_old, [xs[1], *params], g, allow_unused=True)
        for (name, _), a, b in zip([("x", None), *layer.named_parameters()], g_new, g_old):
            if b is None:  # LayerNorm parameters: not part of transform()
                assert a is None, name
                continue
            torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12, msg=lambda s, n=name: f"{n}: {s}")


# ------------------------------------------------------------------ kernels run on the CPU (host emulation)
#
# The .cu compiled as host C++ against tests/kernel_emulation/lvdc_host_emulation.h (one
# fiber per CUDA thread, switched at barriers and warp shuffles) and called through its C ABI: checks the kernels' tiling, window and head indexing, masking, softmax and its
# backward against the torch reference, with no GPU. It cannot see GPU-only problems (races
# beyond the modelled barriers, launch limits, speed); the CUDA parity tests below do that.

EMULATION_DIR = Path(__file__).resolve().parent / "kernel_emulation"
_DTYPE_CODE = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2, torch.float64: 3}


@pytest.fixture(scope="module")
def emulated(tmp_path_factory):
    cxx = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    if cxx is None:
        pytest.skip("no C++ compiler (c++/g++ or $CXX) to build the host emulation")
    lib_path = tmp_path_factory.mktemp("lvdc_emulation") / "lvdc_emulated.so"
    cmd = [cxx, "-std=c++20", "-O1", "-fPIC", "-shared", "-x", "c++", "-DLVDC_HOST_EMULATION",
           f"-I{EMULATION_DIR}", f"-I{_extension.CSRC}", str(_extension.CSRC / _extension.KERNELS_CU),
           "-o", str(lib_path)]
    proc = subprocess.run(cmd, capture_output=True, text=True)  # ~5 s
    assert proc.returncode == 0, f"host-emulation build failed:\n{' '.join(cmd)}\n{proc.stderr}"
    lib = ctypes.CDLL(str(lib_path))
    p, i, i64 = ctypes.c_void_p, ctypes.c_int, ctypes.c_int64
    lib.lvdc_forward.argtypes = [i, i, p, p, p, p, p, i64, i64, i64, i64, i, p]
    lib.lvdc_backward_value.argtypes = [i, i, p, p, p, p, i64, i64, i64, i64, p]
    lib.lvdc_backward_weights.argtypes = [i, i, p, p, p, p, p, i64, i64, i64, i64, i, p]
    lib.lvdc_status_string.restype = ctypes.c_char_p
    return lib


def _ptr(t):
    return None if t is None else t.data_ptr()


def run_emulated(lib, v, w, mask, softmax, grad):
    """(out, grad_value, grad_weights) from the three launchers, on CPU tensors."""
    b, l, h = v.shape
    heads, k = w.shape[2:]
    code = _DTYPE_CODE[v.dtype]
    out = torch.empty_like(v)
    probs = torch.empty(w.shape, dtype=torch.float64 if v.dtype == torch.float64 else torch.float32)
    grad_value, grad_weights = torch.empty_like(v), torch.empty_like(w)
    rcs = [
        lib.lvdc_forward(code, k, _ptr(v), _ptr(w), _ptr(mask), _ptr(out), _ptr(probs), b, l, h, heads, int(softmax), None),
        lib.lvdc_backward_value(code, k, _ptr(grad), _ptr(probs), _ptr(mask), _ptr(grad_value), b, l, h, heads, None),
        lib.lvdc_backward_weights(code, k, _ptr(grad), _ptr(v), _ptr(probs), _ptr(mask), _ptr(grad_weights),
                                  b, l, h, heads, int(softmax), None),
    ]
    assert rcs == [0, 0, 0], [lib.lvdc_status_string(rc) for rc in rcs]
    return out, grad_value, grad_weights


def cpu_case(b, l, h, heads, k, dtype, padded, seed=0):
    g = torch.Generator().manual_seed(seed)
    v = torch.randn(b, l, h, generator=g).to(dtype)
    logits = (2 * torch.randn(b, l, heads, k, generator=g)).to(dtype)
    grad = torch.randn(b, l, h, generator=g).to(dtype)
    mask = None
    if padded:
        lengths = torch.randint(0, l + 1, (b,), generator=g)
        lengths[0] = l
        mask = torch.arange(l)[None, :] < lengths[:, None]
    return v, logits, mask, grad


EMULATED_CASES = [  # (batch, length, hidden, heads, K): a quick set, run by default (~5 s)
    (2, 37, 64, 4, 9),     # odd length, two position tiles, padding
    (1, 10, 64, 4, 31),    # the widest kernel, L < K
    (3, 5, 200, 8, 3),     # d = 25 < 32 lanes; heads straddle the 128-channel blocks
    (1, 6, 64, 32, 15),    # d = 2: the forward's shared memory forces a smaller position tile
    (1, 1, 32, 2, 5),      # a single position
]
EMULATED_CASES_FULL = (  # every kernel size and the base width, behind the cuda_build marker
    [(2, 37, 64, 4, k) for k in SUPPORTED_KERNEL_SIZES]
    + [(3, 5, 200, 8, k) for k in (9, 31)]
    + [(1, 40, 768, 12, 9), (1, 6, 64, 64, 9)]
)


def check_emulated_case(lib, case):
    b, l, h, heads, k = case
    for dtype, tol in ((torch.float32, 1e-5), (torch.float64, 1e-12)):
        for softmax in (True, False):
            v, w, mask, grad = cpu_case(b, l, h, heads, k, dtype, padded=softmax, seed=k)
            if not softmax:
                w = torch.softmax(w, -1)
            got = run_emulated(lib, v, w, mask, softmax, grad)
            ref = run_reference(v, w, mask, softmax, grad)
            for name, a, r in zip(("out", "grad_value", "grad_weights"), got, ref):
                torch.testing.assert_close(a.double(), r, rtol=tol, atol=tol,
                                           msg=lambda s, n=name: f"{n} {dtype} softmax={softmax}: {s}")


@pytest.mark.parametrize("case", EMULATED_CASES, ids=lambda c: "x".join(map(str, c)))
def test_emulated_kernels_match_torch_fp32_fp64(emulated, case):
    check_emulated_case(emulated, case)


@pytest.mark.cuda_build
@pytest.mark.parametrize("case", EMULATED_CASES_FULL, ids=lambda c: "x".join(map(str, c)))
def test_emulated_kernels_match_torch_full(emulated, case):
    check_emulated_case(emulated, case)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_emulated_kernels_low_precision(emulated, dtype):
    v, w, mask, grad = cpu_case(2, 21, 96, 3, 9, dtype, padded=True, seed=1)
    got = run_emulated(emulated, v, w, mask, True, grad)
    ref = run_reference(v, w, mask, True, grad)  # float64 on the same rounded inputs
    tol = 3e-2 if dtype == torch.bfloat16 else 5e-3
    for name, a, r in zip(("out", "grad_value", "grad_logits"), got, ref):
        assert a.dtype == dtype
        torch.testing.assert_close(a.double(), r, rtol=tol, atol=tol, msg=lambda s, n=name: f"{n}: {s}")


def test_emulated_launchers_reject_bad_arguments(emulated):
    v, w, _, _ = cpu_case(1, 4, 8, 2, 11, torch.float32, padded=False)
    out = torch.empty_like(v)
    rc = emulated.lvdc_forward(0, 11, _ptr(v), _ptr(w), None, _ptr(out), None, 1, 4, 8, 2, 1, None)
    assert rc == -1 and b"unsupported kernel size" in emulated.lvdc_status_string(rc)
    assert emulated.lvdc_forward(7, 9, _ptr(v), _ptr(w), None, _ptr(out), None, 1, 4, 8, 2, 1, None) == -2
    assert emulated.lvdc_forward(0, 9, _ptr(v), _ptr(w), None, _ptr(out), None, 1, 4, 8, 3, 1, None) == -3


class EmulatedExtension:
    """The binding's Python interface over the emulated launchers (CPU tensors)."""

    def __init__(self, lib):
        self.lib, self.saved_probs = lib, []

    def forward(self, value, weights, padding_mask, softmax, save_probs):
        b, l, h = value.shape
        heads, k = weights.shape[2:]
        out = torch.empty_like(value)
        probs = torch.empty(weights.shape, dtype=torch.float64 if value.dtype == torch.float64 else torch.float32)
        self.saved_probs.append(save_probs)
        rc = self.lib.lvdc_forward(_DTYPE_CODE[value.dtype], k, _ptr(value), _ptr(weights), _ptr(padding_mask),
                                   _ptr(out), _ptr(probs) if save_probs else None, b, l, h, heads, int(softmax), None)
        assert rc == 0
        return [out, probs if save_probs else None]

    def backward_value(self, grad_out, probs, padding_mask):
        b, l, h = grad_out.shape
        grad_value = torch.empty_like(grad_out)
        assert self.lib.lvdc_backward_value(_DTYPE_CODE[grad_out.dtype], probs.shape[3], _ptr(grad_out), _ptr(probs),
                                            _ptr(padding_mask), _ptr(grad_value), b, l, h, probs.shape[2], None) == 0
        return grad_value

    def backward_weights(self, grad_out, value, probs, padding_mask, softmax):
        b, l, h = value.shape
        grad_weights = torch.empty(probs.shape, dtype=value.dtype)
        assert self.lib.lvdc_backward_weights(_DTYPE_CODE[value.dtype], probs.shape[3], _ptr(grad_out), _ptr(value),
                                              _ptr(probs), _ptr(padding_mask), _ptr(grad_weights), b, l, h,
                                              probs.shape[2], int(softmax), None) == 0
        return grad_weights


@pytest.mark.parametrize("softmax", [True, False], ids=["logits", "kernels"])
def test_fused_autograd_function_over_emulated_kernels(emulated, monkeypatch, softmax):
    """The autograd wiring of the fused path (saved tensors, needs_input_grad, argument order)."""
    fake = EmulatedExtension(emulated)
    monkeypatch.setattr(dc, "load_extension", lambda: fake)
    v, w, mask, _ = cpu_case(2, 6, 4, 2, 3, torch.float64, padded=True, seed=3)
    if not softmax:
        w = torch.softmax(w, -1)
    v.requires_grad_()
    w.requires_grad_()
    monkeypatch.setattr(torch.Tensor, "is_cuda", property(lambda self: True))  # pass dynamic_conv_cuda's check
    assert torch.autograd.gradcheck(lambda a, c: dynamic_conv_cuda(a, c, mask, softmax=softmax), (v, w))
    with torch.no_grad():
        dynamic_conv_cuda(v, w, mask, softmax=softmax)
    assert fake.saved_probs[-1] is False and fake.saved_probs[0] is True  # probs kept only for training
    # only the value needs a gradient: backward_weights is not called
    fake.backward_weights = None
    out = dynamic_conv_cuda(v, w.detach(), mask, softmax=softmax)
    (gv,) = torch.autograd.grad(out.sum(), (v,))
    ref = dynamic_conv_torch(v, torch.softmax(w, -1) if softmax else w, mask)
    torch.testing.assert_close(gv, torch.autograd.grad(ref.sum(), (v,))[0], rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------------ CUDA parity


@pytest.fixture(scope="module")
def ext():
    if not HAS_CUDA:
        pytest.skip(NO_CUDA_REASON)
    try:
        return _extension.load_extension()
    except LvsearchError as e:  # on a CUDA machine a broken build is a failure, not a skip
        pytest.fail(f"the extension did not build: {e}")


def make_case(b, l, h, heads, k, dtype, padded, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    v = torch.randn(b, l, h, device="cuda", generator=g).to(dtype)
    logits = (2 * torch.randn(b, l, heads, k, device="cuda", generator=g)).to(dtype)
    mask = None
    if padded:
        lengths = torch.randint(0, l + 1, (b,), device="cuda", generator=g)
        lengths[0] = l  # one unpadded row
        mask = torch.arange(l, device="cuda")[None, :] < lengths[:, None]
    return v, logits, mask


def run_fused(v, w, mask, softmax, grad):
    v = v.clone().requires_grad_()
    w = w.clone().requires_grad_()
    out = dynamic_conv_cuda(v, w, mask, softmax=softmax)
    return (out, *torch.autograd.grad(out, (v, w), grad))


def run_reference(v, w, mask, softmax, grad):
    v = v.detach().double().requires_grad_()
    w = w.detach().double().requires_grad_()
    kern = torch.softmax(w, -1) if softmax else w
    out = dynamic_conv_torch(v, kern, mask)
    return (out, *torch.autograd.grad(out, (v, w), grad.double()))


SHAPES = [  # (batch, length, hidden, heads)
    (2, 37, 64, 4),     # odd length
    (1, 16, 256, 4),    # batch 1, LV-BERT-small width
    (3, 5, 200, 8),     # d = 25 < 32 lanes; heads straddle the 128-channel blocks; L < most K
    (2, 70, 768, 12),   # base width: several channel blocks, several position tiles
    (1, 1, 32, 2),      # a single position
]


@cuda_only
@pytest.mark.parametrize("k", SUPPORTED_KERNEL_SIZES)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("softmax", [True, False], ids=["logits", "kernels"])
def test_fp32_parity(ext, k, shape, softmax):
    b, l, h, heads = shape
    for padded in (False, True):
        v, w, mask = make_case(b, l, h, heads, k, torch.float32, padded, seed=k)
        if not softmax:
            w = torch.softmax(w, -1)
        grad = torch.randn(b, l, h, device="cuda")
        fused = run_fused(v, w, mask, softmax, grad)
        ref = run_reference(v, w, mask, softmax, grad)
        for name, a, r in zip(("out", "grad_value", "grad_weights"), fused, ref):
            assert a.dtype == torch.float32, name
            torch.testing.assert_close(a.double(), r, rtol=1e-5, atol=1e-5,
                                       msg=lambda s, n=name: f"{n} (padded={padded}): {s}")


@cuda_only
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("k", [3, 9, 31])
def test_low_precision_parity(ext, dtype, k):
    b, l, h, heads = 4, 45, 256, 4
    v, w, mask = make_case(b, l, h, heads, k, dtype, padded=True, seed=k)
    grad = torch.randn(b, l, h, device="cuda").to(dtype)
    fused = run_fused(v, w, mask, True, grad)
    ref = run_reference(v, w, mask, True, grad)  # float64 on the same rounded inputs
    tol = 3e-2 if dtype == torch.bfloat16 else 5e-3
    for name, a, r in zip(("out", "grad_value", "grad_logits"), fused, ref):
        assert a.dtype == dtype, name
        torch.testing.assert_close(a.double(), r, rtol=tol, atol=tol, msg=lambda s, n=name: f"{n}: {s}")


@cuda_only
@pytest.mark.parametrize("softmax", [True, False], ids=["logits", "kernels"])
def test_gradcheck_float64(ext, softmax):
    v, w, mask = make_case(2, 9, 8, 2, 5, torch.float64, padded=True, seed=3)
    v.requires_grad_()
    w.requires_grad_()
    assert torch.autograd.gradcheck(lambda a, c: dynamic_conv_cuda(a, c, mask, softmax=softmax), (v, w))
    assert torch.autograd.gradcheck(lambda a, c: dynamic_conv_cuda(a, c, None, softmax=softmax), (v, w))


@cuda_only
def test_backward_is_deterministic(ext):
    v, w, mask = make_case(8, 128, 256, 4, 9, torch.float32, padded=True, seed=5)
    grad = torch.randn(8, 128, 256, device="cuda")
    first = run_fused(v, w, mask, True, grad)
    second = run_fused(v, w, mask, True, grad)
    for a, b in zip(first, second):
        assert torch.equal(a, b)


@cuda_only
def test_fully_padded_row_and_non_contiguous_inputs(ext):
    v, w, _ = make_case(2, 20, 64, 4, 7, torch.float32, padded=False, seed=6)
    mask = torch.ones(2, 20, dtype=torch.bool, device="cuda")
    mask[1] = False
    v_nc = v.transpose(0, 1).contiguous().transpose(0, 1)  # same values, non-contiguous
    assert not v_nc.is_contiguous()
    grad = torch.randn(2, 20, 64, device="cuda")
    fused = run_fused(v_nc, w, mask, True, grad)
    ref = run_reference(v, w, mask, True, grad)
    for a, r in zip(fused, ref):
        torch.testing.assert_close(a.double(), r, rtol=1e-5, atol=1e-5)
    assert torch.count_nonzero(fused[1][1]) == 0  # no gradient reaches padding values


@cuda_only
def test_extension_rejects_unsupported_kernel_size(ext):
    v = torch.randn(1, 4, 8, device="cuda")
    with pytest.raises(RuntimeError, match="kernel size 11 is not instantiated"):
        ext.forward(v, torch.randn(1, 4, 2, 11, device="cuda"), None, True, False)


@cuda_only
def test_extension_rejects_unsupported_dtype(ext):
    v = torch.randint(0, 5, (1, 4, 8), device="cuda", dtype=torch.int32)
    w = torch.randint(0, 5, (1, 4, 2, 3), device="cuda", dtype=torch.int32)
    with pytest.raises(RuntimeError, match="unsupported dtype Int"):
        ext.forward(v, w, None, True, False)


@cuda_only
def test_extension_launcher_status_is_a_python_error(ext):
    # The launcher's own status (not the binding's checks) becomes a RuntimeError.
    grad = torch.randn(1, 4, 8, device="cuda")
    with pytest.raises(RuntimeError, match="backward \\(value\\): unsupported kernel size"):
        ext.backward_value(grad, torch.rand(1, 4, 2, 11, device="cuda"), None)


@cuda_only
def test_dc_layer_auto_matches_torch_path(ext, monkeypatch):
    torch.manual_seed(0)
    layer = DynamicConv(256, 4, 9, dropout=0.0).cuda()
    x = torch.randn(4, 33, 256, device="cuda")
    mask = torch.ones(4, 33, dtype=torch.bool, device="cuda")
    mask[1, 20:] = False
    outs = {}
    for impl in ("cuda", "torch"):
        monkeypatch.setenv(IMPL_ENV, impl)
        xi = x.clone().requires_grad_()
        y = layer(xi, mask)
        y.square().sum().backward()
        outs[impl] = (y.detach(), xi.grad, layer.pointwise.weight.grad.clone())
        layer.zero_grad(set_to_none=True)
    for a, b in zip(outs["cuda"], outs["torch"]):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


# ------------------------------------------------------------------ compile-only (marker)


@pytest.mark.cuda_build
def test_sources_compile_with_nvcc(tmp_path):
    """Compile both translation units (no link, no GPU). ~1 min on 2 cores."""
    if _extension.find_nvcc() is None:
        pytest.skip("nvcc not found (set CUDA_HOME or put nvcc on PATH)")
    objects = _extension.compile_objects(tmp_path)
    for o in objects:
        assert o.is_file() and o.stat().st_size > 0
