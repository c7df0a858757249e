"""``lvsearch faster`` at tiny sizes on the shared corpus: search → picks → retrain → evaluate →
end-to-end timing → report, resumed without redoing work, and its refusals before any work."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lvsearch.errors import LvsearchError
from test_latency import run, table_path  # noqa: F401  (module fixtures: a tiny supernet and its table)

#: The tiny supernet's width (test_latency.TINY), so the retrained models are the timed graphs.
TINY_RETRAIN = ["model.hidden=32", "model.embedding=16", "model.ff_inner=64", "model.heads=2", "train.seq_len=32",
                "train.batch_size=8", "train.warmup_steps=1", "train.eval_every=0", "train.checkpoint_every=3",
                "eval.dev_sequences=16"]


def settings(run, table_path, prepared_corpus, **kw):  # noqa: F811
    from lvsearch.faster.job import FasterSettings

    base = dict(supernet=str(run), table=str(table_path), data=str(prepared_corpus), population=4, iterations=2,
                dev_sequences=16, steps=3, overrides=list(TINY_RETRAIN), eval_dev_sequences=16, rounds=2,
                device="cpu")
    base.update(kw)
    return FasterSettings(**base)


@pytest.fixture(scope="module")
def finished(run, table_path, prepared_corpus, tmp_path_factory):  # noqa: F811
    from lvsearch.faster.job import run_faster

    out = tmp_path_factory.mktemp("faster") / "out"
    s = settings(run, table_path, prepared_corpus)
    return out, s, run_faster(out, s, show_progress=False)


def test_every_stage_writes_its_files_and_the_models_are_the_picks(finished):
    from lvsearch.arch import Arch

    out, s, summary = finished
    state = json.loads((out / "faster.json").read_text())
    assert sorted(n for n, st in state["stages"].items() if st["status"] == "done") == \
        sorted(["search", "retrain", "evaluate", "latency", "report"])
    for arm, pick in (("nsga2", out / "search" / "pick.json"), ("random", out / "search" / "random" / "pick.json")):
        key = Arch.from_json(pick).key
        assert summary["models"][arm]["arch"] == key
        if "same_as" not in summary["models"][arm]:
            trained = json.loads((out / "retrain" / arm / "model" / "config.json").read_text())["arch"]
            assert Arch.from_dict(trained).key == key
    lat = json.loads((out / "latency.json").read_text())
    assert lat["batch"] == 2 and lat["threads"] == 1  # the table's settings (test_latency.FAST)
    for name, m in lat["models"].items():
        assert len(m["rounds_ms"]) == 2 and m["measured_ms"] > 0 and m["predicted_ms"] > 0
        assert min(m["rounds_ms"]) <= m["measured_ms"] <= max(m["rounds_ms"])
    v = summary["nsga2_vs_random"]
    r = summary["models"]
    assert v["latency_reduction"] == pytest.approx(1 - r["nsga2"]["measured_ms"] / r["random"]["measured_ms"])
    assert v["accuracy_difference_pp"] == pytest.approx(100 * (r["nsga2"]["mlm_accuracy"] - r["random"]["mlm_accuracy"]))
    assert summary["nsga2_vs_reference"] is not None and "reference" in r
    text = (out / "report.md").read_text()
    assert "NSGA-II's pick against random search's pick" in text and "## Evaluation" in text
    assert "one pretraining seed" in text.lower()
    assert "`retrain-quickstart`, 3 steps, --set model.hidden=32" in text  # the recipe as run
    for name, m in lat["models"].items():  # the rounds' range, per model
        assert summary["models"][name]["rounds_ms"] == [min(m["rounds_ms"]), max(m["rounds_ms"])]
    a, b = lat["models"]["nsga2"]["rounds_ms"], lat["models"].get("random", lat["models"]["nsga2"])["rounds_ms"]
    overlap = max(min(a), min(b)) <= min(max(a), max(b))
    assert v["latency_rounds_overlap"] is overlap
    assert ("within timing noise" if overlap else "outside the rounds' spread") in text
    below = [n for n, r in summary["models"].items() if r["beats_floor"] is False and not r.get("same_as")]
    assert ("**Warning:**" in text) == bool(below)  # 3 steps: below the floor, and the report says so
    assert summary["retrain"] == {"recipe": "retrain-quickstart", "steps": 3, "overrides": TINY_RETRAIN}


def test_latency_words_say_whether_the_rounds_overlap():
    from lvsearch.faster.job import latency_words, rounds_overlap

    assert rounds_overlap([10.0, 12.0], [11.0, 13.0]) is True
    assert rounds_overlap([10.0, 10.5], [11.0, 13.0]) is False
    assert rounds_overlap([10.0], [11.0]) is None
    assert latency_words(0.241) == "24.1% less latency"
    assert latency_words(-0.05, True) == "5.0% more latency, within timing noise (the rounds overlap)"
    assert latency_words(0.2, False) == "20.0% less latency, outside the rounds' spread"


def test_no_pick_names_the_best_fitness_reached(finished, tmp_path):
    """A --pick-fitness-at above every candidate: the message gives the best fitness reached and
    what fitness is, so the user can choose a reachable one."""
    import shutil
    from dataclasses import replace

    from lvsearch.faster.job import Faster, pick_file

    out, s, _ = finished
    copy = tmp_path / "copy"
    shutil.copytree(out / "search", copy / "search")
    (copy / "search" / "random" / "pick.json").unlink()
    best = json.loads((copy / "search" / "random" / "topk.json").read_text())["topk"][0]["fitness"]
    f = Faster(copy, replace(s, pick_fitness_at=1.0), {})
    with pytest.raises(LvsearchError) as e:
        pick_file(f, "random")
    assert f"--pick-fitness-at 1) ; its best candidate reached {best:.4f}".replace(") ;", ");") in str(e.value)
    assert "higher is better" in str(e.value) and f"--pick-fitness-at {best:.4f} or lower" in e.value.fix


def test_a_finished_run_is_not_redone(finished, monkeypatch):
    import lvsearch.train.retrain as retrain_mod
    from lvsearch.faster import job

    out, s, summary = finished
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()}

    def boom(*a, **k):
        raise AssertionError("retrained again")

    monkeypatch.setattr(retrain_mod, "retrain", boom)
    monkeypatch.setattr(job, "stage_search", boom)
    assert job.run_faster(out, s, show_progress=False) == summary
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()} == before


def test_a_stopped_run_continues_from_the_next_stage(finished, run, table_path, prepared_corpus, tmp_path, monkeypatch):  # noqa: F811
    """The state records finished stages: with the report stage lost, a re-run redoes only that."""
    from lvsearch.faster import job

    out, s, _ = finished
    copy = tmp_path / "copy"
    import shutil

    shutil.copytree(out, copy)
    state = json.loads((copy / "faster.json").read_text())
    del state["stages"]["report"]
    (copy / "faster.json").write_text(json.dumps(state))
    (copy / "report.md").unlink()
    for name in ("stage_search", "stage_retrain", "stage_evaluate", "stage_latency"):
        monkeypatch.setattr(job, name, lambda *a, **k: (_ for _ in ()).throw(AssertionError("redone")))
    job.run_faster(copy, s, show_progress=False)
    assert (copy / "report.md").is_file()


def test_other_settings_are_refused_naming_them(finished):
    from dataclasses import replace

    from lvsearch.faster.job import run_faster

    out, s, _ = finished
    with pytest.raises(LvsearchError, match="population"):
        run_faster(out, replace(s, population=6), show_progress=False)


def test_a_recipe_of_another_width_is_refused_before_anything_is_written(run, table_path, prepared_corpus, tmp_path):  # noqa: F811
    from lvsearch.faster.job import run_faster

    out = tmp_path / "out"
    s = settings(run, table_path, prepared_corpus, overrides=[])  # retrain-quickstart: hidden 128, supernet 32
    with pytest.raises(LvsearchError, match=r"model\.hidden: supernet 32, recipe 128"):
        run_faster(out, s, show_progress=False)
    assert not out.exists()


def test_cli_bad_inputs_give_one_message_and_exit_2(run, prepared_corpus, tmp_path, capsys):  # noqa: F811
    from lvsearch.cli import main

    missing = tmp_path / "nope.json"
    base = ["faster", "--supernet", str(run), "--data", str(prepared_corpus), "--out", str(tmp_path / "o")]
    assert main(base + ["--table", str(missing)]) == 2
    err = capsys.readouterr().err
    assert str(missing) in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()
    with pytest.raises(SystemExit) as e:
        main(base + ["--table", str(missing), "--sparse-init", "1.5"])
    assert e.value.code == 2



def test_cli_refuses_a_folder_of_other_files_and_keeps_them(run, table_path, prepared_corpus, tmp_path, capsys):  # noqa: F811
    from lvsearch.cli import main

    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "mine.txt").write_text("keep")
    argv = ["faster", "--supernet", str(run), "--table", str(table_path), "--data", str(prepared_corpus),
            "--out", str(notes)] + [x for kv in TINY_RETRAIN for x in ("--set", kv)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "not empty and holds no lvsearch faster run" in err and "Traceback" not in err
    assert sorted(p.name for p in notes.iterdir()) == ["mine.txt"] and (notes / "mine.txt").read_text() == "keep"


def test_cli_on_the_finished_folder_prints_the_comparison_and_the_report(finished, capsys):
    from lvsearch.cli import main

    out, s, _ = finished
    argv = ["faster", "--supernet", s.supernet, "--table", s.table, "--data", s.data, "--out", str(out),
            "--population", "4", "--iterations", "2", "--dev-sequences", "16", "--steps", "3",
            "--eval-dev-sequences", "16", "--rounds", "2", "--device", "cpu"] + \
        [x for kv in TINY_RETRAIN for x in ("--set", kv)]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert "NSGA-II's pick against random search's:" in captured.out + captured.err
    assert captured.out.strip().splitlines()[-1] == str(out / "report.md")


def test_an_unknown_reference_is_refused_before_the_search(run, table_path, prepared_corpus, tmp_path):  # noqa: F811
    from lvsearch.arch import Arch
    from lvsearch.faster.job import run_faster

    out = tmp_path / "out"
    with pytest.raises(LvsearchError, match="--reference bret"):
        run_faster(out, settings(run, table_path, prepared_corpus, reference="bret"), show_progress=False)
    other = tmp_path / "other-slots.json"  # an architecture of another slot count
    Arch.from_key("sfsfsfsf").to_json(other, space="lvbert-elc")  # the supernet has 4 slots
    with pytest.raises(LvsearchError, match="not an architecture of the supernet's space") as e:
        run_faster(out, settings(run, table_path, prepared_corpus, reference=str(other)), show_progress=False)
    assert "slots of that space" in e.value.fix
    assert not out.exists()


def test_a_table_of_another_device_model_is_refused_before_the_search(run, table_path, prepared_corpus, tmp_path):  # noqa: F811
    """The models are timed on the table's device: a table of another CPU model fails at the
    start (not after the retrains), and --latency-any-device accepts it."""
    from lvsearch.faster.job import check_inputs

    other = tmp_path / "table.json"
    rec = json.loads(Path(table_path).read_text())
    rec["device_name"] = "Some Other CPU 9000"
    other.write_text(json.dumps(rec))
    with pytest.raises(LvsearchError, match="Some Other CPU 9000") as e:
        check_inputs(settings(run, other, prepared_corpus))
    assert "--latency-any-device" in e.value.fix
    assert check_inputs(settings(run, other, prepared_corpus, latency_any_device=True)) == 3


def test_an_out_inside_the_data_folder_is_refused(run, table_path, prepared_corpus, tmp_path):  # noqa: F811
    import shutil

    from lvsearch.faster.job import open_folder

    data = tmp_path / "data"
    shutil.copytree(prepared_corpus, data)
    with pytest.raises(LvsearchError, match="inside the input --data"):
        open_folder(data / "faster", settings(run, table_path, data), show_progress=False)
    assert not (data / "faster").exists()


def test_a_first_try_that_wrote_nothing_takes_new_settings(run, table_path, prepared_corpus, tmp_path):  # noqa: F811
    from lvsearch.faster.job import FORMAT, STATE, open_folder

    out = tmp_path / "out"
    out.mkdir()
    (out / STATE).write_text(json.dumps({"format": FORMAT, "settings": {"table": "other.json"}, "stages": {}}))
    f = open_folder(out, settings(run, table_path, prepared_corpus), show_progress=False)
    assert f.state["settings"]["table"] == str(table_path)


def test_a_set_space_or_slots_and_an_empty_blimp_are_refused_before_the_search(run, table_path, prepared_corpus, tmp_path):  # noqa: F811
    from lvsearch.faster.job import run_faster

    out = tmp_path / "out"
    for kw, words in ((dict(overrides=TINY_RETRAIN + ["num_slots=6"]), "num_slots=6"),
                      (dict(blimp=str(tmp_path)), "BLiMP")):
        with pytest.raises(LvsearchError, match=words):
            run_faster(out, settings(run, table_path, prepared_corpus, **kw), show_progress=False)
        assert not out.exists()
