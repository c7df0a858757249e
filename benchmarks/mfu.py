"""Training MFU: achieved training FLOP/s against this machine's GEMM peak and an HF peer.

Configurations, each trained as ``lvsearch`` trains it (forward, backward, gradient clipping,
AdamW; masked batches of a prepared corpus, the batch built inside the timed step):

* ``supernet-quickstart``: the quickstart supernet (``recipes/quickstart.yaml``), one uniformly
  sampled path per step (the sampler of ``train-supernet``);
* ``retrain-quickstart/bert``: ``bert`` at retrain-quickstart dims (12 slots, hidden 128, MLM);
* ``retrain-small/bert``: ``bert`` at ``recipes/retrain-small.yaml`` dims (24 slots, hidden
  256, FF 1024, 4 heads, sequence 128) under MLM, at batch ``--small-batch`` (a reduced step);
* ``hf-bert@quickstart`` and ``hf-bert@small``: HF ``BertForMaskedLM`` at the same width, depth,
  sequence and batch (``_common.hf_mlm_peer``: one layer per SA+FF pair);
* ``gemm``: a ``--gemm-size`` square ``torch.mm`` (same threads, same dtype): the peak.

FLOPs (1 multiply-add = 2): training = 3 × forward (the usual convention: backward = 2 ×
forward). lvsearch forward per token = ``flops_per_token(arch, dims, L)`` (matmuls of the
slots and the embedding projection, :func:`lvsearch.model.encoder.flops_per_token`) plus the
MLM head *at the targets only* (lvsearch scores only the ``labels != -100`` positions): per
step ``targets × (2 H E + 2 E V)``. HF's head runs at every position, so its count is
``_common.hf_bert_flops_per_token`` (head ``2 H^2 + 2 H V`` per token). Each configuration's
count is cross-checked against ``torch.utils.flop_counter.FlopCounterMode`` over one forward +
backward (``counted``; attention and convolutions by torch's own formulas).

All configurations and the GEMM are timed round-robin in one process (``--rounds`` rounds
after a warm-up round; medians), so machine load hits all of them alike; MFU = achieved
FLOP/s ÷ the median GEMM FLOP/s. fp32 always; bf16 (autocast, bf16 GEMM) only where the CPU
has native bf16 (:func:`lvsearch.device.cpu_has_native_bf16`), else recorded as unmeasured.

``--compile`` instead times each configuration (default ``retrain-quickstart/bert``) eager
against ``torch.compile`` of the same module (inductor, default dynamic-shape handling: the
number of masked targets varies per step), round-robin in fp32, and writes
``benchmarks/results/mfu_compile.json``: the one change of the step that needs no new kernel.

``--blimp`` instead measures the MFU of BLiMP scoring (``lvsearch.eval.blimp.PLLScorer``,
inference only): ``bert`` at retrain-quickstart dims scores the first ``--blimp-limit`` pairs of
every ``--blimp-every``-th paradigm of ``../shared/data/blimp`` (fp32, PLL-word-l2r, the
default token budget); every forward pass is counted as it runs (rows × padded length × the
body's FLOPs per token at that length, plus the MLM head at one position per row), also the
share of those tokens that are padding; against the GEMM peak at the same threads, measured
before and after. Writes ``benchmarks/results/mfu_blimp.json``. A scorer at a fraction f of the
peak can get at most 1/f faster at the same FLOPs.

``--profile`` instead profiles the fp32 training step (torch.profiler) of
``retrain-quickstart/bert`` and ``supernet-quickstart``: time per phase (data, forward,
backward, clip, optimizer), forward time per layer kind (SA, FF, DC, embeddings, head + loss)
and the aten ops by self time, written to ``benchmarks/results/mfu_profile.json``.

Usage: python benchmarks/mfu.py [--threads 2] [--rounds 5] [--data DIR]
       python benchmarks/mfu.py --profile [--profile-steps 8]
       python benchmarks/mfu.py --compile [--rounds 5 --steps 6]
       python benchmarks/mfu.py --blimp [--threads 1 --blimp-every 12 --blimp-limit 100]
Writes benchmarks/results/mfu.json (or --name).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import tempfile
import time
from dataclasses import dataclass, field

from _common import (hf_bert_flops_per_token, hf_mlm_peer, machine, prepared_data, result_path, run_main,
                     shared_data_dir, write_result)

import torch  # noqa: E402


@dataclass
class Setup:
    """One timed configuration: its module, optimizer, batches and FLOP count."""

    name: str
    cfg: object
    module: torch.nn.Module
    batches: object
    #: ``(step, labels) -> forward FLOPs of the step`` (the whole batch) and the step's path.
    forward_flops: object
    arch_at: object = None
    params: int = 0
    description: str = ""
    opt: torch.optim.Optimizer = field(init=False)

    def __post_init__(self):
        from lvsearch.train.loop import make_optimizer

        self.module.train()
        self.opt = make_optimizer(self.module, self.cfg.train)

    def kwargs(self, step: int) -> tuple[dict, torch.Tensor]:
        (micro,), labels = self.batches(step)
        kw = {"input_ids": micro["input_ids"], "labels": micro["labels"]}
        if self.arch_at is not None:
            kw["arch"] = self.arch_at(step)
        return kw, labels

    def step(self, step: int, precision: str) -> float:
        """One training step as the loop runs it; returns its training FLOPs (3 × forward)."""
        kw, labels = self.kwargs(step)
        with _autocast(precision):
            out = self.module(**kw)
        (out["loss_sum"].float() / float((labels != -100).sum())).backward()
        torch.nn.utils.clip_grad_norm_([p for p in self.module.parameters() if p.grad is not None],
                                       self.cfg.train.grad_clip)
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        return 3.0 * self.forward_flops(step, labels)

    def counted_flops(self, step: int, precision: str) -> float:
        """FlopCounterMode's count of one forward + backward (no update; gradients dropped)."""
        from torch.utils.flop_counter import FlopCounterMode

        kw, labels = self.kwargs(step)
        with FlopCounterMode(display=False) as fc:
            with _autocast(precision):
                out = self.module(**kw)
            (out["loss_sum"].float() / float((labels != -100).sum())).backward()
        self.opt.zero_grad(set_to_none=True)
        return float(fc.get_total_flops())


def _autocast(precision: str):
    return torch.autocast("cpu", dtype=torch.bfloat16) if precision == "bf16" else contextlib.nullcontext()


def lvsearch_forward_flops(arch, dims, seq_len: int, tokens: int, targets: int) -> float:
    """Forward FLOPs of one lvsearch batch: ``tokens`` × the body's count per token (slots and
    embedding projection) + ``targets`` × the MLM head (``2 H E + 2 E V``: scored at targets only)."""
    from lvsearch.model.encoder import flops_per_token

    body = flops_per_token(arch, dims, seq_len)
    head = flops_per_token(arch, dims, seq_len, include_head=True) - body
    return tokens * body + targets * head


def build_setups(data, small_batch: int, only: list[str] | None = None) -> dict[str, Setup]:
    """Every configuration of the module docstring (or those named in ``only``)."""
    from lvsearch.arch import resolve_arch
    from lvsearch.config import RetrainConfig, SupernetConfig, load_config
    from lvsearch.model import Supernet
    from lvsearch.space import SearchSpace
    from lvsearch.train.distributed import DistInfo
    from lvsearch.train.objectives import MaskedBatches, SupernetMLM
    from lvsearch.train.retrain import build_module
    from lvsearch.train.supernet import ArchSampler, build_space

    info = DistInfo(0, 1, 0, torch.device("cpu"))
    out: dict[str, Setup] = {}

    def want(name):
        return only is None or name in only

    def count(labels):
        return labels.numel(), int((labels != -100).sum())

    if want("supernet-quickstart"):
        cfg, _ = load_config(SupernetConfig, "quickstart", ["train.precision=fp32"])
        space = build_space(cfg)
        dims = cfg.model_settings().dims(data.vocab_size, data.special_ids.pad, cfg.train.seq_len)
        torch.manual_seed(cfg.train.seed)
        net = Supernet(space, dims)
        sampler = ArchSampler(space, cfg.sampling, cfg.train.seed)
        out["supernet-quickstart"] = Setup(
            "supernet-quickstart", cfg, SupernetMLM(net), MaskedBatches(data, cfg.train, cfg.masking, info),
            lambda step, labels, s=sampler, d=dims, L=cfg.train.seq_len: lvsearch_forward_flops(s(step), d, L, *count(labels)),
            arch_at=sampler, params=sum(p.numel() for p in net.parameters()),
            description=f"quickstart supernet ({space.name}, {space.num_slots} slots), one uniform path per step, "
                        f"batch {cfg.train.batch_size} x {cfg.train.seq_len}")
    for recipe, label, extra in (("retrain-quickstart", "quickstart", []),
                                 ("retrain-small", "small", [f"train.batch_size={small_batch}"])):
        cfg, _ = load_config(RetrainConfig, recipe, ["objective=mlm", "train.precision=fp32", *extra])
        space = SearchSpace.load(cfg.space)
        space = space.with_num_slots(cfg.num_slots) if cfg.num_slots else space
        dims = cfg.model_settings().dims(data.vocab_size, data.special_ids.pad, cfg.train.seq_len)
        L = cfg.train.seq_len
        if want(f"{recipe}/bert"):
            arch = resolve_arch("bert", space)
            module = build_module(cfg, arch, dims)
            out[f"{recipe}/bert"] = Setup(
                f"{recipe}/bert", cfg, module, MaskedBatches(data, cfg.train, cfg.masking, info),
                lambda step, labels, a=arch, d=dims, L=L: lvsearch_forward_flops(a, d, L, *count(labels)),
                params=module.encoder.num_params(),
                description=f"bert ({arch.num_slots} slots) at {recipe} dims (hidden {dims.hidden}, FF {dims.ff_inner}, "
                            f"{dims.heads} heads), MLM, batch {cfg.train.batch_size} x {L}")
        if want(f"hf-bert@{label}"):
            layers = space.num_slots // 2
            module, _, params = hf_mlm_peer(cfg, data, layers)
            per_token = hf_bert_flops_per_token(dims.hidden, dims.ff_inner, layers, data.vocab_size, L)
            out[f"hf-bert@{label}"] = Setup(
                f"hf-bert@{label}", cfg, module, MaskedBatches(data, cfg.train, cfg.masking, info),
                lambda step, labels, f=per_token: f * labels.numel(), params=params,
                description=f"HF BertForMaskedLM, {layers} layers at {recipe} dims, same batches")
    return out


def gemm_flops(n: int, reps: int, dtype: torch.dtype) -> float:
    """FLOP/s of ``reps`` back-to-back ``n x n`` matmuls (one warm-up call first)."""
    a, b = torch.randn(n, n).to(dtype), torch.randn(n, n).to(dtype)
    c = torch.mm(a, b)
    t = time.perf_counter()
    for _ in range(reps):
        torch.mm(a, b, out=c)
    return 2.0 * n ** 3 * reps / (time.perf_counter() - t)


def measure(setups: dict[str, Setup], precision: str, steps: dict[str, int], rounds: int,
            gemm_size: int, gemm_reps: int) -> dict:
    """Round-robin timing: every round runs each configuration's steps, then the GEMM; round 0
    warms up. Returns per configuration the median tokens/s and FLOP/s, and the GEMM's."""
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    rec = {k: {"tokens_per_s": [], "flops_per_s": []} for k in setups}
    gemm = []
    step_no = {k: 0 for k in setups}
    for r in range(rounds + 1):
        for key, s in setups.items():
            flops, tokens = 0.0, 0
            t = time.perf_counter()
            for _ in range(steps[key]):
                flops += s.step(step_no[key], precision)
                tokens += s.cfg.train.batch_size * s.cfg.train.seq_len
                step_no[key] += 1
            dt = time.perf_counter() - t
            if r:
                rec[key]["tokens_per_s"].append(tokens / dt)
                rec[key]["flops_per_s"].append(flops / dt)
        g = gemm_flops(gemm_size, gemm_reps, dtype)
        if r:
            gemm.append(g)
        print(f"[{precision}] round {r}{' (warm-up)' if not r else ''}: "
              + ", ".join(f"{k} {v['tokens_per_s'][-1]:.0f} tok/s" for k, v in rec.items() if r)
              + f"  gemm {g / 1e9:.1f} GFLOP/s", flush=True)
    peak = statistics.median(gemm)
    out = {"gemm": {"size": gemm_size, "reps_per_round": gemm_reps, "flops_per_s": gemm,
                    "median_flops_per_s": peak}, "configs": {}}
    for key, v in rec.items():
        f = statistics.median(v["flops_per_s"])
        out["configs"][key] = {
            "steps_per_round": steps[key], "tokens_per_s_rounds": v["tokens_per_s"], "flops_per_s_rounds": v["flops_per_s"],
            "median_tokens_per_s": statistics.median(v["tokens_per_s"]), "median_flops_per_s": f, "mfu": f / peak,
            # per round, each round's FLOP/s over that round's GEMM (noise shared within a round)
            "mfu_rounds": [x / g for x, g in zip(v["flops_per_s"], gemm)],
        }
    for key in out["configs"]:
        peer = "hf-bert@quickstart" if "quickstart" in key else "hf-bert@small"
        if peer in out["configs"] and peer != key:
            c, p = out["configs"][key], out["configs"][peer]
            c["vs_hf_peer"] = {"peer": peer, "tokens_per_s_ratio": c["median_tokens_per_s"] / p["median_tokens_per_s"],
                               "mfu_ratio": c["mfu"] / p["mfu"]}
    return out


# ---------------------------------------------------------------------------- profile


#: aten ops whose self time is matrix multiplication (forward and backward run as these).
MATMUL_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::_addmm_activation")


def profile(setups: dict[str, Setup], steps: int) -> dict:
    """torch.profiler over ``steps`` fp32 steps (after 2 unprofiled ones) of each setup."""
    from torch.autograd.profiler import record_function
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    result = {}
    for key, s in setups.items():
        hooks = []
        for name, mod in s.module.named_modules():
            kind = _layer_kind(name, mod)
            if kind is None:
                continue
            holder = {}
            hooks.append(mod.register_forward_pre_hook(
                lambda m, a, k=kind, h=holder: h.__setitem__("rf", record_function(f"fwd:{k}").__enter__())))
            hooks.append(mod.register_forward_hook(lambda m, a, o, h=holder: h.pop("rf").__exit__(None, None, None)))
        for st in range(2):
            s.step(st, "fp32")
        with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
            t0 = time.perf_counter()
            for st in range(2, 2 + steps):
                with record_function("phase:data"):
                    kw, labels = s.kwargs(st)
                with record_function("phase:forward"):
                    out = s.module(**kw)
                with record_function("phase:backward"):
                    (out["loss_sum"].float() / float((labels != -100).sum())).backward()
                with record_function("phase:clip"):
                    torch.nn.utils.clip_grad_norm_([p for p in s.module.parameters() if p.grad is not None],
                                                   s.cfg.train.grad_clip)
                with record_function("phase:optimizer"):
                    s.opt.step()
                    s.opt.zero_grad(set_to_none=True)
            wall = time.perf_counter() - t0
        for h in hooks:
            h.remove()
        events = prof.key_averages()
        total_us = sum(e.cpu_time_total for e in events if e.key.startswith("phase:"))
        phases = {e.key[6:]: e.cpu_time_total / total_us for e in events if e.key.startswith("phase:")}
        fwd = {e.key[4:]: e.cpu_time_total / total_us for e in events if e.key.startswith("fwd:")}
        aten = sorted((e for e in events if e.key.startswith("aten::")), key=lambda e: -e.self_cpu_time_total)
        matmul = sum(e.self_cpu_time_total for e in aten if e.key in MATMUL_OPS) / total_us
        result[key] = {
            "steps": steps, "wall_s_per_step": wall / steps, "note": "shares of the profiled step time (CPU time "
            "of the phases; the profiler's overhead included)",
            "phases": phases, "forward_by_layer": fwd, "matmul_self_share": matmul,
            "top_ops": [{"op": e.key, "self_share": e.self_cpu_time_total / total_us, "calls_per_step": e.count / steps}
                        for e in aten[:20]],
        }
        print(f"{key}: {wall / steps:.3f} s/step; phases "
              + ", ".join(f"{k} {v:.0%}" for k, v in phases.items()) + f"; matmul self {matmul:.0%}", flush=True)
    return result


def compare_compiled(data, args, only: list[str], eager: dict[str, Setup]) -> dict:
    """Eager ``eager[k]`` against a second, identically built copy under ``torch.compile``,
    timed round-robin by :func:`measure` (round 0, which compiles, is the untimed warm-up)."""
    compiled = build_setups(data, args.small_batch, only)
    both: dict[str, Setup] = {}
    for key in eager:
        s = compiled[key]
        s.module = torch.compile(s.module)
        both[key], both[f"{key}+compile"] = eager[key], s
    t0 = time.perf_counter()
    for s in compiled.values():  # the first compiled steps: compilation (and one recompile for dynamic shapes)
        s.step(0, "fp32")
        s.step(1, "fp32")
    first = time.perf_counter() - t0
    steps = {k: args.steps for k in both}
    res = measure(both, "fp32", steps, args.rounds, args.gemm_size, args.gemm_reps)
    for key in eager:
        e, c = res["configs"][key], res["configs"][f"{key}+compile"]
        c["speedup_over_eager"] = c["median_tokens_per_s"] / e["median_tokens_per_s"]
        c["speedup_rounds"] = [x / y for x, y in zip(c["tokens_per_s_rounds"], e["tokens_per_s_rounds"])]
        print(f"{key}: torch.compile {c['speedup_over_eager']:.2f}x eager ({c['median_tokens_per_s']:.0f} vs "
              f"{e['median_tokens_per_s']:.0f} tok/s)", flush=True)
    res["first_two_compiled_steps_s"] = first
    res["torch"] = torch.__version__
    return res


def blimp_mfu(data, args) -> dict:
    """BLiMP scoring's achieved FLOP/s against the GEMM peak (see the module docstring)."""
    from lvsearch.arch import resolve_arch
    from lvsearch.config import RetrainConfig, load_config
    from lvsearch.eval.blimp import PLLScorer, evaluate_blimp, read_blimp
    from lvsearch.model.encoder import flops_per_token
    from lvsearch.space import SearchSpace
    from lvsearch.train.retrain import build_module

    cfg, _ = load_config(RetrainConfig, "retrain-quickstart", ["objective=mlm", "train.precision=fp32"])
    space = SearchSpace.load(cfg.space)
    space = space.with_num_slots(cfg.num_slots) if cfg.num_slots else space
    dims = cfg.model_settings().dims(data.vocab_size, data.special_ids.pad, cfg.train.seq_len)
    arch = resolve_arch("bert", space)
    encoder = build_module(cfg, arch, dims).encoder
    head = flops_per_token(arch, dims, 1, include_head=True) - flops_per_token(arch, dims, 1)
    tally = {"flops": 0.0, "tokens": 0, "real_tokens": 0, "passes": 0, "rows": 0}

    def count(module, inputs):
        ids, attn = inputs[0], inputs[1]
        rows, length = ids.shape
        tally["flops"] += rows * length * flops_per_token(arch, dims, length) + rows * head
        tally["tokens"] += rows * length
        tally["real_tokens"] += int(attn.sum())
        tally["passes"] += 1
        tally["rows"] += rows

    hook = encoder.register_forward_pre_hook(count)
    paradigms = read_blimp(shared_data_dir() / "blimp", limit=args.blimp_limit)[::args.blimp_every]
    scorer = PLLScorer(encoder, data.tokenizer, metric="pll-word-l2r", precision="fp32")
    gemm_before = [gemm_flops(args.gemm_size, args.gemm_reps, torch.float32) for _ in range(3)]
    evaluate_blimp(scorer, paradigms[:1])  # warm-up, not counted
    tally.update(flops=0.0, tokens=0, real_tokens=0, passes=0, rows=0)
    result = evaluate_blimp(scorer, paradigms)
    gemm_after = [gemm_flops(args.gemm_size, args.gemm_reps, torch.float32) for _ in range(3)]
    hook.remove()
    peak = statistics.median(gemm_before + gemm_after)
    achieved = tally["flops"] / result["seconds"]
    out = {"model": f"bert at retrain-quickstart dims (hidden {dims.hidden}, {arch.num_slots} slots), random init",
           "metric": "pll-word-l2r", "precision": "fp32", "paradigms": len(paradigms), "pairs": result["pairs"],
           "sentences": result["sentences"], "tokens_scored": result["tokens_scored"], "seconds": result["seconds"],
           "sentences_per_second": result["sentences_per_second"], "forward_passes": tally["passes"], "forward_rows": tally["rows"],
           "forward_tokens": tally["tokens"], "padding_share": 1 - tally["real_tokens"] / tally["tokens"],
           "forward_flops": tally["flops"], "achieved_flops_per_s": achieved,
           "gemm": {"size": args.gemm_size, "before": gemm_before, "after": gemm_after, "median_flops_per_s": peak},
           "mfu": achieved / peak, "max_speedup_at_same_flops": peak / achieved}
    print(f"BLiMP scoring: {result['sentences']} sentences in {result['seconds']:.1f} s, {achieved / 1e9:.2f} GFLOP/s "
          f"against GEMM {peak / 1e9:.1f}: MFU {out['mfu']:.1%}, padding {out['padding_share']:.1%}", flush=True)
    return out


def _layer_kind(name: str, mod) -> str | None:
    """The forward label of a module the profile times: an op layer (by its registry code), the
    embeddings, the MLM head (lvsearch) or HF's encoder layers / head."""
    parts = name.split(".")
    if len(parts) >= 3 and parts[-3] == "slots":
        return parts[-1]  # slots.{n}.{OP}
    if parts[-1] in ("embeddings", "mlm_head"):
        return parts[-1]
    if len(parts) >= 2 and parts[-2] == "layer" and parts[-1].isdigit():
        return "hf-layer"
    if parts[-1] == "cls":
        return "hf-head"
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", help="a prepared dataset (default: the shared corpus prepared with vocab 4096)")
    ap.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=2, help="steps per round of the quickstart-size configurations")
    ap.add_argument("--small-steps", type=int, default=1, help="steps per round of the retrain-small-size ones")
    ap.add_argument("--small-batch", type=int, default=16, help="retrain-small's batch here (the recipe: 128)")
    ap.add_argument("--gemm-size", type=int, default=1024)
    ap.add_argument("--gemm-reps", type=int, default=20)
    ap.add_argument("--only", help="comma-separated configuration names (default: all)")
    ap.add_argument("--profile", action="store_true", help="profile the fp32 step instead (mfu_profile.json)")
    ap.add_argument("--profile-steps", type=int, default=8)
    ap.add_argument("--blimp", action="store_true", help="the MFU of BLiMP scoring instead (mfu_blimp.json)")
    ap.add_argument("--blimp-every", type=int, default=12, help="every k-th paradigm (--blimp)")
    ap.add_argument("--blimp-limit", type=int, default=100, help="first N pairs of each (--blimp)")
    ap.add_argument("--compile", action="store_true",
                    help="eager against torch.compile of the same configurations instead (mfu_compile.json)")
    ap.add_argument("--name", help="result name (default mfu, or mfu_profile with --profile)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    from lvsearch.data.shards import PreparedData
    from lvsearch.device import cpu_has_native_bf16
    from lvsearch.repro import cpu_model

    bench = "mfu_profile" if args.profile else "mfu_compile" if args.compile else "mfu_blimp" if args.blimp else "mfu"
    name = args.name or bench
    path = result_path(name, own=lambda d: d.get("benchmark") == bench)
    only = args.only.split(",") if args.only else (["retrain-quickstart/bert"] if args.compile else None)
    with tempfile.TemporaryDirectory() as tmp:
        data = PreparedData.open(prepared_data(args.data, tmp, vocab_size=4096))
        if args.blimp:
            res = {"benchmark": bench, "threads": args.threads, "vocab_size": data.vocab_size,
                   "machine": {**machine(), "cpu_model": cpu_model(), "load_average_at_start": _loadavg()},
                   "blimp": blimp_mfu(data, args)}
            res["machine"]["load_average_at_end"] = _loadavg()
            print(f"wrote {write_result(name, res, path)}")
            return
        setups = build_setups(data, args.small_batch, only)
        mach = {**machine(), "cpu_model": cpu_model(), "native_bf16": cpu_has_native_bf16(),
                "load_average_at_start": _loadavg()}
        common = {"benchmark": bench, "machine": mach, "threads": args.threads, "vocab_size": data.vocab_size,
                  "configs": {k: {"description": s.description, "params": s.params} for k, s in setups.items()}}
        if args.profile:
            common["profile"] = profile({k: s for k, s in setups.items() if not k.startswith("retrain-small")
                                         and not k.endswith("@small")}, args.profile_steps)
            common["machine"]["load_average_at_end"] = _loadavg()
            print(f"wrote {write_result(name, common, path)}")
            return
        if args.compile:
            common["compile"] = compare_compiled(data, args, only, setups)
            common["machine"]["load_average_at_end"] = _loadavg()
            print(f"wrote {write_result(name, common, path)}")
            return
        for key, s in setups.items():
            kw_step = 10_000  # a step the timing never reaches: the count's batch is not trained on
            _, labels = s.kwargs(kw_step)
            analytic = 3.0 * s.forward_flops(kw_step, labels)
            counted = s.counted_flops(kw_step, "fp32")
            tokens = labels.numel()
            common["configs"][key].update({
                "tokens_per_step": tokens, "targets_per_step": int((labels != -100).sum()),
                "train_flops_per_token": analytic / tokens, "counted_train_flops_per_token": counted / tokens,
                "counted_over_analytic": counted / analytic})
        steps = {k: (args.small_steps if ("small" in k) else args.steps) for k in setups}
        common["precision"] = {"fp32": measure(setups, "fp32", steps, args.rounds, args.gemm_size, args.gemm_reps)}
        if cpu_has_native_bf16():
            common["precision"]["bf16"] = measure(setups, "bf16", steps, args.rounds, args.gemm_size, args.gemm_reps)
        else:
            common["precision"]["bf16"] = "unmeasured: this CPU has no native bf16 (cpu_has_native_bf16() is False)"
        common["machine"]["load_average_at_end"] = _loadavg()
        common["rounds"] = args.rounds
    for prec, res in common["precision"].items():
        if isinstance(res, str):
            print(f"{prec}: {res}")
            continue
        print(f"{prec}: GEMM {res['gemm']['median_flops_per_s'] / 1e9:.1f} GFLOP/s")
        for k, v in res["configs"].items():
            print(f"  {k:26s} {v['median_tokens_per_s']:8.0f} tok/s {v['median_flops_per_s'] / 1e9:7.2f} GFLOP/s "
                  f"MFU {v['mfu']:.1%}")
    print(f"wrote {write_result(name, common, path)}")


def _loadavg() -> list[float] | None:
    try:
        import os

        return list(os.getloadavg())
    except OSError:
        return None


if __name__ == "__main__":
    run_main(main)
