"""Retrained slot flips (benchmarks/slot_flip_retrained.py): pairs of run folders against a
slot_flip.py result (nothing trained; the run folders are written here as retrain and
evaluate write them)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
RESULTS = BENCHMARKS / "results"
INPUTS = [[0], [0, 1], [1, 2], [0, 2, 3]]
RECIPE = {"space": "lvbert-elc", "num_slots": 4, "train": {"seed": 0, "steps": 2000}}


def run_folder(path: Path, ops: str, acc: float, *, recipe=RECIPE, space="lvbert-elc", dev=512) -> Path:
    path.mkdir(parents=True)
    arch = {"format": "lvsearch.arch/v1", "ops": ops, "inputs": INPUTS, "num_slots": len(ops)}
    (path / "config.json").write_text(json.dumps({"arch": arch, "config": {**recipe, "space": space}}))
    (path / "mlm.json").write_text(json.dumps({"mlm": {"accuracy": acc, "dev_settings": {"num_sequences": dev}}}))
    return path


def flips_file(path: Path, fitness: dict[str, dict[str, float]], slot: int = 1) -> Path:
    from lvsearch.arch import Arch

    rows = []
    for ops, fit in fitness.items():
        a = Arch.from_dict({"format": "lvsearch.arch/v1", "ops": ops, "inputs": INPUTS, "num_slots": len(ops)})
        rows.append({"key": a.key, "compact": a.compact, "fitness": fit})
    path.write_text(json.dumps({"what": "paired op flips of slot 1", "slot": slot, "rows": rows}))
    return path


def test_pairs_report_both_sides_and_their_agreement(tmp_path, monkeypatch):
    """Each pair: the flipped slot and ops, the supernet's fitness(flipped) − fitness(own) from
    the original's row, the standalone accuracy difference; the mean with its t interval over
    pairs, and the pairs both sides order alike. A run spelling its space "lvbert-elc@4" is the
    same recipe."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import slot_flip_retrained as sfr
    from scipy import stats

    flips = json.loads(flips_file(tmp_path / "flips.json", {
        "scfs": {"SA": -5.00, "DC": -5.01, "FF": -5.03},
        "fcsf": {"SA": -5.02, "DC": -5.00, "FF": -5.04},
        "sfcc": {"SA": -5.00, "DC": -5.004, "FF": -5.05}}).read_text())
    by_key = {r["key"]: r for r in flips["rows"]}
    runs = [(run_folder(tmp_path / "a", "scfs", 0.292, space="lvbert-elc@4"), run_folder(tmp_path / "a1", "ccfs", 0.286)),
            (run_folder(tmp_path / "b", "fcsf", 0.280), run_folder(tmp_path / "b1", "ccsf", 0.290)),
            (run_folder(tmp_path / "c", "sfcc", 0.288), run_folder(tmp_path / "c1", "cfcc", 0.291))]
    pairs = [sfr.flip_pair(sfr.load_run(a), sfr.load_run(b), by_key, 1) for a, b in runs]
    assert [(p["slot"], p["own_op"], p["flipped_op"]) for p in pairs] == [(1, "SA", "DC"), (1, "FF", "DC"), (1, "SA", "DC")]
    assert [p["supernet_difference"] for p in pairs] == pytest.approx([-0.01, 0.04, -0.004])
    d = [-0.006, 0.010, 0.003]
    assert [p["standalone_difference"] for p in pairs] == pytest.approx(d)
    s = sfr.summarise(pairs)
    t = stats.ttest_1samp(d, 0).confidence_interval(0.95)
    assert s["standalone"]["t95"] == pytest.approx([t.low, t.high])
    assert s["standalone"]["flip_better"] == 2 and s["agreement"] == {"same_order": 2, "of": 3}


CASES = [  # (id, original, flipped, text of the one message)
    ("two-slots-apart", "a", "far", "not one slot flip apart"),
    ("other-slot", "a", "slot2", "they differ in slot 2"),
    ("other-seed", "a", "seed1", "trained or evaluated with other settings"),
    ("other-dev-set", "a", "dev128", "trained or evaluated with other settings"),
    ("not-evaluated", "a", "noeval", "not a finished retrain run with an evaluation"),
    ("not-in-flips", "unscored", "unscored1", "its architecture is not a row of --flips"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_message_exit_2_nothing_written(tmp_path, case):
    from benchmark_cli import assert_benchmark_refuses

    w = tmp_path
    flips_file(w / "flips.json", {"scfs": {"SA": -5.0, "DC": -5.01, "FF": -5.03}})
    run_folder(w / "a", "scfs", 0.29)
    run_folder(w / "far", "ccff", 0.29)
    run_folder(w / "slot2", "sffs", 0.29)
    run_folder(w / "seed1", "ccfs", 0.29, recipe={**RECIPE, "train": {"seed": 1, "steps": 2000}})
    run_folder(w / "dev128", "ccfs", 0.29, dev=128)
    (run_folder(w / "noeval", "ccfs", 0.29) / "mlm.json").unlink()
    run_folder(w / "unscored", "ffff", 0.29)
    run_folder(w / "unscored1", "cfff", 0.29)
    assert_benchmark_refuses("slot_flip_retrained.py",
                             ["--flips", str(w / "flips.json"), "--pair", str(w / case[1]), str(w / case[2]),
                              "--name", "slot_flip_retrained_test_never"], case[3], {"W": w, "RESULTS": RESULTS})


def test_a_name_of_another_benchmarks_result_is_refused(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(BENCHMARKS.parent), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, str(BENCHMARKS / "slot_flip_retrained.py"), "--flips", str(tmp_path / "f.json"),
                           "--pair", str(tmp_path), str(tmp_path), "--name", "slot_flip_12"],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 2 and "is not this benchmark's output" in proc.stderr, proc.stderr


def test_flips_that_cannot_be_read_are_named_as_such(tmp_path):
    """A missing --flips said "not a slot_flip.py result (no rows)"; it now says it cannot be read."""
    from benchmark_cli import assert_benchmark_refuses

    run_folder(tmp_path / "a", "scfs", 0.29)
    run_folder(tmp_path / "b", "ccfs", 0.29)
    assert_benchmark_refuses("slot_flip_retrained.py",
                             ["--flips", str(tmp_path / "nope.json"), "--pair", str(tmp_path / "a"), str(tmp_path / "b"),
                              "--name", "slot_flip_retrained_test_never"],
                             f"--flips {tmp_path / 'nope.json'} cannot be read (No such file or directory)",
                             {"W": tmp_path, "RESULTS": RESULTS})
