"""Search: exact memo + prefix cache, DEAP evolution vs random, resume, 2-process equality,
outputs, rank check and bad input — on a tiny supernet trained on the real shared corpus."""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from _shared import run_cli

from lvsearch.arch import Arch
from lvsearch.cli import main
from lvsearch.data.loader import fixed_dev_set
from lvsearch.data.shards import PreparedData
from lvsearch.model import ModelDims, Supernet
from lvsearch.search.evaluator import Constraints, FunctionEvaluator, SupernetEvaluator
from lvsearch.search.evolution import Search, SearchConfig
from lvsearch.search.strategies.breeding import arch_of
from lvsearch.search.job import EvolveOptions, evolve
from lvsearch.search.schedule import shard_subtrees
from lvsearch.space import SearchSpace
from lvsearch.train.supernet import load_supernet, train_supernet

REPO = Path(__file__).resolve().parents[1]
TINY = [
    "num_slots=5", "model.hidden=32", "model.embedding=16", "model.ff_inner=64", "model.heads=2",
    "model.conv_kernel=3", "train.seq_len=32", "train.batch_size=8", "train.steps=20", "train.warmup_steps=2",
    "train.log_every=10", "train.eval_every=0", "train.checkpoint_every=20", "eval.dev_sequences=32",
    "eval.panel=[bert]",
]
SMALL = ["--population", "8", "--iterations", "3", "--topk", "3", "--dev-sequences", "24"]


@pytest.fixture(scope="module")
def supernet_run(prepared_corpus: Path, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("search") / "sn"
    train_supernet("quickstart", prepared_corpus, out, overrides=TINY, show_progress=False)
    return out


def history(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "history.jsonl").read_text().splitlines()]


# ----------------------------------------------------------------------------------------
# Evaluator
# ----------------------------------------------------------------------------------------


def _exactness(net, dev, space, n_archs, seed):
    rng = random.Random(seed)
    base = [space.sample(rng) for _ in range(n_archs // 2)]
    # EA-like population: mutants share long prefixes with their parents
    archs = list({a.key: a for a in base + [space.mutate(a, rng, 0.2) for a in base]}.values())
    ref = SupernetEvaluator(net, dev, use_cache=False, batch_size=16, fitness="accuracy")
    fast = SupernetEvaluator(net, dev, use_cache=True, batch_size=16, fitness="accuracy")
    tight = SupernetEvaluator(net, dev, use_cache=True, batch_size=16, fitness="accuracy", cache_bytes=3 * fast.state_bytes)
    r0, r1, r2 = ref.evaluate_many(archs), fast.evaluate_many(archs), tight.evaluate_many(archs)
    for a, b, c in zip(r0, r1, r2):
        assert a.fitness == b.fitness == c.fitness and a.loss == b.loss == c.loss, a.key
        assert a.params == b.params and a.flops == b.flops
    assert fast.stats.slot_runs < tight.stats.slot_runs < ref.stats.slot_runs
    # memo: nothing is run again
    runs = fast.stats.slot_runs
    again = fast.evaluate_many(list(reversed(archs)))
    assert fast.stats.slot_runs == runs and fast.stats.memo_hits == len(archs)
    assert [r.key for r in again] == [a.key for a in reversed(archs)]
    return r0


def test_memo_and_prefix_cache_are_exact(supernet_run: Path, prepared_corpus: Path):
    loaded = load_supernet(supernet_run)
    data = PreparedData.open(prepared_corpus)
    dev = fixed_dev_set(data, num_sequences=20, seq_len=32, seed=loaded.config.eval.seed)
    res = _exactness(loaded.supernet, dev, loaded.space, 14, 0)
    assert all(0 <= r.fitness <= 1 and r.loss > 0 for r in res)
    # the same on ELC connectivity (slot n reads any earlier state): an untrained elc supernet
    elc = SearchSpace.load("lvbert-elc").with_num_slots(5)
    torch.manual_seed(0)
    net = Supernet(elc, ModelDims(vocab_size=data.vocab_size, hidden=32, embedding=16, ff_inner=64, heads=2,
                                  conv_kernel=3, pad_id=data.special_ids.pad))
    _exactness(net, dev, elc, 10, 1)


def test_prefix_cache_is_exact_with_per_op_alpha(prepared_corpus: Path):
    """``model.mixing_per_op``: slot n's α̂ row is chosen by slot n's op, which the trie keys
    on; every op's matrix is randomised so that sharing a state across ops would show."""
    data = PreparedData.open(prepared_corpus)
    dev = fixed_dev_set(data, num_sequences=20, seq_len=32, seed=3)
    elc = SearchSpace.load("lvbert-elc").with_num_slots(5)
    torch.manual_seed(0)
    net = Supernet(elc, ModelDims(vocab_size=data.vocab_size, hidden=32, embedding=16, ff_inner=64, heads=2,
                                  conv_kernel=3, pad_id=data.special_ids.pad), mixing_per_op=True)
    with torch.no_grad():
        net.mixing.logits.copy_(torch.randn(net.mixing.logits.shape, generator=torch.Generator().manual_seed(1)))
    res = _exactness(net, dev, elc, 10, 1)
    # the same architecture on the extracted standalone model scores the same
    from lvsearch.train.objectives import mlm_sums

    arch = next(Arch.from_key(r.key) for r in res if not Arch.from_key(r.key).is_sequential)
    fitness = next(r.fitness for r in res if r.key == arch.key)
    enc = net.extract(arch).eval()
    correct = count = 0
    with torch.inference_mode():
        for s in range(0, 20, 16):  # the evaluator's chunks (batch_size=16), mask None when unpadded
            ids = dev.input_ids[s:s + 16]
            mask = enc.padding_mask(ids)
            r = mlm_sums(enc, enc(ids, None if bool(mask.all()) else mask), dev.labels[s:s + 16])
            correct, count = correct + int(r["correct"]), count + int(r["count"])
    assert correct / count == fitness


def test_constraints_reject_before_evaluation_and_sharding_keeps_subtrees(supernet_run: Path, prepared_corpus: Path):
    loaded = load_supernet(supernet_run)
    data = PreparedData.open(prepared_corpus)
    dev = fixed_dev_set(data, num_sequences=8, seq_len=32)
    archs = [Arch.sequential("sssss"), Arch.sequential("fffff")]
    limit = min(loaded.supernet.num_params(a) for a in archs)
    ev = SupernetEvaluator(loaded.supernet, dev, fitness="accuracy", constraints=Constraints(max_params=limit))
    r = {x.key: x for x in ev.evaluate_many(archs)}
    big = max(archs, key=loaded.supernet.num_params).key
    assert r[big].fitness is None and "params" in r[big].rejected and ev.stats.slot_runs == 5
    space = loaded.space
    pop = [space.sample(random.Random(i)) for i in range(30)]
    parts = shard_subtrees(pop, 2)
    assert sorted(a.key for p in parts for a in p) == sorted(a.key for a in pop) and all(parts)
    firsts = [{a.ops[0] for a in p} for p in parts]
    assert not firsts[0] & firsts[1]  # split by first slot: whole subtrees per rank


# ----------------------------------------------------------------------------------------
# Engine on a toy fitness with a known optimum
# ----------------------------------------------------------------------------------------


def _toy(space, target):
    return FunctionEvaluator(lambda a: sum(x == y for x, y in zip(a.ops, target.ops)) / space.num_slots,
                             cost=lambda a: (a.ops.count("SA") + 2 * a.ops.count("FF"), 0.0))


@pytest.mark.parametrize("kind,k", [("uniform", None), ("one-point", 1), ("two-point", 2)])
def test_engine_crossover_exchanges_whole_slots_and_children_stay_valid(kind: str, k: int | None):
    """The engine's ``mate`` (DEAP's cx operator for ``crossover_kind``) on the slot list: each
    child slot is one parent's (op, inputs) at that position and the other child holds the other
    parent's, both children are valid elc archs, the parents are untouched (mate works on
    clones), and a k-point cut switches parent at most k times (exactly k in some draw), while
    uniform switches more often than two-point can."""
    space = SearchSpace.load("lvbert-elc").with_num_slots(12)
    search = Search(space, _toy(space, space.sample(random.Random(0))), SearchConfig(crossover_kind=kind))
    breeding = search.strategy.breeding
    tb = breeding.toolbox
    random.seed(5)  # DEAP's operators draw from the global generator
    most = 0
    for seed in range(20):
        a, b = space.sample(random.Random(2 * seed)), space.sample(random.Random(2 * seed + 1))
        pa, pb = breeding.individual(a), breeding.individual(b)
        c1, c2 = tb.mate(tb.clone(pa), tb.clone(pb))
        assert arch_of(pa) == a and arch_of(pb) == b
        space.validate(arch_of(c1)), space.validate(arch_of(c2))
        assert len(c1) == len(c2) == space.num_slots
        for x, y, sa, sb in zip(c1, c2, pa, pb):
            assert (x, y) in ((sa, sb), (sb, sa))
        # which parent child 1 took each slot from, where the parents differ there
        src = [x == sa for x, sa, sb in zip(c1, pa, pb) if sa != sb]
        switches = sum(1 for u, v in zip(src, src[1:]) if u != v)
        if k is not None:
            assert switches <= k
        most = max(most, switches)
    assert most == k if k is not None else most > 2


def test_evolution_beats_random_on_a_toy_fitness_and_topk_never_drops():
    space = SearchSpace.load("lvbert").with_num_slots(14)
    target = space.sample(random.Random(123))
    best = {"evolution": [], "random": []}
    for strategy in best:
        for seed in range(4):
            res = Search(space, _toy(space, target), SearchConfig(strategy=strategy, population=16, iterations=8,
                                                                   topk=4, seed=seed)).run()
            assert len(res.history) == 16 * 8 and len({h["key"] for h in res.history}) == 16 * 8
            curve = [c["best"] for c in res.curve]
            means = [c["topk_mean"] for c in res.curve]
            assert curve == sorted(curve) and means == sorted(means)
            best[strategy].append(res.best.fitness)
    assert sum(best["evolution"]) / 4 > sum(best["random"]) / 4 + 0.1, best
    # constraints: violating children are re-drawn, never kept
    ev = _toy(space, target)
    ev.constraints = Constraints(max_params=12)
    res = Search(space, ev, SearchConfig(population=10, iterations=4, topk=3, seed=1)).run()
    assert len(res.history) == 40 and all(h["params"] <= 12 and h["rejected"] is None for h in res.history)
    ev.constraints = Constraints(max_params=20, min_params=17)  # a size band: both ends hold
    res = Search(space, ev, SearchConfig(population=10, iterations=4, topk=3, seed=1)).run()
    assert len(res.history) == 40 and all(17 <= h["params"] <= 20 for h in res.history)
    assert Constraints(min_params=17).violation(16, None) == "params 16 < min 17"
    # NSGA-II front is non-dominated
    res = Search(space, _toy(space, target), SearchConfig(strategy="nsga2", population=12, iterations=4, seed=0)).run()
    front = [(r.fitness, r.params) for r in res.pareto]
    assert front and all(not (f2 >= f1 and c2 <= c1 and (f2, c2) != (f1, c1)) for f1, c1 in front for f2, c2 in front)


@pytest.mark.parametrize("strategy,kind", [("evolution", "two-point"), ("nsga2", "uniform"), ("aging", "uniform"),
                                           ("random", "one-point")])
def test_resume_after_kill_equals_uninterrupted_toy(tmp_path: Path, strategy: str, kind: str):
    space = SearchSpace.load("lvbert-elc").with_num_slots(6)
    target = space.sample(random.Random(5))
    cfg = SearchConfig(strategy=strategy, population=10, iterations=5, topk=3, seed=7, crossover_kind=kind)
    full = Search(space, _toy(space, target), cfg, out=tmp_path / "full").run()
    Search(space, _toy(space, target), cfg, out=tmp_path / "cut").run(max_iterations=2)
    random.seed(999)  # another random stream in between: the state must restore it
    resumed = Search(space, _toy(space, target), cfg, out=tmp_path / "cut").run(resume=True)
    assert resumed.history == full.history and resumed.curve == full.curve
    assert [r.key for r in resumed.topk] == [r.key for r in full.topk]
    for name in ("state.json", "history.jsonl", "topk.json", "pareto.json"):
        assert (tmp_path / "full" / name).exists() == (strategy == "nsga2" or name != "pareto.json"), name
        if (tmp_path / "full" / name).exists():
            assert (tmp_path / "full" / name).read_bytes() == (tmp_path / "cut" / name).read_bytes(), name


# ----------------------------------------------------------------------------------------
# The real thing: CLI on the tiny supernet
# ----------------------------------------------------------------------------------------


def test_evolve_cli_outputs_resume_and_two_processes(supernet_run: Path, tmp_path: Path, capsys):
    out = tmp_path / "ea"
    code, text = run_cli(capsys, "evolve", "--supernet", str(supernet_run), "--out", str(out), *SMALL, "--compare-random")
    assert code == 0, text
    for name in ("state.json", "history.jsonl", "topk.json", "best.json", "search_curve.png", "random/history.jsonl"):
        assert (out / name).is_file(), name
    hist = history(out)
    assert len(hist) == 24 and len({h["key"] for h in hist}) == 24 and {h["iteration"] for h in hist} == {0, 1, 2}
    assert len(history(out / "random")) == 24
    best = json.loads((out / "best.json").read_text())
    arch = Arch.from_json(out / "best.json")
    assert best["meta"]["fitness"] == max(h["fitness"] for h in hist)
    assert best["meta"]["supernet_step"] == 20 and best["meta"]["params"] > 0 and best["meta"]["flops"] > 0
    assert arch.key == json.loads((out / "topk.json").read_text())["topk"][0]["key"]
    state = json.loads((out / "state.json").read_text())
    curve = [c["best"] for c in state["curve"]]
    assert curve == sorted(curve)

    # resume after a "kill" after iteration 1 gives the same history and best
    cut = tmp_path / "cut"
    opts = EvolveOptions(supernet=supernet_run, out=cut, dev_sequences=24)
    cfg = SearchConfig(population=8, iterations=3, topk=3)
    evolve(opts, cfg, show_progress=False, max_iterations=1)
    assert len(history(cut)) == 8
    code, text = run_cli(capsys, "evolve", "--supernet", str(supernet_run), "--out", str(cut), "--resume",
                         "--dev-sequences", "24")
    assert code == 0, text
    assert history(cut) == hist and (cut / "best.json").read_bytes() == (out / "best.json").read_bytes()

    # two gloo processes give exactly the single-process results
    ddp = tmp_path / "ddp"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", "29817",
           "-m", "lvsearch", "evolve", "--supernet", str(supernet_run), "--out", str(ddp), *SMALL]
    env = {**os.environ, "LVSEARCH_QUIET": "1", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert history(ddp) == hist

    # arch show
    code, text = run_cli(capsys, "arch", "show", str(out / "best.json"), "--supernet", str(supernet_run))
    assert code == 0 and arch.compact in text and "params" in text and "FLOPs" in text
    code, text = run_cli(capsys, "arch", "show", "bert", "--space", "lvbert@5")
    assert code == 0 and "sfsfs" in text


def test_rank_check_small(supernet_run: Path, tmp_path: Path, capsys):
    code, text = run_cli(capsys, "rank-check", "--supernet", str(supernet_run), "--archs", "4", "--steps", "3",
                         "--pool", "8", "--dev-sequences", "16", "--out", str(tmp_path / "rc"))
    assert code == 0, text
    rep = json.loads((tmp_path / "rc" / "rank_check.json").read_text())
    assert rep["num_archs"] == 4 and rep["steps"] == 3
    for k in ("kendall_tau", "spearman_rho"):  # undefined (None) when 3 steps leave every model constant
        assert rep[k] is None or -1 <= rep[k] <= 1
    assert all(0 <= a["standalone_accuracy"] <= 1 for a in rep["archs"]) and (tmp_path / "rc" / "rank_check.png").is_file()
    fits = [a["supernet_fitness"] for a in rep["archs"]]
    assert fits == sorted(fits)  # picked at increasing quantiles
    assert "kendall_tau_ci95" in rep and rep["topk_chance"]["expected"] == pytest.approx(rep["topk"] ** 2 / 4)
    assert set(rep["strata"]) == {"dc_count", "density"}
    # a re-run after an interruption (no rank_check.json yet) keeps the finished standalone runs
    mtimes = {p: p.stat().st_mtime_ns for p in (tmp_path / "rc" / "standalone").rglob("*.safetensors")}
    (tmp_path / "rc" / "rank_check.json").unlink()
    code, text = run_cli(capsys, "rank-check", "--supernet", str(supernet_run), "--archs", "4", "--steps", "3",
                         "--pool", "8", "--dev-sequences", "16", "--out", str(tmp_path / "rc"))
    assert code == 0, text
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "rc" / "standalone").rglob("*.safetensors")} == mtimes
    again = json.loads((tmp_path / "rc" / "rank_check.json").read_text())
    assert again["archs"] == rep["archs"]
    # the standalone runs as submitit local jobs, 2 at a time: the same results, byte for byte
    code, text = run_cli(capsys, "rank-check", "--supernet", str(supernet_run), "--archs", "4", "--steps", "3",
                         "--pool", "8", "--dev-sequences", "16", "--out", str(tmp_path / "rc-local"),
                         "--executor", "local", "--max-parallel", "2")
    assert code == 0, text
    assert json.loads((tmp_path / "rc-local" / "rank_check.json").read_text())["archs"] == rep["archs"]

    def weights(rc: Path) -> dict:
        return {str(p.relative_to(rc)): hashlib.sha256(p.read_bytes()).hexdigest()
                for p in sorted((rc / "standalone").rglob("*.safetensors"))}

    assert weights(tmp_path / "rc-local") == weights(tmp_path / "rc") and weights(tmp_path / "rc")
    assert len(list((tmp_path / "rc-local" / "dispatch").glob("*_log.err"))) == 4
    # --reuse scores the same architectures on a supernet (here the same one, at its kept step)
    code, text = run_cli(capsys, "rank-check", "--supernet", str(supernet_run), "--reuse",
                         str(tmp_path / "rc" / "rank_check.json"), "--step", str(rep["supernet_step"]),
                         "--dev-sequences", "16", "--out", str(tmp_path / "rc2"))
    assert code == 0, text
    re = json.loads((tmp_path / "rc2" / "rank_check.json").read_text())
    assert [a["key"] for a in re["archs"]] == [a["key"] for a in rep["archs"]]
    assert re["archs"] == rep["archs"] and re["kendall_tau"] == rep["kendall_tau"]
    assert not (tmp_path / "rc2" / "standalone").exists()
    code, text = run_cli(capsys, "rank-check", "--supernet", str(supernet_run), "--reuse",
                         str(tmp_path / "rc" / "rank_check.json"), "--step", "3", "--out", str(tmp_path / "rc3"))
    assert code == 2 and "no checkpoint of step 3" in text


# ----------------------------------------------------------------------------------------
# Bad input
# ----------------------------------------------------------------------------------------


def test_bad_inputs(supernet_run: Path, tmp_path: Path, capsys):
    sn = str(supernet_run)

    def bad(*argv: str, match: str) -> None:
        code, text = run_cli(capsys, "evolve", *argv)
        assert code == 2 and match in text and "Traceback" not in text, text

    empty = tmp_path / "nockpt"
    empty.mkdir()
    shutil.copy(supernet_run / "config.json", empty / "config.json")
    bad("--supernet", str(empty), "--out", str(tmp_path / "o1"), match="has no checkpoint")
    bad("--supernet", sn, "--out", str(tmp_path / "o2"), "--space", "lvbert-elc", match="does not match supernet")
    bad("--supernet", sn, "--out", str(tmp_path / "o3"), "--population", "1", match="--population must be ≥ 2")
    bad("--supernet", sn, "--out", str(tmp_path / "o4"), "--population", "4", "--topk", "5", match="--topk 5 must be")
    bad("--supernet", sn, "--out", str(tmp_path / "o5"), "--population", "4", "--topk", "2", "--crossover", "3",
        "--mutation", "3",
        match="--crossover 3 and --mutation 3 do not fit --population 4")
    bad("--supernet", sn, "--out", str(tmp_path / "o6"), "--resume", match="holds no search")
    other = tmp_path / "other_tok"
    shutil.copytree(supernet_run, other)
    cfg = json.loads((other / "config.json").read_text())
    cfg["data"]["tokenizer_sha256"] = "0" * 64
    (other / "config.json").write_text(json.dumps(cfg))
    bad("--supernet", str(other), "--out", str(tmp_path / "o7"), match="prepared with another tokenizer")

    out = tmp_path / "s"
    # A bare family name matches the supernet's shrunk space (NAME@N).
    assert main(["evolve", "--supernet", sn, "--out", str(out), "--population", "4", "--iterations", "1",
                 "--topk", "2", "--dev-sequences", "8", "--space", "lvbert"]) == 0
    capsys.readouterr()
    bad("--supernet", sn, "--out", str(out), "--population", "4", "--iterations", "1", "--topk", "2",
        match="already holds a search")
    bad("--supernet", sn, "--out", str(out), "--resume", "--population", "6", "--dev-sequences", "8",
        match="different search settings")
    state = out / "state.json"
    good = state.read_bytes()
    state.write_bytes(good[: len(good) // 2])
    bad("--supernet", sn, "--out", str(out), "--resume", match="not valid JSON")
    assert state.read_bytes() == good[: len(good) // 2]  # nothing overwritten
    state.write_text(json.dumps({"format": "lvsearch.search-state/v1", "config": {"population": 4, "topk": 2,
                                                                               "iterations": 1}}))
    bad("--supernet", sn, "--out", str(out), "--resume", "--dev-sequences", "8", match="corrupted")
    state.write_bytes(good)
    code, text = run_cli(capsys, "evolve", "--supernet", sn, "--out", str(out), "--resume", "--iterations", "2",
                         "--dev-sequences", "8")
    assert code == 0, text  # iterations may grow on resume
    assert len(history(out)) == 8
    assert Arch.from_key(history(out)[-1]["key"]).num_slots == 5
