"""``lvsearch faster``: from a supernet and a latency table to a retrained, faster model and a
side-by-side report, in one resumable command.

The flow of HAT (Wang et al. 2020, sections 3–4) and once-for-all (Cai et al. 2020, section 3.3):
search under the latency measured on the target device, then train the chosen architecture,
with the control lvsearch's latency test uses (docs/results.md, "The latency test"): random
search from the same first population, picked by the same rule. Stages, each skipped when
``OUT`` holds it complete and resumed when partial:

1. ``search``: ``evolve --strategy nsga2 --nsga2-cost latency --latency-table T --sparse-init S
   --racing off --compare-random`` into ``OUT/search``; each arm's ``pick.json``
   (:mod:`lvsearch.search.pick`: the fastest candidate whose fitness reaches the first
   population's median, or ``--pick-fitness-at``).
2. ``retrain``: both picks and the reference (``bert`` by default) with one retrain recipe and
   pretraining seed ``--seed``, at the supernet's width, into ``OUT/retrain/NAME``; when both
   arms pick one architecture it is trained once.
3. ``evaluate``: MLM dev accuracy and its floors (BLiMP with ``--blimp``) into ``OUT/eval/NAME.json``.
4. ``latency``: every model timed end to end at the table's batch, length, dtype and threads
   (:func:`lvsearch.latency.predict.time_named`: the retrained graph), ``rounds`` interleaved
   rounds, the median kept, into ``OUT/latency.json``.
5. ``report``: ``OUT/report.md`` and ``OUT/summary.json``: latency measured and predicted,
   parameters, the evaluation columns of ``lvsearch report``, and NSGA-II's pick against random
   search's (relative latency reduction; MLM accuracy difference with a paired bootstrap over
   the dev targets, which holds evaluation noise only: one search and one pretraining seed say
   nothing about seed noise).
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path

from lvsearch.errors import LvsearchError
from lvsearch.io import atomic_write_json, check_same_settings, check_writable_folder, guard_output, read_json
from lvsearch.lock import holds_output

FORMAT = "lvsearch.faster/v1"
STATE = "faster.json"
SUMMARY_FORMAT = "lvsearch.faster-summary/v1"
ARMS = ("nsga2", "random")
ARM_LABELS = {"nsga2": "NSGA-II pick", "random": "random-search pick"}
#: Model settings that change a forward pass's time: the retrained model must match the supernet
#: in these for the timed graph (extracted from the supernet) to be the retrained model's.
TIMED_DIMS = ("hidden", "embedding", "ff_inner", "heads", "conv_kernel", "pre_ln", "ff_activation",
              "mixing_normalized", "weighted_output", "position", "relative_buckets")
AGAIN = "re-run the same 'lvsearch faster' command to continue"


@dataclass
class FasterSettings:
    """Inputs of :func:`run_faster`; the defaults are those of ``lvsearch faster``.

    Attributes:
        supernet: ``train-supernet`` run folder.
        table: ``lvsearch latency measure`` table of that supernet (device, batch, length,
            dtype and threads of every timing).
        data: prepared data folder (the supernet's tokenizer), for the search's dev set,
            retraining and evaluation.
        population, iterations: NSGA-II's ``P`` and ``T`` (``P × T`` candidates per arm).
        dev_sequences: dev sequences every candidate is scored on (no racing).
        sparse_init: share of the shared first population drawn with sparse ELC mixing.
        pick_fitness_at: the pick's reference fitness (None: the first population's median).
        seed: search seed and pretraining seed of every retrained model.
        retrain_recipe: retrain recipe of every model; ``steps``: its ``train.steps`` (None:
            the recipe's); ``overrides``: further ``--set key=value`` pairs.
        reference: architecture spec retrained beside the picks (``bert``), or None.
        eval_dev_sequences: MLM dev sequences of the evaluation.
        blimp: BLiMP folder (None: no BLiMP); ``blimp_limit``: pairs per paradigm.
        rounds: interleaved timing rounds over all models (median kept).
        device: device of the search, training and evaluation (timing: the table's device).
        latency_any_device: time the models on this machine even when the table was measured on
            another device model (the search still optimises the table's predictions).
    """

    supernet: str
    table: str
    data: str
    population: int = 20
    iterations: int = 10
    dev_sequences: int = 256
    sparse_init: float = 0.5
    pick_fitness_at: float | None = None
    seed: int = 0
    retrain_recipe: str = "retrain-quickstart"
    steps: int | None = None
    overrides: list[str] = field(default_factory=list)
    reference: str | None = "bert"
    eval_dev_sequences: int = 512
    blimp: str | None = None
    blimp_limit: int | None = 100
    rounds: int = 3
    device: str = "auto"
    latency_any_device: bool = False


def check_settings(s: FasterSettings) -> None:
    """Refuse out-of-range numbers before any work.

    Raises:
        LvsearchError: a count below its minimum, ``sparse_init`` outside [0, 1], or a
            non-finite ``pick_fitness_at``."""
    import math

    for flag, value, low in (("--population", s.population, 2), ("--iterations", s.iterations, 1),
                             ("--dev-sequences", s.dev_sequences, 1), ("--eval-dev-sequences", s.eval_dev_sequences, 1),
                             ("--rounds", s.rounds, 1), ("--steps", s.steps, 1), ("--blimp-limit", s.blimp_limit, 1)):
        if value is not None and value < low:
            raise LvsearchError(f"{flag} {value}: must be at least {low}", fix=f"pass {flag} {low} or more")
    if s.seed < 0:
        raise LvsearchError(f"--seed {s.seed}: must be 0 or more", fix="pass a non-negative seed")
    if not 0.0 <= s.sparse_init <= 1.0:
        raise LvsearchError(f"--sparse-init {s.sparse_init}: must be in [0, 1]", fix="pass a share such as 0.5")
    if s.pick_fitness_at is not None and not math.isfinite(s.pick_fitness_at):
        raise LvsearchError(f"--pick-fitness-at {s.pick_fitness_at}: must be a finite fitness",
                            fix="pass a fitness of the search's scale (−loss, e.g. -5.2), or leave it out")


@dataclass
class Faster:
    """An open ``lvsearch faster`` folder: its settings, the state file's stages and paths."""

    out: Path
    settings: FasterSettings
    state: dict
    show_progress: bool = True

    @property
    def search_dir(self) -> Path:
        return self.out / "search"

    def run_dir(self, name: str) -> Path:
        return self.out / "retrain" / name

    def report_path(self, name: str) -> Path:
        return self.out / "eval" / f"{name}.json"

    def done(self, stage: str, result: dict) -> None:
        self.state.setdefault("stages", {})[stage] = {"status": "done", "result": result}
        atomic_write_json(self.out / STATE, self.state)


def open_folder(out: str | Path, settings: FasterSettings, *, show_progress: bool = True) -> Faster:
    """Create ``OUT`` or reopen it to resume.

    Raises:
        LvsearchError: bad settings; ``OUT`` is a file, an input, inside the ``data`` or
            ``blimp`` folder, a non-empty folder that holds no ``lvsearch faster`` run, or one with
            other settings.
    """
    from lvsearch.device import check_device

    check_settings(settings)
    check_device(settings.device)
    out = Path(out).expanduser().resolve()
    if out.exists() and not out.is_dir():
        raise LvsearchError(f"--out {out} is a file", fix="choose a folder path")
    inputs = [("--supernet", settings.supernet), ("--table", settings.table), ("--data", settings.data),
              ("--blimp", settings.blimp)]
    guard_output(out, inputs=[(f, Path(p).expanduser()) for f, p in inputs if p is not None])
    for flag, folder in (("--data", settings.data), ("--blimp", settings.blimp)):
        if folder is not None and Path(folder).expanduser().resolve() in out.parents:
            raise LvsearchError(f"--out {out} is inside the input {flag} {folder}: this run's files would mix with "
                                "the input's", fix=f"pass an --out outside {folder}")
    check_writable_folder(out)
    wanted = asdict(settings)
    path = out / STATE
    if path.exists():
        state = read_json(path, what="lvsearch faster state")
        if not isinstance(state, dict) or state.get("format") != FORMAT or not isinstance(state.get("settings"), dict):
            raise LvsearchError(f"{path} is not an lvsearch faster state file ({FORMAT})",
                                fix="choose another --out, or delete the folder to start again")
        nothing_done = not any((st or {}).get("status") == "done" for st in (state.get("stages") or {}).values())
        if state["settings"] != wanted and nothing_done and not any(
                p.is_file() for p in out.rglob("*") if p.name != STATE and not p.name.startswith(".")):
            # a first try that failed before writing anything (a table of another device, ...)
            state = {"format": FORMAT, "settings": wanted, "stages": {}}
            atomic_write_json(path, state)
        check_same_settings(out, "an lvsearch faster run", state["settings"], wanted,
                            fix="re-run with the same arguments to resume it, or choose another --out")
    else:
        if out.is_dir() and any(out.iterdir()):
            raise LvsearchError(f"--out {out} is not empty and holds no lvsearch faster run",
                                fix="choose a new or empty folder")
        state = {"format": FORMAT, "settings": wanted, "stages": {}}
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_json(path, state)
    return Faster(out, settings, state, show_progress)


# ----------------------------------------------------------------------------- inputs
def supernet_space(supernet: str | Path) -> tuple[str, int, dict, dict]:
    """``(space name, slots, dims, space)`` a supernet run recorded in its ``config.json``
    (``space``: :meth:`lvsearch.space.SearchSpace.to_dict`).

    Raises:
        LvsearchError: the run config is missing or malformed (names the file)."""
    from lvsearch.train.run import SupernetRunConfig, read_config_file

    cfg = read_config_file(supernet, "supernet", SupernetRunConfig, what="supernet run config")
    return cfg["space"]["name"], cfg["space"]["num_slots"], cfg["dims"], cfg["space"]


def retrain_overrides(s: FasterSettings) -> dict:
    """The typed recipe overrides of every retrained model: the supernet's space and slots, the
    pretraining seed, ``steps``, then the user's ``--set`` pairs (which win)."""
    from lvsearch.config import override_map

    name, slots, _, _ = supernet_space(s.supernet)
    base = {"space": name, "num_slots": slots, "train.seed": s.seed}
    if s.steps is not None:
        base["train.steps"] = s.steps
    return {**base, **override_map(s.overrides)}


def check_inputs(s: FasterSettings) -> int:
    """Check the recipe against the supernet before any work; returns the retrain steps.

    Raises:
        LvsearchError: a bad recipe or override, an unreadable table, a ``reference`` that is not
            an architecture of the supernet's space, or a retrained model that
            would differ from the supernet in a setting that changes its speed (:data:`TIMED_DIMS`):
            its timed latency would then not be the retrained model's."""
    from lvsearch.config import RetrainConfig, load_config
    from lvsearch.data.shards import PreparedData
    from lvsearch.latency.table import load_table

    name, slots, sn, space = supernet_space(s.supernet)  # the inputs in the order of the command line
    check_timing_device(load_table(s.table), s)
    data = PreparedData.open(s.data)
    given = retrain_overrides(s)
    cfg, _ = load_config(RetrainConfig, s.retrain_recipe, given)
    dims = cfg.model_settings().dims(data.vocab_size, data.special_ids.pad, cfg.train.seq_len).to_dict()
    if s.reference is not None:  # an unknown name or a bad file fails now, not after the search
        from lvsearch.arch import resolve_arch
        from lvsearch.space import SearchSpace

        try:
            resolve_arch(s.reference, SearchSpace.from_dict(space))
        except LvsearchError as e:
            raise LvsearchError(f"--reference {s.reference}: not an architecture of the supernet's space "
                                f"{name}@{slots} ({e.message})",
                                fix=f"pass a name (bert, sandwich, random:SEED) or an architecture file of {slots} "
                                    "slots of that space (e.g. a pick.json of a search on this supernet), or "
                                    "--reference none") from None
    for key, want in (("space", name), ("num_slots", slots)):
        if given.get(key) != want:
            raise LvsearchError(f"--set {key}={given.get(key)}: the picks are architectures of the supernet's "
                                f"space {name}@{slots}", fix=f"drop --set {key} (the supernet's is used)")
    if s.blimp is not None and not any(Path(s.blimp).glob("*.jsonl")):
        raise LvsearchError(f"--blimp {s.blimp} is not a folder of BLiMP *.jsonl files",
                            fix="pass the BLiMP data folder, or leave --blimp out (no BLiMP)")
    differ = [k for k in TIMED_DIMS if k in sn and sn[k] != dims.get(k)]
    if differ:
        pairs = ", ".join(f"model.{k}: supernet {sn[k]!r}, recipe {dims.get(k)!r}" for k in differ)
        raise LvsearchError(
            f"--config {s.retrain_recipe} retrains another model than the supernet {s.supernet} times ({pairs}); "
            "the latency of the retrained models would not be the one measured",
            fix="pass --set model.KEY=VALUE for each to match the supernet, or a recipe of the supernet's width")
    return cfg.train.steps


def check_timing_device(table, s: FasterSettings) -> None:
    """Refuse, before any work, a table this machine cannot time on: the models are timed end to
    end on the table's device, so that device (same GPU or CPU model) must be here.

    Raises:
        LvsearchError: the table's device kind is absent (no CUDA for a cuda table), or (without
            ``latency_any_device``) this machine's GPU or CPU model is another than the table's."""
    import torch

    from lvsearch.latency.table import MEASURE_COMMAND, device_name

    if table.device == "cuda" and not torch.cuda.is_available():
        raise LvsearchError(f"--table {s.table} was measured on {table.where}, and this machine has no CUDA "
                            "device to time the models on",
                            fix=f"run on the table's machine, or measure a table here: {MEASURE_COMMAND}")
    here = device_name(torch.device(table.device))
    if here != table.device_name and not s.latency_any_device:
        raise LvsearchError(f"--table {s.table} was measured on {table.where}; this machine's {table.device} is "
                            f"{here}, so the models would be timed on another device than the search optimised for",
                            fix=f"measure a table here ({MEASURE_COMMAND}), or pass --latency-any-device to time "
                                "here anyway")


# ----------------------------------------------------------------------------- stages
def stage_search(f: Faster) -> dict:
    """NSGA-II on (fitness, predicted latency) with the random-search control into ``OUT/search``."""
    from lvsearch.search.evolution import SearchConfig
    from lvsearch.search.folder import RANDOM_DIR, SearchFolder
    from lvsearch.search.job import EvolveOptions, evolve

    folder, s = f.search_dir, f.settings
    if not (SearchFolder(folder).finished() and SearchFolder(folder / RANDOM_DIR).finished()):
        opts = EvolveOptions(supernet=s.supernet, out=folder, data=s.data, dev_sequences=s.dev_sequences,
                             compare_random=True, resume=SearchFolder(folder).has_state, device=s.device,
                             racing=None, latency_table=s.table, pick_fitness_at=s.pick_fitness_at,
                             latency_any_device=True)  # the table is the target; the search may run elsewhere
        cfg = SearchConfig(strategy="nsga2", nsga2_cost="latency", population=s.population, iterations=s.iterations,
                           topk=min(10, s.population), seed=s.seed, sparse_init=s.sparse_init)
        evolve(opts, cfg, show_progress=f.show_progress)
    return {arm: str(pick_file(f, arm)) for arm in ARMS}


def pick_file(f: Faster, arm: str) -> Path:
    """The ``pick.json`` of ``arm`` (``nsga2`` or ``random``).

    Raises:
        LvsearchError: the search wrote none (no candidate reached the reference fitness)."""
    from lvsearch.search.folder import RANDOM_DIR, SearchFolder
    from lvsearch.search.pick import PICK_FILE

    folder = f.search_dir if arm == "nsga2" else f.search_dir / RANDOM_DIR
    path = folder / PICK_FILE
    if not path.is_file():
        search = SearchFolder(folder)
        fitness = search.fitness()
        best = max((e["fitness"] for e in search.topk() if e.get("fitness") is not None), default=None)
        at = f"--pick-fitness-at {f.settings.pick_fitness_at:g}" if f.settings.pick_fitness_at is not None \
            else "the first population's median"
        reached = "" if best is None else f"; its best candidate reached {best:.4f}"
        raise LvsearchError(
            f"{ARM_LABELS[arm]}: {path} is missing: no candidate of that search reached the reference fitness "
            f"({at}){reached} (fitness: {fitness.label}, higher is better)",
            fix=("pass --pick-fitness-at " + (f"{best:.4f} or lower" if best is not None else "with a lower fitness")
                 + " into another --out, or leave it out (the first population's median)"))
    return path


def models(f: Faster) -> dict[str, str]:
    """``{name: retrain --arch spec}`` of the models to retrain: ``nsga2``, ``random`` (left out
    when it is NSGA-II's architecture), and the reference."""
    from lvsearch.arch import Arch

    specs = {arm: str(pick_file(f, arm)) for arm in ARMS}
    if Arch.from_json(specs["random"]).key == Arch.from_json(specs["nsga2"]).key:
        del specs["random"]
    if f.settings.reference is not None:
        specs["reference"] = f.settings.reference
    return specs


def stage_retrain(f: Faster, steps: int) -> dict:
    """Retrain (or resume) every model of :func:`models` into ``OUT/retrain/NAME``."""
    from lvsearch.train.retrain import retrain
    from lvsearch.train.run import train_state

    out = {}
    for name, spec in models(f).items():
        run = f.run_dir(name)
        status = train_state(run, steps)
        if status != "done":
            partial = status == "partial"
            retrain(None if partial else spec, None if partial else f.settings.retrain_recipe, f.settings.data, run,
                    overrides={} if partial else retrain_overrides(f.settings), resume=partial,
                    overwrite=status == "new" and run.exists(), device=f.settings.device,
                    show_progress=f.show_progress)
        out[name] = str(run)
    return out


def stage_evaluate(f: Faster) -> dict:
    """Evaluate every retrained model into ``OUT/eval/NAME.json`` (skipped when it exists)."""
    from lvsearch.eval.job import EvaluateOptions, evaluate

    s, out = f.settings, {}
    for name in models(f):
        report = f.report_path(name)
        if not report.is_file():
            report.parent.mkdir(parents=True, exist_ok=True)
            opts = EvaluateOptions(model=str(f.run_dir(name) / "model"), out=report, mlm_data=s.data,
                                   dev_sequences=s.eval_dev_sequences, device=s.device,
                                   blimp=s.blimp, no_blimp=s.blimp is None, blimp_limit=s.blimp_limit if s.blimp else None,
                                   no_blimp_reason=None if s.blimp else "no --blimp given")
            evaluate(opts, show=False)
        out[name] = str(report)
    return out


def stage_latency(f: Faster) -> dict:
    """Time every model end to end at the table's settings, ``rounds`` interleaved rounds;
    ``OUT/latency.json`` keeps each model's median and every round."""
    from lvsearch.latency.predict import time_named
    from lvsearch.latency.table import MeasureOptions, load_table

    s = f.settings
    table = load_table(s.table)
    names = list(models(f))
    specs = [str(pick_file(f, n)) if n in ARMS else s.reference for n in names]
    rounds = []
    for _ in range(s.rounds):
        rec = time_named(s.supernet, specs, opts=MeasureOptions(device=table.device), table=table,
                         table_path=s.table, any_device=s.latency_any_device, show_progress=False)
        rounds.append(rec["rows"])
    record = {
        "format": "lvsearch.faster-latency/v1", "device": rec["device"], "device_name": rec["device_name"],
        "threads": rec["threads"], "batch": rec["batch"], "seq_len": rec["seq_len"], "dtype": rec["dtype"],
        "repeats": rec["repeats"], "rounds": s.rounds,
        "models": {n: {"arch": rounds[0][i]["arch"], "params": rounds[0][i]["params"],
                       "predicted_ms": rounds[0][i]["predicted_ms"],
                       "measured_ms": statistics.median(r[i]["measured_ms"] for r in rounds),
                       "rounds_ms": [r[i]["measured_ms"] for r in rounds]} for i, n in enumerate(names)},
    }
    atomic_write_json(f.out / "latency.json", record)
    return {"file": str(f.out / "latency.json")}


def rounds_overlap(a: list[float], b: list[float]) -> bool | None:
    """Whether two models' timing rounds (ms) overlap, ``[min, max]`` against ``[min, max]``: a
    gap between medians inside that overlap is within the machine's timing noise. None for one
    round each (no spread to compare)."""
    if len(a) < 2 and len(b) < 2:
        return None
    return max(min(a), min(b)) <= min(max(a), max(b))


def comparison(f: Faster, steps: int) -> dict:
    """The summary: per model latency (median and the rounds' range) and evaluation, NSGA-II's
    pick against random search's and against the reference (relative latency reduction
    ``1 − t / t_other`` with whether the rounds overlap; MLM dev accuracy difference in pp with a
    paired bootstrap over the dev targets), and the retrain recipe (``steps``: its steps)."""
    from lvsearch.eval.report import read_report
    from lvsearch.stats import paired_bootstrap

    lat = read_json(f.out / "latency.json", what="lvsearch faster latency record")["models"]
    reports = {n: read_report(f.report_path(n)) for n in models(f)}
    rows = {}
    for n, rep in reports.items():
        m = rep.get("mlm") or {}
        floors = m.get("floors") or {}
        rows[n] = {"arch": lat[n]["arch"], "params": lat[n]["params"], "measured_ms": lat[n]["measured_ms"],
                   "rounds_ms": [min(lat[n]["rounds_ms"]), max(lat[n]["rounds_ms"])],
                   "predicted_ms": lat[n]["predicted_ms"], "mlm_accuracy": m.get("accuracy"), "mlm_loss": m.get("loss"),
                   "floor": (floors.get("neighbour-count") or {}).get("accuracy"), "beats_floor": floors.get("beats_floor"),
                   "blimp": (rep.get("blimp") or {}).get("mean_over_paradigms")}
    rows.setdefault("random", dict(rows["nsga2"], same_as="nsga2"))

    def versus(other: str) -> dict | None:
        if other not in reports and other != "random":
            return None
        a, b = reports["nsga2"], reports.get(other, reports["nsga2"])
        pa, pb = (a.get("mlm") or {}).get("per_target_correct"), (b.get("mlm") or {}).get("per_target_correct")
        boot = paired_bootstrap(pa, pb) if pa and pb and len(pa) == len(pb) else None
        return {"latency_reduction": 1.0 - rows["nsga2"]["measured_ms"] / rows[other]["measured_ms"],
                "latency_rounds_overlap": None if other not in lat else
                rounds_overlap(lat["nsga2"]["rounds_ms"], lat[other]["rounds_ms"]),
                "accuracy_difference_pp": 100.0 * (rows["nsga2"]["mlm_accuracy"] - rows[other]["mlm_accuracy"]),
                "accuracy_ci_pp": None if boot is None else [100.0 * x for x in boot["ci"]],
                "ci_over": "dev targets (evaluation noise only, not seed noise)"}

    return {"format": SUMMARY_FORMAT, "models": rows, "nsga2_vs_random": versus("random"),
            "nsga2_vs_reference": versus("reference"), "reference": f.settings.reference, "seed": f.settings.seed,
            "retrain": {"recipe": f.settings.retrain_recipe, "steps": steps, "overrides": list(f.settings.overrides)}}


def latency_words(reduction: float, overlap: bool | None = None) -> str:
    """``"24.1% less latency"`` for a relative reduction of 0.241 (``"more"`` when negative),
    with what the timing rounds say (``overlap``, :func:`rounds_overlap`): ``"…, within timing
    noise (the rounds overlap)"``, ``"…, outside the rounds' spread"``, or nothing (one round)."""
    words = f"{abs(100 * reduction):.1f}% {'less' if reduction >= 0 else 'more'} latency"
    if overlap is None:
        return words
    return words + (", within timing noise (the rounds overlap)" if overlap else ", outside the rounds' spread")


def retrain_words(retrain: dict) -> str:
    """The report's words for a summary's retrain recipe: the recipe name (as Markdown code), its
    steps and each ``--set`` pair, e.g. ``retrain-quickstart``, 2,000 steps, --set a=1."""
    from lvsearch.ui import plural

    sets = "".join(f", --set {kv}" for kv in retrain["overrides"])
    return f"`{retrain['recipe']}`, {plural(retrain['steps'], 'step')}{sets}"


def report_markdown(f: Faster, summary: dict, lat: dict) -> str:
    """``OUT/report.md``: the latency table, the two comparisons in words, the floor warning,
    what one seed can show, and ``lvsearch report``'s evaluation table of the same models
    (``lat``: ``OUT/latency.json``)."""
    from lvsearch.eval.report import markdown_table, read_report
    from lvsearch.ui import plural

    s, rows = f.settings, summary["models"]
    labels = {**ARM_LABELS, "reference": f"reference ({s.reference})"}

    def num(v, fmt):
        return "—" if v is None else format(v, fmt)

    lines = ["# lvsearch faster: NSGA-II's pick against random search's", "",
             f"Supernet `{s.supernet}`, latency table `{s.table}`; search seed {s.seed}, {s.population} × "
             f"{s.iterations} candidates per arm on {s.dev_sequences} dev sequences; each arm's pick is its fastest "
             "candidate (predicted latency) whose fitness reaches the reference "
             f"({'--pick-fitness-at ' + format(s.pick_fitness_at, 'g') if s.pick_fitness_at is not None else 'the median of the shared first population'}). "
             f"Every model retrained with {retrain_words(summary['retrain'])} (pretraining seed {s.seed}) and timed end to end: "
             f"{lat['device']} ({lat['device_name']}), {plural(lat['threads'], 'torch thread')}, batch {lat['batch']} × "
             f"{lat['seq_len']} tokens, {lat['dtype']}, median of {plural(lat['rounds'], 'round')} of "
             f"{plural(lat['repeats'], 'block')}.", "",
             "| model | arch | params | latency ms (measured) | rounds min–max | predicted | MLM dev accuracy | floor "
             "| beats floor | BLiMP |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for n, r in rows.items():
        label = labels[n] + (" (= NSGA-II's)" if r.get("same_as") else "")
        lo, hi = r["rounds_ms"]
        lines.append(f"| {label} | `{r['arch']}` | {r['params']:,} | {r['measured_ms']:.2f} | {lo:.2f}–{hi:.2f} "
                     f"| {num(r['predicted_ms'], '.2f')} "
                     f"| {num(r['mlm_accuracy'], '.4f')} | {num(r['floor'], '.4f')} "
                     f"| {({True: 'yes', False: 'no'}).get(r['beats_floor'], '—')} | {num(r['blimp'], '.3f')} |")
    lines.append("")
    for key, other in (("nsga2_vs_random", "random search's pick"), ("nsga2_vs_reference", f"the reference {s.reference}")):
        v = summary.get(key)
        if v is None:
            continue
        ci = "" if v["accuracy_ci_pp"] is None else \
            f" (paired bootstrap over the dev targets [{v['accuracy_ci_pp'][0]:+.2f}, {v['accuracy_ci_pp'][1]:+.2f}])"
        lines.append(f"* NSGA-II's pick against {other}: measured "
                     f"{latency_words(v['latency_reduction'], v.get('latency_rounds_overlap'))}; "
                     f"{v['accuracy_difference_pp']:+.2f} pp MLM dev accuracy{ci}.")
    if lat["rounds"] == 1:
        lines += ["", "One timing round: the report cannot tell a latency gap from the machine's timing noise; "
                      "pass `--rounds 3` or more on an otherwise idle machine."]
    below = [labels[n] for n, r in rows.items() if r["beats_floor"] is False and not r.get("same_as")]
    if below:
        if len(below) == sum(1 for r in rows.values() if not r.get("same_as")):
            who = "no model beats the MLM neighbour-count floor: at this retrain budget the accuracy columns say"
        else:
            one = len(below) == 1
            who = (f"{', '.join(below)} {'does' if one else 'do'} not beat the MLM neighbour-count floor: at this "
                   f"retrain budget {'its' if one else 'their'} accuracy says")
        lines += ["", f"**Warning:** {who} nothing about the architecture. Retrain longer (`--steps`) before "
                      "comparing accuracy; the latency columns do not depend on it."]
    lines += ["", "One search and one pretraining seed: the bootstrap interval holds the noise of the dev targets "
              "only. Between pretraining seeds one pick's MLM accuracy moves by about 0.6 pp on the quickstart "
              "recipe (docs/results.md, \"The 10-seed test\"), so run several `--seed` values (each into its own "
              "`--out`) before calling an accuracy difference real; latency does not depend on the seed.", "",
              "## Evaluation", "", markdown_table([read_report(f.report_path(n)) for n in models(f)],
                                                     [labels[n] for n in models(f)]), ""]
    return "\n".join(lines)


def stage_report(f: Faster, steps: int) -> dict:
    """Write ``OUT/summary.json`` and ``OUT/report.md`` (``steps``: the retrain's)."""
    from lvsearch.io import atomic_write_bytes

    summary = comparison(f, steps)
    atomic_write_json(f.out / "summary.json", summary)
    lat = read_json(f.out / "latency.json", what="lvsearch faster latency record")
    atomic_write_bytes(f.out / "report.md", report_markdown(f, summary, lat).encode("utf-8"))
    return {"report": str(f.out / "report.md")}


@holds_output("out")
def run_faster(out: str | Path, settings: FasterSettings, *, show_progress: bool = True) -> dict:
    """Run (or resume) every stage of ``lvsearch faster`` into ``out``; returns the summary
    (``OUT/summary.json``: per model latency and evaluation, NSGA-II's pick against random
    search's and against the reference).

    Raises:
        LvsearchError: bad settings or inputs (:func:`open_folder`, :func:`check_inputs`), no pick
            at the reference fitness (:func:`pick_file`), or a stage's own errors.
    """
    from lvsearch import ui
    from lvsearch.train.loop import RESUME_HINT

    check_settings(settings)
    steps = check_inputs(settings)  # before OUT is created: a bad input leaves nothing behind
    f = open_folder(out, settings, show_progress=show_progress)
    token = RESUME_HINT.set(AGAIN)
    try:
        for name, stage in (("search", stage_search), ("retrain", lambda g: stage_retrain(g, steps)),
                            ("evaluate", stage_evaluate), ("latency", stage_latency),
                            ("report", lambda g: stage_report(g, steps))):
            if (f.state.get("stages", {}).get(name) or {}).get("status") == "done" and \
                    (name != "report" or (f.out / "report.md").is_file()):
                continue
            if show_progress:
                ui.console.print(f"[bold]faster: {name}[/]")
            f.done(name, stage(f))
    finally:
        RESUME_HINT.reset(token)
    return read_json(f.out / "summary.json", what="lvsearch faster summary")
