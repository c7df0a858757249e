"""``lvsearch data prepare`` and ``lvsearch data verify``."""

from __future__ import annotations

import argparse

from lvsearch.argtypes import float_in, positive_count

PREPARE_EPILOG = """\
inputs:
  a folder                 its *.txt, *.train and *.dev files (BabyLM layout: train/*.train,
                           dev/*.dev); *.test files are ignored and listed
  a text file              UTF-8, one sentence or paragraph per line, blank lines between documents
  builtin:python-docs      small technical-English corpus built from CPython's bundled docs
                           (needs nothing downloaded)
  a save_to_disk folder    or a .json/.jsonl/.csv/.parquet file: read with Hugging Face datasets
  --hf-dataset NAME[:CONFIG]  a hub dataset, e.g. wikitext:wikitext-103-raw-v1 (needs the hub)

Without explicit dev text, a seeded --dev-fraction of documents is held out.

examples:
  lvsearch data prepare --input ../shared/data/corpora --out data/babylm
  lvsearch data prepare --input builtin:python-docs --out data/pydocs --vocab-size 8192
"""




def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("data", help="prepare and check tokenised corpora", description="Prepare and check tokenised corpora.")
    p.set_defaults(group_parser=p)
    dsub = p.add_subparsers(dest="data_command", metavar="SUBCOMMAND")

    prep = dsub.add_parser(
        "prepare",
        help="train a WordPiece tokenizer and tokenise a corpus into shards",
        description="Train a WordPiece tokenizer on the train split and tokenise train and dev text (UTF-8; a "
        "leading byte-order mark is fine) "
        "into token shards with a manifest. Reports documents, lines, words, tokens, tokens per word and "
        "sequences per split, and the files skipped or ignored. Later commands take --data pointing at --out.",
        epilog=PREPARE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    prep.add_argument("--input", action="append", default=[], metavar="PATH", help="text source (repeatable; see below)")
    prep.add_argument("--hf-dataset", action="append", default=[], metavar="NAME[:CONFIG]", help="Hugging Face hub dataset (repeatable)")
    prep.add_argument("--text-column", default="text", help="text column of Hugging Face datasets (default: text)")
    prep.add_argument("--out", required=True, metavar="DIR", help="output folder (new or empty)")
    prep.add_argument("--vocab-size", type=positive_count, default=16384, help="WordPiece vocabulary size (default: 16384)")
    prep.add_argument("--seq-len", type=positive_count, default=128, help="default packed sequence length (default: 128)")
    prep.add_argument("--dev-fraction", type=float_in(0, 1, lo_open=True, hi_open=True), default=0.02, help="fraction of documents held out when there is no dev text (default: 0.02)")
    prep.add_argument("--seed", type=int, default=0, help="seed of the train/dev split (default: 0)")
    prep.add_argument("--lowercase", action=argparse.BooleanOptionalAction, default=True, help="lower-case text (default: on)")
    prep.add_argument("--min-frequency", type=positive_count, default=2, help="minimum count of a WordPiece piece (default: 2)")
    prep.add_argument("--tokenizer", metavar="FILE", help="use this tokenizer.json instead of training one")
    prep.add_argument("--skip-bad-files", action="store_true", help="skip binary / non-UTF-8 files with a warning instead of failing")
    prep.add_argument("--overwrite", action="store_true", help="replace a dataset already in --out")
    prep.set_defaults(func=_prepare)

    ver = dsub.add_parser(
        "verify",
        help="re-hash a prepared dataset and its sources",
        description="Check a prepared dataset: shard and tokenizer hashes, and whether its sources changed since "
        "tokenisation. Reports that everything matches the manifest, or exits 2 naming the first file that "
        "does not and how to restore it.",
    )
    ver.add_argument("data", metavar="DIR", help="a folder written by 'lvsearch data prepare'")
    ver.add_argument("--no-sources", action="store_true", help="skip re-hashing the source files")
    ver.set_defaults(func=_verify)


def _prepare(args: argparse.Namespace) -> int:
    from rich.table import Table

    from lvsearch import ui
    from lvsearch.data.prepare import PrepareSettings, prepare

    settings = PrepareSettings(
        vocab_size=args.vocab_size,
        lowercase=args.lowercase,
        min_frequency=args.min_frequency,
        seq_len=args.seq_len,
        dev_fraction=args.dev_fraction,
        seed=args.seed,
    )
    result = prepare(
        args.input,
        args.out,
        settings,
        hf_datasets=args.hf_dataset,
        text_column=args.text_column,
        tokenizer=args.tokenizer,
        skip_bad_files=args.skip_bad_files,
        overwrite=args.overwrite,
    )
    m = result.manifest
    table = Table(title=f"prepared {result.out}")
    for col in ("split", "documents", "lines", "words", "tokens", "tok/word", f"seqs@{settings.seq_len}"):
        table.add_column(col, justify="right" if col != "split" else "left")
    for split, s in m["splits"].items():
        ratio = s["tokens"] / s["words"] if s["words"] else float("nan")
        table.add_row(
            split, f"{s['documents']:,}", f"{s['lines']:,}", f"{s['words']:,}", f"{s['tokens']:,}", f"{ratio:.2f}",
            f"{s['tokens'] // (settings.seq_len - 2):,}",
        )
    ui.console.print(table)
    ui.console.print(
        f"vocabulary {m['tokenizer']['vocab_size']:,} ({m['dtype']} shards), "
        f"{len(m['sources'])} source(s), {result.seconds:.1f} s"
    )
    if result.ignored:
        ui.console.print(f"ignored {len(result.ignored)} *.test file(s): test text is never used for pretraining")
    return 0


def _verify(args: argparse.Namespace) -> int:
    from lvsearch.data.shards import PreparedData
    from lvsearch.errors import LvsearchError

    data = PreparedData.open(args.data)
    problems = data.verify(check_sources=not args.no_sources)
    if problems:
        raise LvsearchError(
            f"{args.data} failed verification:\n" + "\n".join(f"    {p}" for p in problems),
            fix="re-run 'lvsearch data prepare' with --overwrite",
        )
    print(f"{args.data}: shards, tokenizer{'' if args.no_sources else ' and sources'} match the manifest")
    return 0
