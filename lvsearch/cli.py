"""The ``lvsearch`` command line: one sub-command per job.

The CLI is thin: each job module exposes ``register(subparsers)``, which adds its
sub-command(s) and sets ``func`` (called with the parsed namespace, returning an exit
status). Job modules import heavy libraries (torch, datasets) inside ``func`` so that
``lvsearch --help`` stays fast.

Errors a user can cause are :class:`~lvsearch.errors.LvsearchError`: printed as one message,
exit status 2, no traceback; so is an ``OSError`` no earlier check caught (it names the file).
Invisible and control characters in a message (a byte-order mark or a tab quoted from the
user's data) are printed as escapes (:func:`lvsearch.io.escape_invisible`).
``LVSEARCH_DEBUG=1`` re-raises them with the traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from lvsearch import __version__, tracking
from lvsearch.errors import LvsearchError

#: Modules that contribute sub-commands, in the order they appear in ``--help``.
COMMAND_MODULES = [
    "lvsearch.data.cli",
    "lvsearch.train.cli",
    "lvsearch.search.cli",
    "lvsearch.eval.cli",
    "lvsearch.export.cli",
    "lvsearch.scaling.cli",
    "lvsearch.latency.cli",
    "lvsearch.faster.cli",
    "lvsearch.quickstart.cli",
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


def _subparsers(parser: argparse.ArgumentParser, prefix: str = "lvsearch") -> list[tuple[str, argparse.ArgumentParser]]:
    """``(command line, parser)`` of every command, depth first, in ``--help`` order."""
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out.append((f"{prefix} {name}", sub))
                out.extend(_subparsers(sub, f"{prefix} {name}"))
    return out


def cli_reference_markdown() -> str:
    """``docs/cli.md``: the ``--help`` of ``lvsearch`` and of every command, at a fixed width
    of 100 columns so the text does not depend on the terminal. ``tests/test_cli_docs.py``
    checks that the committed file equals this; regenerate it with
    ``python -c "import lvsearch.cli as c; c.write_cli_reference()"``."""
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"
    try:
        parser = build_parser()
        parts = ["# lvsearch command-line reference", "",
                 "Generated from `--help` by `lvsearch.cli.cli_reference_markdown()`; a test keeps it in sync.", "",
                 "## lvsearch", "", "```", parser.format_help().rstrip(), "```", ""]
        for line, sub in _subparsers(parser):
            parts += [f"## {line}", "", "```", sub.format_help().rstrip(), "```", ""]
        return "\n".join(parts)
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old


def write_cli_reference(path: str | None = None) -> None:
    """Write :func:`cli_reference_markdown` to ``docs/cli.md`` of the checkout (or ``path``)."""
    from pathlib import Path

    from lvsearch.io import atomic_write_bytes

    target = Path(path) if path else Path(__file__).resolve().parents[1] / "docs" / "cli.md"
    atomic_write_bytes(target, cli_reference_markdown().encode("utf-8"))


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
        if getattr(args, "resume", False) and getattr(args, "overwrite", False):
            raise LvsearchError("--resume continues the output that --overwrite would replace: pass one of them",
                                fix="--resume to continue it, or --overwrite to start it again")
        with tracking.enabled(getattr(args, "log_to", ())):
            return int(func(args) or 0)
    except LvsearchError as e:
        if os.environ.get("LVSEARCH_DEBUG"):
            raise
        from lvsearch.ui import escape_invisible

        print(f"lvsearch: error: {escape_invisible(str(e))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("lvsearch: interrupted", file=sys.stderr)
        return 130
    except OSError as e:
        # A file-system failure no check foresaw (disk full, permissions changed mid-run):
        # one message naming the file, not a traceback. Writes are atomic, so nothing
        # half-written replaced an earlier file.
        if os.environ.get("LVSEARCH_DEBUG"):
            raise
        from lvsearch.ui import escape_invisible

        where = f" {escape_invisible(str(e.filename))}" if getattr(e, "filename", None) else ""
        print(f"lvsearch: error: cannot access{where}: {e.strerror or e}\n  fix: check the path, its permissions and "
              f"free disk space, then re-run the same command (finished work is kept)", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
