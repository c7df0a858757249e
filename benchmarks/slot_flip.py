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
* **supernet side**: ``evolve``'s default fitness (−loss: minus the mean masked-token
  cross-entropy, nats) on ``--dev-sequences`` dev sequences of ``--data``, scored in full (no
  racing), for every flip; per op pair the mean paired fitness difference (nats) with its
  Student-t 95% interval over the architectures (:func:`lvsearch.stats.t_interval`; all, picks
  and draws apart) and how many architectures favour each op;
* **standalone side**: a landscape file of the same space (``--landscape``; without it
  ``benchmarks/results/landscape.json`` when that file is of the supernet's space, else none):
  mean standalone MLM dev accuracy (a fraction, 0.01 = 1 pp; each architecture's mean over its
  seeds) of its architectures grouped by the op in ``--slot`` (random draws and searched picks;
  ``bert`` and ``sandwich`` left out: fixed orders), and per op pair the difference of group
  means with Welch's t 95% interval (``scipy.stats.ttest_ind(equal_var=False)``).

Every architecture is scored once: a pick that repeats another pick is counted once, and the
draws skip architectures already listed. Bad input (a pick of another space or slot count, a
missing supernet or landscape, a landscape of another space, ``--slot`` outside the space, no
architecture at all, a band holding fewer than ``--random`` distinct architectures, a ``--name``
whose file is another benchmark's) is one message and exit status 2 before anything is scored
or written.

A slot op the fitness prefers but standalone training does not is a bias of the supernet that
no search over its fitness can undo.

Output: ``benchmarks/results/<--name>.json`` (``rows``: per architecture the fitness of every
flip; ``supernet_side``; ``standalone_side``; ``units``).

Usage::

    python benchmarks/slot_flip.py --supernet SN12 --data CORPUS --picks W6/search-*/best.json \\
        W6/search-*/random/best.json [--random 20] [--slot 1] [--dev-sequences 1024] [--name slot_flip]
        [--landscape benchmarks/results/landscape.json]
"""

from __future__ import annotations

import argparse
from itertools import combinations
from pathlib import Path

import numpy as np

from _common import RESULTS, bert_band, draw_in_band, machine, result_path, run_main, write_result

#: The start of the result's ``what``: how a re-run recognises its own output (``--name``).
WHAT = "paired op flips of slot"
#: Units of the result's numbers.
UNITS = {"fitness": "nats: −loss, minus the mean cross-entropy per masked dev token (higher is better)",
         "standalone": "fraction: MLM dev accuracy (0.01 = 1 pp)"}


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


def load_landscape(path: Path | None, space_name: str) -> tuple[dict | None, str]:
    """The landscape file of the standalone side and a line saying which, or ``(None, why)``.
    ``path`` None: ``benchmarks/results/landscape.json`` when it exists and is of
    ``space_name`` (a plan's space, ``"lvbert-elc@12"``), else none.

    Raises:
        LvsearchError: a given ``path`` that is missing, not JSON, not a landscape file (no
            ``settings.space`` or ``archs`` with ``key``, ``name`` and ``accuracy_mean``), or of
            another space than ``space_name``.
    """
    from typing import Optional

    from lvsearch.io import read_checked
    from lvsearch.schema import FileModel, Finite
    from lvsearch.search.noise import LANDSCAPE_COMMAND

    class Row(FileModel):
        key: str
        name: str
        accuracy_mean: Optional[Finite] = None

    class Settings(FileModel):
        space: str

    class Landscape(FileModel):
        settings: Settings
        archs: list[Row]

    given = path is not None
    path = path if given else RESULTS / "landscape.json"
    if not given and not path.exists():
        return None, f"standalone side: none ({path} is absent; pass --landscape)"
    land = read_checked(path, Landscape, what="landscape file", regenerate=LANDSCAPE_COMMAND,
                        fix=f"pass a landscape.json that {LANDSCAPE_COMMAND} wrote for this supernet's space")
    if land["settings"]["space"] != space_name:
        if given:
            from lvsearch.errors import LvsearchError

            raise LvsearchError(f"--landscape {path} was measured on {land['settings']['space']}, not on the "
                                f"supernet's {space_name}: its architectures cannot be grouped by this slot's op",
                                fix="pass the landscape of the supernet's space (benchmarks/landscape.py --name ...), "
                                    "or leave --landscape out")
        return None, (f"standalone side: none ({path} is of {land['settings']['space']}, the supernet's space is "
                      f"{space_name}; pass --landscape)")
    return land, f"standalone side: {path}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    from lvsearch.argtypes import count as count_arg, positive_count

    p.add_argument("--supernet", type=Path, required=True, help="the supernet run folder")
    p.add_argument("--data", type=Path, required=True, help="the prepared corpus the supernet was trained on")
    p.add_argument("--picks", type=Path, nargs="*", default=[], help="architecture files (evolve's best.json)")
    p.add_argument("--random", type=count_arg, default=20,
                   help="random draws inside bert's band (seeds 0, 1, ...; architectures already listed skipped)")
    p.add_argument("--slot", type=positive_count, default=1, help="the slot whose op is flipped (1-based)")
    p.add_argument("--dev-sequences", type=positive_count, default=1024,
                   help="dev sequences of the fitness (evolve's default count), every flip scored on all of them")
    p.add_argument("--landscape", type=Path, default=None,
                   help="landscape file of the supernet's space for the standalone side (default: "
                        "benchmarks/results/landscape.json when it is of that space)")
    p.add_argument("--threads", type=positive_count, default=1, help="torch threads")
    p.add_argument("--name", default="slot_flip",
                   help="result name: benchmarks/results/NAME.json (a re-run replaces only its own output)")
    args = p.parse_args()
    if not args.picks and args.random == 0:
        p.error("no architectures: pass --picks FILE ... or --random N with N ≥ 1")
    out = result_path(args.name, own=lambda d: str(d.get("what", "")).startswith(WHAT))

    import torch

    from landscape import plan_space_of
    from lvsearch.arch import Arch
    from lvsearch.errors import LvsearchError
    from lvsearch.search.evaluator import SupernetEvaluator
    from lvsearch.search.fitness import DEFAULT
    from lvsearch.train.supernet import load_dev, load_supernet

    torch.set_num_threads(args.threads)
    loaded = load_supernet(args.supernet)
    space = loaded.space
    if not 1 <= args.slot <= space.num_slots:
        raise LvsearchError(f"--slot {args.slot}: the space of {args.supernet} has slots 1..{space.num_slots}",
                            fix=f"pass --slot between 1 and {space.num_slots}")
    land, land_line = load_landscape(args.landscape, plan_space_of(space))
    ops = list(space.ops)
    count = loaded.supernet.num_params
    _, lo, hi = bert_band(loaded)
    archs, seen = [], {}
    for f in args.picks:
        a = Arch.from_json(f)
        space.validate(a, source=f)
        if a.key in seen:
            print(f"{f}: the same architecture as {seen[a.key]}; counted once", flush=True)
            continue
        seen[a.key] = str(f)
        archs.append({"source": "pick", "name": str(f), "arch": a})
    for seed, a in draw_in_band(space, count, lo, hi, args.random, seen=seen, also=", or searched --picks"):
        archs.append({"source": "random", "name": f"random:{seed}", "arch": a})
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
    print(land_line, flush=True)
    if land is not None:
        source = args.landscape if args.landscape is not None else RESULTS / "landscape.json"
        standalone = {"source": str(source), **standalone_groups(land, args.slot, ops)}
    result = {"what": f"{WHAT} {args.slot}: supernet fitness (−loss on {args.dev_sequences} dev "
                      "sequences, in full) against standalone accuracy by the slot's op (landscape)",
              "supernet": str(args.supernet), "slot": args.slot, "dev_sequences": args.dev_sequences,
              "band": [lo, hi], "units": UNITS, "rows": rows, "supernet_side": supernet_side,
              "standalone_side": standalone, "machine": machine()}
    for part, v in supernet_side.items():
        print(part, {k: (round(x["mean"], 4), [round(c, 4) for c in x["ci95"]]) if isinstance(x, dict) and "mean" in x
                     else x for k, x in v.items()}, flush=True)
    if standalone:
        print("standalone", standalone["groups"], {k: (round(v["mean"], 4), [round(c, 4) for c in v["ci95"]])
                                                   for k, v in standalone["differences"].items()}, flush=True)
    write_result(args.name, result)
    print(out)


if __name__ == "__main__":
    run_main(main)
