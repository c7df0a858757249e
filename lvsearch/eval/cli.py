"""``lvsearch evaluate --model DIR``: BLiMP (zero-shot), fine-tuning tasks and MLM dev metrics.

This module only parses arguments and dispatches: the job is :func:`lvsearch.eval.job.evaluate`
(every input checked before long work; a JSON report and a Markdown table beside it).
``lvsearch evaluate --compare A.json B.json ...`` prints reports side by side
(:func:`lvsearch.eval.report_console.compare_reports`);
``lvsearch report RUN_OR_MODEL_OR_REPORT ...`` writes them side by side as Markdown with one α
heatmap per model (:mod:`lvsearch.eval.report`, which holds the one comparison-table builder).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from lvsearch.errors import LvsearchError
from lvsearch.eval.job import BLIMP_LIMIT_RULE, EvaluateOptions
from lvsearch.eval.report import DEFAULT_REPORT_NAME
from lvsearch import tracking

EPILOG = """\
what is measured:
  BLiMP        PLL-word-l2r (Kauf & Ivanova 2023) of each sentence, or PLL (Salazar et al. 2020) with
               --blimp-metric pll; a pair is right when sentence_good scores strictly higher (ties count as wrong and are reported).
               Default folder: ../shared/data/blimp next to the repository, when it exists.
               ELECTRA models: the generator's MLM head when generator.safetensors exists,
               otherwise "not applicable" (the RTD discriminator has no trained MLM head).
  fine-tuning  --task DIR (train.tsv, dev.tsv, optional test.tsv) or a HF dataset [hf:]NAME:CONFIG;
               best dev epoch per seed, test metrics of that epoch, mean/std/median over seeds.
               Default lr 1e-3 × 128 / hidden, no layer decay (measured; docs/results.md). A seed
               whose last-epoch train loss is ≥ 0.98 × the constant-prediction loss (ln 2 on a
               balanced binary task) is "failed (loss did not fall)" and gets no score.
               Classification: accuracy, macro F1, MCC and per-class precision/recall/F1 (the
               classes a seed never predicts are named). The epoch is picked on dev, and the floor
               verdict taken, by accuracy when the training labels are balanced (largest class at
               most 1.2/K of them), by macro F1 when they are imbalanced. On imbalanced labels the
               loss is class-weighted (n / (K n_k); --class-weight), and every task trains at least
               --min-steps steps (small training sets get more epochs). Measured: docs/results.md.
  MLM          --mlm-data DIR (alias --data; from 'lvsearch data prepare'): accuracy and loss on the fixed masked
               dev set the architecture search uses (standard BERT masking, whatever the model trained
               with); the tokenizer must be the model's.
  floors       with --mlm-data, reference floors on the same dev targets: unigram and neighbour-count
               (most frequent token between the same neighbours), counted on exactly the training
               sequences the model saw (rebuilt from its training_args.json and step count; "unavailable"
               with the reason for a model directory that lacks them). A model not above the
               neighbour-count floor has not learned past local co-occurrence: its BLiMP/task
               differences are not architecture effects. With --mlm-data, also a BLiMP floor: an
               interpolated Kneser-Ney trigram LM (discount 0.75) of the same training sequences, on the
               same pairs and tie rule. Every task gets a fine-tuning floor: TF-IDF word 1-2-grams +
               logistic regression on the same training examples, C picked on dev. Each floor comes with
               a paired-bootstrap 95% interval of model − floor; reports lead with the verdicts.

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
  QS            a quickstart's --out folder (one column per run, from QS/eval/NAME.json), or one
                of its runs QS/retrain/NAME (that run's QS/eval/NAME.json)

writes into --out (default ./report): report.md (one column per model: parameters, arch,
per-phenomenon BLiMP, task scores, MLM dev accuracy) and alpha_<name>.png per model (ELC-BERT
Figure 1 style: rows = slots, columns = inputs 0..N-1, α = softmax over each slot's inputs).

example:
  lvsearch report runs/best runs/bert runs/random-best --out report
"""


def _at_least(lo: int):
    """An integer ≥ ``lo`` (e.g. --max-len: [CLS], one token and [SEP] need 3)."""
    def parse(text: str) -> int:
        v = _positive_int(text)
        if v < lo:
            raise argparse.ArgumentTypeError(f"must be ≥ {lo}, got {v}")
        return v
    parse.__name__ = "integer"
    return parse


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text} is not a positive integer")
    return value


def register(sub: argparse._SubParsersAction) -> None:
    d = EvaluateOptions(model="")  # the job's defaults are the command's
    p = sub.add_parser(
        "evaluate",
        help="evaluate a model directory: BLiMP, fine-tuning tasks, MLM dev metrics",
        description=__doc__.split("\n\n")[0].split(": ", 1)[1] + " Reports BLiMP accuracy per paradigm and "
        "phenomenon with tie counts, fine-tuning scores per seed with mean ± std over seeds (a seed whose "
        "training loss did not fall is marked failed), and MLM dev loss and accuracy against the unigram and neighbour-count floors "
        "with a verdict on whether the model beats them. Writes a JSON report and a Markdown table beside it.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("model", nargs="?", metavar="MODEL_DIR", help="model directory (same as --model)")
    p.add_argument("--model", dest="model_opt", metavar="DIR",
                   help="model directory (config.json, model.safetensors, tokenizer.json), or hf:PATH_OR_NAME for "
                        "a Hugging Face masked LM (e.g. an 'lvsearch export' folder)")
    p.add_argument("--out", metavar="REPORT.json", help=f"JSON report (default: MODEL_DIR/{DEFAULT_REPORT_NAME})")
    p.add_argument("--overwrite", action="store_true", help="replace an existing report")
    p.add_argument("--device", default=d.device,
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
    b.add_argument("--blimp-token-budget", type=_positive_int, default=d.blimp_token_budget, metavar="T",
                   help=f"max rows × padded length per forward pass (default: {d.blimp_token_budget})")
    from lvsearch.eval.blimp import METRICS

    b.add_argument("--blimp-metric", choices=METRICS, default=d.blimp_metric,
                   help=f"sentence score: pll-word-l2r (Kauf & Ivanova 2023) or pll (Salazar et al. 2020) "
                        f"(default: {d.blimp_metric})")
    b.add_argument("--blimp-precision", choices=("auto", "fp32", "bf16"), default=d.blimp_precision,
                   help="forward passes in fp32 or bf16 (autocast; faster, but a few near-tie pairs flip, so an "
                        "hf: export no longer gives its model directory's exact decisions); auto = bf16 on CUDA and "
                        f"on CPUs with native bf16 (default: {d.blimp_precision})")
    f = p.add_argument_group("fine-tuning")
    f.add_argument("--task", action="append", default=[], metavar="DIR_OR_HF",
                   help="task folder, or HF dataset hf:NAME:CONFIG / NAME:CONFIG (repeatable)")
    from lvsearch.argtypes import float_in, positive_float
    from lvsearch.eval.finetune import LR_BASE, LR_REF_WIDTH

    f.add_argument("--epochs", type=_positive_int, default=d.epochs, help=f"epochs (default: {d.epochs})")
    f.add_argument("--lr", type=positive_float, default=None,
                   help=f"peak learning rate of the top slot and classifier (default: {LR_BASE:g} × {LR_REF_WIDTH} / "
                        "the model's hidden width, e.g. 1e-3 at hidden 128, 5e-4 at 256)")
    f.add_argument("--layer-decay", type=float_in(0, 1, lo_open=True), default=d.layer_decay,
                   help=f"layer-wise LR decay per slot (default: {d.layer_decay:g}; 1 = off)")
    from lvsearch.eval.finetune import POOLINGS

    f.add_argument("--pooling", choices=POOLINGS, default=d.pooling,
                   help=f"classifier input: cls = the [CLS] hidden state, mean = mean over the tokens (default: {d.pooling})")
    from lvsearch.argtypes import count
    from lvsearch.eval.finetune import CLASS_WEIGHTS, MIN_STEPS_MAX_EPOCHS, SAMPLERS

    f.add_argument("--class-weight", choices=CLASS_WEIGHTS, default=d.class_weight,
                   help="cross-entropy class weights n / (K · n_k): auto = on imbalanced training labels only, "
                        f"balanced = always, none = never (default: {d.class_weight})")
    f.add_argument("--sampler", choices=SAMPLERS, default=d.sampler,
                   help="training order: shuffle = a permutation per epoch; balanced = draw every class equally "
                        f"often, with replacement (default: {d.sampler})")
    f.add_argument("--min-steps", type=count, default=d.min_steps, metavar="N",
                   help="train at least N optimiser steps: more epochs than --epochs on a small training set, "
                        f"at most {MIN_STEPS_MAX_EPOCHS} (default: {d.min_steps}; 0 = --epochs only)")
    f.add_argument("--batch-size", type=_positive_int, default=d.batch_size, help=f"batch size (default: {d.batch_size})")
    f.add_argument("--max-len", type=_at_least(3), default=d.max_len,
                   help=f"max tokens per example, [CLS]/[SEP] included (default: {d.max_len})")
    f.add_argument("--seeds", type=_positive_int, default=d.seeds, metavar="N",
                   help=f"number of seeds 0..N-1 (default: {d.seeds})")
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
    tracking.add_argument(p)
    p.set_defaults(func=run)

    r = sub.add_parser(
        "report",
        help="lay evaluated models side by side: report.md and α heatmaps",
        description="Lay several evaluated models side by side (e.g. EA-searched vs bert vs random-search best): "
                    "a Markdown table (BLiMP, fine-tuning mean ± std, MLM dev metrics with the unigram and "
                    "neighbour-count floors and whether each model beats them) and one α heatmap PNG per model.",
        epilog=REPORT_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    r.add_argument("sources", nargs="+", metavar="RUN_OR_MODEL_OR_REPORT", help="run folder, model directory, report JSON or quickstart folder")
    r.add_argument("--out", default="report", metavar="DIR", help="output folder (default: ./report)")
    r.add_argument("--overwrite", action="store_true", help="replace report.md / heatmaps already in --out")
    r.set_defaults(func=run_report)


def run_report(args: argparse.Namespace) -> int:
    """``lvsearch report``: see :func:`lvsearch.eval.report.write_report`."""
    from lvsearch import ui
    from lvsearch.eval.report import write_report

    res = write_report(args.sources, args.out, overwrite=args.overwrite)
    maps = res["heatmaps"]
    ui.console.print(f"report written to {res['markdown']} ({ui.plural(len(maps), 'α heatmap')}"
                     + (": " + ", ".join(p.name for p in maps.values()) if maps else "") + ")", highlight=False)
    return 0


def run(args: argparse.Namespace) -> int:
    """``lvsearch evaluate``: the arguments as :class:`~lvsearch.eval.job.EvaluateOptions`, then
    :func:`~lvsearch.eval.job.evaluate` (or :func:`~lvsearch.eval.report_console.compare_reports`)."""
    from lvsearch.eval.job import evaluate
    from lvsearch.eval.report_console import compare_reports

    if args.compare:
        compare_reports(args.compare)
        return 0
    if args.model and args.model_opt and args.model != args.model_opt and \
            Path(args.model).resolve() != Path(args.model_opt).resolve():
        raise LvsearchError(f"two different model directories given: {args.model} (positional) and --model {args.model_opt}",
                            fix="give the model directory once: lvsearch evaluate --model DIR")
    model_arg = args.model_opt or args.model
    if not model_arg:
        raise LvsearchError("no model directory given", fix="lvsearch evaluate --model DIR [options] (or --compare A.json B.json)")
    evaluate(EvaluateOptions(
        model=model_arg, out=args.out, overwrite=args.overwrite, device=args.device, threads=args.threads,
        trust_remote_code=args.trust_remote_code, allow_pickle=args.allow_pickle,
        blimp=args.blimp, no_blimp=args.no_blimp, blimp_limit=args.blimp_limit,
        blimp_token_budget=args.blimp_token_budget, blimp_metric=args.blimp_metric,
        blimp_precision=args.blimp_precision, tasks=tuple(args.task), pooling=args.pooling,
        epochs=args.epochs, lr=args.lr, layer_decay=args.layer_decay, batch_size=args.batch_size,
        class_weight=args.class_weight, sampler=args.sampler, min_steps=args.min_steps,
        max_len=args.max_len, seeds=args.seeds, train_limit=args.train_limit, eval_limit=args.eval_limit,
        mlm_data=args.data, dev_sequences=args.dev_sequences, dev_seq_len=args.dev_seq_len, dev_seed=args.dev_seed,
    ))
    return 0
