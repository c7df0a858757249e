"""Fitness that resolves the top: loss fitness, racing over dev targets, the memo's target
sets, aging evolution, noise measures and resume with every new switch — on a tiny supernet
trained on the real shared corpus (correctness only; speed lives in benchmarks/)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from lvsearch.arch import Arch
from lvsearch.cli import main
from lvsearch.data.loader import fixed_dev_set
from lvsearch.data.shards import PreparedData
from lvsearch.errors import LvsearchError
from lvsearch.search.evaluator import EvalResult, FunctionEvaluator, SupernetEvaluator
from lvsearch.search.evolution import Search, SearchConfig
from lvsearch.search.job import EvolveOptions, evolve
from lvsearch.search.noise import count_ties, noise_report
from lvsearch.search.schedule import Racing
from lvsearch.stats import bootstrap_se
from lvsearch.space import SearchSpace
from lvsearch.train.supernet import load_supernet, train_supernet

TINY = [
    "space=lvbert-elc", "num_slots=5", "model.hidden=32", "model.embedding=16", "model.ff_inner=64",
    "model.heads=2", "model.conv_kernel=3", "train.seq_len=32", "train.batch_size=8", "train.steps=20",
    "train.warmup_steps=2", "train.log_every=10", "train.eval_every=0", "train.checkpoint_every=20",
    "eval.dev_sequences=32", "eval.panel=[bert]",
]


@pytest.fixture(scope="module")
def supernet_run(prepared_corpus: Path, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("fitness") / "sn"
    train_supernet("quickstart", prepared_corpus, out, overrides=TINY, show_progress=False)
    return out


@pytest.fixture(scope="module")
def loaded_dev(supernet_run: Path, prepared_corpus: Path):
    loaded = load_supernet(supernet_run)
    dev = fixed_dev_set(PreparedData.open(prepared_corpus), num_sequences=24, seq_len=32, seed=loaded.config.eval.seed)
    return loaded, dev


def _pool(space, n: int, seed: int = 0):
    rng, out = random.Random(seed), {}
    while len(out) < n:
        a = space.sample(rng)
        out.setdefault(a.key, a)
    return list(out.values())


def test_racing_returns_the_exact_full_set_score_for_every_survivor(loaded_dev):
    loaded, dev = loaded_dev
    archs = _pool(loaded.space, 12)
    for metric in ("accuracy", "loss"):
        # the reference: the same chunks (rungs are multiples of batch_size), the same dev order, no cut
        ref_ev = SupernetEvaluator(loaded.supernet, dev, batch_size=8, fitness=metric, racing=Racing((8, 16), 1.0001))
        ref = {r.key: r for r in ref_ev.evaluate_many(archs)}
        assert all(r.complete for r in ref.values())  # eta barely above 1: ceil(n / eta) = n keeps all
        ev = SupernetEvaluator(loaded.supernet, dev, batch_size=8, fitness=metric, racing=Racing((8, 16), 3.0))
        got = {r.key: r for r in ev.evaluate_many(archs)}
        kept = [r for r in got.values() if r.complete]
        assert len(kept) == 2  # 12 -> ceil(12/3) = 4 -> ceil(4/3) = 2
        for r in kept:  # exactly the full-set score, every field
            assert r == ref[r.key]
        part = [r for r in got.values() if r.partial]
        assert len(part) == 10 and all(r.targets < ref[r.key].targets for r in part)
        # the survivors of a rung are the best of the batch at that rung
        first = {r.key: r for r in SupernetEvaluator(loaded.supernet, dev, batch_size=8, fitness=metric,
                                                     racing=Racing((8,), 1.5)).evaluate_many(archs)}
        cut8 = sorted(part, key=lambda r: r.targets)[:8]  # stopped at rung 1
        assert {r.targets for r in cut8} == {min(r.targets for r in part)}
        assert {r.key for r in first.values() if r.complete} >= {r.key for r in kept}
    # the full-set score with racing equals the plain evaluator's score on the same set (accuracy)
    plain = {r.key: r for r in SupernetEvaluator(loaded.supernet, dev, fitness="accuracy").evaluate_many(archs)}
    for r in kept:
        assert r.targets == plain[r.key].targets
    acc_ev = SupernetEvaluator(loaded.supernet, dev, batch_size=8, fitness="accuracy", racing=Racing((8, 16), 3.0))
    for r in acc_ev.evaluate_many(archs):
        if r.complete:
            assert r.fitness == plain[r.key].fitness == r.accuracy


def test_loss_fitness_is_minus_the_loss_and_accuracy_is_kept(loaded_dev):
    loaded, dev = loaded_dev
    archs = _pool(loaded.space, 6, seed=1)
    acc = SupernetEvaluator(loaded.supernet, dev, fitness="accuracy").evaluate_many(archs)
    los = SupernetEvaluator(loaded.supernet, dev, fitness="loss").evaluate_many(archs)
    for a, b in zip(acc, los):
        assert a.fitness == a.accuracy == b.accuracy and b.fitness == -b.loss and a.loss == b.loss
    with pytest.raises(LvsearchError, match="unknown fitness"):
        SupernetEvaluator(loaded.supernet, dev, fitness="perplexity")
    for bad in [(16, 8), (0,), (24,)]:
        with pytest.raises(LvsearchError, match="racing"):
            SupernetEvaluator(loaded.supernet, dev, racing=Racing(bad))
    with pytest.raises(LvsearchError, match="eta"):
        SupernetEvaluator(loaded.supernet, dev, racing=Racing((8,), 1.0))
    # older state entries (no accuracy/partial keys) read as complete accuracy results
    old = EvalResult.from_dict({"key": "sffff", "fitness": 0.2, "loss": 5.0, "params": 1, "flops": 1.0, "targets": 9})
    assert old.accuracy == 0.2 and old.complete


def test_per_target_outcomes_match_the_scores(loaded_dev):
    loaded, dev = loaded_dev
    archs = _pool(loaded.space, 5, seed=2)
    ev = SupernetEvaluator(loaded.supernet, dev, batch_size=10)
    per = ev.per_target(archs)
    for r in SupernetEvaluator(loaded.supernet, dev, fitness="loss").evaluate_many(archs):
        o = per[r.key]
        assert o["correct"].size == o["loss"].size == r.targets
        assert o["correct"].mean() == r.accuracy
        assert o["loss"].mean() == pytest.approx(r.loss, rel=1e-5)
    rep = noise_report(per, [a.key for a in archs], "loss")
    assert len(rep["se"]) == 5 and len(rep["paired_se_neighbours"]) == 4 and rep["targets"] == r.targets


def test_noise_measures():
    rng = np.random.default_rng(0)
    v = rng.normal(size=4000)
    assert bootstrap_se(v) == pytest.approx(v.std(ddof=1) / np.sqrt(v.size), rel=0.1)
    assert bootstrap_se(np.ones(10)) == 0.0
    assert count_ties([0.2, 0.3, 0.2, 0.1, 0.3]) == 4 and count_ties([1.0, 2.0]) == 0
    # two candidates with strongly correlated per-target errors: paired SE far below either SE
    base = rng.normal(size=3000)
    out = {"a": {"correct": base > 0, "loss": 5 + base}, "b": {"correct": base > 0.01, "loss": 5.01 + base + 0.01 * rng.normal(size=3000)}}
    rep = noise_report(out, ["a", "b"], "loss")
    assert rep["paired_se_neighbours"][0] < rep["se"][0] / 10
    # two candidates are one pair, not an order: no "resolves the top-k" verdict either way
    from lvsearch.search.noise import verdict_lines

    assert rep["resolved"] is None and "too few top-k members (2)" in verdict_lines(rep)[1]
    out["c"] = {"correct": base > 0.02, "loss": 5.02 + base}
    assert noise_report(out, ["a", "b", "c"], "loss")["resolved"] in (True, False)


def test_pick_comparison_verdict_follows_the_paired_difference():
    """EA vs random-search picks: the verdict follows the paired difference against its standard
    error in both directions, and the lines say so."""
    from lvsearch.search.noise import pick_comparison, pick_comparison_lines

    rng = np.random.default_rng(1)
    base = rng.normal(size=3000)
    jitter = 0.01 * rng.normal(size=3000)
    out = {"ea": {"correct": base > 0, "loss": 5 + base}, "rs": {"correct": base > 0, "loss": 5.02 + base + jitter},
           "tie": {"correct": base > 0, "loss": 5 + base + jitter}}
    ahead = pick_comparison(out, "ea", "rs", "loss")
    assert ahead["verdict"] == "EA ahead" and ahead["diff"] == pytest.approx(0.02, abs=0.002) and ahead["z"] > 2
    assert pick_comparison(out, "rs", "ea", "loss")["verdict"] == "random search ahead"
    assert pick_comparison(out, "ea", "tie", "loss")["verdict"] == "within noise"
    assert pick_comparison(out, "ea", "ea", "loss")["verdict"] == "same architecture"
    lines = pick_comparison_lines(ahead)
    assert "the EA's pick is ahead" in lines[0] and "EA − random +0.0199 nats" in lines[0] and "several search seeds" in lines[1]
    assert "cannot separate" in pick_comparison_lines(pick_comparison(out, "ea", "tie", "loss"))[0]
    acc = pick_comparison(out, "ea", "rs", "accuracy")  # identical 0/1 outcomes: no difference, no SE
    assert acc["diff"] == 0 and acc["paired_se"] == 0 and acc["z"] is None and acc["verdict"] == "within noise"
    assert " pp" in pick_comparison_lines(acc)[0]


def test_pick_comparison_file_is_validated(tmp_path: Path):
    """A compare_random.json of the wrong shape is one error naming the file, not a KeyError."""
    import json

    from lvsearch.search.noise import pick_comparison, read_pick_comparison

    rng = np.random.default_rng(2)
    out = {k: {"correct": rng.random(50) > 0.5, "loss": rng.random(50)} for k in ("a", "b")}
    good = tmp_path / "compare_random.json"
    good.write_text(json.dumps(pick_comparison(out, "a", "b", "loss")))
    assert read_pick_comparison(good)["ea"]["key"] == "a"
    rec = json.loads(good.read_text())
    for bad, field in (({}, "field metric is missing"), ([], "input should be a valid dictionary"),
                       ({**rec, "ea": {"fitness": "x"}}, "field ea.fitness: input should be a valid number"),
                       ({**rec, "verdict": "EA wins"}, "field verdict"), ({**rec, "z": float("nan"), "diff": None},
                                                                         "field diff")):
        good.write_text(json.dumps(bad))
        with pytest.raises(LvsearchError, match=f"search comparison {good} is malformed: {field}"):
            read_pick_comparison(good)


def test_landscape_verdict_follows_headroom_and_power(tmp_path: Path):
    """The landscape lines say search cannot be shown to beat random search exactly when the
    best search's gain over a median random architecture is below the 6-seed detectable
    difference, warn about another space, and refuse malformed files with one message."""
    import json

    from lvsearch.errors import LvsearchError
    from lvsearch.search.noise import landscape_lines

    def summary(best_all: float, mde6: float, arms6: float | None = None) -> dict:
        mdes = {"training_noise_only": {"6": mde6}}
        if arms6 is not None:
            mdes["arms_ea_minus_random_search"] = {"6": arms6}
        return {"distribution_random": {"n": 19, "median": 0.275, "top_decile_threshold": 0.286, "best": 0.2864},
                "distribution_all": {"best": best_all}, "sigma_seed": {"pooled_std": 0.006},
                "power": {"minimum_detectable_difference": mdes},
                "best_of_k_random": [{"k": 1, "expected_best": 0.2757}, {"k": 5, "expected_best": 0.2844}]}

    def lines(data, space=None) -> str:
        path = tmp_path / "landscape.json"
        path.write_text(json.dumps(data))
        return "\n".join(landscape_lines(path, space=space))

    # the room is the best trained minus the expected best of the largest k random draws (0.2844 at k = 5)
    small = lines({"summary": summary(best_all=0.2864, mde6=0.012)})  # room 0.2 pp < 1.2 pp
    assert "no search can be shown to beat random search with 6 seeds" in small
    assert "0.2 pp above the expected best of 5 random architectures" in small and "≥ 1.2 pp" in small
    assert "below 2" in small
    between = lines({"summary": summary(best_all=0.2990, mde6=0.012, arms6=0.023)})  # 1.2 ≤ 1.5 < 2.3 pp
    assert "expect no detectable difference with 6 seeds" in between and "≥ 2.3 pp with search-seed noise" in between
    large = lines({"summary": summary(best_all=0.3013, mde6=0.012)})  # room 1.7 pp ≥ 1.2 pp
    assert "no search can be shown" not in large and "expect no" not in large and "measure it" in large
    assert "best trained so far (one seed) 0.3013" in large and "search has room to pay off" in large
    no_curve = summary(best_all=0.3013, mde6=0.03)
    no_curve["best_of_k_random"] = []  # falls back to the median: 2.6 pp < 3.0 pp
    text = lines({"summary": no_curve})
    assert "2.6 pp above a median random architecture" in text and "no search can be shown" in text
    other = lines({"summary": summary(0.3013, 0.012), "settings": {"space": "lvbert-elc@12", "steps": 2000}},
                  space="lvbert@24")
    assert "(lvbert-elc@12, 2000-step retrains)" in other and "not on this supernet's lvbert@24" in other
    no_sigma = summary(0.3013, 0.012)
    no_sigma["sigma_seed"] = {"pooled_std": 0}
    assert "headroom: unmeasured" in lines({"summary": no_sigma})
    for bad in ([], {"summary": {"distribution_random": {"n": 3}}}, {"summary": dict(summary(0.3, 0.01), power="oops")},
                {"summary": dict(summary(0.3, 0.01), best_of_k_random={"k": 1})}):
        with pytest.raises(LvsearchError, match="landscape file .* is malformed: "):
            lines(bad)
    # numbers no landscape has (a power verdict was printed, or an OverflowError)
    for edit, field in ((lambda s: s["distribution_random"].update(median=float("inf")), "distribution_random.median"),
                        (lambda s: s["sigma_seed"].update(pooled_std=-0.006), "sigma_seed.pooled_std"),
                        (lambda s: s["distribution_all"].update(best=10**400), "distribution_all.best")):
        bad = summary(0.3013, 0.012)
        edit(bad)
        with pytest.raises(LvsearchError, match=f"is malformed: field summary.{field}"):
            lines({"summary": bad})


def test_landscape_room_line_follows_the_gate(tmp_path: Path):
    """With the landscape's room rule (``summary.gate``), the lines say whether a search win is
    detectable from that rule, and the headroom line does not claim room the rule denies."""
    import json

    from lvsearch.errors import LvsearchError
    from lvsearch.search.noise import landscape_lines

    def lines(room: float | None, detect: float = 0.0126) -> str:
        gate = {"seeds": 10, "best_shrunk": 0.281, "random_search_mean": 0.2917, "room": room,
                "detectable": {"training_noise_only": detect, "arms_ea_minus_random_search": 0.0163}}
        summary = {"distribution_random": {"n": 19, "median": 0.2822, "top_decile_threshold": 0.2889, "best": 0.3013},
                   "sigma_seed": {"pooled_std": 0.009}, "gate": gate}
        path = tmp_path / "landscape.json"
        path.write_text(json.dumps({"summary": summary}))
        return "\n".join(landscape_lines(path))

    none = lines(-0.0107)  # the 24-slot gate's numbers: headroom 2.13 σ, but no room
    assert "room for a 10-seed search test" in none and "-1.07 pp, against 1.26 pp" in none
    assert "no search can be shown to beat random search here" in none and "search has room" not in none
    some = lines(0.02)
    assert "+2.00 pp" in some and "a search win is detectable here" in some and "search has room to pay off" in some
    assert "room for" not in lines(None)  # no random-search picks yet: no rule, no line
    with pytest.raises(LvsearchError, match="field summary.gate.seeds"):
        path = tmp_path / "landscape.json"
        data = json.loads(path.read_text())
        data["summary"]["gate"]["seeds"] = "ten"
        path.write_text(json.dumps(data))
        landscape_lines(path)


def test_memo_never_mixes_scores_made_on_different_target_sets(supernet_run: Path, tmp_path: Path):
    """A search resumed with another dev set, fitness or racing plan is refused, so memo
    entries from the state (scored on its targets) never meet scores on other targets."""
    out = tmp_path / "s"
    cfg = SearchConfig(population=6, iterations=2, topk=3)
    base = dict(supernet=supernet_run, out=out, dev_sequences=24)
    evolve(EvolveOptions(**base, fitness="loss", racing=(8,)), cfg, show_progress=False, max_iterations=1)
    for change, word in ((dict(fitness="accuracy", racing=(8,)), "fitness"), (dict(fitness="loss"), "racing"),
                         (dict(fitness="loss", racing=(16,)), "racing"),
                         (dict(fitness="loss", racing=(8,), dev_sequences=20), "dev_sequences")):
        opts = EvolveOptions(**{**base, **change, "resume": True})
        with pytest.raises(LvsearchError, match=word):
            evolve(opts, cfg, show_progress=False)
    res = evolve(EvolveOptions(**base, fitness="loss", racing=(8,), resume=True), cfg, show_progress=False)
    res = res["evolution"]
    assert len(res.history) == 12 and all(r.complete for r in res.topk)
    assert all(r.targets == res.topk[0].targets for r in res.topk)  # every top-k member on the full set


def _toy(space, target):
    return FunctionEvaluator(lambda a: sum(x == y for x, y in zip(a.ops, target.ops)) / space.num_slots)


def test_aging_evolution_keeps_the_population_size_and_ages_out_the_oldest():
    space = SearchSpace.load("lvbert-elc").with_num_slots(8)
    target = space.sample(random.Random(3))
    seen_queues = []

    def check(search, t):
        keys = [h["key"] for h in search.history]
        queue = search.strategy.queue
        assert len(queue) == search.config.population
        assert queue == keys[-search.config.population:]  # the newest P, oldest first
        seen_queues.append(list(queue))

    cfg = SearchConfig(strategy="aging", population=8, iterations=5, topk=3, seed=2, tournament=3, cycle=3)
    res = Search(space, _toy(space, target), cfg, on_iteration=check).run()
    assert len(res.history) == 40 and len({h["key"] for h in res.history}) == 40
    assert len(seen_queues) == 5 and not set(seen_queues[0]) & set(seen_queues[1])
    assert [c["best"] for c in res.curve] == sorted(c["best"] for c in res.curve)
    # it climbs a toy fitness (mutation only) better than random search does on average
    best = {"aging": [], "random": []}
    for strategy in best:
        for seed in range(3):
            c = SearchConfig(strategy=strategy, population=12, iterations=8, topk=4, seed=seed)
            best[strategy].append(Search(space, _toy(space, target), c).run().best.fitness)
    assert sum(best["aging"]) > sum(best["random"]), best
    with pytest.raises(LvsearchError, match="aging"):
        SearchConfig(strategy="evolution", tournament=3).resolved()
    with pytest.raises(LvsearchError, match="--tournament"):
        SearchConfig(strategy="aging", population=4, topk=2, tournament=5).resolved()


@pytest.mark.parametrize("strategy", ["aging", "evolution"])
def test_resume_is_exact_with_every_new_switch(supernet_run: Path, tmp_path: Path, capsys, strategy: str):
    args = ["--population", "6", "--iterations", "3", "--topk", "3", "--dev-sequences", "24", "--fitness", "loss",
            "--racing", "8", "--racing-eta", "2", "--strategy", strategy, "--compare-random"]
    full = tmp_path / "full"
    assert main(["evolve", "--supernet", str(supernet_run), "--out", str(full), *args]) == 0
    cut = tmp_path / "cut"
    opts = EvolveOptions(supernet=supernet_run, out=cut, dev_sequences=24, fitness="loss", racing=(8,), racing_eta=2.0,
                         compare_random=True)
    evolve(opts, SearchConfig(strategy=strategy, population=6, iterations=3, topk=3), show_progress=False,
           max_iterations=1)
    # resume takes fitness, racing and dev size from the state when they are not repeated
    assert main(["evolve", "--supernet", str(supernet_run), "--out", str(cut), "--resume", "--compare-random"]) == 0
    capsys.readouterr()
    for name in ("state.json", "history.jsonl", "best.json", "random/state.json", "random/history.jsonl"):
        assert (full / name).read_bytes() == (cut / name).read_bytes(), name
    hist = [json.loads(x) for x in (full / "history.jsonl").read_text().splitlines()]
    assert any(h["partial"] for h in hist) and all(h["accuracy"] is not None for h in hist)
    best = json.loads((full / "best.json").read_text())["meta"]
    assert best["fitness_metric"] == "loss" and best["fitness"] == -best["loss"]
    # --compare-random pairs the two picks on the fitness's dev targets, resumed or not
    cmp_full, cmp_cut = (json.loads((d / "compare_random.json").read_text()) for d in (full, cut))
    assert cmp_full == cmp_cut and cmp_full["ea"]["key"] == Arch.from_dict(json.loads((full / "best.json").read_text())).key
    assert cmp_full["ea"]["fitness"] == pytest.approx(best["fitness"], abs=1e-6)


def test_bad_switches(supernet_run: Path, tmp_path: Path, capsys):
    def bad(*argv: str, match: str) -> None:
        try:
            code = main(["evolve", "--supernet", str(supernet_run), "--out", str(tmp_path / "x"), *argv])
        except SystemExit as e:  # argparse's own usage error
            code = e.code
        text = capsys.readouterr()
        text = text.out + text.err
        assert code == 2 and match in text and "Traceback" not in text, text
        assert not (tmp_path / "x" / "state.json").exists()

    bad("--racing", "16,8", "--dev-sequences", "24", match="increasing")
    bad("--racing", "24", "--dev-sequences", "24", match="not below --dev-sequences")
    bad("--racing", "8", "--strategy", "nsga2", match="NSGA-II")
    bad("--batch-size", "0", match="--batch-size must be ≥ 1")
    bad("--racing", "a,b", match="not a list of sequence counts")
    bad("--tournament", "3", match="--strategy aging")


def test_rank_check_reuse_file_is_validated(tmp_path: Path):
    """--reuse: malformed rows, repeats, NaN or out-of-range accuracies, bad steps/pool,
    another space and a hand-edited result are refused with the file named."""
    import copy

    from lvsearch.search.rank_check import check_reuse, standalone_digest

    space = SearchSpace.load("lvbert-elc").with_num_slots(5)
    rows = [{"key": a.key, "standalone_accuracy": 0.1 + 0.01 * i, "standalone_loss": 6.0 - i}
            for i, a in enumerate(_pool(space, 4))]
    good = {"archs": rows, "steps": 10, "pool": 8, "space": space.to_dict(), "standalone_sha256": standalone_digest(rows)}
    assert check_reuse(good, "rc.json", space)["steps"] == 10

    def refused(edit, match: str) -> None:
        d = copy.deepcopy(good)
        edit(d)
        with pytest.raises(LvsearchError, match=match) as e:
            check_reuse(d, "rc.json", space)
        assert "rc.json" in str(e.value)

    refused(lambda d: d.pop("steps"), "'steps' must be an integer")
    refused(lambda d: d.update(steps="10"), "'steps' must be an integer")
    refused(lambda d: d.update(steps=0), "'steps' must be an integer")
    refused(lambda d: d.update(pool=2), "'pool' must be an integer")
    refused(lambda d: d.update(archs=[1, 2, 3]), "is not an object with a 'key'")
    refused(lambda d: d.update(archs=None), "at least 3")
    refused(lambda d: d["archs"][1].update(standalone_accuracy="0.2"), "not a number in")
    refused(lambda d: d["archs"][1].update(standalone_accuracy=None), "not a number in")
    refused(lambda d: d["archs"][1].update(standalone_accuracy=float("nan")), "not a number in")
    refused(lambda d: d["archs"][2].update(key=d["archs"][0]["key"]), "appears 2 times")
    refused(lambda d: d["archs"][1].update(standalone_accuracy=0.9), "recorded sha256")
    refused(lambda d: d.update(space=SearchSpace.load("lvbert").with_num_slots(5).to_dict()), "another search space")
    refused(lambda d: d.update(pool=space.size() + 1), "'pool' .* is more architectures than the search space")
    # no digest: an edited file cannot be told from a written one (τ 'undefined', exit 0)
    refused(lambda d: d.pop("standalone_sha256"), "'standalone_sha256' is missing")
    refused(lambda d: d.update(standalone_sha256=5), "'standalone_sha256' is not a string")
    old = copy.deepcopy(good)  # a file written before the space was recorded still loads
    del old["space"]
    assert len(check_reuse(old, "rc.json", space)["archs"]) == 4



def test_written_reuse_file_is_read_back_and_a_short_pool_is_refused(tmp_path: Path):
    """write_reuse_file (the benchmarks' one writer of the --reuse format) writes what check_reuse
    accepts, and refuses a pool check_reuse would refuse (fewer than 3, a repeated key)."""
    import json

    from lvsearch.search.rank_check import check_reuse, write_reuse_file

    space = SearchSpace.load("lvbert-elc").with_num_slots(5)
    rows = [{"key": a.key, "standalone_accuracy": 0.1 + 0.01 * i, "standalone_loss": 6.0 - i, "params": 100}
            for i, a in enumerate(_pool(space, 4))]
    path = write_reuse_file(tmp_path / "rc.json", rows, steps=10, what="test")
    back = check_reuse(json.loads(path.read_text()), str(path), space)
    assert back["steps"] == 10 and back["pool"] == 4 and [r["key"] for r in back["archs"]] == [r["key"] for r in rows]
    with pytest.raises(LvsearchError, match="at least 3 distinct"):
        write_reuse_file(tmp_path / "short.json", rows[:2], steps=10, what="test")
    with pytest.raises(LvsearchError, match="at least 3 distinct"):
        write_reuse_file(tmp_path / "repeat.json", [rows[0], *rows[:3]], steps=10, what="test")
    assert not (tmp_path / "short.json").exists() and not (tmp_path / "repeat.json").exists()

def test_raced_first_population_fills_the_topk(supernet_run: Path, tmp_path: Path, capsys):
    """Racing alone completes about P/eta of a batch per rung (here 2 of 8 at eta 6, one rung):
    the first batch now completes what the top-k lacks, so topk.json holds --topk complete
    members after iteration 1 and the EA breeds from k parents (it held 2, then 4 before the
    fix); later batches race as before (2 complete)."""
    args = ["--population", "8", "--iterations", "2", "--topk", "4", "--dev-sequences", "24", "--racing", "8",
            "--racing-eta", "6"]
    assert main(["evolve", "--supernet", str(supernet_run), "--out", str(tmp_path / "s"), *args]) == 0
    capsys.readouterr()
    hist = [json.loads(x) for x in (tmp_path / "s" / "history.jsonl").read_text().splitlines()]
    first = [h for h in hist if h["iteration"] == 0]
    assert len(hist) == 16 and sum(not h["partial"] for h in first) == 4
    assert sum(not h["partial"] for h in hist if h["iteration"] == 1) == 2
    topk = json.loads((tmp_path / "s" / "topk.json").read_text())["topk"]
    assert len(topk) == 4 and not any(r["partial"] for r in topk)
    # every result says what it cost and its score at each level it reached
    assert {h["sequences"] for h in hist} == {8, 24}
    assert all(len(h["scores"]) == (1 if h["partial"] else 2) and h["scores"][-1] == h["fitness"] for h in hist)
    state = json.loads((tmp_path / "s" / "state.json").read_text())
    assert state["passes"] == sum(h["sequences"] for h in hist) == state["curve"][-1]["passes"]


def test_fitness_is_defined_once():
    """The metric → number mapping, its default and the legacy rule live in
    lvsearch/search/fitness.py; the others use it (a search of the package finds no second
    mapping), and a missing recorded fitness means accuracy (state files from before it was
    recorded) only through Fitness.of_record."""
    import re

    from lvsearch.search.fitness import DEFAULT, LEGACY, Fitness

    assert DEFAULT.metric == "loss" and LEGACY.metric == "accuracy"
    assert Fitness.of_record({}) == LEGACY and Fitness.of_record({"fitness": "loss"}) == DEFAULT
    assert Fitness("loss").score(accuracy=0.3, loss=4.5) == -4.5 and Fitness("accuracy").of_row({"accuracy": 0.3}) == 0.3
    assert Fitness("loss").from_sums(3, 9.0, 2) == -4.5 and Fitness("accuracy").from_sums(3, 9.0, 4) == 0.75
    assert Fitness("accuracy").difference_unit == ("pp", 100.0) and "nats" in Fitness("loss").axis_label
    with pytest.raises(LvsearchError, match="unknown fitness"):
        Fitness("perplexity")
    root = Path(__file__).resolve().parents[1] / "lvsearch"
    pattern = re.compile(r"""(fitness|metric)\S*\s*(==|!=)\s*["'](accuracy|loss)["']|get\(\s*["']fitness["']\s*,\s*["']""")
    files = [p for d in ("search", "quickstart") for p in (root / d).rglob("*.py")] + list(root.glob("*.py"))
    found = [f"{p.relative_to(root)}:{i}" for p in files if p.name != "fitness.py"
             for i, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]
    assert found == [], f"a second fitness mapping or default: {found}"
