"""Benchmark: fused dynamic-convolution CUDA kernel vs the PyTorch shift loop vs the HF ConvBERT
``unfold`` formulation, and the supernet training step with the kernel on/off.

Contenders, same inputs, same contract (value ``(B, L, H)``, kernel logits ``(B, L, heads, K)``,
padding mask; softmax over the taps included in every arm, as the DC layer needs it):

* ``fused``: :func:`lvsearch.kernels.dynamic_conv.dynamic_conv_cuda` with ``softmax=True``
  (softmax + padding mask + windowed weighted sum in one kernel; two backward kernels).
* ``torch``: ``torch.softmax`` + :func:`dynamic_conv_torch` (shifted multiply-add over K taps).
* ``unfold``: ``torch.softmax`` + :func:`dynamic_conv_unfold` below, the formulation of
  HF ``transformers`` ConvBERT (``nn.functional.unfold`` of the values into per-position
  ``K``-tap windows, then a batched matmul with the kernels), written here from its
  description.

Each is timed for the forward (``torch.no_grad``) and forward + backward (gradients for the
value and the logits from a fixed output gradient). Shapes: LV-BERT-small (batch 128, seq 128,
hidden 256, 4 heads, K 9) and base (batch 32, seq 512, hidden 768, 12 heads, K 9), bf16 and
fp32, about half of the batch padded in its last quarter. Bandwidth: bytes of a minimal
implementation (each input read once, each output written once; see ``min_bytes``) divided
by the time, as a fraction of the H200's HBM3e peak (4.8 TB/s; a device-to-device copy
reaches about 4.3 TB/s there). Supernet: median training step (forward, backward, AdamW,
bf16 autocast, random tokens, 15% MLM targets) of the LV-BERT-small supernet on the
``lvbert-paper`` path and an all-DC path, with ``LVSEARCH_DC_IMPL=torch`` vs ``cuda``.

Without CUDA it runs a small smoke shape on the CPU (fp32, few repeats) so the script is
exercised; the fused arm and the supernet speedup are then reported as
``"unmeasured: no CUDA"``. Imports only torch, pyyaml and lvsearch (no deap, datasets).

Usage: ``python benchmarks/dynamic_conv.py [--out PATH] [--quick]``
Writes ``benchmarks/results/dynamic_conv.json`` (or ``--out``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

from _common import machine, write_result

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from lvsearch.errors import LvsearchError  # noqa: E402
from lvsearch.io import atomic_write_json  # noqa: E402
from lvsearch.kernels.dynamic_conv import IMPL_ENV, dynamic_conv_cuda, dynamic_conv_torch  # noqa: E402

H200_PEAK_BYTES_PER_S = 4.8e12
UNMEASURED = "unmeasured: no CUDA"

GPU_SHAPES = {
    "small": dict(batch=128, seq=128, hidden=256, heads=4, kernel=9),
    "base": dict(batch=32, seq=512, hidden=768, heads=12, kernel=9),
}
CPU_SHAPES = {"cpu_smoke": dict(batch=4, seq=64, hidden=256, heads=4, kernel=9)}


def dynamic_conv_unfold(value, kernels, padding_mask=None):
    """ConvBERT-style: gather each position's K-tap window with ``F.unfold`` (channels x taps),
    then one batched matmul per (position, head) with that head's K weights."""
    b, l, h = value.shape
    heads, k = kernels.shape[2], kernels.shape[3]
    if padding_mask is not None:
        value = value * padding_mask.unsqueeze(-1).to(value.dtype)
    # (B, H, L, 1) image -> (B, H*K, L) columns: column t holds value[t - left + tap] per channel
    cols = F.unfold(value.transpose(1, 2).unsqueeze(-1), kernel_size=(k, 1), padding=((k - 1) // 2, 0))
    windows = cols.view(b, h, k, l).permute(0, 3, 1, 2).reshape(b * l * heads, h // heads, k)
    out = torch.bmm(windows, kernels.reshape(b * l * heads, k, 1).to(value.dtype))
    return out.view(b, l, h)


def arms(cuda: bool) -> dict:
    def torch_arm(v, logits, mask):
        return dynamic_conv_torch(v, torch.softmax(logits, dim=-1), mask)

    def unfold_arm(v, logits, mask):
        return dynamic_conv_unfold(v, torch.softmax(logits, dim=-1), mask)

    out = {"torch": torch_arm, "unfold": unfold_arm}
    if cuda:
        out["fused"] = lambda v, logits, mask: dynamic_conv_cuda(v, logits, mask, softmax=True)
    return out


def make_inputs(shape: dict, dtype: torch.dtype, device: str, seed: int = 0):
    b, l, h, heads, k = (shape[n] for n in ("batch", "seq", "hidden", "heads", "kernel"))
    g = torch.Generator(device=device).manual_seed(seed)
    v = torch.randn(b, l, h, device=device, generator=g).to(dtype)
    logits = torch.randn(b, l, heads, k, device=device, generator=g).to(dtype)
    grad = torch.randn(b, l, h, device=device, generator=g).to(dtype)
    mask = torch.ones(b, l, dtype=torch.bool, device=device)
    mask[: b // 2, l * 3 // 4:] = False
    return v, logits, mask, grad


def min_bytes(shape: dict, dtype: torch.dtype) -> dict:
    """Bytes a minimal fused implementation moves (each tensor read / written once per kernel)."""
    n = shape["batch"] * shape["seq"]
    es = torch.finfo(dtype).bits // 8
    vh, hk = n * shape["hidden"] * es, n * shape["heads"] * shape["kernel"]
    fwd = 2 * vh + hk * es + n                      # value, logits, mask in; out
    fwd_train = fwd + hk * 4                        # + fp32 probabilities saved for the backward
    bwd_value = 2 * vh + hk * 4 + n                 # grad_out, probs, mask in; grad_value
    bwd_weights = 2 * vh + hk * 4 + n + hk * es     # grad_out, value, probs, mask in; grad_logits
    return {"forward": fwd, "forward_backward": fwd_train + bwd_value + bwd_weights}


def timer(cuda: bool):
    if cuda:
        def run(fn, iters: int) -> float:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(iters):
                fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1e3 / iters
    else:
        def run(fn, iters: int) -> float:
            t0 = time.perf_counter()
            for _ in range(iters):
                fn()
            return (time.perf_counter() - t0) / iters
    return run


def bench_op(shape: dict, dtype: torch.dtype, cuda: bool, repeats: int, iters: int) -> dict:
    device = "cuda" if cuda else "cpu"
    v, logits, mask, grad = make_inputs(shape, dtype, device)
    contenders = arms(cuda)
    run = timer(cuda)
    ref = dynamic_conv_torch(v.double(), torch.softmax(logits.double(), -1), mask)
    checks = {f"max_abs_diff_{name}_vs_fp64_torch": float((fn(v, logits, mask).double() - ref).abs().max())
              for name, fn in contenders.items()}

    def forward(fn):
        def call():
            with torch.no_grad():
                fn(v, logits, mask)
        return call

    def forward_backward(fn):
        vr, lr = v.detach().requires_grad_(), logits.detach().requires_grad_()

        def call():
            torch.autograd.grad(fn(vr, lr, mask), (vr, lr), grad)
        return call

    times: dict[str, dict[str, list[float]]] = {m: {a: [] for a in contenders} for m in ("forward", "forward_backward")}
    for mode, wrap in (("forward", forward), ("forward_backward", forward_backward)):
        calls = {a: wrap(fn) for a, fn in contenders.items()}
        for call in calls.values():  # warm-up (and the extension's first launch)
            run(call, 2)
        for _ in range(repeats):  # interleaved rounds
            for a, call in calls.items():
                times[mode][a].append(run(call, iters))
    nbytes = min_bytes(shape, dtype)
    result = {"shape": shape, "dtype": str(dtype).replace("torch.", ""), "min_bytes": nbytes, "checks": checks}
    for mode in times:
        med = {a: statistics.median(t) for a, t in times[mode].items()}
        entry = {"median_ms": {a: round(t * 1e3, 4) for a, t in med.items()},
                 "min_ms": {a: round(min(t) * 1e3, 4) for a, t in times[mode].items()}}
        if "fused" in med:
            entry["speedup_fused_over_torch"] = round(med["torch"] / med["fused"], 3)
            entry["speedup_fused_over_unfold"] = round(med["unfold"] / med["fused"], 3)
        else:
            entry["median_ms"]["fused"] = UNMEASURED
            entry["speedup_fused_over_torch"] = UNMEASURED
        entry["ratio_unfold_over_torch"] = round(med["unfold"] / med["torch"], 3)
        entry["effective_GB_per_s"] = {a: round(nbytes[mode] / t / 1e9, 1) for a, t in med.items()}
        if cuda:
            entry["fraction_of_h200_hbm_peak"] = {a: round(nbytes[mode] / t / H200_PEAK_BYTES_PER_S, 3)
                                                  for a, t in med.items()}
        result[mode] = entry
    return result


def bench_supernet(cuda: bool, steps: int, batch: int, seq: int) -> dict:
    """Median training step, LVSEARCH_DC_IMPL=torch vs cuda, interleaved step by step."""
    from lvsearch.arch import Arch, reference_arch
    from lvsearch.model import ModelDims, Supernet
    from lvsearch.space import SearchSpace

    device = "cuda" if cuda else "cpu"
    space = SearchSpace.load("lvbert")
    dims = ModelDims(vocab_size=16384, hidden=256, embedding=128, ff_inner=1024, heads=4, conv_kernel=9)
    torch.manual_seed(0)
    sn = Supernet(space, dims).to(device).train()
    opt = torch.optim.AdamW(sn.parameters(), lr=1e-4)
    g = torch.Generator(device=device).manual_seed(0)
    ids = torch.randint(5, dims.vocab_size, (batch, seq), device=device, generator=g)
    labels = torch.where(torch.rand(batch, seq, device=device, generator=g) < 0.15, ids, torch.full_like(ids, -100))
    attention = torch.ones(batch, seq, dtype=torch.bool, device=device)
    attention[: batch // 2, seq * 3 // 4:] = False
    paths = {"lvbert-paper": reference_arch("lvbert-paper", space), "all-DC": Arch.sequential(["DC"] * space.num_slots)}
    impls = ("torch", "cuda") if cuda else ("torch",)

    def step(arch):
        with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=cuda):
            hidden = sn(ids, arch, attention)
            targets = labels != -100
            loss = F.cross_entropy(sn.mlm_logits(hidden[targets]).float(), labels[targets])
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    old = os.environ.get(IMPL_ENV)
    out: dict = {"batch": batch, "seq": seq, "precision": "bf16 autocast" if cuda else "fp32",
                 "dc_slots": {name: sum(op == "DC" for op in a.ops) for name, a in paths.items()}}
    try:
        for name, arch in paths.items():
            times = {impl: [] for impl in impls}
            for i in range(steps + 2):
                for impl in impls:
                    os.environ[IMPL_ENV] = impl
                    if cuda:
                        torch.cuda.synchronize()
                    t0 = time.perf_counter()
                    step(arch)
                    if cuda:
                        torch.cuda.synchronize()
                    if i >= 2:
                        times[impl].append(time.perf_counter() - t0)
            med = {impl: statistics.median(t) for impl, t in times.items()}
            entry = {"median_step_ms": {impl: round(t * 1e3, 3) for impl, t in med.items()}}
            if cuda:
                entry["speedup_cuda_over_torch"] = round(med["torch"] / med["cuda"], 3)
            else:
                entry["median_step_ms"]["cuda"] = UNMEASURED
                entry["speedup_cuda_over_torch"] = UNMEASURED
            out[name] = entry
    finally:
        if old is None:
            os.environ.pop(IMPL_ENV, None)
        else:
            os.environ[IMPL_ENV] = old
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=None, help="JSON path (default benchmarks/results/dynamic_conv.json)")
    ap.add_argument("--quick", action="store_true", help="fewer repeats (a smoke run)")
    args = ap.parse_args()
    cuda = torch.cuda.is_available()
    result: dict = {"benchmark": "dynamic_conv", "machine": machine()}
    if cuda:
        props = torch.cuda.get_device_properties(0)
        result["gpu"] = {"name": props.name, "capability": f"{props.major}.{props.minor}",
                         "sms": props.multi_processor_count, "torch_cuda": torch.version.cuda,
                         "arch_list": os.environ.get("TORCH_CUDA_ARCH_LIST", "(visible GPU)")}
        try:
            from lvsearch.kernels import load_extension

            t0 = time.perf_counter()
            load_extension()
            result["extension_load_s"] = round(time.perf_counter() - t0, 1)
        except LvsearchError as e:
            raise SystemExit(f"the fused extension did not build: {e}")
        shapes, dtypes = GPU_SHAPES, (torch.bfloat16, torch.float32)
        repeats, iters = (5, 5) if args.quick else (15, 10)
        sn_steps, sn_batch, sn_seq = (5 if args.quick else 15), 128, 128
    else:
        # one thread: on a shared, oversubscribed CPU, OpenMP spin-waiting distorts timings badly
        torch.set_num_threads(1)
        result["machine"]["torch_threads"] = 1
        result["gpu"] = UNMEASURED
        shapes, dtypes = CPU_SHAPES, (torch.float32,)
        repeats, iters = 3, 1
        sn_steps, sn_batch, sn_seq = 2, 4, 64
    result["loadavg_1_5_15_before"] = [round(x, 2) for x in os.getloadavg()]
    result["ops"] = [bench_op(shape, dt, cuda, repeats, iters) | {"name": name}
                     for name, shape in shapes.items() for dt in dtypes]
    result["supernet_step"] = bench_supernet(cuda, sn_steps, sn_batch, sn_seq)
    result["loadavg_1_5_15_after"] = [round(x, 2) for x in os.getloadavg()]
    result["notes"] = (
        "median over interleaved rounds; CUDA times from CUDA events around `iters` back-to-back calls. "
        "effective_GB_per_s uses min_bytes (a minimal fused implementation's traffic) for every arm, so it "
        "compares times, not each arm's real traffic. Targets (H200): fused >= 3x torch for "
        "forward+backward, forward >= 50% of HBM peak at the small shape."
        + ("" if cuda else " CPU smoke run (1 thread, shared machine: see loadavg): no CUDA, so the fused "
                           "arm and the supernet speedup are unmeasured; CPU times only show the script runs.")
    )
    path = args.out
    if path is None:
        path = write_result("dynamic_conv", result)
    else:
        atomic_write_json(path, result)
    for op in result["ops"]:
        print(op["name"], op["dtype"], "fwd", op["forward"]["median_ms"], "fwd+bwd", op["forward_backward"]["median_ms"])
    print("supernet", {k: v for k, v in result["supernet_step"].items() if isinstance(v, dict)})
    print("wrote", path)


if __name__ == "__main__":
    main()
