"""Benchmark: DC layer / dynamic convolution, lvsearch vs the HF ConvBERT ``unfold`` formulation.

Forward + backward at LV-BERT-small shapes (seq 128, hidden 256, 4 conv heads, kernel 9),
CPU, median (and min) of several interleaved repeats, all in the same process; the
machine's load average is recorded because the CPU may be shared. Writes
``benchmarks/results/dc_layer.json``. Not a test.

What is compared (all fp32, same inputs, fwd + bwd of ``out.sum()``):

1. ``kernel``: ``lvsearch.kernels.dynamic_conv.dynamic_conv`` (shifted multiply-add over the
   K taps) vs ``dynamic_conv_unfold`` below: the formulation HF ``transformers`` ConvBERT
   uses in ``ConvBertSelfAttention`` (``nn.functional.unfold`` of the values into
   ``(B*L*heads, d, K)`` windows, then a batched matmul with the ``(K, 1)`` kernels). The
   benchmark first checks that this formulation reproduces the conv half of a real HF
   ``ConvBertSelfAttention`` output (same weights), and that both implementations agree.
2. ``layer``: the full lvsearch DC layer (GLU, separable conv, kernel generator, dynamic
   conv, output projection, residual + LayerNorm) with its dynamic convolution vs the same
   layer with the dynamic convolution swapped for the unfold formulation.
3. ``hf_convbert_self_attention`` (context only, not a like-for-like ratio): HF
   ``ConvBertSelfAttention`` itself (hidden 256, head_ratio 2: 4 attention heads + 4 conv
   heads of 32 channels each, kernel 9), which also computes self-attention on half the
   channels.

Usage: ``python benchmarks/dc_layer.py [--batch 16] [--repeats 7] [--threads 2]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

# Import this checkout's lvsearch (not another installed copy) when run as a script.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import lvsearch.ops.dc as layers_mod  # noqa: E402
from lvsearch.io import atomic_write_json
from lvsearch.kernels.dynamic_conv import dynamic_conv
from lvsearch.ops.dc import DynamicConv

RESULTS = Path(__file__).resolve().parent / "results" / "dc_layer.json"


def dynamic_conv_unfold(value, kernels, padding_mask=None):
    """The HF ConvBERT formulation (unfold + batched matmul), same contract as dynamic_conv."""
    b, l, h = value.shape
    heads, k = kernels.shape[2], kernels.shape[3]
    if padding_mask is not None:
        value = value.masked_fill(~padding_mask.unsqueeze(-1), 0.0)
    cols = F.unfold(value.transpose(1, 2).unsqueeze(-1), kernel_size=(k, 1), padding=((k - 1) // 2, 0))
    cols = cols.transpose(1, 2).reshape(b * l * heads, h // heads, k)  # channel-major, tap-minor
    out = torch.bmm(cols, kernels.reshape(b * l * heads, k, 1))
    return out.reshape(b, l, h)


def time_fwd_bwd(fn, make_inputs, repeats: int, warmup: int = 2) -> list[float]:
    times = []
    for i in range(warmup + repeats):
        inputs = make_inputs()
        t0 = time.perf_counter()
        fn(*inputs).sum().backward()
        dt = time.perf_counter() - t0
        if i >= warmup:
            times.append(dt)
    return times


def check_against_hf(seq: int) -> dict:
    """Reproduce the conv half of HF ConvBertSelfAttention with dynamic_conv_unfold and dynamic_conv."""
    from transformers import ConvBertConfig
    from transformers.models.convbert.modeling_convbert import ConvBertSelfAttention

    torch.manual_seed(0)
    cfg = ConvBertConfig(hidden_size=256, num_attention_heads=8, head_ratio=2, conv_kernel_size=9,
                         attention_probs_dropout_prob=0.0)
    attn = ConvBertSelfAttention(cfg).eval()
    x = torch.randn(2, seq, 256)
    with torch.no_grad():
        ctx = attn(x)[0]  # (B, L, 256): [attention heads | conv heads]
        conv_ref = ctx[..., attn.all_head_size:]
        q = attn.query(x)
        key_conv = attn.key_conv_attn_layer(x.transpose(1, 2)).transpose(1, 2)
        kern = torch.softmax(attn.conv_kernel_layer(key_conv * q).view(2, seq, attn.num_attention_heads, attn.conv_kernel_size), -1)
        value = attn.conv_out_layer(x)
        via_unfold = dynamic_conv_unfold(value, kern)
        via_ours = dynamic_conv(value, kern)
    return {
        "max_abs_diff_unfold_vs_hf_conv_half": float((via_unfold - conv_ref).abs().max()),
        "max_abs_diff_lvsearch_vs_hf_conv_half": float((via_ours - conv_ref).abs().max()),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kernel", type=int, default=9)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    B, L, H, NH, K = args.batch, args.seq, args.hidden, args.heads, args.kernel
    mask = torch.ones(B, L, dtype=torch.bool)
    mask[: B // 2, L * 3 // 4:] = False  # some padding, as in real batches

    load_before = os.getloadavg()
    hf_check = check_against_hf(L)
    g = torch.Generator().manual_seed(0)
    v0 = torch.randn(B, L, H, generator=g)
    k0 = torch.softmax(torch.randn(B, L, NH, K, generator=g), -1)
    agree = float((dynamic_conv(v0, k0, mask) - dynamic_conv_unfold(v0, k0, mask)).abs().max())

    def kernel_inputs():
        return v0.clone().requires_grad_(), k0.clone().requires_grad_()

    torch.manual_seed(0)
    layer = DynamicConv(H, NH, K, dropout=0.1).train()
    x0 = torch.randn(B, L, H)

    def layer_inputs():
        return (x0.clone().requires_grad_(),)

    # The layer calls dynamic_conv_softmax(value, logits, mask); swap in the unfold version.
    ours_softmax = layers_mod.dynamic_conv_softmax

    def unfold_softmax(value, logits, padding_mask=None):
        return dynamic_conv_unfold(value, torch.softmax(logits, dim=-1), padding_mask)

    def layer_ours(x):
        layers_mod.dynamic_conv_softmax = ours_softmax
        return layer(x, mask)

    def layer_unfold(x):
        layers_mod.dynamic_conv_softmax = unfold_softmax
        try:
            return layer(x, mask)
        finally:
            layers_mod.dynamic_conv_softmax = ours_softmax

    from transformers import ConvBertConfig
    from transformers.models.convbert.modeling_convbert import ConvBertSelfAttention

    hf = ConvBertSelfAttention(ConvBertConfig(hidden_size=H, num_attention_heads=2 * NH, head_ratio=2,
                                              conv_kernel_size=K)).train()
    ext = (1.0 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min

    def hf_fn(x):
        return hf(x, attention_mask=ext)[0]

    # interleave the contenders round by round so drift in machine load hits all equally
    results = {name: [] for name in ("kernel_lvsearch", "kernel_unfold", "layer_lvsearch", "layer_unfold", "hf_attn")}
    for _ in range(args.repeats):
        results["kernel_lvsearch"] += time_fwd_bwd(lambda v, k: dynamic_conv(v, k, mask), kernel_inputs, 1, 1)
        results["kernel_unfold"] += time_fwd_bwd(lambda v, k: dynamic_conv_unfold(v, k, mask), kernel_inputs, 1, 1)
        results["layer_lvsearch"] += time_fwd_bwd(layer_ours, layer_inputs, 1, 1)
        results["layer_unfold"] += time_fwd_bwd(layer_unfold, layer_inputs, 1, 1)
        results["hf_attn"] += time_fwd_bwd(hf_fn, layer_inputs, 1, 1)
    med = {k: statistics.median(v) * 1e3 for k, v in results.items()}
    out = {
        "benchmark": "dc_layer",
        "what": "forward+backward of out.sum(), fp32 CPU, median ms over repeats (1 warm-up before each timed call)",
        "shapes": {"batch": B, "seq": L, "hidden": H, "conv_heads": NH, "kernel": K,
                   "padding": "half the batch padded in the last quarter"},
        "env": {"torch": torch.__version__, "threads": torch.get_num_threads(),
                "cpu": platform.processor() or platform.machine(), "python": platform.python_version(),
                "cpu_count": os.cpu_count(),
                "loadavg_1_5_15_before": [round(x, 2) for x in load_before],
                "loadavg_1_5_15_after": [round(x, 2) for x in os.getloadavg()]},
        "repeats": args.repeats,
        "median_ms": {k: round(v, 3) for k, v in med.items()},
        "min_ms": {k: round(min(v) * 1e3, 3) for k, v in results.items()},
        "all_ms": {k: [round(t * 1e3, 3) for t in v] for k, v in results.items()},
        "ratio_kernel_unfold_over_lvsearch": round(med["kernel_unfold"] / med["kernel_lvsearch"], 2),
        "ratio_layer_unfold_over_lvsearch": round(med["layer_unfold"] / med["layer_lvsearch"], 2),
        "ratio_kernel_unfold_over_lvsearch_min": round(min(results["kernel_unfold"]) / min(results["kernel_lvsearch"]), 2),
        "ratio_layer_unfold_over_lvsearch_min": round(min(results["layer_unfold"]) / min(results["layer_lvsearch"]), 2),
        "checks": {"max_abs_diff_lvsearch_vs_unfold": agree, **hf_check},
        "notes": (
            "kernel_*: the dynamic convolution alone (lvsearch shifted multiply-add vs HF ConvBERT's unfold+bmm "
            "formulation, re-implemented here and checked against a real HF ConvBertSelfAttention's conv half). "
            "layer_*: the full lvsearch DC layer with either dynamic convolution. hf_attn: HF "
            "ConvBertSelfAttention (4 attention heads + 4 conv heads on 128 channels each), for context only."
        ),
    }
    atomic_write_json(args.out, out)
    print(json.dumps({k: v for k, v in out.items() if k not in ("all_ms", "notes", "what")}, indent=2))


if __name__ == "__main__":
    main()
