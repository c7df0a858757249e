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
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from lvsearch.eval.finetune import FAILED_TEXT
from lvsearch.eval.floors import FLOOR_RELATION, NOT_ARCH_EFFECT, NOT_PAST_FLOOR
from lvsearch.eval.report import read_report
from lvsearch.io import atomic_write_bytes, copy_file
from lvsearch.quickstart.figures import plot_arch_strips, plot_learning_curves
from lvsearch.quickstart.fingerprint import fingerprint_section
from lvsearch.quickstart.files import QUICKSTART_AGAIN, Rank, RetrainRunConfig, RetrainSummary, read_stage_file
from lvsearch.quickstart.speed import speed_sentence
from lvsearch.quickstart.outcomes import (blimp_outcomes, floor_comparison, floor_entry, learned, mlm_outcomes,
                                          task_scores, task_split)
from lvsearch.quickstart.plan import ARM_TITLES, OVERRUN_WARN, STAGE_ORDER, make_plan
from lvsearch.quickstart.sentences import (ARCH_LEGEND, fmt, interval_text, one_seed_sentence, pm,
                                           search_fitness_phrase, search_gap_sentence, search_noise_lines, signed,
                                           summary_sentences)
from lvsearch.search.folder import SearchFolder
from lvsearch.train.run import RunConfigFile, RunSummary, SupernetRunConfig
from lvsearch.stats import RESAMPLES, mean_difference_interval

if TYPE_CHECKING:  # pragma: no cover
    from lvsearch.arch import Arch
    from lvsearch.quickstart.context import Context
    from lvsearch.quickstart.plan import Plan


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


def floor_table_rows(arm_reports: dict[str, list[dict]], floor_cmp: dict[str, dict | None]) -> list[tuple[str, list[str]]]:
    """Arms-table rows of the reference floors: ``unigram floor (N tokens)``,
    ``neighbour-count floor (N tokens)`` (per arm, mean over its seeds' floors) and ``MLM dev
    accuracy − neighbour-count floor`` (paired bootstrap, with the :data:`NOT_PAST_FLOOR`
    wording when not ahead). One ``floors`` row with the reason when none could be computed."""
    arms = list(arm_reports)
    floors = {a: [floor_entry(r) for r in arm_reports[a]] for a in arms}
    if not any(f for a in arms for f in floors[a]):
        first = (arm_reports[arms[0]][0].get("mlm") or {}).get("floors") or {}
        reason = first.get("reason") or "the evaluation reports hold no floors (evaluated before floors existed)"
        return [("reference floors", [f"unavailable: {reason}"] * len(arms))]
    tokens = sorted({f["tokens_seen"] for a in arms for f in floors[a] if f})
    n = f"{tokens[0]:,}" if len(tokens) == 1 else "/".join(f"{t:,}" for t in tokens)
    rows = []
    for name in ("unigram", "neighbour-count"):
        rows.append((f"{name} floor ({n} training tokens)",
                     [pm([f[name]["accuracy"] for f in floors[a] if f]) if all(floors[a]) else "unavailable" for a in arms]))
    cells = []
    for a in arms:
        d = floor_cmp.get(a)
        if d is None:
            cells.append("—")
        else:
            cells.append(interval_text(d) + ("" if d["verdict"] == "ahead" else f": {NOT_PAST_FLOOR}"))
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
        lines.append(f"| `{name}` | {r['accuracy']:.4f} | {signed(r['accuracy'] - nc['accuracy'])} | {verdict} |")
    lines.append("")
    if not any(beats.get(name) for name in panel):
        lines.append("No panel architecture beats the neighbour-count floor: the supernet "
                     f"{NOT_PAST_FLOOR}, so fitness differences between architectures are not to be read as architecture "
                     "effects.\n")
    return lines


@dataclass
class ReportInputs:
    """What every report section reads: the run's context and each arm's files, read (and
    checked) once. ``names``: arm → its run names (one per pretraining seed); ``reports``,
    ``summaries``: run name → evaluation report / retrain ``summary.json``; ``archs``: arm →
    :class:`~lvsearch.arch.Arch`; ``tasks``: run name → :func:`~lvsearch.quickstart.outcomes.task_scores`;
    ``floor_cmp``: arm → its paired difference from the neighbour-count floor (or None)."""

    ctx: "Context"
    names: dict[str, list[str]]
    reports: dict[str, dict]
    archs: dict[str, "Arch"]
    summaries: dict[str, dict]
    tasks: dict[str, dict]
    floor_cmp: dict[str, dict | None]

    @property
    def out(self) -> Path:
        return self.ctx.out

    @property
    def plan(self) -> "Plan":
        return self.ctx.plan

    @property
    def arms(self) -> tuple[str, ...]:
        """The arms this run trained, in report order."""
        return self.ctx.plan.arms

    @property
    def stages(self) -> dict:
        return self.ctx.state.get("stages", {})

    def arm_reports(self, arm: str) -> list[dict]:
        return [self.reports[n] for n in self.names[arm]]

    def not_past_floor(self) -> list[str]:
        """Arms not ahead of their neighbour-count floor beyond noise (below it or within noise)."""
        return [a for a in self.arms if self.floor_cmp[a] is not None and self.floor_cmp[a]["verdict"] != "ahead"]


def read_inputs(ctx: "Context") -> ReportInputs:
    """Read every arm's evaluation reports, architecture and retrain summary.

    Raises:
        LvsearchError: a damaged or missing file (named, with its fix)."""
    from lvsearch.arch import Arch

    out, arms = ctx.out, ctx.plan.arms
    names = {arm: ctx.run_names(arm) for arm in arms}
    reports = {n: read_report(out / "eval" / f"{n}.json") for arm in arms for n in names[arm]}
    archs = {arm: Arch.from_dict(read_stage_file(out / "retrain" / arm / "config.json", RetrainRunConfig,
                                                 what="retrain run config")["arch"],
                                 source=out / "retrain" / arm / "config.json") for arm in arms}
    summaries = {n: read_stage_file(out / "retrain" / n / "summary.json", RetrainSummary, what="retrain summary")
                 for arm in arms for n in names[arm]}
    tasks = {n: task_scores(r) for n, r in reports.items()}
    floor_cmp = {a: floor_comparison([reports[n] for n in names[a]]) for a in arms}
    return ReportInputs(ctx, names, reports, archs, summaries, tasks, floor_cmp)


def write_quickstart_report(ctx: "Context") -> Path:
    """Write ``OUT/report.md`` and its PNGs, one section after the other; returns the report path.

    Raises:
        LvsearchError: a stage file the report reads is damaged or missing (named, with its fix)."""
    inp = read_inputs(ctx)
    lines = header_section(inp) + verdict_section(inp) + arms_section(inp) + differences_section(inp)
    lines += architectures_section(inp) + curves_section(inp) + search_section(inp)
    fin_path = inp.out / "finalists" / "finalists.json"
    if fin_path.exists():
        from lvsearch.scaling.finalists import FinalistState

        lines += finalists_section(read_stage_file(fin_path, FinalistState, what="finalist decision log"))
    sn_summary_path = ctx.supernet_dir / "summary.json"
    if sn_summary_path.exists():
        lines += supernet_floor_section(read_stage_file(sn_summary_path, RunSummary, what="supernet summary"))
    lines += rank_section(inp) + wall_time_section(inp) + cuts_section(inp) + fingerprint_section(inp.out, inp.names)
    path = inp.out / "report.md"
    atomic_write_bytes(path, ("\n".join(lines) + "\n").encode("utf-8"))
    return path


def _minutes(plan: "Plan") -> str:
    """The plan's total minutes (:meth:`~lvsearch.quickstart.plan.Plan.total_minutes`) as the
    report prints them: ``--minutes`` as given when the plan adds nothing to it (one seed, no
    finalists), else to 0.1 min."""
    if plan.seeds == 1 and not plan.finalists:
        return f"{plan.minutes:g}"
    return f"{round(plan.total_minutes(), 1):g}"


def header_section(inp: ReportInputs) -> list[str]:
    """The title, the run's settings, how the arms were trained, and the wall time (with a
    warning when the run took more than :data:`~lvsearch.quickstart.plan.OVERRUN_WARN` × the
    plan's :meth:`~lvsearch.quickstart.plan.Plan.total_minutes`)."""
    plan, settings, names, stages = inp.plan, inp.ctx.settings, inp.names, inp.stages
    lines: list[str] = []
    w = lines.append
    total_s = sum(s.get("seconds", 0.0) for s in stages.values())
    planned = plan.total_minutes()
    more = [f"{plan.seeds} pretraining seeds"] if plan.seeds > 1 else []
    more += [f"{plan.finalists} finalists"] if plan.finalists else []
    w("# lvsearch quickstart report\n")
    w(f"Data: `{settings.data}` · search space `{settings.space}` · retrain objective **{settings.objective}** · "
      f"budget {plan.minutes:g} min" + (f", ~{_minutes(plan)} min planned with {' and '.join(more)}" if more else "")
      + f" (plan below) · wall time so far {total_s / 60:.1f} min · "
      f"pretraining seeds per arm: {plan.seeds}.\n")
    w(f"Every arm was retrained from scratch with the same recipe (`{settings.retrain_recipe}`), objective, "
      f"{plan.retrain_steps} steps × {inp.summaries[names['bert'][0]].get('tokens', 0) // max(1, plan.retrain_steps):,} "
      f"tokens, data and seeds; only the architecture differs." + (
          " The EA arm is the pick of successive halving over the EA's top finalists: its rungs are exact prefixes "
          "of a full run and its resumes are exact, so its weights equal a fresh retrain's (verified byte for byte, "
          "docs/results.md), but it was selected among the finalists by dev loss while the random-search arm is a "
          "single pick — a selection advantage the comparisons below do not remove." if plan.finalists else
          " The EA arm is the evolutionary search's pick and the random-search arm random search's, each chosen by "
          "the same supernet fitness after the same compute (dev-sequence passes) from the same first population.")
      + (" Both searches picked the same architecture, so it was trained and evaluated once and the two arms "
         "share one run." if _same_pick(inp.archs) else "") + "\n")
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
    w(speed_sentence(inp.ctx.state.get("speed"), plan.minutes, plan.sized_minutes) + "\n")
    if total_s > OVERRUN_WARN * planned * 60:
        w(f"**This run took {total_s / 60:.1f} min, {total_s / 60 / planned:.1f}× its ~{_minutes(plan)}-minute "
          "budget**: the plan is calibrated on an otherwise idle 2-core machine, and other jobs on the same cores "
          "(or fewer or slower cores) stretch every stage. The numbers below do not depend on the speed (same "
          "command, same thread count → same results; see docs/results.md \"Reliability\").\n")
    return lines


def verdict_section(inp: ReportInputs) -> list[str]:
    """The verdicts first: each arm (and seed) against its MLM, BLiMP and fine-tuning floors, then
    what the run's seeds can and cannot show."""
    from lvsearch.eval.report import verdict_lines

    lines: list[str] = []
    run_names = [n for a in inp.arms for n in inp.names[a]]
    verdict = verdict_lines([inp.reports[n] for n in run_names], run_names)
    if verdict:
        lines.extend(verdict[:2])
        lines.append("Each floor is a count model of the same training text or examples (MLM: neighbour-count; BLiMP: "
                     "a Kneser-Ney n-gram LM of the sequences the arm saw; fine-tuning: TF-IDF + logistic regression "
                     "on the same training examples). \"Beats\" = the paired-bootstrap 95% interval of arm − floor "
                     "lies above 0.\n")
        lines.extend(verdict[2:])
    lines.append(one_seed_sentence(inp.plan.seeds) + "\n")
    return lines


def arms_table_rows(inp: ReportInputs) -> list[tuple[str, list[str]]]:
    """``(label, one cell per arm)`` rows of the arms table: architecture, parameters, MLM, the
    floors, BLiMP (with its floor and phenomena) and every fine-tuning task."""
    arms, names, reports, tasks = inp.arms, inp.names, inp.reports, inp.tasks
    bert = names["bert"][0]
    rows = [
        ("architecture", [f"`{inp.archs[a].compact}`" for a in arms]),
        ("parameters", [f"{inp.summaries[names[a][0]].get('params', 0):,}" for a in arms]),
        ("MLM dev accuracy", [pm([reports[n]["mlm"]["accuracy"] for n in names[a]]) for a in arms]),
        ("MLM dev loss (nats)", [pm([reports[n]["mlm"]["loss"] for n in names[a]], 3) for a in arms]),
    ]
    rows += floor_table_rows({a: inp.arm_reports(a) for a in arms}, inp.floor_cmp)
    if all((reports[n].get("blimp") or {}).get("status") == "done" for n in reports):
        rows.append(("BLiMP mean over paradigms", [pm([reports[n]["blimp"]["mean_over_paradigms"] for n in names[a]]) for a in arms]))
        bfl = {a: [(reports[n]["blimp"].get("floor") or {}) for n in names[a]] for a in arms}
        if all(f.get("status") == "done" for a in arms for f in bfl[a]):
            order = bfl["bert"][0]["order"]
            rows.append((f"BLiMP floor ({order}-gram Kneser-Ney)", [pm([f["mean_over_paradigms"] for f in bfl[a]]) for a in arms]))
            rows.append(("BLiMP − floor", [pm([f["vs_floor"]["difference"] for f in bfl[a]]) for a in arms]))
        terms = sorted(reports[bert]["blimp"]["phenomena"])
        for t in terms:
            rows.append((f"  BLiMP {t}", [pm([reports[n]["blimp"]["phenomena"][t]["accuracy"] for n in names[a]]) for a in arms]))
    else:
        b = reports[bert].get("blimp") or {}
        rows.append(("BLiMP", [f"{b.get('status', 'skipped')}: {b.get('reason', '')}"] * len(arms)))
    for task in sorted(tasks[bert]):
        metric = tasks[bert][task][0]
        pooled = {a: [v for n in names[a] for v in tasks[n][task][1]] for a in arms}
        rows.append((f"{task} {metric}", [pm(pooled[a]) if pooled[a] else FAILED_TEXT for a in arms]))
        mcc = {a: [r[task_split(reports[n], task)]["mcc"] for n in names[a] for r in reports[n]["finetune"][task]["per_seed"]
                   if learned(r) and (r.get(task_split(reports[n], task)) or {}).get("mcc") is not None] for a in arms}
        if all(mcc.values()):
            rows.append((f"{task} MCC (0 = one class / chance)", [pm(mcc[a]) for a in arms]))
        tfl = {a: [(reports[n]["finetune"][task].get("floor") or {}) for n in names[a]] for a in arms}
        if all(f.get("status") == "done" and f.get("test") for a in arms for f in tfl[a]):
            m = reports[bert]["finetune"][task]["select_metric"]
            rows.append((f"{task} test {m} floor (bag of words)", [pm([f["test"][m] for f in tfl[a]]) for a in arms]))
    return rows


def arms_section(inp: ReportInputs) -> list[str]:
    """The arms table (:func:`arms_table_rows`) and how to read it."""
    head = ["", *[ARM_TITLES[a] for a in inp.arms]]
    lines = ["## The arms\n", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, vals in arms_table_rows(inp):
        lines.append(f"| {label} | " + " | ".join(vals) + " |")
    lines.append("")
    lines.append("Values are the mean over pretraining seeds (± sample std when there are several); task scores "
                 "pool every (pretraining seed, fine-tuning seed) run whose training loss fell; a run whose last-epoch "
                 "train loss stayed at ≥ 0.98 × the constant-prediction loss is left out, and an arm with no other run "
                 f"shows \"{FAILED_TEXT}\". The floor rows are reference predictors, not "
                 "models: unigram (always the most frequent training token) and neighbour-count (the most frequent "
                 "token between the same left/right neighbours, backing off to one neighbour, then unigram), counted "
                 "on exactly the training sequences each arm saw and scored on the same masked dev targets; the last "
                 "row is the paired bootstrap of the arm against its floor.\n")
    if inp.ctx.settings.objective == "electra":
        lines.append("Objective **ELECTRA** (replaced-token detection): the discriminator has no MLM head, so MLM dev "
                     "accuracy/loss and BLiMP pseudo-log-likelihoods are those of each arm's ELECTRA *generator* "
                     "(same slot sequence at generator width), and fine-tuning uses the discriminator. "
                     "`--objective mlm` (the default) measures the retrained model itself.\n")
    return lines


def _paired_cells(inp: ReportInputs, arm: str, other: str, key, comparisons: dict) -> list[str]:
    """MLM and BLiMP cells of ``arm`` − ``other``: the paired bootstrap over the same items (seed
    by seed), recorded in ``comparisons`` under ``key(kind)``; "—" without per-item outcomes."""
    cells = []
    for kind, get in (("mlm", mlm_outcomes), ("blimp", blimp_outcomes)):
        a = [get(inp.reports[n]) for n in inp.names[arm]]
        b = [get(inp.reports[n]) for n in inp.names[other]]
        if any(x is None for x in a + b) or any(x.shape != y.shape for x, y in zip(a, b)):
            cells.append("—")
            continue
        d = mean_difference_interval(np.concatenate(a), np.concatenate(b))
        comparisons[key(kind)] = d
        cells.append(interval_text(d))
    return cells


def _task_cells(inp: ReportInputs, arm: str) -> list[str]:
    """Fine-tuning cells of ``arm`` − ``bert``: mean difference, with a Welch t-test verdict when
    both have at least two scores."""
    tcell = []
    for task in sorted(inp.tasks[inp.names["bert"][0]]):
        va = [v for n in inp.names[arm] for v in inp.tasks[n][task][1]]
        vb = [v for n in inp.names["bert"] for v in inp.tasks[n][task][1]]
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
    return tcell


def differences_section(inp: ReportInputs) -> list[str]:
    """Every arm against ``bert``, then the searched architecture against the other non-baseline
    arms (paired intervals, and dev MLM loss without one), and the summary that follows them."""
    plan, arms = inp.plan, inp.arms
    lines = ["## Differences against `bert`, with their spread\n",
             "Paired bootstrap over the same evaluation items (95% percentile interval, "
             f"{RESAMPLES:,} resamples). A difference is a win only when its interval excludes 0.\n",
             "| arm | MLM dev accuracy − bert | BLiMP accuracy − bert | tasks |", "|---|---|---|---|"]
    w = lines.append
    comparisons: dict = {}
    for arm in arms:
        if arm == "bert":
            continue
        cells = _paired_cells(inp, arm, "bert", lambda kind, arm=arm: (arm, kind), comparisons)
        w(f"| {ARM_TITLES[arm]} | {' | '.join(cells)} | {'; '.join(_task_cells(inp, arm)) or '—'} |")
    w("")
    below = inp.not_past_floor()
    if below:
        who = "; ".join(f"{ARM_TITLES[a]}: {FLOOR_RELATION[inp.floor_cmp[a]['verdict']]} it "
                        f"({interval_text(inp.floor_cmp[a])})" for a in below)
        w(f"**Not past the neighbour-count floor:** {who}. Each of these arms {NOT_PAST_FLOOR} (its MLM dev accuracy "
          f"is not above the floor beyond evaluation noise), so {NOT_ARCH_EFFECT}.\n")
    w("The searched architecture against the other two non-baseline arms (is the search better than "
      "picking at random?):\n")
    w("| comparison | MLM dev accuracy | BLiMP accuracy | dev MLM loss (nats; no interval) |")
    w("|---|---|---|---|")
    mean_loss = {a: [inp.reports[n]["mlm"]["loss"] for n in inp.names[a] if inp.reports[n]["mlm"].get("loss") is not None]
                 for a in arms}
    for other in [a for a in ("random-search", "random-arch") if a in arms]:
        cells = _paired_cells(inp, "ea", other, lambda kind, other=other: ("ea-vs", other, kind), comparisons)
        ea_l, other_l = mean_loss["ea"], mean_loss[other]
        cells.append(f"{pm(ea_l, 3)} vs {pm(other_l, 3)}: {float(np.mean(ea_l)) - float(np.mean(other_l)):+.3f}"
                     if ea_l and other_l else "—")
        w(f"| EA − {ARM_TITLES[other]} | {' | '.join(cells)} |")
    w("")
    w("Dev MLM loss is what the search optimised by default (fitness −loss on the supernet). The loss column is "
      "the plain difference of the arms' mean losses (lower is better): the evaluation reports keep no "
      "per-target losses, so it has no paired interval and no verdict; with several pretraining seeds each mean "
      "is given ± its sample std.\n")
    if plan.seeds == 1:
        three = make_plan(plan.minutes, 3, plan.finalists, plan.slowdown).total_minutes()
        w("With one pretraining seed per arm these intervals cover evaluation-sample noise only; "
          "the spread between pretraining seeds is **unmeasured** at this budget "
          f"(`--seeds 3` measures it, in about {three:.0f} min).\n")
    ea_floor = inp.floor_cmp.get("ea")
    summary = summary_sentences(comparisons, None if ea_floor is None else ea_floor["verdict"], mean_loss)
    if summary:
        w(summary + "\n")
    return lines


def architectures_section(inp: ReportInputs) -> list[str]:
    """The arms' architectures (``architectures.png``) and the searched model's learned α
    (``alpha_ea.png``)."""
    from lvsearch.eval.report import plot_alpha
    from lvsearch.modeldir import load_model

    out, arms, archs = inp.out, inp.arms, inp.archs
    strip = out / "architectures.png"
    plot_arch_strips({ARM_TITLES[a]: archs[a] for a in arms}, strip)
    lines = ["## Architectures\n", f"![architectures]({strip.name})\n", ARCH_LEGEND + "\n"]
    lines += [f"- {ARM_TITLES[a]}: `{archs[a].key}`" for a in arms]
    lines.append("")
    ea_model = load_model(out / "retrain" / "ea" / "model")
    alpha = ea_model.encoder.alpha_matrix().numpy()
    alpha_png = out / "alpha_ea.png"
    plot_alpha(alpha, [archs["ea"].slot_code(n) for n in range(1, archs["ea"].num_slots + 1)], f"α of the searched model ({archs['ea'].compact})", alpha_png)
    lines += ["### α of the searched model (ELC-BERT Figure 1 style)\n", f"![alpha]({alpha_png.name})\n"]
    multi = [(n, inp_) for n, inp_ in enumerate(archs["ea"].inputs, start=1) if len(inp_) > 1]
    if multi:
        lines.append("Learned α of the slots that read several earlier outputs (h0 = embeddings):\n")
        for n, inp_ in multi:
            lines.append(f"- slot {n} ({archs['ea'].label(n)}): " + ", ".join(f"h{i} {alpha[n - 1, i]:.3f}" for i in inp_))
        lines.append("")
    else:
        lines.append("The searched model reads only the previous slot everywhere (α is one-hot).\n")
    return lines


def curves_section(inp: ReportInputs) -> list[str]:
    """The retraining curves (``learning_curves.png``) and how their dev set differs from the table's."""
    from lvsearch.io import iter_jsonl

    out, plan = inp.out, inp.plan
    curves = {}
    for arm in inp.arms:
        path = out / "retrain" / arm / "curve.jsonl"
        if path.exists():
            curves[ARM_TITLES[arm]] = [o for _, o in iter_jsonl(path, path.read_text(encoding="utf-8"),
                                                                 fix="re-run the retrain stage")]
    curve_png = out / "learning_curves.png"
    electra = inp.ctx.settings.objective == "electra"
    plot_learning_curves(curves, curve_png,
                         "dev MLM loss of the ELECTRA generator (nats)" if electra else "dev MLM loss (nats)")
    bert_mlm = inp.reports[inp.names["bert"][0]].get("mlm") or {}
    return ["## Retraining curves\n", f"![learning curves]({curve_png.name})\n",
            f"Curve points are evaluated every {plan.curve_every} steps on a small dev subset ({plan.curve_sequences} "
            f"sequences, to keep them cheap); the table's MLM numbers use {bert_mlm.get('sequences', plan.mlm_dev_sequences)} "
            f"dev sequences ({bert_mlm.get('predicted_tokens', '?')} masked targets, one target = "
            f"{1 / max(1, bert_mlm.get('predicted_tokens') or 1):.4f} accuracy), so the two differ in level and "
            "may differ in order.\n"]


def search_section(inp: ReportInputs) -> list[str]:
    """Evolution against random search: the search curve, both searches' best and top-k fitness,
    their picks compared and the fitness noise."""
    from lvsearch.arch import Arch
    from lvsearch.search.job import RANDOM_DIR

    plan, search_dir = inp.plan, inp.ctx.search_dir
    lines = ["## Search: evolution vs random search\n"]
    w = lines.append
    src = search_dir / "search_curve.png"
    if src.exists():
        copy_file(src, inp.out / "search_curve.png")
        w("![search curve](search_curve.png)\n")
    ea_search = SearchFolder(search_dir, regenerate=QUICKSTART_AGAIN)
    rs_search = ea_search.control()
    ea_best, rs_best = ea_search.best(), rs_search.best()
    curve_ea, curve_rs = (ea_search.curve()[-1:] or [{}])[0], (rs_search.curve()[-1:] or [{}])[0]
    w(f"Both searches made {plan.population} × {plan.iterations} = {plan.population * plan.iterations} evaluations "
      f"(supernet weights; {search_fitness_phrase(search_dir)}). Best supernet fitness: "
      f"EA {fmt(ea_best['meta']['fitness'])} (`{Arch.from_dict(ea_best).compact}`), random search "
      f"{fmt(rs_best['meta']['fitness'])} (`{Arch.from_dict(rs_best).compact}`); top-{min(plan.topk, plan.population)} "
      f"mean EA {fmt(curve_ea.get('topk_mean'))}, random {fmt(curve_rs.get('topk_mean'))}. "
      + search_gap_sentence(ea_best["meta"]["fitness"], rs_best["meta"]["fitness"], curve_ea.get("topk_mean"),
                            curve_rs.get("topk_mean")) + "\n")
    if (search_dir / "compare_random.json").exists():
        from lvsearch.search.noise import pick_comparison_lines, read_pick_comparison

        w(pick_comparison_lines(read_pick_comparison(search_dir / "compare_random.json"))[0] + ".\n")
    lines.extend(search_noise_lines(search_dir, search_dir / RANDOM_DIR))
    return lines


def rank_section(inp: ReportInputs) -> list[str]:
    """The supernet rank check (``rank.json``): τ and ρ of supernet fitness against standalone
    MLM accuracy over the arms; empty before the rank stage ran."""
    rank_path = inp.out / "rank.json"
    if not rank_path.exists():
        return []
    rk = read_stage_file(rank_path, Rank, what="rank check")
    lines = ["## Supernet rank check\n"]
    lines.append(
        f"Supernet fitness (inherited weights, step {rk['supernet_step']}, {rk['dev_sequences']} dev sequences) "
        f"against the MLM dev accuracy of the same architectures trained from scratch, over the {rk['n']} arms: "
        + (f"Kendall τ = {fmt(rk['kendall_tau'], 2)} (p = {fmt(rk['kendall_p'], 2)}"
           + (f"; 95% bootstrap interval [{fmt(rk['kendall_tau_ci95'][0], 2)}, {fmt(rk['kendall_tau_ci95'][1], 2)}]"
              if (rk.get("kendall_tau_ci95") or [None])[0] is not None
              else f"; no bootstrap interval from {rk['n']} points") + "), "
           f"Spearman ρ = {fmt(rk['spearman_rho'], 2)} (p = {fmt(rk['spearman_p'], 2)}). "
           if rk["n"] >= MIN_RANK_P_POINTS else
           f"Kendall τ = {fmt(rk['kendall_tau'], 2)}, Spearman ρ = {fmt(rk['spearman_rho'], 2)}; no p-value or "
           f"interval from {rk['n']} points (with 3, even a perfect order has an exact p of 1/3). ")
        + f"With {rk['n']} points this is indicative only (`lvsearch rank-check` samples more).\n")
    lines += ["| arm | supernet fitness | standalone MLM accuracy |", "|---|---|---|"]
    for r in rk["rows"]:
        lines.append(f"| {ARM_TITLES[r['arm']]} | {fmt(r['supernet_fitness'])} | {fmt(r['standalone_accuracy'])} |")
    lines.append("")
    return lines


def wall_time_section(inp: ReportInputs) -> list[str]:
    """Seconds per stage against the plan's budget for it (:meth:`~lvsearch.quickstart.plan.Plan.stage_budgets`)."""
    stages, budgets = inp.stages, inp.plan.stage_budgets()
    lines = ["## Wall time per stage\n", "| stage | seconds | planned (idle 2-core machine) |", "|---|---|---|"]
    for name in STAGE_ORDER:
        if name in stages and name != "report":
            lines.append(f"| {name} | {stages[name].get('seconds', 0.0):.0f} | {budgets.get(name, 0.0):.0f} |")
    lines.append(f"| **total** (before this report) | "
                 f"{sum(r.get('seconds', 0.0) for k, r in stages.items() if k != 'report'):.0f} "
                 f"| {sum(v for k, v in budgets.items() if k != 'report'):.0f} |")
    lines.append("")
    return lines


def cuts_section(inp: ReportInputs) -> list[str]:
    """What was cut to fit the budget (:meth:`~lvsearch.quickstart.plan.Plan.cuts`, described with
    the recipes actually used) and the whole plan."""
    plan = inp.plan
    lines = ["## What was cut to fit the budget\n", "| stage | this run | paper scale |", "|---|---|---|"]
    sn_rc = read_stage_file(inp.ctx.supernet_dir / "config.json", SupernetRunConfig, what="supernet run config")
    sn_t, sn_d = sn_rc["config"]["train"], sn_rc["dims"]
    sn_desc = (f"batch {sn_t['batch_size']} × seq {sn_t['seq_len']}, {sn_rc['space']['num_slots']} slots, "
               f"hidden {sn_d['hidden']}")
    rt_t = read_stage_file(inp.out / "retrain" / "bert" / "config.json", RunConfigFile,
                           what="retrain run config")["config"]["train"]
    for stage, this, paper in plan.cuts(sn_desc, rt_t["batch_size"] * rt_t["seq_len"]):
        lines.append(f"| {stage} | {this} | {paper} |")
    lines.append("")
    lines.append("Plan (recorded in `quickstart.json`): " + ", ".join(f"{k} {v}" for k, v in plan.to_dict().items()) + ".\n")
    return lines


def _same_pick(archs: dict) -> bool:
    """Whether the EA and random-search arms have the same architecture."""
    return "ea" in archs and "random-search" in archs and archs["ea"].key == archs["random-search"].key


#: Fewer arms than this and the report's rank check states τ and ρ without p-values (scipy's
#: asymptotic p of a perfect 3-point order is 0, its exact p 1/3).
MIN_RANK_P_POINTS = 5
