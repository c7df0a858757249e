"""``lvsearch evaluate --model DIR``: BLiMP (zero-shot), fine-tuning tasks and MLM dev metrics.

Every input is checked before any long computation starts (model directory, BLiMP files, task
files, prepared data and its tokenizer, the report path), so a bad argument fails in seconds
with one message and nothing is written. The JSON report (atomic write) holds everything needed
to compare models: per-paradigm / per-phenomenon BLiMP accuracy with tie counts, fine-tuning
results per seed and aggregated, MLM dev metrics, the model config and timings; a Markdown
table of the headline numbers is written beside it (same path, ``.md``).
``lvsearch evaluate --compare A.json B.json ...`` prints reports side by side;
``lvsearch report RUN_OR_MODEL_OR_REPORT ...`` writes them side by side as Markdown with one α
heatmap per model (:mod:`lvsearch.eval.report`, which holds the one comparison-table builder).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from lvsearch.errors import LvsearchError
from lvsearch.io import check_writable_folder

from lvsearch.eval.report import DEFAULT_REPORT_NAME, REPORT_FORMAT, summary_rows  # noqa: F401 (re-exported)

BLIMP_LIMIT_RULE = "first N pairs of each paradigm, in file order"

EPILOG = """\
what is measured:
  BLiMP        pseudo-log-likelihood (Salazar et al. 2020) of each sentence; a pair is right
               when sentence_good scores strictly higher (ties count as wrong and are reported).
               Default folder: ../shared/data/blimp next to the repository, when it exists.
               ELECTRA models: the generator's MLM head when generator.safetensors exists,
               otherwise "not applicable" (the RTD discriminator has no trained MLM head).
  fine-tuning  --task DIR (train.tsv, dev.tsv, optional test.tsv) or a HF dataset [hf:]NAME:CONFIG;
               best dev epoch per seed, test metrics of that epoch, mean/std/median over seeds.
               Default lr 1e-3 × 128 / hidden, no layer decay (measured; docs/results.md). A seed
               whose last-epoch train loss is ≥ 0.98 × the constant-prediction loss (ln 2 on a
               balanced binary task) is "failed (loss did not fall)" and gets no score.
  MLM          --mlm-data DIR (alias --data; from 'lvsearch data prepare'): accuracy and loss on the fixed masked
               dev set the architecture search uses (standard BERT masking, whatever the model trained
               with); the tokenizer must be the model's.
  floors       with --mlm-data, reference floors on the same dev targets: unigram and neighbour-count
               (most frequent token between the same neighbours), counted on exactly the training
               sequences the model saw (rebuilt from its training_args.json and step count; "unavailable"
               with the reason for a model directory that lacks them). A model not above the
               neighbour-count floor has not learned past local co-occurrence: its BLiMP/task
               differences are not architecture effects.

Hugging Face models: --model hf:PATH_OR_NAME loads AutoModelForMaskedLM and its fast tokenizer and runs
  the same BLiMP PLL, fine-tuning (on the base model's [CLS] state; no --layer-decay) and MLM dev metrics
  (only when its vocabulary is the prepared data's). An 'lvsearch export' of a model gives the same BLiMP
  and MLM numbers as its model directory (float rounding aside).
  No code from a model folder runs without consent: a folder whose config.json or tokenizer_config.json
  auto_map names Python files is refused, before anything is imported, unless --trust-remote-code. The
  exception is an 'lvsearch export' folder whose two .py files equal the installed lvsearch's template
  (sha256 recorded in lvsearch_export.json); it is loaded with that template, none of its files run.
  Weights are safetensors only; a folder with only pytorch_model.bin (pickle) is refused unless
  --allow-pickle, which loads it with torch's weights_only unpickler. Also refused: a checkpoint without
  its MLM head (e.g. a saved BertModel), a tokenizer with ids beyond the model's embedding, a folder
  without tokenizer files. See SECURITY.md.

report: REPORT.json (default MODEL_DIR/results.json) and REPORT.md beside it (Markdown table);
  both are refused when they exist unless --overwrite.

examples:
  lvsearch evaluate --model runs/small/model --blimp-limit 100 --out small.json
  lvsearch evaluate --model runs/small/model --no-blimp --task ../shared/data/tasks/rte --task hf:glue:rte
  lvsearch evaluate --model hf:hf/small --mlm-data data/corpus --blimp-limit 100 --out small-hf.json
  lvsearch evaluate --compare small.json medium.json
  lvsearch report runs/best runs/bert --out report
"""

REPORT_EPILOG = """\
each argument is one of:
  RUN           a retrain run folder (reads RUN/model/results.json; column named RUN)
  MODEL_DIR     a model directory holding results.json
  REPORT.json   a report written by 'lvsearch evaluate --out' (α from its recorded model folder)

writes into --out (default ./report): report.md (one column per model: parameters, arch,
per-phenomenon BLiMP, task scores, MLM dev accuracy) and alpha_<name>.png per model (ELC-BERT
Figure 1 style: rows = slots, columns = inputs 0..N-1, α = softmax over each slot's inputs).

example:
  lvsearch report runs/best runs/bert runs/random-best --out report
"""


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text} is not a positive integer")
    return value


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "evaluate",
        help="evaluate a model directory: BLiMP, fine-tuning tasks, MLM dev metrics",
        description=__doc__.split("\n\n")[0].split(": ", 1)[1] + " Writes a JSON report.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("model", nargs="?", metavar="MODEL_DIR", help="model directory (same as --model)")
    p.add_argument("--model", dest="model_opt", metavar="DIR",
                   help="model directory (config.json, model.safetensors, tokenizer.json), or hf:PATH_OR_NAME for "
                        "a Hugging Face masked LM (e.g. an 'lvsearch export' folder)")
    p.add_argument("--out", metavar="REPORT.json", help=f"JSON report (default: MODEL_DIR/{DEFAULT_REPORT_NAME})")
    p.add_argument("--overwrite", action="store_true", help="replace an existing report")
    p.add_argument("--device", default="auto",
                   help="torch device: auto (cuda when available, else cpu; as the training commands), cpu, cuda, cuda:N")
    p.add_argument("--threads", type=_positive_int, metavar="N",
                   help="torch CPU threads (default: torch's choice; 1 is faster on a busy shared machine)")
    p.add_argument("--compare", nargs="+", metavar="REPORT.json", help="print these reports side by side and exit")
    h = p.add_argument_group("Hugging Face models (--model hf:...)")
    h.add_argument("--trust-remote-code", action="store_true",
                   help="run the Python files that the model's config.json / tokenizer_config.json auto_map names "
                        "(transformers' trust_remote_code=True); without it such a model is refused before anything is "
                        "imported. Not needed for an unedited 'lvsearch export' folder of this lvsearch version")
    h.add_argument("--allow-pickle", action="store_true",
                   help="load pickle weights (pytorch_model.bin) with torch's weights_only unpickler when the folder "
                        "has no model.safetensors; without it such a folder is refused")
    b = p.add_argument_group("BLiMP")
    b.add_argument("--blimp", metavar="DIR", help="folder of BLiMP *.jsonl files (default: ../shared/data/blimp if present)")
    b.add_argument("--no-blimp", action="store_true", help="skip BLiMP")
    b.add_argument("--blimp-limit", type=_positive_int, metavar="N", help=f"pairs per paradigm: the {BLIMP_LIMIT_RULE}")
    b.add_argument("--blimp-token-budget", type=_positive_int, default=8192, metavar="T",
                   help="max rows × padded length per forward pass (default: 8192)")
    f = p.add_argument_group("fine-tuning")
    f.add_argument("--task", action="append", default=[], metavar="DIR_OR_HF",
                   help="task folder, or HF dataset hf:NAME:CONFIG / NAME:CONFIG (repeatable)")
    from lvsearch.eval.finetune import LR_BASE, LR_REF_WIDTH, FinetuneConfig

    d = FinetuneConfig()
    f.add_argument("--epochs", type=_positive_int, default=d.epochs, help=f"epochs (default: {d.epochs})")
    f.add_argument("--lr", type=float, default=None,
                   help=f"peak learning rate of the top slot and classifier (default: {LR_BASE:g} × {LR_REF_WIDTH} / "
                        "the model's hidden width, e.g. 1e-3 at hidden 128, 5e-4 at 256)")
    f.add_argument("--layer-decay", type=float, default=d.layer_decay,
                   help=f"layer-wise LR decay per slot (default: {d.layer_decay:g}; 1 = off)")
    f.add_argument("--batch-size", type=_positive_int, default=32, help="batch size (default: 32)")
    f.add_argument("--max-len", type=_positive_int, default=128, help="max tokens per example, [CLS]/[SEP] included (default: 128)")
    f.add_argument("--seeds", type=_positive_int, default=3, metavar="N", help="number of seeds 0..N-1 (default: 3)")
    f.add_argument("--train-limit", type=_positive_int, metavar="N", help="use a seeded sample of N training examples")
    f.add_argument("--eval-limit", type=_positive_int, metavar="N", help="use the first N dev and test examples")
    m = p.add_argument_group("MLM dev metrics")
    m.add_argument("--mlm-data", "--data", dest="data", metavar="DIR",
                   help="prepared dataset (lvsearch data prepare --out DIR); --data is an alias")
    m.add_argument("--dev-sequences", type=_positive_int,
                   help="dev sequences (default: the model's training dev set, eval.dev_sequences; else 256)")
    m.add_argument("--dev-seq-len", type=_positive_int,
                   help="dev sequence length (default: the model's training train.seq_len; else the dataset's)")
    m.add_argument("--dev-seed", type=int,
                   help="seed of the dev sample and masks (default: the model's training eval.seed; else 1234)")
    p.set_defaults(func=run)

    r = sub.add_parser(
        "report",
        help="lay evaluated models side by side: report.md and α heatmaps",
        description="Lay several evaluated models side by side (e.g. EA-searched vs bert vs random-search best): "
                    "a Markdown table and one α heatmap PNG per model.",
        epilog=REPORT_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    r.add_argument("sources", nargs="+", metavar="RUN_OR_MODEL_OR_REPORT", help="run folder, model directory or report JSON")
    r.add_argument("--out", default="report", metavar="DIR", help="output folder (default: ./report)")
    r.add_argument("--overwrite", action="store_true", help="replace report.md / heatmaps already in --out")
    r.set_defaults(func=run_report)


def run_report(args: argparse.Namespace) -> int:
    """``lvsearch report``: see :func:`lvsearch.eval.report.write_report`."""
    from lvsearch import ui
    from lvsearch.eval.report import write_report

    res = write_report(args.sources, args.out, overwrite=args.overwrite)
    ui.console.print(f"report written to {res['markdown']} ({len(res['heatmaps'])} α heatmaps: "
                     + ", ".join(p.name for p in res["heatmaps"].values()) + ")", highlight=False)
    return 0


def default_blimp_dir() -> Path:
    """``<repo>/../shared/data/blimp`` (may not exist)."""
    import lvsearch

    return (Path(lvsearch.__file__).resolve().parents[1] / ".." / "shared" / "data" / "blimp").resolve()


def mlm_dev_settings(args: argparse.Namespace, training_args: dict | None, data) -> dict:
    """The MLM dev set ``evaluate`` scores on: each of ``--dev-seq-len``, ``--dev-sequences`` and
    ``--dev-seed`` when given, else the model's own training dev set as recorded in its
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
            ("seq_len", "--dev-seq-len", args.dev_seq_len, train.get("seq_len"), data.seq_len, "the dataset's"),
            ("num_sequences", "--dev-sequences", args.dev_sequences, ev.get("dev_sequences"), 256, "default"),
            ("seed", "--dev-seed", args.dev_seed, ev.get("seed"), 1234, "default")):
        if given is not None:
            out[key], src = given, flag
        elif isinstance(recorded, int) and not isinstance(recorded, bool) and recorded > (0 if key != "seed" else -1):
            out[key], src = recorded, "model's training dev set"
        else:
            out[key], src = fallback, fallback_name
        picks.append(f"{key} from {src}")
    out["source"] = "; ".join(picks)
    return out


def run(args: argparse.Namespace) -> int:
    if args.compare:
        return compare_reports(args.compare)
    if args.model and args.model_opt and args.model != args.model_opt and \
            Path(args.model).resolve() != Path(args.model_opt).resolve():
        raise LvsearchError(f"two different model directories given: {args.model} (positional) and --model {args.model_opt}",
                            fix="give the model directory once: lvsearch evaluate --model DIR")
    model_arg = args.model_opt or args.model
    if not model_arg:
        raise LvsearchError("no model directory given", fix="lvsearch evaluate --model DIR [options] (or --compare A.json B.json)")
    t_start = time.perf_counter()
    from lvsearch.eval.hf import HF_PREFIX, is_hf_spec

    hf = is_hf_spec(model_arg)
    model_dir = Path(model_arg[len(HF_PREFIX):] if hf else model_arg).expanduser()
    if hf:
        from lvsearch.eval.hf import inspect_hf_source

        # what would run or be unpickled, from the folder's JSON alone: refused before anything else
        inspect_hf_source(model_arg, trust_remote_code=args.trust_remote_code, allow_pickle=args.allow_pickle)
    else:
        for flag, given in (("--trust-remote-code", args.trust_remote_code), ("--allow-pickle", args.allow_pickle)):
            if given:
                raise LvsearchError(f"{flag} applies to --model hf:... only; {model_arg} is an lvsearch model directory "
                                    "(safetensors weights, no code is loaded from it)", fix=f"drop {flag}")
    if hf and not args.out and not model_dir.is_dir():
        raise LvsearchError(f"--model {model_arg} is not a local folder, so there is no default report path",
                            fix="pass --out REPORT.json")
    if hf and args.layer_decay != 1.0:
        raise LvsearchError(f"--layer-decay {args.layer_decay:g} needs an lvsearch model directory (slot names); "
                            f"{model_arg} is a Hugging Face model", fix="drop --layer-decay for hf: models")
    out = Path(args.out) if args.out else model_dir / DEFAULT_REPORT_NAME
    md_out = out.with_suffix(".md")
    if md_out == out:
        raise LvsearchError(f"--out {out} ends in .md; the Markdown table goes beside the JSON report",
                            fix="pass a JSON file name such as report.json")
    check_writable_folder(out.parent, "--out", shown=str(out))
    for path, what in ((out, "report"), (md_out, "Markdown report")):
        if path.exists() and not args.overwrite:
            raise LvsearchError(f"{what} {path} already exists", fix="pass --overwrite to replace it, or another --out")
        if path.is_dir():
            raise LvsearchError(f"--out {out}: {path} is a folder", fix="pass a file name such as report.json")

    # ---- check every input before long work
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    from lvsearch.modeldir import load_model

    if args.device == "auto":
        import torch

        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    if hf:
        from lvsearch.eval.hf import load_hf_model

        hf_model = load_hf_model(model_arg, device=args.device, trust_remote_code=args.trust_remote_code,
                                 allow_pickle=args.allow_pickle)
        loaded = None
        objective, tokenizer, encoder = "hf", hf_model.tokenizer, hf_model.encoder
    else:
        loaded = load_model(model_dir, device=args.device)
        objective, tokenizer, encoder = loaded.objective, loaded.tokenizer, loaded.encoder
    t_loaded = time.perf_counter()

    blimp_dir = None
    blimp_note = None
    if args.no_blimp:
        blimp_note = {"status": "skipped", "reason": "--no-blimp"}
    elif args.blimp:
        blimp_dir = Path(args.blimp)
    elif default_blimp_dir().is_dir():
        blimp_dir = default_blimp_dir()
    elif args.blimp_limit is not None:
        raise LvsearchError(
            f"--blimp-limit given, but no --blimp folder and the default {default_blimp_dir()} is absent",
            fix="pass --blimp DIR (a folder of BLiMP *.jsonl files), or drop --blimp-limit / use --no-blimp",
        )
    else:
        from lvsearch import ui

        ui.warn(f"BLiMP skipped: no --blimp given and {default_blimp_dir()} is absent")
        blimp_note = {"status": "skipped", "reason": f"no --blimp given and {default_blimp_dir()} is absent"}
    paradigms = None
    scorer_model, head = (hf_model.scorer, "MLM head of the Hugging Face model") if hf else \
        (loaded.encoder, "MLM head of the model")
    if blimp_dir is not None:
        from lvsearch.eval.blimp import read_blimp

        paradigms = read_blimp(blimp_dir, limit=args.blimp_limit)
        if objective == "electra":
            if loaded.generator is not None:
                scorer_model, head = loaded.generator, "MLM head of the ELECTRA generator (generator.safetensors)"
            else:
                paradigms = None
                blimp_note = {"status": "not applicable",
                              "reason": "RTD discriminator has no MLM head (no generator.safetensors in the model directory)"}

    from lvsearch.eval.finetune import FinetuneConfig, load_task

    tasks = [load_task(spec) for spec in args.task]
    names = [t.name for t in tasks]
    if len(set(names)) != len(names):
        raise LvsearchError(f"two --task arguments have the same name ({', '.join(names)})",
                            fix="give each task once (task folders are named by their last path component)")
    ft_cfg = FinetuneConfig(epochs=args.epochs, lr=args.lr, batch_size=args.batch_size, max_len=args.max_len,
                            seeds=tuple(range(args.seeds)), train_limit=args.train_limit, layer_decay=args.layer_decay,
                            eval_limit=args.eval_limit)
    ft_cfg.check()

    data = None
    mlm_model = hf_model.scorer if hf else loaded.encoder
    mlm_note = None
    tokenizer_match = None
    if args.data:
        from lvsearch.data.shards import PreparedData
        from lvsearch.eval.mlm import check_tokenizer

        data = PreparedData.open(args.data)
        if hf:
            from lvsearch.eval.hf import check_hf_tokenizer

            tokenizer_match = check_hf_tokenizer(hf_model, data)
        else:
            check_tokenizer(loaded.tokenizer_sha256, data, loaded.folder)
        if objective == "electra":
            if loaded.generator is not None:
                mlm_model = loaded.generator
            else:
                data = None
                mlm_note = {"status": "not applicable",
                            "reason": "RTD discriminator has no MLM head (no generator.safetensors in the model directory)"}
    dev_settings = None
    if data is not None:
        dev_settings = mlm_dev_settings(args, hf_model.training_args if hf else loaded.training_args, data)
        if dev_settings["seq_len"] > mlm_model.dims.max_len:
            raise LvsearchError(f"dev sequence length {dev_settings['seq_len']} exceeds the model's max_len "
                                f"{mlm_model.dims.max_len}", fix=f"pass --dev-seq-len ≤ {mlm_model.dims.max_len}")
    if paradigms is None and not tasks and data is None and not (blimp_note and blimp_note["status"] == "not applicable") \
            and mlm_note is None:
        raise LvsearchError("nothing to evaluate (BLiMP skipped, no --task, no --mlm-data)",
                            fix="pass --blimp DIR, --task DIR or --mlm-data DIR")

    # ---- run
    import torch

    from lvsearch import __version__, ui

    if hf:
        model_info = {
            "folder": str(hf_model.folder.resolve()) if hf_model.folder is not None else model_arg,
            "name": hf_model.name,
            "config": hf_model.config,
            "num_params": hf_model.num_params,
            "generator_num_params": None,
            "training_args": hf_model.training_args,
        }
    else:
        model_info = {
            "folder": str(loaded.folder.resolve()),
            "name": loaded.folder.resolve().name,
            "config": loaded.config,
            "num_params": loaded.encoder.num_params(),
            "generator_num_params": loaded.generator.num_params() if loaded.generator is not None else None,
            "training_args": loaded.training_args,
        }
    report: dict = {
        "format": REPORT_FORMAT,
        "lvsearch_version": __version__,
        "model": model_info,
        "environment": {"torch": torch.__version__, "threads": torch.get_num_threads(), "device": args.device},
        "timings": {"load_s": t_loaded - t_start},
    }

    if paradigms is not None:
        from lvsearch.eval.blimp import PLLScorer, evaluate_blimp

        scorer = PLLScorer(scorer_model, tokenizer, token_budget=args.blimp_token_budget, device=args.device)
        with ui.progress() as bar:
            task_id = bar.add_task("BLiMP", total=None, info="sentences")

            def on_progress(done: int, total: int) -> None:
                bar.update(task_id, completed=done, total=total)

            res = evaluate_blimp(scorer, paradigms, progress=on_progress)
        report["blimp"] = {"status": "done", "head": head, "folder": str(blimp_dir.resolve()),
                           "limit": args.blimp_limit, "limit_rule": BLIMP_LIMIT_RULE if args.blimp_limit else None,
                           "tie_rule": "ties count as wrong", "token_budget": args.blimp_token_budget, **res}
        report["timings"]["blimp_s"] = res["seconds"]
    else:
        report["blimp"] = blimp_note

    if tasks:
        from lvsearch.eval.finetune import finetune_task

        report["finetune"] = {}
        report["timings"]["finetune_s"] = {}
        with ui.progress() as bar:
            task_id = bar.add_task("fine-tuning", total=None, info="")
            for task in tasks:
                def on_step(what: str, done: int, total: int) -> None:
                    bar.update(task_id, completed=done, total=total, info=what)

                t0 = time.perf_counter()
                report["finetune"][task.name] = finetune_task(encoder, tokenizer, task, ft_cfg,
                                                              device=args.device, progress=on_step)
                report["timings"]["finetune_s"][task.name] = time.perf_counter() - t0

    if data is not None:
        from lvsearch.data.loader import fixed_dev_set
        from lvsearch.eval.floors import beats_floor, floors_for_model
        from lvsearch.eval.mlm import mlm_dev_metrics

        t0 = time.perf_counter()
        L, n_dev, dev_seed = dev_settings["seq_len"], dev_settings["num_sequences"], dev_settings["seed"]
        ui.console.print(f"MLM dev set: {n_dev} sequences × {L} tokens, seed {dev_seed} ({dev_settings['source']})",
                         highlight=False)
        dev = fixed_dev_set(data, num_sequences=n_dev, seq_len=L, seed=dev_seed)
        res = mlm_dev_metrics(mlm_model, data, num_sequences=n_dev, seq_len=L,
                              seed=dev_seed, device=args.device, dev=dev)
        report["mlm"] = {"status": "done", "data": str(Path(args.data).resolve()),
                         "head": "generator" if loaded is not None and mlm_model is loaded.generator else "model",
                         "dev_settings": dev_settings,
                         **({"tokenizer_match": tokenizer_match} if tokenizer_match else {}), **res}
        report["timings"]["mlm_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        if hf:
            floors = floors_for_model(hf_model.training_args, hf_model.extra, data, dev)
        else:
            floors = floors_for_model(loaded.training_args, loaded.config.get("extra") or {}, data, dev)
        if floors["status"] == "done":
            floors["beats_floor"] = beats_floor(res["accuracy"], floors)
        report["mlm"]["floors"] = floors
        report["timings"]["floors_s"] = time.perf_counter() - t0
    elif mlm_note is not None:
        report["mlm"] = mlm_note

    report["timings"]["total_s"] = time.perf_counter() - t_start
    from lvsearch.eval.report import single_report_markdown
    from lvsearch.io import atomic_write_bytes, atomic_write_json

    for path in (out, md_out):
        if path.exists() and not args.overwrite:  # appeared while we were computing
            raise LvsearchError(f"{path} appeared during the evaluation", fix="pass --overwrite or another --out")
    atomic_write_json(out, report)
    atomic_write_bytes(md_out, single_report_markdown(report).encode("utf-8"))
    print_summary(report)
    ui.console.print(f"report written to {out} and {md_out}", highlight=False)
    return 0


def print_summary(report: dict) -> None:
    from rich.table import Table

    from lvsearch import ui

    model = report["model"]
    table = Table(title=f"evaluation of {model['name']} ({model['config']['objective']}, {model['num_params']:,} parameters)")
    table.add_column("metric", no_wrap=True)
    table.add_column("value", justify="right")
    for k, v in summary_rows(report):
        table.add_row(k, v)
    ui.console.print(table)
    from lvsearch.eval.report import floor_notes

    for note in floor_notes([report], [model["name"]]):
        ui.console.print(note, highlight=False)


def compare_reports(paths: list[str]) -> int:
    """Print reports side by side (stdout) with :func:`lvsearch.eval.report.comparison_table`
    (the table ``lvsearch report`` writes as Markdown); metrics missing from a report show as —.

    Raises:
        LvsearchError: a file is missing, not JSON, or not an evaluation report.
    """
    from rich.console import Console
    from rich.table import Table

    from lvsearch.eval.report import comparison_table, read_report

    reports = [read_report(p) for p in paths]
    table = Table(title="evaluation reports")
    table.add_column("metric", no_wrap=True)
    for p, r in zip(paths, reports):
        table.add_column(f"{r['model']['name']}\n{Path(p).name}", justify="right")
    for metric, values in comparison_table(reports):
        table.add_row(metric, *values)
    console = Console()
    console.print(table)
    from lvsearch.eval.report import floor_notes

    for note in floor_notes(reports, [r["model"]["name"] for r in reports]):
        console.print(note, highlight=False)
    return 0
