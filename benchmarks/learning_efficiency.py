"""How fast do small MLM encoders learn on CPU cores? Ablations against the neighbour-count floor.

Each *ablation* is a list of ``--set`` overrides applied to a retrain recipe (default
``retrain-quickstart``, MLM objective). :data:`ABLATIONS` lists every configuration the screening
measured, each changing one thing against the row it names. Every (ablation, arm) is trained with ``lvsearch``'s own training loop
(:func:`lvsearch.train.loop.train`) on the same real batches of a prepared corpus, and
evaluated every ``--eval-every`` steps on one fixed dev set (512 dev sequences, standard 15%
BERT masking, the same targets for every run, whatever masking it trains with). Reported:

* ``tokens_per_s``: training tokens per second of training time (evaluations excluded);
* ``accuracy_at``: MLM dev accuracy at each ``--report-tokens`` mark, linearly interpolated
  between the two evaluations around it;
* ``seconds_to``: training seconds until the dev accuracy first reaches each ``--thresholds``
  value (interpolated; null when never reached);
* ``floors``: unigram and neighbour-count accuracy (:mod:`lvsearch.eval.floors`) from exactly
  the training sequences seen up to each mark, on the same dev targets.

``--peer`` also trains Hugging Face ``BertForMaskedLM`` (transformers) of the same width and
depth as ``bert`` (hidden, heads, FF inner size, one layer per SA+FF pair; HF defaults
otherwise: post-LN, dropout 0.1, absolute positions, no embedding projection) on the same
batches, with the same loop, for each learning rate of ``--peer-lrs``.

Results merge into the output JSON keyed by run name, so ablations can be run in several
invocations (e.g. one per arm in parallel, each with ``--threads 1``).

Usage:
  python benchmarks/learning_efficiency.py --data DIR --arms bert,random:1 --threads 1 \\
      --only base,mask40 --tokens 1.2e6
Writes benchmarks/results/learning_efficiency.json (or --out).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from _common import RESULTS, hf_mlm_peer, machine, prepared_data

import torch  # noqa: E402

#: The old retrain-quickstart settings that the new recipe changed: every configuration below
#: starts from the bundled recipe with these applied first, so "base" stays the old recipe.
OLD = ["model.dropout=0.1", "model.position=absolute", "masking.probability=0.15", "train.precision=fp32"]

#: Switches the new recipe adds (recipes/retrain-quickstart.yaml).
DR = ["model.dropout=0.0", "model.position=relative"]

#: Every configuration measured: (name, overrides on the old retrain-quickstart recipe, what it
#: tests). The screening went in this order, each row changing one thing against the row it
#: names; rows marked "kept" became part of the next rows.
ABLATIONS: list[tuple[str, list[str], str]] = [
    ("base", [], "the old retrain-quickstart (dropout 0.1, absolute positions, lr 3e-3, β2 0.999, 15% masking)"),
    ("mask30", ["masking.probability=0.3"], "base + 30% masking"),
    ("mask40", ["masking.probability=0.4"], "base + 40% masking"),
    ("m30-d0", ["masking.probability=0.3", "model.dropout=0.0"], "mask30 + no dropout (absolute positions)"),
    ("m30-d0-relzero", ["masking.probability=0.3", "model.dropout=0.0", "model.position=relative",
                        "model.relative_init=zero"], "mask30 + no dropout + relative positions (zero-init bias, T5)"),
    ("m30-d0-relzero-lr1e-2", ["masking.probability=0.3", "model.dropout=0.0", "model.position=relative",
                               "model.relative_init=zero", "train.lr=1e-2"], "m30-d0-relzero + lr 1e-2"),
    ("m30-d0-rel", ["masking.probability=0.3", *DR], "m30-d0-relzero with the local bias init (kept)"),
    ("m30-d0-rel-b16", ["masking.probability=0.3", *DR, "train.batch_size=16"], "m30-d0-rel + batch 16 (2× updates)"),
    ("m40-d0-rel", ["masking.probability=0.4", *DR], "m30-d0-rel with 40% masking (kept: the new recipe in fp32)"),
    ("m40-d0-rel-lr5e-3-b98", ["masking.probability=0.4", *DR, "train.lr=5e-3", "train.adam_betas=[0.9,0.98]"],
     "m40-d0-rel + lr 5e-3 and β2 0.98"),
    ("m40-d0-rel-lr1.5e-3", ["masking.probability=0.4", *DR, "train.lr=1.5e-3"], "m40-d0-rel + lr 1.5e-3"),
    ("m40-d0-rel-lr1e-3-b98", ["masking.probability=0.4", *DR, "train.lr=1e-3", "train.adam_betas=[0.9,0.98]"],
     "m40-d0-rel + lr 1e-3 and β2 0.98"),
    ("m40-d0-rel-eps1e-8", ["masking.probability=0.4", *DR, "train.adam_eps=1e-8"], "m40-d0-rel + Adam ε 1e-8"),
    ("m40-d0-rel-scaled", ["masking.probability=0.4", *DR, "model.init=scaled"], "m40-d0-rel + scaled residual init"),
    ("new-fp32", ["masking.probability=0.4", *DR, "train.precision=fp32"],
     "the new retrain-quickstart forced to fp32"),
    ("new", ["masking.probability=0.4", *DR, "train.precision=bf16"],
     "the new retrain-quickstart: m40-d0-rel with bf16 autocast (what precision auto picks on this CPU)"),
]


def ladder(names: list[str] | None) -> list[tuple[str, list[str], str]]:
    """The selected configurations of :data:`ABLATIONS` (all when ``names`` is None), in order.

    Raises:
        SystemExit: an unknown name.
    """
    known = {n for n, _, _ in ABLATIONS}
    unknown = sorted(set(names or ()) - known)
    if unknown:
        raise SystemExit(f"unknown ablation(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    return [a for a in ABLATIONS if names is None or a[0] in names]


class _Objective:
    """MLM micro-batches of the recipe + evaluation on one fixed dev set, timing evaluations."""

    def __init__(self, module, batches, dev, forward, eval_batch: int):
        self.module, self.batches, self.dev, self.forward, self.eval_batch = module, batches, dev, forward, eval_batch
        self.curve: list[dict] = []
        self.eval_seconds = 0.0
        self.t0 = time.perf_counter()

    def micro_batches(self, step):
        from lvsearch.data.masking import IGNORE_INDEX

        micro, labels = self.batches(step)
        for m in micro:
            del m["original_ids"]
        return micro, float((labels != IGNORE_INDEX).sum())

    def step_info(self, step):
        return {}

    def log_metrics(self, sums, norm):
        from lvsearch.train.objectives import mlm_log_metrics

        return mlm_log_metrics(sums)

    def evaluate(self, module, step):
        t = time.perf_counter()
        correct = count = loss = 0.0
        for ids, labels in self.dev.batches(self.eval_batch):
            logits, gold = self.forward(ids, labels)
            loss += float(torch.nn.functional.cross_entropy(logits, gold, reduction="sum"))
            correct += float((logits.argmax(-1) == gold).sum())
            count += gold.numel()
        train_s = t - self.t0 - self.eval_seconds
        self.curve.append({"step": step, "train_s": train_s, "accuracy": correct / count, "loss": loss / count})
        self.eval_seconds += time.perf_counter() - t
        return {}


def _interp(curve: list[dict], x_key: str, y_key: str, x: float) -> float | None:
    pts = [(0.0, None)] + [(c[x_key], c[y_key]) for c in curve]
    if curve and pts[-1][0] < x <= 1.02 * pts[-1][0]:  # a mark a rounding step past the end
        return pts[-1][1]
    for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
        if x0 <= x <= x1:
            if y0 is None or x1 == x0:
                return y1
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return None


def _first_reach(curve: list[dict], threshold: float) -> float | None:
    prev = {"train_s": 0.0, "accuracy": 0.0}
    for c in curve:
        if c["accuracy"] >= threshold:
            a0, a1 = prev["accuracy"], c["accuracy"]
            f = (threshold - a0) / (a1 - a0) if a1 > a0 else 1.0
            return prev["train_s"] + f * (c["train_s"] - prev["train_s"])
        prev = c
    return None


def run_one(data, dev, recipe: str, arm: str, overrides: list[str], tokens: float, eval_every: int,
            peer_lr: float | None = None) -> dict:
    """Train one arm (or the HF peer when ``peer_lr`` is set) and return its record."""
    from lvsearch.arch import resolve_arch
    from lvsearch.config import RetrainConfig, load_config
    from lvsearch.data.masking import IGNORE_INDEX
    from lvsearch.space import SearchSpace
    from lvsearch.train.distributed import DistInfo
    from lvsearch.train.loop import train
    from lvsearch.train.objectives import MaskedBatches
    from lvsearch.train.retrain import build_module

    base, _ = load_config(RetrainConfig, recipe, ["objective=mlm", *OLD, *overrides])
    bs = base.train.batch_size  # a configuration may change the batch: keep tokens and warm-up tokens
    tps = bs * base.train.seq_len
    steps = max(1, round(tokens / tps))
    recipe_cfg, _ = load_config(RetrainConfig, recipe, ["objective=mlm"])
    warm = max(1, round(recipe_cfg.train.warmup_steps * recipe_cfg.train.batch_size / bs))
    cfg, _ = load_config(RetrainConfig, recipe, ["objective=mlm", *OLD, *overrides, f"train.steps={steps}",
                                                  f"train.warmup_steps={warm}", f"train.eval_every={eval_every}",
                                                  "train.checkpoint_every=0", "train.log_every=1000000"])
    info = DistInfo(0, 1, 0, torch.device("cpu"))
    batches = MaskedBatches(data, cfg.train, cfg.masking, info)
    space = SearchSpace.load(cfg.space).with_num_slots(cfg.num_slots or 12)
    if peer_lr is None:
        arch = resolve_arch(arm, space)
        dims = cfg.model_settings().dims(data.vocab_size, data.special_ids.pad, cfg.train.seq_len)
        module = build_module(cfg, arch, dims)
        enc = module.encoder
        params = enc.num_params()

        def forward(ids, labels):
            sel = labels != IGNORE_INDEX
            return enc.mlm_logits(enc(ids)[sel]).float(), labels[sel]
        name = arm
    else:
        module, forward, params = hf_mlm_peer(cfg, data, space.num_slots // 2)
        cfg.train.lr = peer_lr
        name = f"hf-bert lr={peer_lr:g}"
    objective = _Objective(module, batches, dev, forward, 128)
    with tempfile.TemporaryDirectory() as run_dir:
        objective.t0 = time.perf_counter()
        train(objective, cfg.train, run_dir, info, tokens_per_step=tps, resume=False, checkpoint_extra={},
              label=name, show_progress=False)
    total_train_s = objective.curve[-1]["train_s"]
    for c in objective.curve:
        c["tokens"] = c["step"] * tps
    return {
        "arm": name, "overrides": overrides, "params": params, "steps": steps, "batch_size": bs,
        "tokens": steps * tps, "train_seconds": total_train_s, "tokens_per_s": steps * tps / total_train_s,
        "curve": objective.curve,
    }


def speed(data, recipe: str, jobs: list[tuple[str, list[str], str]], arms: list[str], steps: int, rounds: int) -> dict:
    """Training tokens/s of every (rung, arm) measured in one process, round-robin.

    Each module is built as :func:`run_one` builds it and trained on the same real masked
    batches; every round times ``steps`` optimizer steps (forward, backward, clip, AdamW, under
    the rung's precision) of each configuration in turn, so machine noise hits all of them
    alike. ``arms`` may include ``hf-bert`` (the HF peer, fp32 as HF trains by default; timed
    with the ``base`` row only). Returns ``{"rung/arm": {"tokens_per_s": median over rounds,
    "rounds": [...]}}``.
    """
    from lvsearch.arch import resolve_arch
    from lvsearch.config import RetrainConfig, load_config
    from lvsearch.space import SearchSpace
    from lvsearch.train.distributed import DistInfo
    from lvsearch.train.loop import autocast_context, make_optimizer
    from lvsearch.train.objectives import MaskedBatches
    from lvsearch.train.retrain import build_module

    info = DistInfo(0, 1, 0, torch.device("cpu"))
    setups = {}
    for name, sets, _ in jobs:
        for arm in arms:
            cfg, _ = load_config(RetrainConfig, recipe, ["objective=mlm", *OLD, *sets])
            space = SearchSpace.load(cfg.space).with_num_slots(cfg.num_slots or 12)
            dims = cfg.model_settings().dims(data.vocab_size, data.special_ids.pad, cfg.train.seq_len)
            if arm == "hf-bert":
                if name != "base":
                    continue  # the peer has one configuration (HF defaults)
                module = hf_mlm_peer(cfg, data, space.num_slots // 2)[0].train()
            else:
                module = build_module(cfg, resolve_arch(arm, space), dims).train()
            setups[f"{name}/{arm}"] = (cfg, module, make_optimizer(module, cfg.train),
                                       MaskedBatches(data, cfg.train, cfg.masking, info))
    times: dict[str, list[float]] = {k: [] for k in setups}
    for r in range(rounds + 1):  # round 0 warms up
        for key, (cfg, module, opt, batches) in setups.items():
            t = time.perf_counter()
            for step in range(steps):
                (micro,), labels = batches(r * steps + step)
                with autocast_context(cfg.train, info.device):
                    out = module(input_ids=micro["input_ids"], labels=micro["labels"])
                (out["loss_sum"].float() / float((labels != -100).sum())).backward()
                torch.nn.utils.clip_grad_norm_(module.parameters(), cfg.train.grad_clip)
                opt.step()
                opt.zero_grad(set_to_none=True)
            if r:
                times[key].append(steps * cfg.train.batch_size * cfg.train.seq_len / (time.perf_counter() - t))
    return {k: {"tokens_per_s": sorted(v)[len(v) // 2], "rounds": v} for k, v in times.items()}


def summarise(rec: dict, report_tokens: list[float], thresholds: list[float], floors: dict) -> dict:
    rec["accuracy_at"] = {f"{t:g}": _interp(rec["curve"], "tokens", "accuracy", t) for t in report_tokens}
    rec["seconds_to"] = {f"{t:g}": _first_reach(rec["curve"], t) for t in thresholds}
    rec["floors"] = {f"{t:g}": floors.get((rec["batch_size"], round(t / (rec["batch_size"] * 64))))
                     for t in report_tokens}
    rec["beats_floor"] = {k: (v is not None and rec["accuracy_at"][k] is not None
                              and rec["accuracy_at"][k] > v["neighbour-count"])
                          for k, v in rec["floors"].items()}
    return rec


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", help="prepared dataset (default: prepare ../shared/data/corpora with vocab 4096)")
    ap.add_argument("--recipe", default="retrain-quickstart")
    ap.add_argument("--arms", default="bert,random:1")
    ap.add_argument("--only", help="comma-separated ablation names (default: the whole ladder)")
    ap.add_argument("--extra", action="append", default=[],
                    help="NAME=set1;set2: an extra run on top of the --base rung (repeatable)")
    ap.add_argument("--base", help="the rung extras build on (default: the last selected rung); "
                                   "with --extra and no --only, only the extras run")
    ap.add_argument("--tokens", type=float, default=2.05e6, help="training tokens per run")
    ap.add_argument("--eval-every", type=int, default=25)
    ap.add_argument("--report-tokens", default="6e5,2e6")
    ap.add_argument("--thresholds", default="0.15")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0 = torch's default)")
    ap.add_argument("--peer", action="store_true", help="also train HF BertForMaskedLM")
    ap.add_argument("--peer-only", action="store_true", help="train only the HF peer")
    ap.add_argument("--peer-lrs", default="1e-3,3e-3,6e-3")
    ap.add_argument("--speed", action="store_true",
                    help="only measure tokens/s of every selected rung and arm, round-robin in one process")
    ap.add_argument("--speed-steps", type=int, default=5)
    ap.add_argument("--speed-rounds", type=int, default=5)
    ap.add_argument("--out", default=str(RESULTS / "learning_efficiency.json"))
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    from lvsearch.data.loader import fixed_dev_set
    from lvsearch.data.shards import PreparedData
    from lvsearch.eval.floors import floors_for_run
    from lvsearch.io import atomic_write_json

    report_tokens = [float(x) for x in args.report_tokens.split(",")]
    thresholds = [float(x) for x in args.thresholds.split(",")]
    out = Path(args.out)
    with tempfile.TemporaryDirectory() as tmp:
        data = PreparedData.open(prepared_data(args.data, tmp, vocab_size=4096))
        dev = fixed_dev_set(data, num_sequences=512, seq_len=64, seed=1234)
        rungs = ladder(args.only.split(",") if args.only else None)
        if args.extra:
            base = next(r for r in ladder(None) if r[0] == args.base) if args.base else rungs[-1]
            if not args.only:
                rungs = []
            for extra in args.extra:
                name, sets = extra.split("=", 1)
                rungs.append((name, base[1] + sets.split(";"), f"{base[0]} + {sets}"))
        if args.speed:
            result = json.loads(out.read_text()) if out.is_file() else {"benchmark": "learning_efficiency", "runs": {}}
            result["speed"] = {"machine": machine(), "steps_per_round": args.speed_steps, "rounds": args.speed_rounds,
                               "runs": speed(data, args.recipe, rungs, args.arms.split(","), args.speed_steps,
                                             args.speed_rounds)}
            atomic_write_json(out, result)
            for k, v in result["speed"]["runs"].items():
                print(f"{k:40s} {v['tokens_per_s']:8.0f} tok/s")
            return
        jobs = []
        if not args.peer_only:
            jobs += [(n, sets, what, arm, None) for n, sets, what in rungs for arm in args.arms.split(",")]
        if args.peer or args.peer_only:
            jobs += [("peer", [], "HF BertForMaskedLM", "hf", float(lr)) for lr in args.peer_lrs.split(",")]
        floors: dict = {}
        for name, sets, what, arm, lr in jobs:
            t = time.perf_counter()
            rec = run_one(data, dev, args.recipe, arm, sets, args.tokens, args.eval_every, lr)
            for tok in report_tokens:
                key = (rec["batch_size"], round(tok / (rec["batch_size"] * 64)))
                if key not in floors:
                    fl = floors_for_run(data, dev, batch_size=key[0], seq_len=64, seed=0, steps=key[1])
                    floors[key] = {k: v["accuracy"] for k, v in fl.items()}
            rec = summarise(rec, report_tokens, thresholds, floors)
            rec["ablation"], rec["what"] = name, what
            result = json.loads(out.read_text()) if out.is_file() else {"benchmark": "learning_efficiency", "runs": {}}
            result["machine"] = machine()
            result["dev"] = {"sequences": 512, "seq_len": 64, "seed": 1234, "masking": "15% token, 80/10/10",
                             "targets": int((dev.labels != -100).sum())}
            result["recipe"] = args.recipe
            result["runs"][f"{name}/{rec['arm']}"] = rec
            atomic_write_json(out, result)
            acc = rec["accuracy_at"]
            print(f"{name:12s} {rec['arm']:18s} {rec['tokens_per_s']:8.0f} tok/s  acc@ "
                  + " ".join(f"{k}={v:.4f}" if v is not None else f"{k}=—" for k, v in acc.items())
                  + "  floor " + " ".join(f"{k}={v['neighbour-count']:.4f}" for k, v in rec["floors"].items() if v)
                  + f"  t15={rec['seconds_to']} ({time.perf_counter() - t:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
