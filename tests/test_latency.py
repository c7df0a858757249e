"""Latency tables, the predictor and its validation (lvsearch.latency)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from lvsearch.arch import Arch, reference_arch
from lvsearch.cli import main
from lvsearch.errors import LvsearchError
from lvsearch.latency.job import measure, validate
from lvsearch.latency.predict import predict_ms, sample_archs, table_sum_ms
from lvsearch.latency.table import MeasureOptions, check_table, load_table, save_table
from lvsearch.train.supernet import load_supernet, train_supernet

TINY = [
    "space=lvbert-elc", "num_slots=4", "model.hidden=32", "model.embedding=16", "model.ff_inner=64", "model.heads=2",
    "train.seq_len=32", "train.batch_size=8", "train.steps=4", "train.warmup_steps=1", "train.log_every=10",
    "train.eval_every=0", "train.checkpoint_every=4", "eval.dev_sequences=16", "eval.panel=[bert]",
]
FAST = MeasureOptions(device="cpu", batch=2, threads=1, warmup=1, repeats=3, calibrate=4)


@pytest.fixture(scope="module")
def run(prepared_corpus: Path, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("latency") / "sn"
    train_supernet("quickstart", prepared_corpus, out, overrides=TINY, show_progress=False)
    return out


@pytest.fixture(scope="module")
def table_path(run: Path, tmp_path_factory) -> Path:
    """A table measured on the tiny supernet (every op and mixing width timed for real). Its
    calibration is fitted on planted end-to-end times (1.2 × table sum + 0.3 ms): four tiny
    architectures timed on a shared, busy test machine give a fit that is refused as noise
    (the refusal has its own test) about as often as not."""
    import lvsearch.latency.job as job
    import lvsearch.latency.predict as predict

    real = predict.calibrate

    def planted(bench, table, **kw):
        with pytest.MonkeyPatch.context() as m:
            m.setattr(predict, "time_archs", lambda b, sample, label, **k: [1.2 * table_sum_ms(a, table) + 0.3
                                                                             for a in sample])
            return real(bench, table, **kw)

    path = tmp_path_factory.mktemp("latency-table") / "table.json"
    with pytest.MonkeyPatch.context() as m:
        m.setattr(job, "calibrate", planted)
        measure(run, path, FAST, show_progress=False)
    return path


def test_table_has_every_choice_and_mixing_width_with_where_it_was_measured(run, table_path):
    table = load_table(table_path)
    loaded = load_supernet(run)
    assert set(table.ops_ms) == set(loaded.space.ops) == {"SA", "FF", "DC"}
    assert set(table.mixing_ms) == {str(k) for k in range(2, loaded.space.num_slots + 1)}
    times = [*table.ops_ms.values(), *table.mixing_ms.values(), table.overhead_ms]
    assert all(np.isfinite(t) and t > 0 for t in times)
    assert (table.device, table.threads, table.batch, table.seq_len) == ("cpu", 1, 2, 32)
    assert table.device_name and table.torch == torch.__version__
    assert table.dims == loaded.dims.to_dict() and table.space == loaded.space.to_dict()
    assert set(table.spread_ms) == {*(f"op:{o}" for o in table.ops_ms), *(f"mix:{k}" for k in table.mixing_ms), "overhead"}
    check_table(table, table_path, space=loaded.space, dims=loaded.dims, device=torch.device("cpu"))


def test_prediction_is_the_calibrated_table_sum(table_path):
    table = load_table(table_path)
    space = table.search_space()
    arch = Arch(("SA", "DC", "FF", "SA"), ((0,), (0, 1), (1, 2), (0, 1, 2, 3)))
    space.validate(arch)
    want = (table.overhead_ms + table.ops_ms["SA"] * 2 + table.ops_ms["DC"] + table.ops_ms["FF"]
            + table.mixing_ms["2"] + table.mixing_ms["2"] + table.mixing_ms["4"])
    assert table_sum_ms(arch, table) == pytest.approx(want, rel=1e-12)
    seq = reference_arch("bert", space)  # sequential: no mixing term
    assert table_sum_ms(seq, table) == pytest.approx(
        table.overhead_ms + sum(table.ops_ms[op] for op in seq.ops), rel=1e-12)
    c = table.calibration  # fitted on 4 architectures drawn with seed 1
    assert c is not None and (c.archs, c.seed) == (4, 1)
    assert (c.slope, c.intercept_ms) == (pytest.approx(1.2), pytest.approx(0.3, abs=1e-6))  # the planted line
    assert predict_ms(arch, table) == pytest.approx(c.intercept_ms + c.slope * want, rel=1e-12)
    raw = table.model_copy(update={"calibration": None})  # --calibrate 0: the raw sum
    assert predict_ms(arch, raw) == pytest.approx(want, rel=1e-12)


def test_validation_record_rows_match_its_summary(run, table_path, tmp_path):
    out = tmp_path / "check.json"
    rec = validate(run, table_path, out, archs=6, seed=3, opts=FAST, show_progress=False)
    assert json.loads(out.read_text()) == json.loads(json.dumps(rec))
    rows = rec["rows"]
    assert len(rows) == 6 and len({r["arch"] for r in rows}) == 6
    table = load_table(table_path)
    for r in rows:
        assert r["predicted_ms"] == pytest.approx(predict_ms(Arch.from_key(r["arch"]), table))
        assert r["table_sum_ms"] == pytest.approx(table_sum_ms(Arch.from_key(r["arch"]), table))
        assert r["measured_ms"] > 0
    ape = [abs(r["predicted_ms"] - r["measured_ms"]) / r["measured_ms"] for r in rows]
    assert rec["summary"]["median_ape"] == pytest.approx(float(np.median(ape)))
    assert rec["summary"]["worst_ape"] == pytest.approx(max(ape))
    assert [a.key for a in sample_archs(load_supernet(run).space, 6, 3)] == [r["arch"] for r in rows]


def test_a_table_that_does_not_fit_is_refused(run, table_path, tmp_path):
    loaded = load_supernet(run)
    table = load_table(table_path)
    cpu = torch.device("cpu")
    other = table.model_copy(update={"device_name": "another CPU"})
    with pytest.raises(LvsearchError, match="measured on cpu \\(another CPU"):
        check_table(other, "t.json", space=loaded.space, dims=loaded.dims, device=cpu)
    check_table(other, "t.json", space=loaded.space, dims=loaded.dims, device=cpu, any_device=True)
    gpu = table.model_copy(update={"device": "cuda"})
    with pytest.raises(LvsearchError, match="this command runs on cpu"):
        check_table(gpu, "t.json", space=loaded.space, dims=loaded.dims, device=cpu)
    sizes = table.model_copy(update={"dims": {**table.dims, "hidden": 64}})
    with pytest.raises(LvsearchError, match="other model sizes \\(hidden"):
        check_table(sizes, "t.json", space=loaded.space, dims=loaded.dims)
    no_dc = table.model_copy(update={"ops_ms": {k: v for k, v in table.ops_ms.items() if k != "DC"}})
    with pytest.raises(LvsearchError, match="no entry for DC"):
        check_table(no_dc, "t.json", space=loaded.space, dims=loaded.dims)
    # a table from another device is also refused by validate, before anything is measured
    path = tmp_path / "other.json"
    save_table(other, path)
    with pytest.raises(LvsearchError, match="--latency-any-device"):
        validate(run, path, tmp_path / "v.json", archs=2, opts=FAST, show_progress=False)
    assert not (tmp_path / "v.json").exists()


def test_cli_predict_and_refusals(run, table_path, tmp_path, capsys):
    assert main(["latency", "predict", "--table", str(table_path), "--arch", "bert", "random:3"]) == 0
    out = capsys.readouterr().out
    assert "bert: " in out and "random:3: " in out and " ms" in out
    before = table_path.read_bytes()
    assert main(["latency", "measure", "--supernet", str(run), "--out", str(table_path), "--threads", "1"]) == 2
    assert "already exists" in capsys.readouterr().err and table_path.read_bytes() == before
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**json.loads(before), "ops_ms": {"SA": "fast"}}))
    assert main(["latency", "predict", "--table", str(bad), "--arch", "bert"]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "ops_ms" in err and "Traceback" not in err



def test_time_measures_named_architectures_with_their_prediction(run, table_path, tmp_path, capsys):
    """``latency time`` times each architecture end to end at the table's settings, beside its
    prediction, and refuses an existing record or an architecture outside the space."""
    out = tmp_path / "times.json"
    args = ["latency", "time", "--supernet", str(run), "--arch", "bert", "random:3", "--table", str(table_path),
            "--warmup", "1", "--repeats", "3", "--out", str(out)]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "bert: " in printed and "random:3: " in printed and "predicted" in printed
    rec = json.loads(out.read_text())
    table = load_table(table_path)
    space = load_supernet(run).space
    assert rec["format"] == "lvsearch.latency-times/v1" and (rec["batch"], rec["threads"]) == (table.batch, 1)
    assert [r["spec"] for r in rec["rows"]] == ["bert", "random:3"]
    for r, name in zip(rec["rows"], ("bert", "random:3")):
        arch = reference_arch(name, space)
        assert r["arch"] == arch.key and r["measured_ms"] > 0
        assert r["predicted_ms"] == pytest.approx(predict_ms(arch, table))
    before = out.read_bytes()
    assert main(args) == 2 and "already exists" in capsys.readouterr().err and out.read_bytes() == before
    other = tmp_path / "la.json"
    Arch.sequential("lsfs").to_json(other)
    assert main(["latency", "time", "--supernet", str(run), "--arch", str(other), "--repeats", "3"]) == 2
    err = capsys.readouterr().err
    assert str(other) in err and "Traceback" not in err
    assert main(["latency", "time", "--supernet", str(run), "--arch", "bert", "--warmup", "1", "--repeats", "3"]) == 0
    assert "predicted" not in capsys.readouterr().out  # no table: measured only


def test_time_with_a_table_refuses_another_batch_length_or_dtype(run, table_path, tmp_path, capsys):
    """With --table, an explicit --batch 4 was silently replaced by the table's batch 2; now a
    value other than the table's is refused, the table's own value is accepted, and another
    --threads is timed but its prediction names the table's threads."""
    table = load_table(table_path)
    out = tmp_path / "times.json"
    base = ["latency", "time", "--supernet", str(run), "--arch", "bert", "--table", str(table_path),
            "--warmup", "1", "--repeats", "2", "--out", str(out)]
    for flag, value, fixed in (("--batch", table.batch + 2, table.batch), ("--seq-len", table.seq_len // 2,
                                                                         table.seq_len),
                               ("--dtype", "bfloat16", table.dtype)):
        assert main([*base, flag, str(value)]) == 2
        err = capsys.readouterr().err
        assert f"{flag} {value} conflicts with --table {table_path}, measured at {flag} {fixed}" in err
        assert f"drop {flag}" in err and "Traceback" not in err and not out.exists()
    assert main([*base, "--batch", str(table.batch), "--dtype", table.dtype, "--threads", str(table.threads + 1)]) == 0
    printed = capsys.readouterr().out
    rec = json.loads(out.read_text())
    assert (rec["batch"], rec["seq_len"], rec["dtype"]) == (table.batch, table.seq_len, table.dtype)
    assert (rec["threads"], rec["table_threads"]) == (table.threads + 1, table.threads)
    from lvsearch.ui import plural

    assert f"from the table's {plural(table.threads, 'thread')} (" in printed
    assert main(["latency", "time", "--supernet", str(run), "--arch", "bert", "--batch", "3", "--warmup", "1",
                 "--repeats", "2", "--out", str(tmp_path / "no-table.json")]) == 0  # no table: --batch is used
    assert json.loads((tmp_path / "no-table.json").read_text())["batch"] == 3


@pytest.mark.parametrize("field, edit", [
    ("ops_ms.SA", lambda t: t["ops_ms"].update(SA=-5.0)),
    ("ops_ms.FF", lambda t: t["ops_ms"].update(FF=0)),
    ("mixing_ms.2", lambda t: t["mixing_ms"].update({"2": -1.0})),
    ("overhead_ms", lambda t: t.update(overhead_ms=-0.1)),
    ("batch", lambda t: t.update(batch=0)),
    ("threads", lambda t: t.update(threads=0)),
])
def test_an_edited_table_with_nonpositive_times_or_sizes_is_refused(table_path, tmp_path, capsys, field, edit):
    """A negative time made a prediction negative (-0.013 ms) and a search took it (fresh-user pass)."""
    table = json.loads(table_path.read_text())
    edit(table)
    bad = tmp_path / "edited.json"
    bad.write_text(json.dumps(table))
    before = bad.read_bytes()
    assert main(["latency", "predict", "--table", str(bad), "--arch", "bert"]) == 2
    err = capsys.readouterr().err
    assert f"latency table {bad} is malformed: field {field}" in err and "Traceback" not in err
    assert "lvsearch latency measure" in err and bad.read_bytes() == before



def test_predict_with_a_table_missing_an_entry_names_it(table_path, tmp_path, capsys):
    """``latency predict`` raised KeyError: 'DC' with a traceback (fresh-user pass)."""
    table = json.loads(table_path.read_text())
    del table["ops_ms"]["DC"]
    bad = tmp_path / "no-dc.json"
    bad.write_text(json.dumps(table))
    arch = tmp_path / "dc.json"  # uses DC
    arch.write_text(json.dumps({"format": "lvsearch.arch/v1", "ops": "cccc", "inputs": [[0], [1], [2], [3]]}))
    assert main(["latency", "predict", "--table", str(bad), "--arch", str(arch)]) == 2
    err = capsys.readouterr().err
    assert f"latency table {bad} has no entry for DC" in err and "Traceback" not in err


# ------------------------------------------------------------------------ latency in the search
SEARCH = ["--population", "6", "--iterations", "2", "--topk", "3", "--crossover", "3", "--mutation", "3",
          "--dev-sequences", "16", "--device", "cpu"]


def test_evolve_records_predicted_latency_and_keeps_the_limit(run, table_path, tmp_path, capsys):
    table = load_table(table_path)
    space = table.search_space()
    times = sorted(predict_ms(a, table) for a in sample_archs(space, 40, 0))
    limit = times[len(times) // 2]  # about half of the space is too slow
    out = tmp_path / "search"
    assert main(["evolve", "--supernet", str(run), "--out", str(out), *SEARCH, "--latency-table", str(table_path),
                 "--max-latency", f"{limit}"]) == 0
    state = json.loads((out / "state.json").read_text())
    entries = state["history"]  # every candidate evaluated: none above the limit
    assert len(entries) >= 6
    for e in entries:
        assert e["latency_ms"] == pytest.approx(predict_ms(Arch.from_key(e["key"]), table))
        assert e["latency_ms"] <= limit and e["rejected"] is None
    topk = json.loads((out / "topk.json").read_text())["topk"]
    assert topk and all(r["latency_ms"] <= limit for r in topk)
    best = json.loads((out / "best.json").read_text())
    assert best["meta"]["latency_ms"] == pytest.approx(topk[0]["latency_ms"])
    assert state["extra"]["max_latency"] == limit
    assert state["extra"]["latency_table"]["path"] == str(table_path.resolve())
    capsys.readouterr()
    assert main(["arch", "show", str(out / "best.json")]) == 0  # arch show did not print it (fresh-user pass)
    assert f"predicted latency {best['meta']['latency_ms']:.3f} ms per batch" in capsys.readouterr().out


def test_within_latency_moves_a_draw_under_the_limit_by_cheaper_steps(table_path):
    """A draw above ``--max-latency`` is moved under it by cheaper choices and dropped inputs
    only (never a costlier choice, never a new input, the previous output kept); a limit
    below the space's cheapest architecture gives None."""
    import random as pyrandom

    from lvsearch.latency.predict import within_latency

    table = load_table(table_path)
    space = table.search_space()
    draws = sample_archs(space, 30, 3)
    times = sorted(predict_ms(a, table) for a in draws)
    limit = times[len(times) // 4]
    cheapest = min(table.ops_ms.values())
    floor = table.overhead_ms + cheapest * space.num_slots  # sequential, every slot at its cheapest op
    calibrated = table.calibration
    floor_ms = floor if calibrated is None else calibrated.intercept_ms + calibrated.slope * floor
    rng = pyrandom.Random(0)
    moved = 0
    for a in draws:
        b = within_latency(a, table, space, limit, rng)
        assert b is not None and predict_ms(b, table) <= limit + 1e-9
        space.validate(b)
        if predict_ms(a, table) <= limit:
            assert b == a
            continue
        moved += 1
        for n in range(1, a.num_slots + 1):
            assert table.ops_ms[b.slot_code(n)] <= table.ops_ms[a.slot_code(n)]
            assert set(b.inputs[n - 1]) <= set(a.inputs[n - 1]) and n - 1 in b.inputs[n - 1]
    assert moved >= 10
    assert within_latency(draws[0], table, space, floor_ms * 0.9, rng) is None


def test_nsga2_minimises_predicted_latency(run, table_path, tmp_path):
    out = tmp_path / "nsga"
    assert main(["evolve", "--supernet", str(run), "--out", str(out), *SEARCH, "--strategy", "nsga2",
                 "--nsga2-cost", "latency", "--latency-table", str(table_path)]) == 0
    pareto = json.loads((out / "pareto.json").read_text())
    assert pareto["objectives"][1] == "latency ms (min)"
    front = pareto["front"]
    lat = [r["latency_ms"] for r in front]
    fit = [r["fitness"] for r in front]
    assert lat == sorted(lat) and fit == sorted(fit)  # a front: slower only if fitter


def test_nsga2_pick_is_the_fastest_candidate_at_the_first_populations_median_and_random_search_shares_it(
        run, table_path, tmp_path, capsys):
    from lvsearch.search.evaluator import EvalResult
    from lvsearch.search.pick import cheapest_at, first_population_reference

    out = tmp_path / "nsga-pick"
    assert main(["evolve", "--supernet", str(run), "--out", str(out), *SEARCH, "--strategy", "nsga2",
                 "--nsga2-cost", "latency", "--latency-table", str(table_path), "--racing", "off",
                 "--compare-random", "--sparse-init", "0.5"]) == 0
    said = " ".join(capsys.readouterr())
    refs = []
    for folder in (out, out / "random"):
        history = [json.loads(line) for line in (folder / "history.jsonl").read_text().splitlines()]
        ref = first_population_reference(history)
        refs.append(ref)
        pick = json.loads((folder / "pick.json").read_text())
        rec = pick["meta"]["pick"]
        assert rec["reference"]["fitness"] == pytest.approx(refs[0])
        results = [EvalResult.from_dict(h) for h in history]
        fast = cheapest_at(results, "latency", refs[0])
        assert rec["pick"]["key"] == fast.key == Arch.from_dict(pick).key
        assert pick["meta"]["latency_ms"] == fast.latency_ms and pick["meta"]["fitness"] >= refs[0]
        slower = [r for r in results if r.fitness >= refs[0] and r.latency_ms < fast.latency_ms]
        assert not slower  # nothing faster reaches the reference
    assert refs[0] == refs[1]  # the control draws the same first population
    assert said.count("pick.json = the lowest latency") == 2


def test_sparse_init_draws_the_first_population_with_fewer_inputs(run):
    import random
    import statistics

    from lvsearch.space import SearchSpace

    space = SearchSpace.resolve("lvbert-elc", 12)
    rng = random.Random(0)
    dense = [sum(map(len, space.sample(rng).inputs)) for _ in range(200)]
    sparse = [sum(map(len, space.sample_sparse(rng).inputs)) for _ in range(200)]
    assert statistics.mean(sparse) < 0.5 * statistics.mean(dense)
    assert min(sparse) == 12  # some draws read only the previous output (bert's connectivity)


def test_pick_fitness_at_needs_a_search_that_writes_a_pick(run, table_path, tmp_path, capsys):
    assert main(["evolve", "--supernet", str(run), "--out", str(tmp_path / "o"), *SEARCH,
                 "--pick-fitness-at", "-5"]) != 0
    err = capsys.readouterr().err
    assert "--pick-fitness-at" in err and "Traceback" not in err
    with pytest.raises(SystemExit) as exit_:
        main(["evolve", "--supernet", str(run), "--out", str(tmp_path / "o2"), *SEARCH, "--sparse-init", "1.5"])
    assert exit_.value.code != 0 and "--sparse-init" in capsys.readouterr().err


def test_latency_options_without_a_fitting_table_are_refused(run, table_path, tmp_path, capsys):
    def refused(*extra: str) -> str:
        out = tmp_path / "s"
        assert main(["evolve", "--supernet", str(run), "--out", str(out), *SEARCH, *extra]) == 2
        assert not out.exists()
        err = capsys.readouterr().err
        assert "Traceback" not in err
        return err

    assert "needs predicted latencies" in refused("--max-latency", "5")
    assert "needs predicted latencies" in refused("--strategy", "nsga2", "--nsga2-cost", "latency")
    assert "--max-latency ≥" in refused("--latency-table", str(table_path), "--max-latency", "1e-6")
    other = tmp_path / "other.json"
    save_table(load_table(table_path).model_copy(update={"device_name": "another CPU"}), other)
    assert "--latency-any-device" in refused("--latency-table", str(other))
    assert main(["evolve", "--supernet", str(run), "--out", str(tmp_path / "ok"), *SEARCH, "--latency-table",
                 str(other), "--latency-any-device"]) == 0


def test_max_latency_floor_is_the_calibrated_prediction_of_the_fastest_architecture(run, table_path, tmp_path, capsys):
    """The up-front floor of --max-latency was the raw table sum while the limit is applied to
    the calibrated prediction: with a positive intercept a limit under every prediction passed
    the check and failed later with 'could not draw'; with a negative one a limit that
    architectures meet was refused. The suggested limit is rounded up, so it is accepted."""
    import math

    from lvsearch.latency.predict import fastest_arch
    from lvsearch.latency.table import Calibration

    table = load_table(table_path)
    space = table.search_space()
    fast = fastest_arch(table, space)
    space.validate(fast)
    assert fast.is_sequential and len(set(fast.ops)) == 1
    assert all(predict_ms(fast, table) <= predict_ms(a, table) for a in sample_archs(space, 40, 5))
    raw = table_sum_ms(fast, table)
    one = ["evolve", "--supernet", str(run), *SEARCH]
    one[one.index("--iterations") + 1] = "1"
    for intercept in (0.5 * raw, -0.5 * raw):
        cal = Calibration(intercept_ms=intercept, slope=1.0, archs=4, seed=1, raw_median_ape=0.1, median_ape=0.1)
        path = tmp_path / f"table{intercept:+.3f}.json"
        save_table(table.model_copy(update={"calibration": cal}), path)
        floor = raw + intercept
        below = tmp_path / "below"
        assert main([*one, "--out", str(below), "--latency-table", str(path), "--max-latency", f"{floor * 0.99}"]) == 2
        err = capsys.readouterr().err
        assert f"--max-latency ≥ {math.ceil(floor * 1000) / 1000:.3f}" in err and not below.exists()
        if intercept < 0:  # a limit between the calibrated floor and the raw one: a search runs within it
            limit = floor + 0.2 * raw
            out = tmp_path / "ok"
            assert main([*one, "--out", str(out), "--latency-table", str(path), "--max-latency", f"{limit}"]) == 0
            history = json.loads((out / "state.json").read_text())["history"]
            assert history and all(e["latency_ms"] <= limit for e in history)


def test_resume_of_a_latency_search_names_the_recorded_table_and_takes_a_copy(run, table_path, tmp_path, capsys):
    """A resume without the table, or with another limit, said only "made with different inputs
    (latency_table, max_latency)"; a byte-identical copy of the table was refused (fresh-user pass)."""
    out = tmp_path / "search"
    first = ["evolve", "--supernet", str(run), "--out", str(out), *SEARCH]  # 2 iterations: resuming continues
    one = [*first]
    one[one.index("--iterations") + 1] = "1"
    assert main([*one, "--latency-table", str(table_path), "--max-latency", "1e6"]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    capsys.readouterr()
    recorded = f"--latency-table {table_path.resolve()} --max-latency 1e+06"
    for extra, given in (((), "passes none:"), (("--latency-table", str(table_path), "--max-latency", "5"),
                                                 f"passes --latency-table {table_path.resolve()} --max-latency 5:")):
        assert main([*first, "--resume", *extra]) == 2
        err = capsys.readouterr().err
        assert f"was run with {recorded}, and this resume {given}" in err and "Traceback" not in err
        assert f"resume with {recorded}" in err
        assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    copy = tmp_path / "moved" / "table.json"
    copy.parent.mkdir()
    copy.write_bytes(table_path.read_bytes())
    assert main([*first, "--resume", "--latency-table", str(copy), "--max-latency", "1e6"]) == 0


def test_a_calibration_that_predicts_no_time_for_the_fastest_architecture_is_refused(run, table_path, monkeypatch):
    """A steep fit with a negative intercept (noisy timings on a busy machine) predicted
    negative latencies for fast architectures; it is refused, naming the fix."""
    import lvsearch.latency.predict as predict
    from lvsearch.latency.table import Bench

    table = load_table(table_path).model_copy(update={"calibration": None})
    bench = Bench(run, FAST)
    sample = sample_archs(bench.loaded.space, 4, 1)
    raw = [table_sum_ms(a, table) for a in sample]
    lo, hi = min(raw), max(raw)
    steep = [(r - lo) / (hi - lo) * 10 * lo + 1e-3 for r in raw]  # 0 ms at the cheapest draw, 10× the spread
    monkeypatch.setattr(predict, "time_archs", lambda *a, **k: steep)
    with pytest.raises(LvsearchError, match="predicts -?[0-9.]+ ms for the space's fastest architecture"):
        predict.calibrate(bench, table, archs=4, seed=1, show_progress=False)
    monkeypatch.setattr(predict, "time_archs", lambda *a, **k: [1.1 * r for r in raw])
    assert predict.calibrate(bench, table, archs=4, seed=1, show_progress=False).calibration.slope == pytest.approx(1.1)


def test_a_validation_that_ranks_badly_is_warned_about():
    """ρ below 0.5 gets a warning saying why it may be (disturbed timings, or latencies too alike
    to rank); a good or undefined ρ none."""
    from lvsearch.latency.predict import MIN_RANK_RHO, rank_warning

    base = {"measured_ms": [10.0, 15.0, 20.0]}
    assert rank_warning({**base, "spearman_rho": 0.9}) is None
    assert rank_warning({**base, "spearman_rho": None}) is None
    assert rank_warning({**base, "spearman_rho": float("nan")}) is None
    bad = rank_warning({**base, "spearman_rho": -1.0})
    assert bad.startswith(f"Spearman ρ -1.000 is below {MIN_RANK_RHO}") and "disturbed" in bad
    assert "too close to rank" in rank_warning({"measured_ms": [10.0, 10.1, 10.2], "spearman_rho": 0.1})


def test_plural_counts():
    from lvsearch.ui import plural

    assert (plural(1, "thread"), plural(2, "thread"), plural(0, "α heatmap")) == ("1 thread", "2 threads", "0 α heatmaps")
    assert plural(1000, "entry", "entries") == "1,000 entries"
