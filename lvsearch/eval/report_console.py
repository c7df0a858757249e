"""Evaluation reports on the terminal (rich): one report's verdicts, headline table and floor
notes after ``lvsearch evaluate`` (:func:`print_summary`), and several reports side by side,
``lvsearch evaluate --compare`` (:func:`compare_reports`). The reports are written by
:mod:`lvsearch.eval.job` and read and tabulated by :mod:`lvsearch.eval.report`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from lvsearch.eval.report import summary_rows


def print_summary(report: dict) -> None:
    """Print one report's verdicts against the floors, its headline table
    (:func:`lvsearch.eval.report.summary_rows`) and its floor notes."""
    from rich.table import Table

    from lvsearch import ui

    model = report["model"]
    from lvsearch.eval.report import verdict_lines

    for line in verdict_lines([report], [model["name"]]):  # the verdicts first; no rich markup ("[" in intervals)
        ui.console.print(line.replace("**", ""), highlight=False, markup=False)
    table = Table(title=f"evaluation of {model['name']} ({model['config']['objective']}, {model['num_params']:,} parameters)")
    table.add_column("metric", no_wrap=True)
    table.add_column("value", justify="right")
    for k, v in summary_rows(report):
        table.add_row(k, v)
    ui.console.print(table)
    from lvsearch.eval.report import floor_notes

    for note in floor_notes([report], [model["name"]]):
        ui.console.print(note, highlight=False)


def compare_reports(paths: Sequence[str | Path]) -> None:
    """Print reports side by side (stdout) with :func:`lvsearch.eval.report.comparison_table`
    (the table ``lvsearch report`` writes as Markdown); metrics missing from a report show as —.

    Raises:
        LvsearchError: a file is missing, not JSON, or not an evaluation report.
    """
    from rich.console import Console
    from rich.table import Table

    from lvsearch.eval.report import comparison_table, read_report

    reports = [read_report(p) for p in paths]
    from lvsearch.eval.report import report_label, unique_labels, verdict_lines

    # the names of lvsearch report's columns: RUN/model/results.json is RUN, not "model"
    names = unique_labels([report_label(p, r) for p, r in zip(paths, reports)])
    console = Console()
    for line in verdict_lines(reports, names):
        console.print(line.replace("**", ""), highlight=False, markup=False)
    table = Table(title="evaluation reports")
    table.add_column("metric", no_wrap=True)
    for p, name in zip(paths, names):
        table.add_column(f"{name}\n{Path(p).name}", justify="right")
    for metric, values in comparison_table(reports):
        table.add_row(metric, *values)
    console.print(table)
    from lvsearch.eval.report import floor_notes

    for note in floor_notes(reports, names):
        console.print(note, highlight=False)
