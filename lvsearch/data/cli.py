"""``lvsearch data ...`` sub-commands."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("data", help="prepare and inspect tokenised corpora")
    p.set_defaults(group_parser=p)
    p.add_subparsers(dest="data_command", metavar="SUBCOMMAND")
