"""The ``lvsearch evaluate`` job: BLiMP (zero-shot), fine-tuning tasks and MLM dev metrics of
one model, written as a JSON report and a Markdown table beside it.

Every input is checked before any long computation starts (model directory, BLiMP files, task
files, prepared data and its tokenizer, the report path), so a bad argument fails in seconds
with one message and nothing is written. The JSON report (format
:data:`lvsearch.eval.report.REPORT_FORMAT`, atomic write) holds everything needed to compare
models: per-paradigm / per-phenomenon BLiMP accuracy with tie counts, fine-tuning results per
seed and aggregated, MLM dev metrics with the reference floors, the model config and timings;
the Markdown table of the headline numbers is written beside it (same path, ``.md``).
:func:`lvsearch.eval.report_console.compare_reports` prints reports side by side (``lvsearch evaluate --compare``).
The command line (:mod:`lvsearch.eval.cli`) only parses arguments into :class:`EvaluateOptions`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lvsearch import tracking
from lvsearch.errors import LvsearchError
from lvsearch.eval.blimp import DEFAULT_METRIC
from lvsearch.eval.finetune import FinetuneConfig
from lvsearch.eval.report import DEFAULT_REPORT_NAME, REPORT_FORMAT, is_eval_markdown, is_eval_report
from lvsearch.eval.report_console import print_summary
from lvsearch.io import check_writable_folder, guard_output
from lvsearch.lock import holds_output

#: Which BLiMP pairs ``blimp_limit`` keeps (recorded in the report as ``blimp.limit_rule``).
BLIMP_LIMIT_RULE = "first N pairs of each paradigm, in file order"

_FT = FinetuneConfig()


@dataclass
class EvaluateOptions:
    """Inputs of :func:`evaluate`; the defaults are those of ``lvsearch evaluate``.

    Attributes:
        model: model directory (``config.json``, ``model.safetensors``, ``tokenizer.json``), or
            ``hf:PATH_OR_NAME`` for a Hugging Face masked LM (:mod:`lvsearch.eval.hf`).
        out: JSON report path (default: ``MODEL_DIR/results.json``); the Markdown table goes to
            the same path with suffix ``.md``.
        overwrite: replace an existing report (otherwise refused).
        device: torch device: ``auto`` (cuda when available, else cpu), ``cpu``, ``cuda``, ``cuda:N``.
        threads: torch CPU threads (None: torch's choice).
        trust_remote_code, allow_pickle: consent for ``hf:`` models only (SECURITY.md).
        blimp: folder of BLiMP ``*.jsonl`` files (None: :func:`default_blimp_dir` if present).
        no_blimp: skip BLiMP.
        blimp_limit: pairs per paradigm (:data:`BLIMP_LIMIT_RULE`; None: all).
        blimp_token_budget: max rows × padded length per PLL forward pass.
        blimp_metric: ``pll-word-l2r`` or ``pll`` (:data:`lvsearch.eval.blimp.METRICS`).
        blimp_precision: ``fp32``, ``bf16`` or ``auto`` (:func:`lvsearch.eval.blimp.resolve_precision`).
        tasks: fine-tuning task folders or HF dataset specs ``[hf:]NAME:CONFIG``.
        epochs, lr, layer_decay, batch_size, max_len, train_limit, eval_limit, pooling, class_weight,
            sampler, min_steps: fine-tuning settings (:class:`lvsearch.eval.finetune.FinetuneConfig`;
            ``lr=None``: the width rule).
        seeds: number of fine-tuning seeds ``0..seeds-1``.
        mlm_data: prepared data folder (``lvsearch data prepare``) for the MLM dev metrics and
            floors (None: no MLM metrics).
        dev_sequences, dev_seq_len, dev_seed: the MLM dev set (None: :func:`mlm_dev_settings`).
    """

    model: str
    out: str | Path | None = None
    overwrite: bool = False
    device: str = "auto"
    threads: int | None = None
    trust_remote_code: bool = False
    allow_pickle: bool = False
    blimp: str | Path | None = None
    no_blimp: bool = False
    #: why BLiMP is skipped when ``no_blimp`` was set by a caller rather than by --no-blimp
    no_blimp_reason: str | None = None
    blimp_limit: int | None = None
    blimp_token_budget: int = 8192
    blimp_metric: str = DEFAULT_METRIC
    blimp_precision: str = "fp32"
    tasks: Sequence[str] = ()
    epochs: int = _FT.epochs
    lr: float | None = None
    layer_decay: float = _FT.layer_decay
    batch_size: int = 32
    max_len: int = 128
    seeds: int = 3
    train_limit: int | None = None
    eval_limit: int | None = None
    pooling: str = _FT.pooling
    class_weight: str = _FT.class_weight
    sampler: str = _FT.sampler
    min_steps: int = _FT.min_steps
    mlm_data: str | Path | None = None
    dev_sequences: int | None = None
    dev_seq_len: int | None = None
    dev_seed: int | None = None


@dataclass
class EvaluateResult:
    """What :func:`evaluate` wrote: the report (``lvsearch.eval-report/v1`` dict) and its two paths."""

    report: dict
    json_path: Path
    markdown_path: Path


def default_blimp_dir() -> Path:
    """``<repo>/../shared/data/blimp`` (may not exist)."""
    import lvsearch

    return (Path(lvsearch.__file__).resolve().parents[1] / ".." / "shared" / "data" / "blimp").resolve()


def mlm_dev_settings(opts: EvaluateOptions, training_args: dict | None, data) -> dict:
    """The MLM dev set ``evaluate`` scores on: each of ``opts.dev_seq_len``, ``opts.dev_sequences``
    and ``opts.dev_seed`` when given, else the model's own training dev set as recorded in its
    ``training_args.json`` (``train.seq_len``, ``eval.dev_sequences``, ``eval.seed``: the dev set
    its learning curve and, for a searched architecture, the search scored), else the dataset's
    packing length, 256 sequences and seed 1234. Returns ``{"seq_len", "num_sequences", "seed",
    "source"}`` with ``source`` saying where each value came from."""
    ta = training_args if isinstance(training_args, dict) else {}
    train = ta.get("train") if isinstance(ta.get("train"), dict) else {}
    ev = ta.get("eval") if isinstance(ta.get("eval"), dict) else {}
    picks = []
    out = {}
    for key, flag, given, recorded, fallback, fallback_name in (
            ("seq_len", "--dev-seq-len", opts.dev_seq_len, train.get("seq_len"), data.seq_len, "the dataset's"),
            ("num_sequences", "--dev-sequences", opts.dev_sequences, ev.get("dev_sequences"), 256, "default"),
            ("seed", "--dev-seed", opts.dev_seed, ev.get("seed"), 1234, "default")):
        if given is not None:
            out[key], src = given, flag
        elif isinstance(recorded, int) and not isinstance(recorded, bool) and recorded > (0 if key != "seed" else -1):
            out[key], src = recorded, "model's training dev set"
        else:
            out[key], src = fallback, fallback_name
        picks.append(f"{key} from {src}")
    out["source"] = "; ".join(picks)
    return out


def report_path(opts: EvaluateOptions) -> Path | None:
    """Where :func:`evaluate` writes its JSON report: ``--out``, else ``MODEL_DIR/``
    :data:`~lvsearch.eval.report.DEFAULT_REPORT_NAME`; None for an ``hf:`` model that is not a
    local folder and no ``--out`` (refused by :func:`evaluate`)."""
    from lvsearch.eval.hf import HF_PREFIX, is_hf_spec

    model_arg = str(opts.model)
    hf = is_hf_spec(model_arg)
    model_dir = Path(model_arg[len(HF_PREFIX):] if hf else model_arg).expanduser()
    if opts.out:
        return Path(opts.out)
    return None if hf and not model_dir.is_dir() else model_dir / DEFAULT_REPORT_NAME


@dataclass
class _Model:
    """The model under evaluation, loaded: an lvsearch model directory (``loaded``, a
    :class:`~lvsearch.modeldir.LoadedModel`) or an ``hf:`` model (``hf_model``, :mod:`lvsearch.eval.hf`)."""

    arg: str  # --model as given
    device: str  # the resolved torch device
    loaded: Any = None
    hf_model: Any = None

    @property
    def hf(self) -> bool:
        return self.hf_model is not None

    @property
    def objective(self) -> str:
        return "hf" if self.hf else self.loaded.objective

    @property
    def tokenizer(self):
        return self.hf_model.tokenizer if self.hf else self.loaded.tokenizer

    @property
    def encoder(self):
        return self.hf_model.encoder if self.hf else self.loaded.encoder

    @property
    def scorer(self):
        """The model with its own MLM head (BLiMP and MLM metrics score with it unless an ELECTRA
        generator takes its place)."""
        return self.hf_model.scorer if self.hf else self.loaded.encoder

    @property
    def training_args(self):
        return self.hf_model.training_args if self.hf else self.loaded.training_args

    @property
    def extra(self) -> dict:
        return self.hf_model.extra if self.hf else (self.loaded.config.get("extra") or {})

    def info(self) -> dict:
        """The report's ``model`` entry."""
        if self.hf:
            m = self.hf_model
            return {
                "folder": str(m.folder.resolve()) if m.folder is not None else self.arg,
                "name": m.name,
                "config": m.config,
                "num_params": m.num_params,
                "generator_num_params": None,
                "training_args": m.training_args,
            }
        m = self.loaded
        return {
            "folder": str(m.folder.resolve()),
            "name": m.folder.resolve().name,
            "config": m.config,
            "num_params": m.encoder.num_params(),
            "generator_num_params": m.generator.num_params() if m.generator is not None else None,
            "training_args": m.training_args,
        }


@dataclass
class _Inputs:
    """What :func:`evaluate` checked before the long work starts: the model, where the report goes,
    and what BLiMP, fine-tuning and the MLM metrics will run on (``None``: that part does not run)."""

    model: _Model
    out: Path  # the JSON report
    md_out: Path  # the Markdown table beside it
    blimp_dir: Path | None
    paradigms: Any  # read BLiMP paradigms, or None
    blimp_note: dict | None  # the report's "blimp" entry when BLiMP does not run
    scorer_model: Any  # the model whose MLM head scores BLiMP
    head: str  # which head that is, in words
    tasks: list  # loaded TaskData
    ft_cfg: FinetuneConfig
    data: Any  # PreparedData of the MLM dev metrics, or None
    floor_data: Any  # PreparedData of the BLiMP floor (--mlm-data even where MLM metrics do not apply), or None
    mlm_model: Any  # the model whose MLM head the MLM metrics use
    mlm_note: dict | None  # the report's "mlm" entry when the MLM metrics do not apply
    tokenizer_match: Any  # an hf: model's tokenizer check against --mlm-data, or None
    dev_settings: dict | None  # mlm_dev_settings, or None


def _check_model_arg(opts: EvaluateOptions) -> tuple[str, bool, Path]:
    """``(--model as given, whether it is hf:, its folder)``; consent and hf:-only options checked."""
    from lvsearch.eval.hf import HF_PREFIX, is_hf_spec

    model_arg = str(opts.model)
    hf = is_hf_spec(model_arg)
    model_dir = Path(model_arg[len(HF_PREFIX):] if hf else model_arg).expanduser()
    if hf:
        from lvsearch.eval.hf import inspect_hf_source

        # what would run or be unpickled, from the folder's JSON alone: refused before anything else
        inspect_hf_source(model_arg, trust_remote_code=opts.trust_remote_code, allow_pickle=opts.allow_pickle)
    else:
        for flag, given in (("--trust-remote-code", opts.trust_remote_code), ("--allow-pickle", opts.allow_pickle)):
            if given:
                raise LvsearchError(f"{flag} applies to --model hf:... only; {model_arg} is an lvsearch model directory "
                                    "(safetensors weights, no code is loaded from it)", fix=f"drop {flag}")
    if hf and not opts.out and not model_dir.is_dir():
        raise LvsearchError(f"--model {model_arg} is not a local folder, so there is no default report path",
                            fix="pass --out REPORT.json")
    if hf and opts.layer_decay != 1.0:
        raise LvsearchError(f"--layer-decay {opts.layer_decay:g} needs an lvsearch model directory (slot names); "
                            f"{model_arg} is a Hugging Face model", fix="drop --layer-decay for hf: models")
    return model_arg, hf, model_dir


def _check_report_paths(opts: EvaluateOptions, hf: bool, model_dir: Path) -> tuple[Path, Path]:
    """``(JSON report, Markdown table)`` paths, checked writable and not replacing anything unasked."""
    out = report_path(opts)
    if opts.out and (out.name in ("", ".", "..") or out.is_dir() or str(opts.out).endswith(("/", "\\"))):
        raise LvsearchError(f"--out {opts.out} is a folder; --out names the JSON report file (its Markdown table goes "
                            "beside it)", fix=f"e.g. --out {Path(opts.out) / 'report.json'}")
    md_out = out.with_suffix(".md")
    if md_out == out:
        raise LvsearchError(f"--out {out} ends in .md; the Markdown table goes beside the JSON report",
                            fix="pass a JSON file name such as report.json")
    check_writable_folder(out.parent, "--out", shown=str(out))
    local_tasks = [("--task", t) for t in opts.tasks if not str(t).startswith("hf:") and Path(t).exists()]
    inputs = [("--model", None if hf and not model_dir.is_dir() else model_dir), ("--mlm-data", opts.mlm_data),
              ("--blimp", opts.blimp), *local_tasks]
    # without --overwrite an existing report is refused below with its own message
    guard_output(out, inputs=inputs, overwrite=True, is_file=True, own=is_eval_report)
    guard_output(md_out, inputs=inputs, overwrite=True, is_file=True, own=is_eval_markdown)
    for path, what in ((out, "report"), (md_out, "Markdown report")):
        if path.exists() and not opts.overwrite:
            raise LvsearchError(f"{what} {path} already exists", fix="pass --overwrite to replace it, or another --out")
        if path.is_dir():
            raise LvsearchError(f"--out {out}: {path} is a folder", fix="pass a file name such as report.json")
    return out, md_out


def _load(opts: EvaluateOptions, model_arg: str, hf: bool, model_dir: Path) -> _Model:
    """Set the threads, resolve the device and load the model."""
    if opts.threads:
        import torch

        torch.set_num_threads(opts.threads)
    from lvsearch.modeldir import load_model

    from lvsearch.device import check_device

    device = check_device(opts.device)
    if device == "auto":
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    if hf:
        from lvsearch.eval.hf import load_hf_model

        return _Model(model_arg, device, hf_model=load_hf_model(model_arg, device=device,
                                                                trust_remote_code=opts.trust_remote_code,
                                                                allow_pickle=opts.allow_pickle))
    return _Model(model_arg, device, loaded=load_model(model_dir, device=device))


def _blimp_inputs(opts: EvaluateOptions, model: _Model) -> tuple[Path | None, Any, dict | None, Any, str]:
    """``(folder, paradigms, note, scorer model, head)`` of the BLiMP part; paradigms None (with
    the note saying why) when BLiMP does not run."""
    blimp_dir = None
    blimp_note = None
    if opts.no_blimp:
        blimp_note = {"status": "skipped", "reason": opts.no_blimp_reason or "--no-blimp"}
    elif opts.blimp:
        blimp_dir = Path(opts.blimp)
    elif default_blimp_dir().is_dir():
        blimp_dir = default_blimp_dir()
    elif opts.blimp_limit is not None:
        raise LvsearchError(
            f"--blimp-limit given, but no --blimp folder and the default {default_blimp_dir()} is absent",
            fix="pass --blimp DIR (a folder of BLiMP *.jsonl files), or drop --blimp-limit / use --no-blimp",
        )
    else:
        from lvsearch import ui

        ui.warn(f"BLiMP skipped: no --blimp given and {default_blimp_dir()} is absent")
        blimp_note = {"status": "skipped", "reason": f"no --blimp given and {default_blimp_dir()} is absent"}
    paradigms = None
    scorer_model = model.scorer
    head = "MLM head of the Hugging Face model" if model.hf else "MLM head of the model"
    if blimp_dir is not None:
        from lvsearch.eval.blimp import read_blimp

        paradigms = read_blimp(blimp_dir, limit=opts.blimp_limit)
        if model.objective == "electra":
            if model.loaded.generator is not None:
                scorer_model, head = model.loaded.generator, "MLM head of the ELECTRA generator (generator.safetensors)"
            else:
                paradigms = None
                blimp_note = {"status": "not applicable",
                              "reason": "RTD discriminator has no MLM head (no generator.safetensors in the model directory)"}
    return blimp_dir, paradigms, blimp_note, scorer_model, head


def _task_inputs(opts: EvaluateOptions) -> tuple[list, FinetuneConfig]:
    """The loaded fine-tuning tasks (distinct names) and the checked fine-tuning settings."""
    from lvsearch.eval.tasks import load_task

    tasks = [load_task(spec) for spec in opts.tasks]
    names = [t.name for t in tasks]
    if len(set(names)) != len(names):
        raise LvsearchError(f"two --task arguments have the same name ({', '.join(names)})",
                            fix="give each task once (task folders are named by their last path component)")
    ft_cfg = FinetuneConfig(epochs=opts.epochs, lr=opts.lr, batch_size=opts.batch_size, max_len=opts.max_len,
                            seeds=tuple(range(opts.seeds)), train_limit=opts.train_limit, layer_decay=opts.layer_decay,
                            eval_limit=opts.eval_limit, pooling=opts.pooling, class_weight=opts.class_weight,
                            sampler=opts.sampler, min_steps=opts.min_steps)
    ft_cfg.check()
    return tasks, ft_cfg


def _mlm_inputs(opts: EvaluateOptions, model: _Model) -> tuple[Any, Any, Any, dict | None, Any, dict | None]:
    """``(data, floor_data, MLM model, note, tokenizer match, dev settings)`` of the MLM part: the
    prepared data checked against the model's tokenizer and its dev length against ``max_len``."""
    data = floor_data = None
    mlm_model = model.scorer
    mlm_note = None
    tokenizer_match = None
    if opts.mlm_data:
        from lvsearch.data.shards import PreparedData
        from lvsearch.eval.mlm import check_tokenizer

        data = floor_data = PreparedData.open(opts.mlm_data)
        if model.hf:
            from lvsearch.eval.hf import check_hf_tokenizer

            tokenizer_match = check_hf_tokenizer(model.hf_model, data)
        else:
            check_tokenizer(model.loaded.tokenizer_sha256, data, model.loaded.folder)
        if model.objective == "electra":
            if model.loaded.generator is not None:
                mlm_model = model.loaded.generator
            else:
                data = None
                mlm_note = {"status": "not applicable",
                            "reason": "RTD discriminator has no MLM head (no generator.safetensors in the model directory)"}
    dev_settings = None
    if data is not None:
        dev_settings = mlm_dev_settings(opts, model.training_args, data)
        if dev_settings["seq_len"] > mlm_model.dims.max_len:
            raise LvsearchError(f"dev sequence length {dev_settings['seq_len']} exceeds the model's max_len "
                                f"{mlm_model.dims.max_len}", fix=f"pass --dev-seq-len ≤ {mlm_model.dims.max_len}")
    return data, floor_data, mlm_model, mlm_note, tokenizer_match, dev_settings


def _check_inputs(opts: EvaluateOptions, model: _Model, out: Path, md_out: Path) -> _Inputs:
    """Read and check BLiMP, the tasks and the MLM data; refuse a run with nothing to evaluate."""
    blimp_dir, paradigms, blimp_note, scorer_model, head = _blimp_inputs(opts, model)
    tasks, ft_cfg = _task_inputs(opts)
    data, floor_data, mlm_model, mlm_note, tokenizer_match, dev_settings = _mlm_inputs(opts, model)
    if paradigms is None and not tasks and data is None and not (blimp_note and blimp_note["status"] == "not applicable") \
            and mlm_note is None:
        raise LvsearchError("nothing to evaluate (BLiMP skipped, no --task, no --mlm-data)",
                            fix="pass --blimp DIR, --task DIR or --mlm-data DIR")
    return _Inputs(model=model, out=out, md_out=md_out, blimp_dir=blimp_dir, paradigms=paradigms,
                   blimp_note=blimp_note, scorer_model=scorer_model, head=head, tasks=tasks, ft_cfg=ft_cfg, data=data,
                   floor_data=floor_data, mlm_model=mlm_model, mlm_note=mlm_note, tokenizer_match=tokenizer_match,
                   dev_settings=dev_settings)


def _run_blimp(opts: EvaluateOptions, inp: _Inputs, timings: dict) -> dict:
    """Score BLiMP (and its n-gram floor when ``--mlm-data`` is given); the report's ``blimp`` entry."""
    from lvsearch import ui
    from lvsearch.eval.blimp import PLLScorer, evaluate_blimp

    model = inp.model
    scorer = PLLScorer(inp.scorer_model, model.tokenizer, token_budget=opts.blimp_token_budget, device=model.device,
                       metric=opts.blimp_metric, precision=opts.blimp_precision)
    with ui.progress() as bar:
        task_id = bar.add_task("BLiMP", total=None, info="sentences")

        def on_progress(done: int, total: int) -> None:
            bar.update(task_id, completed=done, total=total)

        res = evaluate_blimp(scorer, inp.paradigms, progress=on_progress)
    blimp = {"status": "done", "head": inp.head, "folder": str(inp.blimp_dir.resolve()),
             "limit": opts.blimp_limit, "limit_rule": BLIMP_LIMIT_RULE if opts.blimp_limit else None,
             "tie_rule": "ties count as wrong", "token_budget": opts.blimp_token_budget, **res}
    timings["blimp_s"] = res["seconds"]
    if inp.floor_data is not None:
        from lvsearch.eval.blimp_floor import blimp_floor_for_model, blimp_vs_floor

        t0 = time.perf_counter()
        bfloor = blimp_floor_for_model(model.training_args, model.extra, inp.floor_data, inp.paradigms)
        if bfloor["status"] == "done":
            bfloor["vs_floor"] = blimp_vs_floor(res, bfloor)
        blimp["floor"] = bfloor
        timings["blimp_floor_s"] = time.perf_counter() - t0
    else:
        blimp["floor"] = {"status": "unavailable",
                          "reason": "no --mlm-data: the floor counts the model's training text"}
    return blimp


def _run_finetune(inp: _Inputs, timings: dict) -> dict:
    """Fine-tune on every task and fit its bag-of-words floor; the report's ``finetune`` entry."""
    from lvsearch import ui
    from lvsearch.eval.finetune import finetune_task
    from lvsearch.eval.finetune_floor import finetune_floor, finetune_vs_floor

    model = inp.model
    finetune = {}
    timings["finetune_s"] = {}
    with ui.progress() as bar:
        task_id = bar.add_task("fine-tuning", total=None, info="")
        for task in inp.tasks:
            def on_step(what: str, done: int, total: int) -> None:
                bar.update(task_id, completed=done, total=total, info=what)

            t0 = time.perf_counter()
            result = finetune_task(model.encoder, model.tokenizer, task, inp.ft_cfg, device=model.device,
                                   progress=on_step)
            result["floor"] = finetune_floor(task, inp.ft_cfg)
            result["vs_floor"] = finetune_vs_floor(task, result, result["floor"])
            finetune[task.name] = result
            timings["finetune_s"][task.name] = time.perf_counter() - t0
    return finetune


def _run_mlm(opts: EvaluateOptions, inp: _Inputs, timings: dict) -> dict:
    """MLM dev metrics and the reference floors of the model's training run; the report's ``mlm`` entry."""
    from lvsearch import ui
    from lvsearch.data.loader import fixed_dev_set
    from lvsearch.eval.floors import beats_floor, floors_for_model
    from lvsearch.eval.mlm import mlm_dev_metrics

    model, data, dev_settings = inp.model, inp.data, inp.dev_settings
    t0 = time.perf_counter()
    L, n_dev, dev_seed = dev_settings["seq_len"], dev_settings["num_sequences"], dev_settings["seed"]
    dev = fixed_dev_set(data, num_sequences=n_dev, seq_len=L, seed=dev_seed)
    got = int(dev.input_ids.shape[0])
    ui.console.print(f"MLM dev set: {got} sequences × {L} tokens, seed {dev_seed} ({dev_settings['source']})",
                     highlight=False)
    if n_dev is not None and got < n_dev:
        ui.warn(f"{n_dev} dev sequences asked, but the dev split of {data.folder} has {got} of {L} tokens: all "
                f"{got} are used")
    res = mlm_dev_metrics(inp.mlm_model, data, num_sequences=n_dev, seq_len=L,
                          seed=dev_seed, device=model.device, dev=dev)
    mlm = {"status": "done", "data": str(Path(opts.mlm_data).resolve()),
           "head": "generator" if model.loaded is not None and inp.mlm_model is model.loaded.generator else "model",
           "dev_settings": dev_settings,
           **({"tokenizer_match": inp.tokenizer_match} if inp.tokenizer_match else {}), **res}
    timings["mlm_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    floors = floors_for_model(model.training_args, model.extra, data, dev)
    if floors["status"] == "done":
        from lvsearch.stats import paired_bootstrap

        floors["beats_floor"] = beats_floor(res["accuracy"], floors)
        floors["vs_floor"] = paired_bootstrap(res["per_target_correct"], floors["neighbour-count"]["per_target_correct"])
    mlm["floors"] = floors
    timings["floors_s"] = time.perf_counter() - t0
    return mlm


def _write_report(opts: EvaluateOptions, report: dict, out: Path, md_out: Path, show: bool) -> None:
    """Write the JSON report and its Markdown table (atomically), log them, print the summary."""
    from lvsearch import ui
    from lvsearch.eval.report import single_report_markdown
    from lvsearch.io import atomic_write_bytes, atomic_write_json

    for path in (out, md_out):
        if path.exists() and not opts.overwrite:  # appeared while we were computing
            raise LvsearchError(f"{path} appeared during the evaluation", fix="pass --overwrite or another --out")
    atomic_write_json(out, report)
    atomic_write_bytes(md_out, single_report_markdown(report).encode("utf-8"))
    # BLiMP per paradigm, task metrics, floors and verdicts: one point each, under the report's name
    tracking.log(out.parent, 0, {k: v for k, v in report.items() if k != "timings"}, f"{out.stem}/")
    if show:
        print_summary(report)
        ui.console.print(f"report written to {out} and {md_out}", highlight=False)


def _report_to_lock(opts: EvaluateOptions) -> Path | None:
    """The report path :func:`evaluate` holds its lock on; None (no lock) when the default report
    would go into a model folder that does not exist: the lock must not create it, so that
    :func:`evaluate` can say the model directory is not found."""
    path = report_path(opts)
    return None if path is not None and not opts.out and not path.parent.is_dir() else path


@holds_output(lambda a: _report_to_lock(a["opts"]))
def evaluate(opts: EvaluateOptions, *, show: bool = True) -> EvaluateResult:
    """Evaluate one model and write its report (JSON + Markdown, atomic writes).

    Progress bars and the MLM dev set line are always shown; with ``show`` the summary table,
    the floor notes and the "report written" line are printed at the end.

    Steps: check the model argument and the report paths, load the model, check BLiMP, the
    tasks and the MLM data (all before long work), then BLiMP (:func:`_run_blimp`), fine-tuning
    (:func:`_run_finetune`), MLM metrics and floors (:func:`_run_mlm`), and the report.

    Raises:
        LvsearchError: any bad input, before long work starts: a missing or invalid model
            directory / hf: folder (or one that needs consent), a report path that exists
            (without ``overwrite``), ends in ``.md`` or cannot be written, bad BLiMP or task
            files, a prepared data folder with another tokenizer, a dev sequence length beyond
            the model's ``max_len``, nothing to evaluate; or a report that appeared meanwhile.
    """
    t_start = time.perf_counter()
    model_arg, hf, model_dir = _check_model_arg(opts)
    out, md_out = _check_report_paths(opts, hf, model_dir)
    model = _load(opts, model_arg, hf, model_dir)
    t_loaded = time.perf_counter()
    inp = _check_inputs(opts, model, out, md_out)

    import torch

    from lvsearch import __version__

    report: dict = {
        "format": REPORT_FORMAT,
        "lvsearch_version": __version__,
        "model": model.info(),
        "environment": {"torch": torch.__version__, "threads": torch.get_num_threads(), "device": model.device},
        "timings": {"load_s": t_loaded - t_start},
    }
    report["blimp"] = _run_blimp(opts, inp, report["timings"]) if inp.paradigms is not None else inp.blimp_note
    if inp.tasks:
        report["finetune"] = _run_finetune(inp, report["timings"])
    if inp.data is not None:
        report["mlm"] = _run_mlm(opts, inp, report["timings"])
    elif inp.mlm_note is not None:
        report["mlm"] = inp.mlm_note
    report["timings"]["total_s"] = time.perf_counter() - t_start
    _write_report(opts, report, out, md_out, show)
    return EvaluateResult(report=report, json_path=out, markdown_path=md_out)
