"""Which op does the supernet prefer in one slot, and does standalone training agree?

The audit found that one bit (DC in slot 1) explains most of the 12-slot landscape's standalone
quality. If the supernet's fitness prefers another op in that slot near the top of the space, a
search that climbs the fitness well is led away from the better standalone architectures, and a
better engine does not help. This benchmark measures the supernet's preference directly, with
paired op flips:

* **architectures**: every searched pick given with ``--picks`` (``evolve``'s ``best.json``),
  and ``--random`` draws of ``SearchSpace.sample`` inside ``bert``'s parameter band (± 5%);
* **flips**: each architecture with the op of ``--slot`` replaced by every op of the space
  (inputs unchanged; the other slots as they are);
* **supernet side**: ``evolve``'s default fitness (−loss, nats) on ``--dev-sequences`` dev
  sequences, scored in full (no racing), for every flip; per op pair the mean paired fitness
  difference with its Student-t interval over the architectures (picks and draws apart);
* **standalone side**: the committed ``--landscape`` (``benchmarks/results/landscape.json``,
  the same slot count): mean standalone MLM accuracy (mean over seeds) of its architectures by
  the op in ``--slot`` (``bert`` and ``sandwich`` left out: fixed orders, not draws), and the
  difference of group means with Welch's t interval (scipy).

A slot op the fitness prefers but standalone training does not is a bias of the supernet that
no search over its fitness can undo.

Usage::

    python benchmarks/slot_flip.py --supernet SN12 --data CORPUS --picks W6/search-*/best.json \\
        W6/search-*/random/best.json [--random 20] [--slot 1] [--dev-sequences 1024] [--name slot_flip]
"""

from __future__ import annotations

import argparse
import json
import random
from itertools import combinations
from pathlib import Path

import numpy as np

from _common import RESULTS, bert_band, machine, write_result


def flips(arch, slot: int, ops) -> dict:
    """``{op: arch with slot ``slot`` (1-based) set to op}``: inputs kept, the slot's variant
    reset to the op's default."""
    from lvsearch.arch import Arch

    out = {}
    for op in ops:
        new_ops = list(arch.ops)
        new_ops[slot - 1] = op
        variants = list(arch.variants)
        variants[slot - 1] = () if op != arch.ops[slot - 1] else arch.variants[slot - 1]
        out[op] = Arch(tuple(new_ops), arch.inputs, tuple(variants))
    return out


def paired(rows: list[dict], a: str, b: str) -> dict | None:
    """Mean fitness(a) − fitness(b) over ``rows`` (nats for −loss) with the Student-t 95% interval
    (:func:`lvsearch.stats.t_interval`) and how many rows favour ``a``; None with fewer than 2 rows."""
    from lvsearch.stats import t_interval

    d = [r["fitness"][a] - r["fitness"][b] for r in rows]
    if len(d) < 2:
        return None
    ci = t_interval(d)
    return {"n": len(d), "mean": float(np.mean(d)), "ci95": list(ci) if ci else None,
            "a_better": int(sum(x > 0 for x in d))}


def standalone_groups(landscape: dict, slot: int, ops) -> dict:
    """Standalone MLM accuracy (fraction, mean over seeds) of a landscape's architectures grouped
    by the op in ``slot``, and per op pair the difference of group means with Welch's t 95%
    interval (``scipy.stats.ttest_ind``, ``equal_var=False``) where both groups hold ≥ 2."""
    from scipy import stats

    from lvsearch.arch import Arch

    groups = {op: [] for op in ops}

    for r in landscape["archs"]:
        if r["name"] in ("bert", "sandwich") or r.get("accuracy_mean") is None:
            continue
        op = Arch.from_key(r["key"]).ops[slot - 1]
        groups.setdefault(op, []).append(r["accuracy_mean"])
    out = {"groups": {op: {"n": len(v), "mean": float(np.mean(v)) if v else None} for op, v in groups.items()},
           "differences": {}}
    for a, b in combinations(ops, 2):
        x, y = groups.get(a, []), groups.get(b, [])
        if len(x) >= 2 and len(y) >= 2:
            t = stats.ttest_ind(x, y, equal_var=False)
            ci = t.confidence_interval(0.95)
            out["differences"][f"{a}-{b}"] = {"mean": float(np.mean(x) - np.mean(y)),
                                              "ci95": [float(ci.low), float(ci.high)], "p": float(t.pvalue)}
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--supernet", type=Path, required=True, help="the supernet run folder")
    p.add_argument("--data", type=Path, required=True, help="the prepared corpus the supernet was trained on")
    p.add_argument("--picks", type=Path, nargs="*", default=[], help="architecture files (evolve's best.json)")
    p.add_argument("--random", type=int, default=20, help="random draws inside bert's band (seeds 0, 1, ...)")
    p.add_argument("--slot", type=int, default=1, help="the slot whose op is flipped (1-based)")
    p.add_argument("--dev-sequences", type=int, default=1024)
    p.add_argument("--landscape", type=Path, default=RESULTS / "landscape.json",
                   help="committed landscape of the same space (standalone side)")
    p.add_argument("--threads", type=int, default=1, help="torch threads")
    p.add_argument("--name", default="slot_flip")
    args = p.parse_args()

    import torch

    from lvsearch.arch import Arch
    from lvsearch.search.evaluator import SupernetEvaluator
    from lvsearch.search.fitness import DEFAULT
    from lvsearch.train.supernet import load_dev, load_supernet

    torch.set_num_threads(args.threads)
    loaded = load_supernet(args.supernet)
    space = loaded.space
    if not 1 <= args.slot <= space.num_slots:
        raise SystemExit(f"--slot {args.slot}: the space has slots 1..{space.num_slots}")
    ops = list(space.ops)
    count = loaded.supernet.num_params
    _, lo, hi = bert_band(loaded)
    archs = []
    for f in args.picks:
        a = Arch.from_json(f)
        space.validate(a, source=f)
        archs.append({"source": "pick", "name": str(f), "arch": a})
    seed = 0
    while sum(r["source"] == "random" for r in archs) < args.random:
        a = space.sample(random.Random(seed))
        if lo <= count(a) <= hi:
            archs.append({"source": "random", "name": f"random:{seed}", "arch": a})
        seed += 1
    dev, _ = load_dev(loaded, args.data, args.dev_sequences)
    ev = SupernetEvaluator(loaded.supernet, dev, seq_len=loaded.config.train.seq_len, fitness=DEFAULT)
    for r in archs:
        r["flips"] = flips(r["arch"], args.slot, ops)
    todo = {v.key: v for r in archs for v in r["flips"].values()}
    print(f"{len(archs)} architectures, {len(todo)} distinct flips to score on {args.dev_sequences} dev sequences",
          flush=True)
    scored = {res.key: res for res in ev.evaluate_many(list(todo.values()))}
    rows = []
    for r in archs:
        fl = r["flips"]
        rows.append({"source": r["source"], "name": r["name"], "key": r["arch"].key, "compact": r["arch"].compact,
                     "own": r["arch"].ops[args.slot - 1],
                     "fitness": {op: float(scored[v.key].fitness) for op, v in fl.items()},
                     "params": {op: int(count(v)) for op, v in fl.items()}})
    supernet_side = {}
    for part, sel in (("all", rows), ("picks", [r for r in rows if r["source"] == "pick"]),
                      ("random", [r for r in rows if r["source"] == "random"])):
        supernet_side[part] = {f"{a}-{b}": paired(sel, a, b) for a, b in combinations(ops, 2)}
        supernet_side[part]["preferred"] = {op: int(sum(max(r["fitness"], key=r["fitness"].get) == op for r in sel))
                                            for op in ops}
    standalone = None
    if args.landscape.exists():
        land = json.loads(args.landscape.read_text())
        if Arch.from_key(land["archs"][0]["key"]).num_slots == space.num_slots:
            standalone = {"source": str(args.landscape), **standalone_groups(land, args.slot, ops)}
    result = {"what": f"paired op flips of slot {args.slot}: supernet fitness (−loss on {args.dev_sequences} dev "
                      "sequences, in full) against standalone accuracy by the slot's op (landscape)",
              "supernet": str(args.supernet), "slot": args.slot, "dev_sequences": args.dev_sequences,
              "band": [lo, hi], "rows": rows, "supernet_side": supernet_side, "standalone_side": standalone,
              "machine": machine()}
    for part, v in supernet_side.items():
        print(part, {k: (round(x["mean"], 4), [round(c, 4) for c in x["ci95"]]) if isinstance(x, dict) and "mean" in x
                     else x for k, x in v.items()}, flush=True)
    if standalone:
        print("standalone", standalone["groups"], {k: (round(v["mean"], 4), [round(c, 4) for c in v["ci95"]])
                                                   for k, v in standalone["differences"].items()}, flush=True)
    print(write_result(args.name, result))


if __name__ == "__main__":
    main()
