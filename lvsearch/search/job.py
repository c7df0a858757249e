"""The ``lvsearch evolve`` job: load a supernet run, build the evaluator, run the search(es),
write the outputs.

Search folder::

    state.json         resumable search state (lvsearch.search-state/v1, JSON, atomic)
    history.jsonl      every evaluated architecture: EvalResult fields + iteration
    topk.json          the current top-k set
    best.json          the best architecture (lvsearch.arch/v1) with meta: fitness, loss,
                       params, flops, supernet run dir and step, search config
                       (with --few-shot, best.json's meta and state.json's extra also hold
                       few_shot: the split slot and each part's run, step and weights sha256)
    pareto.json        NSGA-II only: non-dominated (accuracy, params|flops|latency) set
    pick.json          NSGA-II and random search with a cost (its control, or --latency-table):
                       the cheapest candidate at the reference fitness (lvsearch.search.pick)
    search_curve.png   top-k best/mean per iteration (EA and, with --compare-random, random)
    noise.json         the fitness noise of the final top-k (standard errors, ties, verdict)
    compare_random.json  --compare-random: the EA's pick against random search's, paired on
                       the fitness's dev targets (difference, paired standard error, verdict)
    second_stage.json  --second-stage: the top-k re-ranked on fresh dev targets; best.json is its pick
    second_stage/      --second-stage finetune: one short run per candidate
    random/            --compare-random: random search, same first population and compute
"""

from __future__ import annotations

import math
import shutil
from dataclasses import dataclass
from pathlib import Path

from lvsearch.arch import Arch
from lvsearch.errors import LvsearchError
from lvsearch.io import check_writable_folder, guard_output
from lvsearch.lock import holds_output
from lvsearch.search.evaluator import Constraints, EvalResult
from lvsearch.search.evolution import STATE, Search, SearchConfig, SearchResult, plot_curves
from lvsearch.search.evolve_output import compare_picks, phase_reporter, topk_table, write_noise
from lvsearch.search.fitness import DEFAULT, Fitness
from lvsearch.search.folder import RANDOM_DIR, SearchFolder
from lvsearch.search.pick import PICK_FILE, first_population_reference, write_pick
from lvsearch.search.schedule import Racing
from lvsearch.search.strategies import STRATEGIES
from lvsearch.search.second_stage import (SECOND_STAGE_DIR, SECOND_STAGE_FILE, SecondStage, check_second_stage_inputs,
                                          run_second_stage)

#: Defaults of ``lvsearch evolve`` for a new search, chosen by measurement
#: (``benchmarks/fitness_noise.py``; docs/results.md, "Fitness noise"): on the quickstart
#: supernet the loss on 1024 dev sequences has a paired standard error of 0.26× the top decile's
#: spread (accuracy on the old 128: 2.8×, 10 of the top-10 tied); racing 64 → 256 → 1024
#: (η = 4) bounds the cost (``benchmarks/racing_plans.py``: the same top-decile recall as
#: 128 → 512, 0.70 vs 0.73, for 1.48 instead of 2.15 old-fitness evaluations per candidate; a
#: whole quickstart-sized search 1.59× the old one's wall time, 128 → 512 took 2.58×). Rungs of
#: the default plan that do not fit a smaller dev set are dropped; a plan the user gives is
#: checked strictly.
DEFAULT_FITNESS = DEFAULT.metric  # the one default (lvsearch.search.fitness)
DEFAULT_RACING: tuple[int, ...] = (64, 256)
DEFAULT_DEV_SEQUENCES: int | str | None = 1024

OUTPUTS = (STATE, "history.jsonl", "topk.json", "best.json", "pareto.json", PICK_FILE, "search_curve.png",
           "noise.json", SECOND_STAGE_FILE)


@dataclass
class EvolveOptions:
    """Inputs of :func:`evolve` besides the search settings.

    Attributes:
        supernet: ``train-supernet`` run folder.
        out: search folder.
        data: prepared data folder (default: the folder recorded in the supernet run).
        dev_sequences: size of the fixed masked dev subset, or ``"all"`` (default: the run's
            ``eval.dev_sequences``).
        batch_size: dev sequences per forward chunk (default: all at once).
        cache_mb: prefix-cache budget in MiB.
        max_params, max_flops, min_params: constraints (None = none).
        compare_random: also run random search from the same first population, with the
            EA's dev-sequence passes as its budget (:func:`random_control`).
        resume, overwrite: continue the search in ``out`` / replace it.
        device: ``auto``, ``cpu`` or ``cuda``.
        space: optional search-space name or path that must match the supernet's.
        fitness: ``accuracy`` (dev MLM accuracy, LV-BERT) or ``loss`` (minus the mean dev MLM
            loss); see :class:`lvsearch.search.evaluator.SupernetEvaluator`.
        racing: increasing dev-sequence counts of the racing rungs (successive halving over
            targets), or None: every candidate scored on all ``dev_sequences``; ``"default"``:
            :data:`DEFAULT_RACING` without the rungs that do not fit the dev set (none for NSGA-II).
        racing_eta: keep ``1/eta`` of a batch per rung.
        second_stage: re-rank each finished search's top-k on fresh dev targets before the pick
            (:mod:`lvsearch.search.second_stage`); the same settings for the EA and its
            random-search control, so both get the same compute.
        few_shot: ``train-supernet`` runs of the sub-supernets of one split
            (:mod:`lvsearch.search.few_shot`), or None. Every candidate (EA and random search)
            is then scored by its part on ``supernet``'s dev set with the same fitness, racing
            and constraints; ``supernet`` still defines the space, the dev set and the counts.
        latency_table: a table of ``lvsearch latency measure`` for this supernet, or None: every
            candidate's predicted latency is recorded (``latency_ms``), and ``max_latency`` and
            the NSGA-II cost ``latency`` use it.
        max_latency: reject candidates predicted slower than this (ms per batch at the table's
            batch and sequence length), or None.
        latency_any_device: accept a table measured on another device than the search's.
    """

    supernet: str | Path
    out: str | Path
    data: str | Path | None = None
    dev_sequences: int | str | None = None
    batch_size: int | None = None
    cache_mb: float = 512.0
    max_params: int | None = None
    max_flops: float | None = None
    min_params: int | None = None
    compare_random: bool = False
    resume: bool = False
    overwrite: bool = False
    device: str = "auto"
    space: str | None = None
    fitness: str = DEFAULT_FITNESS
    racing: tuple[int, ...] | str | None = "default"
    racing_eta: float = 4.0
    second_stage: SecondStage = SecondStage()
    few_shot: tuple[str | Path, ...] | None = None
    latency_table: str | Path | None = None
    max_latency: float | None = None
    latency_any_device: bool = False
    pick_fitness_at: float | None = None


@dataclass
class EvolveSettings:
    """The search settings an ``evolve`` call runs with, after defaults and, on ``--resume``,
    what the search recorded (:func:`resolve_settings`)."""

    config: SearchConfig
    fitness: str
    racing: tuple[int, ...] | str
    racing_eta: float
    dev_sequences: int | str | None


def resolve_settings(out: str | Path, *, resume: bool, given: dict, fitness: str | None = None,
                     racing: tuple[int, ...] | None = None, racing_eta: float | None = None,
                     dev_sequences: int | str | None = None) -> EvolveSettings:
    """The settings of an ``evolve`` run from what the user gave (None: not given).

    A new search takes the defaults (top-k 10 but at most the population, :data:`DEFAULT_FITNESS`,
    :data:`DEFAULT_RACING` as ``"default"``, :data:`DEFAULT_DEV_SEQUENCES`, η 4). A resumed one
    takes what ``out/state.json`` recorded, and may change only ``iterations`` and ``budget``
    (the fitness, racing and dev set of a state from before they were recorded are accuracy, no
    racing and the supernet's dev set: :meth:`Fitness.of_record`).

    Args:
        given: the :class:`SearchConfig` fields the user set (population, iterations, …).
        racing: rungs, ``()`` for ``--racing off``, None when not given.

    Raises:
        LvsearchError: ``--resume`` without a state, a damaged state, or other settings than the
            recorded ones.
    """
    given = dict(given)
    if not resume:
        if "topk" not in given and "population" in given:
            given["topk"] = min(SearchConfig.topk, given["population"])  # default 10, at most P
        return EvolveSettings(config=SearchConfig(**given), fitness=fitness or DEFAULT_FITNESS,
                              racing=racing if racing is not None else "default",
                              racing_eta=4.0 if racing_eta is None else racing_eta,
                              dev_sequences=dev_sequences if dev_sequences is not None else DEFAULT_DEV_SEQUENCES)
    path = Path(out) / STATE
    if not path.is_file():
        raise LvsearchError(f"--resume: {out} holds no search ({STATE} missing)", fix="start without --resume")
    state = SearchFolder(out).state()
    recorded = state.get("config") if isinstance(state, dict) else None
    if not isinstance(recorded, dict):
        raise LvsearchError(f"search state {path} is corrupted", fix="restore it, or start again with --overwrite")
    legacy = SearchConfig.from_state(recorded).to_dict() if "mutation_prob" in recorded else recorded
    changed = sorted(k for k, v in given.items() if k not in ("iterations", "budget") and legacy.get(k) != v)
    if changed:
        raise LvsearchError(
            f"--resume with different search settings than {path} ({', '.join('--' + k.replace('_', '-') for k in changed)})",
            fix="resume with the original settings (only --iterations and --budget may grow), or start a new --out",
        )
    extra = state.get("extra") if isinstance(state.get("extra"), dict) else {}
    rec_racing = extra.get("racing") if isinstance(extra.get("racing"), dict) else {}
    try:
        config = SearchConfig.from_state(dict(recorded, **given))
    except TypeError:
        raise LvsearchError(f"search state {path} is corrupted", fix="restore it, or start again with --overwrite") from None
    return EvolveSettings(
        config=config, fitness=fitness or Fitness.of_record(extra).metric,
        racing=racing if racing is not None else tuple(rec_racing.get("rungs") or ()),
        racing_eta=racing_eta if racing_eta is not None else rec_racing.get("eta", 4.0),
        dev_sequences=dev_sequences if dev_sequences is not None else extra.get("dev_sequences"),
    )


def _check_out(out: Path, resume: bool, overwrite: bool) -> None:
    if out.exists() and not out.is_dir():
        raise LvsearchError(f"--out {out} is a file", fix="choose a folder path")
    check_writable_folder(out)
    has = out.is_dir() and (out / STATE).exists()
    if resume:
        if not has:
            raise LvsearchError(f"--resume: {out} holds no search ({STATE} missing)", fix="start without --resume")
        return
    if has and not overwrite:
        raise LvsearchError(f"--out {out} already holds a search", fix="pass --resume to continue it or --overwrite to replace it")
    if out.is_dir() and not has and any(out.iterdir()):
        raise LvsearchError(f"--out {out} is not empty and holds no search", fix="choose a new or empty folder")


def _clear(out: Path) -> None:
    for name in OUTPUTS:
        (out / name).unlink(missing_ok=True)
    for name in (RANDOM_DIR, SECOND_STAGE_DIR):
        if (out / name).is_dir():
            shutil.rmtree(out / name)


def _best_meta(r: EvalResult, loaded, config: SearchConfig, strategy: str, metric: str,
               few_shot: dict | None = None) -> dict:
    meta = {
        "fitness": r.fitness, "fitness_metric": metric, "accuracy": r.accuracy, "loss": r.loss,
        "targets": r.targets, "params": r.params, "flops": r.flops,
        "supernet": str(Path(loaded.run_dir).resolve()), "supernet_step": loaded.step,
        "search": dict(config.resolved().to_dict(), strategy=strategy),
    }
    if few_shot is not None:  # only when used: best.json of a one-shot search is unchanged
        meta["few_shot"] = few_shot
    if r.latency_ms is not None:  # likewise, with a latency table
        meta["latency_ms"] = r.latency_ms
    return meta


def _load_few_shot(opts: EvolveOptions, loaded, out: Path, info):
    """The split of ``opts.few_shot``, checked against the supernet and, on resume, against the
    parts the search in ``out`` was scored with; None without ``--few-shot``.

    Raises:
        LvsearchError: a bad part (:meth:`FewShotSupernets.load`), ``--second-stage`` (it
            re-ranks with the one-shot weights), or a resume with other parts (or none) than
            recorded in ``out``'s state.
    """
    from lvsearch import ui
    from lvsearch.search.few_shot import FewShotSupernets

    split = None
    if opts.few_shot:
        if opts.second_stage.enabled:
            raise LvsearchError("--second-stage re-ranks with the one-shot supernet's weights, so it does not combine "
                                "with --few-shot", fix="drop --second-stage, or search without --few-shot")
        split = FewShotSupernets.load(list(opts.few_shot), device=info.device, like=loaded)
        home = Path(loaded.run_dir).resolve()
        strays = [str(ld.run_dir) for ld in split.parts.values()
                  if ld.config.init_from is None or Path(ld.config.init_from).resolve() != home]
        if strays and info.is_main:
            ui.warn(f"few-shot parts {', '.join(strays)} were not warm-started from --supernet {opts.supernet} "
                    "(init_from): they score with weights of their own")
    if opts.resume:
        try:
            state = SearchFolder(out).state()
        except LvsearchError:
            return split  # the search's own resume check reports it
        extra = state.get("extra") if isinstance(state, dict) else None
        if isinstance(extra, dict):
            had, want = extra.get("few_shot"), split.record() if split is not None else None
            if had != want:
                if had is None:
                    raise LvsearchError(f"--resume with --few-shot: the search in {out} was scored with the one-shot "
                                        "supernet", fix="resume without --few-shot, or start a new --out")
                ok = isinstance(had, dict) and isinstance(had.get("parts"), dict)
                runs = " ".join(str(p.get("run")) for p in had["parts"].values() if isinstance(p, dict)) if ok else "?"
                scored = f"few-shot parts (split at slot {had.get('slot') if ok else '?'}: {runs})"
                what = ("with other few-shot parts (or retrained ones) than" if want is not None
                        else "without --few-shot, but")
                raise LvsearchError(f"--resume {what} the search in {out} was scored with {scored}",
                                    fix=f"resume with --few-shot {runs}, or start a new --out")
    return split


def random_control(config: SearchConfig, ea: SearchResult) -> SearchConfig:
    """The ``--compare-random`` control of a finished search of ``config``: random search
    (no tournament or cycle) with the same seed (the same first population) and the other
    settings of ``config``, the EA's dev-sequence passes (``ea.passes``) as its budget (equal
    compute, whatever racing completed in each), and iterations enough for the budget to bind."""
    return SearchConfig(**dict(config.to_dict(), strategy="random", tournament=None, cycle=None,
                               budget=max(1, ea.passes), iterations=max(config.iterations, 1) * 4))


def pick_cost(config: SearchConfig, opts: EvolveOptions) -> str | None:
    """The cost of ``pick.json`` (:mod:`lvsearch.search.pick`): NSGA-II's ``nsga2_cost`` (its
    ``--compare-random`` control is picked on the same cost), predicted latency for random
    search with a latency table, else None (no pick file).

    Raises:
        LvsearchError: ``--pick-fitness-at`` for a search that writes no pick.
    """
    cost = config.nsga2_cost if config.strategy == "nsga2" else (
        "latency" if config.strategy == "random" and opts.latency_table is not None else None)
    if cost is None and opts.pick_fitness_at is not None:
        raise LvsearchError(f"--pick-fitness-at sets the fitness of pick.json, the cheapest candidate of an "
                            f"accuracy-cost search, and --strategy {config.strategy} writes none",
                            fix="add --strategy nsga2 (or --strategy random with --latency-table), or drop "
                                "--pick-fitness-at (best.json is the fittest candidate)")
    return cost


def check_size_band(supernet, constraints: Constraints) -> tuple[int, int]:
    """Refuse, before any folder is written, a parameter band that no architecture of the
    supernet's space can fill: the space's sizes run from its smallest architecture (the op
    with the fewest parameters at every slot, sequential) to its largest (most parameters,
    dense where searchable), :func:`lvsearch.train.supernet.sandwich_extremes`, counted by
    ``Supernet.num_params``. Returns ``(smallest, largest)`` parameter counts.

    Raises:
        LvsearchError: the band lies entirely below or above that range (names the switches
            in force, the range and the fix).
    """
    from lvsearch.train.supernet import sandwich_extremes

    big, small = sandwich_extremes(supernet)
    lo, hi = supernet.num_params(small), supernet.num_params(big)
    c = constraints
    if (c.max_params is not None and c.max_params < lo) or (c.min_params is not None and c.min_params > hi):
        raise LvsearchError(
            f"no architecture of space {supernet.space.name} fits {c.switches()}: its architectures have "
            f"{lo:,} to {hi:,} parameters",
            fix=f"pass a band that overlaps {lo:,}–{hi:,} (--min-params ≤ {hi:,}, --max-params ≥ {lo:,})",
        )
    return lo, hi


def _check_bounds(opts: EvolveOptions) -> None:
    """The numeric options, before anything is loaded. Raises LvsearchError naming the flag."""
    if opts.cache_mb < 0:
        raise LvsearchError(f"--cache-mb must be ≥ 0, got {opts.cache_mb}")
    for flag, limit in (("--max-params", opts.max_params), ("--max-flops", opts.max_flops),
                        ("--min-params", opts.min_params), ("--max-latency", opts.max_latency)):
        if limit is not None and not limit > 0:
            raise LvsearchError(f"{flag} must be a positive number, got {limit}",
                                fix=f"pass a bound above 0 (e.g. {flag} 5e6), or omit {flag} for no bound")


def _check_against_supernet(opts: EvolveOptions, config: SearchConfig, loaded) -> None:
    """``--space``, the size band, ``--batch-size``, ``--second-stage-k``, racing against the
    supernet and the strategy. Raises LvsearchError naming the flag."""
    from lvsearch.space import SearchSpace

    if opts.space is not None:
        # a bare family name ("lvbert") names the family at any depth: the supernet fixes N
        want = SearchSpace.resolve(opts.space, None if "@" in opts.space else loaded.space.num_slots,
                                   source="--space")
        if want.to_dict() | {"name": "", "description": ""} != loaded.space.to_dict() | {"name": "", "description": ""}:
            raise LvsearchError(
                f"--space {opts.space} ({want.num_slots} slots, ops {','.join(want.ops)}, {want.connectivity}) does "
                f"not match supernet {opts.supernet} ({loaded.space.num_slots} slots, ops "
                f"{','.join(loaded.space.ops)}, {loaded.space.connectivity})",
                fix="omit --space (the supernet's space is used) or pass the supernet trained on that space",
            )
    if opts.min_params is not None and opts.max_params is not None and opts.min_params > opts.max_params:
        raise LvsearchError(f"--min-params {opts.min_params:,} is above --max-params {opts.max_params:,}",
                            fix="pass a band with --min-params ≤ --max-params")
    if opts.min_params is not None or opts.max_params is not None:
        check_size_band(loaded.supernet, Constraints(opts.max_params, opts.max_flops, opts.min_params))
    if opts.batch_size is not None and opts.batch_size < 1:
        raise LvsearchError(f"--batch-size must be ≥ 1 dev sequence, got {opts.batch_size}",
                            fix="omit it to score all dev sequences in one chunk")
    if opts.second_stage.k is not None and opts.second_stage.k > config.topk:
        raise LvsearchError(f"--second-stage-k {opts.second_stage.k} is above --topk {config.topk}: the second stage "
                            "re-ranks the search's top-k", fix=f"pass --second-stage-k ≤ {config.topk}, or raise --topk")
    if not (isinstance(opts.racing_eta, (int, float)) and math.isfinite(opts.racing_eta) and opts.racing_eta > 1):
        raise LvsearchError(f"--racing-eta must be a finite number > 1, got {opts.racing_eta}",
                            fix="e.g. --racing-eta 4 (the best quarter of a batch goes on to the next rung)")
    if opts.racing and opts.racing != "default" and STRATEGIES[config.strategy].multi_objective:
        raise LvsearchError("--racing ranks a batch by one fitness; NSGA-II ranks by two objectives",
                            fix="drop --racing, or use --strategy evolution/aging/random")


def load_latency_table(opts: EvolveOptions, config: SearchConfig, loaded, device):
    """The search's latency table (:func:`lvsearch.latency.table.check_table`-ed against the
    supernet and ``device``), or None when none is given.

    Raises:
        LvsearchError: ``--max-latency`` or ``--nsga2-cost latency`` without ``--latency-table``;
            an unreadable table or one that does not fit (other sizes, missing entries, another
            device without ``--latency-any-device``); a limit below the fastest architecture.
    """
    import torch

    from lvsearch.latency.predict import fastest_arch, predict_ms
    from lvsearch.latency.table import check_table, load_table

    if opts.latency_table is None:
        for flag, used in (("--max-latency", opts.max_latency is not None),
                           ("--nsga2-cost latency", config.strategy == "nsga2" and config.nsga2_cost == "latency")):
            if used:
                raise LvsearchError(f"{flag} needs predicted latencies, and no --latency-table is given",
                                    fix="measure one with 'lvsearch latency measure --supernet RUN --out T.json' "
                                        "and pass --latency-table T.json")
        return None
    table = load_table(opts.latency_table)
    check_table(table, opts.latency_table, space=loaded.space, dims=loaded.dims, device=torch.device(device),
                any_device=opts.latency_any_device)
    if table.device == "cpu" and table.threads != torch.get_num_threads():
        from lvsearch import ui

        ui.warn(f"latency table {opts.latency_table} was measured with {ui.plural(table.threads, 'CPU thread')} and "
                f"this process runs {torch.get_num_threads()}: its predictions are for "
                f"{ui.plural(table.threads, 'thread')} (the deployment "
                "setting it describes), not for this search's")
    if opts.max_latency is not None:
        fastest = predict_ms(fastest_arch(table, loaded.space), table)  # calibrated, as the limit is applied
        if fastest > opts.max_latency:
            raise LvsearchError(
                f"no architecture of space {loaded.space.name} fits --max-latency {opts.max_latency:g} ms: the fastest "
                f"one is predicted at {fastest:.4g} ms ({table.where}, batch {table.batch} × {table.seq_len} tokens)",
                fix=f"pass --max-latency ≥ {math.ceil(fastest * 1000) / 1000:.3f}")
    return table


def _make_evaluator(opts: EvolveOptions, config: SearchConfig, loaded, dev, split, few_shot, info, latency=None):
    """The evaluator of a search (one-shot, or routed to few-shot parts), its racing, and the
    evaluator settings the search state records (``extra``: what a resume must match).
    Returns ``(evaluator, racing, extra)``."""
    from lvsearch.search.evaluator import SupernetEvaluator

    constraints = Constraints(opts.max_params, opts.max_flops, opts.min_params, opts.max_latency)
    rungs = opts.racing
    if rungs == "default":  # NSGA-II ranks by two objectives: no racing unless asked (refused above)
        rungs = (() if STRATEGIES[config.strategy].multi_objective
                 else tuple(r for r in DEFAULT_RACING if r < dev.input_ids.shape[0]))
    racing = Racing(tuple(rungs), opts.racing_eta) if rungs else None
    settings = {"seq_len": loaded.config.train.seq_len, "batch_size": opts.batch_size,
                "cache_bytes": int(opts.cache_mb * (1 << 20)), "constraints": constraints, "device": info.device,
                "info": info, "fitness": opts.fitness, "racing": racing}
    if split is None:
        evaluator = SupernetEvaluator(loaded.supernet, dev, **settings)
    else:
        evaluator = split.evaluator(dev, supernet=loaded.supernet, **settings)
    extra = {
        "supernet": str(Path(loaded.run_dir).resolve()), "supernet_step": loaded.step,
        "supernet_sha256": loaded.weights_sha256,
        "tokenizer_sha256": loaded.run_config["data"]["tokenizer_sha256"],
        "dev_sequences": int(dev.input_ids.shape[0]), "seq_len": int(dev.input_ids.shape[1]),
        "dev_seed": loaded.config.eval.seed, "max_params": opts.max_params, "max_flops": opts.max_flops,
    }
    if opts.min_params is not None:  # recorded only when set: older states resume unchanged
        extra["min_params"] = opts.min_params
    extra.update(Fitness.parse(opts.fitness).recorded())  # likewise (Fitness.of_record reads it back)
    if racing is not None:
        extra["racing"] = {"rungs": list(racing.rungs), "eta": racing.eta}
    if few_shot is not None:  # likewise: a one-shot search's state is unchanged
        extra["few_shot"] = few_shot
    if latency is not None:  # likewise
        from lvsearch.io import sha256_file

        evaluator.latency_table = latency
        extra["latency_table"] = {"path": str(Path(opts.latency_table).resolve()),
                                  "sha256": sha256_file(opts.latency_table), "where": latency.where}
        extra["max_latency"] = opts.max_latency
    return evaluator, racing, extra


@holds_output(lambda a: a["opts"].out)
def evolve(opts: EvolveOptions, config: SearchConfig, *, show_progress: bool = True,
           max_iterations: int | None = None) -> dict[str, SearchResult]:
    """Run (or resume) a search over a trained supernet; returns ``{"evolution"|strategy: result,
    ["random": result]}``. Works unchanged under torchrun (evaluation sharded over ranks,
    rank 0 writes). Holds the output lock on ``opts.out`` for the whole call.

    Raises:
        LvsearchError: bad settings, a supernet run without checkpoint, a space mismatch, a data
            folder with another tokenizer, an ``out`` folder that already holds a search (without
            ``resume``/``overwrite``), a corrupted state file on resume, another command writing
            ``out``.
    """
    from lvsearch import ui
    from lvsearch.train.distributed import barrier, init_distributed, shutdown
    from lvsearch.train.supernet import load_dev, load_supernet

    config = config.resolved()
    cost = pick_cost(config, opts)
    out = Path(opts.out).expanduser().resolve()
    info = init_distributed(opts.device)
    try:
        guard_output(out, overwrite=opts.overwrite and not opts.resume,
                     inputs=[("--supernet", opts.supernet), ("--data", opts.data),
                             *(("--few-shot", r) for r in (opts.few_shot or ()))])
        _check_out(out, opts.resume, opts.overwrite)
        _check_bounds(opts)
        loaded = load_supernet(opts.supernet, device=info.device)
        if loaded.step < loaded.config.train.steps and info.is_main:
            ui.warn(f"supernet {opts.supernet} is at step {loaded.step} of {loaded.config.train.steps} (killed, or still "
                    "training): the search scores candidates with its weights of that step; resume it with "
                    "train-supernet --resume first for the finished supernet")
        _check_against_supernet(opts, config, loaded)
        split = _load_few_shot(opts, loaded, out, info)
        few_shot = split.record() if split is not None else None
        dev, prepared = load_dev(loaded, opts.data, opts.dev_sequences)
        check_second_stage_inputs(opts.second_stage, config.topk, prepared, int(dev.input_ids.shape[0]),
                                  loaded.config.train.seq_len, out, resume=opts.resume)
        latency = load_latency_table(opts, config, loaded, info.device)
        evaluator, racing, extra = _make_evaluator(opts, config, loaded, dev, split, few_shot, info, latency)
        if info.is_main:
            if opts.overwrite and not opts.resume and out.is_dir():
                _clear(out)
            out.mkdir(parents=True, exist_ok=True)
        barrier(info)
        run = _PhaseRun(opts, loaded, prepared, evaluator, racing, extra, few_shot, info,
                        n_dev=int(dev.input_ids.shape[0]), show=show_progress and info.is_main,
                        max_iterations=max_iterations)
        phases = [(config.strategy, out, config)]
        if opts.compare_random and config.strategy != "random":
            # the control: the same seed (so the same first population: common random numbers),
            # its own memo, and the EA's compute as its budget (set once the EA is done)
            rcfg = SearchConfig(**dict(config.to_dict(), strategy="random", tournament=None, cycle=None))
            phases.append(("random", out / RANDOM_DIR, rcfg))
        results: dict[str, SearchResult] = {}
        reference: tuple[float | None, str] = (opts.pick_fitness_at, "--pick-fitness-at")
        for label, folder, cfg in phases:
            control = label == "random" and len(phases) == 2
            if control:
                cfg = random_control(cfg, results[config.strategy])
            res = results[label] = run.phase(label, folder, cfg, control=control, record_env_in=out)
            if not res.done:
                break
            if cost is not None:
                if reference[0] is None:  # the first search's first population, which its control shares
                    reference = (first_population_reference(res.history),
                                 f"median fitness of the first population ({config.strategy}'s, shared by its control)"
                                 if len(phases) == 2 else "median fitness of the first population")
                run.pick(label, folder, cfg, res, cost, reference)
        if info.is_main and len(results) == 2 and all(r.done and r.topk for r in results.values()):
            compare_picks(evaluator, [folder for _, folder, _ in phases], out, opts.fitness, run.show,
                          compute={label: {"evaluations": len(r.history), "passes": r.passes}
                                   for label, r in results.items()})
        if info.is_main:
            plot_curves({k: v.curve for k, v in results.items()}, out / "search_curve.png",
                        title=f"search over {loaded.space.name} (supernet step {loaded.step}"
                              + (f", few-shot parts split at slot {split.slot})" if split is not None else ")"),
                        ylabel=f"fitness: {Fitness.parse(opts.fitness).axis_label}")
        barrier(info)
        return results
    finally:
        shutdown(info)


@dataclass
class _PhaseRun:
    """What every search of one :func:`evolve` call shares (the EA and its random control):
    the supernet, data, evaluator and the state's ``extra``; :meth:`phase` runs one search."""

    opts: EvolveOptions
    loaded: object  # lvsearch.train.supernet.LoadedSupernet
    prepared: object  # lvsearch.data.shards.PreparedData
    evaluator: object  # SupernetEvaluator (or its few-shot router)
    racing: Racing | None
    extra: dict
    few_shot: dict | None
    info: object  # lvsearch.train.distributed placement
    n_dev: int  # dev sequences of the fitness
    show: bool
    max_iterations: int | None

    def best_meta(self, r: EvalResult, cfg: SearchConfig, label: str) -> dict:
        return _best_meta(r, self.loaded, cfg, label, self.opts.fitness, self.few_shot)

    def pick(self, label: str, folder: Path, cfg: SearchConfig, res: SearchResult, cost: str,
             reference: tuple[float | None, str]) -> None:
        """Write the finished search's ``pick.json`` (the cheapest complete candidate at the
        reference fitness) and say what it picked."""
        from lvsearch import ui

        if not self.info.is_main:
            return
        results = [EvalResult.from_dict(h) for h in res.history]
        rec = write_pick(folder, results, cost, reference[0], reference[1], space=self.loaded.space.name,
                         meta_of=lambda r: self.best_meta(r, cfg, label))
        if self.show:
            ref = rec["reference"]["fitness"]
            if rec["pick"] is None:
                ui.warn(f"{label}: no candidate reaches the pick's reference fitness "
                        f"{'?' if ref is None else f'{ref:.4f}'} ({rec['reference']['source']}): no {PICK_FILE}")
            else:
                p = rec["pick"]
                ui.console.print(f"{label}: {PICK_FILE} = the lowest {cost} ({p[cost]:,.4g}) at fitness ≥ {ref:.4f} "
                                 f"({rec['reference']['source']}; {rec['at_or_above']} of {rec['candidates']} "
                                 f"candidates reach it): fitness {p['fitness']:.4f}, {p['key']}",
                                 highlight=False, markup=False, soft_wrap=True)

    def phase(self, label: str, folder: Path, cfg: SearchConfig, *, control: bool, record_env_in: Path) -> SearchResult:
        """Run (or resume) the search ``label`` in ``folder`` (``control``: the random-search
        control, on a fork of the evaluator); write its best.json, noise.json and second stage.
        The environment is recorded once the search in ``record_env_in`` passed its checks."""
        from lvsearch import ui
        from lvsearch.train.distributed import barrier

        info, opts, loaded, show = self.info, self.opts, self.loaded, self.show
        if info.is_main:
            folder.mkdir(parents=True, exist_ok=True)
        barrier(info)
        live = None

        def record_env(search: Search) -> None:  # once the (resumed) state passed its checks
            if info.is_main and search.out == record_env_in:
                from lvsearch.repro import record_environment

                record_environment(record_env_in, str(info.device), resume=opts.resume, what="search")

        def on_iteration(search: Search, t: int) -> None:
            best = search.evaluator.memo[search.topk[0]]
            if info.is_main:
                Arch.from_key(best.key).to_json(search.out / "best.json", space=loaded.space.name,
                                                meta=self.best_meta(best, search.config, label))
            budget = f" of {search.config.budget:,}" if search.config.budget is not None else ""
            title = (f"{label}: iteration {t + 1}/{search.config.iterations} — "
                     f"{len(search.history)} evaluated, {search.passes:,}{budget} dev-sequence passes, "
                     f"{search.evaluator.stats.seconds:.0f}s computing")
            if live is not None:
                live.update(topk_table(search, title))
            elif show:  # a log file: one plain line per iteration, the table once at the end
                ui.console.print(f"[progress] {title}; best {best.fitness:.4f} ({best.key})",
                                 highlight=False, markup=False, soft_wrap=True)

        search = Search(loaded.space, self.evaluator.fork() if control else self.evaluator,
                        cfg, out=folder, write=info.is_main,
                        on_iteration=on_iteration, extra_state=self.extra, on_start=record_env,
                        on_progress=phase_reporter(show, label))
        resume_phase = opts.resume and (folder / STATE).exists()
        if show and (ui.console.is_terminal or ui.console.is_jupyter):
            from rich.live import Live

            with Live(console=ui.console, refresh_per_second=2, transient=False) as live:
                res = search.run(resume=resume_phase, max_iterations=self.max_iterations)
        else:
            res = search.run(resume=resume_phase, max_iterations=self.max_iterations)
            if show and search.topk:
                ui.console.print(topk_table(search, f"{label}: top-{len(search.topk)} after "
                                                    f"{search.iteration} iterations"))
        if res.iteration and info.is_main:
            Arch.from_key(res.best.key).to_json(folder / "best.json", space=loaded.space.name,
                                                meta=self.best_meta(res.best, cfg, label))
            if res.done:
                write_noise(self.evaluator, res, folder, opts.fitness, show)
                if self.racing is not None and len(res.topk) < cfg.topk:
                    ui.warn(f"{label}: the top-k holds {len(res.topk)} of --topk {cfg.topk}: racing scored only "
                            f"{len(res.topk)} candidates on the whole dev set (the rest stopped at a rung and never "
                            "enter the top-k); raise --population or --iterations, or pass --racing off")
        if res.done and res.topk and opts.second_stage.enabled:
            run_second_stage(opts.second_stage, loaded, self.prepared, res, folder, topk=cfg.topk, label=label,
                             fitness=opts.fitness, dev_sequences=self.n_dev, info=info, show=show,
                             best_meta=lambda r: _best_meta(r, loaded, cfg, label, opts.fitness))
        return res
