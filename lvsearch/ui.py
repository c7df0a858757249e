"""Terminal output shared by every job: one rich console on stderr and a standard progress bar.

Progress and tables go to stderr so that stdout stays clean for machine-readable output.
Set ``LVSEARCH_QUIET=1`` to silence progress bars (tables and warnings still print).
"""

from __future__ import annotations

import os

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

console = Console(stderr=True)


def progress(*, transient: bool = False, enabled: bool = True) -> Progress:
    """A rich progress display: description, bar, done/total, extra info, elapsed, ETA.

    Tasks take an ``info`` field (``bar.add_task(..., info="")``).
    """
    return Progress(
        SpinnerColumn(),
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[info]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=transient,
        disable=not enabled or bool(os.environ.get("LVSEARCH_QUIET")),
    )


def warn(message: str) -> None:
    """Print a warning line to stderr."""
    console.print(f"[yellow]warning:[/yellow] {message}", highlight=False)
