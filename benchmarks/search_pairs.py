"""Does a search's lead on the supernet's fitness carry over to standalone accuracy?

Every paired search of the fixed engine (``evolve --compare-random``: the strategy and random
search from the same first population, at equal dev-sequence passes) gives, per search seed,
two numbers:

* **fitness lead**: the strategy's pick − random search's pick on the search's own fitness
  (nats for the default −loss: minus the mean cross-entropy per masked dev token);
* **standalone difference**: the same two picks retrained from scratch (2000 steps, the same
  pretraining seed), strategy − random search in MLM dev accuracy (a fraction, 0.01 = 1 pp).

This benchmark pools those pairs over the committed results that hold them: ``search_arms.py``
results (``--arms``: ``search_fitness.per_seed`` and ``pairs["ea - random-search"]``) and
``landscape.py`` results with searched picks (``--landscape``: ``summary.pick_pairs``, the
fitness lead from each pair's ``compare_random.json`` next to the strategy's ``best.json``).
It reports, over all pairs and per source:

* the mean standalone difference with its Student-t 95% interval over seeds
  (:func:`lvsearch.stats.t_interval`) and the seeds ahead / behind / tied;
* the mean fitness lead with its t interval;
* whether the fitness lead predicts the standalone difference across pairs: Pearson r and
  Spearman ρ with their p-values and the least-squares slope in pp per nat
  (``scipy.stats.pearsonr``, ``spearmanr``, ``linregress``);
* the smallest mean standalone difference a paired t test over 10 seeds detects at the pooled
  SD (exact noncentral t, :func:`lvsearch.stats.detectable_difference`, α 0.05, power 0.8).

Pooling over spaces mixes settings (12 and 24 slots, the elastic space): it answers "does the
fixed engine at 200 supernet evaluations pick better than random search" across them, not for
one space; the per-source rows show the spread. It reads committed JSON and the search folders'
``compare_random.json``; nothing is trained.

Output: ``benchmarks/results/<--name>.json`` (``pairs``: one row per source and seed;
``pooled``; ``per_source``; ``units``). Bad input (a missing or unreadable file, a result of
another kind, a landscape pair whose search folder lacks ``compare_random.json``, no pair at
all) is one message and exit status 2 before anything is written.

Usage::

    python benchmarks/search_pairs.py --arms benchmarks/results/search_arms_6seeds_fixed.json \\
        --landscape benchmarks/results/landscape_24.json benchmarks/results/landscape_elastic.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from _common import machine, result_path, run_main, write_result

#: The start of the result's ``what``: how a re-run recognises its own output (``--name``).
WHAT = "paired strategy - random-search searches"
UNITS = {"fitness_lead": "nats: the search's fitness (−loss, minus the mean cross-entropy per masked dev token)",
         "standalone_difference": "fraction: MLM dev accuracy after retraining (0.01 = 1 pp)",
         "slope": "pp of standalone accuracy per nat of fitness lead"}


def _load(path: Path, kind: str) -> dict:
    from lvsearch.errors import LvsearchError

    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise LvsearchError(f"{kind} {path}: cannot be read ({e.strerror})",
                            fix=f"pass a committed benchmarks/results/*.json written by {kind.lstrip('-')}") from None
    except ValueError:
        raise LvsearchError(f"{kind} {path}: not JSON", fix="pass the result file itself") from None


def arms_pairs(path: Path) -> list[dict]:
    """The (fitness lead, standalone difference) pairs of a ``search_arms.py`` result: the seeds
    that have both ``search_fitness.per_seed`` and ``pairs["ea - random-search"]``; the picks'
    op strings from ``arms``.

    Raises:
        LvsearchError: the file is not a search_arms result or holds neither part.
    """
    from lvsearch.errors import LvsearchError

    d = _load(path, "--arms")
    if not str(d.get("what", "")).startswith("EA vs random search vs references") or "pairs" not in d:
        raise LvsearchError(f"--arms {path}: not a benchmarks/search_arms.py result (no 'pairs')",
                            fix="pass a search_arms*.json from benchmarks/results")
    fit = (d.get("search_fitness") or {}).get("per_seed", {})
    acc = d["pairs"].get("ea - random-search", {})
    seeds = acc.get("seeds", [])
    diffs = dict(zip(map(str, seeds), acc.get("mlm_accuracy", {}).get("per_seed", [])))
    arms = d.get("arms", {})
    out = []
    for s in sorted(set(fit) & set(diffs), key=int):
        out.append({"source": path.stem, "seed": int(s), "fitness_lead": fit[s], "fitness_lead_se": None,
                    "standalone_difference": diffs[s],
                    "strategy_pick": arms.get("ea", {}).get("per_seed", {}).get(s, {}).get("arch"),
                    "random_search_pick": arms.get("random-search", {}).get("per_seed", {}).get(s, {}).get("arch")})
    return out


def landscape_pairs(path: Path) -> list[dict]:
    """The pairs of a ``landscape.py`` result with searched picks (``summary.pick_pairs``), each
    fitness lead read from ``compare_random.json`` in the strategy pick's folder (``diff``,
    ``paired_se``); the seed is the folder's ``search-S`` number.

    Raises:
        LvsearchError: not a landscape result, no pick pairs, or a pair's compare_random.json
            missing (the search folders are not on this machine).
    """
    from lvsearch.errors import LvsearchError

    d = _load(path, "--landscape")
    if not str(d.get("what", "")).startswith("the landscape of") or "summary" not in d:
        raise LvsearchError(f"--landscape {path}: not a benchmarks/landscape.py result",
                            fix="pass a landscape*.json from benchmarks/results")
    pp = d["summary"].get("pick_pairs") or {}
    if not pp.get("pairs"):
        raise LvsearchError(f"--landscape {path}: holds no searched pick pairs (summary.pick_pairs)",
                            fix="pass a landscape run with --picks of evolve --compare-random searches")
    ops = {a["name"]: a["ops"] for a in d.get("archs", [])}
    out = []
    for p in pp["pairs"]:
        folder = Path(p["ea"]).parent
        cr = folder / "compare_random.json"
        if not cr.is_file():
            raise LvsearchError(f"--landscape {path}: {cr} is missing (the fitness lead of its pair)",
                                fix="run on the machine that holds the landscape's search folders")
        c = _load(cr, "compare_random.json")
        seed = folder.name.rsplit("-", 1)[-1]
        out.append({"source": path.stem, "seed": int(seed) if seed.isdigit() else None,
                    "fitness_lead": c["diff"], "fitness_lead_se": c.get("paired_se"),
                    "standalone_difference": p["difference"],
                    "strategy_pick": ops.get(p["ea"]), "random_search_pick": ops.get(p["random_search"])})
    return out


def summarise(rows: list[dict]) -> dict:
    """Mean standalone difference and fitness lead with t 95% intervals, seeds ahead / behind /
    tied, the 10-seed detectable difference at the rows' SD, and (with ≥ 3 rows) Pearson r,
    Spearman ρ and the least-squares slope (pp per nat) of standalone difference on fitness
    lead."""
    import numpy as np
    from scipy import stats as st

    from lvsearch.stats import detectable_difference, t_interval

    d = np.array([r["standalone_difference"] for r in rows], dtype=float)
    f = np.array([r["fitness_lead"] for r in rows], dtype=float)
    ci, fci = t_interval(d.tolist()), t_interval(f.tolist())
    out = {"n": len(rows), "standalone_difference": {
               "mean": float(d.mean()), "t95": list(ci) if ci else None,
               "sd": float(d.std(ddof=1)) if len(d) > 1 else None,
               "ahead": int((d > 0).sum()), "behind": int((d < 0).sum()), "tied": int((d == 0).sum())},
           "fitness_lead": {"mean": float(f.mean()), "t95": list(fci) if fci else None,
                            "ahead": int((f > 0).sum())}}
    if len(d) > 1 and d.std(ddof=1) > 0:
        out["standalone_difference"]["detectable_at_10_seeds"] = detectable_difference(float(d.std(ddof=1)), 10)
    if len(rows) >= 3 and f.std() > 0 and d.std() > 0:
        r, rp = st.pearsonr(f, d)
        rho, sp = st.spearmanr(f, d)
        lr = st.linregress(f, d)
        out["lead_predicts_difference"] = {"pearson_r": float(r), "pearson_p": float(rp),
                                           "spearman_rho": float(rho), "spearman_p": float(sp),
                                           "slope_pp_per_nat": float(lr.slope) * 100,
                                           "slope_stderr_pp_per_nat": float(lr.stderr) * 100}
    return out


def main() -> None:
    from lvsearch.errors import LvsearchError

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--arms", type=Path, nargs="*", default=[], help="search_arms.py result JSONs")
    p.add_argument("--landscape", type=Path, nargs="*", default=[],
                   help="landscape.py result JSONs with searched pick pairs (their search folders must exist)")
    p.add_argument("--name", default="search_pairs", help="benchmarks/results/NAME.json")
    args = p.parse_args()
    out = result_path(args.name, own=lambda d: str(d.get("what", "")).startswith(WHAT))
    rows = [r for a in args.arms for r in arms_pairs(a)] + [r for a in args.landscape for r in landscape_pairs(a)]
    if len(rows) < 2:
        raise LvsearchError(f"{len(rows)} paired search(es) found in the given files: at least 2 are needed",
                            fix="pass --arms and/or --landscape results that hold retrained pick pairs")
    sources = list(dict.fromkeys(r["source"] for r in rows))
    result = {"what": f"{WHAT}: fitness lead against standalone difference (benchmarks/search_pairs.py)",
              "inputs": {"arms": [str(a) for a in args.arms], "landscape": [str(a) for a in args.landscape]},
              "units": UNITS, "pairs": rows, "pooled": summarise(rows),
              "per_source": {s: summarise([r for r in rows if r["source"] == s]) for s in sources},
              "machine": machine()}
    print(write_result(out.stem, result))
    s = result["pooled"]["standalone_difference"]
    print(f"{len(rows)} pairs: strategy - random search {s['mean'] * 100:+.2f} pp "
          f"(t95 {s['t95'][0] * 100:+.2f}, {s['t95'][1] * 100:+.2f}), ahead {s['ahead']}, behind {s['behind']}")


if __name__ == "__main__":
    run_main(main)
