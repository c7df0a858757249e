"""``lvsearch faster``: the command line of :func:`lvsearch.faster.job.run_faster`."""

from __future__ import annotations

import argparse

DESCRIPTION = (
    "From a supernet and its latency table to a retrained, faster model with a side-by-side report, in one "
    "command: NSGA-II on (supernet fitness, predicted latency) with random search from the same first population "
    "as the control (lvsearch evolve --strategy nsga2 --nsga2-cost latency --compare-random --racing off), each "
    "arm's pick (its fastest candidate whose fitness reaches the first population's median, or "
    "--pick-fitness-at), both picks and a reference retrained from scratch with one recipe and seed, evaluated "
    "(MLM dev accuracy against its floor, BLiMP with --blimp), timed end to end on this device at the table's "
    "settings, and written to OUT/report.md and OUT/summary.json. Every stage is resumable: re-run the same "
    "command to continue. One seed shows the latency gap; an accuracy difference needs several --seed values "
    "(docs/results.md, \"The latency test\")."
)

EPILOG = """example:
  lvsearch latency measure --supernet runs/sn --out runs/latency-cpu.json --threads 1
  lvsearch faster --supernet runs/sn --table runs/latency-cpu.json --data data/corpus --out runs/faster

OUT holds search/ (the searches and their pick.json), retrain/NAME (nsga2, random, reference),
eval/NAME.json, latency.json, summary.json and report.md."""


def register(sub: argparse._SubParsersAction) -> None:
    from lvsearch.argtypes import count, finite_float, float_in, positive_count

    p = sub.add_parser("faster", help="search, retrain and time a faster model against random search's, one command",
                       description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--supernet", required=True, metavar="RUN", help="train-supernet run folder")
    p.add_argument("--table", required=True, metavar="TABLE.json",
                   help="its latency table ('lvsearch latency measure'): the device, batch, length, dtype and threads "
                        "of every timing")
    p.add_argument("--data", required=True, metavar="DIR", help="prepared data folder of the supernet's tokenizer")
    p.add_argument("--out", required=True, metavar="DIR", help="output folder (new, or this command's to resume)")
    p.add_argument("--population", type=positive_count, default=20, help="NSGA-II population P (default: 20)")
    p.add_argument("--iterations", type=positive_count, default=10,
                   help="NSGA-II generations T; P × T candidates per arm (default: 10)")
    p.add_argument("--dev-sequences", type=positive_count, default=256,
                   help="dev sequences every candidate is scored on (default: 256)")
    p.add_argument("--sparse-init", type=float_in(0.0, 1.0), default=0.5, metavar="SHARE",
                   help="share of the shared first population drawn with sparse ELC mixing, so the front reaches the "
                        "fast region (default: 0.5)")
    p.add_argument("--pick-fitness-at", type=finite_float, default=None, metavar="FITNESS",
                   help="reference fitness of both picks (default: the median fitness of the first population)")
    p.add_argument("--seed", type=count, default=0, help="search seed and pretraining seed of every model (default: 0)")
    p.add_argument("--config", default="retrain-quickstart", metavar="RECIPE",
                   help="retrain recipe of every model; its width must be the supernet's (default: retrain-quickstart)")
    p.add_argument("--steps", type=positive_count, default=None, help="retrain steps (default: the recipe's)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="overrides",
                   help="override a retrain recipe value (repeatable)")
    p.add_argument("--reference", default="bert", metavar="ARCH",
                   help="architecture retrained beside the picks: a name (bert, sandwich, random:SEED) or a JSON file; "
                        "'none' for none (default: bert)")
    p.add_argument("--eval-dev-sequences", type=positive_count, default=512,
                   help="MLM dev sequences of the evaluation (default: 512)")
    p.add_argument("--blimp", default=None, metavar="DIR", help="BLiMP folder of *.jsonl files (default: no BLiMP)")
    p.add_argument("--blimp-limit", type=positive_count, default=100, help="BLiMP pairs per paradigm (default: 100)")
    p.add_argument("--rounds", type=positive_count, default=3,
                   help="interleaved timing rounds over all models, median kept (default: 3)")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                   help="device of the search, training and evaluation; timing runs on the table's (default: auto)")
    p.add_argument("--latency-any-device", action="store_true",
                   help="time the models on this machine even when the table was measured on another GPU or CPU "
                        "model (the search still optimises the table's predictions)")
    p.set_defaults(func=_faster)


def _faster(args: argparse.Namespace) -> int:
    from pathlib import Path

    from lvsearch import ui
    from lvsearch.faster.job import FasterSettings, latency_words, run_faster

    def absolute(p: str | None) -> str | None:
        return None if p is None else str(Path(p).expanduser().resolve())

    reference = None if args.reference.lower() == "none" else args.reference
    if reference is not None and Path(reference).expanduser().is_file():
        reference = absolute(reference)
    settings = FasterSettings(
        supernet=absolute(args.supernet), table=absolute(args.table), data=absolute(args.data),
        population=args.population, iterations=args.iterations, dev_sequences=args.dev_sequences,
        sparse_init=args.sparse_init, pick_fitness_at=args.pick_fitness_at, seed=args.seed,
        retrain_recipe=args.config, steps=args.steps, overrides=list(args.overrides), reference=reference,
        eval_dev_sequences=args.eval_dev_sequences, blimp=absolute(args.blimp), blimp_limit=args.blimp_limit,
        rounds=args.rounds, device=args.device, latency_any_device=args.latency_any_device)
    summary = run_faster(args.out, settings)
    v = summary["nsga2_vs_random"]
    ui.console.print(f"NSGA-II's pick against random search's: "
                     f"{latency_words(v['latency_reduction'], v.get('latency_rounds_overlap'))} (measured), "
                     f"{v['accuracy_difference_pp']:+.2f} pp MLM dev accuracy (one seed)",
                     highlight=False, soft_wrap=True)
    report = Path(args.out).expanduser().resolve() / "report.md"
    ui.console.print(f"faster done: {report}", highlight=False)
    print(report)
    return 0
