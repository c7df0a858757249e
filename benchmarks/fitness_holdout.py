"""Held-out test of the search's default fitness: −loss on 1024 dev sequences against accuracy on all.

The landscape (``benchmarks/landscape.py``) scored six supernet fitness variants on its 27
architectures and found accuracy on all dev sequences ahead of the default (−loss on 1024) by
a paired τ difference of +0.15 [+0.02, +0.33], one of five comparisons. docs/results.md ("Tests
fixed before the 6-seed run's results") fixed in advance how that is decided: on architectures
the landscape did not see — the distinct picks of ``benchmarks/search_arms.py``'s 6-seed run,
each with its standalone MLM accuracy (mean over the seeds it was trained with) — the default
becomes accuracy-on-all only if

(a) the held-out paired difference τ(accuracy, all) − τ(−loss, 1024) is > 0, and
(b) on the pooled landscape + held-out architectures its paired-bootstrap 95% interval lies
    above 0 (:func:`lvsearch.search.rank_stats.paired_tau_difference`).

Both rankers are ``lvsearch rank-check --reuse`` runs on the same supernet (the one both
benchmarks searched), so only the supernet side is scored. Writes
``benchmarks/results/fitness_holdout.json`` with the per-architecture scores, τ of each ranker
on the held-out, landscape and pooled sets, the paired differences and the verdict.

Usage::

    python benchmarks/fitness_holdout.py --supernet SN --landscape-reuse W/landscape_rank_check.json \\
        --arms-work ARMS6 --seeds 6 --work OUT
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from _common import machine, write_result

#: (dev sequences, metric) of the two rankers: the search's default, and the candidate.
DEFAULT = ("1024", "loss")
CANDIDATE = ("all", "accuracy")


def held_out_rows(arms_work: Path, seeds: int, exclude: set[str]) -> list[dict]:
    """``rank_check.json`` rows of the distinct architectures of the arms runs (``ARM-sS``),
    standalone accuracy and loss averaged over the seeds each was trained with; keys in
    ``exclude`` (the landscape's) are left out."""
    from lvsearch.arch import Arch

    by_key: dict[str, list[dict]] = {}
    for run in sorted((arms_work / "runs").glob("*-s*")):
        if not (run / "mlm.json").exists():
            continue
        if int(run.name.rsplit("-s", 1)[1]) >= seeds:
            continue
        arch = Arch.from_dict(json.loads((run / "config.json").read_text())["arch"])
        mlm = json.loads((run / "mlm.json").read_text())["mlm"]
        params = json.loads((run / "summary.json").read_text())["params"]
        by_key.setdefault(arch.key, []).append({"acc": mlm["accuracy"], "loss": mlm["loss"], "params": params,
                                                "run": run.name})
    rows = []
    for key, runs in sorted(by_key.items()):
        if key in exclude:
            continue
        rows.append({"key": key, "standalone_accuracy": sum(r["acc"] for r in runs) / len(runs),
                     "standalone_loss": sum(r["loss"] for r in runs) / len(runs), "params": runs[0]["params"],
                     "runs": [r["run"] for r in runs]})
    return rows


def reuse_file(path: Path, rows: list[dict], steps: int, what: str) -> Path:
    from lvsearch.io import atomic_write_json
    from lvsearch.search.rank_check import standalone_digest

    archs = [{k: r[k] for k in ("key", "standalone_accuracy", "standalone_loss", "params")} for r in rows]
    atomic_write_json(path, {"what": what, "steps": steps, "pool": len(archs), "archs": archs,
                             "standalone_sha256": standalone_digest(archs)})
    return path


def score(supernet: Path, reuse: Path, work: Path, name: str) -> dict[str, dict]:
    """Both rankers' per-architecture scores (higher is better) and the truth, keyed by arch."""
    from lvsearch.search.rank_check import rank_check

    out: dict[str, dict] = {}
    for n, metric in (DEFAULT, CANDIDATE):
        rep = rank_check(supernet, reuse=reuse, out=work / f"rank_check_{name}_{n}", overwrite=True,
                         dev_sequences=n if n == "all" else int(n))
        for r in rep["archs"]:
            row = out.setdefault(r["key"], {"standalone_accuracy": r["standalone_accuracy"]})
            row[f"{metric}_{n}"] = r["supernet_accuracy"] if metric == "accuracy" else -r["supernet_loss"]
    return out


def compare(rows: dict[str, dict]) -> dict:
    from scipy import stats

    from lvsearch.search.rank_stats import paired_tau_difference

    keys = sorted(rows)
    truth = [rows[k]["standalone_accuracy"] for k in keys]
    a = [rows[k][f"{CANDIDATE[1]}_{CANDIDATE[0]}"] for k in keys]
    b = [rows[k][f"{DEFAULT[1]}_{DEFAULT[0]}"] for k in keys]
    return {"n": len(keys), "tau_candidate": float(stats.kendalltau(a, truth).statistic),
            "tau_default": float(stats.kendalltau(b, truth).statistic),
            "paired_difference": paired_tau_difference(a, b, truth)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--supernet", type=Path, required=True, help="the supernet both benchmarks searched")
    p.add_argument("--landscape-reuse", type=Path, required=True,
                   help="the landscape's landscape_rank_check.json (benchmarks/landscape.py --report)")
    p.add_argument("--arms-work", type=Path, required=True, help="the WORK folder of the 6-seed search_arms.py run")
    p.add_argument("--seeds", type=int, default=6)
    p.add_argument("--work", type=Path, required=True, help="folder for the reuse files and rank checks")
    p.add_argument("--name", default="fitness_holdout")
    args = p.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    land = json.loads(args.landscape_reuse.read_text())
    land_rows = land["archs"]
    held = held_out_rows(args.arms_work, args.seeds, {r["key"] for r in land_rows})
    if len(held) < 3:
        raise SystemExit(f"{args.arms_work}: {len(held)} held-out architectures with results; the test needs ≥ 3")
    held_reuse = reuse_file(args.work / "holdout_rank_check.json", held, land["steps"],
                            "distinct picks of the 6-seed search_arms.py run (standalone = seed mean)")
    pooled_reuse = reuse_file(args.work / "pooled_rank_check.json", [*land_rows, *held], land["steps"],
                              "landscape + held-out")
    held_scores = score(args.supernet, held_reuse, args.work, "holdout")
    pooled_scores = score(args.supernet, pooled_reuse, args.work, "pooled")
    land_scores = {k: v for k, v in pooled_scores.items() if k in {r["key"] for r in land_rows}}
    result = {"held_out": compare(held_scores), "landscape": compare(land_scores), "pooled": compare(pooled_scores)}
    a = result["held_out"]["paired_difference"]["difference"]
    low = result["pooled"]["paired_difference"]["ci95"][0]
    switch = a is not None and a > 0 and low is not None and low > 0
    result["verdict"] = {
        "rule": "switch to accuracy on all dev sequences only if (a) held-out paired τ difference > 0 and (b) the "
                "pooled paired-bootstrap 95% interval lies above 0 (docs/results.md, fixed before the results)",
        "a_held_out_difference_positive": a is not None and a > 0, "b_pooled_interval_above_0": low is not None and low > 0,
        "switch_default": switch,
    }
    result.update(what=__doc__.split("\n\n")[0], candidate={"dev_sequences": CANDIDATE[0], "fitness": CANDIDATE[1]},
                  default={"dev_sequences": DEFAULT[0], "fitness": DEFAULT[1]}, supernet=str(args.supernet),
                  held_out_archs=[{**r, **held_scores[r["key"]]} for r in held], machine=machine())
    path = write_result(args.name, result)
    for part in ("held_out", "landscape", "pooled"):
        r = result[part]
        d = r["paired_difference"]
        print(f"{part:9s} n={r['n']:2d}  τ(acc, all) {r['tau_candidate']:+.3f}  τ(−loss, 1024) {r['tau_default']:+.3f}  "
              f"difference {d['difference']:+.3f} {d['ci95']} {d['verdict']}")
    print(f"switch default: {switch}  → {path}")


if __name__ == "__main__":
    main()
