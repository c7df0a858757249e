"""The landscape benchmark's statistics (benchmarks/landscape.py): the room gate and the
additive fit, on synthetic rows (nothing is trained)."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import numpy as np
import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture()
def landscape(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import landscape

    return landscape


#: The parameter band of the hand-made rows (``_row`` gives 1,000 parameters: inside).
BAND = [900, 1100]


def _row(id: str, source: str, name: str, seeds: list[float], ops: str = "ssss") -> dict:
    return {"id": id, "source": source, "name": name, "ops": ops, "params": 1000, "accuracy_seed0": seeds[0],
            "accuracy_mean": float(np.mean(seeds)), "seeds": {str(k): {"accuracy": a} for k, a in enumerate(seeds)}}


def test_gate_takes_the_best_shrunk_mean_each_shrunk_with_its_own_seed_count(landscape):
    """The gate shrank only the best raw mean: a 1-seed 0.60 (shrunk to 0.579) was taken over a
    10-seed 0.59 whose empirical-Bayes mean is 0.5875."""
    draws = [0.50 + 0.01 * i for i in range(6)]
    rows = [_row(f"r{i}", "random", f"random:{1000 + i}", [a]) for i, a in enumerate(draws)]
    rows += [_row("A", "pick", "s1/best.json", [0.60], "sfsf"), _row("B", "pick", "s2/best.json", [0.59] * 10, "ffff"),
             _row("R", "pick", "s3/random/best.json", [0.52, 0.53]), _row("bert", "reference", "bert", [0.7, 0.7])]
    sigma = 0.01
    power = {"minimum_detectable_difference": {"training_noise_only": {"10": 0.01}}}
    g = landscape.gate(rows, BAND, sigma, {"loo_r2": -1.0}, power)
    m = float(np.mean(draws))
    tau2 = float(np.var(draws, ddof=1)) - sigma ** 2
    post = {k: m + tau2 / (tau2 + sigma ** 2 / n) * (x - m) for k, x, n in (("A", 0.60, 1), ("B", 0.59, 10))}
    assert post["B"] > post["A"]
    assert (g["best_ops"], g["best_seeds"]) == ("ffff", 10)  # not bert (a reference), not A
    assert g["best_shrunk"] == pytest.approx(post["B"]) and g["estimate"] == pytest.approx(post["B"])
    assert g["shrinkage"] == pytest.approx(tau2 / (tau2 + sigma ** 2 / 10))
    assert g["random_search_picks"] == 1 and g["room"] == pytest.approx(post["B"] - 0.525)
    assert g["room_at_least_detectable"] == {"training_noise_only": True}
    flat = landscape.gate(rows, BAND, 1.0, {"loo_r2": -1.0}, power)  # τ² clipped at 0: all shrink to m; ties by raw mean
    assert flat["shrinkage"] == 0.0 and flat["best_shrunk"] == pytest.approx(m) and flat["best_ops"] == "sfsf"


def test_random_draws_are_those_inside_the_band_and_the_gate_needs_two(landscape, monkeypatch):
    """`random:1` is an unconditioned draw of the space: on lvbert-elastic@24 it has 3.2M
    parameters, outside bert's band, so it is no sample of the band's distribution. It counts
    among the random draws (distribution, percentiles, the gate's prior) only inside the band;
    with fewer than 2 draws in the band there is no gate (it was NaN)."""
    monkeypatch.setattr(landscape, "PARAM_COUNTER", {})
    rng = random.Random(2)
    rows = [_row(f"{i:02d}", "random", f"random:{1000 + i}", [0.29 + rng.gauss(0, 0.004)] * (3 if i < 3 else 1),
                 "".join(rng.choice("sfc") for _ in range(4))) for i in range(9)]
    outside = _row("r1", "reference", "random:1", [0.40, 0.41, 0.40], "cccc")
    outside["params"] = 5000
    for r in rows + [outside]:
        r["beats_floor_all"] = True
    with_it, without = landscape.summarize(rows + [outside], BAND), landscape.summarize(rows, BAND)
    assert with_it["random_draws"] == without["random_draws"] == 9
    assert with_it["distribution_random"] == without["distribution_random"]
    assert with_it["gate"]["random_draws_mean"] == pytest.approx(np.mean([r["accuracy_seed0"] for r in rows]))
    assert with_it["gate"]["best_ops"] != "cccc"  # not a candidate: outside the band
    assert landscape.is_fixed_reference(outside) is False  # still not left out as a reference order
    inside = dict(outside, params=1000)
    assert landscape.summarize(rows + [inside], BAND)["random_draws"] == 10
    picks = [dict(_row(f"p{i}", "pick", f"s{i}/random/best.json", [0.3 + 0.001 * i], r["ops"]), beats_floor_all=True)
             for i, r in enumerate(rows[1:])]  # enough architectures for the additive fit and σ_seed
    few = landscape.summarize(rows[:1] + [outside] + picks, BAND)
    assert few["random_draws"] == 1 and few["additive"] and few["sigma_seed"]["pooled_std"] and "gate" not in few
    with pytest.raises(ValueError, match="1 trained random draw"):
        landscape.gate(rows[:1], BAND, 0.004, {"loo_r2": -1.0}, {"minimum_detectable_difference": {}})


def test_additive_fit_recovers_per_slot_choice_effects_variants_included(landscape):
    rng = random.Random(0)
    choices = ["s", "f", "c", "c(k3)", "s(h2)"]
    effect = {(i, c): rng.gauss(0, 0.01) for i in range(4) for c in choices}
    rows = []
    for _ in range(40):
        ops = [rng.choice(choices) for _ in range(4)]
        rows.append({"ops": "".join(ops), "accuracy_mean": 0.3 + sum(effect[i, c] for i, c in enumerate(ops))
                     + rng.gauss(0, 0.0005)})
    fit = landscape.additive_fit(rows)
    assert fit["features"] == "4 slots × choices c c(k3) f s s(h2)" and fit["loo_r2"] > 0.95
    for i in range(4):
        true = {c: effect[i, c] - np.mean([effect[i, d] for d in choices]) for c in choices}
        assert fit["effects"][str(i + 1)] == pytest.approx(true, abs=1.5e-3)
    assert landscape.slot_choices(fit["optimum_ops"]) == [max(fit["effects"][str(i + 1)], key=fit["effects"][str(i + 1)].get)
                                                          for i in range(4)]
    probe = {"best": landscape.slot_choices(fit["optimum_ops"]), "first": landscape.slot_choices(rows[0]["ops"])}
    got = landscape.additive_fit(rows, predict=probe)["predicted"]
    assert got["best"] == pytest.approx(fit["optimum_predicted"])  # the fit's own prediction of its optimum
    assert got["first"] == pytest.approx(rows[0]["accuracy_mean"], abs=3e-3)
    assert "predicted" not in fit


def test_a_plan_names_a_resized_space_once(landscape):
    """A 12-slot supernet's space is named ``lvbert-elc@12``; the plan recorded
    ``lvbert-elc@12@12``."""
    from lvsearch.space import SearchSpace

    native = SearchSpace.load("lvbert-elc")
    for space, want in ((native.with_num_slots(12), "lvbert-elc@12"), (native, f"lvbert-elc@{native.num_slots}")):
        plan = landscape.plan_space_of(space)
        assert plan == want and landscape.plan_space_name(plan) == "lvbert-elc"
        assert SearchSpace.load(plan).to_dict() == space.to_dict()


def test_a_default_variant_and_its_explicit_spelling_are_one_fit_feature(landscape, monkeypatch):
    """In an elastic space ``bert``'s ``f`` (FF at the model's ``ff_inner``) and a draw's ``f(i1)``
    are the same layer: with the model dims the fit labels both by their sizes."""
    from lvsearch.arch import Arch
    from lvsearch.model.dims import ModelDims

    dims = ModelDims(vocab_size=64, hidden=32, embedding=16, ff_inner=64, heads=2, conv_kernel=9)
    monkeypatch.setattr(landscape, "PARAM_COUNTER", {"dims": dims, "space_has_variants": True})
    plain, spelled = Arch.sequential("sfc"), Arch.sequential("s(h2)f(i1)c(k9)")
    assert landscape.arch_choices(plain) == landscape.arch_choices(spelled) == ["s(heads=2)", "f(inner=64)",
                                                                               "c(kernel=9)"]
    assert landscape.arch_choices(Arch.sequential("f(i0.5)s(h4)c(k3)")) == ["f(inner=32)", "s(heads=4)", "c(kernel=3)"]
    monkeypatch.setattr(landscape, "PARAM_COUNTER", {})  # no supernet loaded, no variants: the compact choices
    assert landscape.arch_choices(plain) == ["s", "f", "c"]


def test_pick_pairs_pair_each_search_with_its_random_search(landscape):
    """EA and random-search picks of one ``evolve --compare-random`` (``OUT/best.json`` and
    ``OUT/random/best.json``) are paired; an unpaired pick and the draws are left out."""
    from lvsearch.stats import detectable_difference

    rows = [_row("a", "pick", "/w/s0/best.json", [0.30]), _row("b", "pick", "/w/s0/random/best.json", [0.29]),
            _row("c", "pick", "/w/s1/best.json", [0.31]), _row("d", "pick", "/w/s1/random/best.json", [0.28]),
            _row("e", "pick", "/w/s2/best.json", [0.50]), _row("r", "random", "random:1000", [0.27])]
    q = landscape.pick_pairs(rows)
    assert [(x["ea"], x["random_search"]) for x in q["pairs"]] == [("/w/s0/best.json", "/w/s0/random/best.json"),
                                                                    ("/w/s1/best.json", "/w/s1/random/best.json")]
    assert q["n"] == 2 and q["mean"] == pytest.approx(0.02) and q["sd"] == pytest.approx(np.std([0.01, 0.03], ddof=1))
    assert q["detectable_at"]["10"] == pytest.approx(detectable_difference(q["sd"], 10))
    assert landscape.pick_pairs(rows[:2]) is None  # one pair: no SD


def test_gate_order_trains_what_the_room_rule_needs_first(landscape):
    """``--order gate``: seed 0 of the seeded architectures and the picks, then their later
    seeds, then the other draws; every run of the plan once, each later seed after its seed 0."""
    rows = [_row(f"{i:02d}", src, f"n{i}", [0.3]) for i, src in
            enumerate(["reference", "reference", "random", "random", "random", "random", "pick", "pick"])]
    plan = [(r["id"], s) for r, s in landscape.run_order(rows, seeded=3, seeds=3)]
    gate = [(r["id"], s) for r, s in landscape.run_order(rows, seeded=3, seeds=3, order="gate")]
    assert sorted(plan) == sorted(gate) and len(set(gate)) == len(gate) == 8 + 3 * 2
    assert plan[:8] == [(r["id"], 0) for r in rows]
    assert gate[:5] == [("00", 0), ("01", 0), ("02", 0), ("06", 0), ("07", 0)]
    assert gate[5:11] == [("00", 1), ("01", 1), ("02", 1), ("00", 2), ("01", 2), ("02", 2)]
    assert gate[11:] == [("03", 0), ("04", 0), ("05", 0)]
    with pytest.raises(ValueError, match="plan or gate"):
        landscape.run_order(rows, 3, 3, order="best")


def _plan_rows(sources: list[str]) -> list[dict]:
    return [_row(f"{i:02d}", src, f"n{i}", [0.3]) for i, src in enumerate(sources)]


@pytest.mark.parametrize("sources, seeded, seeds", [
    (["reference", "reference", "random", "random"], 2, 3),  # no picks
    (["reference", "random", "pick", "pick"], 0, 3),  # nothing seeded
    (["reference", "pick", "random", "pick", "random"], 3, 2),  # a pick among the seeded
    (["reference", "random"], 5, 3),  # fewer architectures than --seeded
    (["pick", "random", "random"], 2, 1),  # one seed: no later seeds
])
def test_run_order_edge_cases_every_run_once_each_later_seed_after_its_seed_0(landscape, sources, seeded, seeds):
    rows = _plan_rows(sources)
    want = sorted([(r["id"], 0) for r in rows] + [(r["id"], s) for s in range(1, seeds) for r in rows[:seeded]])
    for order in ("plan", "gate"):
        got = [(r["id"], s) for r, s in landscape.run_order(rows, seeded, seeds, order)]
        assert sorted(got) == want and len(set(got)) == len(got)
        assert all(got.index((i, 0)) < k for k, (i, s) in enumerate(got) if s > 0)
        stages = landscape.run_stages(rows, seeded, seeds, order)
        assert [(r["id"], s) for st in stages for r, s in st] == got
        assert all(len({s == 0 for _, s in st}) == 1 for st in stages)
    gate = [(r["id"], s) for r, s in landscape.run_order(rows, seeded, seeds, "gate")]
    early = {r["id"] for i, r in enumerate(rows) if i < seeded or r["source"] == "pick"}
    assert [i for i, s in gate[:len(early)]] == [r["id"] for r in rows if r["id"] in early]  # plan order within
    if "pick" not in sources:  # gate without picks: plan with the later seeds before the unseeded draws
        plan = [(r["id"], s) for r, s in landscape.run_order(rows, seeded, seeds, "plan")]
        assert [x for x in gate if x[1] == 0] == [x for x in plan if x[1] == 0]


@pytest.mark.parametrize("jobs", [1, 2])
@pytest.mark.parametrize("order", ["plan", "gate"])
def test_the_run_loop_trains_a_later_seed_after_its_seed_0_and_never_waits_forever(landscape, monkeypatch, capsys,
                                                                                  jobs, order):
    """The inline pool, with ``run_one`` stubbed: every run once, each later seed trained after
    its seed 0 has finished (one worker or two; a later seed blocks a worker while it waits),
    runs already done reported as done, and a later seed of a failed seed 0 not run."""
    import threading
    from types import SimpleNamespace

    rows = _plan_rows(["reference", "reference", "random", "random", "random", "pick", "pick"])
    finished, lock = [], threading.Lock()

    def run_one(args, row, seed):
        if (row["id"], seed) == ("01", 0):
            raise RuntimeError("lvsearch retrain failed (exit 1); see 01-s0.log")
        with lock:
            finished.append((row["id"], seed))
        return f"{row['id']} s{seed}: done" if row["id"] == "02" else f"{row['id']} s{seed}: 1 s"

    monkeypatch.setattr(landscape, "run_one", run_one)
    monkeypatch.setattr(landscape, "arms_seed", lambda row, seed: None)
    args = SimpleNamespace(dispatch=SimpleNamespace(inline=True), jobs=jobs, seeded=3, seeds=3, order=order)
    outcome = {}

    def train():
        try:
            landscape.train_all(args, {"archs": rows})
        except SystemExit as e:
            outcome["error"] = str(e)

    t = threading.Thread(target=train, daemon=True)
    t.start()
    t.join(120)  # a deadlock hangs here (never reached by a correct loop)
    assert not t.is_alive(), "the run loop waits forever"
    assert outcome["error"].startswith("1 of 13 runs failed") and outcome["error"].endswith("see 01-s0.log")
    expected = {(r["id"], s) for r, s in landscape.run_order(rows, 3, 3, order)} - {("01", 0), ("01", 1), ("01", 2)}
    assert sorted(finished) == sorted(expected)
    assert all(finished.index((i, 0)) < k for k, (i, s) in enumerate(finished) if s > 0)
    out = capsys.readouterr().out  # every run's line, in the order the runs start
    assert "02 s0: done" in out and "06 s0: 1 s" in out and "01 ssss s1: not run (its seed 0 failed)" in out


def test_the_dispatched_stages_follow_the_order_and_skip_the_later_seeds_of_a_failed_seed_0(landscape, monkeypatch,
                                                                                          tmp_path):
    from types import SimpleNamespace

    rows = _plan_rows(["reference", "reference", "random", "random", "pick"])
    stages = []

    def dispatch_stage(opts, jobs, folder, failures):
        stages.append((folder.name, [j.name for j in jobs]))
        failures.update({j.name: ("boom", None) for j in jobs if j.name == "01-s0"})

    monkeypatch.setattr(landscape, "dispatch_stage", dispatch_stage)
    monkeypatch.setattr(landscape, "exit_on_failures", lambda failures, total: stages.append(("exit", sorted(failures))))
    monkeypatch.setattr(landscape, "arms_seed", lambda row, seed: None)
    args = SimpleNamespace(dispatch=SimpleNamespace(inline=False), seeded=2, seeds=2, work=tmp_path, order="gate")
    landscape.train_dispatched(args, rows)
    assert stages == [("seed-0-0", ["00-s0", "01-s0", "04-s0"]), ("later-seeds-1", ["00-s1"]),
                      ("seed-0-2", ["02-s0", "03-s0"]), ("exit", ["01-s0"])]
    stages.clear()
    args.order = "plan"
    landscape.train_dispatched(args, rows)
    assert [s[0] for s in stages] == ["seed-0", "later-seeds", "exit"] and stages[1][1] == ["00-s1"]


@pytest.mark.parametrize("argv, expect", [
    (["--name", "slot_flip_12", "--report"], "slot_flip_12.json exists and is not this benchmark's output"),
    (["--name", "../x", "--report"], "'../x' is not a result name"),
    (["--jobs", "0", "--report"], "argument --jobs: '0' must be ≥ 1"),
    (["--seeds", "0", "--report"], "argument --seeds: '0' must be ≥ 1"),
])
def test_bad_options_are_one_message_exit_2_and_no_result_is_overwritten(tmp_path, argv, expect):
    import os
    import subprocess
    import sys

    results = BENCHMARKS / "results"
    before = {p.name: p.read_bytes() for p in results.iterdir() if p.is_file()}
    env = {**os.environ, "PYTHONPATH": str(BENCHMARKS.parent), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, str(BENCHMARKS / "landscape.py"), "--work", str(tmp_path / "w"), *argv],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and expect in proc.stderr, proc.stderr
    assert {p.name: p.read_bytes() for p in results.iterdir() if p.is_file()} == before
    assert not (tmp_path / "w").exists()


# ------------------------------------------------------------------ the draws and bad input on a tiny supernet


def test_draws_in_the_band_are_distinct_reproducible_and_stop_with_a_message(monkeypatch):
    """``_common.draw_in_band`` (landscape's and slot_flip's random draws): in-band, distinct,
    skipping the keys given, the same draws for the same seeds; a band that holds too few
    architectures stops with one LvsearchError naming the option instead of drawing forever."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    from _common import DRAWS_PER_ARCH, draw_in_band

    from lvsearch.errors import LvsearchError
    from lvsearch.space import SearchSpace

    space = SearchSpace.resolve("lvbert-elc", 2)  # 18 architectures
    count = lambda a: 100 * a.ops.count("SA")  # noqa: E731 - parameters: 100 per attention slot
    first = draw_in_band(space, count, 100, 100, 3, first_seed=1000)
    assert [s for s, _ in first] == sorted(s for s, _ in first) and all(s >= 1000 for s, _ in first)
    assert all(a.ops.count("SA") == 1 for _, a in first) and len({a.key for _, a in first}) == 3
    assert draw_in_band(space, count, 100, 100, 3, first_seed=1000) == first
    skip = draw_in_band(space, count, 100, 100, 3, first_seed=1000, seen=[first[0][1].key])
    assert first[0][1].key not in {a.key for _, a in skip} and skip[:2] == first[1:]
    assert draw_in_band(space, count, 0, 10**9, 0) == []
    with pytest.raises(LvsearchError, match=rf"--random 2: {2 * DRAWS_PER_ARCH:,} draws of lvbert-elc@2 gave only 0 ") as e:
        draw_in_band(space, count, 1000, 2000, 2)  # no architecture has 10 attention slots
    assert "fix: pass a smaller --random (these draws found 0)" in str(e.value)
    in_band = {a.key for a in (space.sample(random.Random(s)) for s in range(2000)) if count(a) == 100}
    with pytest.raises(LvsearchError, match=f"gave only {len(in_band)} distinct"):
        draw_in_band(space, count, 100, 100, len(in_band) + 1, option="--draws")


def test_a_long_draw_in_the_band_prints_progress_lines(monkeypatch, capsys):
    """``--random 1000000`` drew for minutes without a word: the draw prints ``[progress]``
    lines (every ``$LVSEARCH_PROGRESS_EVERY`` seconds; 0 here, so every draw), with the draws
    tried; ``LVSEARCH_QUIET`` silences them."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    from _common import draw_in_band

    from lvsearch.space import SearchSpace

    space = SearchSpace.resolve("lvbert-elc", 2)
    count = lambda a: 100 * a.ops.count("SA")  # noqa: E731
    monkeypatch.setenv("LVSEARCH_PROGRESS_EVERY", "0")
    monkeypatch.delenv("LVSEARCH_QUIET", raising=False)
    draw_in_band(space, count, 100, 100, 3, first_seed=1000)
    err = capsys.readouterr().err
    assert "[progress] --random: drawing in the band: 3/3 (100%)" in err and " draws · " in err
    monkeypatch.setenv("LVSEARCH_QUIET", "1")
    draw_in_band(space, count, 100, 100, 3, first_seed=1000)
    assert "[progress]" not in capsys.readouterr().err


@pytest.fixture(scope="module")
def land_ws(prepared_corpus: Path, tmp_path_factory) -> dict[str, Path]:
    """A tiny 2-slot supernet (its space holds 18 architectures, all inside bert's band), an
    architecture file of another slot count and a markdown file without the landscape block."""
    from test_reliability import SN_SETS, _sets

    from lvsearch.arch import Arch
    from lvsearch.cli import main

    w = tmp_path_factory.mktemp("land")
    assert main(["train-supernet", "--config", "quickstart", "--data", str(prepared_corpus), "--out", str(w / "sn2"),
                 *_sets([*SN_SETS, "num_slots=2"])]) == 0
    Arch.sequential("sfsf").to_json(w / "pick4.json", space="lvbert-elc")
    (w / "results.md").write_text("# results\n\n<!-- landscape:begin (benchmarks/landscape.py --docs) -->\n")
    return {"W": w, "CORPUS": prepared_corpus, "SN": w / "sn2"}


LAND_CASES = [  # (id, argv, text of the one message); land_2 has no committed plan, landscape has one
    ("random-more-than-the-band-holds", "--supernet {SN} --data {CORPUS} --name land_2 --random 20",
     "--random 20: 20,000 draws of lvbert-elc@2 gave only"),
    ("committed-plan-of-another-space", "--supernet {SN} --data {CORPUS} --random 1",
     "--supernet {SN} is of lvbert-elc@2, but the plan in " + str(BENCHMARKS / "results" / "landscape.json")
     + " is of lvbert-elc@12"),
    ("supernet-missing", "--supernet {W}/nosn --data {CORPUS} --name land_2", "{W}/nosn holds no run"),
    ("data-missing", "--supernet {SN} --name land_2", "--data missing: --supernet and --data are needed to train"),
    ("pick-other-slot-count", "--supernet {SN} --data {CORPUS} --name land_2 --random 1 --picks {W}/pick4.json",
     "{W}/pick4.json has 4 slots"),
    ("report-without-a-plan", "--report --name land_2", "--report without --supernet: no plan in {W}/work/plan.json"),
    ("picks-without-supernet", "--report --picks {W}/pick4.json", "--picks needs --supernet"),
    ("docs-without-the-block", "--report --docs {W}/results.md", "has no landscape block"),
    ("docs-missing", "--report --docs {W}/nope.md", "--docs {W}/nope.md cannot be read"),
    ("work-is-a-file", "--supernet {SN} --data {CORPUS} --name land_2 --random 1 --work {W}/results.md",
     "--work {W}/results.md is a file"),
    ("data-not-a-folder", "--supernet {SN} --data {W}/nodata --name land_2 --random 1",
     "--data {W}/nodata is not a folder"),
    ("fitness-variants-not-a-number", "--report --fitness-variants 128 abc", "argument --fitness-variants"),
    ("fitness-variants-zero", "--report --fitness-variants 0", "argument --fitness-variants: '0' must be ≥ 1"),
    ("max-parallel-inline", "--supernet {SN} --data {CORPUS} --name land_2 --random 1 --max-parallel 2",
     "--max-parallel 2 only applies to --executor local or slurm"),
    ("report-with-supernet-and-no-plan", "--report --supernet {SN} --name land_2",
     "--report: no plan in {W}/work/plan.json or in " + str(BENCHMARKS / "results" / "land_2.json")),
    ("steps-other-than-the-plan", "--report --steps 100",
     "--steps 100: the plan in " + str(BENCHMARKS / "results" / "landscape.json") + " records --steps 2000"),
]


@pytest.mark.parametrize("case", LAND_CASES, ids=[c[0] for c in LAND_CASES])
def test_bad_input_is_one_message_exit_2_nothing_written(land_ws, case):
    from benchmark_cli import assert_benchmark_refuses

    _, argv, expect = case
    err = assert_benchmark_refuses("landscape.py", ["--work", f"{land_ws['W']}/work",
                                                    *[a.format(**land_ws) for a in argv.split()]],
                                   expect.format(**land_ws), {"W": land_ws["W"], "RESULTS": BENCHMARKS / "results"})
    assert "fix:" in err or "error: argument --" in err, err  # argparse's own message names the option


def test_a_new_plan_draws_distinct_band_architectures_after_the_references(land_ws, landscape, tmp_path, monkeypatch):
    """``make_plan`` on a space with room for the draws: the references, then ``--random``
    draws from seed 1000 that repeat none of them, the plan and one architecture file each written."""
    from types import SimpleNamespace

    monkeypatch.setattr(landscape, "NAME", "land_2")  # no committed plan of this name
    monkeypatch.setattr(landscape, "PARAM_COUNTER", {})  # make_plan fills it; the module's own is kept
    args = SimpleNamespace(work=tmp_path / "w", supernet=land_ws["SN"], picks=None, report=False, random=4)
    plan = landscape.make_plan(args)
    names = [r["name"] for r in plan["archs"]]
    assert names[:3] == landscape.REFERENCES and all(n.startswith("random:") for n in names[3:]) and len(names) == 7
    assert min(int(n.split(":")[1]) for n in names[3:]) >= 1000
    keys = [r["key"] for r in plan["archs"][2:]]  # bert and sandwich are one architecture in two slots
    assert len(set(keys)) == len(keys) and plan["space"] == "lvbert-elc@2"
    assert all(plan["band"][0] <= r["params"] <= plan["band"][1] for r in plan["archs"])
    assert sorted(p.name for p in (args.work / "archs").iterdir()) == [f"{i:02d}.json" for i in range(7)]
    assert landscape.make_plan(args) == plan  # the plan is fixed on the first run


def test_a_plan_keeps_its_run_settings_and_refuses_other_ones(land_ws, landscape, tmp_path, monkeypatch, capsys):
    """The report recorded the command-line defaults (steps, dev sequences, threads) as what was
    trained: the plan now records its run settings when made, a later call without them uses
    the plan's, another value of a training setting is refused with the plan left as it was,
    more seeds change the plan; a pick already in the plan under another name is named, not
    dropped silently."""
    from types import SimpleNamespace

    from lvsearch.errors import LvsearchError

    monkeypatch.setattr(landscape, "NAME", "land_2")
    monkeypatch.setattr(landscape, "PARAM_COUNTER", {})
    base = dict(work=tmp_path / "w", supernet=land_ws["SN"], picks=None, report=False, random=2)
    first = SimpleNamespace(**base, steps=300, eval_every=100, dev_sequences=64, threads=2, seeds=None, seeded=None)
    plan = landscape.make_plan(first)
    assert plan["training"] == {"steps": 300, "eval_every": 100, "dev_sequences": 64, "threads": 2,
                                "seeds": landscape.RUN_SET["seeds"], "seeded": landscape.RUN_SET["seeded"]}
    later = SimpleNamespace(**base)  # nothing given: the plan's values, not the defaults
    landscape.make_plan(later)
    assert (later.steps, later.eval_every, later.dev_sequences, later.threads) == (300, 100, 64, 2)
    plan_file = tmp_path / "w" / "plan.json"
    before = plan_file.read_bytes()
    with pytest.raises(LvsearchError, match="--steps 2000: the plan in .* records --steps 300") as e:
        landscape.make_plan(SimpleNamespace(**base, steps=2000))
    assert "drop --steps" in e.value.fix and plan_file.read_bytes() == before
    more = SimpleNamespace(**base, seeds=5)
    assert landscape.make_plan(more)["training"]["seeds"] == 5 == more.seeds
    assert json.loads(plan_file.read_text())["training"]["seeds"] == 5
    before = plan_file.read_bytes()
    with pytest.raises(LvsearchError, match="--seeds 2: the plan in .* records --seeds 5; a smaller --seeds would drop"):
        landscape.make_plan(SimpleNamespace(**base, seeds=2))
    assert plan_file.read_bytes() == before
    twin = tmp_path / "s0" / "random" / "best.json"  # random search picked a planned draw
    twin.parent.mkdir(parents=True)
    shutil.copy(tmp_path / "w" / "archs" / "03.json", twin)
    n = len(json.loads(plan_file.read_text())["archs"])
    landscape.make_plan(SimpleNamespace(**{**base, "picks": [twin]}))
    rows = json.loads(plan_file.read_text())["archs"]
    assert len(rows) == n and rows[3]["also_picks"] == [str(twin)]  # not trained twice, but counted as the pick
    assert landscape.is_random_search_pick(rows[3]) and not landscape.is_random_search_pick(rows[4])
    assert f"{twin}: the same architecture as plan row 03" in capsys.readouterr().out


def test_a_plan_without_run_settings_takes_the_committed_ones_as_a_guess(land_ws, landscape, tmp_path, monkeypatch,
                                                                         capsys):
    """A plan from before the record: the committed result's settings were the report's command
    line, not necessarily what was trained, so they fill what is not given (said so) and an
    explicit value is taken, not refused."""
    from types import SimpleNamespace

    monkeypatch.setattr(landscape, "NAME", "land_2")
    monkeypatch.setattr(landscape, "PARAM_COUNTER", {})
    base = dict(work=tmp_path / "w", supernet=land_ws["SN"], picks=None, report=False, random=2)
    plan = landscape.make_plan(SimpleNamespace(**base))
    old = {k: v for k, v in plan.items() if k != "training"}
    settings = {"steps": 700, "dev_sequences": 96, "seeds": 2, "seeded": 4, "threads_per_run": 1}
    monkeypatch.setattr(landscape, "committed", lambda: {"plan": old, "settings": settings})
    (tmp_path / "w" / "plan.json").unlink()  # continue the committed plan, as on another machine
    args = SimpleNamespace(**base, threads=2)
    got = landscape.make_plan(args)["training"]
    assert got == {"steps": 700, "eval_every": landscape.RUN_SETTINGS["eval_every"], "dev_sequences": 96,
                   "threads": 2, "seeds": 2, "seeded": 4}
    out = " ".join(capsys.readouterr().out.split())
    assert "records no run settings: taking --steps 700, --dev-sequences 96, --seeds 2, --seeded 4 from" in out


def test_a_report_of_a_plan_with_no_finished_run_is_refused(land_ws, landscape, tmp_path, monkeypatch):
    """A plan made but not trained yet: the report was a traceback of the rank-check file
    (fewer than 3 architectures); now one message, and no result file."""
    from types import SimpleNamespace

    from lvsearch.errors import LvsearchError

    monkeypatch.setattr(landscape, "NAME", "land_2")
    monkeypatch.setattr(landscape, "PARAM_COUNTER", {})
    args = SimpleNamespace(work=tmp_path / "w", supernet=land_ws["SN"], picks=None, report=False, random=2, docs=None,
                           fitness_variants=[])
    plan = landscape.make_plan(args)
    with pytest.raises(LvsearchError, match="no finished run of the plan's 5 architectures in") as e:
        landscape.report(args, plan)
    assert "without --report" in e.value.fix and not (landscape.RESULTS / "land_2.json").exists()


def test_a_continued_plan_of_other_widths_is_refused(land_ws, landscape, tmp_path, monkeypatch):
    """A plan continued with a supernet of the same space but other widths (bert's parameter
    count and so the band differ) would train architectures of one size and report them
    against the band of another: ``make_plan`` refuses it and leaves the plan as it was."""
    from types import SimpleNamespace

    from lvsearch.errors import LvsearchError

    monkeypatch.setattr(landscape, "NAME", "land_2")
    monkeypatch.setattr(landscape, "PARAM_COUNTER", {})
    args = SimpleNamespace(work=tmp_path / "w", supernet=land_ws["SN"], picks=None, report=False, random=2)
    plan = landscape.make_plan(args)
    assert landscape.make_plan(args) == plan  # the same widths continue
    plan_file = args.work / "plan.json"
    other = {**plan, "bert_params": plan["bert_params"] + 64, "band": [plan["band"][0] + 61, plan["band"][1] + 67]}
    plan_file.write_text(json.dumps(other))
    before = plan_file.read_bytes()
    with pytest.raises(LvsearchError, match="has other widths than the plan in") as e:
        landscape.make_plan(args)
    assert f"{plan['bert_params']:,} parameters on it" in str(e.value)
    assert plan_file.read_bytes() == before


def test_gate_reports_the_room_with_the_fit_refitted_without_the_reference_orders(landscape, monkeypatch):
    """`bert` and `sandwich` sit far below the band's draws, so the additive fit explains them
    and its leave-one-out R² says little about the top: the gate adds the room with the fit
    refitted on the draws and picks alone (``without_references``), the rule itself unchanged."""
    monkeypatch.setattr(landscape, "PARAM_COUNTER", {})  # no supernet: no band draws of the fit
    rng = random.Random(1)
    rows = []
    for i in range(14):  # draws: noise only, no per-slot structure
        ops = "".join(rng.choice("fc") for _ in range(4))  # the draws hold no attention slot
        seeds = [0.29 + rng.gauss(0, 0.004) for _ in range(3 if i < 4 else 1)]
        rows.append(_row(f"{i:02d}", "random", f"random:{1000 + i}", seeds, ops))
    rows += [_row("b", "reference", "bert", [0.20, 0.21, 0.205], "sfsf"),
             _row("w", "reference", "sandwich", [0.19, 0.18, 0.20], "ssfs"),
             _row("p", "pick", "s0/random/best.json", [0.291], "cfcs")]
    for r in rows:
        r.update(params=1000, beats_floor_all=r["accuracy_mean"] > 0.25)
    s = landscape.summarize(rows, BAND)
    g, q = s["gate"], s["gate"]["without_references"]
    assert q["left_out"] == ["bert", "sandwich"] and q["additive_n"] == len(rows) - 2
    assert q["additive_loo_r2"] == pytest.approx(landscape.additive_fit(rows[:14] + rows[16:])["loo_r2"])
    assert s["additive"]["loo_r2"] > 0.3 > q["additive_loo_r2"] + 0.3  # the references carry the fit's R²
    assert q["random_search_mean"] == g["random_search_mean"] == pytest.approx(0.291)
    assert q["best_shrunk"] == pytest.approx(g["best_shrunk"])  # the same candidates and shrinkage
    assert s["gate"]["room"] == pytest.approx(g["estimate"] - 0.291)
