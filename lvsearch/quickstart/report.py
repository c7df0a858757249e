"""``report.md`` of a quickstart run: the verdict of every arm against its floors, the arms, their
differences with their spread, the search and its fitness noise, the finalists (when run), the
rank check, the cost per stage and what was cut to fit.

Honesty rules: every arm is trained identically (the table shows the shared
settings); a difference is called a win only when its 95% interval excludes zero:

* MLM dev accuracy and BLiMP: paired bootstrap over the evaluation items (the same masked dev
  targets / the same BLiMP pairs for every arm; :func:`lvsearch.stats.mean_difference_interval`,
  percentile interval, 2,000 resamples, seed 0). With several pretraining seeds the items of
  all seeds are paired seed by seed, and the seed spread is shown beside it. With one seed the
  interval covers evaluation-sample noise only; pretraining-seed noise is then unmeasured and
  the report says so.
* Fine-tuning: mean ± std over fine-tuning seeds; with fewer than two seeds per arm no verdict.
* Reference floors (:mod:`lvsearch.eval.floors`): the arms table has the unigram and
  neighbour-count floors at the arms' training token count (scored by ``evaluate`` on the same
  dev targets) and each arm's paired-bootstrap difference from the neighbour-count floor; an
  arm not ahead of it beyond noise "has not learned past local co-occurrence" and the report
  says its BLiMP/task differences are not to be read as architecture effects. The supernet
  panel is shown against the floors at the supernet's token count.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from lvsearch.eval.finetune import FAILED_TEXT
from lvsearch.eval.floors import NOT_ARCH_EFFECT, NOT_PAST_FLOOR
from lvsearch.eval.report import read_report
from lvsearch.io import atomic_write_bytes, copy_file, read_json
from lvsearch.quickstart.files import QUICKSTART_AGAIN, Rank, RetrainRunConfig, RetrainSummary, read_stage_file
from lvsearch.search.folder import TOPK, SearchFolder
from lvsearch.stats import RESAMPLES, mean_difference_interval
from lvsearch.quickstart.plan import ARM_TITLES, STAGE_ORDER, make_plan

if TYPE_CHECKING:  # pragma: no cover
    from lvsearch.quickstart.context import Context

OP_COLOURS = {"SA": "#4C72B0", "FF": "#DD8452", "DC": "#55A868"}


# ------------------------------------------------------------------------------- statistics
def _bits(s: str) -> np.ndarray:
    return np.frombuffer(s.encode("ascii"), dtype=np.uint8) - ord("0")


def mlm_outcomes(report: dict) -> np.ndarray | None:
    """``(targets,)`` 0/1 per-target MLM dev outcomes of an evaluation report (the masked dev
    targets in order), or None when the report has none."""
    m = report.get("mlm") or {}
    s = m.get("per_target_correct")
    return None if not s else _bits(s)


def _floor(report: dict) -> dict | None:
    """The report's floors entry when it was computed, else None."""
    f = (report.get("mlm") or {}).get("floors") or {}
    return f if f.get("status") == "done" else None


def _floor_outcomes(report: dict, name: str = "neighbour-count") -> np.ndarray | None:
    f = _floor(report)
    s = None if f is None else f[name].get("per_target_correct")
    return None if not s else _bits(s)


def floor_comparison(reports: list[dict]) -> dict | None:
    """Paired bootstrap (:func:`paired_difference`) of the MLM dev outcomes of one arm's runs
    against their own neighbour-count floors (same targets, seed by seed); None when a report
    lacks per-target outcomes or floors."""
    a = [mlm_outcomes(r) for r in reports]
    b = [_floor_outcomes(r) for r in reports]
    if any(x is None for x in a + b) or any(x.shape != y.shape for x, y in zip(a, b)):
        return None
    return mean_difference_interval(np.concatenate(a), np.concatenate(b))


def blimp_outcomes(report: dict) -> np.ndarray | None:
    """``(pairs,)`` 0/1 per-pair BLiMP outcomes of an evaluation report (paradigms in sorted
    order, pairs in file order), or None when BLiMP did not run or lacks per-pair outcomes."""
    b = report.get("blimp") or {}
    if b.get("status") != "done":
        return None
    parts = [p.get("per_pair_correct", "") for _, p in sorted(b["paradigms"].items())]
    return _bits("".join(parts)) if all(parts) else None


def _split(report: dict, task: str) -> str:
    return "test" if "test" in report["finetune"][task]["aggregate"] else "dev"


def _learned(seed_result: dict) -> bool:
    """Whether a fine-tuning seed's training loss fell (reports before the rule count as learned)."""
    return seed_result.get("status", "ok") != "failed"


def _task_scores(report: dict) -> dict[str, tuple[str, list[float]]]:
    """``{task: (metric, per-seed values)}`` on test when labelled, else dev; seeds whose
    training loss did not fall (``status == "failed"``) are left out."""
    out = {}
    for name, ft in (report.get("finetune") or {}).items():
        split = "test" if "test" in ft["aggregate"] else "dev"
        metric = ft.get("select_metric") or next(iter(ft["aggregate"][split]))
        vals = [r[split][metric] for r in ft.get("per_seed", [])
                if _learned(r) and r.get(split) and r[split].get(metric) is not None]
        out[name] = (f"{split} {metric}", [float(v) for v in vals])
    return out


# ------------------------------------------------------------------------------- figures
def plot_arch_strips(archs: dict[str, object], path: Path) -> None:
    """One row per arm: slots as boxes coloured by op (SA/FF/DC), arcs for every input other
    than the previous slot (ELC connectivity)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Arc, Patch, Rectangle

    from lvsearch.io import save_figure

    rows = list(archs.items())
    n = max(a.num_slots for _, a in rows)
    fig, ax = plt.subplots(figsize=(1.2 + 0.75 * (n + 1), 0.3 + 1.25 * len(rows)))
    for r, (label, arch) in enumerate(rows):
        y = (len(rows) - 1 - r) * 1.25
        ax.add_patch(Rectangle((0, y), 0.8, 0.5, facecolor="#DDDDDD", edgecolor="black"))
        ax.text(0.4, y + 0.25, "emb", ha="center", va="center", fontsize=7)
        for s, (op, inputs) in enumerate(zip(arch.ops, arch.inputs), start=1):
            ax.add_patch(Rectangle((s, y), 0.8, 0.5, facecolor=OP_COLOURS.get(op, "white"), edgecolor="black"))
            ax.text(s + 0.4, y + 0.25, op, ha="center", va="center", fontsize=7, color="white")
            for i in inputs:
                if i == s - 1:
                    continue
                width = s - i
                ax.add_patch(Arc(((s + i) / 2 + 0.4, y + 0.5), width, 0.5 + 0.08 * width, theta1=0, theta2=180,
                                 linewidth=0.6, color="#555555", alpha=0.7))
        ax.text(-0.2, y + 0.25, label, ha="right", va="center", fontsize=8)
    ax.set_xlim(-0.2, n + 1)
    ax.set_ylim(-0.3, len(rows) * 1.25 + 0.2)
    ax.axis("off")
    ax.legend(handles=[Patch(color=c, label=k) for k, c in OP_COLOURS.items()], loc="upper right",
              bbox_to_anchor=(1.0, 1.08), ncol=3, fontsize=7, frameon=False)
    ax.set_title("architectures (arcs: inputs other than the previous slot)", fontsize=9, loc="left")
    fig.tight_layout()
    save_figure(fig, path, dpi=120)


def plot_learning_curves(curves: dict[str, list[dict]], path: Path, ylabel: str = "dev MLM loss (nats)") -> None:
    """The curve's ``loss`` (dev MLM loss in nats; the generator's under ELECTRA) against
    tokens seen, one line per run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from lvsearch.io import save_figure

    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for label, rows in curves.items():
        pts = [(r["tokens"], r["loss"]) for r in rows if r.get("loss") is not None]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=".", label=label)
    ax.set_xlabel("tokens seen")
    ax.set_ylabel(ylabel)
    ax.set_title("retraining curves (same data, steps and seed policy)", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)


# ------------------------------------------------------------------------------- report
def finalists_section(state: dict) -> list[str]:
    """Markdown of a ``retrain --finalists`` decision log: every round's predictions,
    intervals and cuts, what plain successive halving (current loss) would have kept, the
    compute spent and, when run, the comparison with training every finalist to the end."""
    lines = ["## Finalist pruning (successive halving)", ""]
    w = lines.append
    m4 = state.get("rule") == "m4"
    rule = "M4 extrapolation" if m4 else "current dev loss"
    how = (f"ranked by the M4 extrapolation of the dev MLM loss to the full budget (x = tokens, ε₀ = ln V = "
           f"{state['eps0']:.2f} nats); a finalist below the cut is kept while the lower end of its 90% bootstrap "
           "interval reaches the cut-off" if m4 else
           "ranked by the current dev MLM loss (plain successive halving, the default: it picked as well as or "
           "better than M4 extrapolation in the measured jobs, docs/results.md; `--pruning extrapolate` ranks by M4)")
    w(f"The EA's top {len(state['settings']['finalists'])} architectures were retrained with the arms' recipe and "
      f"pruned at {', '.join(str(r) for r in state['rungs_steps'])} steps (η = {state['settings'].get('eta', 2)}), "
      f"{how}. Its pick, trained to the full budget, is the EA arm above.\n")
    for r in state.get("rounds", []):
        d = r["decision"]
        note = ""
        if d.get("fallback"):
            why = re.sub(r"^candidate '[^']*': (prediction_interval: )?", "", str(d["fallback"])).rstrip(":")
            note = f" — **ranked by current dev loss** (M4 not usable: {why})"
        w(f"Round {r['round']} at {r['budget_steps']} steps{note}:\n")
        w("| finalist | dev loss now | predicted at full budget [90% interval] | decision |")
        w("|---|---|---|---|")
        for name in d["ranking"]:
            c = d["candidates"][name]
            pred = "—" if c.get("scored_by") != "M4" else f"{c['score']:.3f} [{c['lo']:.3f}, {c['hi']:.3f}]"
            w(f"| `{name}` | {c['last_loss']:.3f} | {pred} | {c['decision']}: {c['reason']} |")
        n_keep = d.get("n_keep_by_rank") or 1
        by_loss = sorted(d["candidates"], key=lambda n: (d["candidates"][n]["last_loss"], n))[:n_keep]
        same = set(by_loss) <= set(d["kept"])
        w("")
        if m4:
            w(f"Plain successive halving (rank by current loss) would keep {', '.join(f'`{n}`' for n in by_loss)} here"
              f" — {'also kept' if same else 'not all kept'} by {rule}.\n")
    f = state.get("final")
    if f:
        w(f"Pick: `{f['pick']}` — {f['reason']}. Compute: {f['compute_steps']} of {f['compute_all_steps']} "
          f"finalist-steps, {f['compute_fraction']:.0%} of training all of them to the end.\n")
    c = state.get("comparison")
    if c:
        w(f"Training all finalists to the end picks `{c['train_all']['pick']}` (dev loss {c['train_all']['final_loss']:.3f}):\n")
        w("| rule | pick | agrees | regret (nats) | compute |")
        w("|---|---|---|---|---|")
        for name, r in c["rules"].items():
            w(f"| {name} | `{r['pick']}` | {'yes' if r['agrees'] else 'no'} | {r['regret']:.3f} | {r['compute_fraction']:.0%} |")
        w("")
    else:
        w("Whether the pick agrees with training every finalist to the end is not measured at this budget "
          "(`--minutes 40` or more adds that comparison).\n")
    return lines


def _fmt(v, digits: int = 4) -> str:
    return "—" if v is None else f"{v:.{digits}f}"


def _pm(values: list[float], digits: int = 4) -> str:
    if not values:
        return "—"
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{np.mean(values):.{digits}f} ± {np.std(values, ddof=1):.{digits}f}"


def _signed(v: float) -> str:
    return f"{round(v, 12) + 0.0:+.4f}"  # no "-0.0000" from float noise


def _interval(d: dict) -> str:
    return f"{_signed(d['diff'])} [{_signed(d['low'])}, {_signed(d['high'])}] → **{d['verdict']}**"


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


def floor_table_rows(arm_reports: dict[str, list[dict]], floor_cmp: dict[str, dict | None]) -> list[tuple[str, list[str]]]:
    """Arms-table rows of the reference floors: ``unigram floor (N tokens)``,
    ``neighbour-count floor (N tokens)`` (per arm, mean over its seeds' floors) and ``MLM dev
    accuracy − neighbour-count floor`` (paired bootstrap, with the :data:`NOT_PAST_FLOOR`
    wording when not ahead). One ``floors`` row with the reason when none could be computed."""
    arms = list(arm_reports)
    floors = {a: [_floor(r) for r in arm_reports[a]] for a in arms}
    if not any(f for a in arms for f in floors[a]):
        first = (arm_reports[arms[0]][0].get("mlm") or {}).get("floors") or {}
        reason = first.get("reason") or "the evaluation reports hold no floors (evaluated before floors existed)"
        return [("reference floors", [f"unavailable: {reason}"] * len(arms))]
    tokens = sorted({f["tokens_seen"] for a in arms for f in floors[a] if f})
    n = f"{tokens[0]:,}" if len(tokens) == 1 else "/".join(f"{t:,}" for t in tokens)
    rows = []
    for name in ("unigram", "neighbour-count"):
        rows.append((f"{name} floor ({n} training tokens)",
                     [_pm([f[name]["accuracy"] for f in floors[a] if f]) if all(floors[a]) else "unavailable" for a in arms]))
    cells = []
    for a in arms:
        d = floor_cmp.get(a)
        if d is None:
            cells.append("—")
        else:
            cells.append(_interval(d) + ("" if d["verdict"] == "ahead" else f": {NOT_PAST_FLOOR}"))
    rows.append(("MLM dev accuracy − neighbour-count floor", cells))
    return rows


def supernet_floor_section(summary: dict) -> list[str]:
    """Markdown lines: the supernet's final panel accuracies against the floors at the
    supernet's own token count (from its ``summary.json``); empty when it holds no floors."""
    floors = summary.get("floors")
    panel = (summary.get("final_eval") or {}).get("panel") or {}
    if not floors or not panel:
        return []
    nc, uni = floors["neighbour-count"], floors["unigram"]
    lines = ["## Supernet panel against the floors\n",
             f"The supernet's reference panel at step {summary.get('steps')} (inherited weights, the supernet's dev set, "
             f"{nc.get('predicted_tokens', '?')} masked targets) against the floors counted on the "
             f"{nc.get('tokens_seen', 0):,} training tokens the supernet saw: unigram {uni['accuracy']:.4f}, "
             f"neighbour-count {nc['accuracy']:.4f}.\n",
             "| panel architecture | dev MLM accuracy | − neighbour-count floor | verdict |", "|---|---|---|---|"]
    beats = summary.get("beats_floor") or {}
    for name, r in panel.items():
        verdict = "above the floor" if beats.get(name) else NOT_PAST_FLOOR
        lines.append(f"| `{name}` | {r['accuracy']:.4f} | {_signed(r['accuracy'] - nc['accuracy'])} | {verdict} |")
    lines.append("")
    if not any(beats.get(name) for name in panel):
        lines.append("No panel architecture beats the neighbour-count floor: the supernet "
                     f"{NOT_PAST_FLOOR}, so fitness differences between architectures are not to be read as architecture "
                     "effects.\n")
    return lines


def write_quickstart_report(ctx: "Context") -> Path:
    """Write ``OUT/report.md`` and its PNGs; returns the report path."""
    from lvsearch.arch import Arch
    from lvsearch.eval.report import plot_alpha
    from lvsearch.io import iter_jsonl
    from lvsearch.search.job import RANDOM_DIR

    out, plan, settings = ctx.out, ctx.plan, ctx.settings
    arms = plan.arms  # the arms this run trained, in report order
    names = {arm: ctx.run_names(arm) for arm in arms}
    reports = {n: read_report(out / "eval" / f"{n}.json") for arm in arms for n in names[arm]}
    archs = {arm: Arch.from_dict(read_stage_file(out / "retrain" / arm / "config.json", RetrainRunConfig,
                                                 what="retrain run config")["arch"],
                                 source=out / "retrain" / arm / "config.json") for arm in arms}
    summaries = {n: read_stage_file(out / "retrain" / n / "summary.json", RetrainSummary, what="retrain summary")
                 for arm in arms for n in names[arm]}
    lines: list[str] = []
    w = lines.append

    # ---- header
    stages = ctx.state.get("stages", {})
    total_s = sum(s.get("seconds", 0.0) for s in stages.values())
    w("# lvsearch quickstart report\n")
    w(f"Data: `{settings.data}` · search space `{settings.space}` · retrain objective **{settings.objective}** · "
      f"budget {plan.minutes:g} min (plan below) · wall time so far {total_s / 60:.1f} min · "
      f"pretraining seeds per arm: {plan.seeds}.\n")
    w(f"Every arm was retrained from scratch with the same recipe (`{settings.retrain_recipe}`), objective, "
      f"{plan.retrain_steps} steps × {summaries[names['bert'][0]].get('tokens', 0) // max(1, plan.retrain_steps):,} "
      f"tokens, data and seeds; only the architecture differs." + (
          " The EA arm is the pick of successive halving over the EA's top finalists: its rungs are exact prefixes "
          "of a full run and its resumes are exact, so its weights equal a fresh retrain's (verified byte for byte, "
          "docs/results.md), but it was selected among the finalists by dev loss while the random-search arm is a "
          "single pick — a selection advantage the comparisons below do not remove." if plan.finalists else
          " The EA arm is the evolutionary search's pick and the random-search arm random search's, each chosen by "
          "the same supernet fitness after the same compute (dev-sequence passes) from the same first population.")
      + (" Both searches picked the same architecture, so it was trained and evaluated once and the two arms "
         "share one run." if _same_pick(archs) else "") + "\n")
    retrained = (stages.get("retrain", {}).get("result") or {})
    if any(isinstance(r, dict) and r.get("worker") for r in retrained.values()):
        w("The arms were retrained and evaluated at once, each in its own single-threaded worker process (on two "
          "cores faster than one two-threaded process; the weights are those of a one-thread retrain, bit for bit; "
          "logs in `logs/`).\n")
    early = [n for n, r in retrained.items() if isinstance(r, dict) and r.get("background")]
    if early:
        then = (" and was evaluated as soon as it was trained"
                if all(retrained[n].get("evaluated") for n in early) else "")
        w(f"{', '.join(f'`{n}`' for n in early)} (whose architecture does not depend on the search) trained in the "
          f"background while the supernet trained and the search ran{then}, on a core of its own, so its time "
          "is counted in the stages it overlapped.\n")
    w("Wall time is the sum over every process that worked on this folder (a resumed run adds up).\n")
    budget_min = plan.minutes * (2 if plan.seeds > 1 else 1)
    if total_s > 1.5 * budget_min * 60:
        w(f"**This run took {total_s / 60:.1f} min, {total_s / 60 / budget_min:.1f}× its ~{budget_min:g}-minute "
          "budget**: the plan is calibrated on an otherwise idle 2-core machine, and other jobs on the same cores "
          "(or fewer or slower cores) stretch every stage. The numbers below do not depend on the speed (same "
          "command, same thread count → same results; see docs/results.md \"Reliability\").\n")

    # ---- verdicts first: each arm (and seed) against its MLM, BLiMP and fine-tuning floors
    from lvsearch.eval.report import verdict_lines

    run_names = [n for a in arms for n in names[a]]
    verdict = verdict_lines([reports[n] for n in run_names], run_names)
    if verdict:
        lines.extend(verdict[:2])
        w("Each floor is a count model of the same training text or examples (MLM: neighbour-count; BLiMP: "
          "a Kneser-Ney n-gram LM of the sequences the arm saw; fine-tuning: TF-IDF + logistic regression on the "
          "same training examples). \"Beats\" = the paired-bootstrap 95% interval of arm − floor lies above 0.\n")
        lines.extend(verdict[2:])

    w(one_seed_sentence(plan.seeds) + "\n")

    # ---- arms table
    w("## The arms\n")
    head = ["", *[ARM_TITLES[a] for a in arms]]
    rows = [
        ("architecture", [f"`{archs[a].compact}`" for a in arms]),
        ("parameters", [f"{summaries[names[a][0]].get('params', 0):,}" for a in arms]),
        ("MLM dev accuracy", [_pm([reports[n]["mlm"]["accuracy"] for n in names[a]]) for a in arms]),
        ("MLM dev loss (nats)", [_pm([reports[n]["mlm"]["loss"] for n in names[a]], 3) for a in arms]),
    ]
    floor_cmp = {a: floor_comparison([reports[n] for n in names[a]]) for a in arms}
    rows += floor_table_rows({a: [reports[n] for n in names[a]] for a in arms}, floor_cmp)
    if all((reports[n].get("blimp") or {}).get("status") == "done" for n in reports):
        rows.append(("BLiMP mean over paradigms", [_pm([reports[n]["blimp"]["mean_over_paradigms"] for n in names[a]]) for a in arms]))
        bfl = {a: [(reports[n]["blimp"].get("floor") or {}) for n in names[a]] for a in arms}
        if all(f.get("status") == "done" for a in arms for f in bfl[a]):
            order = bfl["bert"][0]["order"]
            rows.append((f"BLiMP floor ({order}-gram Kneser-Ney)", [_pm([f["mean_over_paradigms"] for f in bfl[a]]) for a in arms]))
            rows.append(("BLiMP − floor", [_pm([f["vs_floor"]["difference"] for f in bfl[a]]) for a in arms]))
        terms = sorted(reports[names["bert"][0]]["blimp"]["phenomena"])
        for t in terms:
            rows.append((f"  BLiMP {t}", [_pm([reports[n]["blimp"]["phenomena"][t]["accuracy"] for n in names[a]]) for a in arms]))
    else:
        b = reports[names["bert"][0]].get("blimp") or {}
        rows.append(("BLiMP", [f"{b.get('status', 'skipped')}: {b.get('reason', '')}"] * len(arms)))
    task_scores = {n: _task_scores(r) for n, r in reports.items()}
    for task in sorted(task_scores[names["bert"][0]]):
        metric = task_scores[names["bert"][0]][task][0]
        pooled = {a: [v for n in names[a] for v in task_scores[n][task][1]] for a in arms}
        rows.append((f"{task} {metric}", [_pm(pooled[a]) if pooled[a] else FAILED_TEXT for a in arms]))
        mcc = {a: [r[_split(reports[n], task)]["mcc"] for n in names[a] for r in reports[n]["finetune"][task]["per_seed"]
                   if _learned(r) and (r.get(_split(reports[n], task)) or {}).get("mcc") is not None] for a in arms}
        if all(mcc.values()):
            rows.append((f"{task} MCC (0 = one class / chance)", [_pm(mcc[a]) for a in arms]))
        tfl = {a: [(reports[n]["finetune"][task].get("floor") or {}) for n in names[a]] for a in arms}
        if all(f.get("status") == "done" and f.get("test") for a in arms for f in tfl[a]):
            m = reports[names["bert"][0]]["finetune"][task]["select_metric"]
            rows.append((f"{task} test {m} floor (bag of words)", [_pm([f["test"][m] for f in tfl[a]]) for a in arms]))
    w("| " + " | ".join(head) + " |")
    w("|" + "---|" * len(head))
    for label, vals in rows:
        w(f"| {label} | " + " | ".join(vals) + " |")
    w("")
    w("Values are the mean over pretraining seeds (± sample std when there are several); task scores "
      "pool every (pretraining seed, fine-tuning seed) run whose training loss fell; a run whose last-epoch "
      "train loss stayed at ≥ 0.98 × the constant-prediction loss is left out, and an arm with no other run "
      f"shows \"{FAILED_TEXT}\". The floor rows are reference predictors, not "
      "models: unigram (always the most frequent training token) and neighbour-count (the most frequent "
      "token between the same left/right neighbours, backing off to one neighbour, then unigram), counted on "
      "exactly the training sequences each arm saw and scored on the same masked dev targets; the last row is "
      "the paired bootstrap of the arm against its floor.\n")
    below = [a for a in arms if floor_cmp[a] is not None and floor_cmp[a]["verdict"] != "ahead"]
    if settings.objective == "electra":
        w("Objective **ELECTRA** (replaced-token detection): the discriminator has no MLM head, so MLM dev "
          "accuracy/loss and BLiMP pseudo-log-likelihoods are those of each arm's ELECTRA *generator* "
          "(same slot sequence at generator width), and fine-tuning uses the discriminator. "
          "`--objective mlm` (the default) measures the retrained model itself.\n")

    # ---- differences
    w("## Differences against `bert`, with their spread\n")
    w("Paired bootstrap over the same evaluation items (95% percentile interval, "
      f"{RESAMPLES:,} resamples). A difference is a win only when its interval excludes 0.\n")
    w("| arm | MLM dev accuracy − bert | BLiMP accuracy − bert | tasks |")
    w("|---|---|---|---|")
    comparisons = {}
    for arm in arms:
        if arm == "bert":
            continue
        cells = []
        for kind, get in (("mlm", mlm_outcomes), ("blimp", blimp_outcomes)):
            a = [get(reports[n]) for n in names[arm]]
            b = [get(reports[n]) for n in names["bert"]]
            if any(x is None for x in a + b) or any(x.shape != y.shape for x, y in zip(a, b)):
                cells.append("—")
                continue
            d = mean_difference_interval(np.concatenate(a), np.concatenate(b))
            comparisons[(arm, kind)] = d
            cells.append(_interval(d))
        tcell = []
        for task in sorted(task_scores[names["bert"][0]]):
            va = [v for n in names[arm] for v in task_scores[n][task][1]]
            vb = [v for n in names["bert"] for v in task_scores[n][task][1]]
            if not va or not vb:
                who = " and ".join(w for w, v in ((ARM_TITLES[arm], va), ("bert", vb)) if not v)
                tcell.append(f"{task}: {who} {FAILED_TEXT}, no difference")
            elif len(va) < 2 or len(vb) < 2:
                tcell.append(f"{task}: {np.mean(va) - np.mean(vb):+.4f} (n={len(va)}, no spread: no verdict)")
            else:
                from scipy import stats

                t = stats.ttest_ind(va, vb, equal_var=False)
                verdict = "within noise" if not (t.pvalue < 0.05) else ("ahead" if np.mean(va) > np.mean(vb) else "behind")
                tcell.append(f"{task}: {np.mean(va) - np.mean(vb):+.4f} (Welch p={t.pvalue:.2f}) → **{verdict}**")
        w(f"| {ARM_TITLES[arm]} | {' | '.join(cells)} | {'; '.join(tcell) or '—'} |")
    w("")
    if below:
        who = "; ".join(f"{ARM_TITLES[a]} ({_interval(floor_cmp[a])})" for a in below)
        w(f"**Below the neighbour-count floor:** {who}. Each of these arms {NOT_PAST_FLOOR} (its MLM dev accuracy "
          f"is not above the floor beyond evaluation noise), so {NOT_ARCH_EFFECT}.\n")
    w("The searched architecture against the other two non-baseline arms (is the search better than "
      "picking at random?):\n")
    w("| comparison | MLM dev accuracy | BLiMP accuracy | dev MLM loss (nats; no interval) |")
    w("|---|---|---|---|")
    mean_loss = {a: [reports[n]["mlm"]["loss"] for n in names[a] if reports[n]["mlm"].get("loss") is not None]
                 for a in arms}
    for other in [a for a in ("random-search", "random-arch") if a in arms]:
        cells = []
        for kind, get in (("mlm", mlm_outcomes), ("blimp", blimp_outcomes)):
            a = [get(reports[n]) for n in names["ea"]]
            b = [get(reports[n]) for n in names[other]]
            if any(x is None for x in a + b) or any(x.shape != y.shape for x, y in zip(a, b)):
                cells.append("—")
                continue
            d = mean_difference_interval(np.concatenate(a), np.concatenate(b))
            comparisons[("ea-vs", other, kind)] = d
            cells.append(_interval(d))
        ea_l, other_l = mean_loss["ea"], mean_loss[other]
        cells.append(f"{_pm(ea_l, 3)} vs {_pm(other_l, 3)}: {float(np.mean(ea_l)) - float(np.mean(other_l)):+.3f}"
                     if ea_l and other_l else "—")
        w(f"| EA − {ARM_TITLES[other]} | {' | '.join(cells)} |")
    w("")
    w("Dev MLM loss is what the search optimised by default (fitness −loss on the supernet). The loss column is "
      "the plain difference of the arms' mean losses (lower is better): the evaluation reports keep no "
      "per-target losses, so it has no paired interval and no verdict; with several pretraining seeds each mean "
      "is given ± its sample std.\n")
    if plan.seeds == 1:
        w("With one pretraining seed per arm these intervals cover evaluation-sample noise only; "
          "the spread between pretraining seeds is **unmeasured** at this budget "
          f"(`--seeds 3` measures it, in about {make_plan(plan.minutes, 3).total_minutes():.0f} min).\n")
    summary = summary_sentences(comparisons, "ea" in below, mean_loss)
    if summary:
        w(summary + "\n")

    # ---- figures
    strip = out / "architectures.png"
    plot_arch_strips({ARM_TITLES[a]: archs[a] for a in arms}, strip)
    w("## Architectures\n")
    w(f"![architectures]({strip.name})\n")
    w(ARCH_LEGEND + "\n")
    for a in arms:
        w(f"- {ARM_TITLES[a]}: `{archs[a].key}`")
    w("")
    from lvsearch.modeldir import load_model

    ea_model = load_model(out / "retrain" / "ea" / "model")
    alpha = ea_model.encoder.alpha_matrix().numpy()
    alpha_png = out / "alpha_ea.png"
    plot_alpha(alpha, list(archs["ea"].ops), f"α of the searched model ({archs['ea'].compact})", alpha_png)
    w("### α of the searched model (ELC-BERT Figure 1 style)\n")
    w(f"![alpha]({alpha_png.name})\n")
    multi = [(n, inp) for n, inp in enumerate(archs["ea"].inputs, start=1) if len(inp) > 1]
    if multi:
        w("Learned α of the slots that read several earlier outputs (h0 = embeddings):\n")
        for n, inp in multi:
            w(f"- slot {n} ({archs['ea'].ops[n - 1]}): " + ", ".join(f"h{i} {alpha[n - 1, i]:.3f}" for i in inp))
        w("")
    else:
        w("The searched model reads only the previous slot everywhere (α is one-hot).\n")

    curves = {}
    for arm in arms:
        path = out / "retrain" / arm / "curve.jsonl"
        if path.exists():
            curves[ARM_TITLES[arm]] = [o for _, o in iter_jsonl(path, path.read_text(encoding="utf-8"),
                                                                 fix="re-run the retrain stage")]
    curve_png = out / "learning_curves.png"
    electra = settings.objective == "electra"
    plot_learning_curves(curves, curve_png,
                         "dev MLM loss of the ELECTRA generator (nats)" if electra else "dev MLM loss (nats)")
    w("## Retraining curves\n")
    w(f"![learning curves]({curve_png.name})\n")
    bert_mlm = reports[names["bert"][0]].get("mlm") or {}
    w(f"Curve points are evaluated every {plan.curve_every} steps on a small dev subset ({plan.curve_sequences} "
      f"sequences, to keep them cheap); the table's MLM numbers use {bert_mlm.get('sequences', plan.mlm_dev_sequences)} "
      f"dev sequences ({bert_mlm.get('predicted_tokens', '?')} masked targets, one target = "
      f"{1 / max(1, bert_mlm.get('predicted_tokens') or 1):.4f} accuracy), so the two differ in level and "
      "may differ in order.\n")

    # ---- search
    w("## Search: evolution vs random search\n")
    src = ctx.search_dir / "search_curve.png"
    if src.exists():
        copy_file(src, out / "search_curve.png")
        w("![search curve](search_curve.png)\n")
    ea_search = SearchFolder(ctx.search_dir, regenerate=QUICKSTART_AGAIN)
    rs_search = ea_search.control()
    ea_best, rs_best = ea_search.best(), rs_search.best()
    curve_ea, curve_rs = (ea_search.curve()[-1:] or [{}])[0], (rs_search.curve()[-1:] or [{}])[0]
    w(f"Both searches made {plan.population} × {plan.iterations} = {plan.population * plan.iterations} evaluations "
      f"(supernet weights; {search_fitness_phrase(ctx.search_dir)}). Best supernet fitness: "
      f"EA {_fmt(ea_best['meta']['fitness'])} (`{Arch.from_dict(ea_best).compact}`), random search "
      f"{_fmt(rs_best['meta']['fitness'])} (`{Arch.from_dict(rs_best).compact}`); top-{min(plan.topk, plan.population)} "
      f"mean EA {_fmt(curve_ea.get('topk_mean'))}, random {_fmt(curve_rs.get('topk_mean'))}. "
      + search_gap_sentence(ea_best["meta"]["fitness"], rs_best["meta"]["fitness"], curve_ea.get("topk_mean"),
                            curve_rs.get("topk_mean")) + "\n")
    if (ctx.search_dir / "compare_random.json").exists():
        from lvsearch.search.noise import pick_comparison_lines, read_pick_comparison

        w(pick_comparison_lines(read_pick_comparison(ctx.search_dir / "compare_random.json"))[0] + ".\n")
    lines.extend(search_noise_lines(ctx.search_dir, ctx.search_dir / RANDOM_DIR))

    fin_path = out / "finalists" / "finalists.json"
    if fin_path.exists():
        lines.extend(finalists_section(read_json(fin_path, what="finalist decision log")))

    sn_summary_path = ctx.supernet_dir / "summary.json"
    if sn_summary_path.exists():
        lines.extend(supernet_floor_section(read_json(sn_summary_path, what="supernet summary")))

    # ---- rank check
    rank_path = out / "rank.json"
    if rank_path.exists():
        rk = read_stage_file(rank_path, Rank, what="rank check")
        w("## Supernet rank check\n")
        w(f"Supernet fitness (inherited weights, step {rk['supernet_step']}, {rk['dev_sequences']} dev sequences) "
          f"against the MLM dev accuracy of the same architectures trained from scratch, over the {rk['n']} arms: "
          + (f"Kendall τ = {_fmt(rk['kendall_tau'], 2)} (p = {_fmt(rk['kendall_p'], 2)}"
             + (f"; 95% bootstrap interval [{_fmt(rk['kendall_tau_ci95'][0], 2)}, {_fmt(rk['kendall_tau_ci95'][1], 2)}]"
                if (rk.get("kendall_tau_ci95") or [None])[0] is not None
                else f"; no bootstrap interval from {rk['n']} points") + "), "
             f"Spearman ρ = {_fmt(rk['spearman_rho'], 2)} (p = {_fmt(rk['spearman_p'], 2)}). "
             if rk["n"] >= MIN_RANK_P_POINTS else
             f"Kendall τ = {_fmt(rk['kendall_tau'], 2)}, Spearman ρ = {_fmt(rk['spearman_rho'], 2)}; no p-value or "
             f"interval from {rk['n']} points (with 3, even a perfect order has an exact p of 1/3). ")
          + f"With {rk['n']} points this is indicative only (`lvsearch rank-check` samples more).\n")
        w("| arm | supernet fitness | standalone MLM accuracy |")
        w("|---|---|---|")
        for r in rk["rows"]:
            w(f"| {ARM_TITLES[r['arm']]} | {_fmt(r['supernet_fitness'])} | {_fmt(r['standalone_accuracy'])} |")
        w("")

    # ---- cost and plan
    w("## Wall time per stage\n")
    budgets = plan.stage_budgets()
    w("| stage | seconds | planned (idle 2-core machine) |")
    w("|---|---|---|")
    for name in STAGE_ORDER:
        if name in stages and name != "report":
            w(f"| {name} | {stages[name].get('seconds', 0.0):.0f} | {budgets.get(name, 0.0):.0f} |")
    w(f"| **total** (before this report) | {sum(r.get('seconds', 0.0) for k, r in stages.items() if k != 'report'):.0f} "
      f"| {sum(v for k, v in budgets.items() if k != 'report'):.0f} |")
    w("")
    w("## What was cut to fit the budget\n")
    w("| stage | this run | paper scale |")
    w("|---|---|---|")
    sn_rc = read_json(ctx.supernet_dir / "config.json")
    sn_t, sn_d = sn_rc["config"]["train"], sn_rc["dims"]
    sn_desc = (f"batch {sn_t['batch_size']} × seq {sn_t['seq_len']}, {sn_rc['space']['num_slots']} slots, "
               f"hidden {sn_d['hidden']}")
    rt_t = read_json(out / "retrain" / "bert" / "config.json")["config"]["train"]
    for stage, this, paper in plan.cuts(sn_desc, rt_t["batch_size"] * rt_t["seq_len"]):
        w(f"| {stage} | {this} | {paper} |")
    w("")
    w("Plan (recorded in `quickstart.json`): " + ", ".join(f"{k} {v}" for k, v in plan.to_dict().items()) + ".\n")
    lines.extend(fingerprint_section(out, names))

    path = out / "report.md"
    atomic_write_bytes(path, ("\n".join(lines) + "\n").encode("utf-8"))
    return path


def fingerprint_section(out: Path, names: dict[str, list[str]]) -> list[str]:
    """Markdown lines of the run's fingerprint: what its bit-reproducibility depends on
    (``environment.json``: versions, threads, device, native bf16) and hashes of its results
    (each arm's ``model.safetensors`` sha256, the EA and random-search top-k). A re-run of the
    same command in the same environment reproduces every line; with another thread count or
    precision the numbers agree only within tolerance (docs/results.md "Reliability")."""
    from lvsearch.io import sha256_file
    from lvsearch.modeldir import WEIGHTS
    from lvsearch.repro import BIT_RELEVANT, ENVIRONMENT

    lines = ["## Fingerprint (what reproduces this report bit for bit)\n"]
    env_path = out / ENVIRONMENT
    if env_path.is_file():
        rec = read_json(env_path, what="environment record")
        started = rec.get("started") or {}
        lines.append("Environment at the start: " + ", ".join(f"{k} {started.get(k)}" for k in BIT_RELEVANT) + ".")
        if rec.get("resumes"):
            from lvsearch.repro import bit_differences

            changed = sorted({d for r in rec["resumes"] for d in bit_differences(started, r)})
            lines.append(f"Resumed {len(rec['resumes'])} time(s)"
                         + (f"; in another environment: {'; '.join(changed)} — the numbers then agree with an "
                            "uninterrupted run only within tolerance." if changed else ", always in the same environment."))
        lines.append("")
    lines += ["| arm | model.safetensors sha256 |", "|---|---|"]
    for arm in names:
        for n in names[arm]:
            f = out / "retrain" / n / "model" / WEIGHTS
            lines.append(f"| {n} | `{sha256_file(f)[:16]}` |" if f.is_file() else f"| {n} | missing |")
    lines.append("")
    for label, folder in (("EA", out / "search"), ("random search", out / "search" / "random")):
        search = SearchFolder(folder, regenerate=QUICKSTART_AGAIN)
        if (folder / TOPK).is_file():
            rec = search.topk_record()
            keys = [f"`{r['key']}` {r['fitness']:.4f}" for r in (rec.get("topk") or [])[:5]]
            lines.append(f"{label} top-{len(keys)} (of {len(rec.get('topk') or [])}, iteration {rec.get('iteration')}): "
                         + ", ".join(keys) + ".")
    lines.append("")
    return lines


def _same_pick(archs: dict) -> bool:
    """Whether the EA and random-search arms have the same architecture."""
    return "ea" in archs and "random-search" in archs and archs["ea"].key == archs["random-search"].key


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


#: Fewer arms than this and the report's rank check states τ and ρ without p-values (scipy's
#: asymptotic p of a perfect 3-point order is 0, its exact p 1/3).
MIN_RANK_P_POINTS = 5


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
            cells.append(f"{rel} {titles[other]} ({_pm(losses[other], 3)}, {d:+.3f})")
    if not cells:
        return ""
    return (f"on dev MLM loss (nats, lower is better; −loss is the search's default fitness) the searched architecture "
            f"has {_pm(losses['ea'], 3)}, " + ", ".join(cells) + " — differences of per-arm means without an "
            "interval: the reports keep no per-target losses to pair")


def summary_sentences(comparisons: dict, ea_below_floor: bool, losses: dict[str, list[float]] | None = None) -> str:
    """The report's summary: the EA arm against `bert`, the random-search best and the random
    architecture, on every paired metric there is (MLM dev accuracy — the standalone counterpart
    of what the search optimised — and BLiMP), each with the verdict of its interval, so the
    summary agrees with the tables; and on dev MLM loss (``losses``: arm → its runs' losses,
    :func:`loss_sentence`), which has no interval."""
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
    if ea_below_floor:
        caveat = (f" The searched architecture {NOT_PAST_FLOOR} (below the neighbour-count floor), so none of "
                  "these differences is to be read as an architecture effect.")
    return (f"**Summary:** {'; '.join(parts)}. Differences inside their interval are not wins; MLM dev accuracy is "
            f"the standalone counterpart of what the search optimised (the supernet's MLM dev loss or accuracy).{caveat}")
