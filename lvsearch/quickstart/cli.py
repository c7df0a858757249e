"""``lvsearch quickstart``: the command line of :func:`lvsearch.quickstart.job.run_quickstart`."""

from __future__ import annotations

import argparse

from lvsearch import tracking

DESCRIPTION = (
    "The whole pipeline on real text in one command: prepare the corpus (WordPiece, 4096 pieces), "
    "train the quickstart supernet, search it with evolution and with random search (same number of "
    "evaluations, lvsearch evolve's fitness and racing), retrain three arms from scratch identically "
    "for 1800 steps at once (EA pick, random-search best, bert), evaluate them (MLM dev accuracy, BLiMP, "
    "fine-tuning) and write OUT/report.md with figures. The report opens with each arm against its three "
    "floors (MLM neighbour-count, BLiMP n-gram, fine-tuning bag-of-words), then EA vs random search and vs "
    "bert with paired-bootstrap 95% intervals (a win only when the interval excludes zero), the search's "
    "fitness standard error and ties, and what one seed can and cannot show. Every stage is resumable: "
    "re-run the same command to continue. About 20 minutes on an otherwise idle 2-core machine with the "
    "default budget."
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("quickstart", help="run the whole pipeline end to end and write a report",
                       description=DESCRIPTION)
    p.add_argument("--data", default=None, metavar="SOURCE",
                   help="corpus: a BabyLM-style folder, text files or a saved HF dataset, as 'data prepare' "
                        "accepts (default: the embedded builtin:python-docs corpus, nothing to download)")
    p.add_argument("--out", default="quickstart-out", metavar="DIR", help="output folder (default: quickstart-out)")
    p.add_argument("--minutes", type=float, default=20.0,
                   help="wall-time budget; scales every stage, sized for this machine's speed (--speed) (default: 20)")
    p.add_argument("--speed", default="auto", metavar="auto|SLOWDOWN",
                   help="how much slower this machine is than the one the plan was calibrated on: auto (default) "
                        "times a few training steps first (a few seconds) and sizes every stage so that --minutes "
                        "holds; a number fixes it (1: the calibrated plan, the same steps on every machine, and "
                        "the same results on machines of one kind; an fp32 CPU takes about 1.5x as long as the "
                        "bf16 one). A resumed run keeps the plan it started with. The console and the report say "
                        "how the plan was sized, and why not where the calibration does not apply")
    p.add_argument("--task", action="append", default=[], metavar="DIR_OR_HF",
                   help="fine-tuning task as for 'lvsearch evaluate --task' (repeatable; default: none)")
    p.add_argument("--objective", choices=("mlm", "electra"), default="mlm",
                   help="retrain objective of every arm: mlm (default; MLM accuracy and BLiMP compare across "
                        "arms) or electra (the paper's replaced-token detection)")
    p.add_argument("--seeds", type=int, default=1,
                   help="pretraining seeds per arm (default: 1; 3 measures the seed spread at ~2.1× the time)")
    p.add_argument("--finalists", type=int, default=0, metavar="K",
                   help="prune the EA's top K by successive halving on retraining (retrain --finalists) and take "
                        "its pick as the EA arm; adds ~10 min at the default budget (default: 0, no finalist stage)")
    p.add_argument("--space", default="lvbert-elc", choices=("lvbert-elc", "lvbert"),
                   help="search-space family: lvbert-elc (layer order and ELC connectivity, default) or lvbert (order only)")
    p.add_argument("--skip-bad-files", action="store_true",
                   help="skip binary / non-UTF-8 files in --data with a warning (default: fail, listing them)")
    blimp = p.add_mutually_exclusive_group()
    blimp.add_argument("--blimp", default=None, metavar="DIR",
                       help="BLiMP folder of *.jsonl files (default: ../shared/data/blimp next to the checkout, when present)")
    blimp.add_argument("--no-blimp", action="store_true", help="skip BLiMP")
    p.add_argument("--supernet-config", default="quickstart", metavar="RECIPE",
                   help="supernet recipe (default: quickstart); step counts come from --minutes")
    p.add_argument("--retrain-config", default="retrain-quickstart", metavar="RECIPE",
                   help="retrain recipe of every arm (default: retrain-quickstart); steps come from --minutes")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto", help="device of every stage (default: auto)")
    tracking.add_argument(p)
    p.set_defaults(func=_quickstart)


def _quickstart(args: argparse.Namespace) -> int:
    from lvsearch import ui
    from lvsearch.eval.job import default_blimp_dir
    from lvsearch.quickstart.context import DEFAULT_DATA, QuickstartSettings, check_settings
    from lvsearch.quickstart.job import run_quickstart
    from lvsearch.quickstart.sentences import console_headline

    blimp = None
    if not args.no_blimp:
        if args.blimp:
            blimp = args.blimp
        elif default_blimp_dir().is_dir():
            blimp = str(default_blimp_dir())
    settings = QuickstartSettings(
        data=args.data or DEFAULT_DATA, minutes=args.minutes, seeds=args.seeds, objective=args.objective,
        space=args.space, tasks=list(args.task), blimp=blimp, supernet_recipe=args.supernet_config,
        retrain_recipe=args.retrain_config, skip_bad_files=args.skip_bad_files, finalists=args.finalists,
    )
    check_settings(settings)  # bad arguments are reported before the BLiMP note
    if blimp is None and not args.no_blimp:
        ui.warn(f"BLiMP skipped: no --blimp given and {default_blimp_dir()} is absent; pass --blimp DIR "
                f"(a folder of BLiMP *.jsonl files) to score it, or --no-blimp to silence this")
    ctx = run_quickstart(args.out, settings, device=args.device, speed=args.speed)
    report = ctx.out / "report.md"
    if ctx.finished_before:
        ui.console.print(f"this quickstart had already finished; nothing was rewritten. Its report: {report}",
                         highlight=False, soft_wrap=True)
    for line in console_headline(report.read_text(encoding="utf-8")):
        ui.console.print(line, highlight=False, markup=False, soft_wrap=True)
    ui.console.print(f"quickstart done: {report}", highlight=False)
    print(report)
    return 0
