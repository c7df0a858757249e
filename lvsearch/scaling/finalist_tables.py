"""The terminal tables of a ``lvsearch retrain --finalists K`` job (rich): one round's
decision (:func:`round_table`), every finalist's outcome (:func:`summary_table`) and the
``--compare-full`` comparison (:func:`comparison_table`). They only format the job's state,
``finalists.json`` (:mod:`lvsearch.scaling.finalists`), which holds the full reasons.
"""

from __future__ import annotations


def round_table(rec: dict, budget: int):
    """A rich table of one round's decision (the full reasons are in ``finalists.json``)."""
    from rich.table import Table

    d = rec["decision"]
    predicted = d["rule"] == "m4" and not d.get("fallback")
    how = "M4 prediction at the full budget" if predicted else "current dev loss"
    if d.get("fallback"):
        how += f" (fallback: {d['fallback']})"
    tab = Table(title=f"round {rec['round']}: step {rec['budget_steps']} of {budget}; ranked by {how}",
                title_justify="left")
    tab.add_column("finalist", no_wrap=True)
    for col in ("pts", "loss now", f"pred. @{budget}", "interval"):
        tab.add_column(col, justify="right", no_wrap=True)
    tab.add_column("decision", no_wrap=True)
    k = d["n_keep_by_rank"]
    for pos, name in enumerate(d["ranking"]):
        e = d["candidates"][name]
        if e["decision"] == "cut":
            verdict = "[red]cut[/red]"
        elif pos < k:
            verdict = f"[green]kept[/green]: top {k}"
        else:
            verdict = "[green]kept[/green]: interval"
        tab.add_row(
            name, str(e.get("n_points", "")), f"{e['last_loss']:.4f}",
            f"{e['score']:.4f}" if predicted else "—",
            f"{e['lo']:.4f}–{e['hi']:.4f}" if predicted else "—", verdict,
        )
    what = "predicted loss" if predicted else "dev loss"
    probes = rec.get("probes") or {}
    wsd = ""
    if probes and predicted:
        drops = [p["drop"] for p in probes.values()]
        wsd = (f"; wsd: M4 extrapolates the stable phase to step {rec['predicted_at_steps']} (the cool-down's start), "
               f"minus each finalist's measured cool-down drop ({min(drops):.4f}–{max(drops):.4f} nats, "
               f"{rec['probe_steps']} probe steps)")
    tab.caption = (f"cut-off {d['cutoff']:.4f} ({what} of rank {k})"
                   + ("; 'interval': its 90% interval reaches the cut-off" if predicted else "") + wsd
                   + f"; compute so far {rec['compute_steps']:,} steps ({rec['seconds']:.0f} s this round)")
    return tab


def summary_table(state: dict):
    """A rich table: every finalist, how far it was trained, its dev loss there, its fate (and
    with ``--compare-full`` its dev loss at the full budget)."""
    from rich.table import Table

    final = state["final"]
    budget = state["settings"]["budget_steps"]
    fate, last = {}, dict(final["final_loss"])
    for r in state["rounds"]:
        for n in r["decision"]["cut"]:
            fate[n] = f"cut in round {r['round']}"
            last[n] = r["decision"]["candidates"][n]["last_loss"]
    for n in final["survivors"]:
        fate[n] = "pick" if n == final["pick"] else "survived, not picked"
    full = (state.get("comparison") or {}).get("train_all", {}).get("final_losses")
    tab = Table(title=f"finalist pruning ({state['settings']['pruning']}): compute "
                      f"{final['compute_steps']:,}"
                      + (f" + {final['probe_steps']:,} cool-down probe" if final.get("probe_steps") else "")
                      + f" of {final['compute_all_steps']:,} steps "
                      f"({100 * final['compute_fraction']:.1f}% of training all to {budget})", title_justify="left")
    cols = ["finalist", "steps", "loss there"] + ([f"loss @{budget}"] if full else []) + ["outcome"]
    for col in cols:
        tab.add_column(col, justify="left" if col in ("finalist", "outcome") else "right", no_wrap=col != "outcome")
    for f in state["settings"]["finalists"]:
        n = f["name"]
        row = [n, f"{final['steps_trained'][n]:,}", "—" if n not in last else f"{last[n]:.4f}"]
        if full:
            row.append(f"{full[n]:.4f}")
        tab.add_row(*row, fate.get(n, ""))
    return tab


def comparison_table(state: dict):
    """A rich table of ``--compare-full``: each rule's pick against training all finalists."""
    from rich.table import Table

    c = state["comparison"]
    tab = Table(title="pick vs training every finalist to the full budget", title_justify="left")
    budget = state["settings"]["budget_steps"]
    for col in ("method", "pick", f"loss @{budget}", "agrees", "regret", "compute"):
        tab.add_column(col, justify="left" if col in ("method", "pick") else "right", no_wrap=True)
    for pruning, r in c["rules"].items():
        tab.add_row(pruning, r["pick"], f"{r['final_loss']:.4f}", "yes" if r["agrees"] else "no",
                    f"{r['regret']:+.4f}", f"{100 * r['compute_fraction']:.1f}%")
    tab.add_row("train all", c["train_all"]["pick"], f"{c['train_all']['final_loss']:.4f}", "—", "—", "100.0%")
    pred = c.get("predictions") or {}
    scored = ""
    if pred.get("n"):
        scored = (f"; the live predictions of the loss at {budget}: median error {pred['median_error']:+.4f} nats, "
                  f"{100 * pred['coverage']:.0f}% of {pred['n']} intervals cover the loss reached")
    tab.caption = ("replayed on the full curves; " + ("matches" if c["replay_matches_live"] else "DOES NOT match")
                   + " the live decisions of this job" + scored)
    return tab
