"""The ``lvsearch`` command line: one sub-command per job.

The CLI is thin: each job module exposes ``register(subparsers)``, which adds its
sub-command(s) and sets ``func`` (called with the parsed namespace, returning an exit
status). Job modules import heavy libraries (torch, datasets) inside ``func`` so that
``lvsearch --help`` stays fast.

Errors a user can cause are :class:`~lvsearch.errors.LvsearchError`: printed as one message,
exit status 2, no traceback. ``LVSEARCH_DEBUG=1`` re-raises them with the traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from lvsearch import __version__
from lvsearch.errors import LvsearchError

#: Modules that contribute sub-commands, in the order they appear in ``--help``.
COMMAND_MODULES = [
    "lvsearch.data.cli",
    "lvsearch.train.cli",
    "lvsearch.search.cli",
    "lvsearch.eval.cli",
    "lvsearch.scaling_cli",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lvsearch",
        description=(
            "Neural architecture search for BERT-style encoders: searches the order of "
            "self-attention (SA), feed-forward (FF) and dynamic-convolution (DC) layers and "
            "their ELC-BERT layer mixing over a weight-sharing supernet."
        ),
        epilog="Run 'lvsearch COMMAND --help' for the options of one command.",
    )
    parser.add_argument("--version", action="version", version=f"lvsearch {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``lvsearch`` console script; returns the process exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    func = getattr(args, "func", None)
    if func is None:
        # A command group without a sub-command, or no command at all: show the right help.
        (getattr(args, "group_parser", None) or parser).print_help(sys.stderr)
        return 2
    try:
        return int(func(args) or 0)
    except LvsearchError as e:
        if os.environ.get("LVSEARCH_DEBUG"):
            raise
        print(f"lvsearch: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("lvsearch: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
