"""EA versus random search versus reference architectures, over seeds.

For every search seed s: ``lvsearch evolve --compare-random --seed s`` on one supernet, both
searches held to one parameter band (``--min-params``/``--max-params``: ``bert``'s count ± 5%)
and given the same number of evaluations. Then every arm is retrained from scratch with
pretraining seed s (``train.seed``: the same data order and masks for every arm of a seed, so
the arms of one seed are paired) and evaluated with ``lvsearch evaluate`` (MLM on 512 dev
sequences with the neighbour-count floor on the same targets, BLiMP PLL, sentence_polarity):

* ``ea``: the evolutionary search's pick of search seed s;
* ``random-search``: the random search's pick of search seed s (same evaluations);
* ``bert``, ``sandwich``: the reference orders;
* ``random-arch``: one fixed random architecture of the search space (``random:1``, inside the
  band).

Every run is a CLI call (what a user would type), resumable: re-running the script continues
where it stopped (searches with ``--resume``, retrains with ``--resume``, finished evaluations
kept). Runs go in priority order (ea, random-search, bert of every seed first), ``--jobs`` at a
time, each with ``OMP_NUM_THREADS=--threads``; with ``--executor local|slurm`` (lvsearch.dispatch;
docs/cluster.md) every search and run is an independent submitit job instead, ``--max-parallel``
at a time, logs under ``WORK/dispatch/``. ``--report`` only aggregates what exists into
``benchmarks/results/search_arms.json``: per arm and seed the metrics and the floor, seed means,
and for each pair of arms the paired difference with three intervals (seed-level paired
percentile bootstrap, Student t over seeds, and a target-level paired bootstrap that pools the
seeds' dev targets / BLiMP pairs and so shows measurement noise only).

Beside the standalone numbers the report keeps each finished search's pick, its fitness and its
climb (the best complete fitness within each tenth of the strategy search's dev-sequence
passes), the strategy's climb minus random search's paired by seed (``climb_at_passes``), and
with ``--landscape`` (a ``benchmarks/landscape.py`` result of the same space and band) where each
pick sits on it: the landscape's additive per-slot fit at the pick, whether that is in the fit's
top decile of the band, and a retrained pick's percentile among the landscape's random draws.

A long test spans sessions on machines that may not keep ``--work``: a result that records the
supernet's and the corpus's sha256 (every result written by this version) is continued from its
committed JSON. An arm and seed in ``benchmarks/results/<--name>.json`` is not searched or
retrained again, and the report merges it with what ``--work`` holds; a seed whose two
searches are committed (``--report`` writes a result as soon as a search is done, with its
pick's architecture) is not searched again and its picks are retrained from the result; a
seed whose strategy search alone is committed runs only its random-search control, as its own
``evolve --strategy random`` call with the control's settings (the same history and pick as
``--compare-random``'s control). All this only when the
supernet's weights, the corpus's manifest and every setting that changes a result are the
committed ones (a supernet retrained with the same command at the same thread count is
byte-identical); otherwise the run stops with one message before anything is trained.

Bad input (a missing supernet, data or task folder, a ``--work`` that is a file, a
``--seed-list`` seed given twice, a number out of range, an unknown arm, ``--report`` on a
folder without finished runs, a ``--name`` whose file is another benchmark's) is one message
and exit status 2 before anything is trained or written.

Usage::

    python benchmarks/search_arms.py --supernet QS/supernet --data CORPUS --work /tmp/arms \\
        [--seeds 3] [--steps 2000] [--jobs 2] [--report [--landscape LANDSCAPE.json]]

EA against random search over many search seeds with ``lvsearch evolve``'s own fitness and racing
(−loss raced over up to 1024 dev sequences), only the two searched arms, into its own JSON::

    python benchmarks/search_arms.py --supernet QS/supernet --data CORPUS --work /tmp/arms6 \\
        --seeds 6 --arms ea random-search --search-dev-sequences default --name search_arms_6seeds
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from _common import (BAND, RESULTS, add_dispatch, bert_band, best_at_passes, dispatch_options, dispatch_stage,
                     exit_on_failures, machine, paired_rows, result_path, run_lvsearch as lvsearch, run_main,
                     shared_data_dir, write_result)

ARMS = ["ea", "random-search", "bert", "sandwich", "random-arch"]
PAIRS = [("ea", "bert"), ("ea", "random-search"), ("random-search", "bert"), ("ea", "sandwich"),
         ("ea", "random-arch"), ("sandwich", "bert"), ("random-arch", "bert")]
#: The result's ``what``: how a re-run recognises its own output (``--name``).
WHAT = "EA vs random search vs references over seeds (benchmarks/search_arms.py)"


#: Settings a continued run shares with its committed result, or it is refused
#: (:func:`check_continuation`): each changes what a seed's runs measure.
CONTINUE_KEYS = ("supernet_sha256", "data_manifest_sha256", "steps", "strategy", "num_slots", "population",
                 "iterations", "search_dev_sequences", "dev_sequences", "mlm_only", "recipe", "param_band")


def run_settings(args) -> dict:
    """What a result records of the command (``settings``); :data:`CONTINUE_KEYS` among them."""
    return {"supernet": str(args.supernet), "supernet_sha256": args.supernet_sha256,
            "data_manifest_sha256": args.data_manifest_sha256, "steps": args.steps, "seeds": seed_list(args),
            "strategy": args.strategy or "evolution", "num_slots": args.num_slots,
            "population": args.population, "iterations": args.iterations,
            "search_dev_sequences": args.search_dev_sequences, "dev_sequences": args.dev_sequences,
            "blimp_limit": None if args.mlm_only else args.blimp_limit, "mlm_only": args.mlm_only,
            "task": str(args.task), "threads_per_run": args.threads, "jobs": args.jobs, "param_band": BAND,
            "recipe": "retrain-quickstart", "arms": args.arms,
            "search_fitness": "lvsearch evolve's defaults at the time of the run (fitness, racing; see its "
                              "search folders' state.json)"}


def committed_result(args) -> dict:
    """``benchmarks/results/<--name>.json`` when it can be continued (this benchmark's own
    output, recording the supernet's sha256), else ``{}`` (an older result is replaced, as before)."""
    try:
        result = json.loads((RESULTS / f"{args.name}.json").read_text())
    except (OSError, ValueError):
        return {}
    if not own_result(result) or not (result.get("settings") or {}).get("supernet_sha256"):
        return {}
    return result


def check_continuation(args, committed: dict) -> None:
    """Refuse to continue a committed result with another supernet, corpus or setting.

    Raises:
        LvsearchError: a :data:`CONTINUE_KEYS` setting differs from the committed result's
            (named with both values); nothing is trained or written.
    """
    from lvsearch.errors import LvsearchError

    args.rescore_supernet = True
    if not committed:
        return
    ours, theirs = run_settings(args), committed["settings"]
    diff = [k for k in CONTINUE_KEYS if ours[k] != theirs.get(k)]
    if diff == ["supernet_sha256"] and searches_all_committed(args, committed):
        # nothing left to search: the supernet is only used to rescore the picks, which another
        # supernet would not do on the searches' scale, so the committed scores are kept
        args.rescore_supernet = False
        args.report_supernet_sha256, args.supernet_sha256 = args.supernet_sha256, theirs["supernet_sha256"]
        print(f"--supernet {args.supernet} (sha256 {args.report_supernet_sha256[:12]}…) is not the supernet of the "
              f"committed searches ({theirs['supernet_sha256'][:12]}…); every search is committed, so it is not "
              "used: the picks keep their committed supernet fitness, and picks retrained since are not rescored",
              flush=True)
        return
    if diff:
        shown = "; ".join(f"{k}: {theirs.get(k)!r} committed, {ours[k]!r} now" for k in diff)
        raise LvsearchError(f"--name {args.name}: {RESULTS / (args.name + '.json')} was measured with other settings "
                            f"({shown}), so its seeds cannot be continued",
                            fix="pass the committed run's supernet (retrained with the same command at the same "
                                "thread count), corpus and options, or another --name")


def searches_all_committed(args, committed: dict) -> bool:
    """Whether ``committed`` holds, for every seed asked for, the finished search of every
    searched arm with its pick: then no search runs, and the supernet is not needed for one."""
    labels = [label for arm, label in SEARCH_LABELS.items() if arm in args.arms]
    searches = committed.get("searches") or {}
    return bool(labels) and all(((searches.get(str(s)) or {}).get(label) or {}).get("arch")
                                for s in seed_list(args) for label in labels)


def committed_seed(args, arm: str, seed: int) -> dict | None:
    """The committed metrics of ``arm`` at search seed ``seed`` (``args.committed``), or None."""
    return (((args.committed.get("arms") or {}).get(arm) or {}).get("per_seed") or {}).get(str(seed))


def committed_search(args, seed: int) -> dict:
    """The committed ``searches`` entry of ``seed`` (``{}`` when none)."""
    return (args.committed.get("searches") or {}).get(str(seed)) or {}


#: The searched arms and the label of their search in a result's ``searches`` entry.
SEARCH_LABELS = {"ea": "evolution", "random-search": "random"}


def committed_pick(args, arm: str, seed: int) -> dict | None:
    """The architecture (``Arch.to_dict`` without ``meta``) that the committed result records
    as ``arm``'s pick at search seed ``seed`` when that search finished on an earlier machine,
    or None (not committed, or a result from before picks were kept)."""
    return (committed_search(args, seed).get(SEARCH_LABELS[arm]) or {}).get("arch")


def pick_file(args, arm: str, seed: int) -> Path:
    """The ``--arch`` file of a searched arm: the search's ``best.json`` in ``--work``, or, when
    this machine has not run that search, the committed pick written to ``WORK/picks/``."""
    folder = args.work / f"search-{seed}"
    best = folder / "best.json" if arm == "ea" else folder / "random" / "best.json"
    arch = committed_pick(args, arm, seed)
    if best.exists() or arch is None:
        return best
    from lvsearch.io import atomic_write_json

    out = args.work / "picks" / f"{arm}-s{seed}.json"
    atomic_write_json(out, arch)
    return out


def search(args, seed: int, lo: int, hi: int) -> Path:
    out = args.work / f"search-{seed}"
    searched = [arm for arm in SEARCH_LABELS if arm in args.arms]
    if all(committed_seed(args, arm, seed) is not None for arm in searched):
        return out  # both picks retrained in the committed result: nothing left that needs the search
    if all(committed_pick(args, arm, seed) is not None for arm in searched):
        return out  # both searches finished on an earlier machine: their picks are retrained from the result
    ea = committed_search(args, seed).get("evolution") or {}
    if not (out / "state.json").exists() and ea.get("arch") is not None and ea.get("config") is not None:
        return random_control(args, seed, ea, lo, hi)  # the strategy finished on an earlier machine
    if (out / "random" / "best.json").exists() and _search_done(out / "random"):
        return out
    cmd = ["evolve", "--supernet", str(args.supernet), "--out", str(out), "--population", str(args.population),
           "--iterations", str(args.iterations), "--seed", str(seed), "--compare-random",
           "--min-params", str(lo), "--max-params", str(hi)]
    if args.strategy is not None:
        cmd += ["--strategy", args.strategy]
    if args.search_dev_sequences != "default":  # else evolve's defaults: fitness −loss, racing, 1024
        cmd += ["--dev-sequences", str(args.search_dev_sequences)]
    if (out / "state.json").exists():
        cmd.append("--resume")
    lvsearch(cmd, args.work / "logs" / f"search-{seed}.log", args.threads)
    return out


#: The search settings a standalone random control passes to ``evolve`` (every setting that
#: ``SearchConfig`` records, as the CLI takes it).
CONTROL_FLAGS = ("population", "iterations", "crossover", "mutation", "mutation_prob", "input_mutation_prob",
                 "mutation_kind", "topk", "crossover_kind", "seed", "budget")


def control_config(entry: dict) -> dict:
    """The ``SearchConfig`` (as a dict) of the ``--compare-random`` control of the committed
    strategy search ``entry`` (its ``config`` and ``passes``): :func:`lvsearch.search.job.random_control`."""
    from types import SimpleNamespace

    from lvsearch.search.evolution import SearchConfig
    from lvsearch.search.job import random_control as control

    return control(SearchConfig.from_state(entry["config"]), SimpleNamespace(passes=entry["passes"])).to_dict()


def random_control(args, seed: int, ea: dict, lo: int, hi: int) -> Path:
    """Run the random-search control of a seed whose strategy search finished on an earlier
    machine (``ea``: its committed entry) as its own ``evolve --strategy random`` call, into
    ``WORK/search-SEED/random``, the folder ``--compare-random`` gives it. With the control's
    settings (:func:`control_config`: the same seed, so the same first population; the
    strategy's passes as ``--budget``) and the same evaluator settings, it is the control
    ``--compare-random`` runs after the strategy: the same history and pick (a test). Returns
    the seed's search folder.

    Raises:
        LvsearchError: the finished control recorded other settings than the control's.
    """
    out = args.work / f"search-{seed}"
    folder = out / "random"
    want = control_config(ea)
    if not (folder / "best.json").exists() or not _search_done(folder):
        cmd = ["evolve", "--supernet", str(args.supernet), "--out", str(folder), "--strategy", "random",
               "--min-params", str(lo), "--max-params", str(hi)]
        for key in CONTROL_FLAGS:
            if want.get(key) is not None:
                cmd += ["--" + key.replace("_", "-"), str(want[key])]
        if args.search_dev_sequences != "default":
            cmd += ["--dev-sequences", str(args.search_dev_sequences)]
        if (folder / "state.json").exists():
            cmd.append("--resume")
        lvsearch(cmd, args.work / "logs" / f"search-{seed}-random.log", args.threads)
    got = json.loads((folder / "state.json").read_text())["config"]
    if got != want:
        from lvsearch.errors import LvsearchError

        diff = sorted(k for k in set(got) | set(want) if got.get(k) != want.get(k))
        raise LvsearchError(f"{folder}: the random-search control of seed {seed} ran with other settings than the "
                            f"committed strategy's control ({', '.join(diff)})",
                            fix=f"remove {folder} and run again")
    return out


def _search_done(folder: Path) -> bool:
    try:
        return bool(json.loads((folder / "state.json").read_text()).get("done"))
    except (OSError, ValueError):
        return False


def seed_list(args) -> list[int]:
    """The search seeds run and reported: ``--seed-list``, else 0..``--seeds``−1."""
    return list(args.seed_list) if args.seed_list is not None else list(range(args.seeds))


def arch_arg(args, arm: str, seed: int) -> list[str]:
    """The retrain's ``--arch`` (and ``--set num_slots`` when the supernet's slot count is not
    the recipe's 12)."""
    resize = ["--set", f"num_slots={args.num_slots}"] if args.num_slots != 12 else []
    if arm in SEARCH_LABELS:
        return ["--arch", str(pick_file(args, arm, seed)), *resize]
    if arm == "random-arch":
        return ["--arch", "random:1", "--set", f"space={args.space}", *resize]
    return ["--arch", arm, *resize]


def run_arm(args, arm: str, seed: int) -> str:
    run = args.work / "runs" / f"{arm}-s{seed}"
    log = args.work / "logs" / f"{arm}-s{seed}.log"
    report = run / ("mlm.json" if args.mlm_only else "eval.json")
    if report.exists():
        return f"{arm}-s{seed}: done"
    if committed_seed(args, arm, seed) is not None:
        return f"{arm}-s{seed}: in the committed {args.name}.json"
    t0 = time.time()
    if not (run / "summary.json").exists():
        if (run / "checkpoints" / "latest.json").exists():  # continue with the recorded config
            cmd = ["retrain", "--data", str(args.data), "--out", str(run), "--resume"]
        else:  # new, or stopped before its first checkpoint: start (again)
            cmd = ["retrain", *arch_arg(args, arm, seed), "--config", "retrain-quickstart", "--data", str(args.data),
                   "--out", str(run), "--set", f"train.seed={seed}", "--set", f"train.steps={args.steps}",
                   "--set", f"train.eval_every={args.eval_every}", "--set", f"train.checkpoint_every={args.eval_every}",
                   "--set", f"eval.dev_sequences={args.dev_sequences}", "--overwrite"]
        lvsearch(cmd, log, args.threads)
    mlm_eval(args, run, log)
    if args.mlm_only:
        return f"{arm}-s{seed}: {time.time() - t0:.0f} s (MLM only)"
    lvsearch(["evaluate", "--model", str(run / "model"), "--out", str(report), "--blimp", str(args.blimp),
              "--blimp-limit", str(args.blimp_limit),
              "--task", str(args.task), "--seeds", "1", "--train-limit", "1500", "--eval-limit", "500",
              "--threads", str(args.threads), "--dev-sequences", str(args.dev_sequences)], log, args.threads)
    return f"{arm}-s{seed}: {time.time() - t0:.0f} s"


def mlm_eval(args, run: Path, log: Path) -> None:
    """MLM dev accuracy and the neighbour-count floor on the same targets (seconds): ``mlm.json``."""
    if not (run / "mlm.json").exists():
        lvsearch(["evaluate", "--model", str(run / "model"), "--out", str(run / "mlm.json"), "--no-blimp",
                  "--mlm-data", str(args.data), "--dev-sequences", str(args.dev_sequences),
                  "--threads", str(args.threads)], log, args.threads)


def train_all(args) -> None:
    (args.work / "logs").mkdir(parents=True, exist_ok=True)
    ref, lo, hi = args.band
    print(f"bert {ref:,} params; band [{lo:,}, {hi:,}]", flush=True)
    first = [a for a in ARMS[:3] if a in args.arms]
    order = [(arm, s) for s in seed_list(args) for arm in first] + \
            [(arm, s) for s in seed_list(args) for arm in ARMS[3:] if arm in args.arms]
    if not args.dispatch.inline:
        return train_dispatched(args, order, lo, hi)
    with ThreadPoolExecutor(args.jobs) as pool:
        searches = {s: pool.submit(search, args, s, lo, hi) for s in seed_list(args)}
        futures = []
        for arm, s in order:
            def job(arm=arm, s=s):
                if arm in ("ea", "random-search"):
                    searches[s].result()
                return run_arm(args, arm, s)
            futures.append(pool.submit(job))
        for f in futures:
            print(f.result(), flush=True)


def train_dispatched(args, order: list[tuple[str, int]], lo: int, hi: int) -> None:
    """``--executor local|slurm``: the searches and the arms that need no search (``bert``,
    ``sandwich``, ``random-arch``) as independent submitit jobs, then the searched arms whose
    search finished; a failed job is reported with its log after all others ran (exit
    non-zero). Every job resumes what an earlier attempt left (search and run_arm do)."""
    from lvsearch.dispatch import Job

    failures: dict = {}
    searched = ("ea", "random-search")
    first = [Job(f"search-s{s}", search, {"args": args, "seed": s, "lo": lo, "hi": hi}) for s in seed_list(args)]
    first += [Job(f"{arm}-s{s}", run_arm, {"args": args, "arm": arm, "seed": s}) for arm, s in order
              if arm not in searched]
    dispatch_stage(args.dispatch, first, args.work / "dispatch" / "searches-and-references", failures)
    later = [Job(f"{arm}-s{s}", run_arm, {"args": args, "arm": arm, "seed": s}) for arm, s in order
             if arm in searched and f"search-s{s}" not in failures]
    dispatch_stage(args.dispatch, later, args.work / "dispatch" / "searched-arms", failures)
    exit_on_failures(failures, len(first) + len(later))


# ----------------------------------------------------------------------------------------
# Aggregation
# ----------------------------------------------------------------------------------------


def _metrics(report: dict | None, mlm_report: dict) -> dict:
    """One run's metrics from its ``mlm.json`` and (None with ``--mlm-only``) its ``eval.json``."""
    mlm = mlm_report["mlm"]
    out = {
        "mlm_accuracy": mlm["accuracy"], "mlm_loss": mlm["loss"], "mlm_targets": mlm["predicted_tokens"],
        "floor": mlm["floors"]["neighbour-count"]["accuracy"], "beats_floor": mlm["floors"]["beats_floor"],
        "tokens_seen": mlm["floors"]["tokens_seen"], "_mlm_correct": mlm["per_target_correct"],
        "blimp": None, "blimp_pairs": None, "polarity": None, "polarity_metric": None, "_blimp_correct": None,
    }
    if report is None:
        return out
    blimp = report["blimp"]
    pol = report["finetune"]["sentence_polarity"]
    test = pol["aggregate"]["test"]
    metric = pol.get("primary_metric", pol.get("select_metric", "accuracy"))
    out.update(blimp=blimp["mean_over_pairs"], blimp_pairs=blimp["pairs"],
               polarity=(test.get(metric) or test.get("accuracy") or {}).get("mean"), polarity_metric=metric,
               _blimp_correct="".join(p["per_pair_correct"] for _, p in sorted(blimp["paradigms"].items())))
    return out


def merged_rows(args, rows: dict[str, dict[int, dict]]) -> dict[str, dict[int, dict]]:
    """``rows`` (``arm -> seed -> metrics`` of the runs in ``--work``) with every arm and seed
    asked for that ``--work`` lacks taken from the committed result (``source`` "committed";
    without the per-target bits, which a committed result does not keep)."""
    out = {arm: dict(by_seed) for arm, by_seed in rows.items()}
    for arm in args.arms:
        for s in seed_list(args):
            m = committed_seed(args, arm, s)
            if m is not None and s not in out.get(arm, {}):
                out.setdefault(arm, {})[s] = {**m, "source": "committed", "_mlm_correct": None,
                                              "_blimp_correct": None}
    return {arm: dict(sorted(by_seed.items())) for arm, by_seed in out.items()}


def _intervals(a: list[float], b: list[float], a_bits: list[str] | None, b_bits: list[str] | None) -> dict:
    import numpy as np
    from scipy import stats

    from lvsearch.stats import bootstrap_mean_interval

    d = np.asarray(a) - np.asarray(b)
    out = {"mean_difference": float(d.mean()), "per_seed": [float(x) for x in d], "seeds": int(d.size)}
    if d.size >= 2:
        res = stats.bootstrap((np.asarray(a), np.asarray(b)), lambda x, y: np.mean(x - y), paired=True,
                              vectorized=False, n_resamples=9999, method="percentile", random_state=0)
        out["seed_bootstrap_95"] = [float(res.confidence_interval.low), float(res.confidence_interval.high)]
        t = stats.t.interval(0.95, d.size - 1, loc=d.mean(), scale=stats.sem(d)) if d.std() > 0 else (d.mean(), d.mean())
        out["t_95"] = [float(t[0]), float(t[1])]
    if a_bits and b_bits and None not in a_bits and None not in b_bits:  # committed rows keep no bits
        x = np.concatenate([np.frombuffer(s.encode(), np.uint8) - 48 for s in a_bits]).astype(float)
        y = np.concatenate([np.frombuffer(s.encode(), np.uint8) - 48 for s in b_bits]).astype(float)
        out["target_bootstrap_95"] = list(bootstrap_mean_interval(x - y, n_resamples=2000, seed=0))
    return out


#: The dev-sequence counts the arms' picks are rescored on (``rank_check_on_arms``).
RESCORE_DEV = (128, 512)


def supernet_fitness(args, archs: dict) -> dict[int, dict[str, float]]:
    """Each architecture's supernet fitness (accuracy) on ``--supernet``, for every count of
    :data:`RESCORE_DEV` dev sequences: ``{n: {arch key: fitness}}``."""
    from lvsearch.search.evaluator import SupernetEvaluator
    from lvsearch.train.supernet import load_dev, load_supernet

    loaded = load_supernet(args.supernet)
    out = {}
    for n in RESCORE_DEV:
        dev, _ = load_dev(loaded, None, n)
        ev = SupernetEvaluator(loaded.supernet, dev, seq_len=loaded.config.train.seq_len, fitness="accuracy")
        out[n] = {r.key: r.fitness for r in ev.evaluate_many(list(archs.values()))}
    return out


def rank_check_on_arms(args, rows: dict) -> dict:
    """Supernet fitness of the arms' distinct architectures (128 and 512 dev sequences) against
    their standalone MLM accuracy (seed mean): Kendall τ with a paired bootstrap interval."""
    from scipy import stats

    from lvsearch.arch import Arch
    from lvsearch.stats import bootstrap_interval

    if not getattr(args, "rescore_supernet", True):
        return kept_rank_check(args, rows)
    acc: dict[str, list[float]] = {}
    archs: dict[str, Arch] = {}
    for arm, by_seed in rows.items():
        for s in by_seed:
            if by_seed[s].get("key"):
                a = Arch.from_key(by_seed[s]["key"])
            else:  # a row without its key (older results): its run folder's config
                a = Arch.from_dict(json.loads((args.work / "runs" / f"{arm}-s{s}" / "config.json").read_text())["arch"])
            archs[a.key] = a
            acc.setdefault(a.key, []).append(by_seed[s]["mlm_accuracy"])
    scores = supernet_fitness(args, archs)
    out = {"what": "supernet fitness (dev sequences = key) of the arms' architectures vs their standalone MLM accuracy"}
    for n in RESCORE_DEV:
        fit = scores[n]
        keys = sorted(archs)
        x, y = [fit[k] for k in keys], [sum(acc[k]) / len(acc[k]) for k in keys]
        tau, p = stats.kendalltau(x, y)
        out[str(n)] = {"n": len(keys), "kendall_tau": float(tau), "p": float(p),
                       "tau_ci95": list(bootstrap_interval(x, y, "kendall")),
                       "rows": [{"arch": archs[k].compact, "supernet_fitness": fit[k],
                                 "standalone_mlm_accuracy_mean": y[i], "seeds": len(acc[k])} for i, k in enumerate(keys)]}
    return out


def kept_rank_check(args, rows: dict) -> dict | None:
    """The committed ``rank_check_on_arms`` when ``--supernet`` is not the searches' supernet
    (:func:`check_continuation`): no pick is rescored, and the picks it lacks are listed in
    ``not_scored`` (``arm-sSEED``). ``this_supernet_vs_committed`` says how far ``--supernet``'s
    fitness of the committed picks lies from the committed fitness (fractions of the masked
    tokens; 0.01 = 1 pp), per count of dev sequences: why it is not used."""
    from lvsearch.arch import Arch

    kept = args.committed.get("rank_check_on_arms")
    if not isinstance(kept, dict):
        return None
    picks = {f"{arm}-s{s}": Arch.from_key(m["key"]) if m.get("key") else None
             for arm, by_seed in rows.items() for s, m in by_seed.items()}
    by_compact = {a.compact: a for a in picks.values() if a is not None}
    scored = {row["arch"] for block in kept.values() if isinstance(block, dict) for row in block.get("rows", [])}
    missing = [name for name, a in picks.items() if a is None or a.compact not in scored]
    archs = {a.key: a for c, a in by_compact.items() if c in scored}
    now = supernet_fitness(args, archs) if archs else {}
    compared = {}
    for n, fit in now.items():
        d = [fit[by_compact[row["arch"]].key] - row["supernet_fitness"]
             for row in (kept.get(str(n)) or {}).get("rows", []) if row["arch"] in by_compact]
        if d:
            compared[str(n)] = {"picks": len(d), "max_abs_difference": max(map(abs, d)),
                                "mean_difference": sum(d) / len(d)}
    return {**kept, "kept": f"committed fitness of the searches' supernet (sha256 {args.supernet_sha256}); "
                            f"--supernet {args.supernet} has sha256 {args.report_supernet_sha256}",
            "not_scored": missing, "this_supernet_vs_committed": compared}


def search_fitness_rank(searches: dict, rows: dict) -> dict | None:
    """Each retrained pick's fitness in its own search (``best.json``'s ``meta.fitness``, on the
    searches' supernet, higher is better) against its standalone MLM accuracy (mean over the
    runs of the same architecture): Kendall τ with a paired bootstrap interval over the distinct
    picks. It needs no supernet, so it covers every retrained pick. None with fewer than 3 picks
    or mixed fitness metrics."""
    from scipy import stats

    from lvsearch.stats import bootstrap_interval

    fit: dict[str, float] = {}
    acc: dict[str, list[float]] = {}
    metrics = set()
    for arm, label in SEARCH_LABELS.items():
        for s, m in rows.get(arm, {}).items():
            entry = (searches.get(str(s)) or {}).get(label) or {}
            if entry.get("fitness") is None or not m.get("key"):
                continue
            fit[m["key"]] = entry["fitness"]
            acc.setdefault(m["key"], []).append(m["mlm_accuracy"])
            metrics.add(entry.get("fitness_metric"))
    if len(fit) < 3 or len(metrics) != 1:
        return None
    keys = sorted(fit)
    x, y = [fit[k] for k in keys], [sum(acc[k]) / len(acc[k]) for k in keys]
    tau, p = stats.kendalltau(x, y)
    return {"what": "each pick's fitness in its own search vs its standalone MLM accuracy", "metric": metrics.pop(),
            "n": len(keys), "kendall_tau": float(tau), "p": float(p), "tau_ci95": list(bootstrap_interval(x, y, "kendall"))}


#: The unit of a search's fitness by its metric (``best.json``'s ``meta.fitness_metric``).
FITNESS_UNITS = {"loss": "nats (−loss: minus the mean masked-token cross-entropy)",
                 "accuracy": "fraction (masked-token accuracy; 0.01 = 1 pp)"}


def fitness_lead(searches: dict) -> dict | None:
    """The strategy's pick minus random search's pick on the search's own fitness, per search
    seed: ``searches[seed]["evolution"|"random"]`` with ``fitness`` (the pick's fitness; a
    seed without both picks, or with a pick without fitness, is left out) and
    ``fitness_metric`` (``loss``: −loss in nats; ``accuracy``: a fraction; a seed whose two
    searches used different metrics is left out). Returns the per-seed differences, their mean
    with its Student-t 95% interval over seeds (:func:`lvsearch.stats.t_interval`), how many
    seeds the strategy leads (``ahead``), trails (``behind``) or ties (``tied``: both picks
    equally fit, as when both searches pick the same architecture), the metric and its unit;
    the mean and interval are None when the seeds' searches used different metrics. None
    with fewer than 2 paired seeds."""
    from lvsearch.stats import t_interval

    d, metric_of = {}, {}
    for s, v in searches.items():
        if not {"evolution", "random"} <= set(v) or None in (v["evolution"]["fitness"], v["random"]["fitness"]):
            continue
        metrics = {v[k].get("fitness_metric") for k in ("evolution", "random")} - {None}
        if len(metrics) > 1:
            continue
        d[s] = v["evolution"]["fitness"] - v["random"]["fitness"]
        metric_of[s] = next(iter(metrics), None)
    if len(d) < 2:
        return None
    metrics = set(metric_of.values()) - {None}
    one = len(metrics) <= 1
    ci = t_interval(list(d.values())) if one else None
    metric = next(iter(metrics), None) if one else "mixed: " + ", ".join(sorted(metrics))
    return {"per_seed": d, "n": len(d), "mean": sum(d.values()) / len(d) if one else None,
            "t95": list(ci) if ci else None, "ahead": sum(x > 0 for x in d.values()),
            "behind": sum(x < 0 for x in d.values()), "tied": sum(x == 0 for x in d.values()),
            "metric": metric, "unit": FITNESS_UNITS.get(metric)}


#: Where a search's climb is read: tenths of its seed's strategy search's dev-sequence passes.
CLIMB_FRACTIONS = [i / 10 for i in range(1, 11)]


def add_climbs(searches: dict, histories: dict) -> None:
    """Give every search this machine ran its climb at equal compute, in place:
    ``searches[seed][label]["climb"]`` = the best complete fitness within each tenth of the
    seed's strategy (``evolution``) search's dev-sequence passes (``pass_marks``, from its
    ``passes``; :func:`_common.best_at_passes`), read from ``histories[(seed, label)]`` (the
    search's ``state.json`` history). The random-search control spends the strategy's passes, so
    both of a seed's curves share the marks. A committed search keeps the climb it was committed
    with; a seed without its strategy search's passes gets none."""
    for (seed, label), hist in histories.items():
        ea = searches.get(seed, {}).get("evolution", {})
        if not ea.get("passes"):
            continue
        marks = [round(ea["passes"] * f) for f in CLIMB_FRACTIONS]
        searches[seed][label]["climb"] = {"pass_marks": marks, "best_at_passes": best_at_passes(hist, marks)}


def climb_lead(searches: dict) -> list[dict] | None:
    """The strategy's climb minus random search's at equal dev-sequence passes, paired by seed
    (:func:`add_climbs`): per tenth of the passes (``fraction_of_passes``), the mean difference
    of the best fitness so far (the search's fitness unit, :data:`FITNESS_UNITS`), its Student-t
    95% interval over seeds and the seeds the strategy leads (:func:`_common.paired_rows`). The
    secondary outcome beside the standalone one: does the strategy climb its fitness faster?
    None with fewer than 2 seeds holding both climbs."""
    both = {s: v for s, v in searches.items()
            if all("climb" in v.get(label, {}) for label in ("evolution", "random"))
            and v["evolution"]["climb"]["pass_marks"] == v["random"]["climb"]["pass_marks"]}
    if len(both) < 2:
        return None
    seeds = sorted(both, key=int)
    return paired_rows({s: both[s]["evolution"]["climb"] for s in seeds},
                       {s: both[s]["random"]["climb"] for s in seeds}, seeds, "best_at_passes",
                       "fraction_of_passes", CLIMB_FRACTIONS)


#: A pick's arm (``rows``) and its search's label (``searches``).
PICK_ARMS = {"ea": "evolution", "random-search": "random"}


def landscape_placement(landscape_result: dict, searches: dict, rows: dict, counter: dict | None) -> dict | None:
    """Where each pick sits on a landscape (``--landscape``: a ``benchmarks/landscape.py`` result
    of the same space and band), the pre-registered secondary outcomes besides the climb:

    * ``predicted``: the landscape's additive per-slot fit (``landscape.additive_fit``, refitted
      on its trained architectures) at the pick, in accuracy (a fraction), and ``top_decile``:
      above the fit's 90th percentile over seeded band draws (``counter``: what
      ``landscape.PARAM_COUNTER`` needs to draw the band; None gives no ``top_decile``);
    * ``percentile_among_random_draws``: once the pick is retrained (``rows[arm][seed]``), its
      standalone MLM accuracy as a percentile (0–100) of the mean accuracy of the landscape's
      random draws inside its band (``landscape.is_random_draw``) (``scipy.stats.percentileofscore``, ties counted half).

    Per seed and arm (``ea``, ``random-search``), with per arm how many picks are in the top
    decile and the mean percentile. None when the landscape has too few trained architectures
    for the fit (fewer than 8) or no search has a pick.
    """
    import landscape as ls
    from scipy.stats import percentileofscore

    from lvsearch.arch import Arch

    archs = landscape_result["archs"]
    band = landscape_result["settings"]["band"]
    draws = [r["accuracy_mean"] for r in archs if ls.is_random_draw(r, band) and r.get("accuracy_mean") is not None]
    counter = counter or {}
    picks = {f"{arm}-s{seed}": ls.arch_choices(Arch.from_dict(v[label]["arch"]), counter)
             for seed, v in searches.items() for arm, label in PICK_ARMS.items() if "arch" in v.get(label, {})}
    fit = ls.additive_fit(archs, predict=picks, counter=counter) if picks else None
    if fit is None:
        return None
    p90 = fit.get("random_p90_predicted")
    per_seed: dict = {}
    for name, predicted in fit["predicted"].items():
        arm, _, seed = name.rpartition("-s")
        acc = rows.get(arm, {}).get(int(seed), {}).get("mlm_accuracy")
        per_seed.setdefault(seed, {})[arm] = {
            "predicted": predicted, "top_decile": None if p90 is None else predicted > p90,
            "mlm_accuracy": acc,
            "percentile_among_random_draws": float(percentileofscore(draws, acc, kind="mean"))
            if acc is not None and draws else None}
    summary = {}
    for arm in PICK_ARMS:
        mine = [v[arm] for v in per_seed.values() if arm in v]
        pct = [m["percentile_among_random_draws"] for m in mine if m["percentile_among_random_draws"] is not None]
        summary[arm] = {"picks": len(mine), "top_decile": sum(bool(m["top_decile"]) for m in mine) if p90 else None,
                        "retrained": len(pct), "mean_percentile_among_random_draws": sum(pct) / len(pct) if pct else None}
    return {"random_draws": len(draws), "fit_loo_r2": fit["loo_r2"], "fit_n": fit["n"],
            "random_median_predicted": fit.get("random_median_predicted"), "random_p90_predicted": p90,
            "band_draws": fit.get("band_draws"), "per_seed": dict(sorted(per_seed.items(), key=lambda kv: int(kv[0]))),
            "per_arm": summary}


def report(args) -> Path:
    """Aggregate the finished runs of ``args.work`` into ``benchmarks/results/<--name>.json``
    and return its path.

    Raises:
        LvsearchError: no finished run of the arms and seeds asked for (nothing is written).
    """
    from lvsearch.arch import Arch

    rows: dict[str, dict[int, dict]] = {}
    for arm in args.arms:
        for s in seed_list(args):
            run = args.work / "runs" / f"{arm}-s{s}"
            full = (run / "eval.json").exists()
            if not (full or (args.mlm_only and (run / "mlm.json").exists())):
                continue
            mlm_eval(args, run, args.work / "logs" / f"{arm}-s{s}.log")
            m = _metrics(json.loads((run / "eval.json").read_text()) if full else None,
                         json.loads((run / "mlm.json").read_text()))
            summ = json.loads((run / "summary.json").read_text())
            cfg = json.loads((run / "config.json").read_text())
            m.update(arch=cfg["arch"]["ops"], key=Arch.from_dict(cfg["arch"]).key, params=summ["params"],
                     steps=summ["steps"], tokens=summ["tokens"], train_seconds=summ.get("seconds_this_process"),
                     source="this run")
            rows.setdefault(arm, {})[s] = m
    rows = merged_rows(args, rows)
    searches, histories = {}, {}
    for s in seed_list(args):
        for label, folder in (("evolution", args.work / f"search-{s}"), ("random", args.work / f"search-{s}" / "random")):
            try:
                best = json.loads((folder / "best.json").read_text())
                state = json.loads((folder / "state.json").read_text())
            except (OSError, ValueError):
                continue
            if not state.get("done"):
                continue  # still running: its best so far is not its pick
            meta = best.get("meta", {})
            hist = state.get("history", [])
            searches.setdefault(str(s), {})[label] = {
                "best_ops": best.get("ops"), "fitness": meta.get("fitness"),
                "fitness_metric": meta.get("fitness_metric"), "params": meta.get("params"),
                "evaluations": len(hist), "passes": state.get("passes"),
                "dc_in_slot_1": Arch.from_dict(best).ops[0] == "DC",
                "arch": {k: v for k, v in best.items() if k != "meta"}, "config": state.get("config")}
            histories[(str(s), label)] = hist
        for label, entry in committed_search(args, s).items():  # searched on an earlier machine
            searches.setdefault(str(s), {}).setdefault(label, entry)
    add_climbs(searches, histories)
    if not rows and not searches:
        from lvsearch.errors import LvsearchError

        wanted = "eval.json" if not args.mlm_only else "mlm.json or eval.json"
        raise LvsearchError(f"--report: --work {args.work} holds no finished run of the arms {', '.join(args.arms)} "
                            f"and seeds {', '.join(map(str, seed_list(args)))} (runs/ARM-sSEED/{wanted}) and no "
                            "finished search",
                            fix="train first (the same command without --report), or pass the --work, --arms and "
                                "seeds of a finished run")
    arms = {}
    for arm, by_seed in rows.items():
        vals = list(by_seed.values())
        arms[arm] = {
            "seeds": sorted(by_seed),
            "per_seed": {str(s): {k: v for k, v in m.items() if not k.startswith("_")} for s, m in sorted(by_seed.items())},
            "mean": {k: sum(m[k] for m in vals) / len(vals) for k in ("mlm_accuracy", "floor", "blimp", "polarity", "params")
                     if all(m[k] is not None for m in vals)},
            "all_beat_floor": all(m["beats_floor"] for m in vals),
        }
    pairs = {}
    for a, b in PAIRS:
        common = sorted(set(rows.get(a, {})) & set(rows.get(b, {})))
        if not common:
            continue
        ra, rb = rows[a], rows[b]
        pairs[f"{a} - {b}"] = {
            "seeds": common,
            "mlm_accuracy": _intervals([ra[s]["mlm_accuracy"] for s in common], [rb[s]["mlm_accuracy"] for s in common],
                                       [ra[s]["_mlm_correct"] for s in common], [rb[s]["_mlm_correct"] for s in common]),
        }
        if all(r[s]["blimp"] is not None for r in (ra, rb) for s in common):
            pairs[f"{a} - {b}"].update(
                blimp=_intervals([ra[s]["blimp"] for s in common], [rb[s]["blimp"] for s in common],
                                 [ra[s]["_blimp_correct"] for s in common], [rb[s]["_blimp_correct"] for s in common]),
                polarity=_intervals([ra[s]["polarity"] for s in common], [rb[s]["polarity"] for s in common], None, None))
    result = {
        "what": WHAT,
        "settings": run_settings(args),
        "machine": machine(), "searches": searches, "arms": arms, "pairs": pairs,
        "dc_in_slot_1": {label: sum(v[label]["dc_in_slot_1"] for v in searches.values() if label in v)
                         for label in ("evolution", "random")},
        "search_fitness": fitness_lead(searches),
        "climb_at_passes": climb_lead(searches),
        "landscape": None if args.landscape is None else {
            "file": str(args.landscape),
            **(landscape_placement(args.landscape_result, searches, rows, args.param_counter) or {})},
        "rank_check_on_arms": rank_check_on_arms(args, rows) if len(rows) > 1 else None,
        "search_fitness_vs_standalone": search_fitness_rank(searches, rows),
    }
    if not getattr(args, "rescore_supernet", True):
        result["settings"]["report_supernet_sha256"] = args.report_supernet_sha256
    return write_result(args.name, result)


def own_result(result) -> bool:
    """True for a result this benchmark wrote (its ``what`` is :data:`WHAT`): the file a
    ``--name`` may replace."""
    return isinstance(result, dict) and result.get("what") == WHAT


def search_dev_sequences(text: str) -> str:
    """``--search-dev-sequences``: ``default`` or a number of dev sequences ≥ 1 (as text, the
    way ``evolve --dev-sequences`` takes it and the result's settings record it)."""
    from lvsearch.argtypes import positive_count

    return "default" if text.strip() == "default" else str(positive_count(text))


def check_landscape(path: Path, space, band: tuple[int, int]) -> dict:
    """``--landscape``: a ``benchmarks/landscape.py`` result of the supernet's space (``space``)
    and parameter band (``band``: bert's count ± BAND). Returns the result, read once.

    Raises:
        LvsearchError: the file is missing, not JSON, another benchmark's output or of another
            space or band, naming the file and the fix.
    """
    import landscape as ls

    from lvsearch.errors import LvsearchError

    fix = "pass the landscape result of this supernet's space and width (benchmarks/results/landscape_*.json)"
    try:
        got = json.loads(path.read_text())
    except OSError as e:
        raise LvsearchError(f"--landscape {path}: cannot be read ({e.strerror or e})", fix=fix) from None
    except ValueError as e:
        raise LvsearchError(f"--landscape {path} is not JSON ({e})", fix=fix) from None
    if not isinstance(got, dict) or not str(got.get("what", "")).startswith("the landscape of") \
            or not isinstance(got.get("plan"), dict) or not isinstance(got.get("archs"), list):
        raise LvsearchError(f"--landscape {path} is not a benchmarks/landscape.py result", fix=fix)
    want = ls.plan_space_of(space)
    if got["plan"].get("space") != want or got["plan"].get("band") != list(band):
        raise LvsearchError(f"--landscape {path} is of {got['plan'].get('space')} in the band {got['plan'].get('band')}, "
                            f"the supernet of {want} in the band {list(band)}", fix=fix)
    return got


def check_args(args) -> None:
    """Bad input, before anything is trained or written: ``--seed-list`` with a seed twice,
    ``--work`` that is not a folder that can be written (``--report``: an existing folder),
    ``--data`` or ``--task`` missing, and ``--supernet`` that is not a supernet run (loaded:
    ``args.num_slots`` and ``args.band``, bert's count and its ± BAND band, are taken from it),
    ``--data`` that is not a prepared corpus, and a committed result of ``--name`` measured with
    other settings (:func:`check_continuation`; ``args.committed`` is the result continued).

    Raises:
        LvsearchError: the first of these, naming the option and the fix.
    """
    from lvsearch.errors import LvsearchError
    from lvsearch.io import check_writable_folder
    from lvsearch.data.shards import PreparedData
    from lvsearch.train.supernet import load_supernet

    seeds = seed_list(args)
    twice = sorted({s for s in seeds if seeds.count(s) > 1})
    if twice:
        raise LvsearchError(f"--seed-list {' '.join(map(str, seeds))}: seed(s) {', '.join(map(str, twice))} given "
                            "more than once (each seed is one search and one run per arm)",
                            fix="pass each search seed once")
    check_writable_folder(args.work, "--work")
    if args.report and not args.work.is_dir():
        raise LvsearchError(f"--report: --work {args.work} does not exist", fix="pass the --work folder of a run")
    for flag, path in (("--data", args.data), ("--task", args.task)):
        if not path.is_dir():
            raise LvsearchError(f"{flag} {path} is not a folder", fix=f"pass an existing {flag} folder")
    loaded = load_supernet(args.supernet)
    args.num_slots = loaded.space.num_slots
    args.band = bert_band(loaded)
    args.supernet_sha256 = loaded.weights_sha256
    args.data_manifest_sha256 = PreparedData.open(args.data).manifest_sha256
    args.param_counter = {"count": loaded.supernet.num_params, "band": args.band[1:], "space": loaded.space,
                          "dims": loaded.dims, "space_has_variants": any(v for _, v in loaded.space.choices())}
    args.landscape_result = None if args.landscape is None else check_landscape(args.landscape, loaded.space,
                                                                                  args.band[1:])
    args.committed = committed_result(args)
    check_continuation(args, args.committed)


def main() -> None:
    from lvsearch.argtypes import count, positive_count

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--supernet", type=Path, required=True)
    p.add_argument("--data", type=Path, required=True, help="prepared corpus (lvsearch data prepare --vocab-size 4096)")
    p.add_argument("--work", type=Path, required=True, help="folder for searches, runs and logs (resumable)")
    p.add_argument("--space", default="lvbert-elc", help="space of the random-arch arm (the supernet's family)")
    p.add_argument("--seeds", type=positive_count, default=3)
    p.add_argument("--seed-list", type=count, nargs="+", default=None,
                   help="search seeds to run and report instead of 0..--seeds-1 (each once)")
    p.add_argument("--strategy", choices=["evolution", "aging"], default=None,
                   help="the searched arm's strategy (evolve --strategy; default: evolve's, evolution)")
    p.add_argument("--steps", type=positive_count, default=2000, help="retrain steps per arm (batch 32 × 64 tokens)")
    p.add_argument("--eval-every", type=positive_count, default=400)
    p.add_argument("--dev-sequences", type=positive_count, default=512)
    p.add_argument("--population", type=positive_count, default=20)
    p.add_argument("--iterations", type=positive_count, default=10)
    p.add_argument("--search-dev-sequences", type=search_dev_sequences, default="128",
                   help="dev sequences of the search's fitness (evolve --dev-sequences; fitness and racing are evolve's "
                        "defaults), or 'default': evolve's default count too (1024). The committed 3-seed benchmark used "
                        "128 with the accuracy fitness and no racing, evolve's defaults then")
    p.add_argument("--arms", nargs="+", choices=ARMS, default=ARMS, help="arms to train (default: all five)")
    p.add_argument("--name", default="search_arms",
                   help="result name: benchmarks/results/NAME.json (a re-run replaces only its own output)")
    p.add_argument("--mlm-only", action="store_true",
                   help="evaluate MLM dev accuracy and its floor only (no BLiMP, no fine-tuning): ~25%% less time")
    p.add_argument("--blimp-limit", type=positive_count, default=100)
    p.add_argument("--task", type=Path, default=None, help="fine-tuning task (default: shared sentence_polarity)")
    p.add_argument("--jobs", type=positive_count, default=2)
    p.add_argument("--threads", type=positive_count, default=1)
    add_dispatch(p, "the searches and the retrain + evaluate of every arm and seed")
    p.add_argument("--landscape", type=Path, default=None,
                   help="a benchmarks/landscape.py result of the same space and band: the report places each pick "
                        "on it (the additive fit's prediction and top decile, percentile among its random draws)")
    p.add_argument("--report", action="store_true", help="only aggregate what exists")
    args = p.parse_args()
    args.dispatch = dispatch_options(args)
    result_path(args.name, own=own_result)
    args.supernet, args.data, args.work = args.supernet.resolve(), args.data.resolve(), args.work.resolve()
    args.landscape = args.landscape.resolve() if args.landscape is not None else None
    if args.task is None:
        args.task = shared_data_dir() / "tasks" / "sentence_polarity"
    args.blimp = shared_data_dir() / "blimp"
    check_args(args)
    if not args.report:
        train_all(args)
    print(report(args))


if __name__ == "__main__":
    run_main(main)
