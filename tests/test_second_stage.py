"""The search's second stage: fresh dev targets disjoint from the search's, the same compute for
the EA and its random-search control, the pick = the best re-ranked score, resume keeps finished
work, bad switches refused — on a tiny supernet trained on the real shared corpus."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from lvsearch.arch import Arch
from lvsearch.cli import main
from lvsearch.data.loader import fixed_dev_set, held_out_dev_set
from lvsearch.data.shards import PreparedData
from lvsearch.errors import LvsearchError
from lvsearch.search.evaluator import SupernetEvaluator
from lvsearch.search.second_stage import SecondStage
from lvsearch.train.supernet import load_supernet, train_supernet

TINY = [
    "space=lvbert-elc", "num_slots=4", "model.hidden=32", "model.embedding=16", "model.ff_inner=64",
    "model.heads=2", "model.conv_kernel=3", "train.seq_len=32", "train.batch_size=8", "train.steps=12",
    "train.warmup_steps=2", "train.log_every=10", "train.eval_every=0", "train.checkpoint_every=12",
    "eval.dev_sequences=16", "eval.panel=[bert]",
]


@pytest.fixture(scope="module")
def supernet_run(prepared_corpus: Path, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("second_stage") / "sn"
    train_supernet("quickstart", prepared_corpus, out, overrides=TINY, show_progress=False)
    return out


def _rows(dev) -> set[tuple[int, ...]]:
    return {tuple(r.tolist()) for r in dev.original_ids}


def test_held_out_dev_set_is_disjoint_from_the_search_set_and_refuses_when_nothing_is_left(prepared_corpus: Path):
    data = PreparedData.open(prepared_corpus)
    total = len(data.sequences("dev", 32))
    search = fixed_dev_set(data, num_sequences=10, seq_len=32, seed=7)
    fresh = held_out_dev_set(data, exclude_sequences=10, seq_len=32, seed=7)
    assert len(fresh) == total - 10
    assert not _rows(search) & _rows(fresh)
    # every dev row is in exactly one of the two (duplicates in the text aside)
    whole = fixed_dev_set(data, num_sequences=None, seq_len=32, seed=7)
    assert _rows(search) | _rows(fresh) == _rows(whole)
    few = held_out_dev_set(data, exclude_sequences=10, num_sequences=5, seq_len=32, seed=7)
    assert len(few) == 5 and _rows(few) <= _rows(fresh)
    with pytest.raises(LvsearchError, match="none is left"):
        held_out_dev_set(data, exclude_sequences=None, seq_len=32, seed=7)


def test_second_stage_settings_are_checked():
    for bad in (dict(method="best"), dict(method="finetune", k=0), dict(method="finetune", steps=0),
                dict(method="rescore", dev_sequences=0)):
        with pytest.raises(LvsearchError):
            SecondStage(**bad)
    assert not SecondStage().enabled and SecondStage("rescore").enabled


def _evolve(run: Path, out: Path, *extra: str) -> int:
    return main(["evolve", "--supernet", str(run), "--out", str(out), "--population", "6", "--iterations", "2",
                 "--topk", "3", "--dev-sequences", "12", "--racing", "off", "--compare-random", *extra])


def test_finetune_stage_gives_both_searches_the_same_compute_and_picks_the_best_score(supernet_run: Path, tmp_path: Path,
                                                                                      capsys):
    out = tmp_path / "ea"
    assert _evolve(supernet_run, out, "--second-stage", "finetune", "--second-stage-steps", "2") == 0
    recs = {name: json.loads((out / sub / "second_stage.json").read_text())
            for name, sub in (("evolution", "."), ("random", "random"))}
    ea, rnd = recs["evolution"], recs["random"]
    for key in ("method", "k", "steps", "optimizer_steps", "tokens", "dev_sequences", "targets", "settings"):
        assert ea[key] == rnd[key], key  # the same compute, on the same fresh targets
    assert ea["k"] == 3 and ea["optimizer_steps"] == 3 * 2
    for rec, folder in ((ea, out), (rnd, out / "random")):
        topk = json.loads((folder / "topk.json").read_text())["topk"]
        assert rec["candidates"] == [r["key"] for r in topk][:3]
        best = max(rec["rows"], key=lambda r: r["score"])
        assert rec["pick"] == best["key"] and best["score"] == -best["loss"]  # the default fitness is −loss
        picked = json.loads((folder / "best.json").read_text())
        assert Arch.from_json(folder / "best.json").key == rec["pick"]
        assert picked["meta"]["second_stage"]["loss"] == best["loss"]
        assert picked["meta"]["second_stage"]["search_rank"] == rec["candidates"].index(rec["pick"]) + 1
        for i in range(3):  # one short run per candidate, 2 steps each
            summary = json.loads((folder / "second_stage" / f"{i:02d}" / "summary.json").read_text())
            assert summary["arch"] == rec["candidates"][i] and summary["steps"] == 2
    # a resume of the finished search keeps the stage: nothing is trained again
    stamp = (out / "second_stage" / "00" / "summary.json").stat().st_mtime_ns
    assert _evolve(supernet_run, out, "--second-stage", "finetune", "--second-stage-steps", "2", "--resume") == 0
    assert (out / "second_stage" / "00" / "summary.json").stat().st_mtime_ns == stamp
    assert json.loads((out / "second_stage.json").read_text())["rows"] == ea["rows"]
    # a resume that asks for another second stage (or none) is refused before anything changes
    before = {p: p.read_bytes() for p in out.rglob("*.json")}
    for other in (["--second-stage", "rescore"], ["--second-stage", "finetune", "--second-stage-steps", "3"], []):
        assert _evolve(supernet_run, out, *other, "--resume") == 2
    assert {p: p.read_bytes() for p in out.rglob("*.json")} == before

    # an edited record (its pick no candidate, its rows gone, a field of the wrong type) is one
    # message naming the file and the field (was a StopIteration traceback)
    record = out / "second_stage.json"
    for edit, expect in ((lambda r: r.update(pick="sfsf|0;1;2;3"), "field pick 'sfsf|0;1;2;3' is not one of its candidates"),
                         (lambda r: r.update(rows=[]), "field rows has no row for the pick"),
                         (lambda r: r.pop("rows"), "field rows is missing"),
                         (lambda r: r.update(rows=[{"key": 5}]), "field rows.0.key: input should be a valid string")):
        rec = dict(ea)
        edit(rec)
        record.write_text(json.dumps(rec))
        shutil.copy(record, tmp_path / "edited.json")
        assert _evolve(supernet_run, out, "--second-stage", "finetune", "--second-stage-steps", "2", "--resume") == 2
        err = capsys.readouterr().err
        assert f"second stage record {record} is malformed: {expect}" in " ".join(err.split()), err
        assert "Traceback" not in err and record.read_bytes() == (tmp_path / "edited.json").read_bytes()


def test_rescore_stage_equals_the_supernet_score_on_the_fresh_targets(supernet_run: Path, prepared_corpus: Path,
                                                                      tmp_path: Path):
    out = tmp_path / "ea"
    assert _evolve(supernet_run, out, "--second-stage", "rescore", "--second-stage-dev", "20") == 0
    rec = json.loads((out / "second_stage.json").read_text())
    assert rec["optimizer_steps"] == 0 and rec["dev_sequences"] == 20
    loaded = load_supernet(supernet_run)
    fresh = held_out_dev_set(PreparedData.open(prepared_corpus), exclude_sequences=12, num_sequences=20,
                             seq_len=32, seed=loaded.config.eval.seed)
    assert rec["targets"] == int((fresh.labels != -100).sum())
    ev = SupernetEvaluator(loaded.supernet, fresh, seq_len=32, fitness="loss")
    want = {r.key: r for r in ev.evaluate_many([Arch.from_key(k) for k in rec["candidates"]])}
    for row in rec["rows"]:
        assert torch.isclose(torch.tensor(row["loss"]), torch.tensor(want[row["key"]].loss), rtol=1e-6)


def test_bad_second_stage_switches_exit_2(supernet_run: Path, tmp_path: Path, capsys):
    for extra in (["--second-stage", "finetune", "--second-stage-k", "4"],   # above --topk 3
                  ["--second-stage", "finetune", "--second-stage-steps", "0"],
                  ["--second-stage", "rescore", "--second-stage-dev", "0"],
                  ["--second-stage", "rescore", "--second-stage-dev", "100000"],  # above what the fitness leaves
                  ["--second-stage", "rescore", "--dev-sequences", "all"],      # nothing left: refused up front
                  ["--second-stage-k", "2"], ["--second-stage-steps", "5"]):    # switches of a stage not asked for
        out = tmp_path / "bad"
        assert _evolve(supernet_run, out, *extra) == 2
        err = capsys.readouterr().err
        assert "second-stage" in err and "Traceback" not in err
        assert not (out / "state.json").exists()
