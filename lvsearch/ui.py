"""Terminal output shared by every job: one rich console on stderr and a standard progress bar.

Progress and tables go to stderr so that stdout stays clean for machine-readable output.
Set ``LVSEARCH_QUIET=1`` to silence progress bars (tables and warnings still print).

When stderr is not a terminal (redirected to a log file, a batch scheduler), live bars would
print nothing until a task ends and then be cut at 80 columns; there, :func:`progress` prints
one plain, unwrapped line per task every ``$LVSEARCH_PROGRESS_EVERY`` seconds (default 30) and
when the task completes: ``[progress] supernet: 450/1500 (30%) · loss 5.2 · 1:20 elapsed · ETA 3:05``.
"""

from __future__ import annotations

import os
import time

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

    Tasks take an ``info`` field (``bar.add_task(..., info="")``). Off a terminal it is a
    :class:`LineProgress` (plain lines at an interval, see the module docstring).
    """
    quiet = not enabled or bool(os.environ.get("LVSEARCH_QUIET"))
    if not quiet and not (console.is_terminal or console.is_jupyter):
        return LineProgress(console=console, every=_progress_every())
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
        disable=quiet,
    )


def phase_lines(*, enabled: bool = True) -> LineProgress | None:
    """Plain progress lines for phases inside a step that usually take seconds but can take
    minutes (drawing and scoring a search population of 100,000): a :class:`LineProgress`
    with ``quiet_finish``, printing every ``$LVSEARCH_PROGRESS_EVERY`` seconds; works on a
    terminal and off one alike. None when disabled or ``LVSEARCH_QUIET`` is set."""
    if not enabled or os.environ.get("LVSEARCH_QUIET"):
        return None
    return LineProgress(console=console, every=_progress_every(), quiet_finish=True)


def _progress_every() -> float:
    try:
        return max(0.0, float(os.environ.get("LVSEARCH_PROGRESS_EVERY", "30")))
    except ValueError:
        return 30.0


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = int(round(seconds))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class LineProgress(Progress):
    """A :class:`rich.progress.Progress` for logs: no live display; each task prints one plain
    line at most every ``every`` seconds while it advances, and one when it completes (with
    ``quiet_finish``, only when it printed a line before: short phases stay silent)."""

    def __init__(self, *, console: Console, every: float, quiet_finish: bool = False):
        super().__init__(console=console, disable=True)
        self._every = every
        self._quiet_finish = quiet_finish  # a task that never printed does not print its end either
        self._printed: set = set()
        self._last: dict = {}
        self._finished: set = set()

    def add_task(self, description, start=True, total=100.0, completed=0, visible=True, **fields):
        task_id = super().add_task(description, start=start, total=total, completed=completed, visible=visible, **fields)
        self._last[task_id] = time.monotonic()
        return task_id

    def update(self, task_id, **kwargs) -> None:
        super().update(task_id, **kwargs)
        self._maybe_print(task_id)

    def advance(self, task_id, advance: float = 1) -> None:
        super().advance(task_id, advance)
        self._maybe_print(task_id)

    def line(self, task_id) -> str:
        """The progress line of ``task_id`` (what is printed)."""
        task = self._tasks[task_id]
        done = f"{task.completed:,.0f}"
        if task.total:
            done += f"/{task.total:,.0f} ({100 * task.completed / task.total:.0f}%)"
        parts = [f"[progress] {task.description}: {done}"]
        info = str(task.fields.get("info") or "").strip()
        if info:
            parts.append(info)
        parts.append(f"{_clock(task.elapsed)} elapsed")
        if task.total and task.completed < task.total:
            parts.append(f"ETA {_clock(task.time_remaining)}")
        return " · ".join(parts)

    def _maybe_print(self, task_id) -> None:
        task = self._tasks[task_id]
        if task_id in self._finished:
            return
        finished = task.total is not None and task.completed >= task.total
        now = time.monotonic()
        if not finished and now - self._last.get(task_id, now) < self._every:
            return
        if finished:
            self._finished.add(task_id)
            if self._quiet_finish and task_id not in self._printed:
                return
        self._last[task_id] = now
        self._printed.add(task_id)
        self.console.print(self.line(task_id), highlight=False, markup=False, soft_wrap=True)


def plural(n: int, word: str, many: str | None = None) -> str:
    """``"1 thread"``, ``"2 threads"``: a count and its noun for a message (``many``: the plural
    when it is not ``word + "s"``)."""
    return f"{n:,} {word if n == 1 else (many or word + 's')}"


def warn(message: str) -> None:
    """Print a warning line to stderr (invisible characters escaped, as in error messages)."""
    from rich.markup import escape

    console.print(f"[yellow]warning:[/yellow] {escape(escape_invisible(message))}", highlight=False)


def escape_invisible(message: str) -> str:
    """``message`` with every invisible or control character other than a newline written as
    its escape (``\\t``, ``\\x1b``, ``\\ufeff``, ``\\u200b``): the CLI prints every error and
    warning through it, so a name quoted raw from the user's data cannot hide a character."""
    return "".join(c if c.isprintable() or c == "\n" else repr(c)[1:-1] for c in message)
