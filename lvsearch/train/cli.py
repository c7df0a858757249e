"""``lvsearch train-supernet`` and ``lvsearch retrain``."""

from __future__ import annotations

import argparse

from lvsearch import tracking

EPILOG = """\
examples:
  lvsearch train-supernet --config recipes/quickstart.yaml --data data/corpus --out runs/sn
  lvsearch train-supernet --config quickstart --data data/corpus --out runs/sn --set train.steps=50
  lvsearch train-supernet --data data/corpus --out runs/sn --resume
  torchrun --nproc_per_node 2 -m lvsearch train-supernet --config quickstart --data data/corpus --out runs/sn
  lvsearch train-supernet --few-shot-from runs/sn --slot 1 --op SA --steps 300 --data data/corpus --out runs/part-SA

--few-shot-from trains one few-shot sub-supernet (part) of runs/sn: runs/sn's recorded recipe with
train.steps = --steps (warm-up a tenth), init_from = runs/sn and the op fixed at the slot
(sampling.fix_slot/fix_op). One run per op of the space makes a split for
'lvsearch evolve --supernet runs/sn --few-shot PART...'.

The recipe's sections (space, num_slots, model, train, masking, sampling, eval) are documented
in recipes/lvbert-small.yaml and docs/architecture.md.
"""


def register(sub: argparse._SubParsersAction) -> None:
    register_supernet(sub)
    register_retrain(sub)


def register_supernet(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "train-supernet",
        help="train a weight-sharing supernet by single-path sampling",
        description="Train a weight-sharing supernet over a search space: each step trains one architecture "
        "sampled uniformly (LV-BERT), with strict fairness (FairNAS) or by the sandwich rule (BigNAS), with MLM "
        "on the prepared data. Reports the dev MLM loss and accuracy of a reference panel of architectures, the "
        "unigram and neighbour-count floors on the same dev targets with a verdict per panel member on whether "
        "it beats them (summary.json), and tokens/s. Runs on one process or under torchrun (DDP: NCCL on GPU, "
        "gloo on CPU).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--config", metavar="RECIPE", help="recipe YAML path or bundled name (quickstart, lvbert-small)")
    p.add_argument("--data", required=True, metavar="DIR", help="folder written by 'lvsearch data prepare'")
    p.add_argument("--out", required=True, metavar="RUN", help="run folder (new, or an existing run with --resume)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help="override a recipe value, e.g. train.lr=3e-4 (repeatable)")
    p.add_argument("--few-shot-from", default=None, metavar="RUN",
                   help="train a few-shot sub-supernet of the supernet run RUN instead of --config: RUN's recipe, "
                        "warm-started from its weights, with the op --op fixed at slot --slot (see below)")
    p.add_argument("--slot", type=int, default=None, metavar="N", help="--few-shot-from: the split's slot, 1-based (default 1)")
    p.add_argument("--op", default=None, metavar="OP", help="--few-shot-from: the op this part runs at --slot (e.g. SA)")
    p.add_argument("--steps", type=int, default=None, metavar="S",
                   help="--few-shot-from: training steps of the part (warm-up S // 10); required")
    p.add_argument("--resume", action="store_true", help="continue the run in --out from its latest checkpoint")
    p.add_argument("--overwrite", action="store_true", help="replace the run already in --out")
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"], help="default: cuda when available")
    tracking.add_argument(p)
    p.set_defaults(func=_train_supernet)


def _few_shot_recipe(args: argparse.Namespace) -> dict | None:
    """The recipe of ``--few-shot-from``, or None without it."""
    from lvsearch.errors import LvsearchError

    part = [f for f, v in (("--slot", args.slot), ("--op", args.op), ("--steps", args.steps)) if v is not None]
    if args.few_shot_from is None:
        if part:
            raise LvsearchError(f"{', '.join(part)} set a few-shot part, but --few-shot-from is not given",
                                fix="add --few-shot-from ONE_SHOT_RUN, or drop " + ", ".join(part))
        return None
    from lvsearch.train.supernet import sub_supernet_recipe

    if args.config:
        raise LvsearchError("--few-shot-from takes its recipe from the one-shot run, and --config gives another one",
                            fix="drop --config (use --set to change a value of the one-shot's recipe)")
    if args.op is None or args.steps is None:
        raise LvsearchError("--few-shot-from needs --op (the op of this part) and --steps (its training steps)",
                            fix=f"e.g. --few-shot-from {args.few_shot_from} --slot 1 --op SA --steps 300")
    if args.steps < 1:
        raise LvsearchError(f"--steps must be ≥ 1, got {args.steps}", fix="e.g. --steps 300")
    return sub_supernet_recipe(args.few_shot_from, steps=args.steps, slot=1 if args.slot is None else args.slot,
                               op=args.op)


def _train_supernet(args: argparse.Namespace) -> int:
    from lvsearch import ui
    from lvsearch.errors import LvsearchError
    from lvsearch.train.supernet import train_supernet

    recipe = _few_shot_recipe(args)
    if recipe is None:
        recipe = args.config
    if not recipe and not args.resume:
        raise LvsearchError("--config is required for a new run",
                            fix="e.g. --config recipes/quickstart.yaml (or --few-shot-from RUN for a few-shot part)")
    summary = train_supernet(
        recipe, args.data, args.out, overrides=args.overrides, resume=args.resume, overwrite=args.overwrite, device=args.device
    )
    final = summary.get("final_eval") or {}
    if final:
        ui.console.print(f"unigram baseline accuracy {final['unigram_accuracy']:.3f} (most frequent token of the whole train "
                         "split; the panel floors above count only the training tokens seen)")
        for name, r in final["panel"].items():
            ui.console.print(f"  {name:<14} dev MLM loss {r['loss']:.3f}  accuracy {r['accuracy']:.3f}")
    if summary.get("tokens_per_s"):
        ui.console.print(f"{summary['tokens']:,} tokens, {summary['tokens_per_s']:,.0f} tokens/s")
    return 0


RETRAIN_EPILOG = """\
examples:
  lvsearch retrain --arch runs/search/best.json --config retrain-quickstart --data data/corpus --out runs/best
  lvsearch retrain --arch bert --config retrain-quickstart --data data/corpus --out runs/bert
  lvsearch retrain --arch lvbert-paper --config retrain-small --data data/corpus --out runs/lvbert --set size=medium
  lvsearch retrain --data data/corpus --out runs/best --resume

--arch takes an architecture JSON (e.g. best.json from 'lvsearch evolve') or a reference name:
bert, sandwich, lvbert-paper (24 slots), random:SEED. The result is a model directory in
RUN/model for 'lvsearch evaluate', and RUN/curve.jsonl (dev metrics against tokens seen) for
'lvsearch scaling fit'. summary.json holds the final dev metrics next to the unigram and
neighbour-count floors counted on the tokens the run saw, and the precision actually used.

learning-efficiency switches (--set; docs/recipes.md has their measured effects):
  model.dropout=0.0  model.position=absolute|relative  model.relative_init=local|zero
  model.init=bert|scaled  masking.probability=0.4  train.schedule=linear|wsd|cosine
  train.decay_fraction=0.2  train.precision=auto|fp32|bf16
retrain-quickstart sets dropout 0, relative positions and 40% masking (use
--set masking.probability=0.15 with --objective electra).

finalist pruning (successive halving over the K best architectures of a search):
  lvsearch retrain --arch runs/search/topk.json --finalists 4 --budget 600 \\
      --config retrain-quickstart --data data/corpus --out runs/finalists
  lvsearch retrain --arch bert,sandwich,random:1,random:2 --finalists 4 --budget 600 \\
      --pruning extrapolate --compare-full --config retrain-quickstart --data data/corpus --out runs/f

All K train budget/eta^R steps with the full budget's learning-rate schedule; the best 1/eta by
current dev loss (default) continue from their checkpoints, eta times longer, until one is
trained to the budget. --pruning extrapolate ranks by M4 fitted to each dev-loss curve instead
(it needs 4+ evaluations after the warm-up per rung) and also keeps any finalist whose bootstrap
interval reaches the cut-off. With --set train.schedule=wsd every rung must lie in the stable
phase, and extrapolate also measures each finalist's cool-down drop on a throw-away branch.
OUT/finalists.json logs every decision, OUT/best.json names the pick's model directory,
OUT/finalists/NAME/ is each finalist's retrain run. Re-run the same command to continue.
"""


def register_retrain(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "retrain",
        help="train an architecture from scratch (ELECTRA replaced-token detection or MLM)",
        description="Train one architecture from scratch at size small/medium/base (LV-BERT Table 5) "
        "with ELECTRA replaced-token detection (default) or MLM, and write a model directory. Reports the dev "
        "MLM loss and accuracy curve, the unigram and neighbour-count floors with a verdict on whether the model "
        "beats them (summary.json); with --finalists, each halving round's predictions with their bootstrap "
        "intervals, who was kept or cut and why, and the pick (finalists.json).",
        epilog=RETRAIN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--arch", metavar="JSON_OR_NAME", help="architecture JSON or reference name (bert, sandwich, lvbert-paper, random:SEED)")
    p.add_argument("--config", metavar="RECIPE", help="recipe YAML path or bundled name (retrain-quickstart, retrain-small)")
    p.add_argument("--data", required=True, metavar="DIR", help="folder written by 'lvsearch data prepare'")
    p.add_argument("--out", required=True, metavar="RUN", help="run folder")
    p.add_argument("--objective", choices=["electra", "mlm"], help="override the recipe's objective")
    p.add_argument("--size", choices=["small", "medium", "base"], help="override the recipe's model size")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help="override a recipe value (repeatable)")
    p.add_argument("--resume", action="store_true", help="continue the run in --out from its latest checkpoint")
    p.add_argument("--overwrite", action="store_true", help="replace the run already in --out")
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"], help="default: cuda when available")
    from lvsearch.scaling.cli import add_finalist_arguments

    add_finalist_arguments(p)
    tracking.add_argument(p)
    p.set_defaults(func=_retrain)


def _retrain(args: argparse.Namespace) -> int:
    from lvsearch import ui
    from lvsearch.train.retrain import retrain

    overrides = list(args.overrides)
    if args.objective:
        overrides.append(f"objective={args.objective}")
    if args.size:
        overrides.append(f"size={args.size}")
    if args.finalists is not None:
        from lvsearch.scaling.cli import run_finalists_args

        return run_finalists_args(args, overrides)
    given = [f"--{k.replace('_', '-')}" for k in ("budget", "compare_full") if getattr(args, k)]
    given += [f"--{k.replace('_', '-')}" for k, d in (("eta", 2), ("pruning", "current-loss"), ("n_boot", 50),
                                                      ("executor", "inline"), ("max_parallel", None),
                                                      ("slurm_partition", None), ("slurm_time", 24 * 60),
                                                      ("slurm_gpus_per_job", 0), ("slurm_cpus_per_job", None),
                                                      ("slurm_extra", [])) if getattr(args, k) != d]
    if given:
        from lvsearch.errors import LvsearchError

        raise LvsearchError(f"{', '.join(given)} only apply to finalist pruning", fix="add --finalists K, or drop them")
    summary = retrain(
        args.arch, args.config, args.data, args.out, overrides=overrides, resume=args.resume,
        overwrite=args.overwrite, device=args.device,
    )
    final = summary.get("final_eval") or {}
    for key, r in final.items():
        if key != "curve" and isinstance(r, dict):
            ui.console.print(f"  {key}: " + ", ".join(f"{k} {v:.4f}" for k, v in r.items() if isinstance(v, float)))
    return 0
