"""What ``lvsearch evolve`` shows and writes about its searches besides their state: the
top-k table (:func:`topk_table`, ELC inputs as a short digest, :func:`inputs_digest`), the
``[progress]`` lines of a long phase (:func:`phase_reporter`), ``noise.json`` of a finished
search (:func:`write_noise`) and ``compare_random.json``, the EA's pick against random
search's (:func:`compare_picks`). The job itself is :mod:`lvsearch.search.job`.
"""

from __future__ import annotations

from pathlib import Path

from lvsearch import tracking
from lvsearch.arch import Arch
from lvsearch.search.evolution import Search, SearchResult
from lvsearch.search.folder import SearchFolder, search_command


def topk_table(search: Search, title: str):
    """A rich table of the current top-k set. The ops column folds instead of cutting, and the
    ELC inputs are shown as a short digest (:func:`inputs_digest`), so candidates that differ
    anywhere read differently at any terminal width (the full keys are in topk.json)."""
    from rich.table import Table

    tab = Table(title=title, caption="inputs: digest of the ELC connectivity (full keys in topk.json)")
    with_latency = any(search.evaluator.memo[k].latency_ms is not None for k in search.topk)
    for col in ("#", "fitness", "accuracy", "loss", "params", "MFLOPs/tok", *(["latency ms"] if with_latency else [])):
        tab.add_column(col, justify="right", no_wrap=True)
    tab.add_column("ops", overflow="fold")
    tab.add_column("inputs", no_wrap=True)
    for i, k in enumerate(search.topk, start=1):
        r = search.evaluator.memo[k]
        ops, _, _ = k.partition("|")
        tab.add_row(str(i), f"{r.fitness:.4f}", "-" if r.accuracy is None else f"{r.accuracy:.4f}",
                    "-" if r.loss is None else f"{r.loss:.4f}",
                    "-" if r.params is None else f"{r.params:,}",
                    "-" if r.flops is None else f"{r.flops / 1e6:.2f}",
                    *([f"{r.latency_ms:.2f}" if r.latency_ms is not None else "-"] if with_latency else []),
                    ops, inputs_digest(k))
    return tab


def inputs_digest(key: str) -> str:
    """``"seq"`` for an architecture key whose slots read only the previous output, else the
    first 8 hex digits of the sha256 of its inputs part (after ``|``): a short, stable name for
    the ELC connectivity of a console row."""
    import hashlib

    _, sep, inputs = key.partition("|")
    return hashlib.sha256(inputs.encode()).hexdigest()[:8] if sep else "seq"


def write_noise(evaluator, res: SearchResult, folder: Path, metric: str, show: bool) -> None:
    """``noise.json``: the fitness noise among the finished search's top-k, and the verdict."""
    from lvsearch import ui
    from lvsearch.io import atomic_write_json
    from lvsearch.search.noise import search_noise, verdict_lines

    rep = search_noise(evaluator, [r.key for r in res.topk], metric)
    atomic_write_json(folder / "noise.json", rep)
    tracking.log(folder, res.iteration, {k: v for k, v in rep.items() if not isinstance(v, list)}, "noise/")
    if show:
        for line in verdict_lines(rep):
            ui.console.print(line, highlight=False, markup=False, soft_wrap=True)


def compare_picks(evaluator, folders: list[Path], out: Path, metric: str, show: bool,
                   compute: dict[str, dict] | None = None) -> None:
    """``compare_random.json``: the EA's pick (``best.json``) against random search's, paired on
    the fitness's dev targets (:func:`lvsearch.search.noise.pick_comparison`), with what each
    search spent (``compute``: evaluations and dev-sequence passes per search), and its lines."""
    from lvsearch import ui
    from lvsearch.io import atomic_write_json
    from lvsearch.search.noise import pick_comparison, pick_comparison_lines

    picks = [Arch.from_dict(SearchFolder(f, regenerate=search_command(out)).best()) for f in folders]
    rep = pick_comparison(evaluator.per_target(picks), picks[0].key, picks[1].key, metric)
    if compute is not None:
        rep["compute"] = compute
    atomic_write_json(out / "compare_random.json", rep)
    if show:
        for line in pick_comparison_lines(rep):
            ui.console.print(line, highlight=False, markup=False, soft_wrap=True)


def phase_reporter(show: bool, label: str):
    """``Search.on_progress`` for the log and the terminal: one ``[progress]`` line per phase
    (drawing or scoring a population) every ``$LVSEARCH_PROGRESS_EVERY`` seconds (default 30)
    while it runs, so a long first population is not silent (:func:`lvsearch.ui.phase_lines`)."""
    from lvsearch import ui

    bar = ui.phase_lines(enabled=show)
    if bar is None:
        return None
    tasks: dict[str, object] = {}

    def report(stage: str, done: int, total: int) -> None:
        task = tasks.get(stage)
        if task is None:
            task = tasks[stage] = bar.add_task(f"{label}: {stage}", total=total, info="")
        bar.update(task, completed=done)

    return report
