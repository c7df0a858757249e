"""``lvsearch retrain --finalists K --compare-full``: both pruning rules replayed on the
complete curves of every finalist against training them all to the full budget
(:func:`compare`), and how well the live rounds' predictions matched the losses reached
(:func:`prediction_errors`). Recorded as ``finalists.json``'s ``comparison`` by the job,
:mod:`lvsearch.scaling.finalists`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lvsearch.scaling.halving import PRUNING

if TYPE_CHECKING:
    from lvsearch.scaling.finalists import FinalistJob


def compare(job: FinalistJob, state: dict) -> dict:
    """Both pruning rules replayed on the complete curves against training all finalists.

    Because every run is a prefix of its full run, replaying a rule with
    :func:`lvsearch.scaling.successive_halving` on the full curves gives the decisions the
    live job would make (``replay_matches_live`` checks it for the rule the job used).
    Returns ``{"train_all": {pick, final_loss}, "rules": {pruning: {pick, final_loss, agrees,
    regret, compute_fraction, survivors, cut_at}}, "replay_matches_live"}``.
    """
    from lvsearch.scaling import successive_halving

    names = [f.name for f in job.finalists]
    losses = {n: job.final_loss(n) for n in names}
    full_pick = min(names, key=lambda n: (losses[n], n))
    curves = {n: job.curve(n, job.budget) for n in names}
    tps = job.tokens_per_step
    offsets = None
    if job.wsd and any(r.get("probes") for r in state["rounds"]):
        # the live probes; a finalist the live rule had cut gets its rung's mean drop
        offsets = []
        for r in state["rounds"]:
            drops = {n: p["drop"] for n, p in (r.get("probes") or {}).items()}
            mean = sum(drops.values()) / len(drops) if drops else 0.0
            offsets.append({n: -drops.get(n, mean) for n in names})
    rules = {}
    for pruning, rule in PRUNING.items():
        sim = successive_halving(curves, rungs=[r * tps for r in job.rungs], full_budget=job.budget * tps,
                                 eta=job.opts.eta, rule=rule, predict_at=job.predict_steps * tps, offsets=offsets,
                                 **job.step_kwargs())
        pick = min(sim["survivors"], key=lambda n: (losses[n], n))
        rules[pruning] = {
            "pick": pick, "final_loss": losses[pick], "agrees": pick == full_pick,
            "regret": losses[pick] - losses[full_pick], "survivors": sim["survivors"],
            "compute_fraction": sim["compute"] / sim["compute_all"],
            "cut_at_steps": {n: int(round(v / tps)) for n, v in sim["trained"].items() if n not in sim["survivors"]},
            "rounds": [{"budget_steps": int(round(s["budget"] / tps)), "kept": s["kept"], "cut": s["cut"],
                        "fallback": s["fallback"], "ranking": s["ranking"]} for s in sim["rungs"]],
        }
    live = [r["decision"]["kept"] for r in state["rounds"]]
    used = rules[job.opts.pruning]
    probe_steps = sum(r.get("probe_steps", 0) for r in state["rounds"])
    if probe_steps:  # the live rule also paid for its cool-down probes (counted as in state["final"])
        used["probe_steps"] = probe_steps
        used["compute_fraction"] += probe_steps / (len(names) * job.budget)
    return {
        "train_all": {"pick": full_pick, "final_loss": losses[full_pick], "final_losses": losses},
        "rules": rules,
        "replay_matches_live": [r["kept"] for r in used["rounds"]] == live and used["pick"] == state["final"]["pick"],
        "predictions": prediction_errors(state["rounds"], losses),
    }


def prediction_errors(rounds: list[dict], final_losses: dict[str, float]) -> dict:
    """How well the live rounds' predicted final losses matched the losses reached.

    Args:
        rounds: ``finalists.json``'s rounds (each with its ``decision``).
        final_losses: name -> dev loss at the full budget (nats), for every finalist.

    Returns:
        ``{"cases": [{round, name, predicted, lo, hi, final, error (predicted − final, nats),
        covered (lo ≤ final ≤ hi)}], "n", "median_error", "mean_abs_error", "coverage"}``
        (the interval's nominal level is the job's ``level``) over the rounds scored by the estimator (fallback rounds have no
        prediction); ``n = 0`` and None statistics when there is none.
    """
    import statistics

    cases = []
    for r in rounds:
        d = r["decision"]
        if d.get("fallback") or d.get("rule") != "m4":
            continue
        for name, e in d["candidates"].items():
            if name in final_losses and "score" in e:
                true = final_losses[name]
                cases.append({"round": r["round"], "name": name, "predicted": e["score"], "lo": e["lo"], "hi": e["hi"],
                              "final": true, "error": e["score"] - true, "covered": e["lo"] <= true <= e["hi"]})
    errs = [c["error"] for c in cases]
    return {"cases": cases, "n": len(cases),
            "median_error": statistics.median(errs) if errs else None,
            "mean_abs_error": sum(map(abs, errs)) / len(errs) if errs else None,
            "coverage": sum(c["covered"] for c in cases) / len(cases) if cases else None}
