"""The quickstart report's prose: number formats, the sentences on the search (fitness, gap,
noise), on what the run's seeds can show, the summary, the architecture-string legend, and
the verdict lines the console prints after a run."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from lvsearch.eval.floors import FLOOR_RELATION, NOT_PAST_FLOOR
from lvsearch.quickstart.files import QUICKSTART_AGAIN
from lvsearch.search.folder import SearchFolder


def fmt(v, digits: int = 4) -> str:
    return "—" if v is None else f"{v:.{digits}f}"


def pm(values: list[float], digits: int = 4) -> str:
    if not values:
        return "—"
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{np.mean(values):.{digits}f} ± {np.std(values, ddof=1):.{digits}f}"


def signed(v: float) -> str:
    return f"{round(v, 12) + 0.0:+.4f}"  # no "-0.0000" from float noise


def interval_text(d: dict) -> str:
    return f"{signed(d['diff'])} [{signed(d['low'])}, {signed(d['high'])}] → **{d['verdict']}**"


def search_fitness_phrase(folder: Path) -> str:
    """How the search in ``folder`` scored candidates, for the report: the fitness, the dev
    sequences and masked targets, and the racing rungs (from ``state.json`` and ``noise.json``)."""
    search = SearchFolder(folder, regenerate=QUICKSTART_AGAIN)
    state = search.state()
    extra = state.get("extra") or {}
    n = extra.get("dev_sequences")
    noise = search.noise()
    targets = noise.get("targets") if noise is not None else None
    what = search.fitness(state).description
    text = f"fitness {what} on {n} fixed masked dev sequences" + (f" ({targets:,} masked targets)" if targets else "")
    racing = extra.get("racing") or {}
    if racing.get("rungs"):
        keep = f"the best 1/{racing.get('eta', 4):g}"
        steps = [f"every candidate on the first {racing['rungs'][0]}"]
        steps += [f"{keep} of those on {r}" for r in racing["rungs"][1:]] + [f"{keep} of those on all"]
        text += f", raced ({', '.join(steps)})"
    return text


def one_seed_sentence(seeds: int) -> str:
    """What a reader can and cannot conclude from this run's seeds, in one sentence."""
    if seeds == 1:
        return ("**What one run shows:** with one search seed and one pretraining seed, this report can show whether "
                "each arm learned past its floors and how these three trained models differ on these evaluation "
                "items; it cannot show that evolution finds better architectures than random search in general, "
                "which needs several search seeds (`benchmarks/search_arms.py`; docs/results.md, \"Does the search "
                "work?\"), nor how much of a difference is pretraining-seed noise (`--seeds 3`).")
    return (f"**What this run shows:** with {seeds} pretraining seeds but one search seed, this report can show whether "
            "each arm learned past its floors and whether the arms' differences exceed pretraining-seed noise; it "
            "cannot show that evolution finds better architectures than random search in general, which needs several "
            "search seeds (`benchmarks/search_arms.py`; docs/results.md, \"Does the search work?\").")


def search_noise_lines(*folders: Path) -> list[str]:
    """The fitness-noise sentences (:func:`lvsearch.search.noise.verdict_lines`) of each search
    folder's ``noise.json`` (EA first, then random search), as Markdown bullets; empty when none
    was written."""
    from lvsearch.search.noise import verdict_lines as noise_verdict

    lines = []
    for label, folder in zip(("EA", "random search"), folders):
        noise = SearchFolder(folder, regenerate=QUICKSTART_AGAIN).noise()
        if noise is not None:
            text = "; ".join(noise_verdict(noise))
            lines.append(f"- {label} top-k: {text}.")
    return ([*lines, ""] if lines else [])


def search_gap_sentence(ea_best: float, rs_best: float, ea_mean: float | None, rs_mean: float | None) -> str:
    """One sentence saying which search is ahead on supernet fitness (best and top-k mean), in
    the direction the numbers show, and that one seed per search leaves it untested."""
    def who(a, b) -> str:
        if a is None or b is None:
            return "unknown"
        return "EA" if a > b else "random search" if b > a else "neither (tied)"

    best, mean = who(ea_best, rs_best), who(ea_mean, rs_mean)
    lead = (f"{best} ahead on best fitness and top-k mean" if best == mean else
            f"{best} ahead on best fitness, {mean} on the top-k mean")
    return (f"Here: {lead}. One seed per search: whether that gap is systematic is not measured "
            "(`benchmarks/search_arms.py` runs several search seeds; docs/results.md, \"Does the search work?\").")


#: One line of legend for the architecture strings of the report and the console.
ARCH_LEGEND = ("Architecture strings name one op per slot, input side first: `s` = self-attention (SA), "
               "`f` = feed-forward (FF), `c` = dynamic convolution (DC); after `|`, the earlier outputs each slot "
               "reads (0 = the embeddings), slots separated by `;`.")


def console_headline(report_md: str) -> list[str]:
    """What the console prints after a quickstart: the report's verdict lines (each arm against
    its floors) and its summary sentence, Markdown emphasis removed; empty when the report has
    neither."""
    lines = report_md.splitlines()
    out: list[str] = []
    if "## Verdict against the floors" in lines:
        for line in lines[lines.index("## Verdict against the floors") + 1:]:
            if line.startswith("## "):
                break
            if line.startswith("- "):
                out.append(line.replace("**", ""))
    out += [line.replace("**", "") for line in lines if line.startswith("**Summary:**")]
    return out


def loss_sentence(losses: dict[str, list[float]]) -> str:
    """The EA arm's dev MLM loss (mean ± sample std over pretraining seeds) against each other
    arm's, as plain differences of per-arm means: the reports keep no per-target losses, so there
    is no paired interval (and no verdict) on loss. Empty without the EA arm's losses."""
    titles = {"bert": "`bert`", "random-search": "the random-search best", "random-arch": "the random architecture"}
    if not losses.get("ea"):
        return ""
    ea = float(np.mean(losses["ea"]))
    cells = []
    for other in ("bert", "random-search", "random-arch"):
        if losses.get(other):
            d = ea - float(np.mean(losses[other]))
            rel = "lower (better) than" if d < 0 else "higher (worse) than" if d > 0 else "equal to"
            cells.append(f"{rel} {titles[other]} ({pm(losses[other], 3)}, {d:+.3f})")
    if not cells:
        return ""
    return (f"on dev MLM loss (nats, lower is better; −loss is the search's default fitness) the searched architecture "
            f"has {pm(losses['ea'], 3)}, " + ", ".join(cells) + " — differences of per-arm means without an "
            "interval: the reports keep no per-target losses to pair")


def summary_sentences(comparisons: dict, ea_floor: str | None, losses: dict[str, list[float]] | None = None) -> str:
    """The report's summary: the EA arm against `bert`, the random-search best and the random
    architecture, on every paired metric there is (MLM dev accuracy — the standalone counterpart
    of what the search optimised — and BLiMP), each with the verdict of its interval, so the
    summary agrees with the tables; and on dev MLM loss (``losses``: arm → its runs' losses,
    :func:`loss_sentence`), which has no interval. ``ea_floor`` is the verdict of the EA arm's
    (MLM dev accuracy − neighbour-count floor) interval (``"ahead"``, ``"behind"``, ``"within
    noise"``; ``None``: no floor): unless ahead, a caveat says the arm is below the floor
    (behind) or within noise of it — never "below" for an interval that holds 0."""
    rel = {"ahead": "ahead of", "behind": "behind", "within noise": "not distinguishable from"}
    titles = {"bert": "`bert`", "random-search": "the random-search best", "random-arch": "the random architecture"}
    metric_names = {"mlm": "MLM dev accuracy", "blimp": "BLiMP"}
    parts = []
    for kind in ("mlm", "blimp"):
        cells = []
        for other in ("bert", "random-search", "random-arch"):
            d = comparisons.get(("ea", kind)) if other == "bert" else comparisons.get(("ea-vs", other, kind))
            if d is not None:
                cells.append(f"{rel[d['verdict']]} {titles[other]} ({d['diff']:+.4f})")
        if cells:
            parts.append(f"on {metric_names[kind]} the searched architecture is " + ", ".join(cells))
        if kind == "mlm" and parts and losses:
            loss = loss_sentence(losses)
            if loss:
                parts.append(loss)
    if not parts:
        return ""
    caveat = ""
    if ea_floor is not None and ea_floor != "ahead":
        caveat = (f" The searched architecture {NOT_PAST_FLOOR} ({FLOOR_RELATION[ea_floor]} the neighbour-count "
                  "floor), so none of "
                  "these differences is to be read as an architecture effect.")
    return (f"**Summary:** {'; '.join(parts)}. Differences inside their interval are not wins; MLM dev accuracy is "
            f"the standalone counterpart of what the search optimised (the supernet's MLM dev loss or accuracy).{caveat}")
