"""``lvsearch export --model RUN/model --out DIR``: write a Hugging Face transformers folder."""

from __future__ import annotations

import argparse

EPILOG = """\
writes DIR: config.json (model_type lvsearch, ops, inputs, dims, auto_map), configuration_lvsearch.py
  and modeling_lvsearch.py (self-contained: torch + transformers, no lvsearch), model.safetensors,
  tokenizer.json / tokenizer_config.json / special_tokens_map.json (fast tokenizer) and
  lvsearch_export.json (provenance). Load it with trust_remote_code=True:

  from transformers import AutoModelForMaskedLM, AutoTokenizer, pipeline
  model = AutoModelForMaskedLM.from_pretrained(DIR, trust_remote_code=True)
  fill = pipeline("fill-mask", model=DIR, trust_remote_code=True)

lvsearch_export.json records the sha256 of the two .py files: 'lvsearch evaluate --model hf:DIR' loads
  the folder without --trust-remote-code while both equal the template of the installed lvsearch (it
  then runs that template, not the folder's files); an edited or foreign copy needs the flag.

ELECTRA models: the discriminator is exported (AutoModel; AutoModelForPreTraining = RTD head,
  read from the run's last checkpoint when present); --generator exports the generator with its
  MLM head instead. The export is written to a temporary sibling folder and renamed into place.
  --out must not be the model directory or a folder that contains it (refused even with --overwrite).

examples:
  lvsearch export --model runs/small/model --out hf/small
  lvsearch export --model runs/electra/model --generator --out hf/electra-generator
  lvsearch evaluate --model hf:hf/small --blimp-limit 100 --out small-hf.json
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export",
        help="export a model directory as a Hugging Face transformers folder (trust_remote_code)",
        description="Export an lvsearch model directory as a Hugging Face transformers model folder "
                    "(AutoModel, AutoModelForMaskedLM, AutoModelForSequenceClassification, fill-mask pipeline). "
                    "Reports the part exported and the tensors written, and records the sha256 of the folder's "
                    "code files, so that 'lvsearch evaluate --model hf:OUT' loads it without --trust-remote-code "
                    "while they are unchanged.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--model", required=True, metavar="MODEL_DIR", help="model directory (RUN/model of 'lvsearch retrain')")
    p.add_argument("--out", required=True, metavar="DIR",
                   help="export folder (new or empty; not the model directory or a folder containing it)")
    p.add_argument("--generator", action="store_true", help="export the ELECTRA generator (with its MLM head)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace a non-empty --out (never the model directory or a folder containing it)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from lvsearch import ui
    from lvsearch.errors import LvsearchError
    from lvsearch.export import check_out, export_model

    check_out(Path(args.out), args.overwrite, source=Path(args.model))
    try:
        import transformers  # noqa: F401  (config.json records its version)
    except ImportError:
        raise LvsearchError("lvsearch export needs the transformers package",
                            fix="pip install 'transformers>=5' (or pip install -e '.[dev]')") from None
    res = export_model(args.model, args.out, generator=args.generator, overwrite=args.overwrite)
    ui.console.print(f"exported the {res['which']} of {args.model} to {res['out']} ({res['tensors']} tensors; "
                     f"architectures {', '.join(res['architectures'])})", highlight=False)
    if res["which"] == "discriminator":
        ui.console.print(f"RTD head: {res['rtd_head']}", highlight=False)
    ui.console.print(f"load it with AutoModelForMaskedLM.from_pretrained({str(res['out'])!r}, trust_remote_code=True)"
                     if res["mlm_head"] else
                     f"load it with AutoModel.from_pretrained({str(res['out'])!r}, trust_remote_code=True)", highlight=False)
    return 0
