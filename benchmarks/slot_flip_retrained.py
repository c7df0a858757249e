"""Does the supernet's preference in one slot hold when the flipped architecture is retrained?

``slot_flip.py`` scores each architecture with one slot set to every op, on the supernet. This
benchmark takes architectures that were retrained twice from scratch, as they are and with
that slot flipped (inputs and every other slot unchanged, same recipe, steps and pretraining
seed), and compares the two standalone results with the supernet's paired flip for the same
architecture:

* **supernet side**: from a committed ``slot_flip.py`` result (``--flips``), the row of the
  original architecture (matched by its full key): fitness(flipped op) − fitness(own op), nats
  of −loss (minus the mean cross-entropy per masked dev token);
* **standalone side**: MLM dev accuracy of the flipped run − the original run (``mlm.json`` of
  ``lvsearch evaluate``; a fraction, 0.01 = 1 pp), per pair, with the mean's Student-t 95%
  interval over pairs (:func:`lvsearch.stats.t_interval`);
* **agreement**: how many pairs the two sides order the same way.

Nothing is trained; it reads run folders (``config.json`` for the architecture and recipe,
``mlm.json`` for the accuracy). Bad input (a run folder without its files, a pair that is not
one slot flip apart, pairs trained with another recipe or seed, an original missing from
``--flips``) is one message and exit status 2 before anything is written.

Output: ``benchmarks/results/<--name>.json`` (``pairs``, ``standalone``, ``agreement``,
``units``).

Usage::

    python benchmarks/slot_flip_retrained.py --flips benchmarks/results/slot_flip_12.json \\
        --pair W6/runs/ea-s0 FLIP/runs/ea-s0-dc1 --pair W6/runs/ea-s1 FLIP/runs/ea-s1-dc1 \\
        [--name slot_flip_12_retrained]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from _common import machine, result_path, run_main, write_result

#: The start of the result's ``what``: how a re-run recognises its own output (``--name``).
WHAT = "retrained slot flips"
UNITS = {"supernet_difference": "nats: −loss of the flipped architecture − the original's, on the supernet",
         "standalone_difference": "fraction: MLM dev accuracy of the flipped run − the original run (0.01 = 1 pp)"}


def load_run(folder: Path) -> dict:
    """A retrain run folder's architecture, recipe (``config.json``'s ``config`` without the
    space's name), MLM dev accuracy and its neighbour-count floor on the same dev targets (a
    fraction; None when the evaluation has no floor).

    Raises:
        LvsearchError: ``config.json`` or ``mlm.json`` missing or unreadable.
    """
    from lvsearch.arch import Arch
    from lvsearch.errors import LvsearchError

    try:
        cfg = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        mlm = json.loads((folder / "mlm.json").read_text(encoding="utf-8"))
        arch = Arch.from_dict(cfg["arch"], source=folder / "config.json")
        acc = float(mlm["mlm"]["accuracy"])
        floor = mlm["mlm"].get("floors", {}).get("neighbour-count", {}).get("accuracy")
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise LvsearchError(f"--pair {folder}: not a finished retrain run with an evaluation "
                            f"(config.json and mlm.json; {type(e).__name__})",
                            fix="pass the --out folder of `lvsearch retrain` after `lvsearch evaluate --out FOLDER/mlm.json`"
                            ) from None
    # the recipe without its space name, which a run may spell as "lvbert-elc" or "lvbert-elc@12";
    # the architectures' slot counts are compared on their own
    recipe = {k: v for k, v in (cfg.get("config") or {}).items() if k != "space"}
    return {"folder": str(folder), "arch": arch, "recipe": recipe, "accuracy": acc, "floor": floor,
            "dev_sequences": mlm["mlm"].get("dev_settings", {}).get("num_sequences")}


def flip_pair(orig: dict, flip: dict, rows_by_key: dict, slot: int) -> dict:
    """One pair: the flipped slot (1-based), its two ops, the supernet's paired difference and
    the standalone difference.

    Raises:
        LvsearchError: the two are not one flip of ``slot`` (1-based, the slot the flips result
            scored) apart, differ in recipe or dev set, or the original is not a row of the
            flips result.
    """
    from lvsearch.errors import LvsearchError

    a, b = orig["arch"], flip["arch"]
    where = [n for n in range(1, min(a.num_slots, b.num_slots) + 1) if a.slot_code(n) != b.slot_code(n)]
    if a.num_slots != b.num_slots or list(a.inputs) != list(b.inputs) or len(where) != 1:
        raise LvsearchError(f"--pair {orig['folder']} {flip['folder']}: not one slot flip apart "
                            "(the same inputs and every op but one equal)",
                            fix="pass the original run and its run with one slot's op changed")
    if orig["recipe"] != flip["recipe"] or orig["dev_sequences"] != flip["dev_sequences"]:
        raise LvsearchError(f"--pair {orig['folder']} {flip['folder']}: trained or evaluated with other settings "
                            "(config.json's recipe, seed included, or mlm.json's dev sequences differ)",
                            fix="retrain the flip with the original's recipe and seed and evaluate it on as many dev sequences")
    row = rows_by_key.get(a.key)
    if row is None:
        raise LvsearchError(f"--pair {orig['folder']}: its architecture is not a row of --flips",
                            fix="pass the slot_flip.py result that scored this architecture")
    own, new = a.slot_code(where[0]), b.slot_code(where[0])
    if where[0] != slot or own not in row["fitness"] or new not in row["fitness"]:
        raise LvsearchError(f"--pair {orig['folder']} {flip['folder']}: they differ in slot {where[0]} ({own} → {new}); "
                            f"--flips scored slot {slot} with {', '.join(sorted(row['fitness']))}",
                            fix="pass the slot_flip.py result of the flipped slot")
    return {"original": orig["folder"], "flipped": flip["folder"], "compact": a.compact, "slot": where[0],
            "own_op": own, "flipped_op": new, "supernet_difference": row["fitness"][new] - row["fitness"][own],
            "original_accuracy": orig["accuracy"], "flipped_accuracy": flip["accuracy"],
            "original_floor": orig["floor"], "flipped_floor": flip["floor"],
            "standalone_difference": flip["accuracy"] - orig["accuracy"]}


def summarise(pairs: list[dict]) -> dict:
    """Mean standalone difference with its t 95% interval, and how many pairs the supernet
    orders the same way as standalone training."""
    from lvsearch.stats import t_interval

    d = [p["standalone_difference"] for p in pairs]
    ci = t_interval(d)
    same = sum((p["supernet_difference"] > 0) == (p["standalone_difference"] > 0) for p in pairs
               if p["supernet_difference"] != 0 and p["standalone_difference"] != 0)
    return {"standalone": {"n": len(d), "mean": sum(d) / len(d), "t95": list(ci) if ci else None,
                           "flip_better": sum(x > 0 for x in d)},
            "agreement": {"same_order": same, "of": len(pairs)}}


def main() -> None:
    from lvsearch.errors import LvsearchError

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--flips", type=Path, required=True, help="a slot_flip.py result (benchmarks/results/*.json)")
    p.add_argument("--pair", nargs=2, action="append", type=Path, metavar=("ORIGINAL", "FLIPPED"), required=True,
                   help="two retrain run folders: an architecture and the same with one slot's op changed")
    p.add_argument("--name", default="slot_flip_retrained", help="benchmarks/results/NAME.json")
    args = p.parse_args()
    out = result_path(args.name, own=lambda d: str(d.get("what", "")).startswith(WHAT))
    try:
        text = args.flips.read_bytes()
    except OSError as e:
        raise LvsearchError(f"--flips {args.flips} cannot be read ({getattr(e, 'strerror', None) or e.__class__.__name__})",
                            fix="pass a benchmarks/results/slot_flip*.json that exists") from None
    try:
        flips = json.loads(text)
        rows, slot = flips["rows"], int(flips["slot"])
    except (ValueError, KeyError, TypeError):  # UnicodeDecodeError is a ValueError
        raise LvsearchError(f"--flips {args.flips}: not a slot_flip.py result (no rows)",
                            fix="pass a benchmarks/results/slot_flip*.json") from None
    by_key = {r["key"]: r for r in rows}  # slot_flip.py's rows carry Arch.key
    pairs = [flip_pair(load_run(a), load_run(b), by_key, slot) for a, b in args.pair]
    result = {"what": f"{WHAT}: supernet flip preference against standalone retraining "
                      "(benchmarks/slot_flip_retrained.py)",
              "flips": str(args.flips), "units": UNITS, "pairs": pairs, **summarise(pairs), "machine": machine()}
    print(write_result(out.stem, result))
    s = result["standalone"]
    print(f"{s['n']} pairs: flipped - original {s['mean'] * 100:+.2f} pp; the supernet orders "
          f"{result['agreement']['same_order']} of {result['agreement']['of']} as standalone training does")


if __name__ == "__main__":
    run_main(main)
