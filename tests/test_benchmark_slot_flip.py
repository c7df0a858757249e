"""The slot-flip benchmark (benchmarks/slot_flip.py): its flips and statistics (nothing trained), and
runs and bad input on a tiny supernet."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from test_reliability import SEARCH_ARGS, SN_SETS, _sets

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
REPO = BENCHMARKS.parent


@pytest.fixture()
def slot_flip(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import slot_flip

    return slot_flip


def test_a_flip_changes_one_slot_and_keeps_the_inputs(slot_flip):
    from lvsearch.arch import Arch

    a = Arch("s(h4)cf", ((0,), (0, 1), (1, 2)))
    f = slot_flip.flips(a, 1, ["SA", "FF", "DC"])
    assert f["SA"] == a  # its own op: the architecture itself, variant kept
    assert f["DC"].compact == "cc" + "f" and f["FF"].compact == "fcf"
    assert all(v.inputs == a.inputs and v.ops[1:] == a.ops[1:] for v in f.values())


def test_paired_and_standalone_differences(slot_flip):
    rows = [{"fitness": {"SA": -5.0 + d, "DC": -5.0}} for d in (0.019, 0.02, 0.021)]
    p = slot_flip.paired(rows, "SA", "DC")
    assert p["mean"] == pytest.approx(0.02) and p["a_better"] == 3 and p["ci95"][0] > 0
    assert slot_flip.paired(rows[:1], "SA", "DC") is None
    land = {"archs": [{"name": "bert", "key": "cc|0;1", "accuracy_mean": 0.9},
                      {"name": "r1", "key": "cs|0;1", "accuracy_mean": 0.30},
                      {"name": "r2", "key": "cf|0;0,1", "accuracy_mean": 0.32},
                      {"name": "r3", "key": "sc|0;1", "accuracy_mean": 0.26},
                      {"name": "r4", "key": "sf|0;1", "accuracy_mean": 0.28}]}
    g = slot_flip.standalone_groups(land, 1, ["SA", "DC"])
    assert g["groups"]["DC"] == {"n": 2, "mean": pytest.approx(0.31)}  # bert (a fixed order) left out
    assert g["differences"]["SA-DC"]["mean"] == pytest.approx(-0.04)


# ------------------------------------------------------------------ runs on a tiny supernet


@pytest.fixture(scope="module")
def flip_ws(prepared_corpus: Path, tmp_path_factory) -> dict[str, Path]:
    """A tiny 4-slot supernet, one ``evolve --compare-random`` over it, and architecture and
    landscape files of other spaces."""
    from lvsearch.arch import Arch
    from lvsearch.cli import main

    w = tmp_path_factory.mktemp("flip")
    sn, search = w / "sn", w / "search"
    assert main(["train-supernet", "--config", "quickstart", "--data", str(prepared_corpus), "--out", str(sn),
                 *_sets(SN_SETS)]) == 0
    assert main(["evolve", "--supernet", str(sn), "--out", str(search), "--compare-random", *SEARCH_ARGS]) == 0
    Arch.sequential("sf" * 6).to_json(w / "pick12.json", space="lvbert-elc")
    Arch.sequential("s(h2)fsf").to_json(w / "pick_elastic.json", space="lvbert-elastic")
    land = {"settings": {"space": "lvbert-elc@4"},
            "archs": [{"name": n, "key": Arch.sequential(ops).key, "accuracy_mean": a} for n, ops, a in
                      (("bert", "sfsf", 0.9), ("r1", "cfsf", 0.31), ("r2", "cssf", 0.33), ("r3", "sfcf", 0.25),
                       ("r4", "scsf", 0.27), ("r5", "fcsf", 0.28), ("r6", "ffsf", 0.26))]}
    (w / "land4.json").write_text(json.dumps(land))
    (w / "not_json.json").write_text("{not json")
    return {"W": w, "CORPUS": prepared_corpus, "SN": sn, "SEARCH": search}


FLIP_CASES = [  # (id, argv, text of the one message)
    ("pick-other-slot-count", "--supernet {SN} --picks {W}/pick12.json --random 0",
     "{W}/pick12.json has 12 slots"),
    ("pick-other-space", "--supernet {SN} --picks {W}/pick_elastic.json --random 0", "heads 2"),
    ("pick-missing", "--supernet {SN} --picks {W}/nope.json --random 0", "not found: {W}/nope.json"),
    ("supernet-missing", "--supernet {W}/nosn --random 1", "{W}/nosn holds no run"),
    ("slot-past-the-space", "--supernet {SN} --random 1 --slot 5", "--slot 5: the space of {SN} has slots 1..4"),
    ("slot-zero", "--supernet {SN} --random 1 --slot 0", "argument --slot: '0' must be ≥ 1"),
    ("random-negative", "--supernet {SN} --random -2", "argument --random"),
    ("no-architectures", "--supernet {SN} --random 0", "no architectures"),
    ("landscape-missing", "--supernet {SN} --random 1 --landscape {W}/noland.json", "not found: {W}/noland.json"),
    ("landscape-not-json", "--supernet {SN} --random 1 --landscape {W}/not_json.json", "{W}/not_json.json"),
    ("landscape-other-space", "--supernet {SN} --random 1 --landscape " + str(REPO / "benchmarks/results/landscape.json"),
     "was measured on lvbert-elc@12, not on the supernet's lvbert-elc@4"),
    ("name-of-another-result", "--supernet {SN} --random 1 --name landscape",
     "landscape.json exists and is not this benchmark's output"),
    ("name-with-a-folder", "--supernet {SN} --random 1 --name ../x", "is not a result name"),
    ("data-missing", "--supernet {SN} --random 1 --data {W}/nodata",  # said "recorded in config.json"
     "data folder {W}/nodata not found"),
]


@pytest.mark.parametrize("case", FLIP_CASES, ids=[c[0] for c in FLIP_CASES])
def test_bad_input_is_one_message_exit_2_nothing_written(flip_ws, case):
    from benchmark_cli import assert_benchmark_refuses

    _, argv, expect = case
    assert_benchmark_refuses("slot_flip.py", ["--data", str(flip_ws["CORPUS"]), "--dev-sequences", "8",
                                              *[a.format(**flip_ws) for a in argv.split()]],
                             expect.format(**flip_ws), {"W": flip_ws["W"], "RESULTS": BENCHMARKS / "results"})


def test_a_run_scores_each_architecture_once_and_replaces_only_its_own_output(flip_ws, monkeypatch, tmp_path, capsys):
    """Picks (one given twice) and draws, the standalone side from a landscape of the same
    space, the units in the result; a re-run replaces its own output."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import _common
    import slot_flip

    monkeypatch.setattr(_common, "RESULTS", tmp_path)
    s = flip_ws["SEARCH"]
    argv = ["slot_flip.py", "--supernet", str(flip_ws["SN"]), "--data", str(flip_ws["CORPUS"]), "--dev-sequences", "8",
            "--picks", str(s / "best.json"), str(s / "random" / "best.json"), str(s / "best.json"), "--random", "2",
            "--landscape", str(flip_ws["W"] / "land4.json"), "--name", "flip"]
    for _ in range(2):
        monkeypatch.setattr(sys, "argv", argv)
        slot_flip.main()
    out = capsys.readouterr().out
    assert f"{s / 'best.json'}: the same architecture as {s / 'best.json'}; counted once" in out
    res = json.loads((tmp_path / "flip.json").read_text())
    keys = [r["key"] for r in res["rows"]]
    assert len(keys) == len(set(keys)) and [r["source"] for r in res["rows"]].count("random") == 2
    assert res["units"] == slot_flip.UNITS and res["what"].startswith(slot_flip.WHAT)
    row = res["rows"][0]
    assert set(row["fitness"]) == {"SA", "FF", "DC"} and all(v < 0 for v in row["fitness"].values())  # −loss, nats
    groups = res["standalone_side"]["groups"]  # bert left out; r1, r2 start with DC
    assert groups["DC"] == {"n": 2, "mean": pytest.approx(0.32)} and groups["SA"]["n"] == 2
    assert res["standalone_side"]["differences"]["SA-DC"]["mean"] == pytest.approx(0.26 - 0.32)
