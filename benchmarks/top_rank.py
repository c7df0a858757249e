"""Rank fidelity at the top: which ranker orders the architectures a search picks?

A search's picks sit in the top region of a space, so a fitness must rank there, not only
across the band. This benchmark scores every ranker the committed results hold on two sets of
the quickstart space (``lvbert-elc@12``, the landscape's supernet), against standalone MLM
accuracy after 2000 retrain steps:

* **landscape** (``landscape.json``): 27 band architectures (19 random draws, ``bert``,
  ``sandwich``, 6 searched picks), truth = mean over seeds;
* **held-out picks** (``fitness_holdout.json``): the 12 distinct picks of the 6-seed EA and
  random-search run, none of them in the landscape, truth = their standalone accuracy.

Rankers: the search's default fitness (−loss on 1024 dev sequences), MLM accuracy on all dev
sequences, few-shot sub-supernets (``few_shot.json``; landscape only: its supernets were not
kept), the position of the first DC slot (a free structural prior, earlier is better), and the
surrogate (:class:`lvsearch.search.surrogate.Surrogate`: ridge on the fitness and structural
features), fitted on the landscape and applied to the held-out picks; on the landscape itself
its predictions are leave-one-out. Per ranker and set: Kendall τ with its interval, the
top-region τ (the best 20 by truth; all 12 on the held-out set) and the tie-averaged top-5
precision (:func:`lvsearch.search.rank_stats.rank_quality`), and τ − τ(default) paired over the
same architectures (:func:`lvsearch.search.rank_stats.paired_tau_difference`).

It needs no supernet and no training: every input is a committed JSON. The lever that wins is
the one whose held-out τ difference against the default is above 0 beyond noise.

Usage::

    python benchmarks/top_rank.py        # → benchmarks/results/top_rank.json
"""

from __future__ import annotations

import argparse
import json

from _common import RESULTS, machine, write_result


def load_sets() -> dict:
    """``{"landscape": rows, "held_out": rows}``; each row: key, truth, and the scores it has."""
    land = json.loads((RESULTS / "landscape.json").read_text())
    fv = land["fitness_variants"]
    loss1024 = {a["key"]: -a["supernet_loss"] for a in fv["1024"]["archs"]}
    acc_all = {a["key"]: a["supernet_accuracy"] for a in fv["all"]["archs"]}
    few = json.loads((RESULTS / "few_shot.json").read_text())["variants"]["few-shot"]["rows"]
    landscape = [{"key": r["key"], "truth": r["accuracy_mean"], "default": loss1024[r["key"]],
                  "accuracy_all": acc_all[r["key"]], "few_shot": -few[r["key"]]["loss"]}
                 for r in land["archs"] if r["key"] in loss1024]
    hold = json.loads((RESULTS / "fitness_holdout.json").read_text())
    held = [{"key": r["key"], "truth": r["standalone_accuracy"], "default": r["loss_1024"],
             "accuracy_all": r["accuracy_all"]} for r in hold["held_out_archs"]]
    overlap = {r["key"] for r in landscape} & {r["key"] for r in held}
    if overlap:
        raise SystemExit(f"held-out picks overlap the landscape ({len(overlap)}): not held out")
    return {"landscape": landscape, "held_out": held}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--name", default="top_rank", help="result name (benchmarks/results/NAME.json)")
    args = p.parse_args()

    from lvsearch.arch import Arch
    from lvsearch.search.rank_stats import paired_tau_difference, rank_quality
    from lvsearch.search.surrogate import Surrogate, leave_one_out, structural_features

    sets = load_sets()
    land, held = sets["landscape"], sets["held_out"]
    la = [Arch.from_key(r["key"]) for r in land]
    ha = [Arch.from_key(r["key"]) for r in held]
    truth_l = [r["truth"] for r in land]
    fit_l = [r["default"] for r in land]
    surrogates = {
        "surrogate (fitness + structure)": (Surrogate.fit(la, truth_l, fit_l), True),
        "surrogate (structure only)": (Surrogate.fit(la, truth_l), False),
    }
    for r, a in zip(land, la):
        r["first_dc"] = -structural_features(a)[0]
    for r, a in zip(held, ha):
        r["first_dc"] = -structural_features(a)[0]
    for name, (s, uses_fit) in surrogates.items():
        loo = leave_one_out(la, truth_l, fit_l if uses_fit else None)
        for r, v in zip(land, loo):
            r[name] = v
        pred = s.predict(ha, [r["default"] for r in held] if uses_fit else None)
        for r, v in zip(held, pred):
            r[name] = float(v)
    rankers = ["default", "accuracy_all", "few_shot", "first_dc", *surrogates]
    out: dict = {"what": "rank fidelity at the top: each ranker's τ, top-region τ and top-5 against standalone "
                         "accuracy (benchmarks/top_rank.py)",
                 "truth": {"landscape": "standalone MLM accuracy, mean over seeds (landscape.json)",
                           "held_out": "standalone MLM accuracy of the 6-seed run's 12 picks (fitness_holdout.json)"},
                 "rankers": {"default": "−loss on 1024 dev sequences (evolve's default)",
                             "accuracy_all": "MLM accuracy on all dev sequences",
                             "few_shot": "−loss on 1024, few-shot sub-supernets split at slot 1 (few_shot.json)",
                             "first_dc": "minus the first DC slot's position / slots (earlier is better)",
                             **{n: f"ridge, fitted on the landscape ({s.n} architectures; leave-one-out on it), "
                                   f"features {', '.join(s.features)}, alpha {s.alpha:.3g}"
                                for n, (s, _) in surrogates.items()}},
                 "surrogates": {n: s.to_dict() for n, (s, _) in surrogates.items()},
                 "sets": {}, "machine": machine()}
    for set_name, rows in sets.items():
        truth = [r["truth"] for r in rows]
        res = {"n": len(rows), "by_ranker": {}}
        for name in rankers:
            if name not in rows[0]:
                continue
            scores = [r[name] for r in rows]
            q = rank_quality(scores, truth)
            if name != "default":
                q["vs_default"] = paired_tau_difference(scores, [r["default"] for r in rows], truth)
            res["by_ranker"][name] = q
        out["sets"][set_name] = res
    path = write_result(args.name, out)
    for set_name, res in out["sets"].items():
        print(f"{set_name} ({res['n']} architectures)")
        for name, q in res["by_ranker"].items():
            vs = q.get("vs_default")
            extra = (f"; − default {vs['difference']:+.2f} [{vs['ci95'][0]:+.2f}, {vs['ci95'][1]:+.2f}] {vs['verdict']}"
                     if vs and vs.get("ci95") and vs["ci95"][0] is not None else "")
            print(f"  {name:34s} τ {q['kendall_tau']:+.2f}  top-region τ {q['top_region']['kendall_tau']:+.2f} "
                  f"(n {q['top_region']['n']})  top-5 {q['top5_precision']:.2f}{extra}")
    print(path)


if __name__ == "__main__":
    main()
