"""``lvsearch evolve``, ``lvsearch arch show`` and ``lvsearch rank-check``."""

from __future__ import annotations

import argparse

from lvsearch import tracking

EVOLVE_EPILOG = """\
examples:
  lvsearch evolve --supernet runs/sn --out runs/search
  lvsearch evolve --supernet runs/sn --out runs/search --population 20 --iterations 5 --compare-random
  lvsearch evolve --supernet runs/sn --out runs/search --resume
  lvsearch evolve --supernet runs/sn --out runs/nsga --strategy nsga2 --max-params 5000000
  lvsearch evolve --supernet runs/sn --out runs/fast --strategy nsga2 --nsga2-cost latency \
      --latency-table runs/latency-cpu.json --sparse-init 0.5 --compare-random
  lvsearch evolve --supernet runs/sn --few-shot runs/part-SA runs/part-FF runs/part-DC --out runs/fs
  torchrun --nproc_per_node 2 -m lvsearch evolve --supernet runs/sn --out runs/search

Defaults are LV-BERT's (Yu et al. 2021): population 50, 20 iterations, 25 crossovers +
25 mutations, mutation probability 0.1, top-k 10. --crossover + --mutation must equal
--population (given one, the other is derived; given neither, half and half).

a pick from a front (NSGA-II, or random search with a latency table): besides pareto.json,
OUT/pick.json is one architecture, the cheapest candidate (lowest NSGA-II cost; predicted latency
for random search) whose fitness is at least a reference: --pick-fitness-at, or by default the
median fitness of the first population. The --compare-random control (OUT/random/pick.json)
uses the same reference, so the two picks are paired; retrain it with
'lvsearch retrain --arch OUT/pick.json'.

few-shot sub-supernets (--few-shot): one train-supernet run per op of the space, each
warm-started from --supernet with the op fixed at one slot, e.g. for op SA at slot 1:
  lvsearch train-supernet --few-shot-from runs/sn --slot 1 --op SA --steps 300 --data D --out runs/part-SA
(runs/sn's recipe with --set init_from=runs/sn --set sampling.fix_slot=1 --set sampling.fix_op=SA
--set train.steps=300; docs/architecture.md, "Few-shot sub-supernets").
"""


def _int(text: str) -> int:
    """Integers also as 5e6 / 5_000_000 (finite, below 2⁶³: :func:`lvsearch.argtypes.count`)."""
    from lvsearch.argtypes import count

    return count(text)


def _rungs(text: str) -> tuple[int, ...]:
    """``128,512`` -> (128, 512); ``off`` -> () (no racing)."""
    if text.strip().lower() in ("off", "none", ""):
        return ()
    try:
        return tuple(int(t) for t in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of sequence counts: {text!r} (e.g. 128 or 128,512, or off)") from None


def _fmt_rungs(rungs) -> str:
    return ",".join(map(str, rungs)) if rungs else "off"


def _dev_count(text: str) -> int | str:
    """A positive number of dev sequences, or ``all``."""
    if text.strip().lower() == "all":
        return "all"
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of sequences: {text!r} (e.g. 512, or all)") from None


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``evolve``, ``arch`` and ``rank-check`` to the command line."""
    _register_evolve(sub)
    _register_arch(sub)
    _register_rank_check(sub)


def _register_evolve(sub: argparse._SubParsersAction) -> None:
    from lvsearch.argtypes import finite_float, float_in, positive_float
    from lvsearch.search.fitness import METRICS
    from lvsearch.search.job import DEFAULT_DEV_SEQUENCES, DEFAULT_FITNESS, DEFAULT_RACING
    from lvsearch.search.strategies import STRATEGIES

    p = sub.add_parser(
        "evolve",
        help="evolutionary / random / NSGA-II search over a trained supernet",
        description="Search layer order (and ELC connectivity) with weights inherited from a trained supernet: "
        "LV-BERT's evolutionary algorithm on DEAP (default), aging (regularized) evolution, random search, or "
        "NSGA-II on fitness vs size. Fitness = minus the MLM loss (default) or MLM accuracy on a fixed masked dev "
        "set, raced over dev targets. Reports the top-k with accuracy and loss, and the fitness noise among the "
        "top-k (standard error of one score, paired standard error, exact ties) with a verdict on whether the "
        "fitness resolves them (noise.json); --landscape adds the space's headroom. Resumable; runs under torchrun.",
        epilog=EVOLVE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--supernet", required=True, metavar="RUN", help="folder of 'lvsearch train-supernet'")
    p.add_argument("--out", required=True, metavar="DIR", help="search folder (new, or with --resume/--overwrite)")
    p.add_argument("--population", type=int, default=None, help="population size P (default 50)")
    p.add_argument("--iterations", type=int, default=None, help="iterations T (default 20)")
    p.add_argument("--crossover", type=int, default=None, help="children by crossover per iteration (default P/2)")
    p.add_argument("--mutation", type=int, default=None, help="children by mutation per iteration (default P - crossover)")
    p.add_argument("--mutation-prob", type=float_in(0, 1), default=None,
                   help="per-slot op re-draw probability p of the mutation (default 0.1, LV-BERT's)")
    p.add_argument("--input-mutation-prob", type=float_in(0, 1), default=None,
                   help="per-input flip probability of the mutation in ELC spaces (default 0: a child that changes no "
                        "op would be a near-clone of its parent; connectivity is searched by the first population "
                        "and crossover)")
    p.add_argument("--mutation-kind", choices=["redraw", "one-op"], default=None,
                   help="redraw: each op re-drawn with --mutation-prob (LV-BERT); one-op: exactly one slot gets "
                        "another op (a neighbourhood move) (default: redraw)")
    p.add_argument("--budget", type=_int, default=None, metavar="PASSES",
                   help="also stop once this many dev-sequence passes are spent (a candidate raced to 64 "
                        "sequences costs 64); strategies given one budget compare at equal compute "
                        "(default: no budget, --iterations decides)")
    p.add_argument("--topk", type=int, default=None, help="size of the top-k set (default min(10, P))")
    p.add_argument("--strategy", choices=list(STRATEGIES), default=None,
                   help="default: evolution (LV-BERT); aging = regularized evolution (Real et al. 2019)")
    p.add_argument("--tournament", type=int, default=None, metavar="S", help="aging: tournament size (default P/4)")
    p.add_argument("--cycle", type=int, default=None, metavar="N", help="aging: children evaluated together (default P/4)")
    p.add_argument("--fitness", choices=list(METRICS), default=None,
                   help="fitness: dev MLM accuracy (LV-BERT) or minus the mean dev MLM loss (continuous: no ties); "
                        f"default: the recorded one on --resume, else {DEFAULT_FITNESS}")
    p.add_argument("--racing", type=_rungs, default=None, metavar="N[,N...]",
                   help="successive halving over dev targets: score every candidate of a batch on the first N "
                        "(random) dev sequences, keep the best 1/eta, ..., the survivors on all; 'off' scores "
                        f"everyone on all (default: the recorded one on --resume, else {_fmt_rungs(DEFAULT_RACING)}, "
                        "without the rungs a smaller dev set cannot hold; off for --strategy nsga2)")
    p.add_argument("--racing-eta", type=finite_float, default=None, metavar="ETA", help="racing keep factor (default 4)")
    p.add_argument("--crossover-kind", choices=["uniform", "one-point", "two-point"], default=None, help="default: uniform")
    p.add_argument("--nsga2-cost", choices=["params", "flops", "latency"], default=None,
                   help="NSGA-II objective to minimise (default params; latency: predicted from --latency-table)")
    p.add_argument("--sparse-init", type=float_in(0, 1), default=None, metavar="SHARE",
                   help="share of the first population drawn from sparse ELC mixing (each optional input kept with a "
                        "probability drawn from [0, 0.2] per architecture; uniform draws keep half): with "
                        "--nsga2-cost latency or --max-latency the search then starts where fast architectures are "
                        "(default 0: all uniform; the --compare-random control shares the first population)")
    p.add_argument("--pick-fitness-at", type=finite_float, default=None, metavar="FITNESS",
                   help="NSGA-II and random search with a cost: pick.json is the cheapest candidate (latency, params "
                        "or FLOPs: the NSGA-II cost) whose fitness is at least this (default: the median fitness of "
                        "the first population, which the --compare-random control shares)")
    p.add_argument("--max-params", type=_int, default=None, metavar="N", help="reject architectures with more parameters")
    p.add_argument("--min-params", type=_int, default=None, metavar="N", help="reject architectures with fewer parameters (with --max-params: an equal-size band)")
    p.add_argument("--max-flops", type=_int, default=None, metavar="N", help="reject architectures with more FLOPs per token")
    p.add_argument("--latency-table", default=None, metavar="TABLE.json",
                   help="a table of 'lvsearch latency measure' for this supernet: every candidate's predicted latency is "
                        "recorded (best.json, topk.json), for --max-latency and --nsga2-cost latency")
    p.add_argument("--max-latency", type=positive_float, default=None, metavar="MS",
                   help="reject architectures predicted slower than MS milliseconds per batch (the table's batch and "
                        "sequence length; needs --latency-table)")
    p.add_argument("--latency-any-device", action="store_true",
                   help="accept a latency table measured on another device than the search runs on (e.g. search on "
                        "a GPU for a CPU target)")
    p.add_argument("--dev-sequences", type=_dev_count, default=None, metavar="N|all",
                   help="dev sequences of the fixed masked dev set, or 'all' (default: the recorded number on "
                        f"--resume, else {DEFAULT_DEV_SEQUENCES or 'the run eval.dev_sequences'})")
    p.add_argument("--batch-size", type=int, default=None, metavar="N", help="dev sequences per forward chunk (default: all)")
    p.add_argument("--seed", type=int, default=None, help="search seed (default 0)")
    p.add_argument("--cache-mb", type=float_in(0, 1 << 30), default=512.0, metavar="MB", help="prefix-cache budget (default 512)")
    p.add_argument("--data", default=None, metavar="DIR", help="prepared data (default: the folder recorded in the run)")
    p.add_argument("--space", default=None, metavar="NAME", help="expected search space, checked against the supernet's (a bare family name such as lvbert matches the supernet's lvbert@N)")
    p.add_argument("--compare-random", action="store_true", help="also run random search from the same first population with the same compute (the EA's dev-sequence passes), then compare the "
                   "two picks paired on the same dev targets (compare_random.json)")
    p.add_argument("--few-shot", nargs="+", default=None, metavar="RUN",
                   help="score every candidate (EA and --compare-random alike) with the few-shot sub-supernet of its "
                        "op at the split slot instead of --supernet: the runs are the sub-supernets of one split, one "
                        "per op (train-supernet --few-shot-from SUPERNET --slot N --op OP; see below), with "
                        "--supernet's space, dims and tokenizer; "
                        "--supernet still gives the dev set and the counts; --resume needs the same runs")
    p.add_argument("--second-stage", choices=["none", "rescore", "finetune"], default="none",
                   help="re-rank each search's top-k on dev sequences the search never saw before the pick "
                        "(best.json): 'rescore' with the inherited weights, 'finetune' after a short run from them; "
                        "the EA and --compare-random get the same compute; best.json becomes the pick, "
                        "second_stage.json holds every score and the compute; --resume needs the same switches "
                        "(default: none)")
    p.add_argument("--second-stage-k", type=int, default=None, metavar="K", help="candidates re-ranked (default: --topk)")
    p.add_argument("--second-stage-steps", type=int, default=100, metavar="S",
                   help="finetune: optimizer steps per candidate, the supernet's recipe shortened (default 100)")
    p.add_argument("--second-stage-dev", type=int, default=None, metavar="N",
                   help="fresh dev sequences of the second stage (default: every one the fitness does not use)")
    p.add_argument("--landscape", default=None, metavar="LANDSCAPE.json",
                   help="after the search, print what a landscape file (benchmarks/landscape.py; the "
                        "quickstart space's ships as benchmarks/results/landscape.json) says: the space's "
                        "headroom, whether 6 search seeds can detect EA vs random search there, and the "
                        "best-of-k-random curve")
    p.add_argument("--resume", action="store_true", help="continue the search in --out")
    p.add_argument("--overwrite", action="store_true", help="replace a search already in --out")
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"], help="default: cuda when available")
    tracking.add_argument(p)
    p.set_defaults(func=_evolve)


def _register_arch(sub: argparse._SubParsersAction) -> None:
    a = sub.add_parser("arch", help="inspect architectures", description="Inspect architecture files and names.")
    a.set_defaults(group_parser=a)
    asub = a.add_subparsers(dest="arch_command", metavar="SUBCOMMAND")
    show = asub.add_parser("show", help="print an architecture readably",
                           description="Print an architecture (best.json, or a name: bert, sandwich, lvbert-paper, "
                           "random:SEED): op strip, inputs per slot, and its size (parameters; α weights and FLOPs "
                           "when a supernet is given, else the size recorded in the file).")
    show.add_argument("arch", metavar="FILE_OR_NAME", help="architecture JSON or reference name (bert, sandwich, lvbert-paper, random:SEED)")
    show.add_argument("--supernet", default=None, metavar="RUN", help="trained supernet: adds α weights, params, FLOPs")
    show.add_argument("--space", default=None, metavar="NAME", help="search space (needed for names without --supernet)")
    show.set_defaults(func=_arch_show)


def _register_rank_check(sub: argparse._SubParsersAction) -> None:
    from lvsearch.search.fitness import METRICS
    from lvsearch.search.job import DEFAULT_FITNESS

    r = sub.add_parser(
        "rank-check",
        help="rank correlation between supernet fitness and standalone training",
        description="Sample architectures spread over the supernet-fitness range, train each from scratch for "
        "--steps steps on the supernet's data and recipe, and report how well the supernet ranks them: Kendall τ "
        "and Spearman ρ with paired-bootstrap 95% intervals, τ within strata of DC count and connectivity "
        "density, the top-k overlap against its chance level, and τ and top-5 precision of both fitness "
        "metrics (accuracy, loss). --reuse scores another supernet (or a landscape file's standalone results) "
        "without retraining; --landscape adds the space's headroom and best-of-k-random curve.",
    )
    r.add_argument("--supernet", required=True, metavar="RUN", help="folder of 'lvsearch train-supernet'")
    r.add_argument("--archs", type=int, default=8, metavar="N", help="architectures trained standalone (default 8)")
    r.add_argument("--steps", type=int, default=200, metavar="S", help="standalone training steps each (default 200)")
    r.add_argument("--pool", type=int, default=None, metavar="M", help="random pool scored on the supernet (default max(50, 5N))")
    r.add_argument("--out", default=None, metavar="DIR", help="output folder (default RUN/rank_check)")
    r.add_argument("--reuse", default=None, metavar="RANK_CHECK.json",
                   help="score the architectures of an earlier check on this supernet, reusing their standalone "
                        "accuracies (no retraining): compares supernet variants on the same architectures")
    r.add_argument("--step", type=int, default=None, metavar="N",
                   help="use the supernet's kept checkpoint of step N (default: the latest): a τ-versus-steps curve")
    r.add_argument("--data", default=None, metavar="DIR", help="prepared data (default: the folder recorded in the supernet run)")
    r.add_argument("--dev-sequences", type=int, default=None, metavar="N", help="dev sequences scored (default: the supernet recipe's)")
    r.add_argument("--seed", type=int, default=0, help="seed of the architecture pool (default 0)")
    r.add_argument("--fitness", choices=list(METRICS), default=DEFAULT_FITNESS,
                   help=f"supernet score of the headline τ (default {DEFAULT_FITNESS}, as evolve; both are reported)")
    r.add_argument("--landscape", default=None, metavar="LANDSCAPE.json",
                   help="also print what a landscape file (benchmarks/landscape.py; the quickstart space's ships "
                        "as benchmarks/results/landscape.json) says: headroom, whether 6 search seeds can detect "
                        "EA vs random search, and the best-of-k-random curve")
    r.add_argument("--overwrite", action="store_true", help="replace an earlier rank check in --out")
    r.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"], help="default: cuda when available")
    from lvsearch.dispatch import add_dispatch_arguments

    add_dispatch_arguments(r, "the standalone trainings")
    r.set_defaults(func=_rank_check)


# ------------------------------------------------------------------------------- evolve
_CONFIG_ARGS = ("population", "iterations", "crossover", "mutation", "mutation_prob", "input_mutation_prob",
                "mutation_kind", "topk", "strategy", "crossover_kind", "nsga2_cost", "seed", "tournament", "cycle",
                "budget", "sparse_init")


def _evolve(args: argparse.Namespace) -> int:
    from lvsearch import ui
    from lvsearch.errors import LvsearchError
    from lvsearch.search.job import EvolveOptions, evolve, resolve_settings
    from lvsearch.search.second_stage import SecondStage

    if args.racing == () and args.racing_eta is not None:
        raise LvsearchError("--racing-eta sets racing's keep factor, and --racing off turns racing off",
                            fix="drop --racing-eta, or pass rungs with --racing N[,N...]")
    if args.compare_random and args.strategy == "random":
        raise LvsearchError("--compare-random compares a search with random search, and --strategy random is random "
                            "search", fix="drop --compare-random, or pick --strategy evolution or aging")
    given = {k: getattr(args, k) for k in _CONFIG_ARGS if getattr(args, k) is not None}
    settings = resolve_settings(args.out, resume=args.resume, given=given, fitness=args.fitness, racing=args.racing,
                                racing_eta=args.racing_eta, dev_sequences=args.dev_sequences)
    config, fitness, racing, eta, dev_sequences = (settings.config, settings.fitness, settings.racing,
                                                    settings.racing_eta, settings.dev_sequences)
    if args.nsga2_cost is not None and config.strategy != "nsga2":
        raise LvsearchError(f"--nsga2-cost {args.nsga2_cost} sets NSGA-II's second objective, and this search's "
                            f"strategy is {config.strategy}: it would be ignored",
                            fix="add --strategy nsga2, or drop --nsga2-cost (--max-params, --max-flops and "
                                "--max-latency bound any strategy)")
    opts = EvolveOptions(
        supernet=args.supernet, out=args.out, data=args.data, dev_sequences=dev_sequences,
        batch_size=args.batch_size, cache_mb=args.cache_mb, max_params=args.max_params, max_flops=args.max_flops,
        min_params=args.min_params, compare_random=args.compare_random, resume=args.resume, overwrite=args.overwrite, device=args.device,
        space=args.space, fitness=fitness, racing=racing if racing == "default" else (tuple(racing) or None),
        racing_eta=eta, second_stage=SecondStage(args.second_stage, args.second_stage_k, args.second_stage_steps,
                                                 args.second_stage_dev),
        few_shot=tuple(args.few_shot) if args.few_shot else None,
        latency_table=args.latency_table, max_latency=args.max_latency, latency_any_device=args.latency_any_device,
        pick_fitness_at=args.pick_fitness_at,
    )
    if args.second_stage == "none":
        given = [f for f, v in (("--second-stage-k", args.second_stage_k), ("--second-stage-dev", args.second_stage_dev),
                                ("--second-stage-steps", None if args.second_stage_steps == 100 else args.second_stage_steps))
                 if v is not None]
        if given:
            raise LvsearchError(f"{', '.join(given)} set the second stage, but --second-stage is none",
                                fix="add --second-stage rescore or --second-stage finetune, or drop " + ", ".join(given))
    if args.landscape:  # read before the search: a bad file fails fast
        from lvsearch.search.noise import landscape_lines

        landscape = landscape_lines(args.landscape, space=_supernet_space(args.supernet))
    results = evolve(opts, config)
    for label, res in results.items():
        b = res.best
        if opts.second_stage.enabled and res.done:
            from pathlib import Path

            from lvsearch.arch import Arch

            folder = Path(args.out) / "random" if label == "random" and len(results) > 1 else Path(args.out)

            ui.console.print(f"{label}: best.json = the second stage's pick {Arch.from_json(folder / 'best.json').key}",
                             highlight=False, markup=False, soft_wrap=True)
        which = "the search's best" if opts.second_stage.enabled else "best"
        ui.console.print(f"{label}: {which} fitness {b.fitness:.4f} ({fitness}; accuracy {b.accuracy:.4f}, loss {b.loss:.4f}, {b.params:,} params, "
                         f"{b.flops / 1e6:.2f} MFLOPs/token) after {len(res.history)} evaluations: {b.key}")
    if args.landscape:
        for line in landscape:
            ui.console.print(line, highlight=False, markup=False, soft_wrap=True)
    return 0


def _supernet_space(run) -> str | None:
    """The space name recorded in a supernet run's config.json (e.g. ``lvbert-elc@12``), or None
    when it cannot be read (the verb itself reports a bad --supernet with its own message)."""
    from pathlib import Path

    from lvsearch.errors import LvsearchError
    from lvsearch.train.run import SupernetRunConfig, read_config_file

    try:
        return read_config_file(Path(run), "supernet", SupernetRunConfig, what="supernet run config")["space"]["name"]
    except LvsearchError:
        return None


# ------------------------------------------------------------------------------- arch show
def _arch_show(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from lvsearch import ops as op_registry
    from lvsearch.search.arch_view import arch_view

    view = arch_view(args.arch, supernet=args.supernet, space=args.space)
    arch, space, alpha = view.arch, view.space, view.alpha
    out = Console()
    out.print(f"[bold]{escape(arch.compact)}[/bold]  ({arch.num_slots} slots, "
              f"{'sequential' if arch.is_sequential else 'ELC connectivity'}"
              + (f", space {space.name}" if space is not None else "") + ")", highlight=False)
    shown = space.ops if space is not None else [op for op in op_registry.codes() if op in arch.ops]
    counts = {op: arch.ops.count(op) for op in shown}
    out.print("ops: " + ", ".join(f"{op} {n}" for op, n in counts.items()), highlight=False)
    tab = Table()
    tab.add_column("slot", justify="right")
    tab.add_column("op")
    if arch.has_variants:
        tab.add_column("variant")
    tab.add_column("inputs" if alpha is None else "inputs (α)")
    for n, (op, inp) in enumerate(zip(arch.ops, arch.inputs), start=1):
        if alpha is None or len(inp) == 1:
            cell = ", ".join(map(str, inp))
        else:
            cell = ", ".join(f"{i} ({float(alpha[n - 1, i]):.2f})" for i in inp)
        variant = [", ".join(f"{k}={v}" for k, v in arch.variants[n - 1]) or "default"] if arch.has_variants else []
        tab.add_row(str(n), op, *variant, cell)
    out.print(tab)
    if view.params is not None and view.seq_len is not None:
        out.print(f"params {view.params:,}; forward FLOPs/token at seq {view.seq_len}: {view.flops / 1e6:.2f} M",
                  highlight=False)
    elif view.params is not None:
        out.print(f"params {view.params:,}; forward FLOPs/token: {view.flops / 1e6:.2f} M "
                  f"(recorded in {args.arch} by the search)", highlight=False)
    else:
        out.print("params/FLOPs: they depend on the model widths; pass --supernet RUN", highlight=False)
    if view.meta:
        keys = [k for k in ("fitness", "loss", "supernet", "supernet_step") if k in view.meta]
        out.print("meta: " + ", ".join(f"{k}={view.meta[k]}" for k in keys), highlight=False)
        lat = view.meta.get("latency_ms")
        if isinstance(lat, (int, float)) and not isinstance(lat, bool):
            out.print(f"predicted latency {lat:.3f} ms per batch (the search's --latency-table; its batch, sequence "
                      "length and device: lvsearch latency predict --table T --arch FILE)", highlight=False)
    return 0


# ------------------------------------------------------------------------------- rank check
def _rank_check(args: argparse.Namespace) -> int:
    from lvsearch import ui
    from lvsearch.dispatch import options_from_args
    from lvsearch.search.rank_check import rank_check

    dispatch = options_from_args(args)
    landscape = None
    if args.landscape:  # read before the standalone training: a bad file fails in seconds
        from lvsearch.search.noise import landscape_lines

        landscape = landscape_lines(args.landscape, space=_supernet_space(args.supernet))
    res = rank_check(args.supernet, num_archs=args.archs, steps=args.steps, pool=args.pool, out=args.out,
                     data=args.data, dev_sequences=args.dev_sequences, seed=args.seed, overwrite=args.overwrite,
                     device=args.device, reuse=args.reuse, step=args.step, fitness=args.fitness, dispatch=dispatch)
    fmt = lambda v: "undefined" if v is None else f"{v:.3f}"  # noqa: E731
    ci = lambda c: f"[{fmt(c[0])}, {fmt(c[1])}]"  # noqa: E731
    ch = res["topk_chance"]
    ui.console.print(f"Kendall τ {fmt(res['kendall_tau'])} 95% {ci(res['kendall_tau_ci95'])} (p {fmt(res['kendall_p'])}), "
                     f"Spearman ρ {fmt(res['spearman_rho'])} 95% {ci(res['spearman_rho_ci95'])}, top-{res['topk']} overlap "
                     f"{res['topk_overlap']}/{res['topk']} (chance {ch['expected']:.2f}, p {ch['p']:.2f}) over "
                     f"{res['num_archs']} architectures × {res['steps']} steps → {res['out']}", highlight=False, markup=False)
    for name, st in res["strata"].items():
        parts = ", ".join(f"{lab} (n={v['n']}): {fmt(v['tau'])}" for lab, v in st["strata"].items())
        ui.console.print(f"τ within {name} strata: {parts}; pair-weighted {fmt(st['weighted_tau'])}", highlight=False, markup=False)
    for name, b in res["by_fitness"].items():
        region = b.get("top_region") or {}
        top = (f", top-region τ {fmt(region.get('kendall_tau'))} over the best {region['n']} by standalone accuracy"
               if region.get("n") else "")
        ui.console.print(f"fitness {name}: τ {fmt(b['kendall_tau'])} 95% {ci(b['kendall_tau_ci95'])}{top}, "
                         f"top-5 precision {fmt(b['top5_precision'])} (averaged over tie orders)",
                         highlight=False, markup=False)
    for line in landscape or ():
        ui.console.print(line, highlight=False, markup=False, soft_wrap=True)
    return 0
